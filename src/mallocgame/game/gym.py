"""A gymnasium environment of the memory mapping game (one episode = one game).

``MallocGameEnv(instance)`` plays any :class:`~mallocgame.instance.Instance` through
:class:`~mallocgame.game.state.Game`, observing :func:`~mallocgame.game.features.decision_features`.
Importing this module registers it as ``"mallocgame/MMapGame-v0"``, so
``gymnasium.make("mallocgame/MMapGame-v0", instance=inst)`` works (without importing it
first: ``gymnasium.make("mallocgame.game.gym:mallocgame/MMapGame-v0", instance=inst)``);
:func:`make_env` is a shortcut.
"""

from __future__ import annotations

import os
from typing import Any, SupportsFloat

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.error import ResetNeeded

from mallocgame.errors import InstanceError
from mallocgame.game.features import (
    FEATURE_HIGH,
    FEATURE_LOW,
    NUM_FEATURES,
    FeatureExtractor,
    finite_reciprocal,
)
from mallocgame.game.state import ACTION_NAMES, Game, is_action
from mallocgame.instance import Instance, load_instance

__all__ = ["ENV_ID", "MallocGameEnv", "make_env"]

ENV_ID = "mallocgame/MMapGame-v0"


class MallocGameEnv(gymnasium.Env):
    """The memory mapping game (SPEC sections 2-6) as a gymnasium environment.

    One episode plays one game of ``instance``: one step per buffer, in game order.
    The game is deterministic; ``reset(seed=...)`` only seeds ``self.np_random``
    (which the environment itself does not use).

    - **observation**: ``Box(-1, 10, shape=(NUM_FEATURES,), float32)``
      (``NUM_FEATURES = len(FEATURE_NAMES)``, 29): the decision features of the current
      buffer, see :mod:`mallocgame.game.features` (all zeros once the game is over).
    - **action**: ``Discrete(3)``: 0 Copy, 1 NoCopy, 2 Drop. Which are legal is in
      ``info["action_mask"]`` (int8 ``[3]``, 1 = legal) and :meth:`action_masks`
      (bool ``[3]``).
    - **reward**: ``float``: the game's reward of the action (seconds saved, SPEC
      section 5) divided by ``|R|``, the magnitude of the instance's reward normalizer
      (``tables.normalizer_s``), so that the return of a complete game is its normalized
      reward where ``R > 0`` (at most 1 with roofline latencies), and more seconds saved
      is more return whatever the sign of ``R`` (table latencies may make it negative;
      where ``R`` is 0, or too small to divide by, the reward is the raw seconds).
      ``info["reward_s"]`` holds the raw seconds, ``info["normalized_return"]`` the
      game's return over ``R``. No penalty is added for an infeasible
      or illegal end: the return is then the partial return so far.
    - **termination**: ``terminated=True`` when the game is complete (every buffer
      decided, ``info["complete"]``), when it is infeasible (no legal action for the
      current buffer, ``info["infeasible"]``), or after an illegal action
      (``info["illegal_action"]``, ``info["reason"]`` says why; the reward is 0 and the
      game state is unchanged). ``truncated`` is always False (an episode has at most
      ``B`` steps).
    - **info** (reset and step): ``action_mask`` (int8 ``[3]``), ``buffer`` (the buffer
      to decide next, ``B`` when complete), ``return_s``, ``normalized_return``,
      ``complete``, ``infeasible``, ``illegal_action``, ``reward_s`` (0 on reset);
      ``reason`` after an illegal action.

    Calling :meth:`step` before the first :meth:`reset` or after termination raises
    :class:`gymnasium.error.ResetNeeded`. An instance with no buffers is complete at
    reset; its first step raises too.

    Args:
        instance: the instance to play (or a path to an instance file).
        render_mode: ``None`` or ``"ansi"`` (:meth:`render` returns a one-line status).
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}  # noqa: RUF012 (gymnasium's)

    def __init__(
        self, instance: Instance | str | os.PathLike[str], render_mode: str | None = None
    ) -> None:
        if not isinstance(instance, Instance):
            if not isinstance(instance, (str, os.PathLike)):
                raise InstanceError(
                    f"MallocGameEnv: expected an Instance or a file, not {instance!r:.40}"
                )
            instance = load_instance(instance)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or one of {self.metadata['render_modes']}")
        self.instance = instance
        self.render_mode = render_mode
        self.game = Game(instance)
        self._features = FeatureExtractor(self.game)
        # |R|: R < 0 must not reverse the objective nor R = 0 erase it
        inverse = finite_reciprocal(abs(self.game.tables.normalizer_s))
        self._reward_scale = inverse if inverse > 0 else 1.0
        self.observation_space = spaces.Box(
            low=FEATURE_LOW, high=FEATURE_HIGH, shape=(NUM_FEATURES,), dtype=np.float32
        )
        self.action_space = spaces.Discrete(3)
        self._needs_reset = True
        self._last_reward_s = 0.0
        self._last_action: int | None = None

    # ------------------------------------------------------------------- gymnasium API

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.game.reset()
        self._needs_reset = self.game.done
        self._last_reward_s = 0.0
        self._last_action = None
        return self._observation(), self._info()

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        if self._needs_reset:
            raise ResetNeeded("the episode is over (or was never started): call reset() first")
        game = self.game
        # an int 0..2, NumPy's too (a 0-d array as a vectorized env gives); a float, a bool
        # or anything else is an illegal action, never rounded to one
        a = action.item() if isinstance(action, np.ndarray) and action.shape == () else action
        if not is_action(a) or not game.legal_mask()[a]:
            name = ACTION_NAMES[a] if is_action(a) else f"{a!r} (not 0, 1 or 2)"
            legal = ", ".join(ACTION_NAMES[i] for i in np.flatnonzero(game.legal_mask())) or "none"
            reason = f"buffer {game.current_buffer}: action {name} is illegal (legal: {legal})"
            self._needs_reset = True
            self._last_reward_s = 0.0
            info = self._info(illegal_action=True)
            info["reason"] = reason
            return self._observation(), 0.0, True, False, info
        a = int(a)
        reward_s = game.step(a)
        self._last_reward_s = reward_s
        self._last_action = a
        terminated = game.done
        self._needs_reset = terminated
        return self._observation(), reward_s * self._reward_scale, terminated, False, self._info()

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        g = self.game
        state = "complete" if g.complete else ("infeasible" if g.infeasible else "playing")
        last = ACTION_NAMES[self._last_action] if self._last_action is not None else "-"
        mask = "".join("CND"[i] if m else "." for i, m in enumerate(g.legal_mask()))
        return (
            f"{self.instance.name}: buffer {g.current_buffer}/{g.num_buffers} {state}, "
            f"last {last}, legal {mask}, return {g.normalized_return:.4f}"
        )

    def __copy__(self) -> MallocGameEnv:
        """A copy that plays on its own: its game is cloned (:meth:`Game.clone`), the rest
        shared; one that shared the game would step the original too."""
        other = object.__new__(type(self))
        vars(other).update(vars(self))
        other.game = self.game.clone()
        return other

    # ------------------------------------------------------------------------ helpers

    def action_masks(self) -> np.ndarray:
        """Legal actions now: bool ``[3]`` (Copy, NoCopy, Drop); all False when over."""
        return self.game.legal_mask().copy()

    def _observation(self) -> np.ndarray:
        return self._features(self.game)

    def _info(self, illegal_action: bool = False) -> dict[str, Any]:
        g = self.game
        return {
            "action_mask": g.legal_mask().astype(np.int8),
            "buffer": g.current_buffer,
            "return_s": g.return_s,
            "normalized_return": g.normalized_return,
            "reward_s": self._last_reward_s,
            "complete": g.complete,
            "infeasible": g.infeasible,
            "illegal_action": illegal_action,
        }


def make_env(instance: Instance | str | os.PathLike[str], **kwargs: Any) -> gymnasium.Env:
    """``gymnasium.make("mallocgame/MMapGame-v0", instance=instance, **kwargs)``: the
    environment with gymnasium's standard wrappers (order enforcing, passive checker)."""
    return gymnasium.make(ENV_ID, instance=instance, **kwargs)


if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="mallocgame.game.gym:MallocGameEnv")
