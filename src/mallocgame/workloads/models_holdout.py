"""The programs of suite ``holdout-v1``: held out, never used to choose a default or a setting.

The registry :data:`HOLDOUT_PROGRAMS` maps a name to a
:class:`~mallocgame.workloads.models_common.ModelProgram`. The models are architectures
and configurations that no other suite has (``xla-v1``, ``xla-v2``, ``torch-v1``): a
decoder-only LM with its layers scanned, a Llama-architecture scoring pass without a
cache, a mixture-of-experts LM, ConvNeXt, a DDPM denoiser, a GIN on an ogbn-arxiv-sized
graph, a Mamba-style selective scan, a C3D video network, a convolutional autoencoder
and BERT-large. Each is compiled by XLA from abstract shapes
(:class:`jax.ShapeDtypeStruct`) and derived on the physical fast memory of the preset it
is sized for (its ``preset``; ``None``: ``tpu_v4i``, 128 MiB of CMEM before 8 GiB of HBM,
so such a program's peak live bytes are at most 8 GiB). Every program's peak live bytes
exceed its preset's fast memory, so the fast memory binds.

The rule of the suite: its programs and results are read to *report* how the solvers
generalise; no default, option value or table of any solver may be chosen by looking at
them. Values are float32 unless a description says bfloat16.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from mallocgame.workloads import models_common as mc
from mallocgame.workloads.models_layers import TokenTransformer, _causal, _embed_with_positions
from mallocgame.workloads.models_transformers import BERT
from mallocgame.workloads.models_v2 import LlamaConfig, _llama_layer, _llama_params, _rms_norm
from mallocgame.workloads.models_vision import _classifier_train, _inference

__all__ = [
    "HOLDOUT_PROGRAMS",
    "ScannedDecoderLM",
    "MoELM",
    "ConvNeXt",
    "DDPMUNet",
    "GIN",
    "MambaLM",
    "C3D",
    "ConvAutoencoder",
    "CODELLAMA_34B",
    "top2_dispatch",
]

# --------------------------------------------------------------------------- transformers


class _DecoderBlock(nn.Module):
    """A pre-LN decoder block (causal self-attention, GELU MLP) in the ``nn.scan`` carry form."""

    num_heads: int
    d_ff: int

    @nn.compact
    def __call__(self, x: jax.Array, _: Any) -> tuple[jax.Array, None]:
        mask = _causal(x.shape[1])
        y = nn.LayerNorm()(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.num_heads)(y, y, mask=mask)
        y = nn.LayerNorm()(x)
        return x + nn.Dense(x.shape[-1])(nn.gelu(nn.Dense(self.d_ff)(y))), None


class ScannedDecoderLM(TokenTransformer):
    """Decoder-only LM whose layers are one ``nn.scan`` (stacked weights, an XLA ``while``), as
    MaxText and Praxis lay out their models. Tokens ``[batch, seq]`` -> logits ``[batch, seq,
    vocab]``."""

    num_layers: int

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        embed, x = _embed_with_positions(self, tokens)
        stack = nn.scan(
            _DecoderBlock,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            length=self.num_layers,
        )
        x, _ = stack(self.num_heads, self.d_ff, name="layers")(x, None)
        return embed.attend(nn.LayerNorm()(x))


def _decoder_lm_scan_train(concrete: bool) -> mc.Built:
    model = ScannedDecoderLM(
        vocab=32000, d_model=1024, num_heads=16, num_layers=8, d_ff=4096, max_len=512
    )
    schedule = optax.warmup_cosine_decay_schedule(0.0, 3e-4, 2000, 100_000)
    adamw = optax.adamw(schedule, b2=0.95, weight_decay=0.1)
    tx = optax.chain(optax.clip_by_global_norm(1.0), adamw)
    return mc._next_token_train(model, tx, 2, 512, concrete)


def top2_dispatch(
    top_gates: jax.Array, top_idx: jax.Array, experts: int, capacity: int
) -> tuple[jax.Array, jax.Array]:
    """GShard's top-2 dispatch and combine tensors, both ``[T, experts, capacity]``.

    ``top_gates`` ``[T, 2]`` and ``top_idx`` ``[T, 2]`` (int) are each token's two highest
    router probabilities and their experts (``jax.lax.top_k(gates, 2)``). Token ``t`` takes
    slot ``c`` of expert ``e`` (``dispatch[t, e, c] == 1``) for its first choices, in token
    order, then for its second choices, while the expert has a free slot; ``combine`` holds
    the gate of each kept choice at its slot (``top_gates.dtype``). A full expert drops the token.
    """
    t, e = top_idx.shape[0], experts
    dispatch = jnp.zeros((t, e, capacity), top_gates.dtype)
    combine = jnp.zeros((t, e, capacity), top_gates.dtype)
    filled = jnp.zeros((e,), jnp.int32)
    for k in range(2):
        mask = jax.nn.one_hot(top_idx[:, k], e, dtype=jnp.int32)  # [T, E]
        position = (jnp.cumsum(mask, axis=0) - 1 + filled[None]) * mask
        keep = mask * (position < capacity)
        slot = jax.nn.one_hot(position, capacity, dtype=top_gates.dtype) * keep[..., None]
        dispatch = dispatch + slot
        combine = combine + slot * top_gates[:, k, None, None]
        filled = filled + mask.sum(axis=0)
    return dispatch, combine


class _MoEFeedForward(nn.Module):
    """Top-2 mixture-of-experts feed-forward with GShard's dispatch and combine tensors.

    Tokens ``[T, d]``; each goes to its two highest-gated experts while an expert has room
    (capacity ``ceil(capacity_factor * 2 * T / experts)``), else it is dropped there.
    Returns the output ``[T, d]`` and the load-balancing loss (a scalar).
    """

    experts: int
    d_ff: int
    capacity_factor: float = 1.25

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        t, d = x.shape
        e = self.experts
        capacity = int(np.ceil(self.capacity_factor * 2 * t / e))
        gates = jax.nn.softmax(nn.Dense(e, use_bias=False, name="router")(x), axis=-1)  # [T, E]
        top_gates, top_idx = jax.lax.top_k(gates, 2)
        dispatch, combine = top2_dispatch(top_gates, top_idx, e, capacity)
        aux = e * jnp.mean(gates.mean(axis=0) * jax.nn.one_hot(top_idx[:, 0], e).mean(axis=0))
        w_in = self.param("w_in", nn.initializers.lecun_normal(), (e, d, self.d_ff))
        w_out = self.param("w_out", nn.initializers.lecun_normal(), (e, self.d_ff, d))
        expert_in = jnp.einsum("tec,td->ecd", dispatch, x)
        hidden = nn.gelu(jnp.einsum("ecd,edf->ecf", expert_in, w_in))
        expert_out = jnp.einsum("ecf,efd->ecd", hidden, w_out)
        return jnp.einsum("tec,ecd->td", combine, expert_out), aux


class MoELM(TokenTransformer):
    """Decoder-only LM whose every feed-forward is a top-2 MoE (GShard layout) of ``experts``
    experts, each of width ``d_ff``.

    Tokens ``[batch, seq]`` -> (logits ``[batch, seq, vocab]``, summed load-balancing loss).
    """

    num_layers: int
    experts: int

    @nn.compact
    def __call__(self, tokens: jax.Array) -> tuple[jax.Array, jax.Array]:
        b, t = tokens.shape
        embed, x = _embed_with_positions(self, tokens)
        mask = _causal(t)
        aux = jnp.zeros((), jnp.float32)
        for _ in range(self.num_layers):
            y = nn.LayerNorm()(x)
            x = x + nn.MultiHeadDotProductAttention(num_heads=self.num_heads)(y, y, mask=mask)
            y = nn.LayerNorm()(x).reshape(b * t, self.d_model)
            out, layer_aux = _MoEFeedForward(self.experts, self.d_ff)(y)
            aux = aux + layer_aux
            x = x + out.reshape(b, t, self.d_model)
        return embed.attend(nn.LayerNorm()(x)), aux


def _moe_lm_train(concrete: bool) -> mc.Built:
    model = MoELM(
        vocab=32000, d_model=512, num_heads=8, num_layers=2, d_ff=2048, experts=8, max_len=512
    )
    rng = np.random.default_rng(mc.SEED)
    tokens = mc._ints(rng, (8, 513), model.vocab, concrete)

    def loss_fn(params, tokens):
        logits, aux = mc._forward(model, {"params": params}, tokens[:, :-1])
        return mc._xent(logits, tokens[:, 1:]) + 0.01 * aux

    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adafactor(1e-3))
    t0 = jax.ShapeDtypeStruct((1, 512), jnp.int32)
    return mc._training_program(model, tx, loss_fn, (t0,), (tokens,), concrete, rng)


CODELLAMA_34B = LlamaConfig(
    "Code Llama 34B", vocab=32000, d_model=8192, layers=48, heads=64, kv_heads=8, ffn=22016
)
"""Rozière et al. 2023: 33.7 billion parameters, 67 GB of bfloat16 weights (more than an A100
40GB holds)."""


def _llama_score(cfg: LlamaConfig, batch: int, seq: int, concrete: bool) -> mc.Built:
    """Scoring without a KV cache: each sequence's summed log-likelihood of its own tokens
    (``[batch]`` float32) under ``cfg`` (a forward pass over all positions, as in evaluation
    or reward-model scoring)."""
    params = _llama_params(cfg, concrete)
    tokens = mc._ints(np.random.default_rng(mc.SEED), (batch, seq), cfg.vocab, concrete)

    def score(params, tokens):
        positions = jnp.broadcast_to(jnp.arange(tokens.shape[1]), tokens.shape)
        x = params["embed"][tokens]
        for w in params["layers"]:
            x, _ = _llama_layer(cfg, w, x, positions, None, None, None)
        logits = jnp.matmul(
            _rms_norm(x[:, :-1], params["norm"]),
            params["lm_head"],
            preferred_element_type=jnp.float32,
        )
        logp = jax.nn.log_softmax(logits, axis=-1)
        return jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1)[..., 0].sum(axis=-1)

    return score, (params, tokens), {}


def _bert_large_infer(concrete: bool) -> mc.Built:
    """BERT-large (24 post-LN layers, d 1024, 16 heads, d_ff 4096, vocab 30522) forward pass with
    its MLM head at 20 positions and its NSP head: (MLM probabilities, NSP probabilities)."""
    model = BERT(vocab=30522, d_model=1024, num_heads=16, num_layers=24, d_ff=4096, max_len=512)
    batch, seq, picked = 128, 512, 20
    rng = np.random.default_rng(mc.SEED)
    tokens = mc._ints(rng, (batch, seq), model.vocab, concrete)
    segments = mc._ints(rng, (batch, seq), 2, concrete)
    attention = mc._ints(rng, (batch, seq), 2, concrete)
    positions = mc._ints(rng, (batch, picked), seq, concrete)
    examples = tuple(
        jax.ShapeDtypeStruct((1, *a.shape[1:]), a.dtype)
        for a in (tokens, segments, attention, positions)
    )
    params = mc._model_params(model, examples, concrete, rng)

    def infer(params, tokens, segments, attention, positions):
        mlm, nsp = mc._forward(model, {"params": params}, tokens, segments, attention, positions)
        return jax.nn.softmax(mlm, axis=-1), jax.nn.softmax(nsp, axis=-1)

    return infer, (params, tokens, segments, attention, positions), {}


# --------------------------------------------------------------------------- vision


class _ConvNeXtBlock(nn.Module):
    """7x7 depthwise conv, LayerNorm, 4x pointwise MLP with GELU, layer scale, residual."""

    dim: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        y = nn.Conv(self.dim, (7, 7), padding="SAME", feature_group_count=self.dim)(x)
        y = nn.Dense(self.dim)(nn.gelu(nn.Dense(4 * self.dim)(nn.LayerNorm(epsilon=1e-6)(y))))
        gamma = self.param("gamma", nn.initializers.constant(1e-6), (self.dim,))
        return x + gamma * y


class ConvNeXt(nn.Module):
    """ConvNeXt (Liu et al. 2022): a 4x4 stride-4 patchify stem, four stages of
    :class:`_ConvNeXtBlock` s with LayerNorm and 2x2 stride-2 downsampling between them,
    global average pool, LayerNorm, dense head. Images ``[b, h, w, 3]`` -> logits."""

    depths: tuple[int, ...] = (3, 3, 9, 3)
    dims: tuple[int, ...] = (96, 192, 384, 768)
    num_classes: int = 1000

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.LayerNorm(epsilon=1e-6)(nn.Conv(self.dims[0], (4, 4), strides=(4, 4))(x))
        for stage, (depth, dim) in enumerate(zip(self.depths, self.dims)):
            if stage:
                x = nn.Conv(dim, (2, 2), strides=(2, 2))(nn.LayerNorm(epsilon=1e-6)(x))
            for _ in range(depth):
                x = _ConvNeXtBlock(dim)(x)
        return nn.Dense(self.num_classes)(nn.LayerNorm(epsilon=1e-6)(x.mean(axis=(1, 2))))


def _convnext_t_infer(concrete: bool) -> mc.Built:
    return _inference(ConvNeXt(), (64, 224, 224, 3), concrete, collections=("params",))


class C3D(nn.Module):
    """C3D (Tran et al. 2015): eight 3x3x3 convs of 64-128-256-256-512-512-512-512 channels in
    five stages with max-pools (the first over space only), FC 4096-4096, softmax classes.
    Clips ``[b, frames, h, w, 3]`` -> logits."""

    num_classes: int = 400

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for stage, widths in enumerate(((64,), (128,), (256, 256), (512, 512), (512, 512))):
            for width in widths:
                x = nn.relu(nn.Conv(width, (3, 3, 3), padding="SAME")(x))
            window = (1, 2, 2) if stage == 0 else (2, 2, 2)
            x = nn.max_pool(x, window, strides=window, padding="SAME" if stage == 4 else "VALID")
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(4096)(x))
        x = nn.relu(nn.Dense(4096)(x))
        return nn.Dense(self.num_classes)(x)


def _c3d_train(concrete: bool) -> mc.Built:
    tx = optax.chain(optax.add_decayed_weights(5e-4), optax.sgd(3e-3, momentum=0.9))
    return _classifier_train(C3D(), tx, (16, 112, 112, 3), 8, concrete)


class ConvAutoencoder(nn.Module):
    """Convolutional autoencoder: four stride-2 3x3 convs (``widths``) down to a dense latent,
    and four stride-2 transposed convs back up to a sigmoid image. ``[b, h, w, c]`` -> same."""

    widths: tuple[int, ...] = (64, 128, 256, 512)
    latent: int = 512

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        b, _h, _w, c = x.shape
        for width in self.widths:
            x = nn.relu(nn.Conv(width, (3, 3), strides=(2, 2))(x))
        shape = x.shape[1:]
        z = nn.Dense(self.latent, name="latent")(x.reshape((b, -1)))
        x = nn.relu(nn.Dense(int(np.prod(shape)))(z)).reshape((b, *shape))
        for width in reversed(self.widths[:-1]):
            x = nn.relu(nn.ConvTranspose(width, (3, 3), strides=(2, 2))(x))
        return nn.sigmoid(nn.ConvTranspose(c, (3, 3), strides=(2, 2))(x))


def _conv_autoencoder_train(concrete: bool) -> mc.Built:
    model = ConvAutoencoder()
    rng = np.random.default_rng(mc.SEED)
    images = mc._floats(rng, (64, 256, 256, 3), concrete)

    def loss_fn(params, images):
        return jnp.mean((mc._forward(model, {"params": params}, images) - images) ** 2)

    x0 = jax.ShapeDtypeStruct((1, 256, 256, 3), jnp.float32)
    return mc._training_program(model, optax.adam(1e-3), loss_fn, (x0,), (images,), concrete, rng)


# --------------------------------------------------------------------------- diffusion


def _timestep_embedding(t: jax.Array, dim: int) -> jax.Array:
    """Sinusoidal embedding ``[b, dim]`` of integer timesteps ``t`` ``[b]`` (DDPM's)."""
    half = dim // 2
    freqs = jnp.exp(-np.log(10_000.0) * jnp.arange(half, dtype=jnp.float32) / (half - 1))
    angles = t.astype(jnp.float32)[:, None] * freqs[None]
    return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)


class _ResBlock(nn.Module):
    """DDPM residual block: GroupNorm, swish, 3x3 conv, plus the projected time embedding, twice."""

    channels: int

    @nn.compact
    def __call__(self, x: jax.Array, temb: jax.Array) -> jax.Array:
        h = nn.Conv(self.channels, (3, 3))(nn.swish(nn.GroupNorm(32)(x)))
        h = h + nn.Dense(self.channels)(nn.swish(temb))[:, None, None]
        h = nn.Conv(self.channels, (3, 3))(nn.swish(nn.GroupNorm(32)(h)))
        if x.shape[-1] != self.channels:
            x = nn.Conv(self.channels, (1, 1))(x)
        return x + h


class _AttnBlock(nn.Module):
    """Single-head self-attention over the pixels of ``[b, h, w, c]``, with a residual."""

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        b, h, w, c = x.shape
        y = nn.GroupNorm(32)(x).reshape(b, h * w, c)
        y = nn.MultiHeadDotProductAttention(num_heads=1)(y, y)
        return x + y.reshape(b, h, w, c)


class DDPMUNet(nn.Module):
    """The DDPM noise-prediction U-Net (Ho et al. 2020, its CIFAR-10 blocks): channels ``ch *
    mult`` per level, ``res_blocks`` residual blocks a level, attention in the middle and at
    resolution ``attn_res`` (none at 32x32 inputs with two levels), skip concatenation on the
    way up. Noisy images ``[b, h, w, 3]`` and timesteps ``[b]`` -> noise."""

    ch: int = 128
    mult: tuple[int, ...] = (1, 2)
    res_blocks: int = 1
    attn_res: int = 8

    @nn.compact
    def __call__(self, x: jax.Array, t: jax.Array) -> jax.Array:
        temb = _timestep_embedding(t, self.ch)
        temb = nn.Dense(4 * self.ch)(nn.swish(nn.Dense(4 * self.ch)(temb)))
        h = nn.Conv(self.ch, (3, 3))(x)
        skips = [h]
        for level, m in enumerate(self.mult):
            for _ in range(self.res_blocks):
                h = _ResBlock(self.ch * m)(h, temb)
                if h.shape[1] == self.attn_res:
                    h = _AttnBlock()(h)
                skips.append(h)
            if level != len(self.mult) - 1:
                h = nn.Conv(h.shape[-1], (3, 3), strides=(2, 2))(h)
                skips.append(h)
        h = _AttnBlock()(_ResBlock(h.shape[-1])(h, temb))
        h = _ResBlock(h.shape[-1])(h, temb)
        for level, m in reversed(list(enumerate(self.mult))):
            for _ in range(self.res_blocks + 1):
                h = _ResBlock(self.ch * m)(jnp.concatenate([h, skips.pop()], axis=-1), temb)
                if h.shape[1] == self.attn_res:
                    h = _AttnBlock()(h)
            if level:
                b, hh, ww, c = h.shape
                h = nn.Conv(c, (3, 3))(jax.image.resize(h, (b, 2 * hh, 2 * ww, c), "nearest"))
        return nn.Conv(x.shape[-1], (3, 3))(nn.swish(nn.GroupNorm(32)(h)))


def _ddpm_train(concrete: bool) -> mc.Built:
    """A DDPM training step: noise drawn in-program from a key, a linear beta schedule of 1000
    steps, the noised images, MSE on the predicted noise, Adam."""
    model = DDPMUNet()
    rng = np.random.default_rng(mc.SEED)
    batch, size, steps = 64, 32, 1000
    images = mc._floats(rng, (batch, size, size, 3), concrete)
    t = mc._ints(rng, (batch,), steps, concrete)
    noise = mc._floats(rng, (batch, size, size, 3), concrete)
    alpha_bar = np.cumprod(1.0 - np.linspace(1e-4, 0.02, steps)).astype(np.float32)

    def loss_fn(params, images, t, noise):
        ab = jnp.asarray(alpha_bar)[t][:, None, None, None]
        noisy = jnp.sqrt(ab) * images + jnp.sqrt(1.0 - ab) * noise
        return jnp.mean((mc._forward(model, {"params": params}, noisy, t) - noise) ** 2)

    examples = (
        jax.ShapeDtypeStruct((1, size, size, 3), jnp.float32),
        jax.ShapeDtypeStruct((1,), jnp.int32),
    )
    batch_args = (images, t, noise)
    return mc._training_program(
        model, optax.adam(2e-4), loss_fn, examples, batch_args, concrete, rng
    )


# --------------------------------------------------------------------------- graphs and scans


class GIN(nn.Module):
    """Graph isomorphism network (Xu et al. 2019): ``layers`` rounds of ``h <- MLP((1 + eps) h +
    sum of the senders' h)`` with LayerNorm, then a node classifier. Node features ``[N, f]``,
    senders and receivers ``[E]`` -> logits ``[N, classes]``."""

    hidden: int
    layers: int
    num_classes: int

    @nn.compact
    def __call__(self, x: jax.Array, senders: jax.Array, receivers: jax.Array) -> jax.Array:
        h = nn.Dense(self.hidden)(x)
        for i in range(self.layers):
            eps = self.param(f"eps{i}", nn.initializers.zeros, ())
            agg = jax.ops.segment_sum(h[senders], receivers, num_segments=h.shape[0])
            y = nn.Dense(self.hidden)(nn.relu(nn.Dense(self.hidden)((1.0 + eps) * h + agg)))
            h = nn.LayerNorm()(h + nn.relu(y))
        return nn.Dense(self.num_classes)(h)


def _gin_train(concrete: bool) -> mc.Built:
    """GIN node classification on a graph of ogbn-arxiv's size (169,343 nodes, 1,166,243 edges,
    128 features, 40 classes): full-batch training step, Adam."""
    model = GIN(hidden=256, layers=3, num_classes=40)
    nodes, edges, features = 169_343, 1_166_243, 128
    rng = np.random.default_rng(mc.SEED)
    x = mc._floats(rng, (nodes, features), concrete)
    senders = mc._ints(rng, (edges,), nodes, concrete)
    receivers = mc._ints(rng, (edges,), nodes, concrete)
    labels = mc._ints(rng, (nodes,), model.num_classes, concrete)

    def loss_fn(params, x, senders, receivers, labels):
        return mc._xent(mc._forward(model, {"params": params}, x, senders, receivers), labels)

    examples = (
        jax.ShapeDtypeStruct((4, features), jnp.float32),
        jax.ShapeDtypeStruct((2,), jnp.int32),
        jax.ShapeDtypeStruct((2,), jnp.int32),
    )
    batch = (x, senders, receivers, labels)
    return mc._training_program(model, optax.adam(1e-2), loss_fn, examples, batch, concrete, rng)


class _MambaBlock(nn.Module):
    """A Mamba block (Gu and Dao 2023): input projection to ``expand * d`` channels and a gate,
    causal depthwise conv of width 4, the selective SSM (input-dependent step, B and C; state
    ``d_state`` a channel) as a ``lax.scan`` over time, gated output projection, residual."""

    expand: int = 2
    d_state: int = 16
    d_conv: int = 4

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        b, _t, d = x.shape
        di, n = self.expand * d, self.d_state
        dt_rank = -(-d // 16)
        xz = nn.Dense(2 * di, use_bias=False)(_rms(x))
        u, z = xz[..., :di], xz[..., di:]
        u = nn.Conv(di, (self.d_conv,), padding=[(self.d_conv - 1, 0)], feature_group_count=di)(u)
        u = nn.silu(u)
        proj = nn.Dense(dt_rank + 2 * n, use_bias=False)(u)
        delta = nn.softplus(nn.Dense(di)(proj[..., :dt_rank]))  # [b, t, di]
        bmat, cmat = proj[..., dt_rank : dt_rank + n], proj[..., dt_rank + n :]  # [b, t, n]
        a_log = self.param("A_log", _s4d_real_log, (di, n))  # A = -exp(A_log)
        decay = jnp.exp(delta[..., None] * -jnp.exp(a_log))  # [b, t, di, n]
        drive = delta[..., None] * bmat[:, :, None] * u[..., None]  # [b, t, di, n]

        def step(h, inputs):
            decay_t, drive_t, c_t = inputs
            h = decay_t * h + drive_t
            return h, jnp.einsum("bdn,bn->bd", h, c_t)

        time_major = lambda a: jnp.moveaxis(a, 1, 0)  # noqa: E731
        _, y = jax.lax.scan(
            step,
            jnp.zeros((b, di, n), x.dtype),
            (time_major(decay), time_major(drive), time_major(cmat)),
        )
        y = jnp.moveaxis(y, 0, 1) + u * self.param("D", nn.initializers.ones, (di,))
        return x + nn.Dense(d, use_bias=False)(y * nn.silu(z))


def _s4d_real_log(_: jax.Array, shape: tuple[int, int]) -> jax.Array:
    """Mamba's S4D-real initialisation of ``A_log`` ``[channels, state]``: ``log(1 .. state)``."""
    return jnp.log(jnp.tile(jnp.arange(1, shape[1] + 1.0), (shape[0], 1)))


def _rms(x: jax.Array) -> jax.Array:
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5)


class MambaLM(nn.Module):
    """A stack of :class:`_MambaBlock` s between a token embedding and a tied output projection.
    Tokens ``[batch, seq]`` -> logits ``[batch, seq, vocab]``."""

    vocab: int
    d_model: int
    num_layers: int

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        embed = nn.Embed(self.vocab, self.d_model)
        x = embed(tokens)
        for _ in range(self.num_layers):
            x = _MambaBlock()(x)
        return embed.attend(_rms(x))


def _mamba_lm_infer(concrete: bool) -> mc.Built:
    """Scoring by a Mamba LM: the log-probabilities of the next token at every position."""
    model = MambaLM(vocab=32000, d_model=768, num_layers=4)
    rng = np.random.default_rng(mc.SEED)
    tokens = mc._ints(rng, (8, 1024), model.vocab, concrete)
    params = mc._model_params(model, (jax.ShapeDtypeStruct((1, 8), jnp.int32),), concrete, rng)

    def infer(params, tokens):
        return jax.nn.log_softmax(mc._forward(model, {"params": params}, tokens), axis=-1)

    return infer, (params, tokens), {}


# --------------------------------------------------------------------------- registry

_PROGRAMS = [
    mc.ModelProgram(
        "decoder_lm_scan_train",
        "decoder-only LM (8 pre-LN layers scanned as one while loop, d 1024, 16 heads, "
        "d_ff 4096, vocab 32000, learned positions, tied embeddings) training step on 512 "
        "tokens at batch 2: cross-entropy, global-norm clipping, AdamW with warmup-cosine",
        _decoder_lm_scan_train,
        training=True,
        loops=True,
    ),
    mc.ModelProgram(
        "moe_lm_train",
        "mixture-of-experts decoder LM (2 layers, d 512, 8 heads; each feed-forward 8 "
        "experts of 2048, top-2 GShard dispatch with capacity factor 1.25, load-balancing "
        "loss; vocab 32000) training step on 512 tokens at batch 8, Adafactor",
        _moe_lm_train,
        training=True,
    ),
    mc.ModelProgram(
        "codellama34b_score_512",
        "Code Llama 34B architecture (Llama layout: 48 layers, d 8192, 64 heads, 8 KV "
        "heads, RoPE, SwiGLU 22016, bfloat16: 67 GB of weights) scoring one 512-token "
        "sequence without a KV cache (its summed log-likelihood), on the A100 40GB with "
        "host memory: the weights must stream from the host",
        lambda concrete: _llama_score(CODELLAMA_34B, 1, 512, concrete),
        preset="gpu_hbm_host",
    ),
    mc.ModelProgram(
        "bert_large_infer_b128",
        "BERT-large (24 post-LN layers, d 1024, 16 heads, d_ff 4096, vocab 30522) "
        "inference on 512 tokens at batch 128: MLM probabilities at 20 positions and NSP, "
        "on the MARL machine's 2 GiB of DRAM before Optane",
        _bert_large_infer,
        preset="dram_pmem",
    ),
    mc.ModelProgram(
        "convnext_t_infer_b64",
        "ConvNeXt-T (3/3/9/3 blocks of 96-768 channels, 7x7 depthwise convs, LayerNorm, "
        "layer scale) inference on 224x224x3 at batch 64, on the MARL machine's 2 GiB of "
        "DRAM before Optane",
        _convnext_t_infer,
        preset="dram_pmem",
    ),
    mc.ModelProgram(
        "c3d_train_b8",
        "C3D video network (8 3x3x3 convs of 64-512 channels, FC 4096-4096, 400 Kinetics "
        "classes) training step on 16x112x112x3 clips at batch 8, SGD with momentum and "
        "weight decay",
        _c3d_train,
        training=True,
    ),
    mc.ModelProgram(
        "conv_autoencoder_train_b64",
        "convolutional autoencoder (4 stride-2 convs of 64-512 channels, dense latent 512,"
        " 4 transposed convs) training step on 256x256x3 at batch 64, MSE, Adam",
        _conv_autoencoder_train,
        training=True,
    ),
    mc.ModelProgram(
        "ddpm_unet_train_b64",
        "DDPM noise-prediction U-Net (the CIFAR-10 model's blocks at two levels: ch 128 x "
        "1/2, one residual block a level, GroupNorm, attention in the middle at 16x16) "
        "training step on 32x32x3 at batch 64: linear schedule of 1000 steps, MSE on the "
        "noise, Adam",
        _ddpm_train,
        training=True,
    ),
    mc.ModelProgram(
        "gin_arxiv_train",
        "GIN (3 rounds, hidden 256, LayerNorm) full-batch node classification training "
        "step on a graph of ogbn-arxiv's size (169,343 nodes, 1,166,243 edges, 128 "
        "features, 40 classes), Adam",
        _gin_train,
        training=True,
    ),
    mc.ModelProgram(
        "mamba_lm_infer_b8",
        "Mamba-style LM (4 blocks, d 768, expand 2, state 16, selective scan as a lax.scan"
        " over 1024 steps, vocab 32000) next-token log-probabilities at batch 8",
        _mamba_lm_infer,
        loops=True,
    ),
]

HOLDOUT_PROGRAMS: dict[str, mc.ModelProgram] = {p.name: p for p in _PROGRAMS}
