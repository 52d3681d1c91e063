"""A MuZero run's random streams (mallocgame.solvers.muzero.streams): every use and draw
of a seed its own stream, where seed lists would repeat one another."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mallocgame.solvers.muzero.streams import ACTOR, LEARNER, RESTARTS, SELFPLAY, stream


def _first(rng: np.random.Generator) -> int:
    return int(rng.integers(1 << 62))


def test_every_use_and_counter_is_a_stream_of_its_own() -> None:
    seed = 7
    draws = [
        (SELFPLAY, 0),
        (SELFPLAY, 1),
        (SELFPLAY, 0, 0),  # a shared agent's program 0 at move 0
        (RESTARTS,),
        (LEARNER, 0),
        (LEARNER, 1),
        (LEARNER, 2),
        (ACTOR, 0, 1234, 0),
    ]
    values = [_first(stream(seed, *draw)) for draw in draws]
    values.append(_first(np.random.default_rng(seed)))  # the network's initial draw
    assert len(set(values)) == len(values)
    assert _first(stream(seed, LEARNER, 3)) == _first(stream(seed, LEARNER, 3))  # reproducible
    assert _first(stream(seed + 1, LEARNER, 3)) != _first(stream(seed, LEARNER, 3))


def test_seed_lists_would_have_repeated_one_another() -> None:
    # what the streams replace: NumPy reads [s, 1, 0] as [s, 1], so the self-play draw at
    # move 0 was learner step 1's, the restarts' [s, 2] learner step 2's
    old = {
        "selfplay move 0": [7, 1, 0],
        "learner step 1": [7, 1],
        "restarts": [7, 2],
        "learner step 2": [7, 2],
    }
    firsts = {name: _first(np.random.default_rng(key)) for name, key in old.items()}
    assert firsts["selfplay move 0"] == firsts["learner step 1"]
    assert firsts["restarts"] == firsts["learner step 2"]
    pairs = itertools.combinations([(SELFPLAY, 0), (LEARNER, 1), (RESTARTS,), (LEARNER, 2)], 2)
    assert all(_first(stream(7, *a)) != _first(stream(7, *b)) for a, b in pairs)


def test_jax_keys_keep_every_bit_of_the_seed_and_the_old_keys_below_2_32() -> None:
    jax = pytest.importorskip("jax")
    from mallocgame.solvers.muzero.streams import jax_key

    keys = {s: np.asarray(jax_key(s)).tolist() for s in (0, 1, 2**32, 2**32 + 1, 2**63 - 1)}
    assert len({tuple(k) for k in keys.values()}) == len(keys)  # PRNGKey alone: 0 is 2**32
    for s in (0, 1, 2**31, 2**32 - 1):  # seeds below 2**32: the keys every run had
        assert np.asarray(jax_key(s)).tolist() == np.asarray(jax.random.PRNGKey(s)).tolist()
