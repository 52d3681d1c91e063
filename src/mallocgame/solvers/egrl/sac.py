"""EGRL's policy-gradient learner: discrete soft actor-critic on a one-step MDP.

The MDP (EGRL section 3, MARL section 4.1): the state ``s`` is the program's graph,
the action the whole proposal ``a = (a_1, ..., a_U)`` (one of Copy, NoCopy, Drop per
decision unit), the reward its fitness ``r``; the episode ends there. So there is no
bootstrapped target, no discount and no target network: the twin critics regress
``r`` directly, and MARL's target-policy smoothing noise on ``a`` (its eq. 3, for
continuous actions) has no discrete counterpart and is left out.

* **Critics** (twin, separate networks, :class:`~.networks.Critic`, their parameters
  stacked and run with one ``vmap``): per unit
  ``Q_k,i(s, a_i)``, trained on replay batches by
  ``L_Q = mean over batch and units of Σ_k (Q_k,i(s, a_i) - y)²`` with ``y`` the
  fitness standardized by the replay's mean and standard deviation.
* **Actor** (:class:`~.networks.Actor`): a factorized policy ``π_i(· | s)`` per unit;
  ``L_π = mean_i Σ_a π_i(a) (α log π_i(a) - min_k Q_k,i(s, a))`` (discrete SAC,
  Christodoulou 2019: the expectation over the unit's three actions is exact). The
  state is the same in every transition, so ``L_π`` needs no batch; it uses the
  critics before this step's update.
* **Entropy temperature** ``α``: fixed (``alpha``: every update uses exactly that
  value, its float32, whatever its size; 0 leaves the entropy term out), or tuned
  (``alpha`` none) by ``L_α = α (H̄ - H_target)`` on ``log α`` (kept in
  :data:`LOG_ALPHA_RANGE`, which bounds a tuned ``α`` alone), ``H̄`` the actor's mean
  entropy per unit, ``H_target = target_entropy · log 3``.

One Adam optimizer per part. :func:`learner_functions` builds the jitted functions
once per network shape (:class:`NetShape`); the learning rate, ``α``, whether it is
tuned and the entropy target are values in the :class:`LearnerState`, not constants of
the compiled code, and the padded graph is an argument, so the functions compile once
per graph bucket and batch size and are shared by every program and setting in a
process.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from mallocgame.solvers.checkpoint import device_arrays
from mallocgame.solvers.egrl.networks import Actor, Critic, init_params

__all__ = [
    "NetShape",
    "LearnerState",
    "LearnerFunctions",
    "learner_functions",
    "init_learner",
    "init_actor_params",
    "learner_alpha",
    "LEARNER_METRICS",
]

INITIAL_ALPHA = 0.05
"""Initial entropy temperature when it is tuned (in units of the standardized fitness)."""

ALPHA_LR_FACTOR = 1.0
"""``log α``'s Adam step size is this times the learning rate."""

LOG_ALPHA_RANGE = (math.log(1e-4), 0.0)
"""Bounds of a tuned ``log α``. The fitness is standardized, so per-unit Q gaps are at
most a few units; past ``α = 1`` entropy would swamp them. Without the bound a tuned
``α`` keeps growing while a collapsed actor's entropy (its gradient vanishing at a
near-deterministic softmax) stays under the target, then flattens the actor at once.
A fixed ``α`` is not bounded by it."""

LEARNER_METRICS = ("critic_loss", "actor_loss", "entropy", "alpha")
"""The metrics of an update (``α`` the one it used)."""


@dataclass(frozen=True)
class NetShape:
    """What the compiled functions depend on besides array shapes: the networks."""

    hidden: int
    layers: int
    pool_levels: int
    pool_ratio: float


class LearnerState(NamedTuple):
    """Parameters, optimizer states and settings of the learner (a pytree).

    The ``α`` an update uses is :func:`learner_alpha`: ``exp(log_alpha)`` when tuned,
    ``fixed_alpha`` itself when fixed (no ``log``/``exp`` round trip, no bound; 0 is
    exactly no entropy term).
    """

    actor: Any
    critics: Any  # the twin critics' parameters, stacked: every leaf has a leading axis of 2
    log_alpha: jnp.ndarray  # scalar: the tuned log α (when fixed: unused, never updated)
    actor_opt: Any  # the Adam states carry the learning rate (optax.inject_hyperparams)
    critic_opt: Any
    alpha_opt: Any
    tune_alpha: jnp.ndarray  # scalar: 1.0 tuned, 0.0 fixed
    target_entropy: jnp.ndarray  # scalar, nats per unit
    fixed_alpha: jnp.ndarray  # scalar: α when fixed (tune_alpha 0); 0.0 and unused when tuned


def learner_alpha(state: LearnerState) -> jnp.ndarray:
    """The entropy temperature ``α`` the next update of ``state`` uses (a scalar)."""
    return jnp.where(state.tune_alpha > 0, jnp.exp(state.log_alpha), state.fixed_alpha)


@dataclass(frozen=True)
class LearnerFunctions:
    """The jitted functions of one :class:`NetShape`.

    ``logits(actor_params, graph)`` → ``[U', 3]``; ``flat_logits(theta, graph)`` the
    same from a flat parameter vector; ``update(state, graph, actions [batch, U'],
    targets [batch])`` → ``(state, metrics)``; ``unravel(theta)`` → actor params;
    ``ravel(params)`` → flat numpy float32.
    """

    actor: Actor
    critic: Critic
    logits: Callable[..., jnp.ndarray]
    flat_logits: Callable[..., jnp.ndarray]
    update: Callable[..., tuple[LearnerState, dict[str, jnp.ndarray]]]
    unravel: Callable[[Any], Any]
    optimizer: optax.GradientTransformation  # Adam, its learning rate a value of its state
    num_params: int  # the actor's parameter count: the length of a flat ``theta``

    def ravel(self, params: Any) -> np.ndarray:
        return np.asarray(ravel_pytree(params)[0], dtype=np.float32)


def _apply(module: nn.Module, params: Any, graph: Any) -> jnp.ndarray:
    """``module.apply(params, graph)``: its output alone, as no collection is mutable (flax
    types ``apply`` for every ``mutable``, with the updated state in a tuple)."""
    return cast(jnp.ndarray, module.apply(params, graph))


@functools.lru_cache(maxsize=8)
def learner_functions(shape: NetShape) -> LearnerFunctions:
    """The jitted actor, critics and SAC update of ``shape`` (built once per process)."""
    actor = Actor(
        shape.hidden, shape.layers, shape.pool_levels, shape.pool_ratio
    )  # its bias: init_actor_params
    critic = Critic(shape.hidden, shape.layers, shape.pool_levels, shape.pool_ratio)
    optimizer = optax.inject_hyperparams(optax.adam)(learning_rate=1e-3)
    flat, unravel = ravel_pytree(init_params(actor, np.random.default_rng(0)))

    def logits(params: Any, graph: Any) -> jnp.ndarray:
        return _apply(actor, params, graph)

    def flat_logits(theta: jnp.ndarray, graph: Any) -> jnp.ndarray:
        return _apply(actor, unravel(theta), graph)

    def update(
        state: LearnerState, graph: Any, actions: jnp.ndarray, targets: jnp.ndarray
    ) -> tuple[LearnerState, dict[str, jnp.ndarray]]:
        units = graph["units"]
        num_units = jnp.maximum(units.sum(), 1.0)
        cols = jnp.arange(units.shape[0])[None, :]

        def critic_loss(critics: Any) -> tuple[jnp.ndarray, tuple[jnp.ndarray, jnp.ndarray]]:
            q = jnp.stack(
                [
                    _apply(critic, jax.tree_util.tree_map(lambda a, i=i: a[i], critics), graph)
                    for i in range(2)
                ]
            )
            err = (q[:, cols, actions] - targets[None, :, None]) ** 2  # [2, batch, U']
            loss = (err * units).sum() / (actions.shape[0] * num_units)
            return loss, (q[0], q[1])

        (q_loss, (q1, q2)), q_grads = jax.value_and_grad(critic_loss, has_aux=True)(state.critics)
        q_min = jax.lax.stop_gradient(jnp.minimum(q1, q2))
        alpha = learner_alpha(state)

        def actor_loss(params: Any) -> tuple[jnp.ndarray, jnp.ndarray]:
            logp = jax.nn.log_softmax(_apply(actor, params, graph))
            p = jnp.exp(logp)
            per_unit = (p * (alpha * logp - q_min)).sum(-1)
            entropy = -(p * logp).sum(-1)
            return (per_unit * units).sum() / num_units, (entropy * units).sum() / num_units

        (pi_loss, entropy), pi_grads = jax.value_and_grad(actor_loss, has_aux=True)(state.actor)
        updates, critic_opt = optimizer.update(q_grads, state.critic_opt, state.critics)
        critics = optax.apply_updates(state.critics, updates)
        updates, actor_opt = optimizer.update(pi_grads, state.actor_opt, state.actor)
        actor_params = optax.apply_updates(state.actor, updates)
        # d/d log α of α (H̄ - H_target); zero when α is fixed (Adam then moves nothing).
        a_grad = state.tune_alpha * alpha * jax.lax.stop_gradient(entropy - state.target_entropy)
        updates, alpha_opt = optimizer.update(a_grad, state.alpha_opt, state.log_alpha)
        moved = optax.apply_updates(state.log_alpha, updates)
        # the bound is a tuned α's: a fixed one's log α is unused and stays as it was
        log_alpha = jnp.where(
            state.tune_alpha > 0, jnp.clip(moved, *LOG_ALPHA_RANGE), state.log_alpha
        )
        metrics = dict(zip(LEARNER_METRICS, (q_loss, pi_loss, entropy, alpha), strict=True))
        new = LearnerState(
            actor_params,
            critics,
            log_alpha,
            actor_opt,
            critic_opt,
            alpha_opt,
            state.tune_alpha,
            state.target_entropy,
            state.fixed_alpha,
        )
        return new, metrics

    return LearnerFunctions(
        actor=actor,
        critic=critic,
        logits=jax.jit(logits),
        flat_logits=jax.jit(flat_logits),
        update=jax.jit(update),
        unravel=unravel,
        optimizer=optimizer,
        num_params=int(flat.size),
    )


def init_actor_params(fns: LearnerFunctions, rng: np.random.Generator, prior_bias: float) -> Any:
    """Fresh actor parameters drawn from ``rng``, the output bias ``prior_bias · (1, 1/2, 0)``."""
    return init_params(fns.actor, rng, prior_bias)


def init_learner(
    fns: LearnerFunctions,
    rng: np.random.Generator,
    *,
    prior_bias: float,
    learning_rate: float,
    alpha: float | None,
    target_entropy: float,
) -> LearnerState:
    """A fresh learner: actor and twin critics drawn from ``rng``; ``alpha`` fixed (every
    update uses exactly its float32, 0 meaning no entropy term), or ``None`` to tune it
    from :data:`INITIAL_ALPHA` toward ``target_entropy · log 3``."""
    actor = init_actor_params(fns, rng, prior_bias)
    twins = (init_params(fns.critic, rng), init_params(fns.critic, rng))
    critics = jax.tree_util.tree_map(lambda a, b: np.stack([a, b]), *twins)
    start = alpha if alpha is not None else INITIAL_ALPHA
    log_alpha = jnp.asarray(math.log(max(start, 1e-12)), jnp.float32)
    actor, critics = device_arrays((actor, critics))

    def adam(params: Any, rate: float) -> Any:
        state = fns.optimizer.init(params)
        state.hyperparams["learning_rate"] = jnp.asarray(rate, jnp.float32)
        return state

    return LearnerState(
        actor,
        critics,
        log_alpha,
        adam(actor, learning_rate),
        adam(critics, learning_rate),
        adam(log_alpha, learning_rate * ALPHA_LR_FACTOR),
        jnp.asarray(1.0 if alpha is None else 0.0, jnp.float32),
        jnp.asarray(target_entropy * math.log(3.0), jnp.float32),
        jnp.asarray(0.0 if alpha is None else alpha, jnp.float32),
    )
