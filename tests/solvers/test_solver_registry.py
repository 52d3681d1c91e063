"""The solver registry: listing order, lookup, and a name taken twice refused."""

from __future__ import annotations

import pytest

from mallocgame.errors import SolverError
from mallocgame.solvers import SOLVERS, get_solver, solver_names
from mallocgame.solvers.heuristic import HeuristicSolver
from mallocgame.solvers.random import RandomSolver
from mallocgame.solvers.registry import register


def test_the_registry_lists_every_solver_once_in_order_and_builds_them_by_name() -> None:
    assert solver_names()[:3] == ["drop", "random", "greedy"]
    assert len(set(solver_names())) == len(SOLVERS)
    assert isinstance(get_solver("heuristic"), HeuristicSolver)


def test_registering_the_same_class_again_changes_nothing() -> None:
    before = list(SOLVERS.items())
    register(RandomSolver)
    assert list(SOLVERS.items()) == before


def test_a_second_solver_under_a_taken_name_is_refused() -> None:
    class Impostor(RandomSolver):
        name = "heuristic"

    with pytest.raises(SolverError, match="^two solvers are named 'heuristic'$"):
        register(Impostor)
    assert SOLVERS["heuristic"] is HeuristicSolver
