"""XLA's own memory-space assignment as a legal answer of the game: the solution ``xla``.

:func:`~mallocgame.frontends.xla_placement.placement_solution` reads XLA's decisions as
XLA made them. That reading may break the game's rules: XLA runs copies side by side
(the game's copy intervals share at most one step), finishes copies sooner than the cost
model's supply allows, splits alias groups, or uses more bytes than the instance's fast
memory (the game's rules are stricter than a real compiler's, and its cost model is not
XLA's). :func:`xla_answer` keeps the reading where it passes the checker; otherwise it
projects it (:func:`~mallocgame.solvers.projection.project`) onto the closest legal game
trajectory, whose fast set is XLA's but for what the game's rules add or take away: where
XLA split an alias group, or kept a tensor resident, the game may place more of the group
or of the tensor's reads in fast memory than XLA did (docs/tpu.md). The result says both:
the legal answer
(checked), and what the raw reading broke and how much of its reward the legal one keeps.

The solver ``xla`` (:class:`XlaSolver`) answers with it for a program frozen with XLA's
placement (the ``tpu-v1`` and ``tpu-v2`` suites,
:func:`~mallocgame.workloads.suite.suite_placement`),
read in the fast memory space of the TPU target it was compiled for; one pass, no search,
no budget needed. Any other instance is a :class:`~mallocgame.errors.SolverError`. The
projection with its whole repair takes minutes on the largest programs, so
:func:`freeze_xla_answers` freezes each suite program's legal answer beside its placement
(``extract --suite`` runs it); :func:`frozen_xla_answer` takes the frozen answer where it
is of the same instance and passes the checker, and computes it otherwise.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from mallocgame.check import FailureKind, check_solution
from mallocgame.errors import SolverError
from mallocgame.frontends.tpu import fast_spaces_of
from mallocgame.frontends.xla_placement import (
    XlaPlacement,
    placement_solution,
)
from mallocgame.instance import Instance
from mallocgame.solution import Solution, load_solution, save_solution
from mallocgame.solvers.base import NoConfig, Run, Solver
from mallocgame.solvers.projection import DEFAULT_REPAIRS, project
from mallocgame.workloads.suite import suite_instance, suite_placement, xla_answer_path

__all__ = ["XlaAnswer", "xla_answer", "frozen_xla_answer", "freeze_xla_answers", "XlaSolver"]


@dataclass(frozen=True)
class XlaAnswer:
    """``solution``: XLA's placement as a legal answer (passes the checker). ``raw``: the
    placement as XLA made it, ``raw_failures`` the checker's failure kinds on it with
    their counts (empty: ``solution`` is ``raw``), ``kept_fraction`` the legal answer's
    reward over the raw one's (1.0 when nothing was projected)."""

    solution: Solution
    raw: Solution
    raw_failures: Mapping[FailureKind, int]
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
    its TPU target: the frozen legal answer where there is one of this instance that passes
    the checker, else computed; ``None`` for any other instance."""
    placement = suite_placement(instance.name)
    if placement is None:
        return None
    fast = fast_spaces_of(instance.source.get("target"))
    path = xla_answer_path(instance.name)
    if path is not None and path.is_file():
        frozen = load_solution(path)
        if frozen.instance_sha256 == instance.sha256 and check_solution(instance, frozen).ok:
            raw = placement_solution(instance, placement, fast_spaces=fast)
            failures = dict(frozen.info.get("raw_failures", {}))
            kept = float(frozen.info.get("kept_fraction", 1.0))
            return XlaAnswer(frozen if failures else raw, raw, failures, kept)
    return xla_answer(instance, placement, fast)


def freeze_xla_answers(
    names: Iterable[str], progress: Callable[[str], None] | None = None
) -> dict[str, float]:
    """Compute and write the legal answer of XLA's placement of each suite program in
    ``names`` (those frozen with a placement) beside it; seconds per program."""
    durations: dict[str, float] = {}
    for name in names:
        path, placement = xla_answer_path(name), suite_placement(name)
        if path is None or placement is None:
            continue
        instance = suite_instance(name)
        start = time.perf_counter()
        fast = fast_spaces_of(instance.source.get("target"))
        found = xla_answer(instance, placement, fast)
        seconds = time.perf_counter() - start
        info = {**found.solution.info, "kept_fraction": found.kept_fraction}
        save_solution(replace(found.solution, wall_s=seconds, info=info), path)
        durations[name] = seconds
        if progress is not None:
            progress(
                f"{name}: XLA's answer {found.solution.normalized_reward:.4f}, {seconds:.1f} s"
            )
    return durations


class XlaSolver(Solver, name="xla", work_unit="passes"):
    """XLA's own placement of a program compiled for a TPU, as a legal answer."""

    def search(self, instance: Instance, config: NoConfig, run: Run) -> Solution:
        found = frozen_xla_answer(instance)
        if found is None:
            raise SolverError(
                f"xla: {instance.name} has no XLA placement (the solver answers for programs "
                "frozen with one: the tpu-v1 and tpu-v2 suites; for your own, extract --target TPU "
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
