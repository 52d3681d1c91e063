"""The solver registry: command-line name -> solver class (SPEC section 8).

:mod:`mallocgame.solvers` fills it when imported; a solver made of other solvers
(``best-of``) looks them up here without importing the package that lists it.
"""

from __future__ import annotations

from difflib import get_close_matches

from mallocgame.errors import SolverError
from mallocgame.solvers.base import Solver

__all__ = ["SOLVERS", "register", "get_solver", "solver_names"]

SOLVERS: dict[str, type[Solver]] = {}
"""Every solver this build has, by name, in listing order."""


def register(*classes: type[Solver]) -> None:
    """Add solver classes under their ``name``; a name taken twice is a :class:`SolverError`."""
    for cls in classes:
        if cls.name in SOLVERS and SOLVERS[cls.name] is not cls:
            raise SolverError(f"two solvers are named '{cls.name}'")
        SOLVERS[cls.name] = cls


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
