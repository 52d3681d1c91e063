"""``greedy``: Copy when allowed, else NoCopy, else Drop; completed with Drop-backup."""

from __future__ import annotations

import numpy as np

from mallocgame.game.backup import DropBackup
from mallocgame.game.state import Game
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import Improvement, SolveRequest, Solver, Stopwatch, solution_from_game

__all__ = ["GreedySolver", "greedy_policy"]


def greedy_policy(game: Game, allowed: np.ndarray) -> int:
    """The first allowed action in the order Copy, NoCopy, Drop."""
    return int(np.argmax(allowed))


class GreedySolver(Solver):
    """One deterministic game: the simplest policy that fills the fast memory."""

    name = "greedy"
    work_unit = "games"

    def solve(self, instance: Instance, request: SolveRequest = SolveRequest()) -> Solution:
        self.check_options(request.options)
        clock = Stopwatch(request.seconds)
        game = Game(instance)
        driver = DropBackup(game, deterministic=True)
        driver.play(greedy_policy)
        work = {"games": 1, "backups": driver.backups}
        solution = solution_from_game(
            instance, game, solver=self.name, seed=request.seed, wall_s=clock.elapsed,
            extra={"work": work},
        )
        if request.callback is not None:
            request.callback(Improvement(solution, clock.elapsed, work))
        return solution
