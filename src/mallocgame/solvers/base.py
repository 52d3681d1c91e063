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
import math
import numbers
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, ClassVar

from mallocgame.errors import InstanceError, SolverError
from mallocgame.game.state import Game
from mallocgame.instance import Instance
from mallocgame.latency import exact_mapping_reward, exact_normalized, exact_reward_normalizer
from mallocgame.limits import MAX_SECONDS, MAX_SEED, MAX_WORK
from mallocgame.options import json_settings, parse_config
from mallocgame.solution import Allocation, Solution

__all__ = [
    "Improvement",
    "SolveRequest",
    "Solver",
    "Stopwatch",
    "Run",
    "NoConfig",
    "solution_from_game",
    "missing_dependencies",
    "MAX_SEED",
    "MAX_SECONDS",
    "MAX_WORK",
]


def missing_dependencies(solver: str, needs: str, exc: ImportError) -> SolverError:
    """The one-line error of ``solver``, whose optional dependencies (``needs``: "JAX,
    flax and optax") failed to import with ``exc``: it names the extra that brings them."""
    return SolverError(f"{solver} needs {needs} (pip install 'mallocgame[muzero]'): {exc}")


@dataclass(frozen=True)
class Improvement:
    """A new best solution by the solver's own objective, as passed to
    :attr:`SolveRequest.callback`: the answer the solver holds from then on.

    Most solvers rank their answers by reward, so each report has a higher reward than
    the one before. ``msa-search`` ranks by simulated latency
    (:func:`mallocgame.simulate.simulate`): each report is strictly faster in simulation
    than the one before, and its reward can be lower than an earlier report's.
    ``best-of`` reports once, its fastest valid candidate, which need not be the one of
    highest reward; ``muzero-prod`` reports its candidates in turn (its module says
    which). A curve drawn from the reports (:mod:`mallocgame.curves`) shows at each time
    the reward of the answer held then, which need not rise.
    """

    solution: Solution
    elapsed_s: float  # wall-clock seconds since the solver started
    work: Mapping[str, int | float]  # work done so far (games, simulations, ...)


@dataclass(frozen=True)
class SolveRequest:
    """How to solve: the seed, the budgets (``None``: not limited by that), options.

    ``seed`` is a whole number in ``0 .. MAX_SEED``, ``seconds`` a finite number in
    ``(0, MAX_SECONDS]``, ``work`` a whole number in ``1 .. MAX_WORK`` (``bool`` is not a
    number here), ``demonstrations`` a sequence of :class:`~mallocgame.solution.Solution`
    objects (kept as a tuple); anything else is a :class:`~mallocgame.errors.SolverError`
    of one line, raised where the request is made, before any solver runs.
    """

    seed: int = 0
    seconds: float | None = None  # wall-clock budget, seconds
    work: int | None = None  # work budget in the solver's own unit (games, simulations, ...)
    callback: Callable[[Improvement], None] | None = None  # every new best (Improvement)
    # called with the work done so far as it grows (:meth:`Run.spent`, in the solver's
    # unit); by a solver that counts nothing as it goes, with its answer's ``work`` once
    progress: Callable[[Mapping[str, int | float]], None] | None = None
    demonstrations: Sequence[Solution] = ()  # other solvers' answers (muzero-prod: XLA's)
    options: Mapping[str, Any] = field(default_factory=dict)  # the solver's settings by name

    def __post_init__(self) -> None:
        if not _whole(self.seed) or not 0 <= self.seed <= MAX_SEED:
            raise SolverError(f"seed must be a whole number from 0 to 2**63 - 1, not {self.seed!r}")
        object.__setattr__(self, "seed", int(self.seed))
        if self.seconds is not None:
            if isinstance(self.seconds, bool) or not isinstance(self.seconds, numbers.Real):
                raise SolverError(
                    f"seconds (the wall-clock budget) must be a number, not {self.seconds!r}"
                )
            if not (math.isfinite(self.seconds) and 0 < self.seconds <= MAX_SECONDS):
                raise SolverError(
                    f"seconds (the wall-clock budget) must be in (0, {MAX_SECONDS:.0f}] (7 days), "
                    f"not {self.seconds!r}"
                )
            object.__setattr__(self, "seconds", float(self.seconds))
        if self.work is not None:
            if not _whole(self.work) or not 1 <= self.work <= MAX_WORK:
                raise SolverError(
                    f"work (the work budget) must be a whole number from 1 to 2**53, "
                    f"not {self.work!r}"
                )
            object.__setattr__(self, "work", int(self.work))
        if self.callback is not None and not callable(self.callback):
            raise SolverError(f"callback must be callable or None, not {self.callback!r}")
        if self.progress is not None and not callable(self.progress):
            raise SolverError(f"progress must be callable or None, not {self.progress!r}")
        demonstrations = self.demonstrations
        if isinstance(demonstrations, (str, bytes, Mapping)) or not isinstance(
            demonstrations, Sequence
        ):
            raise SolverError(
                f"demonstrations must be a sequence of Solution objects (other solvers' "
                f"answers), not {type(demonstrations).__name__}"
            )
        for i, demonstration in enumerate(demonstrations):
            if not isinstance(demonstration, Solution):
                hint = (
                    " (solver names go in muzero's option demonstrations)"
                    if isinstance(demonstration, str)
                    else ""
                )
                raise SolverError(
                    f"demonstrations[{i}] must be a Solution (another solver's answer), "
                    f"not {type(demonstration).__name__}{hint}"
                )
        object.__setattr__(self, "demonstrations", tuple(demonstrations))
        if not isinstance(self.options, Mapping):
            raise SolverError(
                f"options must be a mapping of option names to values, not {self.options!r}"
            )


def _whole(value: Any) -> bool:
    """An integer that is not a ``bool`` (NumPy's integers included)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


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

    def until(self, fraction: float) -> Stopwatch:
        """A stopwatch started with this one whose budget is ``fraction`` of this one's
        (none if this one has none): the first part of a run split in two."""
        part = Stopwatch(None if self.seconds is None else self.seconds * fraction)
        part.start = self.start
        return part

    def less(self, seconds: float) -> Stopwatch:
        """A stopwatch started with this one whose budget ends ``seconds`` earlier (not
        before its start; none if this one has none): time kept for what follows."""
        part = Stopwatch(None if self.seconds is None else max(0.0, self.seconds - seconds))
        part.start = self.start
        return part


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
    """The :class:`Solution` of a complete ``game``: its actions and allocations, and as
    ``reward_s`` its return evaluated exactly (:func:`mallocgame.latency.exact_mapping_reward`,
    rounded once) rather than the game's float64 running sum, which large cancelling
    latencies can leave far from it (SPEC section 7 holds the claim to the exact value)."""
    if not game.complete:
        raise ValueError("only a complete game is a solution")
    allocations = tuple(game.allocations())
    reward = exact_mapping_reward(instance, (a.buffer for a in allocations))
    return Solution(
        instance=instance.name,
        instance_sha256=instance.sha256,
        solver=solver,
        seed=seed,
        wall_s=wall_s,
        allocations=allocations,
        reward_s=float(reward),
        normalized_reward=exact_normalized(reward, exact_reward_normalizer(instance)),
        actions=tuple(game.actions()),
        work=dict(work or {}),
        info=dict(info or {}),
    )


class _CountedProgress:
    """A request's ``progress``, counting its calls (:meth:`Solver.solve` reports the
    answer's work to a ``progress`` the solver never called)."""

    def __init__(self, progress: Callable[[Mapping[str, int | float]], None]) -> None:
        self.progress = progress
        self.calls = 0

    def __call__(self, work: Mapping[str, int | float]) -> None:
        self.calls += 1
        self.progress(work)


class Run:
    """One :meth:`Solver.solve` in progress: the request, its stopwatch, and answers."""

    def __init__(
        self,
        solver: str,
        instance: Instance,
        request: SolveRequest,
        clock: Stopwatch,
        default_work: int | None = None,
        work_unit: str = "work",
    ) -> None:
        self.solver = solver
        self.instance = instance
        self.request = request
        self.clock = clock
        self.work_unit = work_unit  # the key of the work :meth:`spent` reports to progress
        self._reported = 0  # the work last reported to the request's progress
        self.work_budget: int | None = (
            request.work
            if request.work is not None
            else (default_work if request.seconds is None else None)
        )
        """The work budget in the solver's unit: the request's; without one, the solver's
        default work when the request has no wall-clock budget either; else ``None`` (the
        clock alone decides)."""

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

    def work_left(self, done: int) -> int | None:
        """Work left of :attr:`work_budget` after ``done`` units (``None``: no work budget)."""
        return None if self.work_budget is None else self.work_budget - done

    def spent(self, done: int) -> bool:
        """Whether, after ``done`` units of work, the work or the wall-clock budget is spent;
        ``done`` goes to the request's ``progress`` where it grew."""
        if self.request.progress is not None and done > self._reported:
            self._reported = done
            self.request.progress({self.work_unit: done})
        left = self.work_left(done)
        return (left is not None and left <= 0) or self.clock.expired()

    def game_answer(
        self,
        game: Game,
        work: Mapping[str, int],
        *,
        bound_s: float | None = None,
        info: Mapping[str, Any] | None = None,
    ) -> Solution:
        """The answer of a complete ``game``."""
        answer = solution_from_game(
            self.instance,
            game,
            solver=self.solver,
            seed=self.seed,
            wall_s=self.elapsed,
            work=work,
            info=info,
        )
        return replace(answer, bound_s=bound_s)

    def mapping_answer(
        self,
        allocations: Sequence[Allocation],
        reward_s: float,
        work: Mapping[str, int],
        *,
        bound_s: float | None = None,
        info: Mapping[str, Any] | None = None,
    ) -> Solution:
        """The answer of a mapping found outside the game (``actions`` is ``None``);
        ``reward_s`` is its exact reward (:func:`mallocgame.latency.mapping_reward`)."""
        return Solution(
            instance=self.instance.name,
            instance_sha256=self.instance.sha256,
            solver=self.solver,
            seed=self.seed,
            wall_s=self.elapsed,
            allocations=tuple(allocations),
            reward_s=reward_s,
            normalized_reward=exact_normalized(
                Fraction(reward_s), exact_reward_normalizer(self.instance)
            ),
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
    default_work: ClassVar[int | None] = None
    """Work done when a request sets no budget at all (``None``: the solver's own rule)."""
    Config: ClassVar[type] = NoConfig
    where_fields: ClassVar[tuple[str, ...]] = ()
    """Settings of where a run keeps its files and what it prints: left out of :meth:`settings`."""

    def __init_subclass__(
        cls,
        *,
        name: str | None = None,
        work_unit: str | None = None,
        config: type | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = name if name is not None else cls.name
        cls.work_unit = work_unit if work_unit is not None else cls.work_unit
        cls.Config = config if config is not None else cls.Config
        if not cls.name:
            raise TypeError(
                f"{cls.__name__}: a solver declares its name (class ...(Solver, name=...))"
            )
        params = getattr(cls.Config, "__dataclass_params__", None)
        if params is None or not params.frozen:
            raise TypeError(f"{cls.__name__}: config {cls.Config!r} is not a frozen dataclass")

    def config(self, options: Mapping[str, Any]) -> Any:
        """``options`` parsed into this solver's ``Config``; :class:`SolverError` if bad.
        Does no solving work, so a sweep checks every job's options before it runs one."""
        return parse_config(self.Config, options, self.name)

    def default_work_for(self, config: Any) -> int | None:
        """:attr:`default_work`, or a default that depends on the settings (override)."""
        return self.default_work

    def check_options(
        self, options: Mapping[str, Any], *, seconds: float | None = None, work: int | None = None
    ) -> None:
        """Raise :class:`~mallocgame.errors.SolverError` for a bad option name or value, and
        for options the solver cannot honour under a budget of ``seconds`` (wall clock)
        and ``work`` where they are given (:meth:`check_budget`)."""
        self.check_budget(self.config(options), seconds, work)

    def check_budget(self, config: Any, seconds: float | None, work: int | None) -> None:
        """Raise :class:`~mallocgame.errors.SolverError` where ``config`` cannot be honoured
        under a budget of ``seconds`` and ``work`` (``None``: no such budget); checked by
        :meth:`solve` before any work. Every budget suits every setting, unless a solver
        says otherwise."""
        return None

    def settings(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Every setting a run with ``options`` uses, defaults filled in (JSON values),
        but :attr:`where_fields` (they do not change the answer).

        A sweep keeps them in each record and refuses a record written under other
        settings for its job (a default changed since).
        """
        settings = json_settings(self.config(options))
        return {k: v for k, v in settings.items() if k not in self.where_fields}

    def solve(self, instance: Instance, request: SolveRequest = SolveRequest()) -> Solution:
        """The best answer found within the request's budget; :class:`InstanceError` if
        ``instance`` is not an :class:`Instance`, :class:`SolverError` if ``request`` is
        not a :class:`SolveRequest` or its options are bad (all before any work). Under a
        wall-clock budget the game's compiled kernels are loaded before the clock starts
        (:func:`~mallocgame.game.state.warm_game_kernels`, once a process): the budget is
        the solver's alone, not the half second a fresh process takes to load them."""
        if not isinstance(instance, Instance):
            raise InstanceError(f"{self.name}: expected an Instance to solve, not {instance!r:.80}")
        if not isinstance(request, SolveRequest):
            raise SolverError(f"{self.name}: expected a SolveRequest, not {request!r:.80}")
        config = self.config(request.options)
        self.check_budget(config, request.seconds, request.work)
        if request.seconds is not None:
            from mallocgame.game.state import warm_game_kernels

            warm_game_kernels(instance)
        clock = Stopwatch(request.seconds)
        counted = None if request.progress is None else _CountedProgress(request.progress)
        run = Run(
            self.name,
            instance,
            request if counted is None else replace(request, progress=counted),
            clock,
            self.default_work_for(config),
            self.work_unit,
        )
        answer = self.search(instance, config, run)
        if counted is not None and counted.calls == 0:  # a solver that said nothing of its
            counted(dict(answer.work))  # work as it went: the work it did, once
        return replace(answer, solver=self.name, seed=request.seed, wall_s=clock.elapsed)

    @abc.abstractmethod
    def search(self, instance: Instance, config: Any, run: Run) -> Solution:
        """Search ``instance`` under ``config`` within ``run``'s budgets; return the answer."""
