"""Batched MCTS with the learned model: mctx's Gumbel MuZero (default) or MuZero policy.

:func:`make_search` returns one jitted function that runs a whole search for a batch
of ``N`` games: the representation network at the root, the dynamics below it, legal
actions masked at the root only (mctx's ``invalid_actions``: 1 = not allowed).

Scalars inside the search (rewards, values) are in the scaled units of the targets
(see :mod:`~mallocgame.solvers.muzero.config`, ``value_scale``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import mctx
import numpy as np

from mallocgame.solvers.muzero.config import MuZeroConfig
from mallocgame.solvers.muzero.networks import MuZeroNet, initial_inference, recurrent_inference
from mallocgame.solvers.muzero.transforms import logits_to_scalar

__all__ = ["SearchResult", "make_search", "make_policy", "fold_key"]


_fold_in = jax.jit(jax.random.fold_in)


def fold_key(key: jax.Array, n: int) -> jax.Array:
    """``jax.random.fold_in(key, n)`` (the same key), compiled once: eager ``fold_in``
    dispatches several primitives, about 1 ms a call on CPU, once per searched batch."""
    return _fold_in(key, np.uint32(n))


class SearchResult(NamedTuple):
    """What one batched search returns (all with leading axis ``N``)."""

    action: jnp.ndarray  # [N] int32, the action to play
    policy: jnp.ndarray  # [N, 3] float32, the improved policy (the training target)
    root_value: jnp.ndarray  # [N] float32, the search's value of the root (scaled units)


SearchFn = Callable[
    [dict, jax.Array, Mapping[str, jnp.ndarray], jnp.ndarray, jnp.ndarray, jnp.ndarray],
    SearchResult,
]


def make_search(net: MuZeroNet, config: MuZeroConfig) -> SearchFn:
    """``search(params, key, obs, allowed [N, 3] bool, temperature, q_scale) -> SearchResult``, jitted.

    ``temperature`` (``muzero_policy``) and ``q_scale`` (``gumbel_muzero_policy``'s
    ``c_scale``, see :meth:`MuZeroConfig.search_q_scale`) are scalars passed at run
    time, so programs of different sizes share one compiled search.
    """
    vmax = config.support_max

    def recurrent_fn(params, _key, action, embedding):
        latent, reward, policy, value = recurrent_inference(net, params, embedding, action)
        out = mctx.RecurrentFnOutput(
            reward=logits_to_scalar(reward, vmax),
            discount=jnp.full(action.shape, config.discount, jnp.float32),
            prior_logits=policy,
            value=logits_to_scalar(value, vmax),
        )
        return out, latent

    def search(params, key, obs, allowed, temperature, q_scale):
        latent, policy, value = initial_inference(net, params, obs)
        root = mctx.RootFnOutput(
            prior_logits=policy, value=logits_to_scalar(value, vmax), embedding=latent
        )
        common = {
            "params": params,
            "rng_key": key,
            "root": root,
            "recurrent_fn": recurrent_fn,
            "num_simulations": config.num_simulations,
            "invalid_actions": jnp.logical_not(allowed),
        }
        if config.search == "gumbel":
            qtransform = functools.partial(
                mctx.qtransform_completed_by_mix_value,
                value_scale=q_scale,
                rescale_values=config.rescale_q,
            )
            out = mctx.gumbel_muzero_policy(
                **common,
                max_num_considered_actions=3,
                gumbel_scale=config.gumbel_scale,
                qtransform=qtransform,
            )
        else:
            out = mctx.muzero_policy(
                **common,
                dirichlet_fraction=config.noise_fraction,
                dirichlet_alpha=config.noise_alpha,
                temperature=temperature,
            )
        root_value = out.search_tree.summary().value
        return SearchResult(out.action.astype(jnp.int32), out.action_weights, root_value)

    return jax.jit(search)


def make_policy(
    net: MuZeroNet,
) -> Callable[[dict, Mapping[str, jnp.ndarray], jnp.ndarray], jnp.ndarray]:
    """``policy(params, obs, allowed [N, 3]) -> [N]`` the prior's best allowed action, jitted
    (the "learning only" ablation plays this, without search)."""

    def act(params, obs, allowed):
        _, logits, _ = initial_inference(net, params, obs)
        return jnp.argmax(jnp.where(allowed, logits, -jnp.inf), axis=-1).astype(jnp.int32)

    return jax.jit(act)
