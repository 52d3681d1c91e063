"""MuZero's value transform and the two-hot encoding."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from mallocgame.solvers.muzero.transforms import (
    atoms,
    h,
    h_inverse,
    logits_to_scalar,
    scalar_to_two_hot,
)


def test_transform_inverts_exactly() -> None:
    x = jnp.asarray(np.linspace(-50.0, 50.0, 201), jnp.float32)
    np.testing.assert_allclose(h_inverse(h(x)), x, rtol=1e-4, atol=1e-4)
    assert float(h(jnp.asarray(0.0))) == 0.0


@pytest.mark.parametrize("x", [0.0, 0.013, -0.4, 1.0, 7.5, 19.9])
def test_two_hot_round_trip(x: float) -> None:
    dist = scalar_to_two_hot(jnp.asarray([x]), 41, 20.0)
    assert dist.shape == (1, 41)
    assert float(dist.sum()) == pytest.approx(1.0) and int((dist > 0).sum()) <= 2
    logits = jnp.log(jnp.maximum(dist, 1e-30))
    assert float(logits_to_scalar(logits, 20.0)[0]) == pytest.approx(x, abs=1e-3)


def test_two_hot_clips_to_the_support() -> None:
    dist = scalar_to_two_hot(jnp.asarray([1e6, -1e6]), 21, 5.0)
    assert float(dist[0, -1]) == pytest.approx(1.0, abs=1e-4) and float(
        dist[1, 0]
    ) == pytest.approx(1.0, abs=1e-4)
    a = atoms(21, 5.0)
    assert float(a[-1]) == pytest.approx(float(h(jnp.asarray(5.0))))
