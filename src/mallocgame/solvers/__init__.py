"""Solvers of the memory mapping game, by their command-line names (SPEC section 8)."""

from __future__ import annotations

from mallocgame.errors import SolverError
from mallocgame.solvers.base import Improvement, SolveRequest, Solver, solution_from_game
from mallocgame.solvers.drop import DropSolver
from mallocgame.solvers.es import EsSolver
from mallocgame.solvers.exact import ExactSolver
from mallocgame.solvers.exhaustive import ExhaustiveSolver
from mallocgame.solvers.greedy import GreedySolver
from mallocgame.solvers.heuristic import HeuristicSolver
from mallocgame.solvers.hybrid import BestOfSolver
from mallocgame.solvers.mcts import MctsSolver
from mallocgame.solvers.muzero import MuZeroNoSearchSolver, MuZeroSolver
from mallocgame.solvers.random import RandomSolver

__all__ = [
    "SOLVERS",
    "PLANNED_SOLVERS",
    "get_solver",
    "Solver",
    "SolveRequest",
    "Improvement",
    "solution_from_game",
]

SOLVERS: dict[str, type[Solver]] = {
    cls.name: cls
    for cls in (
        DropSolver, RandomSolver, GreedySolver, HeuristicSolver, EsSolver, MctsSolver,
        ExactSolver, ExhaustiveSolver, BestOfSolver, MuZeroSolver, MuZeroNoSearchSolver,
    )
}
"""Every solver this build implements."""

PLANNED_SOLVERS = ("muzero-prod", "egrl")
"""SPEC section 8 names whose solvers are not part of this build yet."""


def get_solver(name: str) -> Solver:
    """A new solver by name; :class:`SolverError` for an unknown or unbuilt one."""
    if name in SOLVERS:
        return SOLVERS[name]()
    if name in PLANNED_SOLVERS:
        raise SolverError(f"solver '{name}' is not available in this build (have: {', '.join(SOLVERS)})")
    raise SolverError(f"unknown solver '{name}' (have: {', '.join(SOLVERS)})")
