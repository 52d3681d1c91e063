"""``exhaustive``: every complete legal game, for tiny instances (exact game optimum)."""

from __future__ import annotations

from mallocgame.game.exhaustive import exhaustive_search
from mallocgame.game.state import replay
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import NoConfig, Run, Solver

__all__ = ["ExhaustiveSolver"]

DEFAULT_MAX_MOVES = 20_000_000


class ExhaustiveSolver(Solver, name="exhaustive", work_unit="moves"):
    """Depth-first search over all games; its work budget is the number of moves tried."""

    def search(self, instance: Instance, config: NoConfig, run: Run) -> Solution:
        # It never reads the clock: without a work budget it stops after DEFAULT_MAX_MOVES.
        max_moves = run.work_budget if run.work_budget is not None else DEFAULT_MAX_MOVES
        best, actions, moves = exhaustive_search(replay(instance, []), max_nodes=max_moves)
        answer = run.game_answer(replay(instance, actions), {"moves": moves}, bound_s=best)
        run.improve(answer)
        return answer
