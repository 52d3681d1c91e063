"""``drop``: every buffer stays in slow memory (reward 0, always legal)."""

from __future__ import annotations

from mallocgame.game.state import DROP, Game
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import NoConfig, Run, Solver

__all__ = ["DropSolver"]


class DropSolver(Solver, name="drop", work_unit="games"):
    """The baseline every other solver must beat: Drop for every buffer."""

    def search(self, instance: Instance, config: NoConfig, run: Run) -> Solution:
        game = Game(instance)
        while not game.complete:
            game.step(DROP)
        answer = run.game_answer(game, {"games": 1})
        run.improve(answer)
        return answer
