"""MuZero network parameters: flax's shapes, numpy's draws, the policy head's initial bias;
the two inferences (initial, recurrent) with their shapes."""

from __future__ import annotations

import jax
import numpy as np

from mallocgame.game.observe import empty_batch
from mallocgame.solvers.muzero.networks import (
    MuZeroNet,
    init_params,
    initial_inference,
    recurrent_inference,
)
from mallocgame.solvers.muzero.solver import MuZeroSolver

SMALL = {
    "width": 32,
    "latent_size": 16,
    "conv_channels": "4",
    "observation.grid_steps": 8,
    "observation.grid_window": 32,
    "observation.grid_addr": 8,
    "observation.profile_bins": 16,
    "observation.supply_window": 8,
}


def _initial_logits(options: dict, seed: int = 0) -> np.ndarray:
    config = MuZeroSolver().config({**SMALL, **options})
    net = MuZeroNet(config)
    obs = empty_batch(config.observation, 2)
    params = init_params(net, seed, obs)
    _, policy, value = initial_inference(net, params, obs)
    assert value.shape == (2, config.support_size)
    return np.asarray(policy)


def test_same_seed_same_parameters_and_a_zero_policy_bias_by_default() -> None:
    config = MuZeroSolver().config(SMALL)
    net = MuZeroNet(config)
    obs = empty_batch(config.observation, 1)
    a, b, c = (init_params(net, seed, obs) for seed in (0, 0, 1))
    same = jax.tree_util.tree_map(lambda x, y: bool(np.array_equal(x, y)), a, b)
    assert all(jax.tree_util.tree_leaves(same))
    assert not np.array_equal(
        a["params"]["prediction"]["policy"]["kernel"], c["params"]["prediction"]["policy"]["kernel"]
    )
    assert np.array_equal(a["params"]["prediction"]["policy"]["bias"], np.zeros(3))


def test_policy_init_bias_orders_copy_nocopy_drop() -> None:
    unbiased, biased = _initial_logits({}), _initial_logits({"policy_init_bias": 4.0})
    np.testing.assert_allclose(biased - unbiased, np.tile([4.0, 2.0, 0.0], (2, 1)), atol=1e-5)
    assert (np.argsort(-biased, axis=1) == [0, 1, 2]).all()


def test_the_inferences_are_the_networks_methods_with_their_shapes() -> None:
    config = MuZeroSolver().config(SMALL)
    net = MuZeroNet(config)
    obs = empty_batch(config.observation, 2)
    params = init_params(net, 0, obs)
    latent, policy, value = initial_inference(net, params, obs)
    assert latent.shape == (2, config.latent_size) and policy.shape == (2, 3)
    assert value.shape == (2, config.support_size)
    action = np.array([0, 2], dtype=np.int32)
    after = recurrent_inference(net, params, latent, action)
    assert [x.shape for x in after] == [
        (2, config.latent_size),
        (2, config.support_size),
        (2, 3),
        (2, config.support_size),
    ]
    direct = net.apply(params, latent, action, method=MuZeroNet.recurrent)
    for ours, flax_s in zip(after, direct):
        np.testing.assert_array_equal(ours, flax_s)
