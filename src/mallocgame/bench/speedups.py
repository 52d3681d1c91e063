"""The speedup table (the paper's Table 3): simulated speedup of each solver over a baseline.

For every program, a solver's speedup over the baseline solver (``heuristic`` by
default) is ``latency(baseline) / latency(solver)`` from the simulator, averaged
over the seeds of each. Per solver: mean, max and min over programs, and how many
programs it improved (speedup > 1), and the mean gap to the optimum's upper bound:
``1 - reward / bound`` where ``bound`` is the tightest upper bound on the program's
reward any record carries (``upper_bound_s``, the LP of ``solvers/bound.py``, written
into every record by the sweep; ``bound_s``, a bound an exact solver proved).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from mallocgame.bench.markdown import markdown_table

__all__ = ["SpeedupRow", "tightest_bounds", "speedup_table", "format_table", "format_program_table",
           "candidate_records", "program_speedups", "format_extremes"]


@dataclass(frozen=True)
class SpeedupRow:
    """One solver's line of the table."""

    solver: str
    programs: int
    mean: float
    max: float
    min: float
    improved: int
    mean_normalized_reward: float
    bound_gap: float | None  # mean of 1 - reward / (tightest bound) over records of bounded programs


def _mean_by_program(records: list[dict[str, Any]], key: str) -> dict[tuple[str, str], float]:
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        if r.get("valid") and r.get(key) is not None:
            values[(r["program"], r["solver"])].append(float(r[key]))
    return {k: statistics.fmean(v) for k, v in values.items()}


def tightest_bounds(records: list[dict[str, Any]]) -> dict[str, float]:
    """Per program, the smallest upper bound on the reward (seconds) any record carries."""
    bounds: dict[str, float] = {}
    for r in records:
        for key in ("upper_bound_s", "bound_s"):
            value = r.get(key)
            if value is not None and value > 0:
                bounds[r["program"]] = min(bounds.get(r["program"], value), float(value))
    return bounds


def speedup_table(records: list[dict[str, Any]], baseline: str = "heuristic") -> list[SpeedupRow]:
    """Rows for every solver with results on programs the baseline also solved."""
    latency = _mean_by_program(records, "latency_s")
    reward = _mean_by_program(records, "normalized_reward")
    bounds = tightest_bounds(records)
    gaps: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if r.get("valid") and bounds.get(r["program"]):
            gaps[r["solver"]].append(1.0 - r["reward_s"] / bounds[r["program"]])
    solvers = sorted({s for (_, s) in latency})
    rows = []
    for solver in solvers:
        speedups, rewards = [], []
        for (program, s), value in latency.items():
            if s == solver and (program, baseline) in latency:
                speedups.append(latency[(program, baseline)] / value)
                rewards.append(reward[(program, s)])
        if not speedups:
            continue
        rows.append(
            SpeedupRow(
                solver=solver,
                programs=len(speedups),
                mean=statistics.fmean(speedups),
                max=max(speedups),
                min=min(speedups),
                improved=sum(1 for x in speedups if x > 1.0),
                mean_normalized_reward=statistics.fmean(rewards),
                bound_gap=statistics.fmean(gaps[solver]) if gaps[solver] else None,
            )
        )
    return rows


def format_table(rows: list[SpeedupRow], baseline: str = "heuristic") -> str:
    """A Markdown table of the rows."""
    header = ["solver", "programs", f"mean speedup over {baseline}", "max", "min", "improved",
              "mean normalized reward", "gap to bound"]
    return markdown_table(header, [
        [r.solver, str(r.programs), f"{r.mean:.4f}", f"{r.max:.4f}", f"{r.min:.4f}", f"{r.improved}/{r.programs}",
         f"{r.mean_normalized_reward:.4f}", "—" if r.bound_gap is None else f"{r.bound_gap:.1%}"]
        for r in rows
    ])


def format_program_table(records: list[dict[str, Any]], solvers: list[str]) -> str:
    """A Markdown table: per program, each solver's normalized reward (mean over seeds;
    ``invalid`` where no valid answer) and the tightest bound / R."""
    reward = _mean_by_program(records, "normalized_reward")
    bounds = tightest_bounds(records)
    programs: dict[str, int] = {}
    normalizer: dict[str, float] = {}
    for r in records:
        programs[r["program"]] = int(r.get("buffers") or 0)
        if r.get("normalized_reward"):
            normalizer[r["program"]] = r["reward_s"] / r["normalized_reward"]
    lines = [
        "| program | buffers | " + " | ".join(solvers) + " | bound / R |",
        "| --- | ---: |" + " ---: |" * (len(solvers) + 1),
    ]
    for program in sorted(programs, key=lambda p: (programs[p], p)):
        cells = [f"{reward[(program, s)]:.4f}" if (program, s) in reward else "invalid" for s in solvers]
        bound = bounds.get(program)
        r = normalizer.get(program)
        cells.append(f"{bound / r:.4f}" if bound and r else "—")
        lines.append(f"| {program} | {programs[program]:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def candidate_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A record for each candidate a hybrid's record holds (``best-of``, ``muzero-prod``:
    its solution's ``info["candidates"]``), named ``SOLVER:CANDIDATE`` (e.g.
    ``muzero-prod:muzero``, the agent inside ``muzero-prod``), with the candidate's
    validity, rewards and simulated latency and the record's program, seed and bound."""
    derived = []
    for r in records:
        candidates = ((r.get("solution") or {}).get("info") or {}).get("candidates") or {}
        for name, c in candidates.items():
            derived.append({
                "program": r["program"], "solver": f"{r['solver']}:{name}", "seed": r.get("seed"),
                "buffers": r.get("buffers"), "valid": bool(c.get("valid")), "latency_s": c.get("latency_s"),
                "reward_s": c.get("reward_s"), "normalized_reward": c.get("normalized_reward"),
                "upper_bound_s": r.get("upper_bound_s"),
            })
    return derived


def program_speedups(records: list[dict[str, Any]], solver: str, baseline: str = "heuristic") -> list[tuple[str, float]]:
    """``(program, speedup of solver over baseline)`` for every program both solved
    (means over seeds), largest speedup first."""
    latency = _mean_by_program(records, "latency_s")
    pairs = [(program, latency[(program, baseline)] / value) for (program, s), value in latency.items()
             if s == solver and (program, baseline) in latency]
    return sorted(pairs, key=lambda pair: (-pair[1], pair[0]))


def format_extremes(records: list[dict[str, Any]], solver: str, baseline: str = "heuristic", n: int = 6) -> str:
    """Markdown: the ``n`` programs with the largest and the ``n`` with the smallest
    speedup of ``solver`` over ``baseline`` (the paper's Table 4)."""
    pairs = program_speedups(records, solver, baseline)
    best, worst = pairs[:n], pairs[::-1][:n]
    lines = [f"| {solver}: largest speedup | | smallest speedup | |", "| --- | ---: | --- | ---: |"]
    for i in range(max(len(best), len(worst))):
        left = f"{best[i][0]} | {best[i][1]:.4f}" if i < len(best) else " | "
        right = f"{worst[i][0]} | {worst[i][1]:.4f}" if i < len(worst) else " | "
        lines.append(f"| {left} | {right} |")
    return "\n".join(lines)
