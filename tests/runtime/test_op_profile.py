"""Per-instruction times: one per instruction, measured and simulated side by side."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from mallocgame.runtime.bench import load_solver
from mallocgame.runtime.memory import CpuMemory
from mallocgame.runtime.op_profile import (
    OpTime,
    op_rows,
    op_summary,
    profile_ops,
    simulated_op_seconds,
)
from mallocgame.runtime.plan import PlacementPlan, placement_plan
from mallocgame.runtime.torch_run import PlacedRunner
from mallocgame.simulate import simulate
from mallocgame.solvers.base import SolveRequest


def test_a_marked_run_has_one_mark_per_instruction_and_the_same_results(case):
    plan = PlacementPlan.all_fast(case.instance)
    runner = PlacedRunner(case.graph, plan, CpuMemory())
    plain = runner.run()
    marks: list = []
    marked = runner.run(marks)
    assert len(marks) == case.instance.num_instructions + 1
    gaps = CpuMemory().seconds_between(marks)
    assert len(gaps) == case.instance.num_instructions and all(g >= 0 for g in gaps)
    assert all(torch.equal(a, b) for a, b in zip(plain, marked))


def test_profile_gives_each_instruction_a_time(case):
    plan = PlacementPlan.all_fast(case.instance)
    times = profile_ops(case.graph, plan, CpuMemory(), repeats=2)
    assert len(times) == case.instance.num_instructions
    assert all(t >= 0 for t in times) and sum(times) > 0
    with pytest.raises(ValueError, match="repeats"):
        profile_ops(case.graph, plan, CpuMemory(), repeats=0)


def test_simulated_times_of_an_answer_sum_to_its_compute_time(case):
    answer = load_solver("heuristic").solve(case.instance, SolveRequest())
    per_op = simulated_op_seconds(case.instance, answer)
    assert sum(per_op) == pytest.approx(simulate(case.instance, answer).compute_s)
    # everything in fast memory is never slower than any answer, op by op
    fast = simulated_op_seconds(case.instance, None)
    assert all(f <= a + 1e-15 for f, a in zip(fast, per_op))
    drop = load_solver("drop").solve(case.instance, SolveRequest())
    assert sum(simulated_op_seconds(case.instance, drop.allocations)) > sum(fast)


def test_rows_and_summary(case):
    n = case.instance.num_instructions
    measured = [1e-3 * (t + 1) for t in range(n)]
    rows = op_rows(case.instance, measured, [m / 2 for m in measured])
    assert [r.index for r in rows] == list(range(n))
    assert rows[0].name == case.instance.instructions[0].name
    assert rows[0].bytes == sum(
        case.instance.buffers[b].size for b in case.instance.instructions[0].buffers
    )
    summary = op_summary(rows, top=2)
    assert summary.ops == n and summary.spearman == pytest.approx(1.0)
    assert summary.mean_relative_error == pytest.approx(0.5)
    assert summary.measured_total_s == pytest.approx(2 * summary.simulated_total_s)
    assert summary.top_opcodes.count("2.00x") == 2
    with pytest.raises(ValueError, match="instructions"):
        op_rows(case.instance, measured[:-1], measured)


def test_a_matmuls_layout_is_summarized_apart():
    rows = [
        OpTime(0, "mm", "mm", 8, 1e-3, 2e-3, "NN"),
        OpTime(1, "mm_1", "mm", 8, 3e-3, 1e-3, "TN"),
        OpTime(2, "mm_2", "mm", 8, 1e-3, 1e-3, "TN"),
    ]
    summary = op_summary(rows)
    assert summary.top_opcodes == "mm TN 2.00x (80%); mm NN 0.50x (20%)"


def test_summary_of_an_opcode_the_model_gives_no_time():
    rows = [OpTime(0, "a", "zero", 8, 1e-3, 0.0), OpTime(1, "b", "mm", 8, 1e-3, 1e-3)]
    summary = op_summary(rows)
    assert "zero -" in summary.top_opcodes and "mm 1.00x (50%)" in summary.top_opcodes
    assert math.isnan(summary.spearman)  # equal measured times rank nothing


def test_a_plan_of_an_answer_profiles_too(case):
    answer = load_solver("greedy").solve(case.instance, SolveRequest())
    times = profile_ops(case.graph, placement_plan(case.instance, answer), CpuMemory(), repeats=1)
    assert len(times) == case.instance.num_instructions
