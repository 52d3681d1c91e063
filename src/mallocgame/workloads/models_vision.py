"""Vision model programs: ResNet-50 (bottleneck), MnasNet, U-Net, ViT, MLP-Mixer, a
batchnorm CNN training step and a convolutional VAE training step.

Registered in :mod:`mallocgame.workloads.models` (see there for the conventions).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from mallocgame.workloads import models_common as mc
from mallocgame.workloads.models_layers import _residual_mlp

__all__ = [
    "PROGRAMS",
    "BottleneckResNet",
    "MnasNet",
    "UNet",
    "ViT",
    "MLPMixer",
    "BNConvNet",
    "ConvVAE",
]


# --------------------------------------------------------------------------- ResNet-50


class _Bottleneck(nn.Module):
    """1x1 reduce, 3x3, 1x1 expand (x4), inference batchnorm, projection shortcut."""

    features: int
    strides: int = 1
    train: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        bn = lambda: nn.BatchNorm(use_running_average=not self.train, momentum=0.9)  # noqa: E731
        s = (self.strides, self.strides)
        y = nn.relu(bn()(nn.Conv(self.features, (1, 1), use_bias=False)(x)))
        y = nn.Conv(self.features, (3, 3), strides=s, padding="SAME", use_bias=False)(y)
        y = nn.relu(bn()(y))
        y = bn()(nn.Conv(4 * self.features, (1, 1), use_bias=False)(y))
        if x.shape != y.shape:
            x = bn()(nn.Conv(4 * self.features, (1, 1), strides=s, use_bias=False)(x))
        return nn.relu(x + y)


# Repeated blocks are nested jits (flax's lifted ``nn.jit``): traced once per distinct
# configuration instead of once per block; XLA inlines the calls, so the compiled
# program is unchanged while lowering is faster.
_JitBottleneck = nn.jit(_Bottleneck)


class BottleneckResNet(nn.Module):
    """ResNet-50's layout (3, 4, 6, 3 bottleneck blocks) at reduced width.

    ``train``: batchnorm normalises with batch statistics and updates its running ones.
    """

    stage_blocks: tuple[int, ...] = (3, 4, 6, 3)
    stage_features: tuple[int, ...] = (16, 32, 64, 128)
    num_classes: int = 100
    train: bool = False
    imagenet_stem: bool = False  # ImageNet's 7x7 stride-2 conv and 3x3 stride-2 max-pool, not 3x3

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        if self.imagenet_stem:
            x = nn.Conv(
                self.stage_features[0], (7, 7), strides=(2, 2), padding="SAME", use_bias=False
            )(x)
        else:
            x = nn.Conv(self.stage_features[0], (3, 3), padding="SAME", use_bias=False)(x)
        x = nn.relu(nn.BatchNorm(use_running_average=not self.train, momentum=0.9)(x))
        if self.imagenet_stem:
            x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
        for i, (n, f) in enumerate(zip(self.stage_blocks, self.stage_features)):
            for j in range(n):
                x = _JitBottleneck(f, strides=2 if (i > 0 and j == 0) else 1, train=self.train)(x)
        return nn.Dense(self.num_classes)(jnp.mean(x, axis=(1, 2)))


# --------------------------------------------------------------------------- MnasNet


class _MBConv(nn.Module):
    """Mobile inverted bottleneck: 1x1 expand, depthwise kxk, optional squeeze-excite, 1x1 project."""

    features: int
    expand: int
    kernel: int
    strides: int = 1
    se: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        bn = lambda: nn.BatchNorm(use_running_average=True)  # noqa: E731
        c = x.shape[-1]
        hidden = c * self.expand
        y = x
        if self.expand != 1:
            y = nn.relu(bn()(nn.Conv(hidden, (1, 1), use_bias=False)(y)))
        k, s = (self.kernel, self.kernel), (self.strides, self.strides)
        y = nn.Conv(
            hidden, k, strides=s, padding="SAME", feature_group_count=hidden, use_bias=False
        )(y)
        y = nn.relu(bn()(y))
        if self.se:
            w = jnp.mean(y, axis=(1, 2), keepdims=True)
            w = nn.relu(nn.Conv(max(8, hidden // 4), (1, 1))(w))
            y = y * nn.hard_sigmoid(nn.Conv(hidden, (1, 1))(w))
        y = bn()(nn.Conv(self.features, (1, 1), use_bias=False)(y))
        if self.strides == 1 and c == self.features:
            y = y + x
        return y


class MnasNet(nn.Module):
    """MnasNet-A1's stages (expansion, kernel, stride, squeeze-excite) at width 0.5."""

    # (repeats, out channels, expansion, kernel, stride, squeeze-excite)
    stages: tuple[tuple[int, int, int, int, int, bool], ...] = (
        (2, 12, 6, 3, 2, False),
        (3, 20, 3, 5, 2, True),
        (4, 40, 6, 3, 2, False),
        (2, 56, 6, 3, 1, True),
        (3, 80, 6, 5, 2, True),
        (1, 160, 6, 3, 1, False),
    )
    num_classes: int = 1000
    stem: int = 16  # channels of the stem conv and the separable conv
    sep_out: int = 8  # channels out of the separable conv
    head: int = 640  # channels of the last 1x1 conv

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        bn = lambda: nn.BatchNorm(use_running_average=True)  # noqa: E731
        x = nn.relu(
            bn()(nn.Conv(self.stem, (3, 3), strides=(2, 2), padding="SAME", use_bias=False)(x))
        )
        x = nn.Conv(
            self.stem, (3, 3), padding="SAME", feature_group_count=self.stem, use_bias=False
        )(x)  # sep conv
        x = bn()(nn.Conv(self.sep_out, (1, 1), use_bias=False)(nn.relu(bn()(x))))
        for repeats, features, expand, kernel, stride, se in self.stages:
            for r in range(repeats):
                x = _MBConv(features, expand, kernel, stride if r == 0 else 1, se)(x)
        x = nn.relu(bn()(nn.Conv(self.head, (1, 1), use_bias=False)(x)))
        return nn.Dense(self.num_classes)(jnp.mean(x, axis=(1, 2)))


# --------------------------------------------------------------------------- U-Net


class _DoubleConv(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for _ in range(2):
            x = nn.Conv(self.features, (3, 3), padding="SAME", use_bias=False)(x)
            x = nn.relu(nn.GroupNorm(num_groups=8)(x))
        return x


class UNet(nn.Module):
    """U-Net: double 3x3 conv blocks, max-pool down, transposed-conv up, skip concatenation."""

    features: tuple[int, ...] = (16, 32, 64, 128)
    num_classes: int = 4

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        skips = []
        for f in self.features[:-1]:
            x = _DoubleConv(f)(x)
            skips.append(x)
            x = nn.max_pool(x, (2, 2), strides=(2, 2))
        x = _DoubleConv(self.features[-1])(x)
        for f, skip in zip(reversed(self.features[:-1]), reversed(skips)):
            x = nn.ConvTranspose(f, (2, 2), strides=(2, 2))(x)
            x = _DoubleConv(f)(jnp.concatenate([skip, x], axis=-1))
        return nn.Conv(self.num_classes, (1, 1))(x)


# --------------------------------------------------------------------------- ViT, MLP-Mixer


def _patch_embedding(images: jax.Array, patch: int, features: int) -> jax.Array:
    """Images ``[b, h, w, c]`` -> patch tokens ``[b, (h // patch) * (w // patch), features]``.

    Each non-overlapping ``patch`` x ``patch`` patch is projected by one strided convolution, a
    submodule of (and auto-named in) the compact module that calls this.
    """
    x = nn.Conv(features, (patch, patch), strides=(patch, patch), padding="VALID")(images)
    return x.reshape(x.shape[0], -1, features)


class _EncoderBlock(nn.Module):
    """Pre-LN Transformer encoder block (bidirectional self-attention, GELU MLP)."""

    num_heads: int
    mlp: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        b, t, d = x.shape
        h = self.num_heads
        y = nn.LayerNorm()(x)
        q, k, v = (
            nn.Dense(d, name=n)(y).reshape(b, t, h, d // h) for n in ("query", "key", "value")
        )
        att = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) * (d // h) ** -0.5, axis=-1)
        y = jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, t, d)
        x = x + nn.Dense(d, name="out")(y)
        return _residual_mlp(x, self.mlp)


_JitEncoderBlock = nn.jit(_EncoderBlock)


class ViT(nn.Module):
    """Vision Transformer: patch embedding, class token, learned positions, encoder blocks."""

    patch: int = 4
    d_model: int = 128
    num_heads: int = 4
    num_layers: int = 6
    mlp: int = 256
    num_classes: int = 10

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = _patch_embedding(x, self.patch, self.d_model)
        b, n, d = x.shape
        cls = self.param("cls", nn.initializers.zeros, (1, 1, d))
        x = jnp.concatenate([jnp.broadcast_to(cls, (b, 1, d)), x], axis=1)
        x = x + self.param("pos", nn.initializers.normal(0.02), (1, n + 1, d))
        for _ in range(self.num_layers):
            x = _JitEncoderBlock(self.num_heads, self.mlp)(x)
        return nn.Dense(self.num_classes)(nn.LayerNorm()(x)[:, 0])


class _MixerBlock(nn.Module):
    tokens_mlp: int
    channels_mlp: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        y = jnp.swapaxes(nn.LayerNorm()(x), 1, 2)  # mix across patches
        y = nn.Dense(x.shape[1])(nn.gelu(nn.Dense(self.tokens_mlp)(y)))
        x = x + jnp.swapaxes(y, 1, 2)
        return _residual_mlp(x, self.channels_mlp)  # mix across channels


class MLPMixer(nn.Module):
    """MLP-Mixer: patch embedding, blocks of token- and channel-mixing MLPs, mean-pooled head."""

    patch: int = 4
    hidden: int = 128
    num_blocks: int = 5
    tokens_mlp: int = 64
    channels_mlp: int = 512
    num_classes: int = 10

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = _patch_embedding(x, self.patch, self.hidden)
        for _ in range(self.num_blocks):
            x = _MixerBlock(self.tokens_mlp, self.channels_mlp)(x)
        return nn.Dense(self.num_classes)(jnp.mean(nn.LayerNorm()(x), axis=1))


# --------------------------------------------------------------------------- BN CNN, VAE


class BNConvNet(nn.Module):
    """VGG-style CNN: pairs of conv + batchnorm (training mode) + relu, max-pool after each pair."""

    features: tuple[int, ...] = (32, 64, 128)
    num_classes: int = 10

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for f in self.features:
            for _ in range(2):
                x = nn.Conv(f, (3, 3), padding="SAME", use_bias=False)(x)
                x = nn.relu(nn.BatchNorm(use_running_average=False, momentum=0.9)(x))
            x = nn.max_pool(x, (2, 2), strides=(2, 2))
        x = nn.relu(nn.Dense(256)(x.reshape(x.shape[0], -1)))
        return nn.Dense(self.num_classes)(x)


class ConvVAE(nn.Module):
    """Convolutional VAE on 28x28x1 images with a 16-dimensional Gaussian latent."""

    latent: int = 16

    @nn.compact
    def __call__(self, x: jax.Array, eps: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        h = nn.relu(nn.Conv(32, (3, 3), strides=(2, 2), padding="SAME")(x))  # 14
        h = nn.relu(nn.Conv(64, (3, 3), strides=(2, 2), padding="SAME")(h))  # 7
        h = nn.relu(nn.Dense(256)(h.reshape(h.shape[0], -1)))
        mu, logvar = nn.Dense(self.latent)(h), nn.Dense(self.latent)(h)
        z = mu + jnp.exp(0.5 * logvar) * eps  # reparameterisation
        h = nn.relu(nn.Dense(7 * 7 * 64)(z)).reshape(-1, 7, 7, 64)
        h = nn.relu(nn.ConvTranspose(32, (3, 3), strides=(2, 2), padding="SAME")(h))  # 14
        logits = nn.ConvTranspose(1, (3, 3), strides=(2, 2), padding="SAME")(h)  # 28
        return logits, mu, logvar


# --------------------------------------------------------------------------- programs


def _inference(
    model: nn.Module,
    image_shape: tuple[int, ...],
    concrete: bool,
    collections: tuple[str, ...] = ("params", "batch_stats"),
) -> mc.Built:
    """Softmax inference on float32 images of ``image_shape`` (batch first):
    ``(variables, images) -> probabilities``, ``variables`` the model's ``collections``."""
    rng = np.random.default_rng(mc.SEED)
    x0 = jax.ShapeDtypeStruct((1, *image_shape[1:]), jnp.float32)
    variables = mc._model_variables(model, (x0,), concrete, rng, collections)
    images = mc._floats(rng, image_shape, concrete)

    def infer(variables, images):
        return jax.nn.softmax(mc._forward(model, variables, images), axis=-1)

    return infer, (variables, images), {}


def _label_loss(
    logits: jax.Array, labels: jax.Array, num_classes: int, smoothing: float | None
) -> jax.Array:
    """Mean softmax cross-entropy against integer ``labels``; with a ``smoothing`` (0.0 included),
    against their one-hot vectors over ``num_classes`` smoothed by it (``optax.smooth_labels``)."""
    if smoothing is None:
        return mc._xent(logits, labels)
    targets = optax.smooth_labels(jax.nn.one_hot(labels, num_classes), smoothing)
    return optax.softmax_cross_entropy(logits, targets).mean()


def _classifier_train(
    model: nn.Module,
    tx: optax.GradientTransformation,
    image: tuple[int, ...],
    batch: int,
    concrete: bool,
    smoothing: float | None = None,
) -> mc.Built:
    """Training step of a classifier without batchnorm on ``batch`` images of shape ``image``:
    ``(params, opt_state, images, labels) -> (params, opt_state, loss)``, the loss :func:`_label_loss`."""
    rng = np.random.default_rng(mc.SEED)
    images = mc._floats(rng, (batch, *image), concrete)
    labels = mc._ints(rng, (batch,), model.num_classes, concrete)

    def loss_fn(params, images, labels):
        return _label_loss(
            mc._forward(model, {"params": params}, images), labels, model.num_classes, smoothing
        )

    x0 = jax.ShapeDtypeStruct((1, *image), jnp.float32)
    return mc._training_program(model, tx, loss_fn, (x0,), (images, labels), concrete, rng)


def _batchnorm_train(
    model: nn.Module,
    tx: optax.GradientTransformation,
    image: tuple[int, ...],
    batch: int,
    concrete: bool,
    smoothing: float | None = None,
) -> mc.Built:
    """Training step of a batchnorm classifier on ``batch`` images of shape ``image``: ``(params,
    batch_stats, opt_state, images, labels) -> (params, batch_stats, opt_state, loss)``, the
    loss :func:`_label_loss`, the batch statistics those of the step."""
    rng = np.random.default_rng(mc.SEED)
    x0 = jax.ShapeDtypeStruct((1, *image), jnp.float32)
    variables = mc._model_variables(model, (x0,), concrete, rng, ("params", "batch_stats"))
    params, batch_stats = variables["params"], variables["batch_stats"]
    opt_state = mc._opt_state(tx, params, concrete)
    images = mc._floats(rng, (batch, *image), concrete)
    labels = mc._ints(rng, (batch,), model.num_classes, concrete)

    def train_step(params, batch_stats, opt_state, images, labels):
        def loss_fn(p):
            logits, new = model.apply(
                {"params": p, "batch_stats": batch_stats}, images, mutable=["batch_stats"]
            )
            return _label_loss(logits, labels, model.num_classes, smoothing), new["batch_stats"]

        (loss, batch_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), batch_stats, opt_state, loss

    return train_step, (params, batch_stats, opt_state, images, labels), {}


def _segmentation_train(
    model: UNet, tx: optax.GradientTransformation, image_shape: tuple[int, ...], concrete: bool
) -> mc.Built:
    """Training step of a segmentation model on float32 images of ``image_shape`` (batch first):
    per-pixel cross-entropy against a class mask of ``image_shape[:-1]``."""
    rng = np.random.default_rng(mc.SEED)
    images = mc._floats(rng, image_shape, concrete)
    masks = mc._ints(rng, image_shape[:-1], model.num_classes, concrete)

    def loss_fn(params, images, masks):
        return mc._xent(mc._forward(model, {"params": params}, images), masks)

    x0 = jax.ShapeDtypeStruct((1, *image_shape[1:]), jnp.float32)
    return mc._training_program(model, tx, loss_fn, (x0,), (images, masks), concrete, rng)


def _resnet50_infer(concrete: bool) -> mc.Built:
    return _inference(BottleneckResNet(), (8, 32, 32, 3), concrete)


def _mnasnet_infer(concrete: bool) -> mc.Built:
    return _inference(MnasNet(), (4, 96, 96, 3), concrete)


def _mlp_mixer_infer(concrete: bool) -> mc.Built:
    return _inference(MLPMixer(), (16, 32, 32, 3), concrete)


def _unet_train(concrete: bool) -> mc.Built:
    return _segmentation_train(UNet(), optax.adam(1e-3), (4, 64, 64, 3), concrete)


def _vit_train(concrete: bool) -> mc.Built:
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3, weight_decay=0.05))
    return _classifier_train(ViT(), tx, (32, 32, 3), 16, concrete, smoothing=0.1)


def _cnn_bn_train(concrete: bool) -> mc.Built:
    tx = optax.chain(optax.add_decayed_weights(5e-4), optax.sgd(0.1, momentum=0.9, nesterov=True))
    return _batchnorm_train(BNConvNet(), tx, (32, 32, 3), 32, concrete)


def _resnet50_train(concrete: bool) -> mc.Built:
    schedule = optax.cosine_decay_schedule(0.1, 10_000)
    tx = optax.chain(optax.add_decayed_weights(1e-4), optax.sgd(schedule, momentum=0.9))
    return _batchnorm_train(BottleneckResNet(train=True), tx, (32, 32, 3), 16, concrete)


def _vae_train(concrete: bool) -> mc.Built:
    model = ConvVAE()
    tx = optax.adam(1e-3)
    batch = 32
    rng = np.random.default_rng(mc.SEED)
    x0 = jax.ShapeDtypeStruct((1, 28, 28, 1), jnp.float32)
    e0 = jax.ShapeDtypeStruct((1, model.latent), jnp.float32)
    params = mc._model_params(model, (x0, e0), concrete, rng)
    opt_state = mc._opt_state(tx, params, concrete)
    images = mc._uniform(rng, (batch, 28, 28, 1), concrete)
    key = mc._rng_key(concrete)

    def train_step(params, opt_state, images, key):
        eps = jax.random.normal(key, (images.shape[0], model.latent))

        def loss_fn(p):
            logits, mu, logvar = mc._forward(model, {"params": p}, images, eps)
            recon = optax.sigmoid_binary_cross_entropy(logits, images).sum(axis=(1, 2, 3))
            kl = -0.5 * jnp.sum(1 + logvar - mu**2 - jnp.exp(logvar), axis=-1)
            return jnp.mean(recon + kl)

        return mc._gradient_step(tx, loss_fn, params, opt_state)

    return train_step, (params, opt_state, images, key), {}


PROGRAMS = [
    mc.ModelProgram(
        "resnet50_infer",
        "ResNet-50 layout (3x3 stem, 3/4/6/3 bottleneck blocks of 1x1-3x3-1x1 convs, "
        "widths 16/32/64/128 expanded x4, inference batchnorm, projection shortcuts; "
        "global average pool, dense to 100 classes) inference at batch 8 on 32x32x3 "
        "images, softmax output",
        _resnet50_infer,
    ),
    mc.ModelProgram(
        "resnet50_train",
        "ResNet-50 layout as resnet50_infer (3/4/6/3 bottleneck blocks, widths "
        "16/32/64/128 x4, 100 classes) training step at batch 16 on 32x32x3 "
        "images: batchnorm with batch statistics (running statistics updated and "
        "returned), cross-entropy, weight decay, SGD with momentum and a cosine "
        "schedule",
        _resnet50_train,
        training=True,
    ),
    mc.ModelProgram(
        "mnasnet_infer",
        "MnasNet-A1 at width 0.5 (stride-2 stem, separable conv, 15 mobile inverted "
        "bottlenecks with 3x3/5x5 depthwise convs, expansion 3/6, squeeze-excite in "
        "three stages, inference batchnorm; 1x1 head conv, dense to 1000 classes) "
        "inference at batch 4 on 96x96x3 images, softmax output",
        _mnasnet_infer,
    ),
    mc.ModelProgram(
        "mlp_mixer_infer",
        "MLP-Mixer (4x4 patches of 32x32x3 images = 64 tokens, hidden 128, 5 blocks "
        "of token-mixing MLP 64 and channel-mixing MLP 512 with LayerNorm and GELU) "
        "inference at batch 16, softmax over 10 classes",
        _mlp_mixer_infer,
    ),
    mc.ModelProgram(
        "unet_train",
        "U-Net (3 levels of double 3x3 conv + GroupNorm + relu, 16/32/64 channels, "
        "128 at the bottom; max-pool down, 2x2 transposed conv up, skip "
        "concatenation) segmentation training step at batch 4 on 64x64x3 images, "
        "per-pixel 4-class cross-entropy, Adam",
        _unet_train,
        training=True,
    ),
    mc.ModelProgram(
        "vit_train",
        "Vision Transformer (4x4 patches of 32x32x3 images, class token, learned "
        "positions, 6 pre-LN encoder blocks of d 128, 4 heads, MLP 256) training step "
        "at batch 16: label-smoothed cross-entropy, global-norm clipping, AdamW",
        _vit_train,
        training=True,
    ),
    mc.ModelProgram(
        "cnn_bn_train",
        "VGG-style CNN (3 stages of 2x [3x3 conv + batchnorm in training mode + "
        "relu] with 32/64/128 channels and max-pools, dense 256, 10 classes) "
        "training step at batch 32 on 32x32x3 images: batch statistics updated, "
        "weight decay, Nesterov SGD",
        _cnn_bn_train,
        training=True,
    ),
    mc.ModelProgram(
        "vae_train",
        "convolutional VAE (two stride-2 convs, dense 256, 16-d Gaussian latent "
        "drawn in-program from a PRNG key argument, dense + two transposed convs "
        "back to 28x28x1; the threefry noise generation is a while loop of 5 "
        "rounds) training step at batch 32: Bernoulli reconstruction + KL loss, Adam",
        _vae_train,
        training=True,
        loops=True,
    ),
]
