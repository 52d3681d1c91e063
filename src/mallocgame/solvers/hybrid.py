"""``best-of``: run several solvers and keep the best answer by simulated latency.

The paper's production setup ("-prod") keeps the better of the agent's and the
heuristic's mappings by measured latency; here the latency simulator stands in for
the measurement. Every candidate is checked before it is simulated; an invalid
candidate is never chosen.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

from mallocgame.check import check_solution
from mallocgame.errors import SolverError
from mallocgame.instance import Instance
from mallocgame.simulate import simulate
from mallocgame.solution import Solution
from mallocgame.solvers.base import Improvement, SolveRequest, Solver, Stopwatch

__all__ = ["BestOfSolver", "DEFAULT_CANDIDATES"]

DEFAULT_CANDIDATES = ("heuristic", "random")


class BestOfSolver(Solver):
    """Runs ``options["solvers"]`` (default :data:`DEFAULT_CANDIDATES`) and keeps the fastest.

    ``options["solvers"]`` is a list of solver names or one comma-separated string
    (``--option solvers=heuristic,random``); it is the only option. A wall-clock
    budget is split evenly between the candidates; a work budget is passed to each.
    ``extra["candidates"]`` records every candidate's reward, simulated latency and
    validity, ``extra["chosen"]`` the winner.
    """

    name = "best-of"
    work_unit = "per candidate"

    def __init__(self, candidates: Sequence[str] | None = None, name: str | None = None) -> None:
        self.candidates = tuple(candidates) if candidates else None
        if name:
            self.name = name

    def check_options(self, options: Mapping[str, Any]) -> None:
        """Only ``solvers``, naming at least one solver of this build."""
        self._candidates(options)

    def settings(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Each candidate's settings (a candidate runs with its defaults), by name."""
        from mallocgame.solvers import get_solver

        return {"solvers": {name: get_solver(name).settings({}) for name in self._candidates(options)}}

    def _candidates(self, options: Mapping[str, Any]) -> tuple[str, ...]:
        """The candidate solvers' names; :class:`SolverError` for a bad option."""
        from mallocgame.solvers import get_solver

        unknown = sorted(str(key) for key in options if key != "solvers")
        if unknown:
            raise SolverError(f"unknown {self.name} option(s) {', '.join(unknown)} (known: solvers)")
        value = options.get("solvers", self.candidates or DEFAULT_CANDIDATES)
        if isinstance(value, str):
            value = value.split(",")
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise SolverError(f"{self.name} option solvers must be solver names, not {value!r}")
        names = tuple(v.strip() for v in value if v.strip())
        if not names:
            raise SolverError(f"{self.name} option solvers names no solver")
        for name in names:
            get_solver(name)  # an unknown or unbuilt name raises SolverError
        return names

    def solve(self, instance: Instance, request: SolveRequest = SolveRequest()) -> Solution:
        from mallocgame.solvers import get_solver

        names = self._candidates(request.options)
        clock = Stopwatch(request.seconds)
        share = None if request.seconds is None else request.seconds / len(names)
        best: tuple[float, Solution] | None = None
        record: dict[str, dict[str, float | bool]] = {}
        for name in names:
            sub = replace(request, seconds=share, callback=None, options={})
            candidate = get_solver(name).solve(instance, sub)
            valid = check_solution(instance, candidate).ok
            latency = simulate(instance, candidate).latency_s if valid else float("inf")
            record[name] = {"reward_s": candidate.reward_s, "latency_s": latency, "valid": valid}
            if valid and (best is None or latency < best[0]):
                best = (latency, candidate)
        if best is None:
            raise SolverError(f"no candidate of {names} produced a valid solution")
        latency, chosen = best
        solution = replace(
            chosen,
            solver=self.name,
            seed=request.seed,
            wall_s=clock.elapsed,
            extra={**chosen.extra, "chosen": chosen.solver, "latency_s": latency, "candidates": record},
        )
        if request.callback is not None:
            request.callback(Improvement(solution, clock.elapsed, {"candidates": len(names)}))
        return solution
