"""A sweep record's numbers, recomputed from the solution it keeps.

The tables of ``bench speedups`` and ``bench versus`` are made from sweep records
(:mod:`mallocgame.bench.sweep`), files anyone can edit; a record's stored numbers are
not trusted. :class:`Rechecker` loads the program a record names, checks the record's
solution against it (:func:`mallocgame.check.check_solution`), simulates it
(:func:`mallocgame.simulate.simulate`) and returns the record with every number a table
reads replaced by the recomputed one:

- ``valid`` and ``failures``: the check's; a record whose solution fails it, that keeps
  no solution, or whose program cannot be loaded comes back with ``valid`` false, one
  line in ``failures`` naming the record's file and the reason, and no ``latency_s``
  or ``bound_s`` (``None``; nor the program's numbers below if it cannot be loaded);
- ``reward_s``, ``normalized_reward``, ``bound_s`` (a proven bound the solution claims,
  kept only if finite and at least its reward) and ``work``: the checked solution's;
- ``latency_s`` and ``baseline_latency_s`` (seconds): simulated (``latency_s`` is
  ``None`` for an invalid record);
- ``upper_bound_s`` (the LP bound, :func:`mallocgame.solvers.bound.upper_bound`, seconds)
  and ``buffers``: the program's.

A hybrid's record (``best-of``, ``muzero-prod``) also lists its candidates in its
solution's ``info["candidates"]``; :func:`checked_candidates` gives them, the chosen one
with the recomputed numbers and the others only where their stored numbers are ones
a run can write (valid with a finite latency no lower than the chosen one's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeGuard

from mallocgame.errors import MallocGameError
from mallocgame.instance import Instance

__all__ = ["Rechecker", "checked_candidates"]

SLACK = 1e-9
"""Relative rounding allowed between a stored number and its recomputation."""


class Rechecker:
    """Re-checks records; each program is loaded, and its LP bound and all-slow latency
    computed, once per :class:`Rechecker`."""

    def __init__(self) -> None:
        self._instances: dict[str, Instance | MallocGameError] = {}
        # instance sha256 -> (its LP bound, its all-slow latency), seconds
        self._program_numbers: dict[str, tuple[float, float]] = {}

    def _instance(self, program: str) -> Instance:
        from mallocgame.workloads.registry import load_workload

        if program not in self._instances:
            try:
                self._instances[program] = load_workload(program)
            except MallocGameError as exc:
                self._instances[program] = exc
        found = self._instances[program]
        if isinstance(found, MallocGameError):
            raise found
        return found

    def _numbers(self, inst: Instance) -> tuple[float, float]:
        from mallocgame.simulate import baseline_latency
        from mallocgame.solvers.bound import upper_bound

        if inst.sha256 not in self._program_numbers:
            numbers = (float(upper_bound(inst)), float(baseline_latency(inst)))
            self._program_numbers[inst.sha256] = numbers
        return self._program_numbers[inst.sha256]

    def record(self, path: Path | str, doc: Mapping[str, Any]) -> dict[str, Any]:
        """``doc`` (the record read from ``path``) with its numbers recomputed from its
        solution (module docstring); never raises for a record's content."""
        from mallocgame.check import check_solution
        from mallocgame.simulate import simulate
        from mallocgame.solution import solution_from_dict

        record = dict(doc)
        record.update(upper_bound_s=None, baseline_latency_s=None, buffers=None)  # until recomputed

        def invalid(why: str) -> dict[str, Any]:
            record.update(valid=False, failures=f"{path}: {why}", latency_s=None, bound_s=None)
            return record

        program = doc.get("program")
        if not isinstance(program, str):
            return invalid("names no program")
        if not isinstance(doc.get("solution"), Mapping):
            return invalid("keeps no solution to re-check")
        try:
            inst = self._instance(program)
        except MallocGameError as exc:
            return invalid(f"cannot load its program to re-check it: {_one_line(str(exc))}")
        try:
            solution = solution_from_dict(doc["solution"], where=f"{path}: solution")
        except MallocGameError as exc:
            return invalid(f"its solution cannot be read: {_one_line(str(exc))}")
        for key in ("solver", "seed"):  # the cell it stands for is the one its answer is of
            if doc.get(key) != getattr(solution, key):
                return invalid(
                    f"its {key} {doc.get(key)!r} is not its solution's ({getattr(solution, key)!r})"
                )
        bound_lp, slow = self._numbers(inst)
        record.update(
            buffers=inst.num_buffers,
            upper_bound_s=bound_lp,
            baseline_latency_s=slow,
            reward_s=solution.reward_s,
            normalized_reward=solution.normalized_reward,
            bound_s=_proven_bound(solution.bound_s, solution.reward_s),
            work=dict(solution.work),
        )
        report = check_solution(inst, solution)
        if not report.ok:
            first = report.failures[0]
            more = len(report.failures) - 1
            return invalid(
                f"its solution fails check: {first.kind}: {_one_line(first.message)}"
                + (f" (and {more} more)" if more else "")
            )
        try:
            latency = float(simulate(inst, solution).latency_s)
        except (MallocGameError, ValueError) as exc:
            return invalid(f"its solution cannot be simulated: {_one_line(str(exc))}")
        if not math.isfinite(latency) or latency <= 0:
            return invalid(f"its solution simulates to latency {latency!r} s")
        record.update(valid=True, failures="", latency_s=latency)
        return record


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _proven_bound(bound_s: float | None, reward_s: float) -> float | None:
    """A bound the solution claims, if it can be one: finite and at least its reward."""
    if bound_s is None or not math.isfinite(bound_s) or bound_s < reward_s - SLACK * abs(reward_s):
        return None
    return float(bound_s)


def checked_candidates(record: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The candidates of a re-checked hybrid record (:meth:`Rechecker.record`) by name:
    each ``{"valid", "latency_s", "reward_s", "normalized_reward", "failures"}``. The
    chosen one (``info["chosen"]``) is the record's recomputed numbers; another keeps its
    stored numbers where they are ones a run writes (valid: a finite latency above 0 no
    lower than the chosen one's, which was the fastest; finite rewards) and is invalid,
    with ``failures`` saying why, where they are not, or where the record is invalid.
    Where ``info["chosen"]`` names none of them (is not one's name, or is no string),
    every candidate is invalid."""
    solution = record.get("solution")
    info = solution.get("info") if isinstance(solution, Mapping) else None
    if not isinstance(info, Mapping) or not isinstance(info.get("candidates"), Mapping):
        return {}
    candidates = info["candidates"]
    chosen = info.get("chosen")
    if not isinstance(chosen, str):  # no candidate's name (a list or an object would not hash)
        chosen = None
    source = record.get("failures") or "the record"
    out: dict[str, dict[str, Any]] = {}
    for name, stored in candidates.items():
        if not record.get("valid"):
            out[name] = _invalid_candidate(f"{source}")
        elif name == chosen:
            out[name] = {
                "valid": True,
                "latency_s": record["latency_s"],
                "reward_s": record.get("reward_s"),
                "normalized_reward": record.get("normalized_reward"),
                "failures": "",
            }
        else:
            out[name] = _stored_candidate(name, stored, float(record["latency_s"]))
    if record.get("valid") and chosen not in out:
        return {
            name: _invalid_candidate(f"names no chosen candidate among {sorted(candidates)}")
            for name in out
        }
    return out


def _invalid_candidate(why: str) -> dict[str, Any]:
    return {
        "valid": False,
        "latency_s": None,
        "reward_s": None,
        "normalized_reward": None,
        "failures": why,
    }


def _real(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _stored_candidate(name: str, stored: Any, chosen_latency_s: float) -> dict[str, Any]:
    """A candidate the record keeps no solution of: its stored numbers, if plausible."""
    if not isinstance(stored, Mapping) or not isinstance(stored.get("valid"), bool):
        return _invalid_candidate(f"candidate {name}: no validity stored")
    if not stored["valid"]:
        return _invalid_candidate(f"candidate {name}: invalid")
    latency, reward, normalized = (
        stored.get(k) for k in ("latency_s", "reward_s", "normalized_reward")
    )
    if not (_real(latency) and _real(reward) and _real(normalized)) or latency <= 0:
        return _invalid_candidate(
            f"candidate {name}: stored numbers {latency!r}, {reward!r}, "
            f"{normalized!r} are not a latency above 0 and finite rewards"
        )
    if latency < chosen_latency_s * (1.0 - SLACK):
        return _invalid_candidate(
            f"candidate {name}: stored latency {latency!r} s is below the "
            f"chosen one's {chosen_latency_s!r} s, which was the fastest"
        )
    return {
        "valid": True,
        "latency_s": float(latency),
        "reward_s": float(reward),
        "normalized_reward": float(normalized),
        "failures": "",
    }
