"""The fast upper bound (mallocgame.solvers.bound): worked by hand on tiny instances,
then checked against optima and solvers' answers.

Builder hardware (:mod:`tests.builders`): fast 1000 B/s, slow 100 B/s, copies 100 B/s,
so a 100-byte buffer saves 0.9 s of a memory-bound instruction when fast and needs 1 s
of supply to be copied; alignment 1.
"""

from __future__ import annotations

import pytest

from mallocgame.errors import SolverError
from mallocgame.game import Game
from mallocgame.game.exhaustive import exhaustive_search
from mallocgame.latency import reward_normalizer
from mallocgame.solvers import get_solver
from mallocgame.solvers.base import SolveRequest
from mallocgame.solvers.bound import (
    RooflineTerm,
    TableTerm,
    bound_details,
    instruction_gains,
    reach,
    rounding_margin,
    trivial_bound,
    upper_bound,
)
from mallocgame.solvers.random import RandomSolver
from mallocgame.workloads.registry import load_workload
from tests.builders import (
    CONFORMANCE_NAMES,
    B,
    I,
    X,
    build,
    conformance_instance,
    conformance_vector,
    reward_instance,
    roofline,
)

REL = 1e-12


# ================================================================================ by hand


def test_instruction_gains_by_hand() -> None:
    roof, tab = instruction_gains(reward_instance())
    # instruction 0: memory 4 s against compute 2.5 s: at most A = 1.5 s saved,
    # B = 0 s of slack; each buffer saves size * (1/100 - 1/1000)
    assert isinstance(roof, RooflineTerm) and (roof.t, roof.count, roof.buffers) == (
        0,
        3,
        (0, 1, 2),
    )
    assert (roof.a, roof.b) == (1.5, 0.0)
    assert roof.deltas == pytest.approx((0.9, 1.8, 0.9), rel=REL)
    # instruction 1: the table 8, 5, 6, 1 s as gains over the empty set
    assert tab == TableTerm(t=1, count=2, varied=(5, 3), gains=(0.0, 3.0, 2.0, 7.0))


def test_when_everything_fits_the_bound_is_the_normalizer() -> None:
    # capacity 1 MiB and zero demands: every buffer can be fast, and is in the best game
    inst = reward_instance()
    assert reach(inst).feasible.all()
    assert (
        trivial_bound(inst) == pytest.approx(3 * 1.5 + 2 * 7.0, rel=REL) == reward_normalizer(inst)
    )
    details = bound_details(inst)
    assert details["trivial_s"] == pytest.approx(18.5, rel=REL)
    assert details["lp_s"] == pytest.approx(18.5, rel=1e-5)  # the LP, inflated by 1e-6
    assert upper_bound(inst) == details["bound_s"] == pytest.approx(18.5, rel=REL)
    assert exhaustive_search(Game(inst))[0] == pytest.approx(18.5, rel=REL)  # tight here


def test_a_buffer_larger_than_fast_memory_gains_nothing() -> None:
    # instruction 1 reads x0 (100 B) and x1 (300 B > capacity 200): only x0 can be fast,
    # saving 0.9 s of the 4 s of memory time
    inst = build(tensors=[X(100), X(300)], instructions=[I(), I(reads=[0, 1])], capacity=200)
    assert reach(inst).feasible.tolist() == [True, False]
    assert trivial_bound(inst) == pytest.approx(0.9, rel=REL)
    assert upper_bound(inst) == pytest.approx(0.9, rel=REL)
    assert exhaustive_search(Game(inst))[0] == pytest.approx(0.9, rel=REL)


def test_an_alias_group_is_fast_as_a_whole() -> None:
    # x0 (100 B) read in place into x1 (300 B, too large): one group, so neither can be
    # fast; a zero trivial bound needs no LP
    inst = build(
        tensors=[X(100), X(300)],
        instructions=[I(), I(reads=[B(0, alias="g")], writes=[B(1, alias="g")])],
        capacity=200,
    )
    assert reach(inst).feasible.tolist() == [False, False]
    details = bound_details(inst)
    assert details["trivial_s"] == 0.0 and details["lp_s"] is None and details["bound_s"] == 0.0
    assert upper_bound(inst) == 0.0


@pytest.mark.parametrize("supply, feasible, bound", [(0.5, False, 0.0), (1.0, True, 0.9)])
def test_a_copy_needs_enough_supply_before_the_read(
    supply: float, feasible: bool, bound: float
) -> None:
    # a program input (100 B: demand 1 s) read at step 1; step 0 supplies `supply` seconds
    inst = build(tensors=[X(100)], instructions=[I(supply=supply), I(reads=[0])])
    r = reach(inst)
    assert r.feasible.tolist() == [feasible]
    assert r.latest_start.tolist() == [0 if feasible else -1]  # the copy would start at step 0
    assert upper_bound(inst) == pytest.approx(bound, rel=REL)
    assert exhaustive_search(Game(inst))[0] == pytest.approx(bound, rel=REL)


def test_the_memory_rows_tighten_the_trivial_bound() -> None:
    # two 100-byte inputs read together at step 1, room for one of them (capacity 100):
    # each alone can be fast (trivial bound 2 * 0.9), both at once cannot (LP 0.9)
    inst = build(
        tensors=[X(100), X(100)], instructions=[I(supply=2.0), I(reads=[0, 1])], capacity=100
    )
    assert reach(inst).feasible.all()
    details = bound_details(inst)
    assert details["trivial_s"] == pytest.approx(1.8, rel=REL)
    assert details["lp_s"] == pytest.approx(0.9, rel=1e-5)
    assert details["bound_s"] == details["lp_s"] == upper_bound(inst)
    assert exhaustive_search(Game(inst))[0] == pytest.approx(0.9, rel=REL)


def test_without_the_lp_the_bound_is_the_trivial_one() -> None:
    inst = build(
        tensors=[X(100), X(100)], instructions=[I(supply=2.0), I(reads=[0, 1])], capacity=100
    )
    details = bound_details(inst, lp=False)
    assert details["lp_s"] is None
    assert details["bound_s"] == details["trivial_s"] == pytest.approx(1.8, rel=REL)


# ===================================================================== against answers


@pytest.mark.parametrize(
    "inst",
    [
        # fast 6e-16 faster than slow: 1/slow - 1/fast cancels, 8 % short of the saving
        build(
            [X(100)],
            [I(supply=10.0), I(reads=[0], supply=1.0)],
            fast_bw=100.00000000000006,
            slow_bw=100.0,
            copy_bw=100.0,
        ),
        # compute time 1/3.0, the float just under the memory time 1/3: A rounds to 0
        build([X(1)], [I(), I(reads=[0], latency=roofline(compute_s=1 / 3.0))], slow_bw=3.0),
    ],
    ids=["close-bandwidths", "compute-is-memory"],
)
def test_the_bound_holds_where_float_terms_cancel(inst) -> None:
    """The checker judges the bound against the exact reward: the answer that copies the
    tensor in passes with the bound as its ``bound_s``, which exceeds it by ulps."""
    from dataclasses import replace

    from mallocgame.check import check_solution
    from mallocgame.game.state import COPY, replay
    from mallocgame.latency import exact_mapping_reward
    from mallocgame.solvers.base import solution_from_game

    game = replay(inst, [COPY])
    answer = solution_from_game(inst, game, solver="copy", seed=0, wall_s=0.0)
    best = float(exact_mapping_reward(inst, [0]))
    assert best > 0 and game.complete
    assert check_solution(inst, replace(answer, bound_s=upper_bound(inst))).ok
    assert best <= upper_bound(inst) <= best + 1e-13  # the latencies are about 1 s
    assert rounding_margin(inst) > 0
    nothing_fits = build([X(100)], [I(), I(reads=[0])], capacity=50)
    assert rounding_margin(nothing_fits) == 0.0 and upper_bound(nothing_fits) == 0.0


@pytest.mark.parametrize("name", CONFORMANCE_NAMES)
def test_bound_covers_every_recorded_game(name: str) -> None:
    inst, vector = conformance_instance(name), conformance_vector(name)
    ub = upper_bound(inst)
    assert ub <= bound_details(inst)["trivial_s"]
    best = max(t["reward_s"] for t in vector["trajectories"])
    if vector["optimal_reward_s"] is not None:
        best = max(best, vector["optimal_reward_s"])
    assert ub >= best * (1 - 1e-12)


def test_upper_bound_beats_random_and_heuristic_solutions() -> None:
    for name in (
        "xla-v1/lstm_infer",
        "xla-v1/resnet_infer",
        "synthetic-v1/small",
        "xla-v1/donated_sgd_step",
    ):
        inst = load_workload(name)
        ub = upper_bound(inst)
        assert ub <= bound_details(inst)["trivial_s"]
        rnd = RandomSolver().solve(inst, SolveRequest(seed=1, work=20))
        assert rnd.reward_s <= ub
        try:
            heuristic = get_solver("heuristic").solve(inst, SolveRequest(seed=0))
        except SolverError:  # not built in this tree
            continue
        assert heuristic.reward_s <= ub


def test_upper_bound_on_16k_buffers() -> None:
    inst = load_workload("synthetic-v1/16k")
    ub = upper_bound(inst)
    assert 0 < ub <= reward_normalizer(inst) * (1 + 1e-9)
