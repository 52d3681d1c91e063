"""The programs of suite ``xla-v2``: models at the sizes their published configurations run at.

The registry :data:`V2_PROGRAMS` maps a name to a
:class:`~mallocgame.workloads.models_common.ModelProgram`. Each program is one step
of a model in its published configuration (widths, depths, vocabularies, image and
sequence sizes as its paper or reference implementation gives them), compiled by
XLA from abstract shapes (:class:`jax.ShapeDtypeStruct`: no memory is needed to
compile a 70-billion-parameter model). The batch is picked so that the program's
peak live bytes fit the preset it is sized for, and is stated in its description:

- ``tpu_v4i`` (the default): 8 GiB of HBM behind 128 MiB of CMEM, so every such
  program's peak live bytes are at most 8 GiB;
- ``gpu_hbm_host``, the offloading programs: an LLM whose bf16 weights alone exceed
  the GPU's 40 GiB of HBM, kept in host memory (what FlexGen, Accelerate's
  ``device_map`` and DeepSpeed's offload arrange by hand).

Values are float32 unless a description says bfloat16. ``build(concrete=True)``
gives real arrays as for ``xla-v1`` (:mod:`mallocgame.workloads.models_common`);
for the largest programs that needs the memory the model needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from mallocgame.workloads.models import LSTMClassifier
from mallocgame.workloads.models_common import SEED, Built, ModelProgram, _ints, _next_token_train
from mallocgame.workloads.models_misc import (
    DLRM,
    DDIMSampler,
    GraphNetwork,
    _dlrm_program,
    _factorized_chain,
    _graph_infer,
    _sampler,
)
from mallocgame.workloads.models_sequence import (
    BiGRUTagger,
    GRUClassifier,
    LSTMLanguageModel,
    Seq2SeqNMT,
    StackedRNN,
    WaveNet,
    _sequence_infer,
    _tagger_infer,
    _translate,
    _wavenet_program,
)
from mallocgame.workloads.models_transformers import (
    BERT,
    BF16,
    GPT,
    EncoderDecoder,
    _bert_pretrain,
    _translation_train,
)
from mallocgame.workloads.models_vision import (
    BottleneckResNet,
    MLPMixer,
    MnasNet,
    UNet,
    ViT,
    _batchnorm_train,
    _classifier_train,
    _inference,
    _segmentation_train,
)

__all__ = [
    "V2_PROGRAMS",
    "AlexNet",
    "LlamaConfig",
    "LLAMA2_70B",
    "TINYLLAMA_1B",
]

# --------------------------------------------------------------------------- vision


class AlexNet(nn.Module):
    """AlexNet (Krizhevsky et al. 2012, one-tower widths 96-256-384-384-256, FC 4096-4096-1000).

    227x227x3 input; local response normalisation and dropout are left out (neither
    changes which buffers exist, and dropout has no effect at inference).
    """

    num_classes: int = 1000

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        pool = lambda y: nn.max_pool(y, (3, 3), strides=(2, 2))  # noqa: E731
        x = pool(nn.relu(nn.Conv(96, (11, 11), strides=(4, 4), padding="VALID")(x)))  # 55 -> 27
        x = pool(nn.relu(nn.Conv(256, (5, 5), padding="SAME")(x)))  # 27 -> 13
        x = nn.relu(nn.Conv(384, (3, 3), padding="SAME")(x))
        x = nn.relu(nn.Conv(384, (3, 3), padding="SAME")(x))
        x = pool(nn.relu(nn.Conv(256, (3, 3), padding="SAME")(x)))  # 13 -> 6
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(4096)(x))
        x = nn.relu(nn.Dense(4096)(x))
        return nn.Dense(self.num_classes)(x)


def _sgd_momentum(lr: float, weight_decay: float) -> optax.GradientTransformation:
    return optax.chain(optax.add_decayed_weights(weight_decay), optax.sgd(lr, momentum=0.9))


def _resnet(blocks: tuple[int, ...], train: bool) -> BottleneckResNet:
    return BottleneckResNet(
        stage_blocks=blocks,
        stage_features=(64, 128, 256, 512),
        num_classes=1000,
        train=train,
        imagenet_stem=True,
    )


MNASNET_B1_STAGES = (
    (3, 24, 3, 3, 2, False),
    (3, 40, 3, 5, 2, False),
    (3, 80, 6, 5, 2, False),
    (2, 96, 6, 3, 1, False),
    (4, 192, 6, 5, 2, False),
    (1, 320, 6, 3, 1, False),
)
"""MnasNet-B1 (Tan et al. 2019, as torchvision's ``mnasnet1_0``): (repeats, channels, expansion, kernel, stride, SE)."""  # noqa: E501


def _alexnet_train_b32(concrete: bool) -> Built:
    return _classifier_train(
        AlexNet(), _sgd_momentum(0.01, 5e-4), (227, 227, 3), 32, concrete, smoothing=0.0
    )


def _resnet50_infer(concrete: bool) -> Built:
    return _inference(_resnet((3, 4, 6, 3), False), (128, 224, 224, 3), concrete)


def _resnet50_train(concrete: bool) -> Built:
    tx = _sgd_momentum(0.1, 1e-4)
    return _batchnorm_train(
        _resnet((3, 4, 6, 3), True), tx, (224, 224, 3), 32, concrete, smoothing=0.1
    )


def _resnet152_train(concrete: bool) -> Built:
    tx = _sgd_momentum(0.1, 1e-4)
    return _batchnorm_train(
        _resnet((3, 8, 36, 3), True), tx, (224, 224, 3), 16, concrete, smoothing=0.1
    )


def _mnasnet_b1_infer(concrete: bool) -> Built:
    model = MnasNet(stages=MNASNET_B1_STAGES, stem=32, sep_out=16, head=1280)
    return _inference(model, (128, 224, 224, 3), concrete)


def _vit_b16_train(concrete: bool) -> Built:
    model = ViT(patch=16, d_model=768, num_heads=12, num_layers=12, mlp=3072, num_classes=1000)
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3, b2=0.999, weight_decay=0.1))
    return _classifier_train(model, tx, (224, 224, 3), 24, concrete, smoothing=0.1)


def _mixer_b16_infer(concrete: bool) -> Built:
    model = MLPMixer(
        patch=16, hidden=768, num_blocks=12, tokens_mlp=384, channels_mlp=3072, num_classes=1000
    )
    return _inference(model, (64, 224, 224, 3), concrete, collections=("params",))


def _unet_train(concrete: bool) -> Built:
    model = UNet(features=(64, 128, 256, 512, 1024), num_classes=2)
    return _segmentation_train(model, optax.sgd(0.01, momentum=0.99), (2, 512, 512, 1), concrete)


def _ddim_sampler(concrete: bool) -> Built:
    return _sampler(DDIMSampler(steps=50, width=128), (16, 128, 128, 3), concrete)


# --------------------------------------------------------------------------- sequence


def _lstm_infer(concrete: bool) -> Built:
    # LSTMClassifier scans over axis 0: [time, batch, features].
    model = LSTMClassifier(hidden=1024, num_layers=2, num_classes=1000)
    return _sequence_infer(model, (100, 512, 512), concrete, batch_axis=1)


def _gru_infer(concrete: bool) -> Built:
    return _sequence_infer(GRUClassifier(hidden=1024, num_classes=1000), (512, 100, 256), concrete)


def _stacked_rnn_infer(concrete: bool) -> Built:
    return _sequence_infer(
        StackedRNN(hidden=1024, num_layers=4, num_classes=1000), (256, 100, 256), concrete
    )


def _bigru_tagger_infer(concrete: bool) -> Built:
    model = BiGRUTagger(vocab=30000, embed=300, hidden=512, num_layers=2, num_tags=17)
    return _tagger_infer(model, 512, 128, concrete)


def _lstm_lm_train(concrete: bool) -> Built:
    # Zaremba, Sutskever and Vinyals (2014), the large model on the Penn Treebank.
    model = LSTMLanguageModel(vocab=10000, embed=1500, hidden=1500, num_layers=2)
    tx = optax.chain(optax.clip_by_global_norm(10.0), optax.sgd(1.0))
    return _next_token_train(model, tx, 20, 35, concrete)


def _nmt_attention_infer(concrete: bool) -> Built:
    model = Seq2SeqNMT(src_vocab=32000, tgt_vocab=32000, embed=1024, hidden=1024, max_out=50)
    return _translate(model, 64, 50, concrete)


def _wavenet_infer(concrete: bool) -> Built:
    model = WaveNet(stacks=3, layers_per_stack=10, residual=64, skip=256, classes=256)
    return _wavenet_program(model, 4, 16000, concrete)


# --------------------------------------------------------------------------- transformers


def _bert_base_train(concrete: bool) -> Built:
    model = BERT(vocab=30522, d_model=768, num_heads=12, num_layers=12, d_ff=3072, max_len=512)
    return _bert_pretrain(model, 32, 128, 1_000_000, concrete, padded=False)


def _gpt2_train(concrete: bool) -> Built:
    model = GPT(vocab=50257, d_model=768, num_heads=12, num_layers=12, d_ff=3072, max_len=1024)
    schedule = optax.warmup_cosine_decay_schedule(0.0, 6e-4, 2000, 600_000)
    tx = optax.chain(
        optax.clip_by_global_norm(1.0), optax.adamw(schedule, b2=0.95, weight_decay=0.1)
    )
    return _next_token_train(model, tx, 2, model.max_len, concrete)


def _transformer_base(dtype: Any, concrete: bool) -> Built:
    """tensor2tensor's ``transformer_base`` (Vaswani et al. 2017): 6+6 layers, d 512, 8 heads, d_ff 2048."""
    model = EncoderDecoder(
        vocab=32768,
        d_model=512,
        num_heads=8,
        enc_layers=6,
        dec_layers=6,
        d_ff=2048,
        max_len=256,
        dtype=dtype,
        f32_accumulate=dtype != jnp.float32,
    )
    return _translation_train(model, 64, 64, concrete)  # 4,096 tokens a side, t2t's batch_size


# --------------------------------------------------------------------------- Llama-style decoders


@dataclass(frozen=True)
class LlamaConfig:
    """A Llama-style decoder: RMSNorm, rotary positions, grouped-query attention, SwiGLU.

    Sizes in elements; ``head_dim = d_model // heads``; weights and activations bfloat16.
    """

    name: str
    vocab: int
    d_model: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    @property
    def num_params(self) -> int:
        d, kv = self.d_model, self.kv_heads * self.head_dim
        per_layer = 2 * d + d * d + 2 * d * kv + d * d + 3 * d * self.ffn
        return 2 * self.vocab * d + d + self.layers * per_layer


LLAMA2_70B = LlamaConfig(
    "Llama 2 70B", vocab=32000, d_model=8192, layers=80, heads=64, kv_heads=8, ffn=28672
)
"""Touvron et al. 2023: 69 billion parameters, 138 GB of bfloat16 weights."""
TINYLLAMA_1B = LlamaConfig(
    "TinyLlama 1.1B", vocab=32000, d_model=2048, layers=22, heads=32, kv_heads=4, ffn=5632
)
"""Zhang et al. 2024: 1.1 billion parameters, 2.2 GB of bfloat16 weights."""


def llama_param_shapes(cfg: LlamaConfig) -> dict[str, Any]:
    """The weights of ``cfg`` as ``ShapeDtypeStruct`` s: embed, one dict per layer, norm, lm_head."""
    d, hd, kv = cfg.d_model, cfg.head_dim, cfg.kv_heads * cfg.head_dim
    s = lambda *shape: jax.ShapeDtypeStruct(shape, BF16)  # noqa: E731
    layer = {
        "attn_norm": s(d),
        "wq": s(d, d),
        "wk": s(d, kv),
        "wv": s(d, kv),
        "wo": s(cfg.heads * hd, d),
        "mlp_norm": s(d),
        "w_gate": s(d, cfg.ffn),
        "w_up": s(d, cfg.ffn),
        "w_down": s(cfg.ffn, d),
    }
    return {
        "embed": s(cfg.vocab, d),
        "layers": [dict(layer) for _ in range(cfg.layers)],
        "norm": s(d),
        "lm_head": s(d, cfg.vocab),
    }


def _llama_params(cfg: LlamaConfig, concrete: bool) -> Any:
    shapes = llama_param_shapes(cfg)
    if not concrete:
        return shapes
    rng = np.random.default_rng(SEED)

    def fill(leaf: jax.ShapeDtypeStruct) -> jax.Array:
        if len(leaf.shape) == 1:
            return jax.device_put(np.ones(leaf.shape, np.float32).astype(leaf.dtype))
        value = rng.standard_normal(leaf.shape, np.float32) / math.sqrt(leaf.shape[0])
        return jax.device_put(value.astype(leaf.dtype))

    return jax.tree_util.tree_map(fill, shapes)


def _mm(x: jax.Array, w: jax.Array) -> jax.Array:
    """``x @ w`` in bfloat16, accumulated in float32 (as on TPUs and GPUs)."""
    return jnp.matmul(x, w, preferred_element_type=jnp.float32).astype(BF16)


def _rms_norm(x: jax.Array, scale: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + 1e-5)
    return (y * scale.astype(jnp.float32)).astype(x.dtype)


def _rope(x: jax.Array, positions: jax.Array) -> jax.Array:
    """Rotary position embedding of ``x`` [batch, seq, heads, head_dim] at ``positions`` [batch, seq]."""
    half = x.shape[-1] // 2
    freqs = 10_000.0 ** (-jnp.arange(half, dtype=jnp.float32) / half)
    angles = positions[..., None, None].astype(jnp.float32) * freqs  # [b, s, 1, half]
    cos, sin = jnp.cos(angles), jnp.sin(angles)
    x1, x2 = x[..., :half].astype(jnp.float32), x[..., half:].astype(jnp.float32)
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1).astype(x.dtype)


def _llama_layer(
    cfg: LlamaConfig,
    w: dict[str, jax.Array],
    x: jax.Array,
    positions: jax.Array,
    k_cache: jax.Array | None,
    v_cache: jax.Array | None,
    cache_at: jax.Array | None,
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """One decoder layer on ``x`` [b, s, d]; with a cache [b, kv_heads, max_len, head_dim], the new
    keys and values are written at ``cache_at`` and attention reads the cache up to ``positions``."""
    b, s, _ = x.shape
    h, kvh, hd = cfg.heads, cfg.kv_heads, cfg.head_dim
    y = _rms_norm(x, w["attn_norm"])
    q = _rope(_mm(y, w["wq"]).reshape(b, s, h, hd), positions)
    k = _rope(_mm(y, w["wk"]).reshape(b, s, kvh, hd), positions).transpose(0, 2, 1, 3)
    v = _mm(y, w["wv"]).reshape(b, s, kvh, hd).transpose(0, 2, 1, 3)
    if k_cache is None:
        keys, values = k, v
        mask = jnp.tril(jnp.ones((s, s), bool))[None, None, None]
    else:
        assert v_cache is not None and cache_at is not None  # a cache comes with all three
        k_cache = jax.lax.dynamic_update_slice(k_cache, k, (0, 0, cache_at, 0))
        v_cache = jax.lax.dynamic_update_slice(v_cache, v, (0, 0, cache_at, 0))
        keys, values = k_cache, v_cache
        mask = (jnp.arange(k_cache.shape[2])[None, :] <= positions[:, :, None])[
            :, None, None
        ]  # [b,1,1,s,t]
    q = q.reshape(b, s, kvh, h // kvh, hd)
    scores = jnp.einsum("bsgrd,bgtd->bgrst", q, keys, preferred_element_type=jnp.float32) * hd**-0.5
    att = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1).astype(BF16)
    out = jnp.einsum("bgrst,bgtd->bsgrd", att, values, preferred_element_type=jnp.float32)
    x = x + _mm(out.astype(BF16).reshape(b, s, h * hd), w["wo"])
    y = _rms_norm(x, w["mlp_norm"])
    x = x + _mm(jax.nn.silu(_mm(y, w["w_gate"])) * _mm(y, w["w_up"]), w["w_down"])
    return x, (keys, values)


def _llama_prefill(cfg: LlamaConfig, batch: int, seq: int, concrete: bool) -> Built:
    """Prefill: the prompt's logits at its last position, and every layer's keys and values."""
    params = _llama_params(cfg, concrete)
    tokens = _ints(np.random.default_rng(SEED), (batch, seq), cfg.vocab, concrete)

    def prefill(params, tokens):
        positions = jnp.broadcast_to(jnp.arange(tokens.shape[1]), tokens.shape)
        x = params["embed"][tokens]
        caches = []
        for w in params["layers"]:
            x, kv = _llama_layer(cfg, w, x, positions, None, None, None)
            caches.append(kv)
        logits = jnp.matmul(
            _rms_norm(x[:, -1], params["norm"]),
            params["lm_head"],
            preferred_element_type=jnp.float32,
        )
        return logits, caches

    return prefill, (params, tokens), {}


def _kv_caches(cfg: LlamaConfig, batch: int, max_len: int, concrete: bool) -> list[Any]:
    shape = (batch, cfg.kv_heads, max_len, cfg.head_dim)
    if concrete:
        return [(jnp.zeros(shape, BF16), jnp.zeros(shape, BF16)) for _ in range(cfg.layers)]
    return [
        (jax.ShapeDtypeStruct(shape, BF16), jax.ShapeDtypeStruct(shape, BF16))
        for _ in range(cfg.layers)
    ]


def _llama_next_tokens(
    cfg: LlamaConfig, params: Any, caches: list[Any], tokens: jax.Array, position: jax.Array
) -> tuple[jax.Array, list[Any]]:
    """One greedy decode step of ``tokens`` [batch] at ``position``: the next tokens (int32), and the
    caches with this position's keys and values written into them."""
    positions = jnp.broadcast_to(position, (tokens.shape[0], 1))
    x = params["embed"][tokens][:, None]
    new = []
    for w, (kc, vc) in zip(params["layers"], caches):
        x, kv = _llama_layer(cfg, w, x, positions, kc, vc, position)
        new.append(kv)
    logits = jnp.matmul(
        _rms_norm(x[:, 0], params["norm"]), params["lm_head"], preferred_element_type=jnp.float32
    )
    return jnp.argmax(logits, axis=-1).astype(jnp.int32), new


def _llama_decode_step(cfg: LlamaConfig, batch: int, max_len: int, concrete: bool) -> Built:
    """One decode step: the next token of each sequence; the caches (donated) updated in place."""
    params = _llama_params(cfg, concrete)
    caches = _kv_caches(cfg, batch, max_len, concrete)
    rng = np.random.default_rng(SEED)
    tokens = _ints(rng, (batch,), cfg.vocab, concrete)
    position = jnp.int32(max_len - 1) if concrete else jax.ShapeDtypeStruct((), jnp.int32)

    def decode(params, caches, tokens, position):
        return _llama_next_tokens(cfg, params, caches, tokens, position)

    return decode, (params, caches, tokens, position), {"donate_argnums": (1,)}


def _llama_generate(
    cfg: LlamaConfig, batch: int, max_len: int, steps: int, concrete: bool
) -> Built:
    """Greedy generation of ``steps`` tokens after a prefilled prompt: a ``fori_loop`` of decode steps
    whose caches are loop-carried and updated in place."""
    params = _llama_params(cfg, concrete)
    caches = _kv_caches(cfg, batch, max_len, concrete)
    rng = np.random.default_rng(SEED)
    first = _ints(rng, (batch,), cfg.vocab, concrete)
    start = jnp.int32(max_len - steps) if concrete else jax.ShapeDtypeStruct((), jnp.int32)

    def generate(params, caches, first, start):
        def body(i, carry):
            tok, caches, out = carry
            tok, new = _llama_next_tokens(cfg, params, caches, tok, start + i)
            return tok, new, out.at[i].set(tok)

        out = jnp.zeros((steps, first.shape[0]), jnp.int32)
        _, caches, out = jax.lax.fori_loop(0, steps, body, (first, caches, out))
        return out, caches

    return generate, (params, caches, first, start), {"donate_argnums": (1,)}


# --------------------------------------------------------------------------- other


# The Criteo Kaggle display-advertising dataset's 26 categorical features: rows per table.
CRITEO_KAGGLE_TABLES = (
    1460,
    583,
    10131227,
    2202608,
    305,
    24,
    12517,
    633,
    3,
    93145,
    5683,
    8351593,
    3194,
    27,
    14992,
    5461306,
    10,
    5652,
    2173,
    4,
    7046547,
    18,
    15,
    286181,
    105,
    142572,
)


def _dlrm_train(concrete: bool) -> Built:
    # The DLRM reference's Criteo Kaggle configuration: sparse features of dimension 16,
    # bottom MLP 13-512-256-64-16, top MLP 512-256-1, mini-batch 128, one index per table.
    model = DLRM(table_sizes=CRITEO_KAGGLE_TABLES, dim=16, bottom=(512, 256, 64), top=(512, 256))
    return _dlrm_program(model, 128, 1, concrete)


def _alphatensor_matmul(concrete: bool) -> Built:
    return _factorized_chain(4096, concrete)


def _gnn_infer(concrete: bool) -> Built:
    model = GraphNetwork(hidden=128, rounds=10, num_graphs=64)
    return _graph_infer(model, 65536, 524288, 128, 16, concrete, contiguous_graphs=False)


# --------------------------------------------------------------------------- registry

_OFFLOAD = "gpu_hbm_host"

_PROGRAMS = [
    ModelProgram(
        "alexnet_train_b32",
        "AlexNet (96-256-384-384-256 convs, FC 4096-4096-1000) training step on 227x227x3 "
        "ImageNet images at batch 32, SGD with momentum 0.9 and weight decay 5e-4",
        _alexnet_train_b32,
        training=True,
    ),
    ModelProgram(
        "resnet50_infer_b128",
        "ResNet-50 (ImageNet stem, 3/4/6/3 bottleneck blocks of 64-512 x4 channels, "
        "inference batchnorm) inference on 224x224x3 at batch 128",
        _resnet50_infer,
    ),
    ModelProgram(
        "resnet50_train_b32",
        "ResNet-50 training step on 224x224x3 at batch 32: batch statistics, label smoothing 0.1, "
        "SGD with momentum 0.9 and weight decay 1e-4",
        _resnet50_train,
        training=True,
    ),
    ModelProgram(
        "resnet152_train_b16",
        "ResNet-152 (3/8/36/3 bottleneck blocks) training step on 224x224x3 at batch 16, "
        "as resnet50_train_b32",
        _resnet152_train,
        training=True,
    ),
    ModelProgram(
        "mnasnet_b1_infer_b128",
        "MnasNet-B1 (width 1.0: stem 32, 16 mobile inverted bottlenecks of 24-320 channels, "
        "head 1280) inference on 224x224x3 at batch 128",
        _mnasnet_b1_infer,
    ),
    ModelProgram(
        "vit_b16_train_b24",
        "ViT-B/16 (12 layers, d 768, 12 heads, MLP 3072, 196 patches and a class token) "
        "training step on 224x224x3 at batch 24, AdamW, global-norm clipping, label smoothing",
        _vit_b16_train,
        training=True,
    ),
    ModelProgram(
        "mixer_b16_infer_b64",
        "MLP-Mixer-B/16 (12 blocks, hidden 768, token MLP 384, channel MLP 3072) inference "
        "on 224x224x3 at batch 64",
        _mixer_b16_infer,
    ),
    ModelProgram(
        "unet_train_b2",
        "U-Net (Ronneberger et al.: 64-128-256-512-1024 channels, double 3x3 convs, 2 classes) "
        "training step on 512x512x1 at batch 2, SGD with momentum 0.99",
        _unet_train,
        training=True,
    ),
    ModelProgram(
        "ddim_sampler_b16",
        "DDIM sampling, 50 deterministic steps (a scan), of a conv U-Net denoiser of 128/256 "
        "channels on 128x128x3 at batch 16",
        _ddim_sampler,
        loops=True,
    ),
    ModelProgram(
        "lstm_infer_b512",
        "2-layer LSTM (hidden 1024, input 512) inference over 100 steps at batch 512 "
        "(a scan), dense head of 1000 classes",
        _lstm_infer,
        loops=True,
    ),
    ModelProgram(
        "gru_infer_b512",
        "GRU (hidden 1024, input 256) inference over 100 steps at batch 512, dense head",
        _gru_infer,
        loops=True,
    ),
    ModelProgram(
        "stacked_rnn_infer_b256",
        "4 stacked tanh RNN layers (hidden 1024, residual, LayerNorm) over 100 steps at batch 256",
        _stacked_rnn_infer,
        loops=True,
    ),
    ModelProgram(
        "bigru_tagger_infer_b512",
        "sequence tagger: embedding 30000x300, 2 bidirectional GRU layers of 512 each way, "
        "17 tags, 128 tokens at batch 512",
        _bigru_tagger_infer,
        loops=True,
    ),
    ModelProgram(
        "lstm_lm_train_ptb_large",
        "Zaremba et al.'s large Penn Treebank LSTM LM (vocab 10000, 2 layers of 1500) training "
        "step over 35 steps at batch 20, SGD with global-norm clipping 10",
        _lstm_lm_train,
        training=True,
        loops=True,
    ),
    ModelProgram(
        "nmt_attention_infer_b64",
        "attention NMT (vocab 32000 each side, embedding 1024, bidirectional GRU encoder of "
        "2x512, Bahdanau-attention GRU decoder of 1024) greedy translation of 50 tokens into "
        "50 at batch 64",
        _nmt_attention_infer,
        loops=True,
    ),
    ModelProgram(
        "wavenet_infer",
        "WaveNet (3 stacks of 10 dilated causal convs, dilations 1..512, residual 64, skip 256, "
        "256 mu-law classes) over one second at 16 kHz at batch 4",
        _wavenet_infer,
    ),
    ModelProgram(
        "bert_base_train_b32",
        "BERT-base pre-training step (12 layers, d 768, 12 heads, d_ff 3072, vocab 30522) on "
        "128 tokens at batch 32 with 20 masked positions: MLM and NSP heads, AdamW",
        _bert_base_train,
        training=True,
    ),
    ModelProgram(
        "gpt2_train_b2",
        "GPT-2 small (12 layers, d 768, 12 heads, vocab 50257, context 1024) training step at "
        "batch 2: next-token cross-entropy, AdamW with clipping",
        _gpt2_train,
        training=True,
    ),
    ModelProgram(
        "transformer_base_train",
        "tensor2tensor transformer_base (6+6 layers, d 512, 8 heads, d_ff 2048, vocab 32768) "
        "training step on 64 x 64 tokens a side, label smoothing 0.1, Adam with the rsqrt "
        "schedule; float32",
        lambda concrete: _transformer_base(jnp.float32, concrete),
        training=True,
    ),
    ModelProgram(
        "transformer_base_train_bf16",
        "transformer_base_train computing in bfloat16 (float32 parameters, LayerNorm, softmax; "
        "matmuls accumulate in float32)",
        lambda concrete: _transformer_base(BF16, concrete),
        training=True,
    ),
    ModelProgram(
        "tinyllama_generate_b8",
        "TinyLlama 1.1B (22 layers, d 2048, 32 heads, 4 KV heads, SwiGLU 5632, bfloat16) greedy "
        "generation of 64 tokens at batch 8 (a fori_loop) with KV caches of 2048 positions "
        "updated in place",
        lambda concrete: _llama_generate(TINYLLAMA_1B, 8, 2048, 64, concrete),
        loops=True,
    ),
    ModelProgram(
        "dlrm_criteo_train_b128",
        "DLRM, the reference Criteo Kaggle configuration (26 tables of 3 to 10.1 million rows, "
        "dimension 16, bottom MLP 13-512-256-64-16, top MLP 512-256-1) training step at batch "
        "128 with Adagrad; parameters donated",
        _dlrm_train,
        training=True,
    ),
    ModelProgram(
        "alphatensor_matmul_4096",
        "AlphaTensor-style chain M0 @ M1 @ M2 @ M3 of 4096x4096 matrices, each product by a "
        "rank-49 factorisation of the 4x4 block product (Strassen squared), and its error",
        _alphatensor_matmul,
    ),
    ModelProgram(
        "gnn_infer",
        "encode-process-decode graph network (65536 nodes, 524288 edges, hidden 128, 10 "
        "message-passing rounds as a scan)",
        _gnn_infer,
        loops=True,
    ),
    ModelProgram(
        "llama2_70b_prefill",
        "Llama 2 70B (80 layers, d 8192, 64 heads, 8 KV heads, SwiGLU 28672, bfloat16: 138 GB "
        "of weights) prefill of a 2048-token prompt at batch 1, on the A100 40GB with host "
        "memory: the weights must stream from the host",
        lambda concrete: _llama_prefill(LLAMA2_70B, 1, 2048, concrete),
        preset=_OFFLOAD,
    ),
    ModelProgram(
        "llama2_70b_decode",
        "Llama 2 70B one decode step at batch 16 with KV caches of 4096 positions (21 GB, "
        "donated, updated in place), on the A100 40GB with host memory",
        lambda concrete: _llama_decode_step(LLAMA2_70B, 16, 4096, concrete),
        preset=_OFFLOAD,
    ),
]

V2_PROGRAMS: dict[str, ModelProgram] = {p.name: p for p in _PROGRAMS}
