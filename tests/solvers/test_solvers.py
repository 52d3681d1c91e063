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


def test_random_reports_only_exact_improvements_where_the_running_sum_cancels() -> None:
    from tests.builders import B, I, X, build, table

    # A and B (alias group g) cancel at 1e12 s: the float running sum of a game with both
    # fast is off by about 1e-4, as large as the other two buffers' gains
    inst = build(
        [X(1), X(1), X(1)],
        [
            I(supply=1.0),
            I(reads=[0], latency=table([0], [1e-4, 0.0])),
            I(reads=[B(1, alias="g")], latency=table([0], [1e12, 0.0])),
            I(reads=[2], latency=table([0], [0.9e-4, 0.0])),
            I(reads=[B(1, alias="g")], latency=table([0], [0.0, 1e12])),
        ],
        capacity=1 << 20,
    )
    for seed in range(8):
        seen: list = []
        answer = get_solver("random").solve(
            inst, SolveRequest(seed=seed, work=50, callback=seen.append)
        )
        rewards = [improvement.solution.reward_s for improvement in seen]
        assert all(a < b for a, b in zip(rewards, rewards[1:])), (seed, rewards)
        assert answer.reward_s == rewards[-1] and check_solution(inst, answer).ok


def test_exhaustive_solver_is_optimal_and_valid() -> None:
    inst = _conformance("random104")
    solution = get_solver("exhaustive").solve(inst)
    assert check_solution(inst, solution).ok
    assert solution.reward_s == pytest.approx(9.836267134397589e-06, rel=1e-12)
    assert solution.bound_s == solution.reward_s
    random = get_solver("random").solve(inst, SolveRequest(seed=0, work=20))
    assert random.reward_s <= solution.reward_s * (1 + 1e-12)


def test_exhaustive_answer_checks_where_the_running_sum_cancels() -> None:
    from tests.test_check_exact import _cancelling_table_instance

    inst = _cancelling_table_instance()
    solution = get_solver("exhaustive").solve(inst)
    assert check_solution(inst, solution).ok  # its bound too, the best game's own reward
    assert solution.reward_s == solution.bound_s == 643286584.5


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
        (
            "es",
            {"optimizer": "sgd"},
            {"sigma": "wide"},
            "es: option sigma must be a number, not 'wide'",
        ),
        (
            "es",
            {"population": "6"},
            {"population": 2.5},
            "es: option population must be a whole number",
        ),
        ("es", {"workers": 1}, {"workers": True}, "es: option workers must be a whole number"),
        (
            "es",
            {"init": "zeros"},
            {"optimizer": "adagrad"},
            "es: option optimizer must be one of 'adam', 'sgd'",
        ),
        ("mcts", {"simulations": 8, "c": 1.0}, {"simulation": 8}, "mcts: unknown option"),
        ("mcts", {"reuse": False}, {"c": -1}, r"^mcts: option c must be in \[0, 1e6\], not -1\.0$"),
        (
            "heuristic",
            {"max_overlap_basis": "buffer"},
            {"basis": "buffer"},
            "heuristic: unknown option",
        ),
        (
            "heuristic",
            {"skip_unprofitable": "no"},
            {"skip_unprofitable": "maybe"},
            "must be true or false",
        ),
        (
            "heuristic",
            {"preferred_overlap_to_async_copy_ratio": 2},
            {"preferred_overlap_to_async_copy_ratio": "fast"},
            "heuristic: option preferred_overlap_to_async_copy_ratio",
        ),
    ],
)
def test_check_options_matches_what_solve_reads(
    name: str, good: dict, bad: dict, needle: str
) -> None:
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
    option = {
        "es": ("sigma", 0.2),
        "mcts": ("c", 0.7),
        "heuristic": ("skip_unprofitable", False),
        "muzero": ("imitation", 0.25),
        "best-of": ("solvers", "heuristic,greedy"),
    }[name]
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

        class Nameless(Solver):
            def search(self, instance, config, run):
                raise AssertionError

    @dataclass
    class Mutable:
        depth: int = 1

    with pytest.raises(TypeError, match="not a frozen dataclass"):

        class Loose(Solver, name="loose", config=Mutable):
            def search(self, instance, config, run):
                raise AssertionError


# --------------------------------------------------------------- requests and entry checks


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"seed": -1}, r"^seed must be a whole number from 0 to 2\*\*63 - 1, not -1$"),
        ({"seed": "abc"}, r"seed must be a whole number .*, not 'abc'$"),
        ({"seed": 2**63}, r"seed must be a whole number .*, not 9223372036854775808$"),
        ({"seed": 2**70}, "seed must be a whole number"),
        ({"seed": True}, r"seed must be a whole number .*, not True$"),
        ({"seed": 1.0}, "seed must be a whole number"),
        (
            {"work": 2.5},
            r"^work \(the work budget\) must be a whole number from 1 to 2\*\*53, "
            r"not 2\.5$",
        ),
        ({"work": 0}, r"work \(the work budget\) must be a whole number from 1 to 2\*\*53, not 0$"),
        ({"work": -5}, "work .the work budget. must be a whole number"),
        ({"work": True}, "work .the work budget. must be a whole number"),
        ({"work": 2**53 + 1}, "work .the work budget. must be a whole number"),
        (
            {"seconds": -1},
            r"^seconds \(the wall-clock budget\) must be in \(0, 604800\] \(7 days\), not -1$",
        ),
        ({"seconds": 0}, r"seconds .the wall-clock budget. must be in \(0, 604800\]"),
        (
            {"seconds": float("nan")},
            r"seconds .the wall-clock budget. must be in \(0, 604800\] .7 days., not nan$",
        ),
        ({"seconds": float("inf")}, r"seconds .the wall-clock budget. must be in"),
        ({"seconds": 8 * 24 * 3600}, r"seconds .the wall-clock budget. must be in"),
        ({"seconds": "10"}, r"^seconds \(the wall-clock budget\) must be a number, not '10'$"),
        ({"seconds": True}, "seconds .the wall-clock budget. must be a number"),
        ({"options": "a=1"}, "options must be a mapping of option names to values"),
        ({"callback": 3}, "callback must be callable or None"),
        ({"progress": "games"}, "progress must be callable or None"),
        (
            {"demonstrations": 5},
            r"^demonstrations must be a sequence of Solution objects \(other solvers' "
            r"answers\), not int$",
        ),
        ({"demonstrations": "heuristic"}, r"demonstrations must be a sequence .*, not str$"),
        ({"demonstrations": {"a": 1}}, r"demonstrations must be a sequence .*, not dict$"),
        (
            {"demonstrations": ("heuristic",)},
            r"^demonstrations\[0\] must be a Solution \(another solver's answer\), not str "
            r"\(solver names go in muzero's option demonstrations\)$",
        ),
        ({"demonstrations": [None]}, r"^demonstrations\[0\] must be a Solution .*, not NoneType$"),
    ],
)
def test_a_bad_request_is_refused_where_it_is_made(kwargs: dict, needle: str) -> None:
    with pytest.raises(SolverError, match=needle):
        SolveRequest(**kwargs)


def test_a_request_keeps_its_values_as_plain_numbers() -> None:
    import numpy as np

    request = SolveRequest(seed=np.int64(7), seconds=np.float32(0.5), work=np.int32(3))
    assert (request.seed, request.seconds, request.work) == (7, 0.5, 3)
    assert [type(v) for v in (request.seed, request.seconds, request.work)] == [int, float, int]
    largest = SolveRequest(seed=2**63 - 1, seconds=7 * 24 * 3600, work=2**53)
    assert largest.seed == 2**63 - 1 and largest.seconds == 604800.0


def test_a_request_keeps_its_demonstrations_as_a_tuple(program) -> None:
    answer = get_solver("drop").solve(program)
    request = SolveRequest(work=1, demonstrations=[answer])
    assert request.demonstrations == (answer,)
    assert SolveRequest().demonstrations == ()


def test_solve_and_get_solver_refuse_what_is_not_an_instance_request_or_name(program) -> None:
    from mallocgame.errors import InstanceError

    with pytest.raises(InstanceError, match=r"^random: expected an Instance to solve, not None$"):
        get_solver("random").solve(None, SolveRequest(work=1))
    with pytest.raises(SolverError, match=r"^random: expected a SolveRequest, not \{'work': 1\}$"):
        get_solver("random").solve(program, {"work": 1})
    for name in (None, 3, ["es"]):
        with pytest.raises(SolverError, match=r"^a solver name is a string \(one of drop, "):
            get_solver(name)


MUZERO_TINY = {
    "parallel_games": 2,
    "greedy_games": 1,
    "num_simulations": 2,
    "min_replay": 16,
    "batch_size": 8,
    "width": 16,
    "latent_size": 8,
    "demonstrations": "heuristic,greedy",
}


@pytest.mark.parametrize(
    "name",
    # xla answers only for programs compiled for a TPU: its largest seed is taken in
    # tests/workloads/test_suite_tpu.py::test_xlas_answer_passes_check
    [n for n in SOLVERS if not n.startswith("muzero") and n not in ("egrl", "xla")]
    + ["muzero-nosearch", "egrl"],
)
def test_every_solver_takes_the_largest_seed(name: str) -> None:
    inst = _conformance("tiny_alias")
    tiny = {"muzero-nosearch": MUZERO_TINY, "egrl": {"policies": 1, "chromosomes": 2, "hidden": 8}}
    work = 100_000 if name == "exhaustive" else 4
    request = SolveRequest(seed=2**63 - 1, work=work, options=tiny.get(name, {}))
    solution = get_solver(name).solve(inst, request)
    assert solution.seed == 2**63 - 1 and check_solution(inst, solution).ok


def test_the_seed_derivations_of_jax_solvers_take_the_largest_seed() -> None:
    """muzero keys JAX with ``jax.random.PRNGKey(seed)`` and numpy with ``[seed, ...]``;
    egrl folds its seed to 32 bits first. Each must take every seed a request accepts."""
    import jax
    import numpy as np

    key = jax.random.PRNGKey(2**63 - 1)
    assert key.shape == (2,) and int(jax.random.randint(key, (), 0, 10)) in range(10)
    assert 0 <= np.random.default_rng([2**63 - 1, 2, 10**6]).integers(10) < 10
    with pytest.raises(OverflowError):  # why a request refuses 2**63: JAX cannot key it
        jax.random.PRNGKey(2**63)


def test_a_stopwatch_split_shares_its_start_and_takes_a_fraction_of_the_budget() -> None:
    from mallocgame.solvers.base import Stopwatch

    whole = Stopwatch(10.0)
    part = whole.until(0.25)
    assert part.start == whole.start and part.seconds == 2.5
    assert Stopwatch(None).until(0.5).seconds is None
    assert not part.expired()
    done = Stopwatch(10.0)
    done.start -= 3.0
    assert done.until(0.25).expired() and not done.expired()


def test_a_stopwatch_less_some_seconds_ends_that_much_earlier_never_before_its_start() -> None:
    from mallocgame.solvers.base import Stopwatch

    whole = Stopwatch(10.0)
    whole.start -= 8.0
    assert whole.less(1.5).seconds == 8.5 and whole.less(1.5).start == whole.start
    assert whole.less(2.5).expired() and not whole.less(1.5).expired()
    assert whole.less(20.0).seconds == 0.0 and Stopwatch(None).less(1.0).seconds is None


@pytest.mark.parametrize(
    ("work", "seconds", "default", "budget"),
    [
        (7, None, 3, 7),
        (7, 60.0, 3, 7),
        (None, None, 3, 3),
        (None, 60.0, 3, None),
        (None, None, None, None),
    ],
)
def test_the_run_owns_the_work_budget(work, seconds, default, budget) -> None:
    from mallocgame.solvers.base import Run, Stopwatch

    inst = generate(40, seed=0)
    run = Run("x", inst, SolveRequest(work=work, seconds=seconds), Stopwatch(seconds), default)
    assert run.work_budget == budget
    if budget is None:
        assert run.work_left(10**6) is None and not run.spent(10**6)
    else:
        assert run.work_left(2) == budget - 2
        assert not run.spent(budget - 1) and run.spent(budget)


def test_a_spent_clock_spends_the_run_whatever_work_is_left() -> None:
    from mallocgame.solvers.base import Run, Stopwatch

    clock = Stopwatch(1.0)
    clock.start -= 2.0
    run = Run("x", generate(40, seed=0), SolveRequest(work=5, seconds=1.0), clock)
    assert run.work_left(0) == 5 and run.spent(0)


@pytest.mark.parametrize(("name", "games"), [("random", 1), ("es", 10 * 17)])
def test_with_no_budget_a_solver_does_its_default_work(name, games) -> None:
    answer = get_solver(name).solve(generate(40, seed=0), SolveRequest(seed=0))
    assert answer.work["games"] == games


@pytest.mark.parametrize(
    "name, work, unit", [("random", 5, "games"), ("es", 12, "games"), ("greedy", None, None)]
)
def test_progress_sees_the_work_as_it_grows_or_the_answers_work(
    program, name: str, work: int | None, unit: str | None
) -> None:
    calls: list = []
    request = SolveRequest(seed=0, work=work, progress=calls.append)
    if name == "es":
        request = SolveRequest(seed=0, work=work, progress=calls.append, options={"population": 4})
    answer = get_solver(name).solve(program, request)
    if unit is None:  # a solver that counts nothing as it goes: the answer's work, once
        assert calls == [dict(answer.work)]
    else:  # one that does: each count once, growing, up to the answer's
        counts = [c[unit] for c in calls]
        assert counts and counts == sorted(set(counts)) and counts[-1] <= answer.work[unit]


@pytest.mark.parametrize("solver", ["exact", "heuristic", "msa-search", "random", "es"])
def test_an_alias_id_is_a_label_not_an_index(solver: str) -> None:
    """Relabelling one shared alias group (tiny_alias's buffers 6 and 7) changes no answer:
    ids of 1e9, 2**40 and 2**63 sized arrays by the largest id in the bound (exact answered
    0 at 2 GB, or ran out of memory) and overflowed int64 in exact and the heuristic."""
    doc = json.loads((CONFORMANCE / "tiny_alias.json").read_text())["instance"]
    answers = []
    for label in (6, 10**9, 2**40, 2**63):
        doc["buffers"][6]["alias_id"] = doc["buffers"][7]["alias_id"] = label
        inst = instance_from_dict(doc)
        assert inst.group_ids[6] == inst.group_ids[7] < inst.num_alias_groups
        solution = get_solver(solver).solve(inst, SolveRequest(seed=0, work=20))
        assert check_solution(inst, solution).ok
        answers.append((solution.reward_s, solution.allocations))
    assert all(a == answers[0] for a in answers)


def test_a_wall_clock_budget_starts_after_the_game_kernels_are_loaded(program, monkeypatch) -> None:
    """A fresh process loads the game's kernels in about half a second; solve() called
    from the library (not the command line, which loaded them itself) spent that on the
    solver's clock. Without a wall-clock budget nothing is loaded; bad options are refused
    before the loading."""
    import mallocgame.game.state as state
    import mallocgame.solvers.base as base

    calls: list[str] = []
    stopwatch = base.Stopwatch
    monkeypatch.setattr(state, "warm_game_kernels", lambda inst: calls.append("warm"))
    monkeypatch.setattr(base, "Stopwatch", lambda s: calls.append("clock") or stopwatch(s))
    get_solver("random").solve(program, SolveRequest(seed=0, seconds=0.05))
    assert calls == ["warm", "clock"]
    calls.clear()
    get_solver("random").solve(program, SolveRequest(seed=0, work=2))
    assert calls == ["clock"]
    calls.clear()
    with pytest.raises(SolverError, match="bogus"):
        get_solver("es").solve(program, SolveRequest(seed=0, seconds=0.05, options={"bogus": 1}))
    assert calls == []


@pytest.mark.parametrize(
    ("solver", "module", "needs"),
    [
        ("muzero", "mallocgame.solvers.muzero.train", "JAX, flax, optax and mctx"),
        ("egrl", "mallocgame.solvers.egrl.trainer", "JAX, flax and optax"),
    ],
)
def test_a_learning_solver_without_its_dependencies_names_the_extra(
    program, monkeypatch, solver: str, module: str, needs: str
) -> None:
    """Where the trainer cannot be imported (JAX missing), the solver says what it needs
    and which extra brings it, in one line."""
    import sys

    monkeypatch.setitem(sys.modules, module, None)  # importing it raises ImportError
    with pytest.raises(SolverError, match=rf"^{solver} needs {needs} \(pip install "):
        get_solver(solver).solve(program, SolveRequest(work=1))
