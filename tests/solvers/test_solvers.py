"""The solver interface (options included) and the drop, random, greedy and exhaustive solvers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mallocgame.check import check_solution
from mallocgame.errors import SolverError
from mallocgame.game import Game
from mallocgame.game.exhaustive import exhaustive_search
from mallocgame.instance import instance_from_dict
from mallocgame.solvers import SOLVERS, SolveRequest, get_solver
from mallocgame.workloads.synthetic import generate

CONFORMANCE = Path(__file__).parents[1] / "data" / "conformance"


def _conformance(name: str):
    return instance_from_dict(json.loads((CONFORMANCE / f"{name}.json").read_text())["instance"])


@pytest.fixture(scope="module")
def program():
    return generate(300, seed=3)


def test_registry_names() -> None:
    assert {"drop", "random", "exhaustive"} <= set(SOLVERS)
    with pytest.raises(SolverError, match="unknown solver"):
        get_solver("nope")
    with pytest.raises(SolverError, match="did you mean 'greedy'"):
        get_solver("greddy")


def test_drop_is_zero_and_valid(program) -> None:
    solution = get_solver("drop").solve(program)
    assert solution.reward_s == 0.0 and solution.allocations == ()
    assert solution.actions == (2,) * program.num_buffers
    assert check_solution(program, solution).ok


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_is_valid_and_reproducible(program, seed: int) -> None:
    a = get_solver("random").solve(program, SolveRequest(seed=seed, work=3))
    b = get_solver("random").solve(program, SolveRequest(seed=seed, work=3))
    assert check_solution(program, a).ok
    assert a.actions == b.actions and a.reward_s == b.reward_s
    assert a.work["games"] == 3
    assert a.reward_s > 0


def test_random_best_of_more_games_is_no_worse(program) -> None:
    one = get_solver("random").solve(program, SolveRequest(seed=5, work=1))
    many = get_solver("random").solve(program, SolveRequest(seed=5, work=8))
    # the first game of both runs is the same game, so the best of 8 includes it
    assert many.reward_s >= one.reward_s


def test_random_callback_sees_every_improvement(program) -> None:
    seen = []
    final = get_solver("random").solve(program, SolveRequest(seed=0, work=6, callback=seen.append))
    rewards = [imp.solution.reward_s for imp in seen]
    assert rewards == sorted(rewards) and len(set(rewards)) == len(rewards)
    assert rewards[-1] == final.reward_s
    assert all(imp.work["games"] >= 1 and imp.elapsed_s >= 0 for imp in seen)


def test_random_wall_clock_budget_records_work(program) -> None:
    # stops after the game running when time is up, long before a billion games
    solution = get_solver("random").solve(program, SolveRequest(seed=0, seconds=0.3, work=10**9))
    assert 1 <= solution.work["games"] < 10**9


def test_exhaustive_solver_is_optimal_and_valid() -> None:
    inst = _conformance("random104")
    solution = get_solver("exhaustive").solve(inst)
    assert check_solution(inst, solution).ok
    assert solution.reward_s == pytest.approx(9.836267134397589e-06, rel=1e-12)
    assert solution.bound_s == solution.reward_s
    random = get_solver("random").solve(inst, SolveRequest(seed=0, work=20))
    assert random.reward_s <= solution.reward_s * (1 + 1e-12)


def test_exhaustive_refuses_large_instances(program) -> None:
    with pytest.raises(SolverError, match="too large"):
        exhaustive_search(Game(program), max_nodes=1000)


def test_greedy_is_deterministic_valid_and_prefers_copy(program) -> None:
    a = get_solver("greedy").solve(program, SolveRequest(seed=0))
    b = get_solver("greedy").solve(program, SolveRequest(seed=9))
    assert a.actions == b.actions and check_solution(program, a).ok
    # replaying: wherever Copy was allowed and not forced away, greedy took it
    game = Game(program)
    first = game.legal_mask()
    assert a.actions[0] == int(first.argmax())


@pytest.mark.parametrize("name", ["drop", "random", "greedy", "exhaustive"])
def test_a_solver_without_options_rejects_any(name: str) -> None:
    inst = _conformance("random104")
    solver = get_solver(name)
    solver.check_options({})  # none given: fine
    with pytest.raises(SolverError, match=rf"^{name}: unknown option 'foo' \(valid: none\)$"):
        solver.check_options({"foo": 1})
    with pytest.raises(SolverError, match="unknown option 'foo'"):
        solver.solve(inst, SolveRequest(work=1, options={"foo": 1}))


def test_every_solver_accepts_no_options_at_all() -> None:
    for name in SOLVERS:
        get_solver(name).check_options({})


@pytest.mark.parametrize(
    "name, good, bad, needle",
    [
        ("es", {"population": 4, "sigma": 0.2}, {"popsize": 4}, "es: unknown option"),
        ("es", {"optimizer": "sgd"}, {"sigma": "wide"}, "es: option sigma must be a number, not 'wide'"),
        ("es", {"population": "6"}, {"population": 2.5}, "es: option population must be a whole number"),
        ("es", {"workers": 1}, {"workers": True}, "es: option workers must be a whole number"),
        ("es", {"init": "zeros"}, {"optimizer": "adagrad"}, "es: option optimizer must be one of 'adam', 'sgd'"),
        ("mcts", {"simulations": 8, "c": 1.0}, {"simulation": 8}, "mcts: unknown option"),
        ("mcts", {"reuse": False}, {"c": -1}, "mcts: need"),
        ("heuristic", {"max_overlap_basis": "buffer"}, {"basis": "buffer"}, "heuristic: unknown option"),
        ("heuristic", {"skip_unprofitable": "no"}, {"skip_unprofitable": "maybe"}, "must be true or false"),
        ("heuristic", {"preferred_overlap_to_async_copy_ratio": 2},
         {"preferred_overlap_to_async_copy_ratio": "fast"}, "heuristic: option preferred_overlap_to_async_copy_ratio"),
    ],
)
def test_check_options_matches_what_solve_reads(name: str, good: dict, bad: dict, needle: str) -> None:
    solver = get_solver(name)
    solver.check_options(good)
    with pytest.raises(SolverError, match=needle):
        solver.check_options(bad)
    with pytest.raises(SolverError, match=needle):
        solver.solve(_conformance("random104"), SolveRequest(work=1, options=bad))


@pytest.mark.parametrize("name", ["es", "mcts", "heuristic", "muzero", "best-of"])
def test_settings_fill_in_every_default_and_keep_the_options_given(name: str) -> None:
    solver = get_solver(name)
    defaults = solver.settings({})
    assert defaults and json.loads(json.dumps(defaults)) == defaults  # JSON values, as stored
    option = {"es": ("sigma", 0.2), "mcts": ("c", 0.7), "heuristic": ("skip_unprofitable", False),
              "muzero": ("imitation", 0.25), "best-of": ("solvers", "heuristic,greedy")}[name]
    changed = solver.settings(dict([option]))
    assert changed != defaults
    if name != "best-of":
        assert changed[option[0]] == option[1] and set(changed) == set(defaults)
    if name == "muzero":  # where a run keeps its files is not a setting of what it does
        assert solver.settings({"checkpoint_dir": "runs/x", "progress": "true"}) == defaults


def test_a_solver_without_settings_reports_the_options_given() -> None:
    assert get_solver("random").settings({}) == {}
    with pytest.raises(SolverError):
        get_solver("random").settings({"nope": 1})


def test_a_solver_declared_in_its_class_line(program) -> None:
    import mallocgame as mg
    from mallocgame.solvers.base import Run, Solver

    class FirstLegal(Solver, name="first-legal", work_unit="games"):
        def search(self, instance, config, run: Run):
            game = mg.Game(instance)
            mg.DropBackup(game).play(lambda g, allowed: int(allowed.argmax()))
            return run.game_answer(game, work={"games": 1})

    sol = FirstLegal().solve(program, SolveRequest(seed=4))
    assert (sol.solver, sol.seed, sol.work) == ("first-legal", 4, {"games": 1})
    assert check_solution(program, sol).ok
    assert FirstLegal.Config.__name__ == "NoConfig" and FirstLegal.work_unit == "games"
    with pytest.raises(SolverError, match="first-legal: unknown option 'x'"):
        FirstLegal().solve(program, SolveRequest(options={"x": 1}))


def test_a_solver_without_a_name_or_with_a_mutable_config_is_refused_where_defined() -> None:
    from dataclasses import dataclass

    from mallocgame.solvers.base import Solver

    with pytest.raises(TypeError, match="declares its name"):
        class Nameless(Solver):  # noqa: F841
            def search(self, instance, config, run):
                raise AssertionError

    @dataclass
    class Mutable:
        depth: int = 1

    with pytest.raises(TypeError, match="not a frozen dataclass"):
        class Loose(Solver, name="loose", config=Mutable):  # noqa: F841
            def search(self, instance, config, run):
                raise AssertionError
