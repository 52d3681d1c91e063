"""Tests of the decision feature vector (mallocgame.game.features)."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest

from mallocgame.errors import InstanceError
from mallocgame.game import Game
from mallocgame.game.backup import DropBackup
from mallocgame.game.features import (
    _CACHE,
    FEATURE_HIGH,
    FEATURE_LOW,
    FEATURE_NAMES,
    NUM_FEATURES,
    FeatureExtractor,
    decision_features,
    feature_extractor,
)
from tests.builders import (
    CONFORMANCE_NAMES,
    conformance_instance,
    conformance_vector,
    random_policy,
)

IDX = {name: i for i, name in enumerate(FEATURE_NAMES)}


def check_vector(game: Game, f: np.ndarray) -> None:
    assert f.dtype == np.float32 and f.shape == (NUM_FEATURES,)
    assert np.isfinite(f).all()
    assert f.min() >= FEATURE_LOW and f.max() <= FEATURE_HIGH
    mask = game.legal_mask()
    assert f[IDX["legal_copy"]] == mask[0]
    assert f[IDX["legal_nocopy"]] == mask[1]
    assert f[IDX["legal_drop"]] == mask[2]


def test_names():
    assert len(FEATURE_NAMES) == NUM_FEATURES == len(set(FEATURE_NAMES))
    assert all(isinstance(n, str) for n in FEATURE_NAMES)


@pytest.mark.parametrize("name", CONFORMANCE_NAMES)
def test_features_along_games(name):
    """Every decision of random games (with Drop-backup, so each completes)."""
    inst = conformance_instance(name)
    for seed in range(3):
        game = Game(inst)
        driver = DropBackup(game)
        policy = random_policy(seed)
        while not game.complete:
            f = decision_features(game)
            check_vector(game, f)
            b = game.current_buffer
            assert f[IDX["progress"]] == pytest.approx(b / inst.num_buffers)
            assert f[IDX["bias"]] == 1.0
            buf = inst.buffers[b]
            assert f[IDX["is_output"]] == float(buf.is_output)
            assert f[IDX["target_time"]] == pytest.approx(buf.instruction / inst.num_instructions)
            assert f[IDX["tensor_resident"]] == float(game.reads_fast_resident(b) >= 0)
            if f[IDX["tensor_resident"]]:
                assert not game.legal_mask()[0] and not game.legal_mask()[2]
            if f[IDX["group_slow"]]:
                assert list(game.legal_mask()) == [False, False, True]
            if f[IDX["group_fast"]]:
                assert not game.legal_mask()[2]
            names = {0: ("copy_interval", "copy_offset"), 1: ("nocopy_interval", "nocopy_offset")}
            for a, (li, oi) in names.items():
                out = game.outcome(a)
                if out is None or out[1] < 0:
                    assert f[IDX[li]] == 0.0 and f[IDX[oi]] == 0.0
                else:
                    offset, start, end = out[:3]
                    assert f[IDX[li]] == pytest.approx((end - start + 1) / inst.num_instructions)
                    assert f[IDX[oi]] == pytest.approx(offset / inst.hardware.fast_memory_bytes)
            r = game.tables.normalizer_s
            if r:
                expected = np.clip(game.return_s / r, -1, 10)
                assert f[IDX["return"]] == pytest.approx(expected, abs=1e-6)
            driver.step(policy(game, driver.allowed()))
        assert not decision_features(game).any()


@pytest.mark.parametrize("name", CONFORMANCE_NAMES)
def test_static_features_match_brute_force(name):
    inst = conformance_instance(name)
    rows = FeatureExtractor(inst)._rows
    num_t = inst.num_instructions
    top = max(abs(b.benefit_s) for b in inst.buffers)
    for b in inst.buffers:
        x = inst.tensors[b.tensor_id]
        row = rows[b.id]
        size = inst.hardware.aligned(b.size) / inst.hardware.fast_memory_bytes
        assert row[IDX["size"]] == pytest.approx(min(size, 10))
        assert row[IDX["live_start"]] == pytest.approx(x.def_time / num_t)
        assert row[IDX["live_end"]] == pytest.approx(x.last_use_time / num_t)
        assert row[IDX["live_length"]] == pytest.approx((x.last_use_time - x.def_time) / num_t)
        assert row[IDX["live_out"]] == float(x.live_out)
        assert row[IDX["benefit_rel"]] == pytest.approx(b.benefit_s / top if top else 0.0)
        group = sum(1 for o in inst.buffers if o.alias_id == b.alias_id)
        assert row[IDX["group_size"]] == pytest.approx(math.log2(group))
        later = [
            o
            for o in inst.buffers
            if o.id > b.id and o.tensor_id == b.tensor_id and not o.is_output
        ]
        assert row[IDX["later_reads"]] == pytest.approx(math.log2(1 + len(later)))
        gap = (later[0].instruction - b.instruction) / num_t if later else 1.0
        assert row[IDX["next_read_gap"]] == pytest.approx(gap)


def test_zero_when_infeasible():
    prefix = conformance_vector("random101")["infeasible_prefix"]
    game = Game(conformance_instance("random101"))
    for a in prefix["actions"]:
        game.step(a)
    assert game.infeasible
    f = decision_features(game)
    assert f.shape == (NUM_FEATURES,) and not f.any()


def test_values_change_after_step():
    inst = conformance_instance("random105")
    game = Game(inst)
    before = decision_features(game).copy()
    game.step(int(np.flatnonzero(game.legal_mask())[-1]))
    after = decision_features(game)
    assert after[IDX["progress"]] > before[IDX["progress"]]
    assert not np.array_equal(before, after)
    # A Copy of an operand consumes supply before its target time.
    game = Game(inst)
    driver = DropBackup(game)
    while not game.complete:
        b = game.current_buffer
        buf = inst.buffers[b]
        if game.legal_mask()[0] and not buf.is_output and buf.demand_s > 0:
            f0 = decision_features(game)
            _, _, _, cs, ce = game.outcome(0)
            t = inst.buffers[b].instruction - 1
            left = game.supply_left()[t]
            game.step(0)
            assert game.supply_left()[t] < left
            break
        driver.step(2 if driver.allowed()[2] else int(np.flatnonzero(driver.allowed())[0]))
    else:
        pytest.fail("no operand Copy found")
    assert f0[IDX["legal_copy"]] == 1.0
    assert f0[IDX["copy_span"]] == pytest.approx((ce - cs + 1) / inst.num_instructions)


def test_return_feature_grows_with_reward():
    inst = conformance_instance("random105")
    game = Game(inst)
    driver = DropBackup(game)
    rets = []
    while not game.complete:
        rets.append(decision_features(game)[IDX["return"]])
        allowed = driver.allowed()
        driver.step(0 if allowed[0] else (1 if allowed[1] else 2))
    assert max(rets) > 0.0


def test_clone_and_undo_consistent():
    inst = conformance_instance("random110")
    game = Game(inst)
    driver = DropBackup(game)
    policy = random_policy(7)
    for _ in range(inst.num_buffers // 2):
        if game.complete:
            break
        driver.step(policy(game, driver.allowed()))
    f = decision_features(game).copy()
    other = game.clone()
    np.testing.assert_array_equal(decision_features(other), f)
    mark = game.mark()
    if not game.done:
        game.step(int(np.flatnonzero(game.legal_mask())[0]))
        game.undo_to(mark)
    np.testing.assert_array_equal(decision_features(game), f)


def test_out_argument_and_extractor_from_game():
    inst = conformance_instance("random103")
    game = Game(inst)
    ext = FeatureExtractor(game)
    buf = np.full(NUM_FEATURES, 99.0, dtype=np.float32)
    res = ext(game, out=buf)
    assert res is buf
    np.testing.assert_array_equal(buf, decision_features(game))


def test_tables_or_a_game_of_another_instance_are_refused():
    """An extractor took another instance's tables (features from the wrong rows) and
    another instance's games (its own rows, or numpy's ValueError) without a word."""
    a, b = conformance_instance("random103"), conformance_instance("random104")
    with pytest.raises(InstanceError, match="the tables are not"):
        FeatureExtractor(a, tables=Game(b).tables)
    for extractor, game in ((FeatureExtractor(a), Game(b)), (FeatureExtractor(b), Game(a))):
        with pytest.raises(InstanceError, match="a game of"):
            extractor(game)
    game = Game(a)
    np.testing.assert_array_equal(
        FeatureExtractor(a, tables=game.tables)(game), decision_features(game)
    )


def test_cache_per_tables():
    inst = conformance_instance("random104")
    g1, g2 = Game(inst), Game(inst)
    g3 = Game(inst, g1.tables)
    assert feature_extractor(g1) is feature_extractor(g3)
    assert feature_extractor(g1) is not feature_extractor(g2)
    key = id(g2.tables)
    assert key in _CACHE
    del g2
    gc.collect()
    assert key not in _CACHE


def test_a_subnormal_supply_reads_as_untouched_as_observe_reads_it():
    from tests.builders import I, X, build

    inst = build([X(100)], [I(writes=[0], supply=1e-310), I(reads=[0], supply=1e-310)])
    features = decision_features(Game(inst))
    assert features[IDX["supply_here"]] == 1.0  # nothing of it used up
