"""Sequence model programs: recurrent networks whose time loops stay XLA ``while``
loops (GRU, stacked vanilla RNN, bidirectional GRU, an LSTM language-model training
step, a seq2seq NMT model with attention and greedy decoding) and WaveNet.

Registered in :mod:`mallocgame.workloads.models` (see there for the conventions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from mallocgame.workloads import models_common as mc

__all__ = [
    "PROGRAMS",
    "GRUClassifier",
    "StackedRNN",
    "BiGRUTagger",
    "LSTMLanguageModel",
    "Seq2SeqNMT",
    "WaveNet",
]


# --------------------------------------------------------------------------- RNNs


class GRUClassifier(nn.Module):
    """One GRU layer over time (``nn.RNN``: a ``lax.scan``), dense head on the last state."""

    hidden: int = 256
    num_classes: int = 10

    @nn.compact
    def __call__(self, xs: jax.Array) -> jax.Array:  # [batch, time, features]
        # flax annotates an RNN's result as outputs | (carry, outputs), whatever return_carry is
        h: jax.Array = nn.RNN(nn.GRUCell(self.hidden), name="gru")(xs)  # type: ignore[assignment]
        return nn.Dense(self.num_classes)(h[:, -1])


class StackedRNN(nn.Module):
    """Vanilla (Elman, tanh) RNN layers, each its own scan, residual between layers."""

    hidden: int = 128
    num_layers: int = 4
    num_classes: int = 10

    @nn.compact
    def __call__(self, xs: jax.Array) -> jax.Array:
        x = nn.Dense(self.hidden)(xs)
        for i in range(self.num_layers):
            rnn = nn.RNN(nn.SimpleCell(self.hidden), name=f"rnn{i}")
            # flax annotates the result as outputs | (carry, outputs), whatever return_carry is
            x = x + rnn(nn.LayerNorm()(x))  # type: ignore[operator]
        return nn.Dense(self.num_classes)(jnp.mean(x, axis=1))


class BiGRUTagger(nn.Module):
    """Sequence tagger: embedding, 2 bidirectional GRU layers, per-token tag logits."""

    vocab: int = 1000
    embed: int = 64
    hidden: int = 96
    num_layers: int = 2
    num_tags: int = 17

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = nn.Embed(self.vocab, self.embed)(tokens)
        for i in range(self.num_layers):
            x = nn.Bidirectional(
                nn.RNN(nn.GRUCell(self.hidden)), nn.RNN(nn.GRUCell(self.hidden)), name=f"bigru{i}"
            )(x)
        return nn.Dense(self.num_tags)(x)


class LSTMLanguageModel(nn.Module):
    """Character-level LSTM language model (embedding, 2 LSTM layers, softmax over the vocab)."""

    vocab: int = 128
    embed: int = 64
    hidden: int = 256
    num_layers: int = 2

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = nn.Embed(self.vocab, self.embed)(tokens)
        for i in range(self.num_layers):
            x = nn.RNN(nn.OptimizedLSTMCell(self.hidden), name=f"lstm{i}")(x)
        return nn.Dense(self.vocab)(x)


# --------------------------------------------------------------------------- seq2seq NMT


class _AttentionDecoderStep(nn.Module):
    """One greedy decoding step: GRU cell fed the previous token and attention context.

    Additive (Bahdanau) attention over the encoder states; the argmax token is fed
    back through the carry.
    """

    vocab: int
    embed: int
    hidden: int

    @nn.compact
    def __call__(
        self, carry: tuple[jax.Array, jax.Array, jax.Array], enc: jax.Array, keys: jax.Array
    ) -> tuple[tuple[jax.Array, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]:
        h, tok, context = carry
        x = jnp.concatenate([nn.Embed(self.vocab, self.embed, name="embed")(tok), context], axis=-1)
        h, _ = nn.GRUCell(self.hidden, name="cell")(h, x)
        q = nn.Dense(self.hidden, use_bias=False, name="query")(h)
        energy = nn.Dense(1, use_bias=False, name="energy")(jnp.tanh(keys + q[:, None]))[..., 0]
        att = jax.nn.softmax(energy, axis=-1)  # [batch, source]
        context = jnp.einsum("bs,bsd->bd", att, enc)
        logits = nn.Dense(self.vocab, name="out")(jnp.concatenate([h, context], axis=-1))
        tok = jnp.argmax(logits, axis=-1).astype(jnp.int32)
        return (h, tok, context), (tok, att)


class Seq2SeqNMT(nn.Module):
    """Encoder-decoder NMT: bidirectional GRU encoder, attention GRU decoder, greedy search."""

    src_vocab: int = 2000
    tgt_vocab: int = 2000
    embed: int = 128
    hidden: int = 256
    max_out: int = 24
    bos: int = 1

    @nn.compact
    def __call__(self, src: jax.Array) -> tuple[jax.Array, jax.Array]:
        x = nn.Embed(self.src_vocab, self.embed)(src)
        half = self.hidden // 2
        # flax annotates the result as outputs | (carry, outputs), whatever return_carry is
        enc: jax.Array = nn.Bidirectional(  # type: ignore[assignment]
            nn.RNN(nn.GRUCell(half)), nn.RNN(nn.GRUCell(half)), name="encoder"
        )(x)
        keys = nn.Dense(self.hidden, use_bias=False, name="keys")(enc)
        h = jnp.tanh(nn.Dense(self.hidden, name="bridge")(jnp.mean(enc, axis=1)))
        tok = jnp.full((src.shape[0],), self.bos, jnp.int32)
        context = jnp.zeros((src.shape[0], self.hidden), enc.dtype)
        decode = nn.scan(
            _AttentionDecoderStep,
            variable_broadcast="params",
            split_rngs={"params": False},
            in_axes=(nn.broadcast, nn.broadcast),
            out_axes=1,
            length=self.max_out,
        )
        _, (tokens, attention) = decode(self.tgt_vocab, self.embed, self.hidden, name="decoder")(
            (h, tok, context), enc, keys
        )
        return tokens, attention


# --------------------------------------------------------------------------- WaveNet


class _WaveNetLayer(nn.Module):
    """Gated dilated causal conv (tanh x sigmoid), 1x1 residual and skip convs."""

    residual: int
    skip: int
    dilation: int

    @nn.compact
    def __call__(self, x: jax.Array, cond: jax.Array) -> tuple[jax.Array, jax.Array]:
        y = nn.Conv(2 * self.residual, (2,), kernel_dilation=(self.dilation,), padding="CAUSAL")(x)
        y = y + nn.Dense(2 * self.residual, use_bias=False)(cond)[:, None]  # global conditioning
        filt, gate = jnp.split(y, 2, axis=-1)
        z = jnp.tanh(filt) * jax.nn.sigmoid(gate)
        return x + nn.Conv(self.residual, (1,))(z), nn.Conv(self.skip, (1,))(z)


class WaveNet(nn.Module):
    """WaveNet: mu-law one-hot input, stacks of dilations 1..2^(n-1), skip sum, 1x1 head."""

    stacks: int = 2
    layers_per_stack: int = 8
    residual: int = 32
    skip: int = 64
    classes: int = 256

    @nn.compact
    def __call__(self, samples: jax.Array, cond: jax.Array) -> jax.Array:
        x = nn.Conv(self.residual, (2,), padding="CAUSAL")(jax.nn.one_hot(samples, self.classes))
        skips: float | jax.Array = 0.0  # the sum of the layers' skip outputs
        for _ in range(self.stacks):
            for i in range(self.layers_per_stack):
                x, s = _WaveNetLayer(self.residual, self.skip, 2**i)(x, cond)
                skips = skips + s
        y = nn.Conv(self.skip, (1,))(nn.relu(skips))
        return nn.Conv(self.classes, (1,))(nn.relu(y))


# --------------------------------------------------------------------------- programs


def _sequence_infer(
    model: nn.Module,
    xs_shape: tuple[int, ...],
    concrete: bool,
    *,
    normalize: Callable[..., jax.Array] = jax.nn.log_softmax,
    batch_axis: int = 0,
) -> mc.Built:
    """Inference over float32 sequences ``xs`` of ``xs_shape``.

    The program: ``(params, xs) -> normalize(logits, axis=-1)``.

    ``batch_axis``: the axis of ``xs_shape`` that is the batch (``model.init`` sees one sequence).
    """
    rng = np.random.default_rng(mc.SEED)
    xs0 = jax.ShapeDtypeStruct(
        (*xs_shape[:batch_axis], 1, *xs_shape[batch_axis + 1 :]), jnp.float32
    )
    params = mc._model_params(model, (xs0,), concrete, rng)
    xs = mc._floats(rng, xs_shape, concrete)

    def infer(params, xs):
        return normalize(mc._forward(model, {"params": params}, xs), axis=-1)

    return infer, (params, xs), {}


def _params_and_tokens(
    model: nn.Module, batch: int, length: int, vocab: int, concrete: bool
) -> tuple[Any, Any]:
    """The parameters of ``model`` over int32 tokens ``[batch, length]``, and such tokens (ids
    below ``vocab``): abstract, or real and drawn in that order from ``default_rng(SEED)``."""
    rng = np.random.default_rng(mc.SEED)
    t0 = jax.ShapeDtypeStruct((1, length), jnp.int32)
    params = mc._model_params(model, (t0,), concrete, rng)
    return params, mc._ints(rng, (batch, length), vocab, concrete)


def _tagger_infer(model: BiGRUTagger, batch: int, length: int, concrete: bool) -> mc.Built:
    """Tagging ``batch`` sentences of ``length`` tokens: ``(params, tokens) -> (tags, log-probabilities)``."""
    params, tokens = _params_and_tokens(model, batch, length, model.vocab, concrete)

    def infer(params, tokens):
        logits = mc._forward(model, {"params": params}, tokens)
        return jnp.argmax(logits, axis=-1), jax.nn.log_softmax(logits, axis=-1)

    return infer, (params, tokens), {}


def _translate(model: Seq2SeqNMT, batch: int, length: int, concrete: bool) -> mc.Built:
    """Greedy translation of ``batch`` sentences of ``length`` tokens: ``(params, src) -> (tokens, attention)``."""  # noqa: E501
    params, src = _params_and_tokens(model, batch, length, model.src_vocab, concrete)

    def translate(params, src):
        return mc._forward(model, {"params": params}, src)

    return translate, (params, src), {}


def _wavenet_program(model: WaveNet, batch: int, length: int, concrete: bool) -> mc.Built:
    """WaveNet over ``batch`` clips of ``length`` mu-law samples, each with a 16-dimensional
    conditioning vector: ``(params, samples, cond) -> log-probabilities`` per sample."""
    rng = np.random.default_rng(mc.SEED)
    s0 = jax.ShapeDtypeStruct((1, length), jnp.int32)
    c0 = jax.ShapeDtypeStruct((1, 16), jnp.float32)
    params = mc._model_params(model, (s0, c0), concrete, rng)
    samples = mc._ints(rng, (batch, length), model.classes, concrete)
    cond = mc._floats(rng, (batch, 16), concrete)

    def infer(params, samples, cond):
        return jax.nn.log_softmax(mc._forward(model, {"params": params}, samples, cond), axis=-1)

    return infer, (params, samples, cond), {}


def _gru_infer(concrete: bool) -> mc.Built:
    return _sequence_infer(GRUClassifier(), (16, 32, 64), concrete, normalize=jax.nn.softmax)


def _stacked_rnn_infer(concrete: bool) -> mc.Built:
    return _sequence_infer(StackedRNN(), (8, 48, 40), concrete)


def _bigru_tagger_infer(concrete: bool) -> mc.Built:
    return _tagger_infer(BiGRUTagger(), 16, 40, concrete)


def _lstm_lm_train(concrete: bool) -> mc.Built:
    tx = optax.chain(optax.clip_by_global_norm(5.0), optax.rmsprop(1e-3))
    return mc._next_token_train(LSTMLanguageModel(), tx, 16, 32, concrete)


def _nmt_seq2seq_infer(concrete: bool) -> mc.Built:
    return _translate(Seq2SeqNMT(), 8, 20, concrete)


def _wavenet_infer(concrete: bool) -> mc.Built:
    return _wavenet_program(WaveNet(), 2, 1024, concrete)


PROGRAMS = [
    mc.ModelProgram(
        "gru_infer",
        "GRU (hidden 256, input 64) inference over 32 time steps at batch 16 "
        "(flax nn.RNN: a while loop of trip count 32), dense head on the last "
        "state, softmax over 10 classes",
        _gru_infer,
        loops=True,
    ),
    mc.ModelProgram(
        "stacked_rnn_infer",
        "4 stacked vanilla tanh RNN layers (hidden 128, input 40 projected), each "
        "its own scan over 48 time steps (4 while loops in sequence), LayerNorm "
        "and residual between layers, mean-pooled dense head; batch 8",
        _stacked_rnn_infer,
        loops=True,
    ),
    mc.ModelProgram(
        "bigru_tagger_infer",
        "sequence tagger: embedding (vocab 1000, 64) then 2 bidirectional GRU "
        "layers (hidden 96 each way: a forward and a reversed scan per layer, 40 "
        "steps), per-token logits over 17 tags; argmax and log-softmax at batch 16",
        _bigru_tagger_infer,
        loops=True,
    ),
    mc.ModelProgram(
        "lstm_lm_train",
        "character LSTM language model (vocab 128, embedding 64, 2 LSTM layers of "
        "hidden 256) training step at batch 16 over 32 steps: forward scans, "
        "backward scans (backprop through time), global-norm clipping, RMSProp",
        _lstm_lm_train,
        training=True,
        loops=True,
    ),
    mc.ModelProgram(
        "nmt_seq2seq_infer",
        "seq2seq NMT (vocab 2000 both sides, embedding 128): bidirectional GRU "
        "encoder (hidden 2x128) over 20 source tokens, then greedy decoding for 24 "
        "steps (a scan) with a GRU decoder, additive attention over the encoder "
        "states and argmax feedback; batch 8; returns tokens and attention weights",
        _nmt_seq2seq_infer,
        loops=True,
    ),
    mc.ModelProgram(
        "wavenet_infer",
        "WaveNet (mu-law one-hot input, 2 stacks of 8 dilated causal convs with "
        "dilations 1..128, gated tanh x sigmoid units with global conditioning, "
        "32 residual / 64 skip channels, 1x1 output convs to 256 classes) "
        "inference on 2 x 1024 samples, log-softmax output",
        _wavenet_infer,
    ),
]
