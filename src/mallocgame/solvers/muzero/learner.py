"""The MuZero learner: the unrolled loss and one optimizer step (optax AdamW).

Loss for a :class:`~mallocgame.solvers.muzero.replay.Batch` (``N`` positions, ``K``
unroll steps): the representation at step 0, the dynamics for steps ``1..K``; at each
step the cross-entropy of the predicted policy with the search policy (where the
position is inside the game), of the value with the two-hot n-step target (weight
``value_loss_weight``), and for ``k >= 1`` of the reward with the two-hot reward
target (both where they are known: not past the end of a record cut short). Steps
``k >= 1`` are weighted ``1/K`` and the latent's gradient is halved at every dynamics
step (MuZero appendix G). Weight decay is AdamW's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from mallocgame.solvers.muzero.config import MuZeroConfig
from mallocgame.solvers.muzero.networks import MuZeroNet, initial_inference, recurrent_inference
from mallocgame.solvers.muzero.replay import Batch
from mallocgame.solvers.muzero.transforms import scalar_to_two_hot

__all__ = ["LossInfo", "make_optimizer", "make_train_step", "batch_to_device"]


class LossInfo(NamedTuple):
    """Mean losses of one step (scalars)."""

    total: jnp.ndarray
    policy: jnp.ndarray
    value: jnp.ndarray
    reward: jnp.ndarray


def make_optimizer(config: MuZeroConfig) -> optax.GradientTransformation:
    """Adam with decoupled weight decay, gradients clipped at global norm 5."""
    return optax.chain(
        optax.clip_by_global_norm(5.0),
        optax.adamw(config.learning_rate, weight_decay=config.weight_decay),
    )


def _scale_gradient(x: jnp.ndarray, scale: float) -> jnp.ndarray:
    return x * scale + jax.lax.stop_gradient(x) * (1.0 - scale)


def _cross_entropy(logits: jnp.ndarray, target: jnp.ndarray) -> jnp.ndarray:
    return -jnp.sum(target * jax.nn.log_softmax(logits, axis=-1), axis=-1)


def batch_to_device(batch: Batch) -> dict[str, Any]:
    """The batch as a dict of arrays (the jitted step's input)."""
    return {
        "observations": batch.observations,
        "actions": batch.actions,
        "values": batch.values,
        "rewards": batch.rewards,
        "policies": batch.policies,
        "mask": batch.mask,
        "known": batch.known,
    }


def make_train_step(
    net: MuZeroNet, config: MuZeroConfig, optimizer: optax.GradientTransformation
) -> Callable[[Any, Any, dict[str, Any]], tuple[Any, Any, LossInfo]]:
    """``step(params, opt_state, batch_dict) -> (params, opt_state, LossInfo)``, jitted."""
    size, vmax = config.support_size, config.support_max
    unroll = config.unroll_steps

    def loss_fn(params, batch):
        mask, known = batch["mask"], batch["known"]
        values = scalar_to_two_hot(batch["values"], size, vmax)
        rewards = scalar_to_two_hot(batch["rewards"], size, vmax)
        latent, policy, value = initial_inference(net, params, batch["observations"])
        p_loss = _cross_entropy(policy, batch["policies"][:, 0]) * mask[:, 0]
        v_loss = _cross_entropy(value, values[:, 0]) * known[:, 0]
        r_loss = jnp.zeros_like(v_loss)
        for k in range(1, unroll + 1):
            latent, reward, policy, value = recurrent_inference(
                net, params, latent, batch["actions"][:, k - 1]
            )
            latent = _scale_gradient(latent, 0.5)
            p_loss += _cross_entropy(policy, batch["policies"][:, k]) * mask[:, k] / unroll
            v_loss += _cross_entropy(value, values[:, k]) * known[:, k] / unroll
            r_loss += _cross_entropy(reward, rewards[:, k]) * known[:, k] / unroll
        p, v, r = jnp.mean(p_loss), jnp.mean(v_loss), jnp.mean(r_loss)
        total = p + config.value_loss_weight * v + r
        return total, LossInfo(total, p, v, r)

    def step(params, opt_state, batch):
        grads, info = jax.grad(loss_fn, has_aux=True)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, info

    return jax.jit(step)
