"""``exhaustive``: every complete legal game, for tiny instances: the game optimum, with
``bound_s`` equal to its reward (or, where over a thousand games tie near the best, the
first of the best score, ``bound_s`` a little above it: :func:`~mallocgame.game.exhaustive.
exhaustive_search`)."""

from __future__ import annotations

from dataclasses import replace

from mallocgame.game.exhaustive import exhaustive_search
from mallocgame.game.state import replay
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import NoConfig, Run, Solver

__all__ = ["ExhaustiveSolver"]

DEFAULT_MAX_MOVES = 20_000_000


class ExhaustiveSolver(Solver, name="exhaustive", work_unit="moves"):
    """Depth-first search over all games; its work budget is the number of moves tried.

    It never reads the clock: a wall-clock budget is not kept (the search is one compiled
    call). Without a work budget it tries up to :data:`DEFAULT_MAX_MOVES` moves, then
    refuses with :class:`~mallocgame.errors.SolverError`.
    """

    def search(self, instance: Instance, config: NoConfig, run: Run) -> Solution:
        max_moves = run.work_budget if run.work_budget is not None else DEFAULT_MAX_MOVES
        _, actions, moves, bound_s = exhaustive_search(replay(instance, []), max_nodes=max_moves)
        game = replay(instance, actions)
        answer = run.game_answer(game, {"moves": moves})
        # the best game's own reward where the search ranked every game near the best by
        # its exact reward, else the best score plus its rounding (exhaustive_search)
        answer = replace(answer, bound_s=bound_s)
        run.improve(answer)
        return answer
