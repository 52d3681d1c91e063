"""``greedy``: Copy when allowed, else NoCopy, else Drop; completed with Drop-backup.

One game, with no budget played to its end. Under a wall-clock budget the game still
ends complete: once the clock is spent, the decisions left are Drop first (then NoCopy,
then Copy), which Drop-backup completes in one pass; ``info["greedy_until"]`` says at
which buffer the policy changed (on programs of many thousand buffers the greedy game
backs up often enough to take minutes).
"""

from __future__ import annotations

import numpy as np

from mallocgame.game.backup import DropBackup
from mallocgame.game.state import Game
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import NoConfig, Run, Solver

__all__ = [
    "GreedySolver",
]


def greedy_policy(game: Game, allowed: np.ndarray) -> int:
    """The first allowed action in the order Copy, NoCopy, Drop."""
    return int(np.argmax(allowed))


def _drop_first(game: Game, allowed: np.ndarray) -> int:
    """The first allowed action in the order Drop, NoCopy, Copy."""
    return 2 - int(np.argmax(allowed[::-1]))


class GreedySolver(Solver, name="greedy", work_unit="games"):
    """One deterministic game: the simplest policy that fills the fast memory."""

    def search(self, instance: Instance, config: NoConfig, run: Run) -> Solution:
        game = Game(instance)
        driver = DropBackup(game, deterministic=True)
        cut_at: int | None = None

        def policy(game: Game, allowed: np.ndarray) -> int:
            nonlocal cut_at
            if cut_at is None and run.expired():
                cut_at = game.current_buffer
            return greedy_policy(game, allowed) if cut_at is None else _drop_first(game, allowed)

        driver.play(policy)
        info = {} if cut_at is None else {"greedy_until": cut_at}
        answer = run.game_answer(game, {"games": 1, "backups": driver.backups}, info=info)
        run.improve(answer)
        return answer
