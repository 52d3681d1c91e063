"""Solvers of the memory mapping game, by their command-line names (SPEC section 8)."""

from __future__ import annotations

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
from mallocgame.solvers.registry import SOLVERS, get_solver, register, solver_names
from mallocgame.solvers.xla_answer import XlaSolver

__all__ = ["SOLVERS", "get_solver", "solver_names", "Solver", "SolveRequest", "Improvement", "Run"]

register(
    DropSolver,
    RandomSolver,
    GreedySolver,
    FirstTouchSolver,
    AgnosticSolver,
    HeuristicSolver,
    XlaSolver,
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
