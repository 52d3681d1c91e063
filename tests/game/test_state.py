"""The entry checks of :class:`mallocgame.game.state.Game`: what is not an instance, and
undos the game cannot make, are typed errors of one line (the rules are tested elsewhere);
the kernels' range sort."""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.errors import GameOverError, IllegalActionError, InstanceError, UndoError
from mallocgame.game import Game
from mallocgame.game import kernels as K


@pytest.mark.parametrize("value", [None, "synthetic-v1/small", 42])
def test_a_game_of_what_is_not_an_instance_is_an_instance_error(value) -> None:
    with pytest.raises(InstanceError, match=r"^Game: expected an Instance, not "):
        Game(value)


def test_tables_that_are_not_game_tables_are_an_instance_error(small) -> None:
    with pytest.raises(InstanceError, match=r"^Game: tables must be GameTables or None, not \{\}$"):
        Game(small, {})


def test_tables_of_another_instance_are_an_instance_error(small, lstm) -> None:
    from mallocgame.game.tables import build_tables

    with pytest.raises(InstanceError, match="the tables are not"):
        Game(small, build_tables(lstm))
    from dataclasses import replace

    twin = replace(small, buffers=tuple(replace(b, size=b.size // 2) for b in small.buffers))
    assert (twin.num_buffers, twin.num_instructions) == (small.num_buffers, small.num_instructions)
    with pytest.raises(InstanceError, match="the tables are not"):  # the same shape, not the same
        Game(small, build_tables(twin))
    Game(small, build_tables(small))


def test_an_undo_the_game_cannot_make_is_an_undo_error_and_changes_nothing(small) -> None:
    game = Game(small)
    with pytest.raises(UndoError, match=r"^cannot undo 1 decisions: 0 made$"):
        game.undo()
    with pytest.raises(ValueError):  # an UndoError is a ValueError too, as undos raised before
        game.undo_to(1)
    game.step(int(np.flatnonzero(game.legal_mask())[0]))
    game.step(int(np.flatnonzero(game.legal_mask())[0]))
    before = (game.current_buffer, game.actions(), game.return_s)
    for bad, needle in [
        (lambda: game.undo(3), r"^cannot undo 3 decisions: 2 made$"),
        (lambda: game.undo(-1), "cannot undo -1 decisions"),
        (lambda: game.undo(1.0), r"cannot undo 1\.0 decisions"),
        (lambda: game.undo(True), "cannot undo True decisions"),
        (lambda: game.undo_to(3), r"^cannot undo to 3: 2 decisions made$"),
        (lambda: game.undo_to(-1), "cannot undo to -1"),
        (lambda: game.undo_to("1"), "cannot undo to '1'"),
        (lambda: game.undo_to(None), "cannot undo to None"),
    ]:
        with pytest.raises(UndoError, match=needle):
            bad()
    assert (game.current_buffer, game.actions(), game.return_s) == before
    game.undo(np.int64(1))
    game.undo_to(np.int32(0))
    assert game.current_buffer == 0 and game.return_s == 0.0


def test_what_is_not_an_action_is_an_illegal_action_error(small) -> None:
    game = Game(small)
    for not_an_action in (1.0, np.float64(2.0), True, np.array([1]), 3, -1):
        with pytest.raises(IllegalActionError):
            game.step(not_an_action)  # type: ignore[arg-type]
        with pytest.raises(IllegalActionError):
            game.outcome(not_an_action)  # type: ignore[arg-type]
    assert game.current_buffer == 0
    while not game.done:
        game.step(int(np.flatnonzero(game.legal_mask())[-1]))
    with pytest.raises(GameOverError):
        game.step(1.0)  # type: ignore[arg-type]


def test_the_state_views_are_read_only_and_follow_steps_undos_and_clones(small) -> None:
    game = Game(small)
    views = game.views
    for array in (views.alloc, views.analysis, views.group_state, views.supply_left):
        with pytest.raises(ValueError, match="read-only"):
            array[(0,) * array.ndim] = 1
    assert (views.analysis[:, 0] != 0).tolist() == game.legal_mask().tolist()
    supply = game.supply_left()
    action = int(np.flatnonzero(game.legal_mask())[0])
    game.step(action)
    assert int(views.counters[K.C_CURRENT]) == game.current_buffer == 1
    assert views.alloc[0].tolist() == game.placements()[0].tolist()
    assert (views.analysis[:, 0] != 0).tolist() == game.legal_mask().tolist()
    other = game.clone()
    game.undo()
    assert views.supply_left.tolist() == supply.tolist()
    assert int(other.views.counters[K.C_CURRENT]) == 1 and other.views.alloc is not views.alloc


TABLE_ARRAYS = (
    "buf_int",
    "buf_demand",
    "ins_int",
    "ins_float",
    "ins_buf",
    "table_s",
    "ten_int",
    "group_size",
    "hw",
)
TABLE_VIEWS = (
    "buffer_time",
    "buffer_tensor",
    "buffer_group",
    "buffer_aligned",
    "tensor_def",
    "tensor_last_use",
    "supply_s",
)


@pytest.mark.parametrize("how", ["built", "pickled"])
def test_the_tables_games_share_are_read_only(lstm, how: str) -> None:
    import dataclasses
    import pickle

    from mallocgame.game.tables import build_tables

    tables = build_tables(lstm)
    if how == "pickled":  # as a worker process receives them
        tables = pickle.loads(pickle.dumps(tables))
    arrays = [
        f.name
        for f in dataclasses.fields(tables)
        if isinstance(getattr(tables, f.name), np.ndarray)
    ]
    assert sorted(arrays) == sorted(TABLE_ARRAYS)
    game = Game(lstm, tables)
    for name in TABLE_ARRAYS + TABLE_VIEWS:
        array = getattr(tables, name)
        assert array.size > 0, name
        with pytest.raises(ValueError, match="read-only"):
            array[(0,) * array.ndim] = 0
        with pytest.raises(ValueError, match="read-only"):
            array[...] = 0
    for name in ("buffer_is_out", "buffer_has_bit", "tensor_live_out"):  # new arrays
        computed = getattr(tables, name)
        computed[:] = ~computed
        assert not np.array_equal(computed, getattr(tables, name)), name
    while not game.done:  # the tables still play
        game.step(int(np.flatnonzero(game.legal_mask())[-1]))
    assert game.current_buffer == lstm.num_buffers


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_a_copied_or_pickled_game_has_views_of_its_own_state(small, how: str) -> None:
    import copy
    import pickle

    from mallocgame.game import replay
    from mallocgame.game.features import decision_features

    game = Game(small)
    made = {
        "copy": copy.copy,
        "deepcopy": copy.deepcopy,
        "pickle": lambda g: pickle.loads(pickle.dumps(g)),
    }[how](game)
    for _ in range(2):
        made.step(int(np.flatnonzero(made.legal_mask())[0]))
    assert game.current_buffer == 0  # the original did not move
    assert int(made.views.counters[K.C_CURRENT]) == made.current_buffer == 2
    fresh = replay(small, made.actions())
    assert np.array_equal(decision_features(made), decision_features(fresh))


def test_replay_refuses_what_is_not_an_action(small) -> None:
    from mallocgame.game import replay

    legal = int(np.flatnonzero(Game(small).legal_mask())[0])
    for not_an_action in (legal + 0.7, float(legal), True):
        with pytest.raises(IllegalActionError, match="^step 0: "):
            replay(small, [not_an_action])
    assert replay(small, [np.int64(legal)]).actions() == [legal]


@pytest.mark.parametrize("k", [0, 1, 2, 31, 32, 33, 100, 1000])
def test_sort_ranges_orders_the_first_k_ranges_by_start_and_keeps_each_pair(k: int) -> None:
    rng = np.random.default_rng(k)
    lo = rng.integers(0, max(k // 2, 1), size=k + 5)  # repeated starts; 5 beyond k
    hi = lo + rng.integers(0, 50, size=k + 5)
    before = sorted(zip(lo[:k].tolist(), hi[:k].tolist()))
    tail = (lo[k:].copy(), hi[k:].copy())
    K.sort_ranges(k, lo, hi)
    assert np.all(np.diff(lo[:k]) >= 0)
    assert sorted(zip(lo[:k].tolist(), hi[:k].tolist())) == before
    assert np.array_equal(lo[k:], tail[0]) and np.array_equal(hi[k:], tail[1])


def test_a_query_about_an_id_the_game_does_not_have_is_refused() -> None:
    """A negative id answered for the last buffer, tensor or group; one too large raised
    NumPy's IndexError."""
    from mallocgame.errors import NoSuchIdError
    from tests.builders import I, X, build

    game = Game(build([X(64)], [I(writes=[0]), I(reads=[0])]))
    game.step(1)  # buffer 0 NoCopy: tensor 0 fast-resident
    assert game.group_of(1) >= 0 and game.reads_fast_resident(1) == 0
    assert game.latest_allocation(0) == 0 and game.group_offset(game.group_of(0)) >= 0
    for query, count in (
        (game.group_of, 2),
        (game.reads_fast_resident, 2),
        (game.latest_allocation, 1),
        (game.group_offset, 2),
    ):
        for bad in (-1, count, 10**6, 0.0, True):
            with pytest.raises(NoSuchIdError, match="is not a"):
                query(bad)
    with pytest.raises(ValueError, match="drop_only must be bool"):
        game.step_forced([False, False, False])  # AttributeError: 'list' has no dtype
