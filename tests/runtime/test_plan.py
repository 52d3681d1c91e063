"""The placement plan follows the answer's allocations (no torch needed for the plan itself)."""

from __future__ import annotations

import dataclasses

import pytest

from mallocgame.runtime.bench import load_solver
from mallocgame.runtime.errors import AnswerMismatchError, PlanError
from mallocgame.runtime.plan import PlacementPlan, placement_plan
from mallocgame.solution import Allocation
from mallocgame.solvers.base import SolveRequest


def solve(instance, name, seed=0, work=None):
    return load_solver(name).solve(instance, SolveRequest(seed=seed, work=work))


@pytest.mark.parametrize("solver", ["drop", "heuristic", "greedy", "random"])
def test_reads_and_writes_follow_the_allocations(case, solver):
    inst = case.instance
    sol = solve(inst, solver, work=4 if solver == "random" else None)
    plan = placement_plan(inst, sol)
    allocated = {a.buffer: a for a in sol.allocations}
    for step, ins in zip(plan.steps, inst.instructions):
        ops = [b for b in ins.buffers if not inst.buffers[b].is_output]
        outs = [b for b in ins.buffers if inst.buffers[b].is_output]
        assert [r.tensor for r in step.reads] == [inst.buffers[b].tensor_id for b in ops]
        assert [(r.segment is not None) for r in step.reads] == [b in allocated for b in ops]
        assert [(w.segment is not None) for w in step.writes] == [b in allocated for b in outs]
        for r in step.reads:
            if r.segment is not None:
                seg = plan.segments[r.segment]
                assert seg.tensor == r.tensor and seg.start <= step.index <= seg.end
    copies_in = sorted(
        (
            a.copy[0] if a.copy else inst.buffers[a.buffer].instruction,
            inst.buffers[a.buffer].tensor_id,
        )
        for a in sol.allocations
        if a.action == "Copy" and not inst.buffers[a.buffer].is_output
    )
    planned_in = sorted(
        (s.index, plan.segments[sid].tensor) for s in plan.steps for sid in s.prefetch
    )
    assert planned_in == copies_in
    copies_out = sorted(
        inst.buffers[a.buffer].tensor_id
        for a in sol.allocations
        if a.action == "Copy" and inst.buffers[a.buffer].is_output
    )
    assert sorted(plan.segments[sid].tensor for s in plan.steps for sid in s.copy_out) == copies_out


def test_drop_puts_everything_in_host_memory(case):
    plan = placement_plan(case.instance, solve(case.instance, "drop"))
    assert plan.segments == () and max(plan.hbm_bytes()) == 0
    assert plan.host_tensors == frozenset(x.id for x in case.instance.tensors)
    assert plan.copy_bytes() == (0, 0)


def test_an_answer_keeps_hbm_within_the_fast_memory(case):
    plan = placement_plan(case.instance, solve(case.instance, "heuristic"))
    assert 0 < max(plan.hbm_bytes()) <= case.instance.hardware.fast_memory_bytes
    assert plan.copy_bytes()[0] > 0


def test_all_fast_keeps_inputs_resident_and_copies_nothing(case):
    inst = case.instance
    plan = PlacementPlan.all_fast(inst)
    assert plan.resident == frozenset(x.id for x in inst.tensors if x.def_time < 0)
    assert all(w.segment is not None for s in plan.steps for w in s.writes)
    assert all(
        r.segment is not None or r.tensor in plan.resident for s in plan.steps for r in s.reads
    )
    assert plan.copy_bytes() == (0, 0) and plan.host_tensors == frozenset()


def test_an_answer_for_another_program_is_refused(case):
    sol = dataclasses.replace(solve(case.instance, "drop"), instance_sha256="0" * 64)
    with pytest.raises(AnswerMismatchError, match="another program"):
        placement_plan(case.instance, sol)


def test_an_invalid_answer_is_refused(case):
    sol = solve(case.instance, "heuristic")
    bad = dataclasses.replace(
        sol, allocations=sol.allocations + (Allocation(0, "NoCopy", 0, 0, 0),)
    )
    with pytest.raises(PlanError):
        placement_plan(case.instance, bad)
    with pytest.raises(PlanError):  # unchecked, the plan itself finds no HBM copy to extend
        placement_plan(case.instance, bad, check=False)
