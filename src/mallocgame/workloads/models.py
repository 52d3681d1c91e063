"""Real ML programs to compile with XLA (through JAX) and turn into game instances.

The registry :data:`MODEL_PROGRAMS`: 28 fixed, deterministic programs modelled on
the XLA workloads of the paper (section 5.1, appendix B; 169 to 16,490 buffers),
from about 70 to about 17,000 game buffers once compiled by XLA for the CPU.

- Six base programs, defined here: AlexNet training at batch 32, ResNet-20
  inference, a small Transformer training step, LSTM inference, plus two that
  exercise XLA features the game must model: a loop that updates a buffer in
  place, and a step whose arguments are donated (aliased to its outputs).
- :mod:`~mallocgame.workloads.models_vision`: ResNet-50 (bottleneck) inference and
  training, MnasNet, MLP-Mixer, U-Net, ViT, a batchnorm CNN and a VAE.
- :mod:`~mallocgame.workloads.models_sequence`: GRU, stacked vanilla RNN,
  bidirectional GRU, an LSTM language-model training step, seq2seq NMT with
  attention and greedy decoding, WaveNet.
- :mod:`~mallocgame.workloads.models_transformers`: BERT pre-training, a bf16
  mixed-precision decoder, an encoder-decoder NMT Transformer and the deep GPT-style
  decoder training step (the largest program, over 16,000 buffers).
- :mod:`~mallocgame.workloads.models_misc`: an AlphaTensor-style factorised matmul
  chain, a message-passing graph network, a DLRM training step, a DDIM sampler.

Each is a :class:`ModelProgram` (flagged ``training`` for a full training step:
loss, gradients, optimizer update; ``loops`` for XLA ``while`` loops of known trip
count); :meth:`ModelProgram.build` returns ``(fn, example_args, jit_kwargs)`` so
that::

    fn, args, kw = MODEL_PROGRAMS["alexnet_train_b32"].build()
    compiled = jax.jit(fn, **kw).lower(*args).compile()

By default the example arguments are :class:`jax.ShapeDtypeStruct` (nothing is
computed; parameter shapes come from ``jax.eval_shape`` of the model's init);
``build(concrete=True)`` gives real arrays of the same shapes instead, drawn from
``numpy.random.default_rng(0)`` (fan-in scaled normal weights, zero biases, unit
scales and variances; optimizer state from the optimizer's own init). Both lower
to the same HLO. Values are float32 (labels, token ids and indices int32; a PRNG
key uint32; one program computes in bfloat16); sizes are fixed so each program
compiles on a 2-core CPU in under a minute (most in a few seconds).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from mallocgame.workloads import models_misc, models_sequence, models_transformers, models_vision
from mallocgame.workloads.models_common import (  # noqa: F401  (re-exported helpers)
    _KEY,
    SEED,
    Built,
    ModelProgram,
    _abstract,
    _fill,
    _floats,
    _forward,
    _gradient_step,
    _ints,
    _opt_state,
    _params,
    _xent,
)
from mallocgame.workloads.models_layers import (
    TokenTransformer,
    _embed_with_positions,
    _residual_mlp,
)
from mallocgame.workloads.models_sequence import _sequence_infer

__all__ = [
    "ModelProgram",
    "MODEL_PROGRAMS",
    "model_program_names",
    "AlexNet",
    "ResNet",
    "Transformer",
    "LSTMClassifier",
]


# --------------------------------------------------------------------------- models


class AlexNet(nn.Module):
    """AlexNet's shape at small scale: 5 convolutions (3 max-pools), 3 dense layers."""

    num_classes: int = 10

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        pool = lambda y: nn.max_pool(y, (3, 3), strides=(2, 2), padding="SAME")  # noqa: E731
        x = nn.relu(nn.Conv(32, (5, 5), strides=(1, 1), padding="SAME")(x))
        x = pool(x)  # 16x16
        x = nn.relu(nn.Conv(64, (5, 5), padding="SAME")(x))
        x = pool(x)  # 8x8
        x = nn.relu(nn.Conv(96, (3, 3), padding="SAME")(x))
        x = nn.relu(nn.Conv(96, (3, 3), padding="SAME")(x))
        x = nn.relu(nn.Conv(64, (3, 3), padding="SAME")(x))
        x = pool(x)  # 4x4
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(256)(x))
        x = nn.relu(nn.Dense(256)(x))
        return nn.Dense(self.num_classes)(x)


class _ResBlock(nn.Module):
    features: int
    strides: int = 1

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        bn = lambda: nn.BatchNorm(use_running_average=True)  # noqa: E731
        s = (self.strides, self.strides)
        y = nn.Conv(self.features, (3, 3), strides=s, padding="SAME", use_bias=False)(x)
        y = nn.relu(bn()(y))
        y = nn.Conv(self.features, (3, 3), padding="SAME", use_bias=False)(y)
        y = bn()(y)
        if x.shape != y.shape:  # projection shortcut
            x = nn.Conv(self.features, (1, 1), strides=s, use_bias=False)(x)
            x = bn()(x)
        return nn.relu(x + y)


class ResNet(nn.Module):
    """ResNet-20 (CIFAR style: stem + 3 stages of 3 basic blocks), inference batchnorm."""

    stage_features: tuple[int, ...] = (16, 32, 64)
    blocks_per_stage: int = 3
    num_classes: int = 10

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.Conv(self.stage_features[0], (3, 3), padding="SAME", use_bias=False)(x)
        x = nn.relu(nn.BatchNorm(use_running_average=True)(x))
        for i, f in enumerate(self.stage_features):
            for j in range(self.blocks_per_stage):
                x = _ResBlock(f, strides=2 if (i > 0 and j == 0) else 1)(x)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes)(x)


class _Attention(nn.Module):
    num_heads: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        b, t, d = x.shape
        h = self.num_heads
        qkv = nn.Dense(3 * d, use_bias=False)(x).reshape(b, t, 3, h, d // h)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(d // h).astype(x.dtype)
        causal = jnp.tril(jnp.ones((t, t), bool))
        scores = jnp.where(causal, scores, jnp.finfo(x.dtype).min)
        att = jax.nn.softmax(scores, axis=-1)
        y = jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, t, d)
        return nn.Dense(d, use_bias=False)(y)


class _DecoderLayer(nn.Module):
    num_heads: int
    d_ff: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + _Attention(self.num_heads)(nn.LayerNorm()(x))
        return _residual_mlp(x, self.d_ff)


class Transformer(TokenTransformer):
    """A decoder-only (causal) Transformer language model, pre-LayerNorm."""

    num_layers: int

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        embed, x = _embed_with_positions(self, tokens)
        for _ in range(self.num_layers):
            x = _DecoderLayer(self.num_heads, self.d_ff)(x)
        return embed.attend(nn.LayerNorm()(x))  # tied output embedding


class _StackedLSTMCell(nn.Module):
    """``num_layers`` LSTM cells applied in turn at one time step."""

    hidden: int
    num_layers: int

    @nn.compact
    def __call__(self, carry: tuple[Any, ...], x: jax.Array) -> tuple[tuple[Any, ...], jax.Array]:
        new = []
        for layer in range(self.num_layers):
            c, x = nn.OptimizedLSTMCell(self.hidden, name=f"lstm{layer}")(carry[layer], x)
            new.append(c)
        return tuple(new), x


class LSTMClassifier(nn.Module):
    """A stacked LSTM scanned over time, then a dense head on the last hidden state.

    The time loop is ``nn.scan`` (a ``jax.lax.scan``: an XLA ``while`` whose trip
    count is the sequence length); the cells' parameters are shared across steps.
    """

    hidden: int = 128
    num_layers: int = 2
    num_classes: int = 10

    @nn.compact
    def __call__(self, xs: jax.Array) -> jax.Array:  # xs: [time, batch, features]
        scan_cell = nn.scan(
            _StackedLSTMCell,
            variable_broadcast="params",
            split_rngs={"params": False},
            in_axes=0,
            out_axes=0,
        )
        zeros = jnp.zeros((xs.shape[1], self.hidden), xs.dtype)
        carry = tuple((zeros, zeros) for _ in range(self.num_layers))
        _, hs = scan_cell(self.hidden, self.num_layers, name="rnn")(carry, xs)
        return nn.Dense(self.num_classes)(hs[-1])


# --------------------------------------------------------------------------- programs


def _alexnet_train_b32(concrete: bool) -> Built:
    model = AlexNet(num_classes=10)
    tx = optax.adam(1e-3)
    batch, hw = 32, 32
    rng = np.random.default_rng(SEED)
    x0 = jax.ShapeDtypeStruct((1, hw, hw, 3), jnp.float32)
    params = _params(lambda k, x: model.init(k, x)["params"], x0, concrete, rng)
    opt_state = _opt_state(tx, params, concrete)
    images = _floats(rng, (batch, hw, hw, 3), concrete)
    labels = _ints(rng, (batch,), 10, concrete)

    def train_step(params, opt_state, images, labels):
        def loss_fn(p):
            return _xent(_forward(model, {"params": p}, images), labels)

        return _gradient_step(tx, loss_fn, params, opt_state)

    return train_step, (params, opt_state, images, labels), {}


def _resnet_infer(concrete: bool) -> Built:
    model = ResNet()
    batch, hw = 8, 32
    rng = np.random.default_rng(SEED)
    x0 = jax.ShapeDtypeStruct((1, hw, hw, 3), jnp.float32)

    def init(key: jax.Array, x: jax.Array) -> Any:
        v = model.init(key, x)
        return {"params": v["params"], "batch_stats": v["batch_stats"]}

    variables = _params(init, x0, concrete, rng)
    images = _floats(rng, (batch, hw, hw, 3), concrete)

    def infer(variables, images):
        return jax.nn.softmax(_forward(model, variables, images), axis=-1)

    return infer, (variables, images), {}


def _transformer_train(concrete: bool) -> Built:
    model = Transformer(vocab=512, d_model=128, num_heads=4, num_layers=2, d_ff=512, max_len=64)
    tx = optax.adamw(3e-4, weight_decay=0.01)
    batch, seq = 8, 64
    rng = np.random.default_rng(SEED)
    t0 = jax.ShapeDtypeStruct((1, seq), jnp.int32)
    params = _params(lambda k, x: model.init(k, x)["params"], t0, concrete, rng)
    opt_state = _opt_state(tx, params, concrete)
    tokens = _ints(rng, (batch, seq + 1), model.vocab, concrete)

    def train_step(params, opt_state, tokens):
        inputs, targets = tokens[:, :-1], tokens[:, 1:]

        def loss_fn(p):
            return _xent(_forward(model, {"params": p}, inputs), targets)

        return _gradient_step(tx, loss_fn, params, opt_state)

    return train_step, (params, opt_state, tokens), {}


def _lstm_infer(concrete: bool) -> Built:
    # LSTMClassifier scans over axis 0: [time, batch, features].
    return _sequence_infer(LSTMClassifier(hidden=128), (16, 8, 64), concrete, batch_axis=1)


def _inplace_update_loop(concrete: bool) -> Built:
    steps, batch, d, vocab = 32, 8, 128, 256
    rng = np.random.default_rng(SEED)
    scale = d**-0.5
    shapes = {
        "embed": (vocab, d),
        "wq": (d, d),
        "wk": (d, d),
        "wv": (d, d),
        "wo": (d, d),
        "wout": (d, vocab),
    }
    params = {n: _floats(rng, s, concrete) for n, s in shapes.items()}
    if concrete:
        params = {n: scale * w for n, w in params.items()}
    first = _ints(rng, (batch,), vocab, concrete)

    def decode(params, first):
        """Greedy decoding with one attention layer and a KV cache.

        Each of the ``steps`` iterations writes the new key and value at position
        ``i`` of the caches (``dynamic_update_slice``) and the chosen token into
        ``tokens[i]`` (``.at[i].set``): in-place updates of loop-carried buffers.
        """
        k_cache = jnp.zeros((batch, steps, d), jnp.float32)
        v_cache = jnp.zeros((batch, steps, d), jnp.float32)
        tokens = jnp.zeros((steps, batch), jnp.int32)
        positions = jnp.arange(steps)

        def body(i, carry):
            tok, k_cache, v_cache, tokens = carry
            x = params["embed"][tok]  # [batch, d]
            q, k, v = x @ params["wq"], x @ params["wk"], x @ params["wv"]
            k_cache = jax.lax.dynamic_update_slice(k_cache, k[:, None], (0, i, 0))
            v_cache = jax.lax.dynamic_update_slice(v_cache, v[:, None], (0, i, 0))
            scores = jnp.einsum("bd,btd->bt", q, k_cache) * scale
            scores = jnp.where(positions[None] <= i, scores, -1e9)
            att = jax.nn.softmax(scores, axis=-1)
            y = jnp.tanh(jnp.einsum("bt,btd->bd", att, v_cache) @ params["wo"]) + x
            tok = jnp.argmax(y @ params["wout"], axis=-1).astype(jnp.int32)
            return tok, k_cache, v_cache, tokens.at[i].set(tok)

        init_carry = (first, k_cache, v_cache, tokens)
        _, k_cache, v_cache, tokens = jax.lax.fori_loop(0, steps, body, init_carry)
        return tokens, k_cache, v_cache

    return decode, (params, first), {}


def _donated_sgd_step(concrete: bool) -> Built:
    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Dense(512)(x))
            x = nn.relu(nn.Dense(512)(x))
            return nn.Dense(10)(x)

    model = MLP()
    tx = optax.sgd(0.01, momentum=0.9)
    batch, features = 64, 256
    rng = np.random.default_rng(SEED)
    x0 = jax.ShapeDtypeStruct((1, features), jnp.float32)
    params = _params(lambda k, x: model.init(k, x)["params"], x0, concrete, rng)
    opt_state = _opt_state(tx, params, concrete)
    x = _floats(rng, (batch, features), concrete)
    y = _ints(rng, (batch,), 10, concrete)

    def sgd_step(params, opt_state, x, y):
        def loss_fn(p):
            return _xent(_forward(model, {"params": p}, x), y)

        return _gradient_step(tx, loss_fn, params, opt_state)

    return sgd_step, (params, opt_state, x, y), {"donate_argnums": (0, 1)}


_BASE_PROGRAMS = [
    ModelProgram(
        "alexnet_train_b32",
        "AlexNet-like CNN (5 conv with 3 max-pools, 3 dense; 32x32x3 images, "
        "10 classes) full training step at batch 32: forward, softmax "
        "cross-entropy, backward, Adam update (optax); returns new params, "
        "optimizer state and loss",
        _alexnet_train_b32,
        training=True,
    ),
    ModelProgram(
        "resnet_infer",
        "ResNet-20, CIFAR style (3x3 stem, 3 stages x 3 basic blocks of "
        "16/32/64 channels: conv + inference batchnorm + relu with skip "
        "connections, projection shortcuts; global average pool, dense) "
        "inference at batch 8 on 32x32x3 images, softmax output",
        _resnet_infer,
    ),
    ModelProgram(
        "transformer_train",
        "decoder-only Transformer LM (2 pre-LN layers, d_model 128, 4 heads, "
        "d_ff 512, vocab 512, causal attention, tied embeddings) training step "
        "at batch 8, sequence 64: next-token cross-entropy, grad, AdamW update",
        _transformer_train,
        training=True,
    ),
    ModelProgram(
        "lstm_infer",
        "2-layer stacked LSTM (hidden 128, input 64) inference over 16 time "
        "steps at batch 8 "
        "with jax.lax.scan (a while loop of trip count 16), dense head on the "
        "last hidden state, log-softmax output",
        _lstm_infer,
        loops=True,
    ),
    ModelProgram(
        "inplace_update_loop",
        "greedy decoding for 32 steps (lax.fori_loop) at batch 8 with one "
        "attention layer (d 128, vocab 256) and a KV cache: each step writes its "
        "key and value into [8,32,128] caches with dynamic_update_slice and its "
        "token into a [32,8] buffer with .at[i].set (in-place updates of "
        "loop-carried buffers)",
        _inplace_update_loop,
        loops=True,
    ),
    ModelProgram(
        "donated_sgd_step",
        "MLP (256-512-512-10) training step at batch 64 with SGD + momentum "
        "(optax), params and optimizer state donated (donate_argnums=(0, 1)) so "
        "they are updated in place (input/output aliases)",
        _donated_sgd_step,
        training=True,
    ),
]

MODEL_PROGRAMS: dict[str, ModelProgram] = {
    p.name: p
    for p in [
        *_BASE_PROGRAMS,
        *models_vision.PROGRAMS,
        *models_sequence.PROGRAMS,
        *models_transformers.PROGRAMS,
        *models_misc.PROGRAMS,
    ]
}


def model_program_names() -> list[str]:
    """The names of :data:`MODEL_PROGRAMS`, in definition order."""
    return list(MODEL_PROGRAMS)
