"""``exhaustive``: every complete legal game, for tiny instances (exact game optimum)."""

from __future__ import annotations

from mallocgame.game.exhaustive import exhaustive_search
from mallocgame.game.state import replay
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import Improvement, SolveRequest, Solver, Stopwatch, solution_from_game

__all__ = ["ExhaustiveSolver"]

DEFAULT_MAX_MOVES = 20_000_000


class ExhaustiveSolver(Solver):
    """Depth-first search over all games; its work budget is the number of moves tried."""

    name = "exhaustive"
    work_unit = "moves"

    def solve(self, instance: Instance, request: SolveRequest = SolveRequest()) -> Solution:
        self.check_options(request.options)
        clock = Stopwatch(request.seconds)
        max_moves = request.work if request.work is not None else DEFAULT_MAX_MOVES
        best, actions, moves = exhaustive_search(replay(instance, []), max_nodes=max_moves)
        game = replay(instance, actions)
        work = {"moves": moves}
        solution = solution_from_game(
            instance, game, solver=self.name, seed=request.seed, wall_s=clock.elapsed,
            extra={"work": work, "bound_s": best},
        )
        if request.callback is not None:
            request.callback(Improvement(solution, clock.elapsed, work))
        return solution
