"""``egrl``'s networks and soft actor-critic learner on a toy problem."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mallocgame.game.tables import build_tables
from mallocgame.solvers.egrl.graph import build_graph, pad_graph
from mallocgame.solvers.egrl.networks import Actor, Critic, dummy_graph, init_params
from mallocgame.solvers.egrl.replay import Replay
from mallocgame.solvers.egrl.sac import NetShape, init_learner, learner_alpha, learner_functions

SHAPE = NetShape(
    hidden=8, layers=1, pool_levels=1, pool_ratio=0.5
)  # as the solver tests' TINY options
UNITS = 106
LEARNER = {"prior_bias": 0.0, "learning_rate": 1e-2, "alpha": None, "target_entropy": 0.3}


@pytest.fixture(scope="module")
def graph(lstm) -> dict[str, jnp.ndarray]:
    """The graph of xla-v1/lstm_infer (106 units; the solver tests' program, so that
    the compiled functions are shared when they run in one process)."""
    return {k: jnp.asarray(v) for k, v in pad_graph(build_graph(lstm, build_tables(lstm))).items()}


@pytest.mark.parametrize("module", [Actor(8, 1, 2, 0.5, 1.5), Critic(8, 2, 0, 0.5)])
def test_numpy_init_matches_the_modules_parameters(module) -> None:
    mine = init_params(module, np.random.default_rng(0), 1.5)
    theirs = jax.eval_shape(module.init, jax.random.PRNGKey(0), dummy_graph())
    assert jax.tree_util.tree_structure(mine) == jax.tree_util.tree_structure(theirs)
    for a, b in zip(jax.tree_util.tree_leaves(mine), jax.tree_util.tree_leaves(theirs)):
        assert a.shape == b.shape and a.dtype == np.float32
    again = init_params(module, np.random.default_rng(0), 1.5)
    assert all(
        (a == b).all()
        for a, b in zip(jax.tree_util.tree_leaves(mine), jax.tree_util.tree_leaves(again))
    )
    if isinstance(module, Actor):
        assert mine["params"]["logits"]["bias"].tolist() == [1.5, 0.75, 0.0]


def test_networks_give_one_row_per_padded_unit(graph) -> None:
    fns = learner_functions(SHAPE)
    state = init_learner(fns, np.random.default_rng(0), **LEARNER)
    logits = fns.logits(state.actor, graph)
    assert logits.shape == (graph["units"].shape[0], 3) and bool(jnp.isfinite(logits).all())
    theta = fns.ravel(state.actor)
    assert np.allclose(fns.flat_logits(jnp.asarray(theta), graph), logits, atol=1e-6)


def _train(graph, steps: int, **settings) -> tuple[list[float], np.ndarray, list[float]]:
    """Proposals mostly of one action each (80 % of the units, the rest random); their
    fitness is the share of Copy; SAC updates.
    Returns the twin critics' loss over the whole replay before and after, the actor's
    probabilities [5, 3] after, and (alpha, the actor's mean entropy) at each update."""
    fns = learner_functions(SHAPE)
    state = init_learner(fns, np.random.default_rng(1), **{**LEARNER, **settings})
    rng = np.random.default_rng(2)
    replay = Replay(64, UNITS)
    for _ in range(64):
        proposal = np.where(
            rng.random(UNITS) < 0.8, rng.integers(0, 3), rng.integers(0, 3, size=UNITS)
        )
        replay.add(proposal, float((proposal == 0).mean()))
    mean, std = replay.fitness_scale()
    targets = (replay.fitness - mean) / std

    critic = jax.jit(fns.critic.apply)

    def replay_loss(critics) -> float:
        total = 0.0
        for twin in range(2):
            q = np.asarray(
                critic(jax.tree_util.tree_map(lambda a, twin=twin: a[twin], critics), graph)
            )[:UNITS]
            total += float(
                ((q[np.arange(UNITS)[None, :], replay.actions] - targets[:, None]) ** 2).mean()
            )
        return total

    losses = [replay_loss(state.critics)]
    alphas = []
    units = graph["units"].shape[0]
    for _ in range(steps):
        actions, fitness = replay.sample(8, rng)
        padded = np.zeros((8, units), np.int32)
        padded[:, :UNITS] = actions
        state, metrics = fns.update(
            state, graph, jnp.asarray(padded), jnp.asarray((fitness - mean) / std, jnp.float32)
        )
        alphas.append((float(metrics["alpha"]), float(metrics["entropy"])))
    losses.append(replay_loss(state.critics))
    probs = np.asarray(jax.nn.softmax(fns.logits(state.actor, graph)))[:UNITS]
    return losses, probs, alphas


def test_sac_learns_the_toy(graph) -> None:
    losses, probs, _ = _train(graph, 100, alpha=0.01)
    # One unit's action tells most of the fitness here: the twin critics' loss on the
    # replay (2 when they predict the mean) falls well below 2.
    assert losses[0] > 1.5 and losses[1] < 0.8
    assert (probs[:, 0] > 0.9).all()  # the actor prefers Copy on every unit


def test_alpha_is_tuned_toward_the_target_entropy(graph) -> None:
    _, _, alphas = _train(graph, 100)
    alpha, entropy = np.array(alphas).T
    target = 0.3 * np.log(3.0)
    assert entropy[0] > target and alpha[5] < alpha[0]  # above the target: alpha falls
    low = int(np.argmax(entropy < target))  # the actor sharpens past the target; alpha then rises
    assert entropy[low] < target and low < 80 and alpha[-1] > alpha[low + 5]
    assert (alpha <= 1.0).all() and (alpha >= 1e-4).all()


def test_fixed_alpha_stays(graph) -> None:
    _, _, alphas = _train(graph, 3, alpha=0.2)
    assert [a for a, _ in alphas] == pytest.approx([0.2] * 3)


@pytest.mark.parametrize("alpha", [5.0, 1e3, 0.0, 2e-5])
def test_a_fixed_alpha_is_exactly_what_was_asked_outside_the_tuned_range(graph, alpha) -> None:
    """A fixed alpha is not held to the tuned one's bounds [1e-4, 1] nor passed through
    log and exp: every update uses the float32 of the option, 0 none at all."""
    fns = learner_functions(SHAPE)
    state = init_learner(fns, np.random.default_rng(1), **{**LEARNER, "alpha": alpha})
    units = graph["units"].shape[0]
    rng = np.random.default_rng(2)
    asked = float(np.float32(alpha))
    for _ in range(4):
        actions = rng.integers(0, 3, size=(8, units)).astype(np.int32)
        targets = jnp.asarray(rng.normal(size=8), jnp.float32)
        state, metrics = fns.update(state, graph, jnp.asarray(actions), targets)
        assert float(metrics["alpha"]) == asked
        assert all(bool(jnp.isfinite(v)) for v in metrics.values())
        assert float(learner_alpha(state)) == asked
    leaves = jax.tree_util.tree_leaves(state.actor)
    assert all(bool(jnp.isfinite(leaf).all()) for leaf in leaves)


def test_with_alpha_zero_the_actor_loss_has_no_entropy_term(graph) -> None:
    """alpha=0: L_pi = mean_i sum_a pi_i(a) (-min_k Q_k,i(s, a)), no entropy term."""
    fns = learner_functions(SHAPE)
    state = init_learner(fns, np.random.default_rng(1), **{**LEARNER, "alpha": 0.0})
    units = graph["units"].shape[0]
    actions = jnp.zeros((8, units), jnp.int32)
    for _ in range(2):  # the second update: its state has been through one
        before = state
        state, metrics = fns.update(state, graph, actions, jnp.ones(8, jnp.float32))
    state = before
    q = [
        np.asarray(
            fns.critic.apply(jax.tree_util.tree_map(lambda a, i=i: a[i], state.critics), graph)
        )
        for i in range(2)
    ]
    p = np.asarray(jax.nn.softmax(fns.logits(state.actor, graph)))
    mask = np.asarray(graph["units"])
    expected = ((p * -np.minimum(*q)).sum(-1) * mask).sum() / mask.sum()
    assert float(metrics["actor_loss"]) == pytest.approx(expected, rel=1e-5, abs=1e-6)


def test_replay_ring() -> None:
    replay = Replay(3, 2)
    for i in range(5):
        replay.add(np.array([i % 3, 0]), float(i))
    assert replay.size == 3 and replay.added == 5
    assert sorted(replay.fitness.tolist()) == [2.0, 3.0, 4.0]
    actions, fitness = replay.sample(10, np.random.default_rng(0))
    assert actions.shape == (10, 2) and set(fitness.tolist()) <= {2.0, 3.0, 4.0}
    other = Replay(3, 2)
    other.load_state_dict(replay.state_dict())
    assert (other.actions == replay.actions).all() and other.next == replay.next and other.size == 3
    with pytest.raises(ValueError):
        replay.add(np.zeros(3), 0.0)
    with pytest.raises(ValueError):
        Replay(3, 2).sample(1, np.random.default_rng(0))
