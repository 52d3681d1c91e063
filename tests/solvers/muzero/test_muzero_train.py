"""MMap-MuZero end to end on small instances: learning, Drop-backup, legality,
determinism, checkpoints that survive a kill, answers the checker accepts.

Every run uses one tiny configuration (small networks and images, 4 games of 4
simulations) so XLA compiles the search and the learner once per test session (and
JAX's persistent cache keeps them for later sessions).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mallocgame.check import check_solution
from mallocgame.cli import main
from mallocgame.errors import SolverError
from mallocgame.game.backup import play as play_with_backup
from mallocgame.game.state import Game, replay
from mallocgame.game.tables import build_tables
from mallocgame.solution import load_solution
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.solvers.base import Stopwatch
from mallocgame.solvers.checkpoint import BEST_NAME, CHECKPOINT_NAME
from mallocgame.solvers.muzero.search import SearchResult
from mallocgame.solvers.muzero.selfplay import SelfPlay, reward_scale
from mallocgame.solvers.muzero.solver import MuZeroSolver
from mallocgame.solvers.muzero.train import Trainer
from mallocgame.workloads.registry import load_workload
from tests.builders import I, build, cancelling_instance
from tests.game.test_backup import _alias_overflow

TINY = {
    "parallel_games": 4,
    "num_simulations": 4,
    "width": 32,
    "latent_size": 16,
    "conv_channels": "4",
    "batch_size": 16,
    "unroll_steps": 3,
    "min_replay": 64,
    "train_every": 1,
    "observation.grid_steps": 8,
    "observation.grid_window": 32,
    "observation.grid_addr": 8,
    "observation.profile_bins": 16,
    "observation.supply_window": 8,
    "es_games": 16,
    "es_workers": 1,  # the es demonstration (a default) kept tiny too
}
TINY_ARGS = [arg for key, value in TINY.items() for arg in ("--option", f"{key}={value}")]


def test_training_improves_on_its_first_games(small) -> None:
    returns: list[float] = []
    trainer = Trainer(small, MuZeroSolver().config(TINY), seed=0)
    original = trainer.replay.add

    def record(game) -> None:
        returns.append(float(game.rewards.sum()))
        original(game)

    trainer.replay.add = record  # type: ignore[method-assign]
    solution = trainer.run(games=64)
    first, last = np.mean(returns[:8]), np.mean(returns[-8:])
    assert trainer.counters.learner_steps > 1000
    # rewards are scaled (value_scale / R) and back-up penalties sum to the true return;
    # the last games beat the first ones and the greedy game
    greedy = get_solver("greedy").solve(small).normalized_reward
    assert last > first * 1.2 and last / trainer.config.value_scale > greedy, (first, last, greedy)
    assert solution.normalized_reward >= max(returns) / trainer.config.value_scale - 1e-6
    assert check_solution(small, solution).ok


class _Greedy:
    """A stand-in for the search: always the first allowed action (Copy first)."""

    def __call__(self, params, key, obs, allowed, temperature, q_scale):
        action = np.argmax(allowed, axis=1)
        policy = np.eye(3, dtype=np.float32)[action]
        return SearchResult(action, policy, np.zeros(len(action), np.float32))


def test_drop_backup_completes_a_game_whose_greedy_play_goes_infeasible() -> None:
    inst = _alias_overflow()
    tables = build_tables(inst)
    config = MuZeroSolver().config({**TINY, "parallel_games": 2})
    play = SelfPlay(inst, tables, config, _Greedy())
    finished = []
    while not finished:
        finished = play.step({}, None)
    game = finished[0]
    assert game.backups == 1
    final = replay(inst, game.actions)
    assert final.complete and final.return_s == pytest.approx(1.35)  # see tests/game/test_backup.py
    record = game.record
    # moves played include the undone one (buffer 1 Copy, whose instruction had not paid
    # out yet, so the back-up lost nothing); rewards sum to the final return
    assert len(record) == inst.num_buffers + 1
    assert record.actions.tolist() == [0, 0, 2, 2, 0, 2]
    assert record.rewards.sum() == pytest.approx(
        final.return_s * reward_scale(tables, config), rel=1e-5
    )


def test_a_disallowed_search_action_is_refused(small) -> None:
    class Illegal:
        def __call__(self, params, key, obs, allowed, temperature, q_scale):
            action = np.argmin(allowed, axis=1)  # a disallowed action wherever there is one
            return SearchResult(
                action, np.full((len(action), 3), 1 / 3, np.float32), np.zeros(len(action))
            )

    play = SelfPlay(small, build_tables(small), MuZeroSolver().config(TINY), Illegal())
    with pytest.raises(SolverError, match="not allowed"):
        for _ in range(small.num_buffers):
            play.step({}, None)


def test_greedy_slots_play_the_improved_policys_best_allowed_action(small) -> None:
    class FirstAllowed:  # samples the first allowed action; the policy prefers the last one
        def __call__(self, params, key, obs, allowed, temperature, q_scale):
            action = np.argmax(allowed, axis=1)
            policy = np.where(allowed, 1.0 + np.arange(3), 10.0).astype(
                np.float32
            )  # 10: disallowed
            return SearchResult(
                action, policy / policy.sum(1, keepdims=True), np.zeros(len(action))
            )

    config = MuZeroSolver().config({**TINY, "greedy_games": 1})
    play = SelfPlay(small, build_tables(small), config, FirstAllowed())
    for _ in range(20):
        allowed = [slot.driver.allowed().copy() for slot in play.slots]
        play.step({}, None)
        played = [slot.actions[-1] for slot in play.slots]
        assert played[0] == np.flatnonzero(allowed[0])[-1]
        assert played[1:] == [int(np.flatnonzero(a)[0]) for a in allowed[1:]]


def test_selfplay_passes_the_per_buffer_q_scale_to_the_search(small) -> None:
    seen: list[float] = []

    class Recording(_Greedy):
        def __call__(self, params, key, obs, allowed, temperature, q_scale):
            seen.append(float(q_scale))
            return super().__call__(params, key, obs, allowed, temperature, q_scale)

    for options, expected in (
        ({}, 0.1),
        ({"q_scale": 0.3}, 0.3),
        ({"q_scale_per_buffer": 0.01}, 0.01 * small.num_buffers),
    ):
        seen.clear()
        SelfPlay(
            small, build_tables(small), MuZeroSolver().config({**TINY, **options}), Recording()
        ).step({}, None)
        assert seen == [pytest.approx(expected)]


class _LastAllowed:
    """A stand-in for the search: always the last allowed action (Drop first)."""

    def __call__(self, params, key, obs, allowed, temperature, q_scale):
        action = 2 - np.argmax(allowed[:, ::-1], axis=1)
        return SearchResult(
            action, np.eye(3, dtype=np.float32)[action], np.zeros(len(action), np.float32)
        )


class _RandomAllowed:
    """A stand-in for the search: a uniformly random allowed action (its own seeded stream)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, params, key, obs, allowed, temperature, q_scale):
        action = np.array([self.rng.choice(np.flatnonzero(row)) for row in allowed])
        return SearchResult(
            action, np.eye(3, dtype=np.float32)[action], np.zeros(len(action), np.float32)
        )


def _copy_first_game(inst, tables):
    """A complete game of the Copy-first stand-in (a FinishedGame)."""
    config = MuZeroSolver().config({**TINY, "parallel_games": 1, "greedy_games": 0})
    play = SelfPlay(inst, tables, config, _Greedy())
    while True:
        done = play.step({}, None)
        if done:
            return done[0]


def _restarted_games(inst, tables, config, count: int) -> list:
    """``count`` finished games of the Drop-first stand-in restarting inside a Copy-first game."""
    play = SelfPlay(inst, tables, config, _LastAllowed())
    play.restart_actions = _copy_first_game(inst, tables).actions
    rng = np.random.default_rng(0)
    finished: list = []
    while len(finished) < count:
        finished += play.step({}, None, 1.0, rng)
    return finished


def test_restarted_games_replay_a_prefix_of_the_best_game_and_record_only_their_own_moves(
    small,
) -> None:
    tables = build_tables(small)
    best = _copy_first_game(small, tables).actions
    config = MuZeroSolver().config({**TINY, "greedy_games": 0, "restart_fraction": 1.0})
    finished = _restarted_games(small, tables, config, 12)
    assert [g.start for g in finished[: config.parallel_games]] == [
        0
    ] * config.parallel_games  # the first games
    restarted = finished[config.parallel_games :]
    assert all(1 <= g.start < small.num_buffers for g in restarted)
    assert len({g.start for g in restarted}) > 1  # restart points are drawn
    scale = reward_scale(tables, config)
    assert any(
        g.actions[g.start :] != best[g.start :] for g in restarted
    )  # the agent played the rest
    for g in restarted:
        assert g.actions[: g.start] == best[: g.start]
        assert (
            len(g.record) >= small.num_buffers - g.start
        )  # its own moves only (and any undone ones)
        gained = g.return_s - replay(small, best[: g.start], tables).return_s
        assert g.record.rewards.sum() == pytest.approx(gained * scale, rel=1e-5, abs=1e-6)
        assert replay(small, g.actions, tables).return_s == pytest.approx(g.return_s)


@pytest.mark.parametrize(
    "options, seed",
    [
        ({"restart_fraction": 1.0}, None),  # no rng: no restarts
        ({"restart_fraction": 0.0}, 0),
        ({"restart_fraction": 1.0, "greedy_games": 4}, 0),  # greedy slots always start fresh
    ],
)
def test_games_start_fresh_without_an_rng_a_fraction_or_a_non_greedy_slot(
    small, options, seed
) -> None:
    tables = build_tables(small)
    play = SelfPlay(small, tables, MuZeroSolver().config({**TINY, **options}), _LastAllowed())
    play.restart_actions = _copy_first_game(small, tables).actions
    rng = None if seed is None else np.random.default_rng(seed)
    finished: list = []
    while len(finished) < 8:
        finished += play.step({}, None, 1.0, rng)
    assert [g.start for g in finished] == [0] * len(finished)


def test_windowed_restarts_search_a_window_then_play_the_best_game_out(small) -> None:
    tables = build_tables(small)
    best = _copy_first_game(small, tables).actions
    config = MuZeroSolver().config(
        {**TINY, "greedy_games": 0, "restart_fraction": 1.0, "restart_window": 3, "discount": 0.5}
    )  # a discount the bootstrap shows
    restarted = [g for g in _restarted_games(small, tables, config, 24) if g.start]
    assert restarted and all(
        g.backups == 0 for g in restarted
    )  # so every decision is where it was played
    scale = reward_scale(tables, config)
    discounted = []  # whether a play-out's discounting shows (its return differs undiscounted)
    for g in restarted:
        assert g.actions[: g.start] == best[: g.start]  # the replayed prefix
        assert replay(small, g.actions, tables).return_s == pytest.approx(g.return_s)
        start_return = replay(small, best[: g.start], tables).return_s
        if g.start + 3 < small.num_buffers:
            assert g.actions[g.start : g.start + 3] == (
                2,
                2,
                2,
            )  # the stand-in search's window (Drop first)
            rest = list(zip(g.actions[g.start + 3 :], best[g.start + 3 :]))
            assert all(
                a in (b, 2) for a, b in rest
            )  # played out along the best game, or Drop where it must
            assert sum(a == b for a, b in rest) >= len(rest) - 2
            # its record: the window's moves, cut short; the play-out's discounted return is the bootstrap
            assert g.played_out and len(g.record) == 3 and g.record.bootstrap is not None
            game = replay(small, g.actions[: g.start + 3], tables)
            assert float(g.record.rewards.sum()) == pytest.approx(
                (game.return_s - start_return) * scale, rel=1e-5, abs=1e-6
            )
            undiscounted = (g.return_s - game.return_s) * scale
            tail, power = 0.0, 1.0
            for action in g.actions[g.start + 3 :]:
                before = game.return_s
                game.step(action)
                tail += power * (game.return_s - before) * scale
                power *= 0.5
            assert g.record.bootstrap == pytest.approx(tail, rel=1e-9, abs=1e-12)
            discounted.append(abs(tail - undiscounted) > 1e-6 * abs(undiscounted))
        else:
            assert (
                not g.played_out and g.record.bootstrap is None
            )  # ended inside its window: a whole record
            assert len(g.record) == small.num_buffers - g.start
    assert any(discounted)
    # a restart two decisions before the end ends inside its window of 3: all its moves are the agent's
    play = SelfPlay(small, tables, config, _LastAllowed())
    play.slots[0].start(best[:-2], best, window=3)
    finished = []
    while not finished:
        finished = [g for g in play.step({}, None) if g.start]
    assert (
        len(finished[0].record) == 2
        and finished[0].record.bootstrap is None
        and play.played_out_steps == 0
    )


def test_a_played_out_game_drops_where_the_best_games_decision_is_not_allowed(small) -> None:
    tables = build_tables(small)
    config = MuZeroSolver().config(
        {
            **TINY,
            "parallel_games": 1,
            "greedy_games": 0,
            "restart_fraction": 1.0,
            "restart_window": 1,
        }
    )
    play = SelfPlay(small, tables, config, _LastAllowed())
    copy_everywhere = (0,) * small.num_buffers  # not a game: Copy is illegal at some buffers
    play.restart_actions = copy_everywhere
    slot = play.slots[0]
    slot.start((), copy_everywhere, window=1)
    play._play_out(slot)
    game = Game(small, tables)
    play_with_backup(
        game, lambda g, allowed: 0 if allowed[0] else (2 if allowed[2] else int(np.argmax(allowed)))
    )
    assert slot.game.complete and tuple(slot.game.actions()) == tuple(game.actions())
    assert 0 < tuple(game.actions()).count(0) < small.num_buffers  # both cases were met


@pytest.mark.parametrize("window_records", [False, True])
def test_windowed_restarts_train_if_asked_and_their_best_is_kept_once_an_interval(
    small, window_records
) -> None:
    config = MuZeroSolver().config(
        {
            **TINY,
            "restart_fraction": 1.0,
            "greedy_games": 0,
            "restart_window": 2,
            "window_records": window_records,
            "demonstrations": "",
        }
    )  # restarts inside the first (random) games
    trainer = Trainer(small, config, seed=0)
    trainer.selfplay.search = _RandomAllowed(
        0
    )  # windows that differ: the best improves again and again
    added: list = []
    original = trainer.replay.add
    trainer.replay.add = lambda record: (added.append(record), original(record))[1]
    windowed_keeps: list[
        int
    ] = []  # the self-play moves at which a played-out game was replayed to be kept
    keep = trainer._keep_replayed
    trainer._keep_replayed = lambda done, clock: (
        windowed_keeps.append(trainer.counters.moves) if done.played_out else None,
        keep(done, clock),
    )[1]
    finished: list = []
    trainer.run(games=100, on_game=lambda done, elapsed: finished.append(done))
    assert trainer.counters.restarts > 0
    trained = [g for g in finished if window_records or not g.played_out]  # windows only if asked
    assert [id(r) for r in added] == [id(g.record) for g in trained] and len(trained) > 0
    assert any(g.played_out for g in finished)
    assert any(r.bootstrap is not None for r in added) == window_records
    assert len(windowed_keeps) >= 2  # kept by the loop, and more than once
    interval = -(-small.num_buffers // config.parallel_games)
    assert all(
        later - earlier >= interval for earlier, later in zip(windowed_keeps, windowed_keeps[1:])
    )
    # the interval: a kept windowed game holds the next one back for B / parallel_games moves
    windowed = [g for g in _restarted_games(small, trainer.tables, config, 16) if g.played_out]
    done = max(windowed, key=lambda g: g.return_s)
    trainer.reanalyser.best_return = trainer._kept_return_s = -np.inf
    trainer._windowed_best, trainer.counters.moves = None, 1000
    unbounded = Stopwatch(None)
    trainer._keep_best(done, unbounded)
    trainer._keep_best(min(windowed, key=lambda g: g.return_s), unbounded)
    assert trainer._windowed_best is done  # the better one waits for the loop
    trainer._keep_windowed_best(unbounded)
    assert (
        trainer._windowed_best is None
        and tuple(trainer.reanalyser.best.actions.tolist()) == done.actions
    )
    interval = -(-small.num_buffers // config.parallel_games)
    assert trainer._next_windowed_keep == 1000 + interval


def test_a_restarted_best_game_is_kept_whole_and_searched(small) -> None:
    config = MuZeroSolver().config(
        {**TINY, "restart_fraction": 1.0, "greedy_games": 0, "demonstrations": ""}
    )
    trainer = Trainer(small, config, seed=0)
    restarted = [g for g in _restarted_games(small, trainer.tables, config, 8) if g.start]
    done = max(restarted, key=lambda g: g.return_s)
    trainer._keep_best(done, Stopwatch(None))
    kept = trainer.reanalyser.best
    assert kept is not None and len(kept) == small.num_buffers  # the whole game, prefix included
    assert tuple(kept.actions.tolist()) == done.actions
    assert trainer.reanalyser.best_return == pytest.approx(
        done.return_s * trainer.selfplay.scale, rel=1e-5
    )
    assert not np.allclose(
        kept.policies, 1 / 3
    )  # searched (and the kept action's imitation share added)
    replayed: list = []
    trainer._keep_replayed = lambda done, clock: replayed.append(done)
    # the kept game played again: compared by its return in seconds, not replayed
    trainer._keep_best(done, Stopwatch(None))
    assert replayed == []


def test_a_policy_game_ends_with_the_budget_and_is_no_candidate(small) -> None:
    from mallocgame.solvers.muzero.selfplay import play_policy

    trainer = Trainer(small, MuZeroSolver().config(TINY), seed=0, answer="both")
    args = (small, trainer.tables, trainer.config, trainer.params, trainer._policy)
    assert play_policy(*args, stop=lambda: True) is None
    trainer._evaluate(Stopwatch(None), None, stop=lambda: True)
    assert trainer.counters.eval_games == 0 and trainer.best is None
    trainer._evaluate(Stopwatch(None), None)  # the run's last, after its budget: played whole
    assert trainer.counters.eval_games == 1 and trainer.best is not None


def test_answer_both_keeps_the_best_of_the_search_and_the_policy_games(small) -> None:
    config = MuZeroSolver().config({**TINY, "eval_every": 1})
    trainer = Trainer(small, config, seed=0, answer="both")
    searched: list[float] = []
    answer = trainer.run(games=8, on_game=lambda done, elapsed: searched.append(done.return_s))
    assert trainer.counters.eval_games > 0 and answer.info["answer"] == "both"
    assert answer.reward_s >= max(searched)  # never below its best self-play game
    with pytest.raises(SolverError, match="answer must be one of search, policy, both"):
        Trainer(small, config, answer="neither")


def test_restarts_begin_inside_the_best_demonstration_before_a_game_is_complete(small) -> None:
    config = MuZeroSolver().config(
        {**TINY, "restart_fraction": 1.0, "greedy_games": 0, "demonstrations": "heuristic"}
    )
    trainer = Trainer(small, config, seed=0)
    first: list = []
    trainer.run(games=1, on_game=lambda done, elapsed: first.append(done))  # each slot's first game
    _, demo_return, demo = trainer.best_demonstration
    assert first and all(g.start >= 1 for g in first)  # no slot played a fresh game first
    for g in first:
        assert g.actions[: g.start] == demo[: g.start]
    assert trainer.counters.restarts == len(first)
    if (
        trainer.best_return <= demo_return
    ):  # a restarted game must beat the demonstration to replace it
        assert trainer.selfplay.restart_actions == demo


def test_a_resumed_run_restarts_inside_its_best_game_from_its_first_move(
    tmp_path: Path, small
) -> None:
    config = MuZeroSolver().config(
        {**TINY, "restart_fraction": 1.0, "greedy_games": 0, "demonstrations": ""}
    )
    Trainer(small, config, seed=0, checkpoint_dir=tmp_path).run(games=8)
    resumed = Trainer(small, config, seed=0, checkpoint_dir=tmp_path)
    assert resumed.resumed and resumed.selfplay.restart_actions == resumed.best_actions
    first: list = []
    resumed.run(games=resumed.counters.games + 1, on_game=lambda done, _: first.append(done))
    assert first and all(g.start >= 1 for g in first)  # no slot played a fresh game first


def test_restart_unplayed_leaves_slots_that_have_moved_alone(small) -> None:
    tables = build_tables(small)
    config = MuZeroSolver().config({**TINY, "greedy_games": 1, "restart_fraction": 1.0})
    play = SelfPlay(small, tables, config, _LastAllowed())
    play.restart_actions = _copy_first_game(small, tables).actions
    play.step({}, None)  # every slot has played one move
    assert play.restart_unplayed(np.random.default_rng(0)) == 0
    fresh = SelfPlay(small, tables, config, _LastAllowed())
    fresh.restart_actions = play.restart_actions
    assert (
        fresh.restart_unplayed(np.random.default_rng(0)) == config.parallel_games - 1
    )  # not the greedy slot
    assert fresh.slots[0].first == 0 and all(slot.first >= 1 for slot in fresh.slots[1:])


@pytest.mark.parametrize("window", [0, 3])
def test_restarts_are_reproducible_from_the_seed_and_counted(small, window) -> None:
    config = MuZeroSolver().config({**TINY, "restart_fraction": 0.5, "restart_window": window})
    runs = []
    for _ in range(2):
        trainer = Trainer(small, config, seed=1)
        runs.append(trainer.run(games=24))
        _, demo_return, demo = trainer.best_demonstration
        # restarts begin inside the best complete game known: self-play's or a demonstration's
        assert trainer.selfplay.restart_actions == (
            trainer.best_actions if trainer.best_return > demo_return else demo
        )
    assert runs[0].actions == runs[1].actions
    assert runs[0].work == runs[1].work
    assert runs[0].work["restarts"] > 0
    assert check_solution(small, runs[0]).ok


def test_same_seed_and_work_same_solution_and_every_game_legal(small) -> None:
    runs = []
    for _ in range(2):
        trainer = Trainer(small, MuZeroSolver().config(TINY), seed=3)
        games = []
        original = trainer.replay.add
        trainer.replay.add = lambda g, o=original, gs=games: (gs.append(g), o(g))  # type: ignore[method-assign]
        runs.append(trainer.run(games=12))
        for g in games:  # every recorded move was allowed when played: the trajectory replays
            assert g.policies.shape == (len(g), 3)
    assert runs[0].actions == runs[1].actions
    assert runs[0].work == runs[1].work
    assert check_solution(small, runs[0]).ok


def test_a_program_without_buffers_is_answered_without_training() -> None:
    empty = build([], [I()])  # its game is complete at the start: self-play has no move
    for solver in ("muzero", "muzero-nosearch"):
        seen: list = []
        answer = get_solver(solver).solve(empty, SolveRequest(seed=0, work=4, callback=seen.append))
        assert answer.solver == solver and answer.actions == () and answer.work == {"games": 0}
        assert check_solution(empty, answer).ok and len(seen) == 1
        assert seen[0].solution.allocations == () and seen[0].solution.solver == solver


def test_muzero_answers_pass_check_on_the_cli(tmp_path: Path, capsys) -> None:
    for solver in ("muzero", "muzero-nosearch"):
        out = tmp_path / f"{solver}.json"
        assert (
            main(
                [
                    "solve",
                    "xla-v1/gru_infer",
                    "--solver",
                    solver,
                    "--work",
                    "8",
                    "--out",
                    str(out),
                    *TINY_ARGS,
                ]
            )
            == 0
        )
        assert main(["check", "xla-v1/gru_infer", str(out)]) == 0
        solution = load_solution(out)
        assert solution.solver == solver and solution.work["games"] >= 8
        assert solution.info["answer"] == ("search" if solver == "muzero" else "policy")
    capsys.readouterr()
    assert main(["solve", "xla-v1/gru_infer", "--solver", "muzero", "--option", "bogus=1"]) == 2
    assert "muzero: unknown option 'bogus'" in capsys.readouterr().err


def test_solver_interface_reports_improvements(small) -> None:
    seen = []
    solution = get_solver("muzero").solve(
        small, SolveRequest(seed=1, work=4, callback=seen.append, options=TINY)
    )
    assert seen and seen[-1].solution.reward_s == solution.reward_s
    assert all(b.solution.reward_s > a.solution.reward_s for a, b in zip(seen, seen[1:]))


def test_the_answer_improves_by_its_exact_reward_where_the_running_sum_cancels() -> None:
    """cancelling_instance's game [0, 0, 2, 0] sums to a higher return than the optimum
    [0, 2, 0, 2] but has a lower exact reward: after the optimum it is no answer (the
    callback hears only improvements), though it still ranks first for restarts."""
    inst = cancelling_instance()
    trainer = Trainer(inst, MuZeroSolver().config(TINY), seed=0)
    optimum, cancelling = (0, 2, 0, 2), (0, 0, 2, 0)
    seen: list = []
    trainer._improve(optimum, Stopwatch(None), seen.append)
    trainer._improve(cancelling, Stopwatch(None), seen.append)
    assert [i.solution.actions for i in seen] == [optimum]
    assert trainer.best is not None and trainer.best.actions == optimum
    assert trainer.best_actions == optimum and trainer.selfplay.restart_actions == cancelling
    assert trainer.best.reward_s == pytest.approx(2.3e-4, rel=1e-9)
    # the refused game, which restarts now replay, is looked at once, not at every return
    assert trainer.highest_return > trainer.best_return


def test_a_killed_run_resumes_from_its_checkpoint(tmp_path: Path, capsys) -> None:
    """The run (a process of its own) is killed once its first checkpoint holds a game;
    the same command, run here, resumes it."""
    run_dir = tmp_path / "run"
    args = [
        "train",
        "synthetic-v1/small",
        "--dir",
        str(run_dir),
        "--option",
        "checkpoint_seconds=0.5",
        *TINY_ARGS,
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "mallocgame.cli", *args, "--work", "400"]
    kill_after_first_checkpoint(command, run_dir, env, timeout_s=240)
    inst = load_workload("synthetic-v1/small")
    saved = Trainer(
        inst,
        MuZeroSolver().config({**TINY, "checkpoint_seconds": 0.5}),
        seed=0,
        checkpoint_dir=run_dir,
    )
    assert saved.resumed and saved.counters.games > 0 and saved.counters.learner_steps >= 0
    done_before = saved.counters.games
    assert check_solution(inst, load_solution(run_dir / BEST_NAME)).ok
    # resume to a total of done_before + 4 games: only the missing games are played
    capsys.readouterr()
    assert main([*args, "--work", str(done_before + 4)]) == 0
    assert "resumed from" in capsys.readouterr().err
    final = load_solution(run_dir / "final.solution.json")
    assert check_solution(inst, final).ok
    assert done_before + 4 <= final.work["games"] <= done_before + 4 + 4
    assert final.reward_s >= saved.best_return - 1e-12


def kill_after_first_checkpoint(
    argv: list[str], run_dir: Path, env: dict[str, str], timeout_s: float
) -> None:
    """Run ``argv`` until ``run_dir`` holds a checkpoint written after its best answer
    (so it holds a complete game), then kill it with SIGKILL."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    checkpoint, best = run_dir / CHECKPOINT_NAME, run_dir / BEST_NAME
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if (
                best.exists()
                and checkpoint.exists()
                and checkpoint.stat().st_mtime_ns > best.stat().st_mtime_ns
            ):
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


def test_a_resumed_run_keeps_its_best_demonstration(tmp_path: Path, small) -> None:
    config = MuZeroSolver().config({**TINY, "demonstrations": "heuristic,greedy"})
    first = Trainer(small, config, seed=0, checkpoint_dir=tmp_path)
    first.run(games=1)
    assert first.best_demonstration is not None
    resumed = Trainer(small, config, seed=0, checkpoint_dir=tmp_path)
    assert resumed.resumed and resumed.best_demonstration == first.best_demonstration


def test_a_resumed_run_keeps_the_mean_of_its_last_games(tmp_path: Path, small) -> None:
    """A resumed run's info["recent_mean"] was None (no new game) or covered only the games
    played since the resume."""
    config = MuZeroSolver().config(TINY)
    first = Trainer(small, config, seed=0, checkpoint_dir=tmp_path).run(games=8)
    assert first.info["recent_mean"] is not None
    resumed = Trainer(small, config, seed=0, checkpoint_dir=tmp_path)
    assert resumed.resumed
    assert resumed.run(games=8).info["recent_mean"] == first.info["recent_mean"]


def test_the_first_complete_game_is_checkpointed_at_once(
    tmp_path: Path, small, monkeypatch
) -> None:
    lines: list[str] = []
    trainer = Trainer(
        small,
        MuZeroSolver().config({**TINY, "checkpoint_seconds": 1e9}),
        seed=0,
        checkpoint_dir=tmp_path,
        log=lines.append,
    )
    saves: list[int] = []
    save = Trainer.save
    monkeypatch.setattr(
        Trainer, "save", lambda self: (saves.append(self.counters.games), save(self))[1]
    )
    trainer.run(games=3 * TINY["parallel_games"])
    assert "a new run" in lines[0]
    assert (
        0 < saves[0] < 3 * TINY["parallel_games"] and len(saves) == 2
    )  # the first games, then the end
    resumed = Trainer(
        small, MuZeroSolver().config(TINY), seed=0, checkpoint_dir=tmp_path, log=lines.append
    )
    assert resumed.resumed and resumed.counters.games == 3 * TINY["parallel_games"]


def test_a_checkpoint_of_another_run_is_refused(tmp_path: Path, small) -> None:
    trainer = Trainer(small, MuZeroSolver().config(TINY), seed=0, checkpoint_dir=tmp_path)
    trainer.run(games=4)
    with pytest.raises(SolverError, match="different seed"):
        Trainer(small, MuZeroSolver().config(TINY), seed=1, checkpoint_dir=tmp_path)
    (tmp_path / CHECKPOINT_NAME).write_bytes(b"\x00garbage")
    with pytest.raises(SolverError, match="not a readable checkpoint"):
        Trainer(small, MuZeroSolver().config(TINY), seed=0, checkpoint_dir=tmp_path)


def test_a_run_from_an_older_checkpoint_leaves_the_better_best_answer(
    tmp_path: Path, small
) -> None:
    config = MuZeroSolver().config(TINY)
    older = Trainer(small, config, seed=0, checkpoint_dir=tmp_path).run(games=1)
    kept = (tmp_path / CHECKPOINT_NAME).read_bytes()
    better = Trainer(small, config, seed=0, checkpoint_dir=tmp_path).run(games=16)
    assert better.reward_s > older.reward_s  # the run found a better answer ...
    (tmp_path / CHECKPOINT_NAME).write_bytes(kept)  # ... then was killed before its checkpoint
    resumed = Trainer(small, config, seed=0, checkpoint_dir=tmp_path)
    # the better game, found after the checkpoint, is the resumed run's best from the file
    assert resumed.resumed and resumed.best_return == pytest.approx(better.reward_s)
    assert resumed.run(games=5).reward_s >= better.reward_s
    assert load_solution(tmp_path / BEST_NAME).reward_s >= better.reward_s
    better = load_solution(tmp_path / BEST_NAME)
    (tmp_path / CHECKPOINT_NAME).unlink()  # a new run beside the file, with a smaller budget
    restarted = Trainer(small, config, seed=0, checkpoint_dir=tmp_path).run(games=1)
    assert restarted.reward_s < better.reward_s
    assert load_solution(tmp_path / BEST_NAME).reward_s == better.reward_s
    assert check_solution(small, load_solution(tmp_path / BEST_NAME)).ok


def test_a_resumed_run_takes_no_game_from_another_runs_best_file(tmp_path: Path, small) -> None:
    # run A (a demonstration, stopped before any game) leaves its answer in the folder's
    # best file; its checkpoint removed, run B of other settings starts there and resumes
    a_config = MuZeroSolver().config({**TINY, "demonstrations": "heuristic"})
    b_config = MuZeroSolver().config({**TINY, "demonstrations": "", "num_simulations": 2})
    a = Trainer(small, a_config, seed=0, checkpoint_dir=tmp_path).run(clock=Stopwatch(1e-3))
    assert a.info["fallback"] == "heuristic" and a.info["run"]
    (tmp_path / CHECKPOINT_NAME).unlink()
    b = Trainer(small, b_config, seed=0, checkpoint_dir=tmp_path).run(games=4)
    assert b.info["run"] != a.info["run"]
    resumed = Trainer(small, b_config, seed=0, checkpoint_dir=tmp_path)
    assert resumed.best_return == pytest.approx(b.reward_s)  # its own best, not A's file
    answer = resumed.run(games=4)
    assert "fallback" not in answer.info and answer.info["run"] == b.info["run"]


def test_a_resumed_fallback_answer_still_names_its_demonstration(tmp_path: Path, small) -> None:
    config = MuZeroSolver().config({**TINY, "demonstrations": "greedy"})
    first = Trainer(small, config, seed=0, checkpoint_dir=tmp_path).run(clock=Stopwatch(1e-3))
    assert first.work["games"] == 0 and first.info["fallback"] == "greedy"
    resumed = Trainer(small, config, seed=0, checkpoint_dir=tmp_path).run(games=0)
    assert resumed.actions == first.actions and resumed.info["fallback"] == "greedy"
    assert check_solution(small, resumed).ok
    later = Trainer(small, config, seed=0, checkpoint_dir=tmp_path).run(games=4)
    assert later.work["games"] >= 4 and "fallback" not in later.info  # its own game now


def test_a_checkpoint_folder_that_is_a_file_is_refused(tmp_path: Path, small) -> None:
    (tmp_path / "run").write_text("not a folder")
    with pytest.raises(SolverError, match="cannot hold checkpoints: it is a file"):
        Trainer(small, MuZeroSolver().config(TINY), seed=0, checkpoint_dir=tmp_path / "run")


def test_muzero_policy_search_plays_too(small) -> None:
    # mctx.muzero_policy with Dirichlet noise and a visit-count temperature
    solution = get_solver("muzero").solve(
        small, SolveRequest(seed=0, work=4, options={**TINY, "search": "muzero"})
    )
    assert check_solution(small, solution).ok and solution.work["games"] >= 4


def test_a_wall_clock_budget_trains_until_it_is_spent(small) -> None:
    trainer = Trainer(small, MuZeroSolver().config(TINY), seed=0)
    trainer.run(games=2)  # compiles (not part of what is measured here)
    games = trainer.counters.games
    # a billion games would take years: the six seconds are what stop it
    solution = trainer.run(seconds=6.0, games=10**9)
    assert games + 8 < trainer.counters.games < 10**9 and trainer.counters.learner_steps > 0
    # the progress line's mean: the normalized reward of the last 64 self-play games
    assert len(trainer.recent_returns) == min(64, trainer.counters.games)
    assert max(trainer.recent_returns) <= solution.normalized_reward + 1e-12
    assert f"mean {np.mean(trainer.recent_returns):.4f}" in trainer.progress_line()
    assert solution.info["recent_mean"] == pytest.approx(np.mean(trainer.recent_returns), abs=1e-6)
    assert check_solution(small, solution).ok


def test_gumbel_search_with_mctx_q_rescaling(small) -> None:
    solution = get_solver("muzero").solve(
        small, SolveRequest(seed=0, work=4, options={**TINY, "rescale_q": "true"})
    )
    assert check_solution(small, solution).ok


def test_a_budget_that_ends_before_any_game_answers_with_the_best_demonstration(small) -> None:
    options = {**TINY, "demonstrations": "greedy"}
    seen: list[float] = []
    answer = get_solver("muzero").solve(
        small,
        SolveRequest(
            seed=0, seconds=1e-3, options=options, callback=lambda imp: seen.append(imp.elapsed_s)
        ),
    )
    # the greedy demonstration had its share of the millisecond: its game went Drop first
    # once that was spent (solvers/greedy.py), and it is still a complete game
    assert answer.work["games"] == 0 and answer.info["fallback"] == "greedy"
    assert answer.actions is not None and len(answer.actions) == small.num_buffers
    assert len(seen) == 1
    assert check_solution(small, answer).ok
    # without a demonstration: one no-search game of the policy, and no fallback named
    alone = get_solver("muzero").solve(
        small, SolveRequest(seed=0, seconds=1e-3, options={**TINY, "demonstrations": ""})
    )
    assert (
        alone.work["games"] == 0 and alone.work["eval_games"] == 1 and "fallback" not in alone.info
    )


def test_learner_steps_are_due_one_per_train_every_moves_once_the_replay_is_full() -> None:
    from mallocgame.solvers.muzero.train import learner_steps_due

    config = MuZeroSolver().config({"train_every": 4, "min_replay": 10})
    assert learner_steps_due(config, 3, 0, 100) == (0, 0)
    assert learner_steps_due(config, 4, 0, 100) == (1, 4)
    assert learner_steps_due(config, 13, 4, 100) == (2, 12)
    assert learner_steps_due(config, 8, 0, 9) == (0, 8)  # replay too small: skipped, not owed
    assert learner_steps_due(config, 40, 0, 100, at_most=1) == (1, 40)  # a distributed round
    off = MuZeroSolver().config({"train_every": 4, "learning": "false"})
    assert learner_steps_due(off, 40, 0, 10**6) == (0, 40)


def test_a_policy_answer_plays_no_game_past_the_budget(small) -> None:
    trainer = Trainer(small, MuZeroSolver().config(TINY), seed=0, answer="policy")
    first = trainer.run(games=4)
    evaluations = trainer.counters.eval_games
    assert evaluations >= 1 and check_solution(small, first).ok
    spent = Stopwatch(1e-9)  # spent at once: the answer stays, no final game is played
    assert trainer.run(clock=spent).actions == first.actions
    assert trainer.counters.eval_games == evaluations
