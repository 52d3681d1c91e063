"""The networks of MMap-MuZero (paper section 4.3.1, Figure 4), in flax.

* **Representation** ``h``: observation → latent ``[N, latent_size]``. The memory-map
  image ``grid [N, S, A]`` goes through strided 3x3 convolutions, the buffer rows
  ``buffers [N, R, F]`` through a shared per-row layer (an embedding of each buffer)
  then a dense layer, the memory ``profile [N, P]``, the ``supply`` window
  ``[N, W]`` and the ``decision`` + ``globals`` vectors through dense layers; the
  parts are concatenated and an MLP produces the latent.
* **Dynamics** ``g``: (latent, action) → (next latent, reward logits ``[N, support]``).
* **Prediction** ``f``: latent → (policy logits ``[N, 3]``, value logits ``[N, support]``).

Latents are min-max normalized to ``[0, 1]`` per example (MuZero appendix G) so the
dynamics sees inputs on the scale the representation produces. Values and rewards
are categorical over the atoms of :mod:`~mallocgame.solvers.muzero.transforms`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from mallocgame.solvers.muzero.config import MuZeroConfig

__all__ = ["MuZeroNet", "NUM_ACTIONS", "init_params", "initial_inference", "recurrent_inference"]

NUM_ACTIONS = 3

Observation = Mapping[str, jnp.ndarray | np.ndarray]


def _normalize(x: jnp.ndarray) -> jnp.ndarray:
    low = jnp.min(x, axis=-1, keepdims=True)
    high = jnp.max(x, axis=-1, keepdims=True)
    return (x - low) / jnp.maximum(high - low, 1e-5)


class Representation(nn.Module):
    """Observation (a dict of float32 arrays with a leading batch axis) → latent ``[N, L]``."""

    config: MuZeroConfig

    @nn.compact
    def __call__(self, obs: Observation) -> jnp.ndarray:
        cfg = self.config
        half = cfg.width // 2
        grid = obs["grid"][..., None]  # [N, S, A, 1]
        for channels in cfg.conv_channels:
            grid = nn.relu(nn.Conv(channels, (3, 3), strides=(2, 2))(grid))
        grid = grid.reshape(grid.shape[0], -1)
        parts = [
            nn.relu(nn.Dense(half, name="grid_embed")(grid)),
            nn.relu(
                nn.Dense(half, name="buffers_embed")(
                    nn.relu(nn.Dense(32, name="buffer_row")(obs["buffers"])).reshape(
                        grid.shape[0], -1
                    )
                )
            ),
            nn.relu(nn.Dense(32, name="profile_embed")(obs["profile"])),
            nn.relu(nn.Dense(32, name="supply_embed")(obs["supply"])),
            nn.relu(
                nn.Dense(half, name="decision_embed")(
                    jnp.concatenate([obs["decision"], obs["globals"]], axis=-1)
                )
            ),
        ]
        x = jnp.concatenate(parts, axis=-1)
        x = nn.relu(nn.Dense(cfg.width)(x))
        x = nn.relu(nn.Dense(cfg.width)(x))
        return _normalize(nn.Dense(cfg.latent_size)(x))


class Dynamics(nn.Module):
    """(latent ``[N, L]``, action ``[N]`` int) → (next latent ``[N, L]``, reward logits ``[N, S]``)."""

    config: MuZeroConfig

    @nn.compact
    def __call__(self, latent: jnp.ndarray, action: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
        cfg = self.config
        x = jnp.concatenate([latent, jax.nn.one_hot(action, NUM_ACTIONS)], axis=-1)
        x = nn.relu(nn.Dense(cfg.width)(x))
        x = nn.relu(nn.Dense(cfg.width)(x))
        next_latent = _normalize(nn.Dense(cfg.latent_size, name="next")(x))
        reward = nn.Dense(cfg.support_size, name="reward")(nn.relu(nn.Dense(cfg.width // 2)(x)))
        return next_latent, reward


class Prediction(nn.Module):
    """latent ``[N, L]`` → (policy logits ``[N, 3]``, value logits ``[N, S]``)."""

    config: MuZeroConfig

    @nn.compact
    def __call__(self, latent: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
        cfg = self.config
        x = nn.relu(nn.Dense(cfg.width)(latent))
        policy = nn.Dense(NUM_ACTIONS, name="policy")(nn.relu(nn.Dense(cfg.width // 2)(x)))
        value = nn.Dense(cfg.support_size, name="value")(nn.relu(nn.Dense(cfg.width // 2)(x)))
        return policy, value


class MuZeroNet(nn.Module):
    """The three networks under one parameter tree.

    ``initial(obs)`` → (latent, policy logits, value logits);
    ``recurrent(latent, action)`` → (next latent, reward logits, policy logits, value logits).
    """

    config: MuZeroConfig

    def setup(self) -> None:
        self.representation = Representation(self.config)
        self.dynamics = Dynamics(self.config)
        self.prediction = Prediction(self.config)

    def initial(self, obs: Observation) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
        latent = self.representation(obs)
        policy, value = self.prediction(latent)
        return latent, policy, value

    def recurrent(
        self, latent: jnp.ndarray, action: jnp.ndarray
    ) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray, jnp.ndarray]:
        next_latent, reward = self.dynamics(latent, action)
        policy, value = self.prediction(next_latent)
        return next_latent, reward, policy, value

    def __call__(
        self, obs: Observation, action: jnp.ndarray
    ) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray, jnp.ndarray]:
        latent, _, _ = self.initial(obs)
        return self.recurrent(latent, action)


def initial_inference(
    net: MuZeroNet, params: Any, obs: Observation
) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """``net.initial`` under ``params``: (latent, policy logits, value logits)."""
    return cast(
        "tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]",
        net.apply(params, obs, method=MuZeroNet.initial),
    )


def recurrent_inference(
    net: MuZeroNet, params: Any, latent: jnp.ndarray, action: jnp.ndarray
) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """``net.recurrent`` under ``params``: (next latent, reward logits, policy logits, value
    logits)."""
    return cast(
        "tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray, jnp.ndarray]",
        net.apply(params, latent, action, method=MuZeroNet.recurrent),
    )


def init_params(net: MuZeroNet, seed: int, example_obs: Observation) -> dict:
    """Parameters of ``net`` for observations shaped like ``example_obs`` (batch axis first).

    Flax's default initializers (LeCun-normal kernels, truncated at two standard
    deviations; zero biases), drawn with numpy from ``seed``: the shapes come from
    tracing ``net.init`` (no compilation), because compiling the initializers takes
    tens of seconds on a small CPU, longer than the networks themselves; the arrays are
    made in numpy and put on the device as they are (``jnp.zeros`` or a ``jnp.asarray``
    would compile a program for every shape). The policy
    head's bias is ``config.policy_init_bias`` times ``(1, 1/2, 0)`` for (Copy, NoCopy,
    Drop): 0 (the default) is flax's zero bias.
    """
    batch = next(iter(example_obs.values())).shape[0]
    shapes = jax.eval_shape(
        net.init, jax.random.PRNGKey(0), example_obs, jnp.zeros((batch,), jnp.int32)
    )
    rng = np.random.default_rng(seed)
    std_of_truncated = 0.87962566103423978  # std of a unit normal truncated to [-2, 2]

    def draw(path: tuple, leaf: jax.ShapeDtypeStruct) -> jnp.ndarray:
        name = getattr(path[-1], "key", "")
        if name != "kernel":
            return jax.device_put(np.zeros(leaf.shape, leaf.dtype))
        fan_in = int(np.prod(leaf.shape[:-1]))
        values = rng.normal(size=leaf.shape)
        while (bad := np.abs(values) > 2.0).any():
            values[bad] = rng.normal(size=int(bad.sum()))
        scaled = values * (np.sqrt(1.0 / fan_in) / std_of_truncated)
        return jax.device_put(scaled.astype(leaf.dtype))

    params = jax.tree_util.tree_map_with_path(draw, shapes)
    bias = net.config.policy_init_bias
    params["params"]["prediction"]["policy"]["bias"] = jax.device_put(
        np.asarray([bias, bias / 2, 0.0], np.float32)
    )
    return params
