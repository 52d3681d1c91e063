"""The suite table: each bundled program's size and how hard it is (``mallocgame bench suite``).

Per program: the model it comes from, instructions, buffers, alias groups (of more
than one buffer), loops, peak live bytes, fast memory, the share of buffers whose
aligned size exceeds the fast memory (they can never be fast), and the normalized
reward of

- ``random``: the best of ``random_games`` games (seed 0);
- ``greedy``: one game of Copy, else NoCopy, else Drop;
- ``heuristic``: XLA's memory-space-assignment-like heuristic;
- ``exact``: CP-SAT for ``exact_seconds`` of wall-clock time (``None`` when not run):
  optimal or the best it found, the heuristic's answer where its model cannot be
  built in that time;
- ``bound``: :func:`mallocgame.solvers.bound.upper_bound`'s (its LP given at most
  ``exact_seconds``, at least 60 s), no valid mapping does better.

Every answer is checked (:func:`mallocgame.check.check_solution`, which recomputes its
reward) before its reward enters a row; one that fails raises a
:class:`~mallocgame.errors.SolverError`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from mallocgame.bench.inputs import budget_seconds
from mallocgame.bench.markdown import markdown_table
from mallocgame.check import check_solution
from mallocgame.errors import SolverError
from mallocgame.instance import Instance
from mallocgame.latency import normalize
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.units import format_bytes
from mallocgame.workloads.registry import load_workload

__all__ = [
    "SuiteRow",
    "suite_row",
    "format_suite_table",
]

RANDOM_GAMES = 20
EXACT_SECONDS = 60.0


@dataclass(frozen=True)
class SuiteRow:
    """One program's line of the table (rewards are normalized; bytes are bytes)."""

    name: str
    model: str
    instructions: int
    buffers: int
    alias_groups: int
    loops: int
    peak_live_bytes: int
    fast_memory_bytes: int
    larger_than_fast: float  # share of buffers whose aligned size exceeds the fast memory
    random: float  # best of RANDOM_GAMES games
    greedy: float
    heuristic: float
    exact: float | None  # None: not run
    bound: float


def _alias_groups(inst: Instance) -> int:
    return sum(1 for n in Counter(b.alias_id for b in inst.buffers).values() if n > 1)


def _larger_than_fast(inst: Instance) -> float:
    align = inst.hardware.alignment_bytes
    cap = inst.hardware.fast_memory_bytes
    larger = sum(1 for b in inst.buffers if -(-b.size // align) * align > cap)
    return larger / inst.num_buffers if inst.num_buffers else 0.0


def suite_row(
    name: str,
    *,
    random_games: int = RANDOM_GAMES,
    exact_seconds: float = EXACT_SECONDS,
    progress: Callable[[str], None] | None = None,
) -> SuiteRow:
    """Measure one workload (module docstring); ``exact_seconds`` 0 leaves ``exact`` out."""
    from mallocgame.costmodel import peak_live_bytes
    from mallocgame.solvers.bound import bound_details

    if exact_seconds != 0:
        budget_seconds(exact_seconds, "exact_seconds")

    inst = load_workload(name)

    def solve(solver: str, request: SolveRequest) -> float:
        solution = get_solver(solver).solve(inst, request)
        report = check_solution(inst, solution)  # a row's reward is a checked answer's
        if not report.ok:
            raise SolverError(f"{name}: {solver}'s answer fails check: {report.summary()}")
        if progress is not None:
            progress(f"{name}: {solver} {solution.normalized_reward:.3f} ({solution.wall_s:.1f} s)")
        return solution.normalized_reward

    random = solve("random", SolveRequest(seed=0, work=random_games))
    greedy = solve("greedy", SolveRequest(seed=0))
    heuristic = solve("heuristic", SolveRequest(seed=0))
    exact = (
        solve("exact", SolveRequest(seed=0, seconds=exact_seconds)) if exact_seconds > 0 else None
    )
    bound_s = bound_details(inst, time_limit=max(exact_seconds, 60.0))["bound_s"]
    model = str(inst.source.get("model", inst.source.get("frontend", "")))
    return SuiteRow(
        name=name,
        model=model,
        instructions=inst.num_instructions,
        buffers=inst.num_buffers,
        alias_groups=_alias_groups(inst),
        loops=len(inst.loops),
        peak_live_bytes=peak_live_bytes(inst),
        fast_memory_bytes=inst.hardware.fast_memory_bytes,
        larger_than_fast=_larger_than_fast(inst),
        random=random,
        greedy=greedy,
        heuristic=heuristic,
        exact=exact,
        bound=normalize(inst, bound_s),
    )


def format_suite_table(rows: list[SuiteRow]) -> str:
    """A Markdown table of ``rows``."""
    header = [
        "name",
        "model",
        "instructions",
        "buffers",
        "alias groups",
        "loops",
        "peak live",
        "fast memory",
        "larger than fast",
        "random",
        "greedy",
        "heuristic",
        "exact",
        "bound",
    ]
    return markdown_table(
        header,
        [
            [
                f"`{r.name}`",
                r.model,
                f"{r.instructions:,}",
                f"{r.buffers:,}",
                str(r.alias_groups),
                str(r.loops),
                format_bytes(r.peak_live_bytes),
                format_bytes(r.fast_memory_bytes),
                f"{r.larger_than_fast:.0%}",
                f"{r.random:.3f}",
                f"{r.greedy:.3f}",
                f"{r.heuristic:.3f}",
                "" if r.exact is None else f"{r.exact:.3f}",
                f"{r.bound:.3f}",
            ]
            for r in rows
        ],
        left=2,
    )
