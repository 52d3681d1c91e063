"""Solvers of the memory mapping game, by their command-line names (SPEC section 8)."""

from __future__ import annotations

from difflib import get_close_matches

from mallocgame.errors import SolverError
from mallocgame.solvers.base import Improvement, Run, Solver, SolveRequest
from mallocgame.solvers.drop import DropSolver
from mallocgame.solvers.egrl import EgrlSolver
from mallocgame.solvers.es import EsSolver
from mallocgame.solvers.exact import ExactSolver
from mallocgame.solvers.exhaustive import ExhaustiveSolver
from mallocgame.solvers.greedy import GreedySolver
from mallocgame.solvers.heuristic import HeuristicSolver
from mallocgame.solvers.hybrid import BestOfSolver
from mallocgame.solvers.mcts import MctsSolver
from mallocgame.solvers.muzero import MuZeroNoSearchSolver, MuZeroProdSolver, MuZeroSolver
from mallocgame.solvers.order_search import OrderSearchSolver
from mallocgame.solvers.os_placement import AgnosticSolver, FirstTouchSolver
from mallocgame.solvers.random import RandomSolver

__all__ = ["SOLVERS", "get_solver", "solver_names", "Solver", "SolveRequest", "Improvement", "Run"]

SOLVERS: dict[str, type[Solver]] = {
    cls.name: cls
    for cls in (
        DropSolver,
        RandomSolver,
        GreedySolver,
        FirstTouchSolver,
        AgnosticSolver,
        HeuristicSolver,
        OrderSearchSolver,
        EsSolver,
        MctsSolver,
        ExactSolver,
        ExhaustiveSolver,
        BestOfSolver,
        MuZeroSolver,
        MuZeroNoSearchSolver,
        MuZeroProdSolver,
        EgrlSolver,
    )
}
"""Every solver this build has, by name."""


def solver_names() -> list[str]:
    """Every solver's name, in listing order."""
    return list(SOLVERS)


def get_solver(name: str) -> Solver:
    """A new solver by name; :class:`SolverError` (with a suggestion) for an unknown one,
    or for a name that is not a string."""
    if not isinstance(name, str):
        raise SolverError(
            f"a solver name is a string (one of {', '.join(SOLVERS)}), not {name!r:.80}"
        )
    if name in SOLVERS:
        return SOLVERS[name]()
    close = get_close_matches(name, SOLVERS, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise SolverError(f"unknown solver '{name}' (valid: {', '.join(SOLVERS)}){hint}")
