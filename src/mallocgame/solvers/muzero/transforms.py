"""MuZero's value transform and the categorical (two-hot) encoding of scalars.

Values and rewards are predicted as categorical distributions over ``support_size``
atoms evenly spaced in the transformed space ``h(x) = sign(x)(sqrt(|x|+1) - 1) + eps x``
(Pohlen et al. 2018, as in MuZero appendix F), covering ``[-h(m), h(m)]`` for
``m = support_max``. A scalar is encoded as the two-hot distribution on the atoms
either side of ``h(x)`` (clipped to the range); decoding takes the expectation over the
atoms and inverts ``h``. All functions work on JAX or numpy arrays of any shape
``[...]`` and add or remove a trailing atom axis.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

__all__ = ["EPS", "h", "h_inverse", "atoms", "scalar_to_two_hot", "logits_to_scalar"]

EPS = 1e-3


def h(x: jnp.ndarray) -> jnp.ndarray:
    """MuZero's value transform, elementwise."""
    return jnp.sign(x) * (jnp.sqrt(jnp.abs(x) + 1.0) - 1.0) + EPS * x


def h_inverse(y: jnp.ndarray) -> jnp.ndarray:
    """The exact inverse of :func:`h`, elementwise."""
    root = (jnp.sqrt(1.0 + 4.0 * EPS * (jnp.abs(y) + 1.0 + EPS)) - 1.0) / (2.0 * EPS)
    return jnp.sign(y) * (root**2 - 1.0)


def atoms(support_size: int, support_max: float) -> jnp.ndarray:
    """The atoms in transformed space: float32 ``[support_size]``."""
    top = math.sqrt(support_max + 1.0) - 1.0 + EPS * support_max  # h(support_max), a constant
    return jnp.linspace(-top, top, support_size, dtype=jnp.float32)


def scalar_to_two_hot(x: jnp.ndarray, support_size: int, support_max: float) -> jnp.ndarray:
    """``[...]`` scalars → ``[..., support_size]`` two-hot distributions over the atoms."""
    a = atoms(support_size, support_max)
    y = jnp.clip(h(x), a[0], a[-1])
    step = a[1] - a[0]
    pos = (y - a[0]) / step
    low = jnp.clip(jnp.floor(pos), 0, support_size - 2)
    frac = pos - low
    low_i = low.astype(jnp.int32)
    idx = jnp.arange(support_size)
    return (
        (idx == low_i[..., None]) * (1.0 - frac)[..., None]
        + (idx == low_i[..., None] + 1) * frac[..., None]
    ).astype(jnp.float32)


def logits_to_scalar(logits: jnp.ndarray, support_max: float) -> jnp.ndarray:
    """``[..., support_size]`` logits → ``[...]`` scalars (expectation, then ``h``⁻¹)."""
    a = atoms(logits.shape[-1], support_max)
    probs = jax.nn.softmax(logits, axis=-1)
    return h_inverse(jnp.sum(probs * a, axis=-1))
