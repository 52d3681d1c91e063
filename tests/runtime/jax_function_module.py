"""A JAX function for the ``apply --jax`` tests (``tests.runtime.jax_function_module:mlp``)."""

from __future__ import annotations


def mlp(w1, w2, x):
    import jax.numpy as jnp

    return jnp.tanh(jnp.maximum(x @ w1, 0.0) @ w2)
