"""Flax building blocks that several model files (``models*.py``) share.

:class:`TokenTransformer` declares the widths of the Transformers over a token vocabulary. The
helpers are for a module's compact ``__call__``: the submodules and parameters they create
belong to that module and are auto-named there (``Dense_0``, ``LayerNorm_1``, ...) in the order
they are created, exactly as if their lines were written in the module itself.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

__all__ = ["TokenTransformer"]


class TokenTransformer(nn.Module):
    """The widths of a Transformer over a token vocabulary, for its subclasses to build on.

    ``vocab`` tokens; width ``d_model``; ``num_heads`` attention heads; feed-forward width
    ``d_ff``; sequences of at most ``max_len`` tokens. Each subclass declares its own depth
    (``num_layers``, or ``enc_layers`` and ``dec_layers``).
    """

    vocab: int
    d_model: int
    num_heads: int
    d_ff: int
    max_len: int


def _causal(t: int) -> jax.Array:
    """The causal attention mask of ``t`` positions: bool ``[1, 1, t, t]``, true where the key
    position is at most the query position."""
    return jnp.tril(jnp.ones((t, t), bool))[None, None]


def _learned_positions(module: nn.Module, max_len: int, features: int) -> jax.Array:
    """``module``'s learned position embeddings: its parameter ``"pos"`` ``[max_len, features]``
    (normal, stddev 0.02)."""
    return module.param("pos", nn.initializers.normal(0.02), (max_len, features))


def _embed_with_positions(model: TokenTransformer, tokens: jax.Array) -> tuple[nn.Embed, jax.Array]:
    """``model``'s token embeddings plus learned positions: tokens ``[batch, seq]`` (int32,
    ``seq <= model.max_len``) -> ``(embed, x)``.

    ``embed`` is the token embedding ``nn.Embed(model.vocab, model.d_model)`` (e.g. for a tied
    output projection, ``embed.attend``); ``x`` ``[batch, seq, d_model]`` is each token's
    embedding plus its position's (:func:`_learned_positions`).
    """
    embed = nn.Embed(model.vocab, model.d_model)
    pos = _learned_positions(model, model.max_len, model.d_model)
    return embed, embed(tokens) + pos[: tokens.shape[1]]


def _residual_mlp(x: jax.Array, hidden: int) -> jax.Array:
    """A pre-LayerNorm GELU MLP of width ``hidden`` with its residual: ``x`` ``[..., d]`` ->
    ``x + Dense(d)(gelu(Dense(hidden)(LayerNorm(x))))``, same shape."""
    y = nn.Dense(hidden)(nn.LayerNorm()(x))
    return x + nn.Dense(x.shape[-1])(nn.gelu(y))
