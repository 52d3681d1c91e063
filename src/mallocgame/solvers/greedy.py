"""``greedy``: Copy when allowed, else NoCopy, else Drop; completed with Drop-backup.

One game, with no budget played to its end. Under a wall-clock budget the game still
ends complete: once the clock is spent, the decisions left are Drop first (then NoCopy,
then Copy), which Drop-backup completes in one pass; ``info["greedy_until"]`` says at
which buffer the policy changed (on programs of many thousand buffers the greedy game
backs up often enough to take minutes).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mallocgame.game.backup import DropBackup
from mallocgame.game.state import Game
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import NoConfig, Run, Solver

__all__ = ["GreedySolver", "UntilExpired"]


def greedy_policy(game: Game, allowed: np.ndarray) -> int:
    """The first allowed action in the order Copy, NoCopy, Drop."""
    return int(np.argmax(allowed))


def _drop_first(game: Game, allowed: np.ndarray) -> int:
    """The first allowed action in the order Drop, NoCopy, Copy."""
    return 2 - int(np.argmax(allowed[::-1]))


class UntilExpired:
    """``policy`` until ``run``'s wall clock is spent, then Drop first (then NoCopy, then
    Copy), which Drop-backup completes in one pass: a game played under a wall-clock
    budget ends complete, and soon after the budget. :attr:`cut_at` is the buffer where the
    policy changed (``None``: it never did; always, without a wall-clock budget)."""

    def __init__(self, policy: Callable[[Game, np.ndarray], int], run: Run) -> None:
        self.policy = policy
        self.run = run
        self.cut_at: int | None = None

    def __call__(self, game: Game, allowed: np.ndarray) -> int:
        if self.cut_at is None and self.run.expired():
            self.cut_at = game.current_buffer
        return self.policy(game, allowed) if self.cut_at is None else _drop_first(game, allowed)


class GreedySolver(Solver, name="greedy", work_unit="games"):
    """One deterministic game: the simplest policy that fills the fast memory."""

    def search(self, instance: Instance, config: NoConfig, run: Run) -> Solution:
        game = Game(instance)
        driver = DropBackup(game, deterministic=True)
        policy = UntilExpired(greedy_policy, run)
        driver.play(policy)
        info = {} if policy.cut_at is None else {"greedy_until": policy.cut_at}
        answer = run.game_answer(game, {"games": 1, "backups": driver.backups}, info=info)
        run.improve(answer)
        return answer
