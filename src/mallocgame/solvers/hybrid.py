"""``best-of``: run several solvers and keep the best answer by simulated latency.

The paper's production setup ("-prod") keeps the better of the agent's and the
heuristic's mappings by measured latency; here the latency simulator stands in for
the measurement. Every candidate is checked before it is simulated; an invalid
candidate is never chosen.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from mallocgame.check import check_solution
from mallocgame.errors import SolverError
from mallocgame.instance import Instance
from mallocgame.options import setting
from mallocgame.simulate import simulate
from mallocgame.solution import Solution
from mallocgame.solvers.base import Run, Solver

__all__ = ["BestOfSolver", "BestOfConfig", "DEFAULT_CANDIDATES"]

DEFAULT_CANDIDATES = ("heuristic", "random")


@dataclass(frozen=True)
class BestOfConfig:
    """The settings of ``best-of``."""

    solvers: tuple[str, ...] = setting(DEFAULT_CANDIDATES, "the candidate solvers, each run with its defaults")

    def __post_init__(self) -> None:
        from mallocgame.solvers import solver_names

        if not self.solvers:
            raise ValueError("option solvers names no solver")
        unknown = [name for name in self.solvers if name not in solver_names()]
        if unknown:
            raise ValueError(f"option solvers: unknown solver {unknown[0]!r} (valid: {', '.join(solver_names())})")


class BestOfSolver(Solver, name="best-of", work_unit="per candidate", config=BestOfConfig):
    """Runs the ``solvers`` of its config and keeps the fastest valid answer.

    A wall-clock budget is split evenly between the candidates; a work budget is passed
    to each. ``info["candidates"]`` records every candidate's reward, simulated latency
    and validity, ``info["chosen"]`` the winner.
    """

    def settings(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Each candidate's settings (a candidate runs with its defaults), by name."""
        from mallocgame.solvers import get_solver

        return {"solvers": {name: get_solver(name).settings({}) for name in self.config(options).solvers}}

    def search(self, instance: Instance, config: BestOfConfig, run: Run) -> Solution:
        from mallocgame.solvers import get_solver

        names = config.solvers
        share = None if run.request.seconds is None else run.request.seconds / len(names)
        best: tuple[float, Solution] | None = None
        record: dict[str, dict[str, float | bool]] = {}
        for name in names:
            sub = replace(run.request, seconds=share, callback=None, options={})
            candidate = get_solver(name).solve(instance, sub)
            valid = check_solution(instance, candidate).ok
            latency = simulate(instance, candidate).latency_s if valid else float("inf")
            record[name] = {"reward_s": candidate.reward_s, "latency_s": latency, "valid": valid}
            if valid and (best is None or latency < best[0]):
                best = (latency, candidate)
        if best is None:
            raise SolverError(f"no candidate of {names} produced a valid solution")
        latency, chosen = best
        answer = replace(
            chosen, solver=self.name,
            info={**chosen.info, "chosen": chosen.solver, "latency_s": latency, "candidates": record},
        )
        run.improve(answer)
        return answer
