"""The batched search: legal actions at the root, and the run-time Q scale."""

from __future__ import annotations

import jax
import numpy as np

from mallocgame.game.observe import Observer, empty_batch
from mallocgame.game.state import Game
from mallocgame.game.tables import build_tables
from mallocgame.solvers.muzero.networks import MuZeroNet, init_params
from mallocgame.solvers.muzero.search import make_policy, make_search
from mallocgame.solvers.muzero.solver import MuZeroSolver
from mallocgame.workloads.registry import load_workload
from tests.solvers.muzero.test_muzero_train import TINY


def _root_batch(config, n: int):
    """``n`` copies of the first position of synthetic-v1/small, all actions allowed."""
    inst = load_workload("synthetic-v1/small")
    game = Game(inst, build_tables(inst))
    observer = Observer(game, config.observation)
    obs = empty_batch(config.observation, n)
    for i in range(n):
        observer.observe(0, out=obs, index=i)
    return obs, np.ones((n, 3), dtype=bool)


def test_q_scale_sets_how_far_the_improved_policy_moves_from_the_prior() -> None:
    config = MuZeroSolver().config({**TINY, "policy_init_bias": 0.0})
    net = MuZeroNet(config)
    obs, allowed = _root_batch(config, 4)
    params = init_params(net, 0, obs)
    search = make_search(net, config)
    _, logits, _ = net.apply(params, obs, method=MuZeroNet.initial)
    prior = np.asarray(jax.nn.softmax(logits, axis=-1))
    key = jax.random.PRNGKey(1)

    def improved(q_scale: float) -> np.ndarray:
        out = search(params, key, obs, allowed, np.float32(1.0), np.float32(q_scale))
        return np.asarray(out.policy)

    np.testing.assert_allclose(improved(1e-9), prior, atol=1e-5)  # sigma(Q) ~ 0: the prior itself
    small, large = improved(0.1), improved(1e4)
    assert np.abs(large - prior).max() > np.abs(small - prior).max() > 0
    assert np.abs(large - prior).max() > 0.1


def test_disallowed_root_actions_are_never_chosen_nor_targeted() -> None:
    config = MuZeroSolver().config(TINY)
    net = MuZeroNet(config)
    obs, allowed = _root_batch(config, 4)
    allowed[:, 0] = False  # Copy not allowed anywhere
    allowed[1, 2] = False  # slot 1: only NoCopy
    params = init_params(net, 0, obs)
    out = make_search(net, config)(
        params, jax.random.PRNGKey(0), obs, allowed, np.float32(1.0), np.float32(1.0)
    )
    action, policy = np.asarray(out.action), np.asarray(out.policy)
    assert allowed[np.arange(4), action].all()
    assert (policy[~allowed] == 0).all()
    assert np.asarray(make_policy(net)(params, obs, allowed)).tolist()[1] == 1
