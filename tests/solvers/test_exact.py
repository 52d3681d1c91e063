"""The ``exact`` CP-SAT solver (the fast upper bound: tests/solvers/test_bound.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from ortools.sat.python import cp_model

from mallocgame.check import SUPPLY_RTOL, check_solution
from mallocgame.errors import SolverError
from mallocgame.game import Game
from mallocgame.game.exhaustive import exhaustive_search
from mallocgame.instance import instance_from_dict
from mallocgame.solvers.base import SolveRequest
from mallocgame.solvers.bound import bound_details, upper_bound
from mallocgame.solvers.exact import ExactSolver, copy_in_start, copy_out_end
from mallocgame.workloads.registry import load_workload
from tests.builders import B, I, X, build, roofline, table
from tests.game.test_property import _scale, instances

CONFORMANCE = Path(__file__).parents[1] / "data" / "conformance"
NAMES = sorted(p.stem for p in CONFORMANCE.glob("*.json"))


def _load(name: str):
    doc = json.loads((CONFORMANCE / f"{name}.json").read_text())
    return instance_from_dict(doc["instance"]), doc.get("optimal_reward_s")


def _tol(inst) -> float:
    """Absolute slack: the scaled objective is exact to 1e-6 of the trivial bound."""
    return 1e-5 * max(bound_details(inst, lp=False)["trivial_s"], 0.0) + 1e-15


@pytest.fixture(scope="module")
def conformance_results():
    out = {}
    for name in NAMES:
        inst, optimal = _load(name)
        if optimal is None:
            optimal = exhaustive_search(Game(inst), max_nodes=5_000_000)[0]
        solution = ExactSolver().solve(inst, SolveRequest(seed=0, seconds=20))
        out[name] = (inst, optimal, solution)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_exact_reaches_the_game_optimum(conformance_results, name: str) -> None:
    inst, optimal, solution = conformance_results[name]
    assert solution.info["status"] == "OPTIMAL"
    assert solution.actions is None
    assert solution.reward_s >= optimal - _tol(inst), (solution.reward_s, optimal)
    report = check_solution(inst, solution)
    assert report.ok, report.summary()


@pytest.mark.parametrize("name", NAMES)
def test_exact_never_exceeds_its_bounds(conformance_results, name: str) -> None:
    inst, optimal, solution = conformance_results[name]
    bound = solution.bound_s
    assert solution.reward_s <= bound * (1 + 1e-12) + 1e-15
    assert optimal <= bound * (1 + 1e-12) + 1e-15  # the bound covers every game
    assert solution.info["cp_bound_s"] is not None
    ub = upper_bound(inst)
    assert ub >= solution.reward_s * (1 - 1e-12) - 1e-15
    assert ub == pytest.approx(solution.info["upper_bound_s"])


def test_conformance_optima_are_reached_exactly() -> None:
    """The vectors with a recorded optimum: no better mapping exists in the game, and
    exact meets it to the rounding of its scaled objective."""
    for name in ("tiny_alias", "tiny_chain", "tiny_pair", "tiny_square"):
        inst, optimal = _load(name)
        solution = ExactSolver().solve(inst, SolveRequest(seconds=10))
        assert solution.reward_s == pytest.approx(optimal, rel=1e-9)


@pytest.mark.parametrize("hints", [True, False])
def test_fast_memory_slower_than_slow_keeps_the_model_exact(hints: bool) -> None:
    from tests.builders import build_doc

    # Three 3000-byte reads of a compute-bound instruction lose 27 s each when fast (fast
    # 100 B/s, slow 1000 B/s); a 10-byte read of their alias group saves 10 s elsewhere.
    group = [B(b, alias="g", demand=0.0) for b in range(3)]
    doc = build_doc(
        [X(3000), X(3000), X(3000), X(10)],
        [
            I(reads=group, latency=roofline(1e6)),
            I(reads=[B(3, alias="g", demand=0.0)], latency=table([0], [10.0, 0.0])),
        ],
        capacity=4096,
        alignment=1,
    )
    doc["hardware"].update(fast_bandwidth=100.0, slow_bandwidth=1000.0)
    inst = instance_from_dict(doc)
    assert exhaustive_search(Game(inst))[0] == 10.0
    options = {} if hints else {"warm_start": False, "heuristic_start": False}
    solution = ExactSolver().solve(inst, SolveRequest(seconds=10, options=options))
    assert solution.info["status"] == "OPTIMAL" and solution.reward_s == 10.0
    assert solution.bound_s >= 10.0 and solution.info["cp_bound_s"] >= 10.0
    assert check_solution(inst, solution).ok


@settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(instances())
def test_exact_matches_exhaustive_on_random_instances(inst) -> None:
    try:
        best = exhaustive_search(Game(inst), max_nodes=300_000)[0]
    except SolverError:
        return
    solution = ExactSolver().solve(inst, SolveRequest(seconds=10))
    assert check_solution(inst, solution).ok
    assert solution.info["status"] == "OPTIMAL"
    tol = 1e-6 * _scale(inst) + 1e-12
    assert solution.reward_s >= best - tol
    assert solution.bound_s >= best - tol
    assert upper_bound(inst) >= solution.reward_s - 1e-9 * abs(solution.reward_s) - 1e-15


def test_exact_proves_a_tiny_optimum_without_a_hint() -> None:
    """Regression: a roofline term's ``r_t`` was only bounded above (``r <= a``, ``r <=
    b + ...``), so without a hint CP-SAT (seed 0, one worker) raised the objective by
    2 units per solution and spent the whole 10 s budget on these 10 buffers without
    proving the optimum (status FEASIBLE). Found by the random-instance test, where it
    failed whenever the warm start's hint did not pin the optimum."""
    inst = build(
        [
            X(96, last_use=3),
            X(837),
            X(117),
            X(117, live_out=True),
            X(0, live_out=True),
            X(0),
            X(234),
            X(96),
            X(0),
        ],
        [
            I(
                writes=[B(2, demand=0.11699999999999999), B(3, demand=0.11699999999999999)],
                supply=2.0,
                count=3,
                latency=roofline(5.0),
            ),
            I(
                reads=[B(1, alias="k", demand=0.1674)],
                writes=[B(4, demand=0.0), B(5, alias="k", demand=0.0)],
                supply=2.0,
                count=4,
                latency=roofline(5.0, 0.5),
            ),
            I(writes=[B(6, demand=2.34)], supply=0.0, latency=table([], [19.56485316542406])),
            I(
                reads=[B(5, demand=0.0), B(2, demand=0.585)],
                writes=[B(7, demand=0.48), B(8, demand=0.0)],
                supply=0.5,
                count=2,
                latency=roofline(1.0),
            ),
        ],
        alignment=256,
        capacity=2048,
    )
    best = exhaustive_search(Game(inst))[0]
    for seed in (0, 1):
        solution = ExactSolver().solve(
            inst,
            SolveRequest(
                seed=seed, seconds=10, options={"warm_start": False, "heuristic_start": False}
            ),
        )
        assert solution.info["status"] == "OPTIMAL", (seed, solution.info["status"])
        assert solution.reward_s == pytest.approx(best, rel=1e-9)
        assert check_solution(inst, solution).ok


def _presolve_bug_instance():
    """Ten buffers on which CP-SAT 9.15's presolve proves the (feasible) model INFEASIBLE
    ("Presolve bug: model with feasible hint found UNSAT after presolve" with the optimum
    as a hint); found by the random-instance test. A zero-size tensor, and two alias
    groups that each join a read of x1 to an output of the same instruction."""
    return build(
        [
            X(0, live_out=True),
            X(201, live_out=True),
            X(404, live_out=True),
            X(1, live_out=True),
            X(1, live_out=True),
            X(1, live_out=True),
        ],
        [
            I(writes=[B(0, demand=0.0), B(1, demand=2.01)], supply=2.0, latency=table([], [0.0])),
            I(
                reads=[B(1, alias="a", demand=0.20099999999999998), B(0, demand=0.0)],
                writes=[B(2, demand=0.404), B(3, alias="a", demand=0.0)],
                supply=2.0,
            ),
            I(
                reads=[B(1, alias="b", demand=2.01), B(0, demand=0.0)],
                writes=[B(4, alias="b", demand=0.001), B(5, demand=0.001)],
                supply=2.0,
                latency=table([0, 1, 2], [0.0] * 8),
            ),
            I(supply=2.0, latency=table([], [0.0])),
        ],
        capacity=606,
    )


@pytest.mark.parametrize("budget", [{"seconds": 10}, {"work": 10_000}])
def test_exact_solves_again_when_cp_sat_wrongly_says_infeasible(budget) -> None:
    """Dropping everything satisfies the model, so an INFEASIBLE from CP-SAT is its own
    error: exact solves again with less presolve and proves the optimum (only the
    output x2 in fast memory: 3.636 s)."""
    inst = _presolve_bug_instance()
    best = exhaustive_search(Game(inst))[0]
    assert best == pytest.approx(3.636)
    solution = ExactSolver().solve(inst, SolveRequest(seed=0, **budget))
    assert solution.info["status"] == "OPTIMAL"
    assert solution.reward_s == pytest.approx(best, rel=1e-9)
    assert solution.bound_s >= best and solution.info["cp_bound_s"] is not None
    assert check_solution(inst, solution).ok
    for retry in solution.info.get("presolve_retries", []):  # none once CP-SAT is fixed
        assert retry in ("cp_model_probing_level=0", "cp_model_presolve=False")


def test_exact_retries_with_less_presolve_after_an_infeasible(monkeypatch) -> None:
    """The retry itself, independent of CP-SAT's bug: the first search answers
    INFEASIBLE (faked); exact solves again without presolve probing, adds both searches'
    work, and proves the optimum."""
    inst = _presolve_bug_instance()
    real_solve = cp_model.CpSolver.solve
    searches: list[bool] = []

    def solve(self, model, callback=None):
        if callback is None:  # the hint's completion
            return real_solve(self, model)
        searches.append(self.parameters.cp_model_probing_level == 0)
        status = (
            real_solve(self, model) if len(searches) == 1 else real_solve(self, model, callback)
        )
        return cp_model.INFEASIBLE if len(searches) == 1 else status

    monkeypatch.setattr(cp_model.CpSolver, "solve", solve)
    solution = ExactSolver().solve(inst, SolveRequest(seed=0, seconds=10))
    assert searches == [False, True]
    assert solution.info["presolve_retries"] == ["cp_model_probing_level=0"]
    assert solution.info["status"] == "OPTIMAL"
    assert solution.reward_s == pytest.approx(3.636, rel=1e-9)
    assert check_solution(inst, solution).ok


def test_suite_program_within_budget() -> None:
    inst = load_workload("xla-v1/lstm_infer")
    # a work budget of 10^6 s of deterministic time: the clock (or the optimum) ends it
    solution = ExactSolver().solve(inst, SolveRequest(seed=0, seconds=4.0, work=10**9))
    assert solution.work["dtime_ms"] < 10**9
    report = check_solution(inst, solution)
    assert report.ok, report.summary()
    assert solution.reward_s > 0
    assert solution.bound_s >= solution.reward_s
    assert solution.info["status"] in ("OPTIMAL", "FEASIBLE")
    assert solution.work["dtime_ms"] > 0
    assert upper_bound(inst) >= solution.reward_s


def test_large_program_honours_a_short_budget() -> None:
    inst = load_workload("synthetic-v1/4k")
    solution = ExactSolver().solve(inst, SolveRequest(seed=0, seconds=3.0))
    # building the model of 4,000 buffers would take longer than the budget: it is
    # skipped, and the best warm start is the answer
    assert solution.info["status"] == "NOT_RUN" and solution.work["dtime_ms"] == 0
    assert check_solution(inst, solution).ok
    assert solution.bound_s >= solution.reward_s
    # named as the warm start it is (the heuristic's mapping was called a game's)
    warm = solution.info["warm_start"]
    expected = "heuristic" if warm.get("heuristic_reward_s") == solution.reward_s else "game"
    assert solution.info["source"] == expected
    assert solution.info["note"].endswith(f"the best warm start returned ({expected})")
    if expected == "game":
        assert solution.reward_s == warm["game_reward_s"]


def test_work_budget_is_reproducible() -> None:
    inst, _ = _load("random105")
    a = ExactSolver().solve(inst, SolveRequest(seed=3, work=50))
    b = ExactSolver().solve(inst, SolveRequest(seed=3, work=50))
    assert a.allocations == b.allocations and a.reward_s == b.reward_s
    assert a.work["dtime_ms"] <= 50 + 5


def test_callback_sees_improvements() -> None:
    inst = load_workload("synthetic-v1/small")
    seen = []
    final = ExactSolver().solve(inst, SolveRequest(seed=0, seconds=5.0, callback=seen.append))
    rewards = [imp.solution.reward_s for imp in seen]
    assert rewards and rewards == sorted(rewards)
    assert rewards[-1] == pytest.approx(final.reward_s)
    assert all(check_solution(inst, imp.solution).ok for imp in seen)


def test_copy_interval_helpers_match_the_checker() -> None:
    supply = [1.0, 0.5, 0.0, 0.25, 2.0]
    target = lambda d: (1 - SUPPLY_RTOL) * d  # noqa: E731
    # copy-in before step 4: [s, 3]
    assert copy_in_start(supply, 4, 0.25, 0) == 3
    assert copy_in_start(supply, 4, 0.5, 0) == 1
    assert copy_in_start(supply, 4, 0.75, 0) == 1
    assert copy_in_start(supply, 4, 1.0, 0) == 0
    assert copy_in_start(supply, 4, 1.0, 1) is None  # may not start at or before def_time
    assert copy_in_start(supply, 4, 0.0, 2) == 4  # zero demand: no copy interval
    for d in (0.1, 0.3, 0.75, 1.7):
        s = copy_in_start(supply, 4, d, 0)
        assert math.fsum(supply[s:4]) >= target(d)
        assert s == 3 or math.fsum(supply[s + 1 : 4]) < target(d)
    # copy-out after step 0: [1, e]
    assert copy_out_end(supply, 0, 0.5) == 1
    assert copy_out_end(supply, 0, 0.6) == 3
    assert copy_out_end(supply, 0, 2.0) == 4
    assert copy_out_end(supply, 0, 3.0) is None
    assert copy_out_end(supply, 4, 0.1) is None
    assert copy_out_end(supply, 2, 0.0) == 2


def test_exact_options_are_checked_before_any_work(monkeypatch) -> None:
    solver = ExactSolver()
    solver.check_options(
        {
            "workers": 2,
            "cumulative": False,
            "warm_start": True,
            "warm_start_s": 0.5,
            "heuristic_start": False,
            "force_model": True,
            "log": False,
        }
    )
    solver.check_options({"workers": 1.0, "log": 0, "warm_start_s": None})
    with pytest.raises(
        SolverError, match=r"exact: unknown option 'worker' \(valid: workers, cumulative"
    ):
        solver.check_options({"worker": 2})
    for bad, needle in [
        ({"workers": "two"}, "option workers must be a whole number"),
        ({"workers": 0}, r"option workers must be in \[1, 256\], not 0"),
        ({"workers": 1.5}, "workers must be"),
        ({"log": "perhaps"}, "log must be true or false"),
        ({"force_model": 2}, "force_model"),
        ({"warm_start_s": -1}, "warm_start_s must be"),
    ]:
        with pytest.raises(SolverError, match=needle):
            solver.check_options(bad)
    inst, _ = _load(NAMES[0])

    def no_work(*args, **kwargs):
        raise AssertionError("work started before the options were checked")

    import mallocgame.solvers.exact as exact

    for name in ("MappingModel", "warm_start", "_heuristic_mapping", "bound_details"):
        monkeypatch.setattr(exact, name, no_work)
    with pytest.raises(SolverError, match="exact: unknown option 'worker'"):
        solver.solve(inst, SolveRequest(seconds=30, options={"worker": 2}))


def test_a_warm_start_games_reward_is_exact_where_latencies_cancel() -> None:
    """Instruction 1's table holds 1.0 s beside 1.35e-14 s: the game's running return (a float
    sum of gains) is off by a relative 4e-4 on a quarter of random games, far past SPEC
    section 7's 1e-9 (found by the Hypothesis test above under load, where the warm start's
    game was the answer). The warm start reports its best game's exact reward."""
    import numpy as np

    from mallocgame.game.backup import DropBackup
    from mallocgame.instance import load_instance
    from mallocgame.latency import mapping_reward
    from mallocgame.solvers.exact import warm_start

    inst = load_instance(Path(__file__).parent.parent / "data" / "cancelling_latencies.json")
    game, rng, off = Game(inst), np.random.default_rng(0), 0
    for _ in range(40):
        game.reset()
        driver = DropBackup(game)
        while not game.complete:
            driver.step(int(rng.choice(np.flatnonzero(driver.allowed()))))
        exact = mapping_reward(inst, [a.buffer for a in game.allocations()])
        off += abs(game.return_s - exact) > 1e-9 * exact
    assert off > 0  # the game's own return is not the reward here
    reward, allocations, info = warm_start(inst, None, 0, max_moves=3)
    assert reward > 0 and reward == mapping_reward(inst, [a.buffer for a in allocations])
    assert info["reward_s"] == reward
    solution = ExactSolver().solve(
        inst, SolveRequest(seconds=10, options={"heuristic_start": False})
    )
    assert check_solution(inst, solution).ok


def test_a_work_budget_completes_its_hint_in_deterministic_time(monkeypatch) -> None:
    """Without a wall clock the warm start's hint is completed under CP-SAT's deterministic
    time, never a wall-clock limit: the answer cannot depend on the machine's speed."""
    from mallocgame.solvers import exact

    limits: list[tuple[float | None, float | None]] = []
    complete = exact.MappingModel.complete_hint

    def recorded(self, seconds, deterministic_s=None):
        limits.append((seconds, deterministic_s))
        return complete(self, seconds, deterministic_s)

    monkeypatch.setattr(exact.MappingModel, "complete_hint", recorded)
    inst = load_workload("xla-v1/gru_infer")
    ExactSolver().solve(inst, SolveRequest(seed=0, work=200))
    assert limits and all(limit == (None, exact.HINT_DETERMINISTIC_S) for limit in limits)
    limits.clear()
    ExactSolver().solve(inst, SolveRequest(seed=0, seconds=20.0, work=200))
    assert limits and all(limit == (1.0, None) for limit in limits)  # a twentieth of 20 s


def test_a_spent_budget_starts_no_game_and_a_short_one_skips_the_lp(lstm) -> None:
    from mallocgame.solvers.exact import LP_S_PER_BUFFER, warm_start

    reward, allocations, info = warm_start(lstm, 0.0, 0)
    assert (reward, allocations, info["games"]) == (0.0, [], 0)
    assert warm_start(lstm, None, 0)[2]["games"] == 3  # without a clock: the three games

    short = 0.5 * 4 * LP_S_PER_BUFFER * lstm.num_buffers  # the LP would take over a quarter
    solution = ExactSolver().solve(lstm, SolveRequest(seconds=short))
    trivial, with_lp = bound_details(lstm, lp=False)["bound_s"], bound_details(lstm)["bound_s"]
    assert with_lp < trivial and solution.info["upper_bound_s"] == trivial
    assert check_solution(lstm, solution).ok


def test_warm_start_seconds_stay_inside_a_wall_clock_budget(monkeypatch) -> None:
    """``warm_start_s=20`` under a 2 s budget took 21.5 s: the games now get at most what
    the budget leaves after building the model and half a second of search. On a fake
    clock (the heuristic taking 0.25 s; the games, the three played without a clock,
    taking their share) that share is exact, and the model is still built and searched."""
    from mallocgame.solvers import base, exact

    now = [0.0]  # the clock every stopwatch reads, seconds
    monkeypatch.setattr(base, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    heuristic, games = exact._heuristic_mapping, exact.warm_start
    shares: list = []

    def timed_heuristic(instance, seed):
        now[0] += 0.25
        return heuristic(instance, seed)

    def timed_games(instance, seconds, seed, **kwargs):  # the games spend their share
        shares.append(seconds)
        played = games(instance, None, seed, **kwargs)
        now[0] += seconds
        return played

    monkeypatch.setattr(exact, "_heuristic_mapping", timed_heuristic)
    monkeypatch.setattr(exact, "warm_start", timed_games)
    inst = load_workload("xla-v1/gru_infer")
    options = {"warm_start_s": 20}
    solution = ExactSolver().solve(inst, SolveRequest(seed=0, seconds=2.0, options=options))
    build_s = 3 * exact.build_seconds(inst)
    assert shares == [pytest.approx(2.0 - 0.25 - build_s - 0.5)] and shares[0] > 0
    assert solution.wall_s == pytest.approx(2.0 - build_s - 0.5)  # left: model and search
    assert solution.info["status"] != "NOT_RUN" and solution.info["warm_start"]["games"] == 3
    assert check_solution(inst, solution).ok


def test_workers_with_a_work_budget_alone_are_refused() -> None:
    """workers=2 with --work was taken: CP-SAT's workers raced, and three runs of one seed
    gave two answers (and spent more deterministic time than the budget)."""
    inst, _ = _load("random105")
    with pytest.raises(SolverError, match="workers=2 with a work budget alone"):
        ExactSolver().solve(inst, SolveRequest(seed=0, work=50, options={"workers": 2}))
    with pytest.raises(SolverError, match="workers=2 with a work budget alone"):  # a sweep's
        ExactSolver().check_options({"workers": 2}, work=50)
    ExactSolver().check_options({"workers": 2}, seconds=5.0, work=50)
    ExactSolver().check_options({"workers": 2})  # no budget named: none to refuse
    both = ExactSolver().solve(
        inst, SolveRequest(seed=0, work=50, seconds=5, options={"workers": 2})
    )
    assert check_solution(inst, both).ok


def test_warm_start_seconds_with_a_work_budget_alone_are_refused() -> None:
    """``warm_start_s`` with --work alone was taken: the warm start played random games for
    that many seconds of wall clock, so one seed's answer depended on the machine's speed.
    It is refused there (in a sweep's check too); the default (three games) stands."""
    inst, _ = _load("tiny_pair")
    options = {"warm_start_s": 0.01}
    with pytest.raises(SolverError, match=r"warm_start_s=0\.01 with a work budget alone"):
        ExactSolver().solve(inst, SolveRequest(seed=0, work=50, options=options))
    with pytest.raises(SolverError, match="warm_start_s=0.01 with a work budget alone"):
        ExactSolver().check_options(options, work=50)  # a sweep's
    ExactSolver().check_options(options, seconds=5.0, work=50)
    ExactSolver().check_options(options)  # no budget named: none to refuse
    ExactSolver().check_options({"warm_start_s": None}, work=50)
    solution = ExactSolver().solve(inst, SolveRequest(seed=0, work=50))
    assert solution.info["warm_start"]["games"] == 3
    # 0 s plays no game, whatever the clock: reproducible, so taken as it was
    ExactSolver().check_options({"warm_start_s": 0}, work=50)
    none = ExactSolver().solve(inst, SolveRequest(seed=0, work=50, options={"warm_start_s": 0}))
    assert none.info["warm_start"]["games"] == 0


def _alias_chain(n: int):
    """``n`` in-place updates in one alias group (instruction ``k + 1`` reads tensor ``k``
    and writes tensor ``k + 1``), every tensor read again at the end: every member of the
    group may hold most steps, so the model cuts it into one box per step."""
    xs = [X(100, last_use=n + 1) for _ in range(n + 1)] + [X(1)]
    chain = [I(reads=[B(k, alias="a")], writes=[B(k + 1, alias="a")]) for k in range(n)]
    return build(xs, [I(writes=[n + 1]), *chain, I(reads=[0, n])], capacity=10**5, alignment=1)


def test_group_step_cells_count_the_per_step_boxes_the_model_builds(monkeypatch) -> None:
    """The build's cost grows with each cut alias group's members times the steps of the
    cut they cover; the estimate counts them as the build makes them."""
    from mallocgame.solvers import exact

    # two updates: members [0, 1], [1, 3], [2, 2], [2, 3] (steps), two of them holding each
    # of steps 1 to 3: three step boxes and 1 + 3 + 1 + 2 member steps
    assert exact.group_step_cells(_alias_chain(2)) == 10
    assert exact.group_step_cells(build([X(100), X(100)], [I(writes=[0, 1]), I(reads=[0, 1])])) == 0
    made = [0]
    step_box = exact.MappingModel._add_step_box

    def counted(self, rects, g, t, covs):
        made[0] += 1 + len(covs)
        return step_box(self, rects, g, t, covs)

    monkeypatch.setattr(exact.MappingModel, "_add_step_box", counted)
    for inst in (_alias_chain(2), _alias_chain(9), load_workload("xla-v1/gru_infer")):
        made[0] = 0
        exact.MappingModel(inst)
        assert made[0] == exact.group_step_cells(inst) > 0


def test_a_model_whose_group_boxes_cannot_be_built_in_the_budget_is_skipped(monkeypatch) -> None:
    """The estimate counted buffers only: 1,716 buffers of one alias group took 7 s to
    build, and a 6 s budget 11 s. On a fake clock: a budget the buffers alone fit in, but
    not the group's per-step boxes, skips the model (NOT_RUN; the warm start answers)."""
    from mallocgame.solvers import base, exact

    now = [0.0]  # the clock every stopwatch reads, seconds: it stands still
    monkeypatch.setattr(base, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    games = exact.warm_start
    monkeypatch.setattr(exact, "warm_start", lambda inst, s, seed, **kw: games(inst, None, seed))

    def no_model(*args, **kwargs):
        raise AssertionError("the model was built")

    monkeypatch.setattr(exact, "MappingModel", no_model)
    inst = _alias_chain(200)
    seconds = 2.0
    assert 3 * exact.BUILD_S_PER_BUFFER * inst.num_buffers + 0.5 < seconds
    assert 3 * exact.build_seconds(inst) + 0.5 > seconds
    options = {"heuristic_start": False}
    solution = ExactSolver().solve(inst, SolveRequest(seed=0, seconds=seconds, options=options))
    assert solution.info["status"] == "NOT_RUN" and solution.info["source"] in ("game", "drop")
    assert check_solution(inst, solution).ok


def test_the_docs_state_the_copy_walks_stopping_threshold() -> None:
    """docs/exact-model.md said the copy walk stops once the demand left is at most 1e-9 of
    it; SPEC section 4 and the walk (``REL_EPS``) say 1e-12."""
    import re

    from mallocgame.game.kernels import REL_EPS

    text = (Path(__file__).parents[2] / "docs" / "exact-model.md").read_text()
    stated = re.findall(r"once the demand left is at most `([^`]+)` of it", text)
    assert stated and all(float(eps) == REL_EPS for eps in stated), stated


def test_contested_hull_is_the_first_and_last_step_two_ranges_share() -> None:
    """The model's cut of an alias group and its build estimate (group_step_cells) take
    the hull from one function; it agrees with counting every step's ranges."""
    import random

    from mallocgame.solvers.exact import contested_hull

    rng = random.Random(0)
    for _ in range(500):
        ranges = []
        for _ in range(rng.randint(1, 6)):
            r0 = rng.randint(0, 30)
            ranges.append((r0, r0 + rng.randint(0, 10)))
        shared = [t for t in range(42) if sum(r0 <= t <= r1 for r0, r1 in ranges) > 1]
        assert contested_hull(ranges) == ((min(shared), max(shared)) if shared else None)


def test_a_skipped_model_never_answers_below_dropping_every_buffer(monkeypatch) -> None:
    """Where the model is skipped, the answer is the best warm start that gains: the
    heuristic's mapping of negative reward (alias group g: 1 s faster at one read, 2 s
    slower at the other, -1 s in all) is no answer; dropping every buffer (0 s) is."""
    from mallocgame.solvers import exact

    inst = build(
        [X(1)],
        [
            I(supply=1.0),
            I(reads=[B(0, alias="g")], latency=table([0], [1.0, 0.0])),
            I(supply=1.0),
            I(reads=[B(0, alias="g")], latency=table([0], [0.0, 2.0])),
        ],
        capacity=2,
        name="group-slower",
    )
    monkeypatch.setattr(exact._ExactRun, "model_fits", lambda self: False)
    solution = ExactSolver().solve(inst, SolveRequest(seed=0, seconds=5.0))
    assert solution.info["warm_start"]["heuristic_reward_s"] == -1.0
    assert solution.info["status"] == "NOT_RUN" and solution.info["source"] == "drop"
    assert solution.reward_s == 0.0 and check_solution(inst, solution).ok
