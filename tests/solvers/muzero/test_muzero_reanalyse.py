"""Reanalyse with demonstrations: demonstration records, fresh targets, kept games,
determinism and checkpoints of a training run that reanalyses."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import numpy as np
import pytest

from mallocgame.check import check_solution
from mallocgame.errors import SolverError
from mallocgame.game.observe import Observer, empty_batch
from mallocgame.game.state import Game, replay
from mallocgame.game.tables import build_tables
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.solvers.muzero.networks import init_params
from mallocgame.solvers.muzero.reanalyse import Reanalyser, demonstration, trajectory_record
from mallocgame.solvers.muzero.search import SearchResult
from mallocgame.solvers.muzero.selfplay import reward_scale
from mallocgame.solvers.muzero.solver import MuZeroSolver
from mallocgame.solvers.muzero.train import Trainer, compiled_functions
from tests.solvers.muzero.test_muzero_train import TINY

REANALYSE = {
    **TINY,
    "reanalyse_fraction": "0.5",
    "demonstrations": "heuristic,greedy",
}  # two cheap demonstrations


class _Counting:
    """A stand-in search: policy row i is one-hot on the i-th allowed action, root value = call count."""

    def __init__(self) -> None:
        self.calls = 0
        self.batches: list[np.ndarray] = []

    def __call__(self, params, key, obs, allowed, temperature, q_scale):
        self.calls += 1
        self.batches.append(obs["globals"].copy())
        action = np.argmax(allowed, axis=1)
        policy = np.eye(3, dtype=np.float32)[action]
        return SearchResult(action, policy, np.full(len(action), float(self.calls), np.float32))


def _greedy_record(inst, config):
    tables = build_tables(inst)
    actions = demonstration(inst, "greedy", 0).actions
    return (
        trajectory_record(inst, tables, config, actions, reward_scale(tables, config)),
        actions,
        tables,
    )


def test_a_demonstration_replays_into_a_record(small) -> None:
    config = MuZeroSolver().config(TINY)
    record, actions, tables = _greedy_record(small, config)
    game = replay(small, actions, tables)
    assert len(record) == len(actions) == small.num_buffers
    np.testing.assert_array_equal(record.actions, actions)
    assert float(record.rewards.sum()) == pytest.approx(
        game.return_s * reward_scale(tables, config), rel=1e-5
    )
    assert record.allowed[np.arange(len(record)), record.actions].all()
    np.testing.assert_allclose(record.policies, 1.0 / 3.0)  # until reanalysed
    assert record.observations["grid"].dtype == np.uint8
    # the observation before move t is the one self-play would see there
    fresh = Game(small, tables)
    observer = Observer(fresh, config.observation)
    for t, action in enumerate(actions[:5]):
        seen = observer.observe(t)
        for name, value in seen.items():
            np.testing.assert_allclose(record.observations[name][t], value, err_msg=name)
        fresh.step(action)


def test_a_bad_demonstration_is_refused(small) -> None:
    config = MuZeroSolver().config(TINY)
    tables = build_tables(small)
    actions = list(demonstration(small, "greedy", 0).actions)
    with pytest.raises(SolverError, match="incomplete"):
        trajectory_record(small, tables, config, actions[:-1], 1.0)
    with pytest.raises(SolverError, match="ended after"):
        trajectory_record(small, tables, config, actions + [2], 1.0)
    game = Game(small, tables)
    for t, action in enumerate(actions):  # the first position with an illegal action
        illegal = np.flatnonzero(~game.legal_mask())
        if illegal.size:
            bad = actions[:t] + [int(illegal[0])] + actions[t + 1 :]
            break
        game.step(action)
    else:
        pytest.skip("every action is legal everywhere in this instance")
    with pytest.raises(SolverError, match="not legal"):
        trajectory_record(small, tables, config, bad, 1.0)
    with pytest.raises(SolverError, match="unknown demonstration"):
        demonstration(small, "exact", 0)


@pytest.mark.parametrize("source", ["heuristic", "greedy", "es"])
def test_demonstrations_are_complete_valid_trajectories(small, source: str) -> None:
    solution = demonstration(small, source, 0, es_games=40)
    game = replay(small, solution.actions)
    assert game.complete and game.return_s == pytest.approx(solution.reward_s)
    assert check_solution(small, solution).ok


def test_the_es_demonstration_is_reproducible_within_its_games_and_starts_from_greedy(
    small,
) -> None:
    first, again = (demonstration(small, "es", 3, es_games=40) for _ in range(2))
    assert first.actions == again.actions and first.work["games"] == 40
    # ES's first mean policy is the greedy rule, and the best of its games is kept
    assert first.reward_s >= demonstration(small, "greedy", 3).reward_s - 1e-15


def test_the_es_demonstration_stops_at_its_wall_clock_share(small) -> None:
    solution = demonstration(small, "es", 0, seconds=0.5, es_games=1)
    assert solution.work["games"] >= 1 and replay(small, solution.actions).complete


def test_the_heuristic_demonstration_is_the_repaired_projection_within_its_share() -> None:
    from mallocgame.solvers.projection import project
    from mallocgame.workloads.registry import load_workload

    inst = load_workload(
        "xla-v1/inplace_update_loop"
    )  # the repair takes it from 0.39 to 0.99 of the heuristic
    heuristic = get_solver("heuristic").solve(inst)
    repaired = demonstration(inst, "heuristic", 0)
    assert (
        repaired.actions == project(inst, heuristic)[0].actions
        and repaired.info["repairs_kept"] > 0
    )
    no_time = demonstration(inst, "heuristic", 0, seconds=0.0)
    assert no_time.info["repair_replays"] == 0 and no_time.reward_s < repaired.reward_s


def test_imitation_mixes_the_kept_games_own_actions_into_the_search_targets(small) -> None:
    config = MuZeroSolver().config({**TINY, "parallel_games": 4, "imitation": 0.25})
    record, actions, _tables = _greedy_record(small, config)
    search = _Counting()  # its policy: one-hot on the first allowed action
    reanalyser = Reanalyser(config, search, np.float32(0.1), jax.random.PRNGKey(0))
    reanalyser.add_demonstration(record, params={})
    first_allowed = np.eye(3, dtype=np.float32)[np.argmax(record.allowed, axis=1)]
    played = np.eye(3, dtype=np.float32)[np.asarray(actions)]
    np.testing.assert_allclose(record.policies, 0.75 * first_allowed + 0.25 * played, atol=1e-6)
    np.testing.assert_allclose(record.policies.sum(axis=1), 1.0, atol=1e-6)
    assert not np.any(record.policies[~record.allowed])  # only allowed actions get mass


def test_reanalysis_searches_every_position_and_wraps_round_robin(small) -> None:
    config = MuZeroSolver().config(TINY)  # 4 positions per search
    record, _, _ = _greedy_record(small, config)
    search = _Counting()
    reanalyser = Reanalyser(config, search, np.float32(0.1), jax.random.PRNGKey(0))
    reanalyser.add_demonstration(record, params={})
    length = len(record)
    assert search.calls == -(-length // 4) and reanalyser.positions_searched == length
    # every position's targets came from the search: allowed one-hot policies, root values > 0
    np.testing.assert_allclose(record.policies.sum(axis=1), 1.0)
    assert (record.policies[~record.allowed] == 0).all() and (record.root_values > 0).all()
    # a short last batch is padded with copies of its first row, not stale rows
    last = search.batches[-1]
    for i in range(length % 4 or 4, 4):
        np.testing.assert_array_equal(last[i], last[0])
    before = record.root_values.copy()
    for _ in range(-(-length // 4)):
        reanalyser.refresh(params={})
    assert (record.root_values > before).all()  # a full round refreshed every position
    assert reanalyser.cursor == (-(-length // 4) * 4) % length


def test_refreshed_root_values_change_the_value_targets(small) -> None:
    config = MuZeroSolver().config({**TINY, "td_steps": 2, "discount": 1.0})
    record, _, _ = _greedy_record(small, config)
    t = np.arange(len(record) - 2)
    before = record.value_targets(t, 1.0, 2)
    record.root_values[2:] += 1.0
    np.testing.assert_allclose(record.value_targets(t, 1.0, 2), before + 1.0, rtol=1e-5, atol=1e-5)


def test_only_a_better_self_play_game_is_kept_and_its_targets_are_its_own(small) -> None:
    config = MuZeroSolver().config(TINY)
    record, _, _ = _greedy_record(small, config)
    reanalyser = Reanalyser(config, _Counting(), np.float32(0.1), jax.random.PRNGKey(0))
    assert reanalyser.positions == 0
    assert reanalyser.keep_best(record)
    worse = dataclasses.replace(record, rewards=record.rewards - 1.0)
    assert not reanalyser.keep_best(worse)
    assert reanalyser.best is not None and reanalyser.positions == len(record)
    reanalyser.refresh(params={})
    assert not np.array_equal(reanalyser.best.policies, record.policies)  # a copy was rewritten
    no_mask = dataclasses.replace(record, allowed=None)
    with pytest.raises(ValueError, match="allowed"):
        reanalyser.keep_best(no_mask)
    cut = dataclasses.replace(
        record, rewards=record.rewards + 1.0, bootstrap=0.0
    )  # better, but cut short
    with pytest.raises(ValueError, match="whole game"):
        reanalyser.keep_best(cut)


def test_keeping_a_game_searches_it_until_the_budget_is_spent(small) -> None:
    config = MuZeroSolver().config(TINY)  # 4 positions per search
    record, _, _ = _greedy_record(small, config)
    search = _Counting()
    reanalyser = Reanalyser(config, search, np.float32(0.1), jax.random.PRNGKey(0))
    assert reanalyser.keep_best(record, search_with={}, stop=lambda: search.calls >= 2)
    assert search.calls == 2 and reanalyser.positions_searched == 8 < len(record)
    assert reanalyser.best is not None and (reanalyser.best.root_values[8:] == 0).all()
    better = dataclasses.replace(record, rewards=record.rewards + 1.0)
    assert reanalyser.keep_best(better, search_with={})  # no stop: every position
    assert reanalyser.positions_searched == 8 + len(record)


def test_real_search_targets_are_distributions_over_allowed_actions(small) -> None:
    config = MuZeroSolver().config(TINY)
    net, _, search, _, _ = compiled_functions(config)
    params = init_params(net, 0, empty_batch(config.observation, 1))
    record, _, _ = _greedy_record(small, config)
    reanalyser = Reanalyser(config, search, np.float32(0.1), jax.random.PRNGKey(0))
    reanalyser.add_demonstration(record, params)
    np.testing.assert_allclose(record.policies.sum(axis=1), 1.0, rtol=1e-5)
    assert (record.policies[~record.allowed] == 0).all()
    assert np.isfinite(record.root_values).all()


def test_run_only_settings_share_one_compilation() -> None:
    config = MuZeroSolver().config({**TINY, "reanalyse_fraction": 0})
    other = MuZeroSolver().config(REANALYSE)
    assert compiled_functions(config)[2] is compiled_functions(other)[2]
    assert (
        compiled_functions(config)[2]
        is not compiled_functions(MuZeroSolver().config({**TINY, "num_simulations": 5}))[2]
    )


def test_a_reanalysing_run_is_reproducible_and_its_answers_are_its_own(small) -> None:
    runs = []
    for _ in range(2):
        trainer = Trainer(small, MuZeroSolver().config(REANALYSE), seed=2)
        runs.append(trainer.run(games=12))
        assert trainer.reanalyser is not None and len(trainer.reanalyser.demonstrations) == 2
        assert trainer.reanalyser.best is not None
        assert trainer.reanalyser.best_return == pytest.approx(
            trainer.best_return * reward_scale(trainer.tables, trainer.config), rel=1e-4
        )
    assert runs[0].actions == runs[1].actions and runs[0].work == runs[1].work
    assert runs[0].work["reanalysed"] > 2 * small.num_buffers
    assert runs[0].solver == "muzero" and check_solution(small, runs[0]).ok


def test_a_reanalysing_run_resumes_with_its_kept_games(tmp_path: Path, small) -> None:
    config = MuZeroSolver().config(REANALYSE)
    first = Trainer(small, config, seed=0, checkpoint_dir=tmp_path)
    first.run(games=8)
    again = Trainer(small, config, seed=0, checkpoint_dir=tmp_path)
    assert again.resumed and again.reanalyser is not None and first.reanalyser is not None
    a, b = first.reanalyser, again.reanalyser
    assert (a.cursor, a.searches, a.positions_searched) == (
        b.cursor,
        b.searches,
        b.positions_searched,
    )
    for x, y in zip(a.games, b.games):
        np.testing.assert_array_equal(x.policies, y.policies)
        np.testing.assert_array_equal(x.root_values, y.root_values)
        np.testing.assert_array_equal(x.allowed, y.allowed)
    assert b.best_return == a.best_return
    assert set(again.demonstration_rewards) == {"heuristic", "greedy"}
    assert again.demonstration_rewards == first.demonstration_rewards
    again.run(games=10)  # the restored records are writable: reanalysis goes on
    assert b.searches > a.searches


def test_the_solver_takes_reanalyse_options_and_refuses_bad_ones(small) -> None:
    solver = get_solver("muzero")
    solution = solver.solve(
        small, SolveRequest(seed=0, work=4, options={**TINY, "reanalyse_fraction": 0.25})
    )
    assert check_solution(small, solution).ok
    for bad, match in (
        ({"reanalyse_fraction": 1.0}, "reanalyse_fraction"),
        ({"reanalyse_fraction": 0.5, "demonstrations": "exact"}, "unknown demonstration"),
        ({"imitation": 1.5}, "imitation"),
        ({"es_share": 1.0}, "es_share"),
        ({"es_games": 0}, "es_games"),
    ):
        with pytest.raises(SolverError, match=match):
            solver.check_options(bad)


def test_reanalyse_off_builds_nothing_and_trains_on_self_play_alone(small) -> None:
    trainer = Trainer(small, MuZeroSolver().config({**TINY, "reanalyse_fraction": 0}), seed=0)
    assert trainer.reanalyser is None  # demonstrations (a default) are only used through Reanalyse
    solution = trainer.run(games=4)
    assert solution.work["reanalysed"] == 0 and check_solution(small, solution).ok


def test_without_demonstrations_only_the_best_game_is_kept(small) -> None:
    trainer = Trainer(small, MuZeroSolver().config({**TINY, "demonstrations": ""}), seed=0)
    assert trainer.reanalyser is not None and trainer.reanalyser.positions == 0
    trainer.run(games=6)
    assert trainer.reanalyser.demonstrations == [] and trainer.reanalyser.best is not None


def test_an_es_demonstration_run_is_reproducible_and_counts_the_games_es_played(small) -> None:
    options = {**TINY, "demonstrations": "es", "es_games": 30, "imitation": 0.5}
    runs = [
        get_solver("muzero").solve(small, SolveRequest(seed=1, work=6, options=options))
        for _ in range(2)
    ]
    assert runs[0].actions == runs[1].actions and runs[0].work == runs[1].work
    assert runs[0].work["demonstration_games"] == 30 and check_solution(small, runs[0]).ok
    es = demonstration(small, "es", 1, es_games=30)
    assert runs[0].info["demonstrations"] == {"es": pytest.approx(es.normalized_reward, abs=1e-6)}


def test_the_default_demonstrations_are_built_once_when_training_starts(small) -> None:
    trainer = Trainer(small, MuZeroSolver().config(TINY), seed=0)
    assert trainer.reanalyser is not None and trainer.reanalyser.demonstrations == []  # not yet
    trainer.add_demonstrations()
    assert len(trainer.reanalyser.demonstrations) == 3  # heuristic, greedy, es: the defaults
    assert set(trainer.demonstration_rewards) == {"heuristic", "greedy", "es"}
    trainer.run(games=2)
    assert len(trainer.reanalyser.demonstrations) == 3  # run() did not build them again
    played = [
        demonstration(small, source, 0, es_games=TINY["es_games"], es_workers=1).work
        for source in ("heuristic", "greedy", "es")
    ]  # greedy plays one game, es its games
    assert (
        trainer.counters.demonstration_games
        == sum(w.get("games", 0) for w in played)
        == TINY["es_games"] + 1
    )


def test_a_given_answer_is_the_demonstration_instead_of_solving_again(lstm, small) -> None:
    heuristic = get_solver("heuristic").solve(lstm)
    given = demonstration(lstm, "heuristic", 0, given=heuristic)
    assert given.actions == demonstration(lstm, "heuristic", 0).actions  # projected the same
    greedy = demonstration(lstm, "greedy", 0)
    assert demonstration(lstm, "greedy", 0, given=greedy) is greedy  # a game: taken as it is
    with pytest.raises(SolverError, match="answers program 'synthetic-v1/small'"):
        demonstration(lstm, "heuristic", 0, given=get_solver("heuristic").solve(small))
    with pytest.raises(SolverError, match="a greedy answer given as the es demonstration"):
        demonstration(lstm, "es", 0, given=greedy)
    with pytest.raises(SolverError, match="the given greedy demonstration has no game"):
        demonstration(lstm, "greedy", 0, given=dataclasses.replace(greedy, actions=None))


def test_a_trainer_uses_the_demonstrations_it_is_given(small) -> None:
    config = MuZeroSolver().config(REANALYSE)
    built = Trainer(small, config, seed=0)
    built.add_demonstrations()
    greedy = demonstration(small, "greedy", 0)
    heuristic = get_solver("heuristic").solve(small)
    lines: list[str] = []
    given = Trainer(
        small, config, seed=0, given_demonstrations=(greedy, heuristic), log=lines.append
    )
    given.add_demonstrations()
    assert given.demonstration_rewards == built.demonstration_rewards
    assert given.counters.demonstration_games == 0  # greedy's game was not played again
    assert built.counters.demonstration_games == 1
    assert [line.split(":")[0] for line in lines] == [
        "demonstration heuristic (given)",
        "demonstration greedy (given)",
    ]


def test_no_demonstration_but_the_first_starts_once_the_budget_is_spent(small) -> None:
    from mallocgame.solvers.base import Stopwatch

    lines: list[str] = []
    config = MuZeroSolver().config({**TINY, "restart_fraction": 1.0})
    trainer = Trainer(small, config, seed=0, log=lines.append)
    restarted: list[object] = []
    trainer.selfplay.restart_unplayed = restarted.append  # type: ignore[method-assign]
    answer = trainer.run(clock=Stopwatch(1e-9))  # no move: its answer is the demonstration's
    assert set(trainer.demonstration_rewards) == {"heuristic"}  # built: the run's fallback
    assert "demonstrations greedy, es: left out, the budget is spent" in lines
    assert trainer.fallback == "heuristic" and check_solution(small, answer).ok
    assert restarted == []  # no restarts started for moves that are never played
    trainer.run(games=1)  # a later run with a budget left starts them
    assert len(restarted) == 1


def test_with_learning_off_no_kept_game_is_searched(small) -> None:
    """No learner step reads a kept game's targets with ``learning=false``: the
    demonstrations and the restarts' best games are kept (restarts start inside them)
    but never searched."""
    options = {**REANALYSE, "learning": "false", "restart_fraction": 0.5}
    trainer = Trainer(small, MuZeroSolver().config(options), seed=0)
    answer = trainer.run(games=16)
    assert trainer.reanalyser is not None and len(trainer.reanalyser.demonstrations) == 2
    assert trainer.counters.restarts > 0 and trainer.counters.learner_steps == 0
    assert answer.work["reanalysed"] == 0 and check_solution(small, answer).ok
