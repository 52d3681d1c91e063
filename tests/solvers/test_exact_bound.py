"""``exact``'s bound and status where float64 and CP-SAT's doubles fall short: huge
counts (the objective's scale), float terms below the exact reward (the rounding margin),
and the safety net that drops a CP-SAT bound a mapping of the model beats."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import pytest

from mallocgame.check import check_solution
from mallocgame.game import Game
from mallocgame.game.exhaustive import exhaustive_search
from mallocgame.instance import Instance, instance_from_dict, load_instance
from mallocgame.latency import exact_mapping_reward
from mallocgame.solvers.base import SolveRequest
from mallocgame.solvers.exact import OBJECTIVE_SPAN, ExactSolver, MappingModel
from tests.builders import I, X, build_doc, roofline

DATA = Path(__file__).parents[1] / "data"
NO_HINTS = {"warm_start": False, "heuristic_start": False}


def _exact(inst: Instance, **options: object):
    return ExactSolver().solve(inst, SolveRequest(seed=0, seconds=10, options=options))


@pytest.mark.parametrize(
    "name, game_optimum",
    [
        # an instruction run 2**31 - 1 times gains nothing (compute-bound, left out of the
        # objective) but its count made 6.4e15 units per trivial bound: CP-SAT answered
        # OPTIMAL at 100.05 s (bound 100.05 s) beside the game optimum 100.13 s
        ("exact_skipped_huge_count", 100.13),
        # a table run 2**31 - 1 times spans 2.1e16 units: CP-SAT's objective lost 3 units,
        # and its bound fell below the answer's reward (false_bound)
        ("exact_huge_count_table", 3.4),
    ],
)
def test_huge_counts_keep_cp_sat_bound_and_optimum_true(name: str, game_optimum: float) -> None:
    inst = load_instance(DATA / f"{name}.json")
    assert exhaustive_search(Game(inst), max_nodes=300_000)[0] == pytest.approx(game_optimum)
    assert MappingModel(inst).objective_span <= OBJECTIVE_SPAN
    for options in ({}, NO_HINTS):
        solution = _exact(inst, **options)
        report = check_solution(inst, solution)
        assert report.ok, report.summary()
        assert solution.info["status"] == "OPTIMAL", options
        assert solution.reward_s >= game_optimum * (1 - 1e-9), options  # no false OPTIMAL
        assert solution.info["cp_bound_s"] >= solution.reward_s
        assert solution.bound_s >= solution.reward_s


def _one_read(compute_s: float, slow_bw: float, fast_bw: float, size: int) -> Instance:
    """One tensor read by a roofline instruction, copied in first."""
    doc = build_doc(
        [X(size)],
        [I(supply=100.0), I(reads=[0], latency=roofline(compute_s), supply=1.0)],
        capacity=4096,
        alignment=1,
        slow_bw=slow_bw,
        fast_bw=fast_bw,
        copy_bw=1000.0,
    )
    return instance_from_dict(doc)


@pytest.mark.parametrize(
    "compute_s, slow_bw, fast_bw, size",
    [
        # fast and slow bandwidths 3e-13 apart: the float delta is 6e-16 s short
        (0.0, 100.0, 100.0 * (1 + 3e-13), 1000),
        # A = M0 - c cancels: float 5.55e-17 s, exact 7.40e-17 s
        (math.nextafter(1 / 3, 0.0), 3.0, 1000.0, 1),
        # float A is 0 (c is float(1/3)), so the term is left out; exact A is 1.85e-17 s
        (1 / 3, 3.0, 1000.0, 1),
    ],
)
def test_cp_sat_bound_covers_float_rounding(
    compute_s: float, slow_bw: float, fast_bw: float, size: int
) -> None:
    inst = _one_read(compute_s, slow_bw, fast_bw, size)
    best = exact_mapping_reward(inst, [0])  # the read copied in: every game's best
    assert best > 0
    solution = _exact(inst)
    report = check_solution(inst, solution)
    assert report.ok, report.summary()
    assert solution.info["status"] == "OPTIMAL"
    for bound in (solution.info["cp_bound_s"], solution.bound_s):
        assert Fraction(bound) >= best


def test_a_false_cp_sat_bound_is_dropped(monkeypatch) -> None:
    """The safety net: a CP-SAT bound below the reward of a mapping of its model (faked
    here by halving the conversion to seconds) is dropped; OPTIMAL becomes FEASIBLE, and
    the bound is the LP bound."""
    inst = load_instance(DATA / "exact_skipped_huge_count.json")
    seconds = MappingModel.seconds
    monkeypatch.setattr(MappingModel, "seconds", lambda self, v: 0.5 * seconds(self, v))
    solution = _exact(inst)
    assert solution.info["cp_bound_s"] is None
    assert solution.info["status"] == "FEASIBLE"
    assert "CP-SAT's bound" in solution.info["note"]
    assert solution.bound_s == solution.info["upper_bound_s"] >= solution.reward_s
    assert check_solution(inst, solution).ok


def test_an_objective_past_the_span_cp_sat_holds_exactly_proves_nothing(monkeypatch) -> None:
    """Where the counts alone span more units than the limit (hundreds of instructions
    run 2**31 - 1 times; faked here by a limit of 1 unit), CP-SAT's bound and OPTIMAL were
    reported as they came: now neither is used, and the bound is the LP bound."""
    import mallocgame.solvers.exact as exact

    doc = build_doc(
        [X(1000)],
        [I(supply=100.0), I(reads=[0], latency=roofline(0.0), supply=1.0, count=2**31 - 1)],
        capacity=4096,
        alignment=1,
        slow_bw=3.0,
        copy_bw=1000.0,
    )
    inst = instance_from_dict(doc)
    assert _exact(inst).info["status"] == "OPTIMAL"
    # each execution's gain rounds up to at least one unit: 2**31 - 1 units at least
    monkeypatch.setattr(exact, "OBJECTIVE_SPAN", 2**20)
    solution = _exact(inst)
    assert solution.info["status"] == "FEASIBLE"
    assert solution.info["cp_bound_s"] is None
    assert "more than CP-SAT's doubles hold exactly" in solution.info["note"]
    assert solution.bound_s == solution.info["upper_bound_s"] >= solution.reward_s
    assert check_solution(inst, solution).ok


def test_a_model_cp_sat_refuses_answers_not_run_with_the_warm_start() -> None:
    """One tensor of 2**52 bytes (of 2**53) live over 1,025 steps: AddNoOverlap2D's areas
    sum past 2**63 and CP-SAT answered MODEL_INVALID, a status the docs do not name, with
    no note. Now the model is validated once built: NOT_RUN, CP-SAT's reason in the note,
    and the best warm start the answer."""
    idle = [I() for _ in range(1023)]
    doc = build_doc(
        [X(2**52)],
        [I(writes=[0]), *idle, I(reads=[0])],
        capacity=2**53,
        alignment=1,
        copy_bw=2**50,
        fast_bw=2**52,
        slow_bw=2**50,
    )
    inst = instance_from_dict(doc)
    assert "Integer overflow" in MappingModel(inst).model.validate()
    solution = ExactSolver().solve(inst, SolveRequest(seed=0, work=100))
    info = solution.info
    assert info["status"] == "NOT_RUN" and info["cp_bound_s"] is None
    assert info["note"].startswith("CP-SAT refused the model (Integer overflow when summing")
    assert "\n" not in info["note"] and info["source"] in ("heuristic", "game")
    assert info["note"].endswith(f"the best warm start returned ({info['source']})")
    assert solution.reward_s > 0 and solution.work["dtime_ms"] == 0
    assert solution.bound_s >= solution.reward_s
    assert check_solution(inst, solution).ok
