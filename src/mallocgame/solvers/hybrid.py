"""``best-of``: run several solvers and keep the best answer by simulated latency.

The paper's production setup ("-prod") keeps the better of the agent's and the
heuristic's mappings by measured latency; here the latency simulator stands in for
the measurement. Every candidate is checked before it is simulated; an invalid
candidate is never chosen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mallocgame.check import check_solution
from mallocgame.errors import MallocGameError, SolverError
from mallocgame.instance import Instance
from mallocgame.options import check_ranges, setting
from mallocgame.simulate import SimulationError, simulate, unroll
from mallocgame.solution import Solution
from mallocgame.solvers.base import Run, Solver
from mallocgame.solvers.registry import get_solver, solver_names

__all__ = [
    "BestOfSolver",
    "BestOfConfig",
    "DEFAULT_CANDIDATES",
    "Candidate",
    "Choice",
    "Judged",
    "judge",
    "fastest",
    "choose_fastest",
]

DEFAULT_CANDIDATES = ("heuristic", "random")


@dataclass(frozen=True)
class BestOfConfig:
    """The settings of ``best-of``."""

    solvers: tuple[str, ...] = setting(
        DEFAULT_CANDIDATES, "the candidate solvers, each run with its defaults", length=(1, 32)
    )

    def __post_init__(self) -> None:
        check_ranges(self)
        unknown = [name for name in self.solvers if name not in solver_names()]
        if unknown:
            raise ValueError(
                f"option solvers: unknown solver {unknown[0]!r} (valid: {', '.join(solver_names())})"
            )
        twice = sorted({name for name in self.solvers if self.solvers.count(name) > 1})
        if twice:  # each candidate is named by its solver in the answer's info
            raise ValueError(f"option solvers: {twice[0]!r} is given twice")


@dataclass(frozen=True)
class Candidate:
    """One candidate answer as :func:`choose_fastest` judged it."""

    solver: str
    reward_s: float
    normalized_reward: float
    latency_s: float  # simulated (mallocgame.simulate), seconds; inf if invalid
    valid: bool  # passed mallocgame.check

    def to_json(self) -> dict[str, float | bool | None]:
        """JSON values; an invalid candidate's latency is ``None``."""
        return {
            "reward_s": self.reward_s,
            "normalized_reward": self.normalized_reward,
            "latency_s": self.latency_s if self.valid else None,
            "valid": self.valid,
        }


@dataclass(frozen=True)
class Choice:
    """The candidate with the lowest simulated latency, and how every candidate fared."""

    solution: Solution
    latency_s: float  # the chosen solution's simulated latency, seconds
    candidates: tuple[Candidate, ...]  # in the order given

    def info(self) -> dict[str, Any]:
        """The chosen solution's ``info`` with ``chosen``, ``latency_s`` and ``candidates``
        (each candidate's reward, normalized reward, latency and validity by solver name)."""
        return {
            **self.solution.info,
            "chosen": self.solution.solver,
            "latency_s": self.latency_s,
            "candidates": {c.solver: c.to_json() for c in self.candidates},
        }


@dataclass(frozen=True)
class Judged:
    """A solution and how :func:`judge` found it."""

    solution: Solution
    candidate: Candidate


def judge(instance: Instance, solution: Solution) -> Judged:
    """``solution`` checked (:func:`~mallocgame.check.check_solution`) and, if valid,
    simulated: one candidate of :func:`fastest`, judged as soon as it exists (so a
    solver that budgets its time counts the check where it happens)."""
    valid = check_solution(instance, solution).ok
    latency = simulate(instance, solution).latency_s if valid else float("inf")
    return Judged(
        solution,
        Candidate(solution.solver, solution.reward_s, solution.normalized_reward, latency, valid),
    )


def fastest(judged: Sequence[Judged]) -> Choice:
    """The valid solution of ``judged`` with the lowest simulated latency; on a tie the
    earlier one. An invalid one is never chosen, and :class:`SolverError` says so when
    none is valid."""
    valid = [j for j in judged if j.candidate.valid]
    if not valid:
        raise SolverError(
            f"no candidate of {[j.solution.solver for j in judged]} produced a valid solution"
        )
    best = min(valid, key=lambda j: j.candidate.latency_s)  # min keeps the first of a tie
    return Choice(best.solution, best.candidate.latency_s, tuple(j.candidate for j in judged))


def choose_fastest(instance: Instance, solutions: Sequence[Solution]) -> Choice:
    """:func:`fastest` of ``solutions``, each judged here (:func:`judge`)."""
    return fastest([judge(instance, solution) for solution in solutions])


MIN_SHARE_S = 1e-3
"""The least wall-clock share a ``best-of`` candidate is given (seconds), where the
candidates before it have spent the budget: it then answers with what it has at once."""


class BestOfSolver(Solver, name="best-of", work_unit="per candidate", config=BestOfConfig):
    """Runs the ``solvers`` of its config and keeps the fastest valid answer.

    A wall-clock budget is split between the candidates as they run: each has what is
    left split evenly between it and those after it (at least ``MIN_SHARE_S``), so a
    candidate that finishes early leaves its time to the others and one that overruns
    takes it from them; each is judged (checked and simulated) as soon as it returns,
    inside the budget, and the shares keep back as long for each judging still to come
    as the judgings so far took; a work budget is passed to each. The answer's ``work``
    holds ``candidates`` (how many ran, refusals included) and each candidate's own
    counters as ``NAME.KEY``; the request's ``progress`` hears ``{"candidates": n}`` as
    each ends (the candidates' own counts, in their own units, are not passed on). A
    program the simulator cannot judge (loops that overlap without nesting, too many
    executions unrolled) is refused with a :class:`SolverError` before any candidate runs. ``info`` is
    :meth:`Choice.info`: ``candidates`` records every candidate's reward, simulated
    latency and validity, ``chosen`` the winner. A candidate that refuses (raises a
    :class:`~mallocgame.errors.MallocGameError`, as ``exhaustive`` does on a program
    too large for it) is skipped, its reason kept in ``info["refused"]`` by name; only
    when every candidate refuses is it a :class:`SolverError`.
    """

    def settings(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Each candidate's settings (a candidate runs with its defaults), by name."""
        return {
            "solvers": {
                name: get_solver(name).settings({}) for name in self.config(options).solvers
            }
        }

    def search(self, instance: Instance, config: BestOfConfig, run: Run) -> Solution:
        try:  # what the judge needs, checked before any candidate spends the budget
            unroll(instance)
        except SimulationError as exc:
            raise SolverError(f"best-of: the simulator cannot judge this program: {exc}") from None
        names = config.solvers
        seconds = run.request.seconds
        judged: list[Judged] = []
        refused: dict[str, str] = {}
        judging_s = 0.0  # what judging the candidates so far took, seconds
        work: dict[str, int | float] = {"candidates": 0}
        for i, name in enumerate(names):
            share = None
            left = len(names) - i
            if seconds is not None:  # what is left, less the judging still to come (as long
                # as each judging so far), split evenly between those left to run
                judge_s = judging_s / len(judged) if judged else 0.0
                share = max(MIN_SHARE_S, (seconds - run.clock.elapsed - left * judge_s) / left)
            request = replace(run.request, seconds=share, callback=None, progress=None, options={})
            try:
                solution = get_solver(name).solve(instance, request)
            except MallocGameError as exc:
                refused[name] = str(exc)
            else:
                work.update({f"{name}.{k}": v for k, v in solution.work.items()})
                started = run.clock.elapsed
                judged.append(judge(instance, solution))  # where it happens, inside the budget
                judging_s += run.clock.elapsed - started
            work["candidates"] = i + 1
            if run.request.progress is not None:
                run.request.progress({"candidates": i + 1})
        if not judged:
            reasons = "; ".join(f"{name}: {reason}" for name, reason in refused.items())
            raise SolverError(f"best-of: every candidate refused ({reasons})")
        choice = fastest(judged)
        info = {**choice.info(), **({"refused": refused} if refused else {})}
        answer = replace(choice.solution, solver=self.name, info=info, work=work)
        run.improve(answer)
        return answer
