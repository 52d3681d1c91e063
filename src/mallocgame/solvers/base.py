"""The contract every solver implements.

A solver has a command-line ``name``, a ``work_unit`` (what its work budget counts) and
a ``Config``: a frozen dataclass of its settings (:mod:`mallocgame.options`).
:meth:`Solver.solve` parses ``request.options`` into the ``Config`` once, starts the
stopwatch and hands a :class:`Run` to :meth:`Solver.search`, which is all a solver
implements: it searches, reports each new best answer with :meth:`Run.improve` and
returns its answer, built with :meth:`Run.game_answer` or :meth:`Run.mapping_answer`.
The base class stamps the answer with the solver's name, the seed and the wall time.

Reproducibility: with a work budget and no wall-clock budget, the same seed gives the
same answer. With a wall-clock budget the work done is recorded in ``Solution.work``.
"""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, ClassVar, Mapping, Sequence

from mallocgame.game.state import Game
from mallocgame.instance import Instance
from mallocgame.latency import normalize, reward_normalizer
from mallocgame.solution import Allocation, Solution
from mallocgame.options import json_settings, parse_config

__all__ = ["Improvement", "SolveRequest", "Solver", "Stopwatch", "Run", "NoConfig", "solution_from_game"]


@dataclass(frozen=True)
class Improvement:
    """A new best solution, as passed to :attr:`SolveRequest.callback`."""

    solution: Solution
    elapsed_s: float  # wall-clock seconds since the solver started
    work: Mapping[str, int]  # work done so far (games, simulations, ...)


@dataclass(frozen=True)
class SolveRequest:
    """How to solve: the seed, the budgets (``None``: not limited by that), options."""

    seed: int = 0
    seconds: float | None = None  # wall-clock budget, seconds
    work: int | None = None  # work budget in the solver's own unit (games, simulations, ...)
    callback: Callable[[Improvement], None] | None = None  # called on every new best answer
    demonstrations: Sequence[Solution] = ()
    options: Mapping[str, Any] = field(default_factory=dict)  # the solver's settings by name


@dataclass(frozen=True)
class NoConfig:
    """The settings of a solver that takes none."""


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


def solution_from_game(
    instance: Instance,
    game: Game,
    *,
    solver: str,
    seed: int,
    wall_s: float,
    work: Mapping[str, int] | None = None,
    info: Mapping[str, Any] | None = None,
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
        work=dict(work or {}),
        info=dict(info or {}),
    )


class Run:
    """One :meth:`Solver.solve` in progress: the request, its stopwatch, and answers."""

    def __init__(self, solver: str, instance: Instance, request: SolveRequest, clock: Stopwatch) -> None:
        self.solver = solver
        self.instance = instance
        self.request = request
        self.clock = clock
        self._normalizer: float | None = None

    @property
    def seed(self) -> int:
        return self.request.seed

    @property
    def elapsed(self) -> float:
        """Wall-clock seconds since the solve started."""
        return self.clock.elapsed

    def expired(self) -> bool:
        """Whether the wall-clock budget is spent (never, without one)."""
        return self.clock.expired()

    def game_answer(
        self, game: Game, work: Mapping[str, int], *, bound_s: float | None = None,
        info: Mapping[str, Any] | None = None,
    ) -> Solution:
        """The answer of a complete ``game``."""
        answer = solution_from_game(
            self.instance, game, solver=self.solver, seed=self.seed, wall_s=self.elapsed, work=work, info=info,
        )
        return replace(answer, bound_s=bound_s)

    def mapping_answer(
        self, allocations: Sequence[Allocation], reward_s: float, work: Mapping[str, int], *,
        bound_s: float | None = None, info: Mapping[str, Any] | None = None,
    ) -> Solution:
        """The answer of a mapping found outside the game (``actions`` is ``None``);
        ``reward_s`` is its exact reward (:func:`mallocgame.latency.mapping_reward`)."""
        if self._normalizer is None:
            self._normalizer = reward_normalizer(self.instance)
        return Solution(
            instance=self.instance.name,
            instance_sha256=self.instance.sha256,
            solver=self.solver,
            seed=self.seed,
            wall_s=self.elapsed,
            allocations=tuple(allocations),
            reward_s=reward_s,
            normalized_reward=normalize(self.instance, reward_s, self._normalizer),
            actions=None,
            work=dict(work),
            bound_s=bound_s,
            info=dict(info or {}),
        )

    def improve(self, answer: Solution) -> None:
        """Report a new best ``answer`` to the request's callback (if any)."""
        if self.request.callback is not None:
            self.request.callback(Improvement(answer, self.elapsed, answer.work))


class Solver(abc.ABC):
    """Base class: a solver declares itself in its class line and implements :meth:`search`::

        class EsSolver(Solver, name="es", work_unit="games", config=EsConfig): ...

    ``name`` is its registry name, ``work_unit`` what ``SolveRequest.work`` counts, and
    ``config`` a frozen dataclass of its settings (:mod:`mallocgame.options`; default
    :class:`NoConfig`). A subclass that leaves one out inherits its parent's; a solver
    without a name, or a ``config`` that is not a frozen dataclass, is a ``TypeError``
    where the class is defined.
    """

    name: ClassVar[str] = ""
    work_unit: ClassVar[str] = "games"
    Config: ClassVar[type] = NoConfig
    where_fields: ClassVar[tuple[str, ...]] = ()
    """Settings of where a run keeps its files and what it prints: left out of :meth:`settings`."""

    def __init_subclass__(
        cls, *, name: str | None = None, work_unit: str | None = None, config: type | None = None, **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = name if name is not None else cls.name
        cls.work_unit = work_unit if work_unit is not None else cls.work_unit
        cls.Config = config if config is not None else cls.Config
        if not cls.name:
            raise TypeError(f"{cls.__name__}: a solver declares its name (class ...(Solver, name=...))")
        params = getattr(cls.Config, "__dataclass_params__", None)
        if params is None or not params.frozen:
            raise TypeError(f"{cls.__name__}: config {cls.Config!r} is not a frozen dataclass")

    def config(self, options: Mapping[str, Any]) -> Any:
        """``options`` parsed into this solver's ``Config``; :class:`SolverError` if bad.
        Does no solving work, so a sweep checks every job's options before it runs one."""
        return parse_config(self.Config, options, self.name)

    def check_options(self, options: Mapping[str, Any]) -> None:
        """Raise :class:`~mallocgame.errors.SolverError` for a bad option name or value."""
        self.config(options)

    def settings(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Every setting a run with ``options`` uses, defaults filled in (JSON values),
        but :attr:`where_fields` (they do not change the answer).

        A sweep keeps them in each record and refuses a record written under other
        settings for its job (a default changed since).
        """
        settings = json_settings(self.config(options))
        return {k: v for k, v in settings.items() if k not in self.where_fields}

    def solve(self, instance: Instance, request: SolveRequest = SolveRequest()) -> Solution:
        """The best answer found within the request's budget."""
        clock = Stopwatch(request.seconds)
        config = self.config(request.options)
        answer = self.search(instance, config, Run(self.name, instance, request, clock))
        return replace(answer, solver=self.name, seed=request.seed, wall_s=clock.elapsed)

    @abc.abstractmethod
    def search(self, instance: Instance, config: Any, run: Run) -> Solution:
        """Search ``instance`` under ``config`` within ``run``'s budgets; return the answer."""
