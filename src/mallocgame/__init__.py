"""mallocgame: the memory mapping problem of ML compilers as the MMap-MuZero game.

The public API (``import mallocgame as mg``)::

    inst = mg.load_workload("xla-v1/gru_infer")          # a bundled name, an instance file or an XLA dump
    sol = mg.get_solver("es").solve(inst, mg.SolveRequest(seed=0, work=200))
    assert mg.check_solution(inst, sol).ok               # SPEC section 7's physical rules
    print(sol.normalized_reward, sol.work, mg.simulate(inst, sol).latency_s)

Instances and solutions: :class:`Instance` (:func:`load_instance`, :func:`save_instance`),
:class:`Solution` and :class:`Allocation` (:func:`load_solution`, :func:`save_solution`).
The game: :class:`Game`, its actions :data:`COPY`, :data:`NOCOPY`, :data:`DROP`, and
:class:`DropBackup`, which completes any game. Solvers: :func:`get_solver`,
:func:`solver_names`, :class:`SolveRequest`. Answers: :func:`check_solution` (valid or
the named failures), :func:`simulate` (end-to-end latency). Workloads:
:func:`load_workload`, :func:`workload_names`. Every name is loaded on first use, so
``import mallocgame`` stays cheap.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("mallocgame")
except PackageNotFoundError:  # run from a source tree that is not installed
    __version__ = "0+unknown"

_EXPORTS = {
    "Instance": "mallocgame.instance",
    "load_instance": "mallocgame.instance",
    "save_instance": "mallocgame.instance",
    "Solution": "mallocgame.solution",
    "Allocation": "mallocgame.solution",
    "load_solution": "mallocgame.solution",
    "save_solution": "mallocgame.solution",
    "Game": "mallocgame.game.state",
    "COPY": "mallocgame.game.state",
    "NOCOPY": "mallocgame.game.state",
    "DROP": "mallocgame.game.state",
    "DropBackup": "mallocgame.game.backup",
    "get_solver": "mallocgame.solvers",
    "solver_names": "mallocgame.solvers",
    "SolveRequest": "mallocgame.solvers.base",
    "check_solution": "mallocgame.check",
    "load_workload": "mallocgame.workloads.registry",
    "workload_names": "mallocgame.workloads.registry",
}

# ``simulate`` is both a submodule and its function: bound now, so that a later import of
# the submodule (which sets the package attribute only on its first import) cannot shadow it.
from mallocgame.simulate import simulate  # noqa: E402

__all__ = ["__version__", *_EXPORTS, "simulate"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mallocgame' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
