"""The speedup table (the paper's Table 3): simulated speedup of each solver over a baseline.

For every program, a solver's speedup over the baseline solver (``heuristic`` by
default) is ``latency(baseline) / latency(solver)`` from the simulator, averaged
over the seeds of each. Per solver: mean, max and min over programs, and how many
programs it improved (speedup > 1), and the mean gap to the optimum's upper bound:
``1 - reward / bound`` where ``bound`` is the tightest upper bound on the program's
reward any record carries (``upper_bound_s``, the LP of ``solvers/bound.py``, written
into every record by the sweep; ``bound_s``, a bound an exact solver proved).
:func:`program_results` and :func:`write_program_csv` give the same per program and
solver, one CSV row each; :func:`complete_programs` keeps the programs with a record of
every solver at every seed (the table of a sweep still under way).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mallocgame.bench.markdown import markdown_table
from mallocgame.bench.recheck import checked_candidates
from mallocgame.bench.sweep import Job
from mallocgame.fileio import write_csv_atomic

__all__ = [
    "SpeedupRow",
    "ProgramResult",
    "speedup_table",
    "format_table",
    "format_program_table",
    "ONE_ANSWER",
    "candidate_records",
    "program_speedups",
    "format_extremes",
    "complete_programs",
    "program_results",
    "write_program_csv",
]


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
    bound_gap: (
        float | None
    )  # mean over the row's bounded programs of 1 - reward / (tightest bound), seeds averaged


def _mean_by_program(records: list[dict[str, Any]], key: str) -> dict[tuple[str, str], float]:
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        if r.get("valid") and r.get(key) is not None:
            values[(r["program"], r["solver"])].append(float(r[key]))
    return {k: statistics.fmean(v) for k, v in values.items()}


def tightest_bounds(records: list[dict[str, Any]]) -> dict[str, float]:
    """Per program, the smallest upper bound on the reward (seconds) any record carries,
    raised to the best valid reward among them: a solver's ``bound_s`` may bound only the
    answers of its own model (``exhaustive``'s, the game's; ``exact``'s, its CP model's),
    which another solver's valid mapping can beat; a gap to it is then never negative."""
    bounds: dict[str, float] = {}
    best: dict[str, float] = {}
    for r in records:
        for key in ("upper_bound_s", "bound_s"):
            value = r.get(key)
            if value is not None and value > 0:
                bounds[r["program"]] = min(bounds.get(r["program"], value), float(value))
        if r.get("valid") and r.get("reward_s") is not None:
            best[r["program"]] = max(best.get(r["program"], float(r["reward_s"])), r["reward_s"])
    return {p: max(bound, best.get(p, bound)) for p, bound in bounds.items()}


def speedup_table(records: list[dict[str, Any]], baseline: str = "heuristic") -> list[SpeedupRow]:
    """Rows for every solver with results on programs the baseline also solved."""
    latency = _mean_by_program(records, "latency_s")
    reward = _mean_by_program(records, "normalized_reward")
    bounds = tightest_bounds(records)
    cell_gaps: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        if r.get("valid") and bounds.get(r["program"]):
            cell_gaps[(r["program"], r["solver"])].append(
                1.0 - r["reward_s"] / bounds[r["program"]]
            )
    solvers = sorted({s for (_, s) in latency})
    rows = []
    for solver in solvers:
        speedups, rewards, gaps = [], [], []  # over the same programs, each once
        for (program, s), value in latency.items():
            if s == solver and (program, baseline) in latency:
                speedups.append(latency[(program, baseline)] / value)
                rewards.append(reward[(program, s)])
                if cell_gaps[(program, s)]:
                    gaps.append(statistics.fmean(cell_gaps[(program, s)]))
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
                bound_gap=statistics.fmean(gaps) if gaps else None,
            )
        )
    return rows


def format_table(rows: list[SpeedupRow], baseline: str = "heuristic") -> str:
    """A Markdown table of the rows."""
    header = [
        "solver",
        "programs",
        f"mean speedup over {baseline}",
        "max",
        "min",
        "improved",
        "mean normalized reward",
        "gap to bound",
    ]
    return markdown_table(
        header,
        [
            [
                r.solver,
                str(r.programs),
                f"{r.mean:.4f}",
                f"{r.max:.4f}",
                f"{r.min:.4f}",
                f"{r.improved}/{r.programs}",
                f"{r.mean_normalized_reward:.4f}",
                "—" if r.bound_gap is None else f"{r.bound_gap:.1%}",
            ]
            for r in rows
        ],
    )


def format_program_table(records: list[dict[str, Any]], solvers: list[str]) -> str:
    """A Markdown table: per program, each solver's normalized reward (mean over seeds;
    ``invalid`` where its answers are all invalid, ``—`` where it has none, as a hybrid's
    candidate that did not answer) and the tightest bound / R."""
    reward = _mean_by_program(records, "normalized_reward")
    answered = {(r["program"], r["solver"]) for r in records}
    bounds = tightest_bounds(records)
    programs: dict[str, int] = {}
    normalizer: dict[str, float] = {}
    for r in records:
        programs[r["program"]] = int(r.get("buffers") or 0)
        if r.get("valid") and r.get("normalized_reward"):
            normalizer[r["program"]] = r["reward_s"] / r["normalized_reward"]
    lines = [
        "| program | buffers | " + " | ".join(solvers) + " | bound / R |",
        "| --- | ---: |" + " ---: |" * (len(solvers) + 1),
    ]
    for program in sorted(programs, key=lambda p: (programs[p], p)):
        cells = [
            f"{reward[(program, s)]:.4f}"
            if (program, s) in reward
            else ("invalid" if (program, s) in answered else "—")
            for s in solvers
        ]
        bound = bounds.get(program)
        reward_scale = normalizer.get(program)  # R: reward_s over normalized reward
        cells.append(f"{bound / reward_scale:.4f}" if bound and reward_scale else "—")
        lines.append(f"| {program} | {programs[program]:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


ONE_ANSWER = ("heuristic", "xla")
"""Solvers with one answer per program (one pass: neither the seed nor the budget
changes it): a hybrid's candidate of one of them is that solver's own answer."""


def candidate_records(
    records: list[dict[str, Any]], baseline: str | None = None
) -> list[dict[str, Any]]:
    """A record for each candidate a hybrid's re-checked record holds (``best-of``,
    ``muzero-prod``: its solution's ``info["candidates"]``), named ``SOLVER:CANDIDATE``
    (e.g. ``muzero-prod:muzero``, the agent inside ``muzero-prod``), with the candidate's
    validity, rewards and simulated latency as
    :func:`~mallocgame.bench.recheck.checked_candidates` gives them (the chosen one's
    recomputed from the record's solution) and the record's program, seed and bound.
    A candidate that is the ``baseline``'s own answer (the baseline is one of
    :data:`ONE_ANSWER` and the candidate is it: ``muzero-prod:heuristic`` under
    ``heuristic``) is left out; any other candidate of the baseline's name
    (``muzero-prod:muzero`` under ``muzero``: another run) is kept."""
    derived = []
    for r in records:
        for name, c in checked_candidates(r).items():
            if name == baseline and baseline in ONE_ANSWER:
                continue
            derived.append(
                {
                    "program": r["program"],
                    "solver": f"{r['solver']}:{name}",
                    "seed": r.get("seed"),
                    "buffers": r.get("buffers"),
                    "valid": c["valid"],
                    "failures": c["failures"],
                    "latency_s": c["latency_s"],
                    "reward_s": c["reward_s"],
                    "normalized_reward": c["normalized_reward"],
                    "upper_bound_s": r.get("upper_bound_s"),
                }
            )
    return derived


def program_speedups(
    records: list[dict[str, Any]], solver: str, baseline: str = "heuristic"
) -> list[tuple[str, float]]:
    """``(program, speedup of solver over baseline)`` for every program both solved
    (means over seeds), largest speedup first."""
    latency = _mean_by_program(records, "latency_s")
    pairs = [
        (program, latency[(program, baseline)] / value)
        for (program, s), value in latency.items()
        if s == solver and (program, baseline) in latency
    ]
    return sorted(pairs, key=lambda pair: (-pair[1], pair[0]))


def format_extremes(
    records: list[dict[str, Any]], solver: str, baseline: str = "heuristic", n: int = 6
) -> str:
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


def complete_programs(records: list[dict[str, Any]], jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """The records of the programs that have a record (valid or not) of every one of their
    ``jobs`` (each solver at each seed); the other programs' records are left out, so that
    every solver's mean is over the same programs and seeds."""
    wanted: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for job in jobs:
        wanted[job.program].add((job.solver, job.seed))
    have: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for r in records:
        have[r["program"]].add((r["solver"], r["seed"]))
    return [r for r in records if have[r["program"]] >= wanted[r["program"]]]


@dataclass(frozen=True)
class ProgramResult:
    """One solver on one program, means over its valid records' seeds (a row of the CSV)."""

    program: str
    buffers: int
    solver: str
    seeds: int  # valid records averaged
    normalized_reward: float
    latency_s: float  # simulated, seconds
    speedup: (
        float | None
    )  # latency(baseline) / latency_s; None where the baseline has no valid record
    chosen: (
        str  # a hybrid's chosen candidate, per seed in seed order, ";"-joined; "" for other solvers
    )
    games: float | None  # mean of the records' work["games"] (a learning agent's self-play games)
    wall_s: float | None  # mean wall-clock seconds of the records' runs


def program_results(
    records: list[dict[str, Any]], baseline: str = "heuristic"
) -> list[ProgramResult]:
    """Per program (smallest first) and solver (by name), the means over the valid
    records; a solver with no valid record of a program has no row for it."""
    valid: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r.get("valid") and r.get("latency_s") is not None:
            valid[(r["program"], r["solver"])].append(r)
    latency = _mean_by_program(records, "latency_s")
    reward = _mean_by_program(records, "normalized_reward")

    def mean_of(rs: list[dict[str, Any]], value: Callable[[dict[str, Any]], Any]) -> float | None:
        values = [v for v in (value(r) for r in rs) if v is not None]
        return statistics.fmean(values) if values else None

    rows = []
    for (program, solver), rs in valid.items():
        rs = sorted(rs, key=lambda r: r.get("seed") or 0)
        base = latency.get((program, baseline))
        rows.append(
            ProgramResult(
                program=program,
                buffers=int(rs[0].get("buffers") or 0),
                solver=solver,
                seeds=len(rs),
                normalized_reward=reward[(program, solver)],
                latency_s=latency[(program, solver)],
                speedup=None if base is None else base / latency[(program, solver)],
                chosen=_per_seed(
                    str(((r.get("solution") or {}).get("info") or {}).get("chosen", "")) for r in rs
                ),
                games=mean_of(rs, lambda r: (r.get("work") or {}).get("games")),
                wall_s=mean_of(rs, lambda r: r.get("wall_s")),
            )
        )
    return sorted(rows, key=lambda row: (row.buffers, row.program, row.solver))


def _per_seed(values: Iterable[str]) -> str:
    """``values`` ";"-joined in seed order, or "" where every one is empty."""
    values = list(values)
    return ";".join(values) if any(values) else ""


def write_program_csv(
    path: str | Path, rows: Sequence[ProgramResult], baseline: str = "heuristic"
) -> None:
    """Atomically write ``rows`` as CSV, one line each (empty cells for ``None``)."""

    def cell(value: Any, fmt: str) -> str:
        return "" if value is None else format(value, fmt)

    header = [
        "program",
        "buffers",
        "solver",
        "seeds",
        "normalized_reward",
        "latency_s",
        f"speedup_over_{baseline}",
        "chosen",
        "games",
        "wall_s",
    ]
    write_csv_atomic(
        path,
        header,
        [
            [
                r.program,
                r.buffers,
                r.solver,
                r.seeds,
                f"{r.normalized_reward:.6f}",
                f"{r.latency_s:.9g}",
                cell(r.speedup, ".6f"),
                r.chosen,
                cell(r.games, "g"),
                cell(r.wall_s, ".1f"),
            ]
            for r in rows
        ],
    )
