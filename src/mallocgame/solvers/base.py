"""The interface every solver implements, and what it reports.

A solver gets an instance and a :class:`SolveRequest` (seed, wall-clock and/or work
budget, a callback for every new best solution, optional demonstrations) and returns
a :class:`~mallocgame.solution.Solution` whose ``extra`` records the work it did
(``work``) and, where it proves one, an upper bound on the reward (``bound_s``).

Options: ``SolveRequest.options`` holds solver-specific settings by name.
:meth:`Solver.check_options` rejects (with :class:`~mallocgame.errors.SolverError`)
any name a solver does not take and, where cheap, any value of the wrong type; each
solver calls it at the start of :meth:`Solver.solve`, and a sweep calls it for every
solver before it runs a job. By default a solver takes no options.

Reproducibility: with a work budget (and no wall-clock budget) the same seed gives
the same solution. With a wall-clock budget the work done is recorded in the file.
"""

from __future__ import annotations

import abc
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence, TypeVar

from mallocgame.errors import SolverError
from mallocgame.game.state import Game
from mallocgame.instance import Instance
from mallocgame.solution import Solution

__all__ = [
    "Improvement", "SolveRequest", "Solver", "Stopwatch", "settings_from_options", "solution_from_game",
    "json_settings",
]

Settings = TypeVar("Settings")


@dataclass(frozen=True)
class Improvement:
    """A new best solution, as passed to :attr:`SolveRequest.callback`."""

    solution: Solution
    elapsed_s: float  # wall-clock seconds since the solver started
    work: Mapping[str, int]  # work done so far (games, simulations, ...)


@dataclass(frozen=True)
class SolveRequest:
    """How to solve: the seed and the budgets (``None`` = not limited by that)."""

    seed: int = 0
    seconds: float | None = None  # wall-clock budget
    work: int | None = None  # work budget in the solver's own unit (games, simulations, ...)
    callback: Callable[[Improvement], None] | None = None
    demonstrations: Sequence[Solution] = ()
    options: Mapping[str, Any] = field(default_factory=dict)  # solver-specific settings


class Stopwatch:
    """Wall-clock time since construction, and whether a budget is spent."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.start = time.perf_counter()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def expired(self) -> bool:
        return self.seconds is not None and self.elapsed >= self.seconds


def settings_from_options(
    cls: type[Settings], solver: str, options: Mapping[str, Any], validate: Callable[[Settings], Settings]
) -> Settings:
    """``cls`` (a dataclass of a solver's settings) built from ``options`` and passed
    through ``validate`` (which checks ranges and returns the settings, coerced).

    An unknown name, a value of the wrong type (``TypeError``/``ValueError``, e.g.
    ``"abc"`` for a number) or a failed check raises :class:`SolverError` naming ``solver``.
    """
    known = set(cls.__dataclass_fields__)  # type: ignore[attr-defined]
    unknown = set(options) - known
    if unknown:
        raise SolverError(f"{solver}: unknown option(s) {sorted(unknown)} (have: {sorted(known)})")
    try:
        return validate(cls(**dict(options)))
    except (TypeError, ValueError) as exc:
        raise SolverError(f"{solver}: bad option value ({exc})") from None


def json_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` as they read back from JSON (tuples become lists, keys sorted), so
    settings computed now compare equal to settings stored in a file."""
    return json.loads(json.dumps(dict(settings), sort_keys=True, default=str))


class Solver(abc.ABC):
    """Base class: ``name`` is the command-line name; ``work_unit`` names the work budget."""

    name: str = ""
    work_unit: str = "games"

    def check_options(self, options: Mapping[str, Any]) -> None:
        """Raise :class:`SolverError` for any option this solver does not take.

        The default takes none: any name is an error. A solver with settings
        overrides this to accept its own names (and check their values where that
        is cheap); it must not do any solving work, so a sweep can check every
        solver's options before it runs a job.
        """
        if options:
            got = ", ".join(sorted(str(key) for key in options))
            raise SolverError(f"solver '{self.name}' takes no options (got: {got})")

    def settings(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Every setting a run with ``options`` uses, defaults filled in (JSON values).

        A sweep keeps them in each result record and refuses to take a record written
        under other settings for its job (a default changed since). The default: the
        options as given, for a solver whose defaults are not one settings object.
        Raises :class:`SolverError` as :meth:`check_options` does.
        """
        self.check_options(options)
        return json_settings(options)

    @abc.abstractmethod
    def solve(self, instance: Instance, request: SolveRequest = SolveRequest()) -> Solution:
        """Return the best solution found within the request's budget."""


def solution_from_game(
    instance: Instance,
    game: Game,
    *,
    solver: str,
    seed: int,
    wall_s: float,
    extra: Mapping[str, Any] | None = None,
) -> Solution:
    """The :class:`Solution` of a complete ``game`` (its actions, allocations, return)."""
    if not game.complete:
        raise ValueError("only a complete game is a solution")
    return Solution(
        instance=instance.name,
        instance_sha256=instance.sha256,
        solver=solver,
        seed=seed,
        wall_s=wall_s,
        allocations=tuple(game.allocations()),
        reward_s=game.return_s,
        normalized_reward=game.normalized_return,
        actions=tuple(game.actions()),
        extra=dict(extra or {}),
    )
