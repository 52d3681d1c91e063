"""XLA's own memory-space assignment as a legal answer of the game: the solution ``xla``.

:func:`~mallocgame.frontends.xla_placement.placement_solution` reads XLA's decisions as
XLA made them. That reading may break the game's rules: XLA runs copies side by side
(the game's copy intervals share at most one step), finishes copies sooner than the cost
model's supply allows, splits alias groups, or uses more bytes than the instance's fast
memory (the game's rules are stricter than a real compiler's, and its cost model is not
XLA's). :func:`xla_answer` keeps the reading where it passes the checker; otherwise it
projects it (:func:`~mallocgame.solvers.projection.project`) onto the closest legal game
trajectory, whose fast set is a subset of XLA's. The result says both: the legal answer
(checked), and what the raw reading broke and how much of its reward the legal one keeps.

The solver ``xla`` (:class:`XlaSolver`) answers with it for a program frozen with XLA's
placement (the ``tpu-v1`` suite, :func:`~mallocgame.workloads.suite.suite_placement`),
read in the fast memory space of the TPU target it was compiled for; one pass, no search,
no budget needed. Any other instance is a :class:`~mallocgame.errors.SolverError`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from mallocgame.check import check_solution
from mallocgame.errors import SolverError
from mallocgame.frontends.tpu import TPU_TARGETS
from mallocgame.frontends.xla_placement import (
    DEFAULT_FAST_SPACES,
    XlaPlacement,
    placement_solution,
)
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import NoConfig, Run, Solver
from mallocgame.solvers.projection import DEFAULT_REPAIRS, project
from mallocgame.workloads.suite import suite_placement

__all__ = ["XlaAnswer", "xla_answer", "frozen_xla_answer", "XlaSolver"]


@dataclass(frozen=True)
class XlaAnswer:
    """``solution``: XLA's placement as a legal answer (passes the checker). ``raw``: the
    placement as XLA made it, ``raw_failures`` the checker's failure kinds on it with
    their counts (empty: ``solution`` is ``raw``), ``kept_fraction`` the legal answer's
    reward over the raw one's (1.0 when nothing was projected)."""

    solution: Solution
    raw: Solution
    raw_failures: Mapping[str, int]
    kept_fraction: float

    @property
    def projected(self) -> bool:
        return bool(self.raw_failures)


def xla_answer(
    instance: Instance,
    placement: XlaPlacement,
    fast_spaces: Iterable[int],
    *,
    repairs: int = DEFAULT_REPAIRS,
) -> XlaAnswer:
    """XLA's placement in ``instance`` as a legal answer (module docstring); deterministic."""
    raw = placement_solution(instance, placement, fast_spaces=fast_spaces)
    report = check_solution(instance, raw)
    if report.ok:
        return XlaAnswer(raw, raw, {}, 1.0)
    failures = dict(sorted(Counter(f.kind for f in report.failures).items()))
    legal, kept = project(instance, raw, solver="xla", repairs=repairs)
    info = {
        **raw.info,
        **legal.info,
        "raw_failures": failures,
        "raw_normalized_reward": raw.normalized_reward,
    }
    return XlaAnswer(replace(legal, info=info), raw, failures, kept)


def frozen_xla_answer(instance: Instance) -> XlaAnswer | None:
    """XLA's answer for ``instance`` where it is a program frozen with XLA's placement
    (:func:`~mallocgame.workloads.suite.suite_placement`), read in the fast memory space of
    its TPU target; ``None`` for any other instance."""
    placement = suite_placement(instance.name)
    if placement is None:
        return None
    target = instance.source.get("target")
    fast = TPU_TARGETS[target].fast_spaces if target in TPU_TARGETS else DEFAULT_FAST_SPACES
    return xla_answer(instance, placement, fast)


class XlaSolver(Solver, name="xla", work_unit="passes"):
    """XLA's own placement of a program compiled for a TPU, as a legal answer."""

    def search(self, instance: Instance, config: NoConfig, run: Run) -> Solution:
        found = frozen_xla_answer(instance)
        if found is None:
            raise SolverError(
                f"xla: {instance.name} has no XLA placement (the solver answers for programs "
                "frozen with one: the tpu-v1 suite; for your own, extract --target TPU "
                "--xla-solution FILE)"
            )
        answer = replace(
            found.solution,
            seed=run.seed,
            wall_s=run.elapsed,
            work={"passes": 1},
            info={**found.solution.info, "kept_fraction": found.kept_fraction},
        )
        run.improve(answer)
        return answer
