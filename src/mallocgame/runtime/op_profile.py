"""Per-instruction times of a placed program, measured and simulated side by side.

:func:`profile_ops` runs a :class:`~mallocgame.runtime.torch_run.PlacedRunner` once to
warm up, then ``repeats`` times with a mark on the compute stream around every
instruction (:meth:`~mallocgame.runtime.memory.Memory.mark`: CUDA events on a GPU, the
wall clock after a synchronize on the CPU), and returns each instruction's median
seconds. An instruction's time is from the mark after the previous one to the mark after
it: its kernels, the waits for its copies, and any idle gap while Python issues it (the
runner's per-op overhead, which the calibrated preset's ``fixed_s`` models).

:func:`simulated_op_seconds` is the cost model's time of each instruction under the same
placement: for the framework default (every buffer in fast memory) each instruction's
``L_t(S)`` with ``S`` all its buffers, for an answer the simulator's busy time of each
instruction (:attr:`~mallocgame.simulate.SimulationResult.busy_s`, per execution).

:func:`op_rows` joins the two into :class:`OpTime` records and :func:`op_summary`
condenses them: Spearman over instructions, mean relative error, the totals, and the
share of the measured time the largest opcodes take.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mallocgame.instance import Instance
from mallocgame.runtime.memory import HostTensor, Memory
from mallocgame.runtime.plan import PlacementPlan
from mallocgame.runtime.torch_graph import BoundGraph
from mallocgame.runtime.torch_run import PlacedRunner
from mallocgame.solution import Allocation, Solution

__all__ = [
    "OpTime",
    "OpSummary",
    "profile_ops",
    "simulated_op_seconds",
    "op_rows",
    "op_summary",
]


@dataclass(frozen=True)
class OpTime:
    """One instruction's time under one placement: measured (median over the profiled
    runs) and simulated, in seconds; ``bytes`` its operands' and outputs' buffer bytes;
    ``layout`` a matmul's operand layout
    (:func:`~mallocgame.runtime.torch_graph.matmul_layout`; ``""`` for other instructions)."""

    index: int
    name: str
    opcode: str
    bytes: int
    measured_s: float
    simulated_s: float
    layout: str = ""


@dataclass(frozen=True)
class OpSummary:
    """How well the simulated per-instruction times follow the measured ones.

    ``spearman``: rank correlation over instructions; ``mean_relative_error``:
    ``mean(|sim - measured| / measured)``; totals in seconds; ``top_opcodes``: the
    opcodes (a matmul's with its layout: ``mm TN``) that take the most measured time, as
    ``opcode measured/simulated`` ratios (their measured share of the total in
    parentheses).
    """

    ops: int
    spearman: float
    mean_relative_error: float
    measured_total_s: float
    simulated_total_s: float
    top_opcodes: str


def profile_ops(
    graph: BoundGraph,
    plan: PlacementPlan,
    memory: Memory,
    *,
    repeats: int = 3,
    shared_host: dict[int, HostTensor] | None = None,
    stage_dot_reads: bool = False,
) -> list[float]:
    """Median seconds of each of the ``T`` instructions over ``repeats`` marked runs, after
    one unmarked warm-up run (``stage_dot_reads``: a matmul's time includes the copies of
    its host operands into HBM, :class:`~mallocgame.runtime.torch_run.PlacedRunner`)."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    runner = PlacedRunner(graph, plan, memory, stage_dot_reads=stage_dot_reads)
    runner.prepare(shared_host)
    runner.run()
    memory.join()
    memory.synchronize()
    per_run = []
    for _ in range(repeats):
        marks: list[Any] = []
        runner.run(marks)
        memory.join()
        per_run.append(memory.seconds_between(marks))
    return [float(v) for v in np.median(np.asarray(per_run, dtype=float), axis=0)]


def simulated_op_seconds(
    instance: Instance, solution: Solution | Sequence[Allocation] | None
) -> list[float]:
    """The cost model's seconds for one execution of each instruction: every buffer in fast
    memory (``solution`` None), else under ``solution`` (an answer or its allocations, on
    ``instance``: the simulator's busy time)."""
    from mallocgame.simulate import execution_time, simulate

    if solution is None:
        return [
            execution_time(instance, t, ins.buffers) for t, ins in enumerate(instance.instructions)
        ]
    busy = simulate(instance, solution).busy_s
    return [float(busy[t]) / ins.count for t, ins in enumerate(instance.instructions)]


def op_rows(
    instance: Instance,
    measured: list[float],
    simulated: list[float],
    layouts: Sequence[str] | None = None,
) -> list[OpTime]:
    """One :class:`OpTime` per instruction (``layouts``: each one's matmul layout, or none)."""
    layouts = layouts if layouts is not None else [""] * instance.num_instructions
    if not len(measured) == len(simulated) == len(layouts) == instance.num_instructions:
        raise ValueError(
            f"{len(measured)} measured and {len(simulated)} simulated times and "
            f"{len(layouts)} layouts for {instance.num_instructions} instructions"
        )
    return [
        OpTime(
            t,
            ins.name,
            ins.opcode,
            sum(instance.buffers[b].size for b in ins.buffers),
            m,
            s,
            layout,
        )
        for t, (ins, m, s, layout) in enumerate(
            zip(instance.instructions, measured, simulated, layouts)
        )
    ]


def op_summary(rows: list[OpTime], top: int = 4) -> OpSummary:
    """The :class:`OpSummary` of ``rows`` (``top`` opcodes named)."""
    from mallocgame.runtime.bench import mean_relative_error, spearman

    measured = [r.measured_s for r in rows]
    simulated = [r.simulated_s for r in rows]
    total = sum(measured)
    by_opcode: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in rows:
        kind = f"{r.opcode} {r.layout}" if r.layout else r.opcode
        by_opcode[kind][0] += r.measured_s
        by_opcode[kind][1] += r.simulated_s
    largest = sorted(by_opcode.items(), key=lambda kv: -kv[1][0])[:top]
    top_text = "; ".join(
        f"{op} {m / s:.2f}x ({m / total:.0%})" if s > 0 and total > 0 else f"{op} -"
        for op, (m, s) in largest
    )
    return OpSummary(
        ops=len(rows),
        spearman=spearman(simulated, measured),
        mean_relative_error=mean_relative_error(simulated, measured),
        measured_total_s=total,
        simulated_total_s=sum(simulated),
        top_opcodes=top_text,
    )
