"""The learner's loss: which targets count (policy inside the game; value and reward where known)."""

from __future__ import annotations

import functools

import jax
import numpy as np

from mallocgame.game.observe import empty_batch
from mallocgame.solvers.muzero.learner import batch_to_device, make_optimizer, make_train_step
from mallocgame.solvers.muzero.networks import MuZeroNet, init_params
from mallocgame.solvers.muzero.replay import Batch
from mallocgame.solvers.muzero.solver import MuZeroSolver
from tests.solvers.muzero.test_muzero_networks import SMALL as SMALL_NETWORK

SMALL = {**SMALL_NETWORK, "unroll_steps": 3}
ROWS = 4


def _batch(config) -> Batch:
    rng = np.random.default_rng(0)
    obs = empty_batch(config.observation, ROWS)
    for value in obs.values():
        value[...] = rng.random(value.shape)
    k = config.unroll_steps
    return Batch(
        observations=obs,
        actions=rng.integers(0, 3, (ROWS, k)).astype(np.int32),
        values=rng.uniform(-3, 3, (ROWS, k + 1)).astype(np.float32),
        rewards=rng.uniform(-1, 1, (ROWS, k + 1)).astype(np.float32),
        policies=np.full((ROWS, k + 1, 3), 1 / 3, np.float32),
        mask=np.ones((ROWS, k + 1), np.float32),
        known=np.ones((ROWS, k + 1), np.float32),
    )


@functools.cache
def _step():
    """One jitted train step, its initial parameters and optimizer state (compiled once)."""
    config = MuZeroSolver().config(SMALL)
    net = MuZeroNet(config)
    optimizer = make_optimizer(config)
    params = init_params(net, 0, empty_batch(config.observation, 1))
    return make_train_step(net, config, optimizer), params, optimizer.init(params)


def _losses(batch: Batch):
    step, params, opt_state = _step()
    _, _, info = step(params, opt_state, batch_to_device(batch))
    return jax.tree_util.tree_map(float, info)


def test_value_and_reward_targets_count_only_where_known() -> None:
    config = MuZeroSolver().config(SMALL)
    batch = _batch(config)
    batch.known[0, 2:] = 0.0  # row 0 is a record cut short after its second move
    base = _losses(batch)
    unknown = _batch(config)
    unknown.known[0, 2:] = 0.0
    unknown.values[0, 2:] += 2.5  # other targets where they are unknown: the same loss
    unknown.rewards[0, 2:] -= 0.7
    assert _losses(unknown) == base
    known = _batch(config)
    known.known[0, 2:] = 0.0
    known.values[0, 1] += 2.5  # a known value target: a different value loss, the same reward loss
    changed = _losses(known)
    assert changed.value != base.value and changed.reward == base.reward
    whole = _losses(_batch(config))  # every target known: row 0's last steps count again
    assert whole.value != base.value and whole.reward != base.reward


def test_policy_targets_count_only_inside_the_game() -> None:
    config = MuZeroSolver().config(SMALL)
    batch = _batch(config)
    batch.mask[1, 3] = 0.0
    base = _losses(batch)
    other = _batch(config)
    other.mask[1, 3] = 0.0
    other.policies[1, 3] = [1.0, 0.0, 0.0]
    assert _losses(other).policy == base.policy
