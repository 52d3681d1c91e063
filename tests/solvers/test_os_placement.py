"""``first-touch`` and ``agnostic``: the operating system's placements, on hand-made programs."""

from __future__ import annotations

import pytest

from mallocgame.check import check_solution
from mallocgame.errors import SolverError
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads.registry import load_workload
from mallocgame.workloads.suite import suite_instance
from tests.builders import I, X, build


def _three_activations():
    """t0 writes a (60 B), t1 writes b (60 B), t2 reads a and b and writes c (60 B, a result).
    Capacity 100 B: one of a and b fits for their whole lives."""
    return build(
        tensors=[X(60), X(60), X(60, live_out=True)],
        instructions=[I(writes=[0]), I(writes=[1]), I(reads=[0, 1], writes=[2])],
        capacity=100,
    )


def test_first_touch_keeps_what_came_first_and_never_moves_it() -> None:
    inst = _three_activations()
    answer = get_solver("first-touch").solve(inst, SolveRequest(seed=0))
    placed = {(inst.buffers[a.buffer].tensor_id, a.action) for a in answer.allocations}
    # a is produced into fast memory and read there; b finds no room and stays slow
    assert placed == {(0, "NoCopy")}
    assert answer.work == {"placements": 1, "backups": 0}
    assert check_solution(inst, answer).ok


def test_a_tensor_first_touched_in_slow_memory_stays_there() -> None:
    """a fills the fast memory; b is produced slow; once a is dead, b's read would fit a
    Copy in, but first-touch never moves a page."""
    inst = build(
        [X(100), X(100)],
        [I(writes=[0]), I(writes=[1]), I(reads=[0]), I(), I(reads=[1])],
        capacity=100,
    )
    answer = get_solver("first-touch").solve(inst, SolveRequest(seed=0))
    assert answer.actions == (1, 2, 1, 2)  # a NoCopy, b Drop, a's read NoCopy, b's read Drop
    assert check_solution(inst, answer).ok


@pytest.mark.parametrize("name", ["xla-v1/alexnet_train_b32", "xla-v1/dlrm_train"])
def test_no_bundled_tensor_first_touched_slow_is_copied_in_later(name: str) -> None:
    inst = suite_instance(name)
    for solver, options in (("first-touch", {}), ("agnostic", {"fast_share": 0.5})):
        actions = get_solver(solver).solve(inst, SolveRequest(seed=0, options=options)).actions
        first: dict[int, int] = {}
        for b in inst.buffers:  # game order
            first.setdefault(b.tensor_id, actions[b.id])
            assert not (first[b.tensor_id] == 2 and actions[b.id] == 0), (solver, b.id)


def test_first_touch_brings_a_program_input_in_at_its_first_read() -> None:
    inst = build(
        tensors=[X(50), X(10, live_out=True), X(10, live_out=True)],
        instructions=[I(writes=[1]), I(reads=[0], writes=[2]), I(reads=[0])],
        capacity=100,
    )
    answer = get_solver("first-touch").solve(inst, SolveRequest(seed=0))
    actions = {(a.buffer, a.action) for a in answer.allocations}
    first, second = [b.id for b in inst.buffers if b.tensor_id == 0]
    assert (first, "Copy") in actions and (second, "NoCopy") in actions
    assert check_solution(inst, answer).ok


def test_agnostic_with_no_fast_share_places_nothing_and_with_all_is_first_touch() -> None:
    inst = suite_instance("xla-v1/gru_infer")
    none = get_solver("agnostic").solve(inst, SolveRequest(seed=3, options={"fast_share": 0.0}))
    assert none.allocations == () and none.reward_s == 0.0
    everything = get_solver("agnostic").solve(
        inst, SolveRequest(seed=3, options={"fast_share": 1.0})
    )
    first_touch = get_solver("first-touch").solve(inst, SolveRequest(seed=0))
    assert everything.actions == first_touch.actions


def test_agnostic_draws_its_placement_from_the_seed() -> None:
    inst = suite_instance("torch-v1/wrn101_2_infer_b128")
    solver = get_solver("agnostic")
    a, b = (solver.solve(inst, SolveRequest(seed=s)) for s in (0, 1))
    again = solver.solve(inst, SolveRequest(seed=0))
    assert a.actions == again.actions and a.actions != b.actions
    assert 0.0 < a.normalized_reward < get_solver("first-touch").solve(inst).normalized_reward
    assert a.info["fast_share"] == 0.5 and a.info["groups_drawn_fast"] > 0
    for answer in (a, b):
        assert check_solution(inst, answer).ok


@pytest.mark.parametrize("value", [-0.1, 1.5])
def test_agnostic_refuses_a_share_outside_zero_to_one(value: float) -> None:
    with pytest.raises(SolverError, match="fast_share"):
        get_solver("agnostic").solve(
            _three_activations(), SolveRequest(options={"fast_share": value})
        )


@pytest.mark.parametrize(
    ("solver", "key"), [("first-touch", "first_touch_until"), ("agnostic", "agnostic_until")]
)
def test_a_spent_clock_completes_the_game_drop_first(solver: str, key: str) -> None:
    """Without a budget the game backs up about a hundred times on this program (seconds;
    on synthetic-v1/16k, minutes); once the clock is spent the rest is Drop first."""
    inst = load_workload("synthetic-v1/4k")
    whole = get_solver(solver).solve(inst, SolveRequest(seed=0))
    cut = get_solver(solver).solve(inst, SolveRequest(seed=0, seconds=1e-9))
    assert key not in whole.info and whole.work["backups"] > 0
    assert cut.info[key] == 0 and check_solution(inst, cut).ok
    assert len(cut.allocations) < len(whole.allocations) and cut.work["backups"] == 0
