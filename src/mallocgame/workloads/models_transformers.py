"""Transformer model programs: a mixed-precision (bf16) decoder training step, BERT
pre-training, an encoder-decoder NMT Transformer training step and a deep GPT-style
decoder training step (the suite's largest program: its layers are a Python loop,
so XLA sees every layer and nothing is rolled into a ``while``).

Registered in :mod:`mallocgame.workloads.models` (see there for the conventions).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from mallocgame.workloads import models_common as mc
from mallocgame.workloads.models_layers import (
    TokenTransformer,
    _causal,
    _embed_with_positions,
    _learned_positions,
)

__all__ = ["PROGRAMS", "GPT", "BERT", "EncoderDecoder"]

F32 = jnp.float32
BF16 = jnp.bfloat16


def accumulating_dot(
    lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **kwargs
):
    """``lax.dot_general`` accumulating in float32, its result cast back to ``lhs``'s dtype.

    What mixed-precision code on TPUs and GPUs asks for; it also keeps XLA's CPU backend
    from converting bfloat16 operands (weights included) to float32 copies before a dot.
    """
    out = jax.lax.dot_general(
        lhs, rhs, dimension_numbers, precision, preferred_element_type=F32, **kwargs
    )
    return out.astype(lhs.dtype)


def _einsum(spec: str, a: jax.Array, b: jax.Array, accumulate: bool) -> jax.Array:
    if not accumulate:
        return jnp.einsum(spec, a, b)
    return jnp.einsum(spec, a, b, preferred_element_type=F32).astype(a.dtype)


class _MultiHeadAttention(nn.Module):
    """Multi-head dot-product attention; ``kv`` for cross-attention, ``mask`` [b|1, 1, q, k].

    ``f32_accumulate``: every matmul accumulates in float32 (:func:`accumulating_dot`).
    """

    num_heads: int
    dtype: Any = F32
    use_bias: bool = True
    f32_accumulate: bool = False

    @nn.compact
    def __call__(
        self, x: jax.Array, kv: jax.Array | None = None, mask: jax.Array | None = None
    ) -> jax.Array:
        b, t, d = x.shape
        h = self.num_heads
        dot = accumulating_dot if self.f32_accumulate else None  # None: Dense's default
        dense = lambda n: nn.Dense(  # noqa: E731
            d, use_bias=self.use_bias, dtype=self.dtype, dot_general=dot, name=n
        )
        if kv is None:
            qkv = nn.Dense(
                3 * d, use_bias=self.use_bias, dtype=self.dtype, dot_general=dot, name="qkv"
            )(x)
            q, k, v = jnp.split(qkv.reshape(b, t, 3 * h, d // h), 3, axis=2)
        else:
            q = dense("query")(x).reshape(b, t, h, d // h)
            kv_out = nn.Dense(
                2 * d, use_bias=self.use_bias, dtype=self.dtype, dot_general=dot, name="kv"
            )(kv)
            k, v = jnp.split(kv_out, 2, axis=-1)
            k, v = (a.reshape(b, kv.shape[1], h, d // h) for a in (k, v))
        scores = (
            _einsum("bqhd,bkhd->bhqk", q, k, self.f32_accumulate).astype(F32) * (d // h) ** -0.5
        )
        if mask is not None:
            scores = jnp.where(mask, scores, -1e9)
        att = jax.nn.softmax(scores, axis=-1).astype(self.dtype)  # softmax in f32
        y = _einsum("bhqk,bkhd->bqhd", att, v, self.f32_accumulate).reshape(b, t, d)
        return dense("out")(y)


class _FeedForward(nn.Module):
    d_ff: int
    dtype: Any = F32
    use_bias: bool = True
    f32_accumulate: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        dot = accumulating_dot if self.f32_accumulate else None  # None: Dense's default
        y = nn.gelu(
            nn.Dense(self.d_ff, use_bias=self.use_bias, dtype=self.dtype, dot_general=dot)(x)
        )
        return nn.Dense(x.shape[-1], use_bias=self.use_bias, dtype=self.dtype, dot_general=dot)(y)


class _PreLNBlock(nn.Module):
    """Pre-LayerNorm block: self-attention, optional cross-attention, feed-forward."""

    num_heads: int
    d_ff: int
    cross: bool = False
    dtype: Any = F32
    use_bias: bool = True
    f32_accumulate: bool = False

    @nn.compact
    def __call__(
        self,
        x: jax.Array,
        mask: jax.Array | None,
        memory: jax.Array | None = None,
        memory_mask: jax.Array | None = None,
    ) -> jax.Array:
        ln = lambda: nn.LayerNorm(dtype=F32, use_bias=self.use_bias)  # noqa: E731
        attn = lambda n: _MultiHeadAttention(  # noqa: E731
            self.num_heads,
            self.dtype,
            self.use_bias,
            self.f32_accumulate,
            name=n,
        )
        x = x + attn("self_attn")(ln()(x).astype(self.dtype), mask=mask).astype(x.dtype)
        if self.cross:
            y = attn("cross_attn")(ln()(x).astype(self.dtype), kv=memory, mask=memory_mask)
            x = x + y.astype(x.dtype)
        y = _FeedForward(self.d_ff, self.dtype, self.use_bias, self.f32_accumulate)(
            ln()(x).astype(self.dtype)
        )
        return x + y.astype(x.dtype)


# Each layer is a nested jit (flax's lifted ``nn.jit``): the Python loop over layers
# traces the layer once instead of once per layer (lowering is several times
# faster); XLA inlines the calls, so the compiled program is the same unrolled one.
_JitPreLNBlock = nn.jit(_PreLNBlock)


class _PostLNLayer(nn.Module):
    """BERT's post-LayerNorm encoder layer."""

    num_heads: int
    d_ff: int

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
        x = nn.LayerNorm()(x + _MultiHeadAttention(self.num_heads, name="attn")(x, mask=mask))
        return nn.LayerNorm()(x + _FeedForward(self.d_ff, name="ffn")(x))


_JitPostLNLayer = nn.jit(_PostLNLayer)


class GPT(TokenTransformer):
    """GPT-style decoder-only LM: learned positions, pre-LN blocks, tied output embedding.

    ``dtype`` is the compute dtype (``bfloat16`` for mixed precision: parameters,
    LayerNorms, softmax and logits stay float32).
    """

    num_layers: int
    dtype: Any = F32
    use_bias: bool = True

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        embed, x = _embed_with_positions(self, tokens)
        mask = _causal(tokens.shape[1])
        for i in range(self.num_layers):
            block = _JitPreLNBlock(
                self.num_heads, self.d_ff, dtype=self.dtype, use_bias=self.use_bias, name=f"h{i}"
            )
            x = block(x, mask)
        return embed.attend(nn.LayerNorm(use_bias=self.use_bias)(x))


class BERT(TokenTransformer):
    """BERT encoder (post-LN) with masked-LM and next-sentence heads."""

    num_layers: int

    @nn.compact
    def __call__(self, tokens, segments, attention_mask, masked_positions):
        embed = nn.Embed(self.vocab, self.d_model, name="word")
        pos = _learned_positions(self, self.max_len, self.d_model)
        x = (
            embed(tokens)
            + nn.Embed(2, self.d_model, name="segment")(segments)
            + pos[: tokens.shape[1]]
        )
        x = nn.LayerNorm()(x)
        mask = attention_mask[:, None, None, :].astype(bool)
        for i in range(self.num_layers):
            x = _JitPostLNLayer(self.num_heads, self.d_ff, name=f"layer{i}")(x, mask)
        # masked LM head on the gathered masked positions, tied to the word embedding
        picked = jnp.take_along_axis(x, masked_positions[..., None], axis=1)
        y = nn.LayerNorm()(nn.gelu(nn.Dense(self.d_model, name="mlm_transform")(picked)))
        mlm = embed.attend(y) + self.param("mlm_bias", nn.initializers.zeros, (self.vocab,))
        pooled = jnp.tanh(nn.Dense(self.d_model, name="pooler")(x[:, 0]))
        return mlm, nn.Dense(2, name="nsp")(pooled)


class EncoderDecoder(TokenTransformer):
    """Encoder-decoder Transformer for translation (shared embedding, pre-LN, padding masks)."""

    enc_layers: int
    dec_layers: int
    pad: int = 0
    dtype: Any = F32  # compute dtype (bfloat16: mixed precision, as GPT's)
    f32_accumulate: bool = False  # matmuls accumulate in float32 (:func:`accumulating_dot`)

    @nn.compact
    def __call__(self, src: jax.Array, tgt_in: jax.Array) -> jax.Array:
        embed = nn.Embed(self.vocab, self.d_model)
        pos = _learned_positions(self, self.max_len, self.d_model)
        src_keep = (src != self.pad)[:, None, None, :]
        x = embed(src) * self.d_model**0.5 + pos[: src.shape[1]]
        for i in range(self.enc_layers):
            x = _JitPreLNBlock(
                self.num_heads,
                self.d_ff,
                dtype=self.dtype,
                f32_accumulate=self.f32_accumulate,
                name=f"enc{i}",
            )(x, src_keep)
        memory = nn.LayerNorm()(x)
        y = embed(tgt_in) * self.d_model**0.5 + pos[: tgt_in.shape[1]]
        causal = _causal(tgt_in.shape[1]) & (tgt_in != self.pad)[:, None, None, :]
        for i in range(self.dec_layers):
            y = _JitPreLNBlock(
                self.num_heads,
                self.d_ff,
                cross=True,
                dtype=self.dtype,
                f32_accumulate=self.f32_accumulate,
                name=f"dec{i}",
            )(y, causal, memory, src_keep)
        return embed.attend(nn.LayerNorm()(y))


# --------------------------------------------------------------------------- programs


def _transformer_train_bf16(concrete: bool) -> mc.Built:
    model = GPT(
        vocab=1024, d_model=256, num_heads=8, num_layers=19, d_ff=1024, max_len=64, dtype=BF16
    )
    return mc._next_token_train(
        model, optax.adamw(3e-4, weight_decay=0.01), 8, model.max_len, concrete
    )


def _gpt_train_deep(concrete: bool) -> mc.Built:
    model = GPT(
        vocab=512, d_model=128, num_heads=4, num_layers=42, d_ff=512, max_len=64, use_bias=False
    )
    schedule = optax.warmup_cosine_decay_schedule(0.0, 6e-4, 100, 10_000)
    tx = optax.chain(
        optax.clip_by_global_norm(1.0), optax.adamw(schedule, b2=0.95, weight_decay=0.1)
    )
    return mc._next_token_train(model, tx, 4, model.max_len, concrete)


def _bert_pretrain(
    model: BERT,
    batch: int,
    seq: int,
    decay_steps: int,
    concrete: bool,
    *,
    padded: bool = True,
    n_masked: int = 20,
) -> mc.Built:
    """A BERT pre-training step on ``batch`` sequences of ``seq`` tokens: masked-LM loss at ``n_masked``
    positions a sequence plus next-sentence loss, AdamW with a linear decay over ``decay_steps``.

    ``padded``: each sequence's attention mask keeps a random prefix of at least half of it
    (drawn even for abstract arguments) and the masked positions lie in the first half; else
    the mask is random zeros and ones and the masked positions lie anywhere.
    """
    rng = np.random.default_rng(mc.SEED)
    tokens = mc._ints(rng, (batch, seq), model.vocab, concrete)
    segments = mc._ints(rng, (batch, seq), 2, concrete)
    if padded:
        lengths = rng.integers(seq // 2, seq + 1, batch)
        prefix_mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
        attention_mask = (
            jax.device_put(prefix_mask)
            if concrete
            else jax.ShapeDtypeStruct((batch, seq), jnp.int32)
        )
        positions = mc._ints(rng, (batch, n_masked), seq // 2, concrete)
    else:
        attention_mask = mc._ints(rng, (batch, seq), 2, concrete)
        positions = mc._ints(rng, (batch, n_masked), seq, concrete)
    mlm_labels = mc._ints(rng, (batch, n_masked), model.vocab, concrete)
    nsp_labels = mc._ints(rng, (batch,), 2, concrete)

    def loss_fn(params, tokens, segments, attention_mask, positions, mlm_labels, nsp_labels):
        mlm, nsp = mc._forward(
            model, {"params": params}, tokens, segments, attention_mask, positions
        )
        return mc._xent(mlm, mlm_labels) + mc._xent(nsp, nsp_labels)

    tx = optax.adamw(optax.linear_schedule(1e-4, 0.0, decay_steps), weight_decay=0.01)
    examples = tuple(
        jax.ShapeDtypeStruct((1, *a.shape[1:]), a.dtype)
        for a in (tokens, segments, attention_mask, positions)
    )
    batch_args = (tokens, segments, attention_mask, positions, mlm_labels, nsp_labels)
    return mc._training_program(model, tx, loss_fn, examples, batch_args, concrete, rng)


def _bert_train(concrete: bool) -> mc.Built:
    model = BERT(vocab=2048, d_model=128, num_heads=4, num_layers=6, d_ff=512, max_len=128)
    return _bert_pretrain(model, 8, 128, 10_000, concrete)


def _translation_train(model: EncoderDecoder, batch: int, seq: int, concrete: bool) -> mc.Built:
    """A translation training step on ``batch`` pairs of ``seq`` source and ``seq`` target tokens.

    Label-smoothed (0.1) cross-entropy in float32 over the non-padding targets, Adam with
    the inverse-square-root schedule of Vaswani et al. (4000 warmup steps).
    """
    rng = np.random.default_rng(mc.SEED)
    src = mc._ints(rng, (batch, seq), model.vocab, concrete)
    tgt = mc._ints(rng, (batch, seq + 1), model.vocab, concrete)

    def loss_fn(params, src, tgt):
        logits = mc._forward(model, {"params": params}, src, tgt[:, :-1]).astype(F32)
        targets = optax.smooth_labels(jax.nn.one_hot(tgt[:, 1:], model.vocab), 0.1)
        weights = (tgt[:, 1:] != model.pad).astype(F32)
        losses = optax.softmax_cross_entropy(logits, targets)
        return jnp.sum(losses * weights) / jnp.maximum(jnp.sum(weights), 1.0)

    def rsqrt_schedule(step: jax.Array) -> jax.Array:
        step = jnp.maximum(step.astype(F32), 1.0)
        return model.d_model**-0.5 * jnp.minimum(step**-0.5, step * 4000.0**-1.5)

    tx = optax.adam(rsqrt_schedule, b1=0.9, b2=0.98, eps=1e-9)
    examples = (
        jax.ShapeDtypeStruct((1, seq), jnp.int32),
        jax.ShapeDtypeStruct((1, seq), jnp.int32),
    )
    return mc._training_program(model, tx, loss_fn, examples, (src, tgt), concrete, rng)


def _transformer_nmt_train(concrete: bool) -> mc.Built:
    model = EncoderDecoder(
        vocab=1024, d_model=128, num_heads=4, d_ff=512, max_len=64, enc_layers=9, dec_layers=8
    )
    return _translation_train(model, 8, 48, concrete)


PROGRAMS = [
    mc.ModelProgram(
        "bert_train",
        "BERT pre-training step (6 post-LN encoder layers, d 128, 4 heads, d_ff "
        "512, vocab 2048; token + segment + position embeddings, padding mask) at "
        "batch 8, sequence 128: masked-LM loss on 20 gathered positions (tied "
        "decoder) + next-sentence loss, AdamW with a linear decay schedule",
        _bert_train,
        training=True,
    ),
    mc.ModelProgram(
        "transformer_train_bf16",
        "decoder-only Transformer LM in mixed precision (bfloat16 matmuls and "
        "activations; float32 parameters, LayerNorm, softmax, logits; 19 pre-LN "
        "layers, d_model 256, 8 heads, d_ff 1024, vocab 1024) training step at "
        "batch 8, sequence 64: cross-entropy, grad, AdamW",
        _transformer_train_bf16,
        training=True,
    ),
    mc.ModelProgram(
        "transformer_nmt_train",
        "encoder-decoder Transformer for translation (9 encoder + 8 decoder "
        "pre-LN layers with cross-attention, d 128, 4 heads, d_ff 512, shared "
        "vocab 1024, padding and causal masks) training step at batch 8, source "
        "and target length 48: label-smoothed cross-entropy, Adam with the "
        "inverse-square-root warmup schedule",
        _transformer_nmt_train,
        training=True,
    ),
    mc.ModelProgram(
        "gpt_train_deep",
        "GPT-style decoder-only LM, deep and narrow (42 bias-free pre-LN layers "
        "unrolled, d_model 128, 4 heads, d_ff 512, vocab 512, learned positions, "
        "tied embeddings) training step at batch 4, sequence 64: cross-entropy, "
        "global-norm clipping, AdamW with warmup-cosine schedule; the largest "
        "program of the suite",
        _gpt_train_deep,
        training=True,
    ),
]
