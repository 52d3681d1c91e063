"""Tests of the gymnasium environment (mallocgame.game.gym)."""

from __future__ import annotations

import copy
import warnings
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env

from mallocgame.game import Game
from mallocgame.game.features import NUM_FEATURES, decision_features
from mallocgame.game.gym import ENV_ID, MallocGameEnv, make_env
from tests.builders import CONFORMANCE_NAMES, conformance_instance, conformance_vector


@pytest.mark.parametrize("name", ["random101", "tiny_alias"])
def test_check_env(name):
    env = gymnasium.make(ENV_ID, instance=conformance_instance(name))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=False)
    # Built directly (no spec): the checker passes too (it only warns that it cannot
    # try other render modes without a spec).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(
            MallocGameEnv(conformance_instance(name), render_mode="ansi"), skip_render_check=False
        )
    env_ansi = MallocGameEnv(conformance_instance(name), render_mode="ansi")
    env_ansi.reset()
    assert isinstance(env_ansi.render(), str)
    assert MallocGameEnv(conformance_instance(name)).render() is None


def test_spaces():
    env = MallocGameEnv(conformance_instance("random102"))
    assert env.observation_space.shape == (NUM_FEATURES,)
    assert env.observation_space.dtype == np.float32
    assert env.action_space == gymnasium.spaces.Discrete(3)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert set(info) >= {"action_mask", "buffer", "return_s", "normalized_return", "reward_s"}
    assert info["action_mask"].dtype == np.int8 and info["action_mask"].shape == (3,)


def test_seeded_reset_deterministic():
    env = MallocGameEnv(conformance_instance("random103"))

    def episode(seed):
        obs, info = env.reset(seed=seed)
        trace = [obs.copy()]
        while True:
            mask = info["action_mask"].astype(bool)
            a = int(env.np_random.choice(np.flatnonzero(mask)))
            obs, reward, terminated, truncated, info = env.step(a)
            trace.append((a, reward, obs.copy()))
            if terminated or truncated:
                return trace

    def same(t1, t2):
        assert len(t1) == len(t2)
        np.testing.assert_array_equal(t1[0], t2[0])
        for (a1, r1, o1), (a2, r2, o2) in zip(t1[1:], t2[1:]):
            assert a1 == a2 and r1 == r2
            np.testing.assert_array_equal(o1, o2)

    same(episode(5), episode(5))
    # Seeding only np_random: the game itself is deterministic.
    o1, _ = env.reset(seed=1)
    o2, _ = env.reset(seed=2)
    np.testing.assert_array_equal(o1, o2)


@pytest.mark.parametrize("name", CONFORMANCE_NAMES)
def test_random_masked_episodes(name):
    inst = conformance_instance(name)
    env = MallocGameEnv(inst)
    rng = np.random.default_rng(0)
    for episode in range(5):
        obs, info = env.reset(seed=episode)
        total = 0.0
        steps = 0
        while True:
            mask = info["action_mask"]
            np.testing.assert_array_equal(mask.astype(bool), env.game.legal_mask())
            np.testing.assert_array_equal(env.action_masks(), env.game.legal_mask())
            np.testing.assert_array_equal(obs, decision_features(env.game))
            assert info["buffer"] == env.game.current_buffer
            a = int(rng.choice(np.flatnonzero(mask)))
            obs, reward, terminated, truncated, info = env.step(a)
            steps += 1
            assert isinstance(reward, float) and not truncated
            assert env.observation_space.contains(obs)
            total += reward
            if terminated:
                break
        assert steps <= inst.num_buffers
        assert info["complete"] or info["infeasible"]
        assert info["complete"] == (steps == inst.num_buffers)
        if info["infeasible"]:
            assert not info["action_mask"].any()
        assert not obs.any()
        r = env.game.tables.normalizer_s
        assert total * r == pytest.approx(info["return_s"], rel=1e-9, abs=1e-18)
        assert info["return_s"] == env.game.return_s
        assert info["normalized_return"] == pytest.approx(total, rel=1e-9, abs=1e-15)
        with pytest.raises(ResetNeeded):
            env.step(2)


def test_reward_matches_game_and_raw_seconds():
    inst = conformance_instance("random105")
    traj = conformance_vector("random105")["trajectories"][0]
    env = MallocGameEnv(inst)
    _, info = env.reset()
    game = Game(inst)
    total_s = 0.0
    for a in traj["actions"]:
        expected = game.step(a)
        _obs, reward, terminated, _, info = env.step(a)
        assert info["reward_s"] == expected
        assert reward == pytest.approx(expected / game.tables.normalizer_s)
        total_s += info["reward_s"]
    assert terminated and info["complete"] and not info["infeasible"]
    assert total_s == pytest.approx(traj["reward_s"], rel=1e-9)
    assert info["normalized_return"] == pytest.approx(traj["normalized_reward"], rel=1e-9)


def _episode_return(env: MallocGameEnv, actions: tuple[int, ...]) -> float:
    env.reset()
    return sum(float(env.step(a)[1]) for a in actions)


@pytest.mark.parametrize(
    "which, worse, better",
    [
        ("negative", (0, 1, 0, 1), (2, 2, 2, 2)),  # -4 s and 0 s: all slow is best
        ("zero", (0, 1), (0, 2)),  # 0 s and 1 s
    ],
)
def test_more_seconds_saved_is_more_return_whatever_the_sign_of_r(which, worse, better):
    """R < 0 (fast memory slower) must not reverse the objective, nor R = 0 erase it."""
    from tests.builders import reversed_normalizer_instances

    env = MallocGameEnv(reversed_normalizer_instances()[which])
    low = _episode_return(env, worse)
    low_s = env.game.return_s
    high = _episode_return(env, better)
    assert env.game.return_s > low_s and high > low


def test_illegal_action_terminates():
    env = MallocGameEnv(conformance_instance("random101"))
    _, info = env.reset()
    illegal = np.flatnonzero(info["action_mask"] == 0)
    assert illegal.size  # the first buffer of random101 cannot be Copied
    buffer = info["buffer"]
    _obs, reward, terminated, truncated, info = env.step(int(illegal[0]))
    assert terminated and not truncated and reward == 0.0
    assert info["illegal_action"] is True
    assert "illegal" in info["reason"] and f"buffer {buffer}" in info["reason"]
    assert env.game.current_buffer == buffer  # state unchanged
    with pytest.raises(ResetNeeded):
        env.step(2)
    env.reset()
    _, _, terminated, _, info = env.step(7)
    assert terminated and info["illegal_action"] and "7" in info["reason"]
    for not_an_action in (1.7, np.float32(0.9), True, None, "x"):  # never rounded to one
        env.reset()
        _, _, terminated, _, info = env.step(not_an_action)
        assert terminated and info["illegal_action"] and env.game.current_buffer == 0
    env.reset()
    legal = int(np.flatnonzero(info["action_mask"])[0])
    _, _, terminated, _, info = env.step(np.array(legal))  # a 0-d array, as vector envs give
    assert not info["illegal_action"] and env.game.actions() == [legal]


def test_infeasible_episode_flag():
    prefix = conformance_vector("random101")["infeasible_prefix"]
    actions = prefix["actions"]
    env = MallocGameEnv(conformance_instance("random101"))
    env.reset()
    for i, a in enumerate(actions):
        _, _, terminated, _, info = env.step(a)
        assert terminated == (i == len(actions) - 1)
    assert info["infeasible"] and not info["complete"] and not info["illegal_action"]
    assert info["buffer"] == prefix["stuck_at_buffer"]


def test_step_before_reset_raises():
    env = MallocGameEnv(conformance_instance("tiny_pair"))
    with pytest.raises(ResetNeeded):
        env.step(2)


def test_gymnasium_make_and_make_env(instance_file: Path):
    inst = conformance_instance("random105")
    env = gymnasium.make(ENV_ID, instance=inst)
    assert isinstance(env.unwrapped, MallocGameEnv)
    obs, info = env.reset(seed=3)
    assert obs.shape == (NUM_FEATURES,)
    terminated = False
    while not terminated:
        a = int(np.flatnonzero(info["action_mask"])[-1])
        obs, _reward, terminated, _truncated, info = env.step(a)
    assert info["complete"]  # all-Drop always completes
    env2 = make_env(inst)
    assert isinstance(env2.unwrapped, MallocGameEnv)
    # A path works too.
    env3 = make_env(str(instance_file))
    assert env3.unwrapped.instance.num_buffers == inst.num_buffers


def test_registration_is_idempotent():
    import importlib

    import mallocgame.game.gym as module

    importlib.reload(module)
    assert ENV_ID in gymnasium.registry


def test_an_env_of_neither_an_instance_nor_a_file_is_an_instance_error() -> None:
    from mallocgame.errors import InstanceError

    for given in (42, None, [1]):  # 42 raised TypeError from the file loader
        with pytest.raises(InstanceError, match="expected an Instance or a file"):
            MallocGameEnv(given)


def test_a_shallow_copy_plays_on_its_own():
    """copy.copy shared the original's game: stepping the copy stepped the original, and
    the original, after the copy finished, said "illegal action" instead of ResetNeeded."""
    env = MallocGameEnv(conformance_instance("random101"))
    env.reset()
    twin = copy.copy(env)
    assert twin.game is not env.game
    before = env.game.current_buffer
    done = False
    while not done:
        _, _, done, _, _ = twin.step(int(np.flatnonzero(twin.action_masks())[-1]))
    assert env.game.current_buffer == before and not env.game.done
    env.step(int(np.flatnonzero(env.action_masks())[0]))
    with pytest.raises(ResetNeeded):
        twin.step(0)
