"""``greedy``: Copy when allowed, else NoCopy, else Drop; completed with Drop-backup."""

from __future__ import annotations

import numpy as np

from mallocgame.game.backup import DropBackup
from mallocgame.game.state import Game
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import NoConfig, Run, Solver

__all__ = ["GreedySolver", "greedy_policy"]


def greedy_policy(game: Game, allowed: np.ndarray) -> int:
    """The first allowed action in the order Copy, NoCopy, Drop."""
    return int(np.argmax(allowed))


class GreedySolver(Solver, name="greedy", work_unit="games"):
    """One deterministic game: the simplest policy that fills the fast memory."""

    def search(self, instance: Instance, config: NoConfig, run: Run) -> Solution:
        game = Game(instance)
        driver = DropBackup(game, deterministic=True)
        driver.play(greedy_policy)
        answer = run.game_answer(game, {"games": 1, "backups": driver.backups})
        run.improve(answer)
        return answer
