"""The suite table: each bundled program's size and how hard it is.

Per program: the model it comes from, instructions, buffers, alias groups (of more
than one buffer), loops, fast memory, and the normalized reward of ``drop``,
``random`` (one game, seed 0) and ``greedy`` (Copy, else NoCopy, else Drop).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from mallocgame.instance import Instance
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads.registry import load_workload

__all__ = ["SuiteRow", "suite_row", "format_suite_table"]


@dataclass(frozen=True)
class SuiteRow:
    name: str
    model: str
    instructions: int
    buffers: int
    alias_groups: int
    loops: int
    fast_memory_bytes: int
    drop: float
    random: float
    greedy: float


def _alias_groups(inst: Instance) -> int:
    return sum(1 for n in Counter(b.alias_id for b in inst.buffers).values() if n > 1)


def suite_row(name: str) -> SuiteRow:
    """Measure one workload (three games)."""
    inst = load_workload(name)
    reward = {s: get_solver(s).solve(inst, SolveRequest(seed=0)).normalized_reward
              for s in ("drop", "random", "greedy")}
    model = str(inst.source.get("model", inst.source.get("frontend", "")))
    return SuiteRow(
        name=name, model=model, instructions=inst.num_instructions, buffers=inst.num_buffers,
        alias_groups=_alias_groups(inst), loops=len(inst.loops),
        fast_memory_bytes=inst.hardware.fast_memory_bytes, **reward,
    )


def _size(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def format_suite_table(rows: list[SuiteRow]) -> str:
    lines = [
        "| name | model | instructions | buffers | alias groups | loops | fast memory | drop | random | greedy |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| `{r.name}` | {r.model} | {r.instructions:,} | {r.buffers:,} | {r.alias_groups} | "
            f"{r.loops} | {_size(r.fast_memory_bytes)} | {r.drop:.3f} | {r.random:.3f} | {r.greedy:.3f} |"
        )
    return "\n".join(lines)
