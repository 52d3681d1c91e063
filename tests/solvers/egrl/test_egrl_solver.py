"""The ``egrl`` solver: valid answers in every mode, budgets, seeds, checkpoints, options."""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path
from types import SimpleNamespace

import jax
import numpy as np
import pytest
from flax import serialization

from mallocgame.check import check_solution
from mallocgame.errors import SolverError
from mallocgame.options import parse_config
from mallocgame.simulate import speedup
from mallocgame.solution import load_solution
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.solvers.base import Stopwatch
from mallocgame.solvers.checkpoint import BEST_NAME, CHECKPOINT_NAME
from mallocgame.solvers.egrl import EgrlConfig
from mallocgame.solvers.egrl.sac import learner_alpha
from mallocgame.solvers.egrl.trainer import DEFAULT_GENERATIONS, EgrlTrainer
from mallocgame.workloads.suite import suite_instance
from tests.builders import (
    I,
    X,
    build,
    cancelling_instance,
    reversed_normalizer_instances,
    table,
)

# Tiny networks and population (a generation of mode both: 3 chromosomes, 2 policies,
# 1 learner rollout). The networks compile once per process for xla-v1/lstm_infer's graph.
TINY = {"hidden": 8, "batch_size": 8, "min_replay": 2, "policies": 2, "chromosomes": 3, "elites": 1}


def _solve(inst, work=None, seconds=None, seed=0, callback=None, demonstrations=(), **options):
    request = SolveRequest(
        seed=seed,
        work=work,
        seconds=seconds,
        callback=callback,
        demonstrations=demonstrations,
        options={**TINY, **options},
    )
    return get_solver("egrl").solve(inst, request)


@pytest.mark.parametrize("mode", ["both", "evolution", "pg"])
def test_every_mode_gives_valid_answers(lstm, mode: str) -> None:
    improvements = []
    solution = _solve(lstm, work=14, mode=mode, callback=improvements.append)
    assert check_solution(lstm, solution).ok
    assert solution.solver == "egrl" and len(solution.actions) == lstm.num_buffers
    work = solution.work
    assert work["proposals"] == 14 and work["generations"] >= 2
    assert (work["updates"] > 0) == (mode != "evolution")
    assert solution.info["mode"] == mode
    sources = {
        "both": {"chromosome", "policy", "learner"},
        "evolution": {"chromosome", "policy"},
        "pg": {"learner"},
    }
    assert solution.info["best_from"] in sources[mode]
    rewards = [imp.solution.normalized_reward for imp in improvements]
    assert rewards == sorted(rewards) and len(set(rewards)) == len(rewards)  # each strictly better
    assert rewards[-1] == solution.normalized_reward
    assert [imp.work["proposals"] for imp in improvements] == sorted(
        imp.work["proposals"] for imp in improvements
    )


@pytest.mark.parametrize("kind", ["negative", "zero"])
def test_a_normalizer_that_is_not_positive_leaves_the_objective_as_it_is(kind: str) -> None:
    """Fitness rises with the return whatever the sign of R: with R < 0 a better
    demonstration is not replaced by a worse game, nor with R = 0 do all games tie."""
    inst = reversed_normalizer_instances()[kind]
    best = get_solver("exhaustive").solve(inst).reward_s
    drop = get_solver("drop").solve(inst)
    seen: list = []
    answer = _solve(
        inst,
        work=50,
        callback=seen.append,
        demonstrations=(drop,),
        mode="evolution",
        policies=0,
        chromosomes=4,
        elites=0,
    )
    assert answer.reward_s == best and check_solution(inst, answer).ok
    rewards = [i.solution.reward_s for i in seen]
    assert rewards == sorted(rewards)  # each improvement reported is one


def test_the_answer_improves_by_its_exact_reward_where_the_running_sum_cancels() -> None:
    """A game whose running sum cancels above the best one's (cancelling_instance) is no
    answer unless its exact reward is higher: the callback only ever improves, the answer
    is its last report and info["best_fitness"] is the answer's (seed 1 plays
    [0, 0, 2, x], of fitness 1.06 by its sum, after the optimum)."""
    inst = cancelling_instance()
    for seed in range(10):
        seen: list = []
        answer = _solve(
            inst,
            work=8,
            seed=seed,
            callback=seen.append,
            mode="evolution",
            policies=0,
            chromosomes=4,
        )
        rewards = [i.solution.reward_s for i in seen]
        assert all(a < b for a, b in zip(rewards, rewards[1:])), (seed, rewards)
        assert answer.reward_s == rewards[-1] and check_solution(inst, answer).ok
        assert answer.info["best_fitness"] == round(answer.normalized_reward, 9)


def test_generations_and_updates_are_counted(lstm) -> None:
    # Generation size 6; 2 generations evolve and learn (one update per proposal), the
    # third is evaluated and stops there.
    solution = _solve(lstm, work=18)
    assert solution.work["proposals"] == 18 and solution.work["generations"] == 2
    assert solution.work["updates"] == 12
    assert solution.info["alpha"] > 0 and np.isfinite(solution.info["critic_loss"])


def test_same_seed_and_work_give_the_same_answer(lstm) -> None:
    a = _solve(lstm, work=9, seed=5)
    b = _solve(lstm, work=9, seed=5)
    assert a.actions == b.actions and a.reward_s == b.reward_s and a.work == b.work
    drop = ("train_seconds",)
    assert {k: v for k, v in a.info.items() if k not in drop} == {
        k: v for k, v in b.info.items() if k not in drop
    }


def test_seeds_that_differ_past_32_bits_give_different_runs(lstm) -> None:
    small, large = (_solve(lstm, work=3, seed=seed, mode="evolution") for seed in (5, 5 + 2**32))
    assert (
        small.info["best_fitness"] != large.info["best_fitness"] or small.actions != large.actions
    )


def test_without_a_budget_it_runs_the_default_generations(lstm) -> None:
    solution = _solve(lstm, mode="evolution")
    assert solution.work["proposals"] == DEFAULT_GENERATIONS * 5


def test_wall_clock_budget_stops_promptly(lstm, monkeypatch) -> None:
    """The budget is checked between steps: on a fake clock, with each game taking 1/8 s
    of a 0.3 s budget, the run stops after the step that spends it (the third game),
    before a fourth, and answers with what it found."""
    import mallocgame.solvers.base as base

    now = [0.0]  # the clock every stopwatch reads, seconds
    monkeypatch.setattr(base, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    evaluate = EgrlTrainer._evaluate

    def timed(self, slot, clock, callback):  # each game takes 1/8 s
        evaluated = evaluate(self, slot, clock, callback)
        now[0] += 1 / 8
        return evaluated

    monkeypatch.setattr(EgrlTrainer, "_evaluate", timed)
    solution = _solve(lstm, seconds=0.3, mode="evolution", policies=0, chromosomes=4)
    assert check_solution(lstm, solution).ok
    assert solution.work["proposals"] == 3 and solution.wall_s == 3 / 8


def test_a_game_the_budget_ends_in_is_an_answer_not_an_evaluation(lstm) -> None:
    solution = _solve(lstm, seconds=1e-9, mode="evolution", policies=0, chromosomes=4)
    assert check_solution(lstm, solution).ok
    assert solution.work["proposals"] == 0  # nothing evaluated: no fitness, no replay entry
    assert solution.info["best_from"] == "chromosome, Drop first from buffer 0"


def test_speedup_fitness(lstm) -> None:
    solution = _solve(lstm, work=6, fitness="speedup")
    assert check_solution(lstm, solution).ok
    assert solution.info["best_fitness"] == pytest.approx(speedup(lstm, solution), rel=1e-6)


def test_a_demonstration_seeds_a_chromosome(lstm) -> None:
    demo = get_solver("greedy").solve(lstm, SolveRequest())
    other = dataclasses.replace(
        demo, instance_sha256="0" * 64, reward_s=1e9
    )  # another program's: ignored
    first = []
    solution = _solve(
        lstm, work=1, mode="evolution", demonstrations=[other, demo], callback=first.append
    )
    assert solution.actions == demo.actions and solution.reward_s == demo.reward_s
    assert first[0].solution.actions == demo.actions


@pytest.fixture(scope="module")
def es_demo(lstm):
    """A demonstration better than any answer the tiny runs below find (0.651 against
    0.642, the all-Copy one)."""
    return get_solver("es").solve(lstm, SolveRequest(seed=0, work=50))


def _search(solution) -> tuple:
    """What a run's search did, its answer aside: the work and the learner's metrics."""
    info = {k: v for k, v in solution.info.items() if k not in ("train_seconds", "best_fitness")}
    info.pop("best_from")
    return solution.work, info


@pytest.mark.parametrize(
    "options", [{"mode": "pg"}, {"chromosomes": 0}], ids=["pg", "no chromosomes"]
)
def test_a_demonstration_no_chromosome_can_take_is_a_candidate_answer(
    lstm, es_demo, options
) -> None:
    """Without a chromosome to seed, the demonstration is played once as a candidate
    answer: the answer is never worse than it, and the search is the run's without it
    (not an evaluation: not counted, not replayed)."""
    demo = es_demo
    plain = _solve(lstm, work=4, **options)
    assert plain.reward_s < demo.reward_s  # the run alone does not find as good an answer
    seen: list = []
    answer = _solve(lstm, work=4, demonstrations=(demo,), callback=seen.append, **options)
    assert answer.actions == demo.actions and answer.info["best_from"] == "demonstration"
    assert seen[0].solution.actions == demo.actions and seen[0].work["proposals"] == 0
    assert _search(answer) == _search(plain) and answer.work["proposals"] == 4
    drop = get_solver("drop").solve(lstm, SolveRequest())  # one the run beats
    beaten = _solve(lstm, work=4, demonstrations=(drop,), **options)
    assert beaten.actions == plain.actions and beaten.info == {
        **plain.info,
        "train_seconds": beaten.info["train_seconds"],
    }


def test_a_resumed_run_plays_its_demonstration_as_a_candidate_answer(
    lstm, es_demo, tmp_path
) -> None:
    """A resumed run's population comes from the checkpoint, so no chromosome can be
    seeded: the demonstration is played once as a candidate answer."""
    demo = es_demo
    options = {"mode": "evolution", "checkpoint_dir": str(tmp_path)}
    _solve(lstm, work=1, **options)
    answer = _solve(lstm, work=4, demonstrations=(demo,), **options)
    plain = _solve(lstm, work=4, mode="evolution")  # the uninterrupted run, no demonstration
    assert plain.reward_s < demo.reward_s
    assert answer.actions == demo.actions and answer.info["best_from"] == "demonstration"
    assert _search(answer) == _search(plain)


def test_the_largest_bundled_program_runs_through_the_networks() -> None:
    inst = suite_instance("xla-v2/resnet152_train_b16")  # 26,915 buffers
    solution = _solve(
        inst, work=1, mode="evolution", policies=1, chromosomes=0, elites=0
    )  # one policy proposal
    assert check_solution(inst, solution).ok
    assert solution.work["proposals"] == 1 and solution.info["best_from"] == "policy"


# ------------------------------------------------------------------ checkpoints


def _config(directory: Path | None = None, **options) -> EgrlConfig:
    extra = {"checkpoint_dir": str(directory)} if directory is not None else {}
    return parse_config(EgrlConfig, {**TINY, **extra, **options}, "egrl")


def _comparable(trainer: EgrlTrainer) -> list:
    state = trainer.state_dict()
    del state["fingerprint"]
    state["counters"].pop("seconds")
    return jax.tree_util.tree_leaves(state)


def _assert_same(a: EgrlTrainer, b: EgrlTrainer) -> None:
    left, right = _comparable(a), _comparable(b)
    assert len(left) == len(right)
    for x, y in zip(left, right):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_a_resumed_run_continues_as_the_uninterrupted_one(lstm, tmp_path: Path) -> None:
    full = EgrlTrainer(lstm, _config())
    full_answer = full.run(proposals=17)
    first = EgrlTrainer(lstm, _config(tmp_path))
    first.run(proposals=8)  # stops inside generation 1's evaluations
    second = EgrlTrainer(lstm, _config(tmp_path))
    assert second.resumed and second.counters.proposals == 8
    second.run(proposals=12)  # into generation 2 ...
    for _ in range(3):  # the evaluation left, the evolution, one update
        second.step()
    assert (
        second.phase == "learn" and 0 < second.updates_left < 6
    )  # ... and stopped inside its learning
    second.save()
    third = EgrlTrainer(lstm, _config(tmp_path))
    answer = third.run(proposals=17)
    _assert_same(full, third)
    assert answer.actions == full_answer.actions and answer.work == full_answer.work
    assert (tmp_path / CHECKPOINT_NAME).exists() and (tmp_path / BEST_NAME).exists()


class _CutClock(Stopwatch):
    """A wall clock of an hour that expires at its ``checks``-th check once ``trainer``
    has evaluated ``after`` proposals: inside that proposal's game, after a step's check."""

    def __init__(self, trainer: list, after: int, checks: int) -> None:
        super().__init__(3600.0)
        self.trainer, self.after, self.checks = trainer, after, checks

    def expired(self) -> bool:
        if self.trainer[0].counters.proposals >= self.after:
            self.checks -= 1
        return self.checks < 0


def test_a_game_the_budget_ended_in_is_no_checkpoint_answer(tmp_path: Path) -> None:
    """A run stopped inside proposal 3's game answers that game, Drop first from buffer 1
    (fast memory is the slower here: its best answer yet); the checkpoint does not keep
    it, so the resumed run's answer and state are the uninterrupted run's, while the best
    answer's file keeps the better game."""
    n = 12
    chain = [I(writes=[0])] + [I(reads=[i], writes=[i + 1]) for i in range(n - 1)]
    inst = build([X(100) for _ in range(n)], chain + [I(reads=[n - 1])], fast_bw=50.0)
    options = {"mode": "evolution", "policies": 0, "chromosomes": 4}
    full = EgrlTrainer(inst, _config(**options))
    full_answer = full.run(proposals=12)
    trainer: list = []
    trainer.append(EgrlTrainer(inst, _config(tmp_path, **options)))
    cut = trainer[0].run(clock=_CutClock(trainer, after=3, checks=2))
    assert cut.work["proposals"] == 3 and cut.info["best_from"].endswith("from buffer 1")
    assert cut.reward_s > full_answer.reward_s
    resumed = EgrlTrainer(inst, _config(tmp_path, **options))
    answer = resumed.run(proposals=12)
    _assert_same(full, resumed)
    assert answer.actions == full_answer.actions and answer.info == {
        **full_answer.info,
        "train_seconds": answer.info["train_seconds"],
    }
    assert load_solution(tmp_path / BEST_NAME).actions == cut.actions


def test_a_checkpoint_resumes_under_other_run_settings(lstm, tmp_path: Path) -> None:
    _solve(lstm, work=3, checkpoint_dir=str(tmp_path))
    resumed = []
    solution = _solve(
        lstm,
        work=4,
        checkpoint_dir=str(tmp_path),
        progress="true",
        checkpoint_seconds=5,
        callback=resumed.append,
    )
    assert (
        solution.work["proposals"] == 4 and resumed[0].work["proposals"] == 3
    )  # the best so far, first
    assert check_solution(lstm, solution).ok


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"seed": 1}, "different seed"),
        ({"sigma": 0.2}, "different settings"),
        ({"program": "xla-v1/gru_infer"}, "different instance_sha256"),
    ],
)
def test_a_checkpoint_of_another_run_is_refused(
    lstm, tmp_path: Path, change: dict, needle: str
) -> None:
    _solve(lstm, work=2, mode="evolution", checkpoint_dir=str(tmp_path))
    change = dict(change)
    inst = suite_instance(change.pop("program")) if "program" in change else lstm
    seed = change.pop("seed", 0)
    with pytest.raises(SolverError, match=needle):
        _solve(inst, work=3, seed=seed, mode="evolution", checkpoint_dir=str(tmp_path), **change)


def test_a_run_from_an_older_checkpoint_leaves_the_better_best_answer(lstm, tmp_path: Path) -> None:
    older = EgrlTrainer(lstm, _config(tmp_path)).run(proposals=1)
    kept = (tmp_path / CHECKPOINT_NAME).read_bytes()
    better = EgrlTrainer(lstm, _config(tmp_path)).run(proposals=14)
    assert better.reward_s > older.reward_s  # the run found a better answer ...
    (tmp_path / CHECKPOINT_NAME).write_bytes(kept)  # ... then was killed before its checkpoint
    resumed = EgrlTrainer(lstm, _config(tmp_path))
    assert resumed.resumed and resumed.run(proposals=2).reward_s < better.reward_s
    assert load_solution(tmp_path / BEST_NAME).reward_s == better.reward_s
    (tmp_path / CHECKPOINT_NAME).unlink()  # a new run beside the file, with a smaller budget
    assert EgrlTrainer(lstm, _config(tmp_path)).run(proposals=1).reward_s < better.reward_s
    assert load_solution(tmp_path / BEST_NAME).reward_s == better.reward_s


def test_a_muzero_checkpoint_is_named_as_such(lstm, tmp_path: Path) -> None:
    from mallocgame.solvers.checkpoint import TRAINER_KEY

    (tmp_path / CHECKPOINT_NAME).write_bytes(
        serialization.msgpack_serialize(
            {"fingerprint": {"version": 2, "answer": "search", TRAINER_KEY: "muzero"}}
        )
    )
    with pytest.raises(SolverError, match="holds a muzero run, which egrl cannot resume"):
        EgrlTrainer(lstm, _config(tmp_path))


def test_a_checkpoint_folder_that_is_a_file_is_refused(lstm, tmp_path: Path) -> None:
    (tmp_path / "run").write_text("not a folder")
    with pytest.raises(SolverError, match="cannot hold checkpoints: it is a file"):
        EgrlTrainer(lstm, _config(tmp_path / "run"))


def test_a_damaged_checkpoint_is_refused(lstm, tmp_path: Path) -> None:
    (tmp_path / CHECKPOINT_NAME).write_bytes(b"\x00not msgpack at all")
    with pytest.raises(SolverError, match="not a readable checkpoint"):
        _solve(lstm, work=2, checkpoint_dir=str(tmp_path))


@pytest.fixture(scope="module")
def written_state(lstm, tmp_path_factory) -> dict:
    """The checkpoint of a mode-both run stopped inside generation 1's evaluations (a
    learner, policies and chromosomes, a replay, a best answer), as msgpack decodes it."""
    folder = tmp_path_factory.mktemp("egrl-checkpoint")
    EgrlTrainer(lstm, _config(folder)).run(proposals=7)
    return serialization.msgpack_restore((folder / CHECKPOINT_NAME).read_bytes())


def _slot(state: dict, kind: str) -> dict:
    return next(e for e in state["population"].values() if e["kind"] == kind)


def _grow_population(state: dict) -> None:
    population, generation = state["population"], state["generation"]
    population[str(len(population))] = dict(_slot(state, "chromosome"))
    generation["fitness"] = np.append(generation["fitness"], np.nan)


def _learner_leaf(state: dict) -> None:
    actor = state["learner"]["actor"]["params"]["logits"]
    actor["bias"] = np.zeros(5, np.float32)


TAMPERED = {
    "a chromosome's prior of another shape": lambda s: _slot(s, "chromosome").__setitem__(
        "prior", np.zeros((5, 3), np.float32)
    ),
    "a chromosome's temperature of another shape": lambda s: _slot(s, "chromosome").__setitem__(
        "temperature", np.ones((106, 2), np.float32)
    ),
    "a chromosome's temperature not positive": lambda s: _slot(s, "chromosome").__setitem__(
        "temperature", np.zeros(106, np.float32)
    ),
    "a policy's parameters cut short": lambda s: _slot(s, "policy").__setitem__(
        "theta", _slot(s, "policy")["theta"][:10]
    ),
    "an individual of an unknown kind": lambda s: _slot(s, "policy").__setitem__("kind", "mlp"),
    "a population of another size": _grow_population,
    "an unknown phase": lambda s: s["generation"].__setitem__("phase", "bogus"),
    "an index past the generation": lambda s: s["generation"].__setitem__("index", 99),
    "a negative index": lambda s: s["generation"].__setitem__("index", -1),
    "a negative updates_left": lambda s: s["generation"].__setitem__("updates_left", -3),
    "a reserved slot outside the population": lambda s: s["generation"].__setitem__("reserved", 50),
    "more learner fitness than rollouts": lambda s: s["generation"].__setitem__(
        "learner_fitness", np.zeros(4)
    ),
    "a counter missing": lambda s: s["counters"].pop("updates"),
    "a negative counter": lambda s: s["counters"].__setitem__("proposals", -1),
    "an infinite counter": lambda s: s["counters"].__setitem__("updates", float("inf")),
    "replay proposals of another width": lambda s: s["replay"].__setitem__(
        "actions", s["replay"]["actions"].reshape(-1, 53)
    ),
    "a replay action out of range": lambda s: s["replay"].__setitem__(
        "actions", np.full_like(s["replay"]["actions"], 7)
    ),
    "a replay position out of range": lambda s: s["replay"].__setitem__("next", 10**6),
    "a learner array of another shape": _learner_leaf,
    "a learner array replaced by a mapping": lambda s: s["learner"].__setitem__(
        "log_alpha", {"x": np.zeros(1, np.float32)}
    ),
    "a best answer of another length": lambda s: s["best"].__setitem__(
        "actions", s["best"]["actions"][:5]
    ),
    "a best answer with an action out of range": lambda s: s["best"].__setitem__(
        "actions", np.full_like(s["best"]["actions"], 7)
    ),
    "a best answer the game refuses": lambda s: s["best"].__setitem__(
        "actions",
        np.zeros_like(s["best"]["actions"]),  # buffer 0 allows Drop alone
    ),
    "metrics without the learner's": lambda s: s.__setitem__("metrics", {"alpha": 0.1}),
    "a best answer without actions": lambda s: s["best"].__setitem__(
        "actions", np.zeros(0, np.int8)
    ),
    "best actions without a best fitness": lambda s: s["best"].__setitem__(
        "fitness", float("-inf")
    ),
}


@pytest.mark.parametrize("case", list(TAMPERED))
def test_a_tampered_checkpoint_is_refused_naming_it(
    lstm, tmp_path: Path, written_state: dict, case: str
) -> None:
    """Every array and field a resumed run reads is checked: a checkpoint that decodes but
    does not fit this run is a SolverError naming the file, never a numpy error then or
    later."""
    state = copy.deepcopy(written_state)
    TAMPERED[case](state)
    path = tmp_path / CHECKPOINT_NAME
    path.write_bytes(serialization.msgpack_serialize(state))
    with pytest.raises(SolverError, match=rf"^{re.escape(str(path))}: not a readable checkpoint"):
        EgrlTrainer(lstm, _config(tmp_path)).run(proposals=14)


@pytest.mark.parametrize(
    "field, value",
    [
        (field, value)
        for field in ("generation.reserved", "generation.index", "replay.next", "replay.added")
        for value in (float("inf"), 2.5)
    ]
    + [("generation.reserved", -0.5), ("replay.next", 0.5), ("replay.added", 7.5)],
)
def test_a_position_that_is_not_a_whole_number_is_refused(
    lstm, tmp_path: Path, written_state: dict, field: str, value: float
) -> None:
    """The generation's position and reserved slot and the replay's ring position and
    count are whole numbers: infinity is the SolverError naming the file (not an
    OverflowError), and a fraction is refused, not rounded (7.5 and 0.5 would round to
    the values the written checkpoint holds)."""
    state = copy.deepcopy(written_state)
    assert (state["replay"]["next"], state["replay"]["added"]) == (0, 7)
    part, key = field.split(".")
    state[part][key] = value
    path = tmp_path / CHECKPOINT_NAME
    path.write_bytes(serialization.msgpack_serialize(state))
    with pytest.raises(SolverError, match=rf"^{re.escape(str(path))}: .* is not a whole number"):
        EgrlTrainer(lstm, _config(tmp_path)).run(proposals=14)


def test_the_untampered_checkpoint_resumes(lstm, tmp_path: Path, written_state: dict) -> None:
    (tmp_path / CHECKPOINT_NAME).write_bytes(serialization.msgpack_serialize(written_state))
    trainer = EgrlTrainer(lstm, _config(tmp_path))
    assert trainer.resumed and trainer.run(proposals=8).work["proposals"] == 8


def test_a_finished_run_on_a_program_without_buffers_resumes(tmp_path: Path) -> None:
    """A program of no buffers has one game, of no actions: a checkpoint's empty best
    actions are that answer, restored (not taken for "no answer yet")."""
    inst = build(tensors=[], instructions=[I(supply=1.0)], capacity=100)
    options = {
        "mode": "evolution",
        "policies": 0,
        "chromosomes": 2,
        "checkpoint_dir": str(tmp_path),
    }
    first = _solve(inst, work=3, **options)
    seen: list = []
    resumed = _solve(inst, work=3, callback=seen.append, **options)  # at its budget already
    assert resumed.actions == first.actions == () and check_solution(inst, resumed).ok
    assert resumed.work["proposals"] == 3 and resumed.reward_s == first.reward_s
    assert [i.solution.actions for i in seen] == [()]  # the restored answer, reported


def test_a_checkpoint_written_before_fixed_alpha_resumes_with_the_setting(
    lstm, tmp_path: Path
) -> None:
    """A learner state without ``fixed_alpha`` (checkpoints written before it) takes the
    run's setting and continues as the uninterrupted run."""
    options = {"mode": "pg", "alpha": 5.0, "learner_rollouts": 3}
    EgrlTrainer(lstm, _config(tmp_path, **options)).run(proposals=6)
    path = tmp_path / CHECKPOINT_NAME
    state = serialization.msgpack_restore(path.read_bytes())
    del state["learner"]["fixed_alpha"]
    path.write_bytes(serialization.msgpack_serialize(state))
    resumed = EgrlTrainer(lstm, _config(tmp_path, **options))
    assert resumed.learner is not None and float(learner_alpha(resumed.learner)) == 5.0
    full = EgrlTrainer(lstm, _config(**options))
    full.run(proposals=12)
    resumed.run(proposals=12)
    _assert_same(full, resumed)


# ---------------------------------------------------------------------- options


@pytest.mark.parametrize(
    "options, needle",
    [
        ({"mode": "marl"}, "option mode must be one of"),
        ({"fitness": "latency"}, "option fitness must be one of"),
        ({"population": 4}, "unknown option 'population'"),
        ({"policies": -1}, r"egrl: option policies must be in \[0, 1024\], not -1"),
        ({"policies": 0, "chromosomes": 0}, "needs a population"),
        ({"elites": 10}, "elites must be in"),
        ({"pool_ratio": 1.0}, "pool_ratio"),
        ({"temperature": 0}, r"option temperature must be in \[1e-2, 1e2\], not 0.0"),
        ({"alpha": -0.1}, r"option alpha must be in \[0, 1e3\]"),
        ({"mode": "pg", "learner_rollouts": 0}, "needs learner_rollouts"),
        ({"mode": "pg", "replay_size": 4, "min_replay": 8}, "min_replay 8 exceeds replay_size 4"),
        ({"replay_size": 4, "min_replay": 5}, "min_replay 5 exceeds replay_size 4"),
        ({"crossover": 1.5}, "crossover must be in"),
        ({"target_entropy": 1.0}, "target_entropy"),
        ({"hidden": "wide"}, "option hidden must be a whole number"),
    ],
)
def test_bad_options_are_refused(lstm, options: dict, needle: str) -> None:
    solver = get_solver("egrl")
    with pytest.raises(SolverError, match=needle):
        solver.check_options(options)
    with pytest.raises(SolverError, match=needle):
        solver.solve(lstm, SolveRequest(work=1, options=options))


def test_settings_leave_out_where_a_run_keeps_its_files() -> None:
    solver = get_solver("egrl")
    defaults = solver.settings({})
    assert (
        solver.settings({"checkpoint_dir": "runs/x", "progress": "true", "progress_seconds": 1})
        == defaults
    )
    assert solver.settings({"mode": "pg"})["mode"] == "pg" and "checkpoint_dir" not in defaults
    assert get_solver("egrl").work_unit == "proposals"


def test_settings_a_mode_does_not_use_are_not_checked(lstm) -> None:
    """pg has no population: no policies, chromosomes or elites needed; evolution has no
    learner: min_replay may exceed replay_size."""
    config = parse_config(EgrlConfig, {"mode": "pg", "policies": 0, "chromosomes": 0}, "egrl")
    assert config.population == 0 and config.elites == 2
    options = {"mode": "pg", "policies": 0, "chromosomes": 0, "learner_rollouts": 2}
    solution = _solve(lstm, work=4, **options)
    assert check_solution(lstm, solution).ok and solution.work["updates"] > 0
    evolution = {"mode": "evolution", "replay_size": 4, "min_replay": 8}
    assert parse_config(EgrlConfig, evolution, "egrl").min_replay == 8


@pytest.mark.parametrize("alpha", [5.0, 0.0])
def test_a_fixed_alpha_is_the_one_the_learner_uses(lstm, alpha: float) -> None:
    solution = _solve(lstm, work=6, mode="pg", learner_rollouts=3, alpha=alpha)
    assert solution.work["updates"] > 0 and solution.info["alpha"] == alpha


def test_a_mapping_of_zero_latency_has_a_finite_speedup_fitness() -> None:
    """Table latencies may be 0: speedup() of such a mapping is inf, and the learner's
    targets ((fitness - mean) / std) were NaN, its losses too."""
    from mallocgame.solvers.egrl.proposals import MAX_SPEEDUP_FITNESS

    zero_when_fast = table([0], [1.0, 0.0])
    inst = build(
        [X(100)], [I(writes=[0], latency=zero_when_fast), I(reads=[0], latency=zero_when_fast)]
    )
    options = {"fitness": "speedup", "progress": False}
    solution = get_solver("egrl").solve(inst, SolveRequest(seed=0, work=60, options=options))
    assert check_solution(inst, solution).ok and solution.normalized_reward == 1.0
    assert solution.info["best_fitness"] == MAX_SPEEDUP_FITNESS
    assert np.isfinite(solution.info["actor_loss"]) and np.isfinite(solution.info["critic_loss"])
