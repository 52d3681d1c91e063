"""Tests of the MuZero observation (mallocgame.game.observe).

The observer keeps its occupancy counts incrementally; every test compares them and
the observation arrays with plain re-computations from the game's public view
(:meth:`Game.allocations`, :meth:`Game.supply_left`, the instance's buffers), written
here without sharing code with the module.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mallocgame.errors import SolverError
from mallocgame.game import Game
from mallocgame.game.backup import DropBackup
from mallocgame.game.features import FeatureExtractor, decision_features
from mallocgame.game.observe import (
    BUF_PRESENT,
    GLOBAL_NAMES,
    NUM_BUFFER_FEATURES,
    NUM_STATIC_FEATURES,
    OBSERVATION_KEYS,
    ObservationConfig,
    Observer,
    empty_batch,
    observation_shapes,
)
from mallocgame.game.state import COPY, DROP, NOCOPY
from mallocgame.options import parse_config
from mallocgame.workloads.registry import load_workload
from mallocgame.workloads.synthetic import generate
from tests.builders import B as Buf
from tests.builders import I, X, build, conformance_instance, conformance_vector, random_policy

SMALL = ["random101", "random104", "random105", "random110", "tiny_alias", "tiny_chain"]
# Odd sizes on purpose: 4096 / 48 bytes per bin is not whole; windows reach past T.
ODD = ObservationConfig(
    future_buffers=3,
    same_tensor_buffers=2,
    grid_steps=8,
    grid_window=24,
    grid_addr=16,
    profile_bins=48,
    supply_window=7,
)
FINE = ObservationConfig(grid_steps=16, grid_window=16, grid_addr=64, profile_bins=64)


# ================================================================== reference model


def ref_occupancy(game: Game, bins: int) -> np.ndarray:
    """Counts [T, bins] of allocations touching each (step, bin), from game.allocations().

    Bin p covers the real addresses [p C / bins, (p + 1) C / bins); an allocation
    [offset, offset + aligned size) touches the bins it overlaps.
    """
    inst = game.instance
    cap = inst.hardware.fast_memory_bytes
    occ = np.zeros((inst.num_instructions, bins), dtype=np.int64)
    p = np.arange(bins, dtype=np.int64)
    for a in game.allocations():
        if a.start is None:
            continue
        size = inst.hardware.aligned(inst.buffers[a.buffer].size)
        # offset < (p + 1) C / bins and p C / bins < offset + size, times bins.
        touched = (a.offset * bins < (p + 1) * cap) & (p * cap < (a.offset + size) * bins)
        if size > 0:
            occ[a.start : a.end + 1] += touched
    return occ


def ref_observation(game: Game, cfg: ObservationConfig, move: int) -> dict[str, np.ndarray]:
    """The observation read off the module docstring, with plain loops."""
    shapes = observation_shapes(cfg)
    obs = {k: np.zeros(s, dtype=np.float64) for k, s in shapes.items()}
    if game.done:
        return obs
    inst = game.instance
    num_b, num_t = inst.num_buffers, inst.num_instructions
    b = game.current_buffer
    buf = inst.buffers[b]
    tau = buf.instruction
    static = FeatureExtractor(inst)._rows[:, :NUM_STATIC_FEATURES]

    same = [o.id for o in inst.buffers if o.id > b and o.tensor_id == buf.tensor_id]
    slots = [b] + [b + j for j in range(1, cfg.future_buffers + 1)]
    slots += [same[j] if j < len(same) else None for j in range(cfg.same_tensor_buffers)]
    for row, x in enumerate(slots):
        if x is not None and x < num_b:
            obs["buffers"][row, :NUM_STATIC_FEATURES] = static[x]
            obs["buffers"][row, BUF_PRESENT] = 1.0

    obs["decision"][:] = decision_features(game)
    members = [o.id for o in inst.buffers if o.alias_id == buf.alias_id]
    pos = members.index(b)
    obs["globals"][:] = [
        min(max(move, 0) / num_b, 10.0),
        b / num_b,
        pos / len(members),
        (len(members) - pos - 1) / len(members),
    ]

    occ = ref_occupancy(game, cfg.profile_bins)
    obs["profile"][:] = occ[tau] > 0
    rows_per, cols_per = cfg.grid_window // cfg.grid_steps, cfg.profile_bins // cfg.grid_addr
    first = tau - cfg.grid_window // 2
    for i in range(cfg.grid_steps):
        for j in range(cfg.grid_addr):
            for t in range(first + i * rows_per, first + (i + 1) * rows_per):
                if 0 <= t < num_t and occ[t, j * cols_per : (j + 1) * cols_per].any():
                    obs["grid"][i, j] = 1.0

    left = game.supply_left()
    first = tau - cfg.supply_window // 2
    for i in range(cfg.supply_window):
        t = first + i
        if 0 <= t < num_t:
            s = inst.instructions[t].supply_s
            obs["supply"][i] = 1.0 if s == 0 else min(1.0, left[t] / s)
    return obs


def assert_matches(observer: Observer, obs: dict[str, np.ndarray], move: int) -> None:
    game, cfg = observer.game, observer.config
    np.testing.assert_array_equal(observer.occ, ref_occupancy(game, cfg.profile_bins))
    ref = ref_observation(game, cfg, move)
    for key in OBSERVATION_KEYS:
        np.testing.assert_allclose(obs[key], ref[key], rtol=1e-6, atol=1e-6, err_msg=key)


def check_arrays(obs: dict[str, np.ndarray], cfg: ObservationConfig) -> None:
    shapes = observation_shapes(cfg)
    assert set(obs) == set(shapes) == set(OBSERVATION_KEYS)
    for key, shape in shapes.items():
        assert obs[key].shape == shape and obs[key].dtype == np.float32, key
        assert np.isfinite(obs[key]).all(), key
    for key in ("grid", "profile"):
        assert set(np.unique(obs[key])) <= {0.0, 1.0}
    for key in ("supply", "globals"):
        assert obs[key].min() >= 0.0
    assert obs["supply"].max() <= 1.0 and obs["globals"][1:].max() <= 1.0
    assert obs["globals"][0] <= 10.0
    assert obs["buffers"].min() >= -1.0 and obs["buffers"].max() <= 10.0
    assert obs["decision"].min() >= -1.0 and obs["decision"].max() <= 10.0
    assert set(np.unique(obs["buffers"][:, BUF_PRESENT])) <= {0.0, 1.0}


# ============================================================================ config


def test_shapes():
    shapes = observation_shapes()
    assert tuple(shapes) == OBSERVATION_KEYS
    assert shapes["buffers"] == (9, NUM_BUFFER_FEATURES) and NUM_BUFFER_FEATURES == 14
    assert shapes["globals"] == (len(GLOBAL_NAMES),) == (4,)
    assert shapes["grid"] == (32, 32) and shapes["profile"] == (64,) and shapes["supply"] == (32,)
    assert observation_shapes(ODD)["buffers"] == (6, 14)
    batch = empty_batch(ODD, 5)
    for key, shape in observation_shapes(ODD).items():
        assert batch[key].shape == (5, *shape) and batch[key].dtype == np.float32
        assert not batch[key].any()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"future_buffers": -1},
        {"same_tensor_buffers": -2},
        {"grid_steps": 0},
        {"grid_window": 0},
        {"grid_addr": 0},
        {"profile_bins": -64},
        {"supply_window": 0},
        {"grid_window": 100, "grid_steps": 32},
        {"grid_window": 16, "grid_steps": 32},
        {"profile_bins": 64, "grid_addr": 48},
        {"grid_steps": 2.0},
        {"future_buffers": True},
        {"profile_bins": "64"},
    ],
)
def test_config_rejects_nonsense(kwargs):
    with pytest.raises(ValueError, match="ObservationConfig|must be in"):
        ObservationConfig(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"future_buffers": 65},
        {"same_tensor_buffers": 65},
        {"grid_steps": 2048, "grid_window": 4096},
        {"grid_window": 131072},
        {"grid_addr": 2048, "profile_bins": 4096},
        {"profile_bins": 100000, "grid_addr": 1},
        {"supply_window": 1000000},
    ],
)
def test_config_checks_declared_ranges(kwargs):
    """Made in code, a config checks each field's ``within=`` range as the CLI does."""
    (name, value), *_ = kwargs.items()
    with pytest.raises(ValueError, match=rf"option {name} must be in \[\d+, \d+\], not {value}"):
        ObservationConfig(**kwargs)
    with pytest.raises(SolverError, match=rf"{name} must be in"):  # the CLI's coercer
        parse_config(ObservationConfig, kwargs, "muzero")


def test_config_accepts_range_ends():
    ObservationConfig(future_buffers=64, same_tensor_buffers=64, grid_steps=1024, grid_window=65536)
    ObservationConfig(grid_addr=1024, profile_bins=4096, supply_window=65536)
    ObservationConfig(future_buffers=0, same_tensor_buffers=0, grid_steps=1, grid_window=1)
    ObservationConfig(grid_addr=1, profile_bins=1, supply_window=1)


def test_config_accepts_numpy_ints():
    cfg = ObservationConfig(grid_steps=np.int64(8), grid_window=8)
    assert cfg.grid_steps == 8 and type(cfg.grid_steps) is int
    assert ObservationConfig(future_buffers=0, same_tensor_buffers=0).buffer_rows == 1


# ============================================================================ values


@pytest.mark.parametrize("name", SMALL)
@pytest.mark.parametrize("cfg", [ObservationConfig(), ODD, FINE], ids=["default", "odd", "fine"])
def test_matches_reference_along_random_games(name, cfg):
    """Every decision of random Drop-backup games, with undo_to and reset thrown in."""
    inst = conformance_instance(name)
    rng = np.random.default_rng(7)
    game = Game(inst)
    observer = Observer(game, cfg)
    for _ in range(3):
        game.reset()
        driver = DropBackup(game)
        policy = random_policy(rng)
        move = 0
        while not game.complete:
            obs = observer.observe(move)
            check_arrays(obs, cfg)
            assert_matches(observer, obs, move)
            driver.step(policy(game, driver.allowed()))
            move += 1
        assert_matches(observer, observer.observe(move), move)
        # Undo part of the completed game, then observe again.
        game.undo_to(int(rng.integers(0, game.current_buffer + 1)))
        assert_matches(observer, observer.observe(move), move)


@pytest.mark.parametrize("name", ["xla-v1/lstm_infer", "xla-v1/resnet_infer"])
def test_bundled_programs(name):
    inst = load_workload(name)
    cfg = ObservationConfig()
    rng = np.random.default_rng(1)
    game = Game(inst)
    observer = Observer(game, cfg)
    driver = DropBackup(game)
    policy = random_policy(rng)
    move = 0
    check_every = max(1, inst.num_buffers // 12)
    while not game.complete:
        driver.step(policy(game, driver.allowed()))
        move += 1
        if move % check_every == 0 or game.complete:
            obs = observer.observe(move)
            check_arrays(obs, cfg)
            assert_matches(observer, obs, move)
        else:
            observer.sync()
    occupied = observer.occ.sum()
    # Back to the middle (the observer subtracts its own record), then replay differently.
    game.undo_to(inst.num_buffers // 2)
    observer.sync()
    np.testing.assert_array_equal(observer.occ, ref_occupancy(game, cfg.profile_bins))
    assert observer.occ.sum() <= occupied
    while not game.done:
        game.step(int(np.flatnonzero(game.legal_mask())[-1]))  # Drop, else NoCopy, else Copy
    assert_matches(observer, observer.observe(move), move)
    game.reset()
    obs = observer.observe(0)
    assert not observer.occ.any()
    assert_matches(observer, obs, 0)


def test_buffer_rows_name_the_right_buffers(lstm):
    inst = lstm
    cfg = ObservationConfig(future_buffers=4, same_tensor_buffers=3)
    game = Game(inst)
    observer = Observer(game, cfg)
    static = FeatureExtractor(inst)._rows[:, :NUM_STATIC_FEATURES]
    seen_same = seen_padding = 0
    while not game.complete:
        b = game.current_buffer
        rows = observer.observe()["buffers"]
        expected = [b, *range(b + 1, b + 5)]
        expected += [
            o.id for o in inst.buffers if o.id > b and o.tensor_id == inst.buffers[b].tensor_id
        ][:3]
        for row, x in zip(rows, expected + [None] * (len(rows) - len(expected))):
            if x is None or x >= inst.num_buffers:
                assert not row.any()
                seen_padding += 1
            else:
                np.testing.assert_array_equal(row[:NUM_STATIC_FEATURES], static[x])
                assert row[BUF_PRESENT] == 1.0
        seen_same += len(expected) - 5
        game.step(int(np.flatnonzero(game.legal_mask())[-1]))
    assert seen_same > 0 and seen_padding > 0


def test_globals_by_hand():
    # Buffers in game order: 0 (read x0 at 0, group g), 1 (write x1 at 0),
    # 2 (read x0 at 1, group g), 3 (read x1 at 2), 4 (read x0 at 2, group g).
    inst = build(
        tensors=[X(100), X(100)],
        instructions=[
            I(reads=[Buf(0, alias="g")], writes=[1]),
            I(reads=[Buf(0, alias="g")]),
            I(reads=[1, Buf(0, alias="g")]),
        ],
        capacity=6400,
    )
    game = Game(inst)
    observer = Observer(game)
    expected = {0: (0, 2 / 3), 1: (0, 0), 2: (1 / 3, 1 / 3), 3: (0, 0), 4: (2 / 3, 0)}
    move = 0
    while not game.complete:
        b = game.current_buffer
        g = observer.observe(move_number=7 * move)["globals"]
        assert g[0] == pytest.approx(min(7 * move / 5, 10))
        assert g[1] == pytest.approx(b / 5)
        assert tuple(g[2:]) == pytest.approx(expected[b])
        game.step(DROP)
        move += 1
    assert observer.observe(1000)["globals"].tolist() == [0, 0, 0, 0]


def test_nocopy_extension_adds_its_own_interval():
    # capacity 6400 / 64 bins = 100 bytes per bin, alignment 100. x0 (100 B, input)
    # read at 1 and 3; x1 (150 B, aligned 200) defined at 0, read at 4. Supply 1 s per
    # step, demand 1 s per 100 B.
    inst = build(
        tensors=[X(100), X(150, live_out=False)],
        instructions=[I(writes=[1]), I(reads=[0]), I(), I(reads=[0]), I(reads=[1])],
        capacity=6400,
        alignment=100,
    )
    game = Game(inst)
    observer = Observer(game, ObservationConfig(grid_steps=8, grid_window=8, grid_addr=64))
    game.step(NOCOPY)  # buffer 0: x1 output, memory [0, 4] (its live range) at 0
    game.step(COPY)  # buffer 1: x0 read at 1, copy [0, 0], memory [0, 1] at 200 (after x1)
    assert game.allocations()[1].offset == 200
    game.step(NOCOPY)  # buffer 2: x0 read at 3, extends x0 in place: [2, 3] at 200
    occ_expected = np.zeros((5, 64), dtype=np.int32)
    occ_expected[0:5, 0:2] = 1  # x1 bytes [0, 200) -> bins 0, 1
    occ_expected[0:4, 2] = 1  # x0 bytes [200, 300) -> bin 2, steps 0..1 and 2..3
    obs = observer.observe()
    np.testing.assert_array_equal(observer.occ, occ_expected)
    # Current buffer 3 (x1 read at 4): window [0, 8), one step per row.
    assert obs["grid"][:5, :3].tolist() == [[1, 1, 1]] * 4 + [[1, 1, 0]]
    assert not obs["grid"][5:].any() and not obs["grid"][:, 3:].any()
    assert obs["profile"][:3].tolist() == [1, 1, 0] and not obs["profile"][3:].any()
    game.undo_to(2)  # forget the extension only
    observer.sync()
    occ_expected[2:4, 2] = 0
    np.testing.assert_array_equal(observer.occ, occ_expected)


def test_grid_row_at_tau_agrees_with_profile():
    inst = load_workload("xla-v1/resnet_infer")
    game = Game(inst)
    rng = np.random.default_rng(3)
    cfg = ObservationConfig()  # 4 steps a row, 2 bins a column
    fine = ObservationConfig(grid_steps=16, grid_window=16, grid_addr=64)  # 1 step a row
    observer, fine_observer = Observer(game, cfg), Observer(game, fine)
    driver = DropBackup(game)
    hits = 0
    while not game.complete:
        obs, fobs = observer.observe(), fine_observer.observe()
        row = (cfg.grid_window // 2) // (cfg.grid_window // cfg.grid_steps)
        pooled = obs["profile"].reshape(cfg.grid_addr, -1).max(axis=1)
        assert (obs["grid"][row] >= pooled).all()
        np.testing.assert_array_equal(fobs["grid"][fine.grid_window // 2], fobs["profile"])
        np.testing.assert_array_equal(fobs["profile"], obs["profile"])
        hits += int(obs["profile"].any())
        driver.step(random_policy(rng)(game, driver.allowed()))
    assert hits > 0


# ============================================================================ the end


def test_zeros_when_complete():
    game = Game(conformance_instance("random105"))
    observer = Observer(game)
    DropBackup(game).play(random_policy(np.random.default_rng(0)))
    obs = observer.observe(99)
    check_arrays(obs, observer.config)
    assert not any(obs[k].any() for k in OBSERVATION_KEYS)
    assert observer.occ.any()  # the occupancy still follows the game


def test_zeros_when_infeasible():
    prefix = conformance_vector("random101")["infeasible_prefix"]
    game = Game(conformance_instance("random101"))
    observer = Observer(game)
    for a in prefix["actions"]:
        game.step(a)
    assert game.infeasible
    obs = observer.observe(5)
    assert not any(obs[k].any() for k in OBSERVATION_KEYS)
    np.testing.assert_array_equal(observer.occ, ref_occupancy(game, 64))


def test_empty_program():
    inst = build(tensors=[], instructions=[I()], capacity=1024)
    game = Game(inst)
    obs = Observer(game).observe(3)
    check_arrays(obs, ObservationConfig())
    assert not any(obs[k].any() for k in OBSERVATION_KEYS)


# ============================================================================ batches


def test_batch_rows_written_in_place():
    cfg = ODD
    games = [Game(conformance_instance(n)) for n in ("random105", "random110", "tiny_alias")]
    observers = [Observer(g, cfg) for g in games]
    for i, g in enumerate(games):
        for _ in range(i + 2):
            g.step(int(np.flatnonzero(g.legal_mask())[-1]))
    batch = empty_batch(cfg, 5)
    for row, obs in zip((4, 0, 2), observers):
        assert obs.observe(row, out=batch, index=row) is batch
    for row, obs in zip((4, 0, 2), observers):
        single = obs.observe(row)
        for key in OBSERVATION_KEYS:
            np.testing.assert_array_equal(batch[key][row], single[key], err_msg=key)
    for key in OBSERVATION_KEYS:
        assert not batch[key][[1, 3]].any()
    # The batch row of a finished game is zeroed.
    DropBackup(games[0]).play(random_policy(np.random.default_rng(0)))
    observers[0].observe(0, out=batch, index=4)
    assert not any(batch[k][4].any() for k in OBSERVATION_KEYS)


def test_batch_errors():
    observer = Observer(Game(conformance_instance("random105")), ODD)
    batch = empty_batch(ODD, 3)
    with pytest.raises(ValueError, match="index"):
        observer.observe(0, out=batch)
    with pytest.raises(ValueError, match="out"):
        observer.observe(0, index=1)
    for bad in (3, -1):
        with pytest.raises(ValueError, match="out of range"):
            observer.observe(0, out=batch, index=bad)
    for bad in (1.0, True, np.float64(1.0), "1"):  # failed inside numba, not a ValueError
        with pytest.raises(ValueError, match="must be an int"):
            observer.observe(0, out=batch, index=bad)
    other = empty_batch(ODD, 3)
    assert observer.observe(0, out=other, index=np.int64(2)) is other
    wrong = empty_batch(ObservationConfig(), 3)
    with pytest.raises(ValueError, match="shape"):
        observer.observe(0, out=wrong, index=0)
    uneven = dict(batch, grid=np.zeros((2, *batch["grid"].shape[1:]), dtype=np.float32))
    with pytest.raises(ValueError, match="batch size"):
        observer.observe(0, out=uneven, index=0)
    # a grid of another pooling, or a decision row of another batch or length, is refused
    # too, before any array is written
    steps, addr = batch["grid"].shape[1:]
    for key, shape in (
        ("grid", (3, max(steps // 2, 1), max(addr // 2, 1))),
        ("decision", (2, batch["decision"].shape[1])),
        ("decision", (3, batch["decision"].shape[1] + 1)),
    ):
        odd = dict(batch, **{key: np.zeros(shape, dtype=np.float32)})
        with pytest.raises(ValueError, match="shape|batch size"):
            observer.observe(0, out=odd, index=1)
    assert not any(batch[k].any() for k in OBSERVATION_KEYS)


# ============================================================================ syncing


def test_undo_and_replay_between_syncs():
    inst = load_workload("xla-v1/resnet_infer")
    game = Game(inst)
    observer = Observer(game)
    rng = np.random.default_rng(5)
    for round_ in range(6):
        driver = DropBackup(game) if game.is_backup_point else None
        target = game.current_buffer + int(rng.integers(5, 40))
        while game.current_buffer < target and not game.done:
            if driver is not None:
                driver.step(random_policy(rng)(game, driver.allowed()))
            else:
                game.step(int(rng.choice(np.flatnonzero(game.legal_mask()))))
        observer.sync()
        # Go back, then forward again with other choices: synced in between (the
        # contract) on even rounds; on odd rounds not, then sync(verify=True).
        game.undo_to(int(rng.integers(0, game.current_buffer + 1)))
        if round_ % 2 == 0:
            observer.sync()
            np.testing.assert_array_equal(observer.occ, ref_occupancy(game, 64))
        for _ in range(int(rng.integers(0, 30))):
            if game.done:
                break
            game.step(int(rng.choice(np.flatnonzero(game.legal_mask()))))
        observer.sync(verify=round_ % 2 == 1)
        np.testing.assert_array_equal(observer.occ, ref_occupancy(game, 64))
        if game.done:
            game.reset()


def test_changed_last_row_is_noticed_without_verify():
    inst = conformance_instance("random105")
    game = Game(inst)
    observer = Observer(game)
    while game.legal_mask()[COPY] == 0 or game.current_buffer == 0:
        game.step(int(np.flatnonzero(game.legal_mask())[-1]))  # Drop when it can
    game.step(COPY)
    observer.sync()
    game.undo(1)
    game.step(DROP if game.legal_mask()[DROP] else NOCOPY)  # same count, other last row
    observer.sync()
    np.testing.assert_array_equal(observer.occ, ref_occupancy(game, 64))


def test_reset_rebuilds_and_follows_game_reset(lstm):
    game = Game(lstm)
    observer = Observer(game)
    DropBackup(game).play(random_policy(np.random.default_rng(2)))
    observer.sync()
    incremental = observer.occ.copy()
    observer.reset()
    np.testing.assert_array_equal(observer.occ, incremental)
    assert observer.synced == game.current_buffer
    late = Observer(game)  # made mid-game: starts from the game's state
    np.testing.assert_array_equal(late.occ, incremental)
    game.reset()
    observer.sync()
    assert observer.synced == 0 and not observer.occ.any()
    assert observer.game is game


def test_static_arrays_shared_per_tables():
    game = Game(conformance_instance("random105"))
    other = Game(game.instance, game.tables)
    a, b = Observer(game), Observer(other)
    assert a._static is b._static
    assert Observer(game, ODD)._static is not a._static


ops = st.lists(
    st.one_of(
        st.tuples(st.just("step"), st.integers(0, 2)),
        st.tuples(st.just("undo"), st.integers(0, 8)),
        st.tuples(st.just("sync"), st.booleans()),
        st.tuples(st.just("reset"), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), program=ops)
def test_property_random_operations(seed, program):
    """Any mix of steps, undos, syncs and resets: the counts equal a rebuild."""
    inst = generate(40, seed=seed % 7)
    game = Game(inst)
    observer = Observer(game, ODD)
    for op, arg in program:
        if op == "step" and not game.done:
            legal = np.flatnonzero(game.legal_mask())
            game.step(int(legal[arg % len(legal)]))
        elif op == "undo":
            game.undo(min(arg, game.current_buffer))
        elif op == "sync":
            observer.sync(verify=arg)
        elif op == "reset":
            game.reset()
    observer.sync(verify=True)
    np.testing.assert_array_equal(observer.occ, ref_occupancy(game, ODD.profile_bins))
    obs = observer.observe(len(program))
    check_arrays(obs, ODD)
    ref = ref_observation(game, ODD, len(program))
    for key in OBSERVATION_KEYS:
        np.testing.assert_allclose(obs[key], ref[key], rtol=1e-6, atol=1e-6, err_msg=key)
    assert math.isfinite(float(obs["decision"].sum()))


def test_a_subnormal_normalizer_and_supply_give_finite_observations():
    """R (4e-309 s: bandwidths near the largest float) and a supply (1e-310 s) so small
    that their reciprocals overflow: every feature and observation stays finite."""
    from mallocgame.game.gym import MallocGameEnv
    from mallocgame.solvers.muzero.config import MuZeroConfig
    from mallocgame.solvers.muzero.selfplay import reward_scale

    inst = build(
        [X(1), X(1)],
        [I(writes=[1], supply=1e-310), I(reads=[0, 1], supply=1e-310)],
        fast_bw=1.5e308,
        slow_bw=1e308,
        copy_bw=1e308,
    )
    game = Game(inst)
    assert 0 < game.tables.normalizer_s < 2.2e-308  # subnormal
    observer, extract = Observer(game, ObservationConfig()), FeatureExtractor(game)
    driver, move = DropBackup(game), 0
    while not game.complete:
        for value in (*observer.observe(move).values(), extract(game), decision_features(game)):
            assert np.isfinite(value).all()
        allowed = np.flatnonzero(driver.allowed())
        driver.step(int(allowed[0]))  # Copy where it can: a return of subnormal seconds
        move += 1
    env = MallocGameEnv(inst)
    observation, _ = env.reset(seed=0)
    rewards = [env.step(int(np.flatnonzero(env.action_masks())[0]))[1] for _ in range(2)]
    assert np.isfinite(observation).all() and np.isfinite(rewards).all()
    assert math.isfinite(reward_scale(game.tables, MuZeroConfig()))


def test_the_largest_fast_memory_bins_its_allocations():
    """Capacity x profile bins past int64 (2**53 B, the most SPEC allows, x 4,096): the
    bins are taken in floating point, here exactly (powers of two), where int64 products
    wrapped around."""
    quarter = 2**51
    inst = build(
        [X(quarter), X(quarter)],
        [I(writes=[0]), I(writes=[1]), I(reads=[0, 1])],
        capacity=2**53,
        alignment=1,
        fast_bw=1e10,
        slow_bw=1e9,
        copy_bw=1e9,
    )
    game = Game(inst)
    cfg = ObservationConfig(profile_bins=4096, grid_addr=32)
    observer = Observer(game, cfg)
    game.step(NOCOPY)  # tensor 0 at [0, 2**51): bins 0..1023, steps 0..2
    game.step(NOCOPY)  # tensor 1 at [2**51, 2**52): bins 1024..2047, steps 1..2
    observer.observe(2)
    assert game.allocations()[1].offset == quarter
    expected = np.zeros((3, 4096), dtype=np.int32)
    expected[0:3, :1024] = 1
    expected[1:3, 1024:2048] = 1
    np.testing.assert_array_equal(observer.occ, expected)
