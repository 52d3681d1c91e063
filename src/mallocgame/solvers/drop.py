"""``drop``: every buffer stays in slow memory (reward 0, always legal)."""

from __future__ import annotations

from mallocgame.game.state import DROP, Game
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import Improvement, SolveRequest, Solver, Stopwatch, solution_from_game

__all__ = ["DropSolver"]


class DropSolver(Solver):
    """The baseline every other solver must beat: Drop for every buffer."""

    name = "drop"
    work_unit = "games"

    def solve(self, instance: Instance, request: SolveRequest = SolveRequest()) -> Solution:
        self.check_options(request.options)
        clock = Stopwatch(request.seconds)
        game = Game(instance)
        while not game.complete:
            game.step(DROP)
        work = {"games": 1}
        solution = solution_from_game(
            instance, game, solver=self.name, seed=request.seed, wall_s=clock.elapsed,
            extra={"work": work},
        )
        if request.callback is not None:
            request.callback(Improvement(solution, clock.elapsed, work))
        return solution
