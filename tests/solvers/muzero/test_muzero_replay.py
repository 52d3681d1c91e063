"""Replay: n-step value targets (records cut short too), batch alignment, eviction, state round trip."""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.solvers.muzero.replay import Batch, GameRecord, Replay, draw


def _record(length: int, offset: float = 0.0) -> GameRecord:
    t = np.arange(length)
    return GameRecord(
        observations={
            "decision": (t[:, None] + offset).astype(np.float32) * np.ones((1, 2), np.float32),
            "grid": np.ones((length, 2, 2), np.float32),
        },
        actions=(t % 3).astype(np.int8),
        rewards=(t + 1).astype(np.float32),
        policies=np.tile(np.array([0.2, 0.3, 0.5], np.float32), (length, 1)),
        root_values=(100.0 + t).astype(np.float32),
    )


def test_value_targets_by_hand() -> None:
    record = GameRecord(
        observations={},
        actions=np.zeros(4, np.int8),
        rewards=np.array([1.0, 2.0, 3.0, 4.0]),
        policies=np.zeros((4, 3), np.float32),
        root_values=np.array([10.0, 20.0, 30.0, 40.0]),
    )
    t = np.arange(4)
    # t=0: 1 + .5*2 + .25*30; t=1: 2 + .5*3 + .25*40; t=2: 3 + .5*4 (end); t=3: 4
    np.testing.assert_allclose(record.value_targets(t, 0.5, 2), [9.5, 13.5, 5.0, 4.0])
    np.testing.assert_allclose(record.value_targets(t, 1.0, 100), [10.0, 9.0, 7.0, 4.0])
    np.testing.assert_allclose(record.value_targets(np.array([1, 3]), 0.5, 2), [13.5, 4.0])


def test_a_record_cut_short_bootstraps_from_the_return_after_it() -> None:
    record = GameRecord(
        observations={},
        actions=np.zeros(3, np.int8),
        rewards=np.array([1.0, 2.0, 3.0]),
        policies=np.zeros((3, 3), np.float32),
        root_values=np.array([10.0, 20.0, 30.0]),
        bootstrap=8.0,
    )
    t = np.arange(4)
    # t=0: 1 + .5*2 + .25*30; t=1: 2 + .5*3 + .25*8 (the cut); t=2: 3 + .5*8; t=3 (the cut itself): 8
    np.testing.assert_allclose(record.value_targets(t, 0.5, 2), [9.5, 5.5, 7.0, 8.0])
    np.testing.assert_allclose(record.value_targets(t, 1.0, 100), [14.0, 13.0, 11.0, 8.0])
    whole = GameRecord(
        observations={},
        actions=record.actions,
        rewards=record.rewards,
        policies=record.policies,
        root_values=record.root_values,
    )
    np.testing.assert_allclose(whole.value_targets(t, 1.0, 100), [6.0, 5.0, 3.0, 0.0])
    record.bootstrap = None  # the cached returns follow the bootstrap
    np.testing.assert_allclose(record.value_targets(t, 1.0, 100), [6.0, 5.0, 3.0, 0.0])


def test_unrolls_past_a_cut_are_unknown_and_past_a_games_end_absorbing() -> None:
    cut = _record(5)
    cut.bootstrap = 7.0
    for record, bootstrap in ((cut, 7.0), (_record(5), 0.0)):
        batch = draw([record], 64, 3, np.random.default_rng(0), 1.0, 100)
        for i in range(64):
            t = int(batch.observations["decision"][i, 0])
            for k in range(4):
                inside = t + k < 5
                assert batch.mask[i, k] == float(inside)
                if (
                    t + k <= 5
                ):  # the remaining return, the bootstrap included (the value at the cut: it)
                    assert batch.values[i, k] == pytest.approx(sum(range(t + k + 1, 6)) + bootstrap)
                    assert batch.known[i, k] == 1.0
                else:  # past the end: known (absorbing, 0) for a whole game, unknown past a cut
                    assert batch.values[i, k] == 0.0
                    assert batch.known[i, k] == float(record.bootstrap is None)


def test_batch_rows_line_up_with_the_game() -> None:
    replay = Replay(capacity=1000, discount=1.0, td_steps=100)
    replay.add(_record(7))
    batch = replay.sample(64, 3, np.random.default_rng(0))
    assert batch.actions.shape == (64, 3) and batch.values.shape == (64, 4)
    assert batch.policies.shape == (64, 4, 3) and batch.observations["grid"].dtype == np.float32
    for i in range(64):
        t = int(batch.observations["decision"][i, 0])
        for k in range(4):
            inside = t + k < 7
            assert batch.mask[i, k] == float(inside)
            # value target = the remaining return (discount 1, no bootstrap in reach)
            expected = sum(range(t + k + 1, 8)) if inside else 0.0
            assert batch.values[i, k] == pytest.approx(expected)
            if k >= 1:
                assert batch.rewards[i, k] == (t + k if t + k - 1 < 7 else 0.0)
            if k < 3 and inside:
                assert batch.actions[i, k] == (t + k) % 3
        assert batch.rewards[i, 0] == 0.0


def test_eviction_keeps_the_newest_games_within_capacity() -> None:
    replay = Replay(capacity=10, discount=1.0, td_steps=5)
    for n in (4, 4, 4, 4):
        replay.add(_record(n))
    assert replay.positions == 8 and len(replay.games) == 2 and replay.games_added == 4
    assert replay.games[0].observations["grid"].dtype == np.uint8  # binary images stored as bytes


def test_state_round_trip() -> None:
    replay = Replay(capacity=100, discount=0.9, td_steps=3)
    replay.add(_record(5))
    cut = _record(3, offset=10)
    cut.bootstrap = 2.5
    replay.add(cut)
    other = Replay(capacity=100, discount=0.9, td_steps=3)
    other.load_state_dict(replay.state_dict())
    a = replay.sample(16, 2, np.random.default_rng(1))
    b = other.sample(16, 2, np.random.default_rng(1))
    for name in a.observations:
        np.testing.assert_array_equal(a.observations[name], b.observations[name])
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(a.known, b.known)
    assert other.games_added == 2
    assert [g.bootstrap for g in other.games] == [None, 2.5]


def test_draw_from_several_records_and_concatenate() -> None:
    games = [_record(4), _record(6, offset=100)]
    batch = draw(games, 32, 2, np.random.default_rng(0), 1.0, 10)
    origins = batch.observations["decision"][:, 0]
    assert (
        ((origins < 4) | (origins >= 100)).all() and (origins >= 100).any() and (origins < 4).any()
    )
    both = Batch.concatenate([batch, draw(games[:1], 8, 2, np.random.default_rng(1), 1.0, 10)])
    assert (
        len(both) == 40
        and both.values.shape == (40, 3)
        and both.observations["grid"].shape[0] == 40
    )
    np.testing.assert_array_equal(both.actions[:32], batch.actions)
    with pytest.raises(ValueError, match="no positions"):
        draw([_record(0)], 4, 2, np.random.default_rng(0), 1.0, 10)
