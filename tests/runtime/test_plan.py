"""The placement plan follows the answer's allocations (no torch needed for the plan itself)."""

from __future__ import annotations

import dataclasses

import pytest

from mallocgame.check import check_solution
from mallocgame.game.state import replay
from mallocgame.runtime.bench import load_solver
from mallocgame.runtime.errors import AnswerMismatchError, PlanError
from mallocgame.runtime.plan import PlacementPlan, Read, Region, placement_plan
from mallocgame.solution import Allocation
from mallocgame.solvers.base import SolveRequest, solution_from_game
from mallocgame.workloads.suite import suite_instance
from tests.builders import CONFORMANCE_NAMES, B, I, X, build, conformance_instance


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
                assert seg.ready <= step.index  # its copy in is due by this step
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


def test_a_copy_in_is_issued_at_its_copy_intervals_start_not_its_memory_intervals():
    """The copy was issued at the memory interval's start, before the answer's copy."""
    inst = build(
        [X(100), X(10), X(10)],
        [I(writes=[1]), I(reads=[1], writes=[2]), I(reads=[0, 2])],
        capacity=200,
    )
    (b,) = [b.id for b in inst.buffers if b.tensor_id == 0]
    early = Allocation(b, "Copy", 0, 0, 2, copy=(1, 1))  # held from step 0, copied in step 1
    sol = solve(inst, "heuristic")
    others = [a for a in sol.allocations if a.buffer != b]
    sol = dataclasses.replace(
        sol, allocations=tuple(sorted([*others, early], key=lambda a: a.buffer))
    )
    assert check_solution(inst, sol).ok
    plan = placement_plan(inst, sol)
    (seg,) = [s for s in plan.segments if s.source == "prefetch"]
    assert (seg.tensor, seg.start, seg.end, seg.ready) == (0, 0, 2, 2)
    assert [s.prefetch for s in plan.steps] == [(), (seg.id,), ()]
    assert plan.hbm_bytes()[0] >= 100  # its room is held from the memory interval's start


def test_drop_puts_everything_in_host_memory(case):
    plan = placement_plan(case.instance, solve(case.instance, "drop"))
    assert plan.segments == () and max(plan.hbm_bytes()) == 0
    assert plan.host_tensors == frozenset(x.id for x in case.instance.tensors)
    assert plan.copy_bytes() == (0, 0)


def game(inst, actions):
    """The checked answer of the game played with ``actions`` on ``inst``."""
    state = replay(inst, actions)
    assert state.complete
    sol = solution_from_game(inst, state, solver="t", seed=0, wall_s=0.0)
    assert check_solution(inst, sol).ok
    return sol


def test_hbm_bytes_count_what_the_runtime_holds_the_game_its_allocations():
    # an in-place update: X0 -> X1, one alias group at one offset; the runtime's functional
    # graph holds both tensors during the update, the game one location
    inplace = build(
        [X(100), X(100)],
        [
            I(reads=[B(0, alias="g", demand=0.0)], writes=[B(1, alias="g")]),
            I(reads=[B(1, alias="g")]),
        ],
        capacity=100,
    )
    plan = placement_plan(inplace, game(inplace, [0, 1, 1]))
    assert plan.hbm_bytes() == [200, 100] and plan.game_fast_bytes() == [100, 100]
    # a 100-byte read of a 1000-byte tensor: the runtime copies in the whole tensor, the
    # game allocates the buffer's size rounded up to the alignment
    part = build(
        [X(1000), X(10)],
        [I(reads=[B(0, size=100, demand=0.0)], writes=[1])],
        capacity=128,
        alignment=64,
    )
    plan = placement_plan(part, game(part, [0, 2]))
    assert plan.hbm_bytes() == [1000] and plan.copy_bytes() == (1000, 0)
    assert plan.game_fast_bytes() == [128]


def test_game_fast_bytes_are_the_union_of_the_regions_alive():
    plan = dataclasses.replace(
        PlacementPlan.all_fast(build([X(10)], [I(writes=[0]), I(reads=[0]), I()])),
        regions=(Region(0, 0, 100, 0, 1), Region(1, 50, 100, 1, 2), Region(2, 400, 8, 2, 2)),
    )
    assert plan.game_fast_bytes() == [100, 150, 108]


def test_the_framework_default_has_no_game_fast_bytes(case):
    with pytest.raises(PlanError, match="no game answer"):
        PlacementPlan.all_fast(case.instance).game_fast_bytes()


def test_an_answer_keeps_its_game_fast_bytes_within_the_fast_memory(case):
    plan = placement_plan(case.instance, solve(case.instance, "heuristic"))
    assert 0 < max(plan.game_fast_bytes()) <= case.instance.hardware.fast_memory_bytes
    assert plan.copy_bytes()[0] > 0


@pytest.mark.parametrize(
    "name", ["xla-v1/alexnet_train_b32", "xla-v1/lstm_infer", "xla-v1/gru_infer"]
)
def test_a_bundled_programs_answer_keeps_its_game_fast_bytes_within_the_fast_memory(name):
    # alexnet's heuristic answer plans 18,563,848 bytes of HBM at its peak (in-place
    # updates: both tensors of an update held) against a fast memory of 15,178,752
    inst = suite_instance(name)
    for solver in ("heuristic", "greedy"):
        plan = placement_plan(inst, solve(inst, solver))
        assert 0 < max(plan.game_fast_bytes()) <= inst.hardware.fast_memory_bytes
        if (name, solver) == ("xla-v1/alexnet_train_b32", "heuristic"):  # docs/runtime.md's
            assert (max(plan.hbm_bytes()), inst.hardware.fast_memory_bytes) == (
                18_563_848,
                15_178_752,
            )


@pytest.mark.parametrize("name", CONFORMANCE_NAMES)
def test_random_answers_keep_their_game_fast_bytes_within_the_fast_memory(name):
    inst = conformance_instance(name)
    for seed in range(4):
        plan = placement_plan(inst, solve(inst, "random", seed=seed, work=1))
        assert max(plan.game_fast_bytes(), default=0) <= inst.hardware.fast_memory_bytes


def resident_read_instance():
    """X0 written at 0 (alias group g, copied out), read at 2 with NoCopy (its own group: the
    output's copy is still there) and at 3 with Copy (group g, copy interval [2, 2])."""
    return build(
        [X(100), X(10)],
        [
            I(writes=[B(0, alias="g", demand=3.0)], supply=2.0),
            I(writes=[1], supply=2.0),
            I(reads=[B(0)], supply=2.0),
            I(reads=[B(0, alias="g", demand=1.0)], supply=2.0),
        ],
        capacity=100,
    )


def extension_instance():
    """X0 written at 0 (group g, copied out at 1), read at 3 with NoCopy (an in-place
    extension over [2, 3]) and at 4 with Copy (group g, copy interval [1, 3])."""
    return build(
        [X(100), X(10)],
        [
            I(writes=[B(0, alias="g", demand=1.0)], supply=2.0),
            I(writes=[1], supply=2.0),
            I(reads=[1]),
            I(reads=[B(0, alias="g")]),
            I(reads=[B(0, alias="g", demand=3.0)]),
        ],
        capacity=100,
    )


def test_a_resident_read_reads_the_copy_already_in_hbm_not_a_later_prefetch():
    inst = resident_read_instance()
    plan = placement_plan(inst, game(inst, [0, 2, 1, 0]))
    out, prefetch = plan.segments
    assert (out.source, out.ready, prefetch.source, prefetch.ready) == ("output", 0, "prefetch", 3)
    assert plan.steps[2].reads == (Read(0, out.id),)  # not the prefetch, due only by step 3
    assert plan.steps[3].reads == (Read(0, prefetch.id),)


def test_an_in_place_extension_extends_the_copy_already_in_hbm_not_a_later_prefetch():
    inst = extension_instance()
    plan = placement_plan(inst, game(inst, [0, 2, 2, 1, 0]))
    out, prefetch = plan.segments
    assert (out.start, out.end, out.ready) == (0, 3, 0)  # was [0, 1]: extended over [2, 3]
    assert (prefetch.start, prefetch.end, prefetch.ready) == (1, 4, 4)
    assert plan.steps[3].reads == (Read(0, out.id),)
    assert plan.steps[4].reads == (Read(0, prefetch.id),)
    assert plan.steps[3].free == (out.id,)


@pytest.mark.parametrize(
    ("make", "actions"),
    [(resident_read_instance, [0, 2, 1, 0]), (extension_instance, [0, 2, 2, 1, 0])],
)
def test_a_read_of_a_copy_not_yet_in_hbm_is_refused(make, actions):
    inst = make()
    sol = game(inst, actions)
    # the output dropped: the only HBM copy at the NoCopy read is the later prefetch
    assert sol.allocations[0].buffer == 0 and inst.buffers[0].is_output
    bad = dataclasses.replace(sol, allocations=sol.allocations[1:])
    with pytest.raises(PlanError, match="not in HBM yet"):
        placement_plan(inst, bad, check=False)


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
