"""The ``egrl`` solver (SPEC section 8): EGRL (Khadka et al., ICLR 2021), the MARL agent.

A mixed population of graph policies and Boltzmann chromosomes proposes whole
placements, evolves, and feeds a shared replay buffer from which a discrete soft
actor-critic learner trains a graph policy that rejoins the population every
generation (:mod:`~.trainer`; docs/egrl.md). Work unit: proposals evaluated (one
proposal = one complete game played with the nearest-allowed rule and Drop-backup).
Settings: :class:`~.config.EgrlConfig`; JAX, flax and optax are imported only when
the solver solves.
"""

from __future__ import annotations

from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import Run, Solver, missing_dependencies
from mallocgame.solvers.egrl.config import WHERE_FIELDS, EgrlConfig

__all__ = ["EgrlSolver"]


class EgrlSolver(Solver, name="egrl", work_unit="proposals", config=EgrlConfig):
    """EGRL: evolution of graph policies and Boltzmann chromosomes with a SAC learner."""

    where_fields = WHERE_FIELDS

    def search(self, instance: Instance, config: EgrlConfig, run: Run) -> Solution:
        try:
            from mallocgame.solvers.checkpoint import stderr_log
            from mallocgame.solvers.egrl.trainer import EgrlTrainer
        except ImportError as exc:
            raise missing_dependencies(self.name, "JAX, flax and optax", exc) from None
        trainer = EgrlTrainer(
            instance,
            config,
            seed=run.seed,
            solver_name=self.name,
            demonstrations=run.request.demonstrations,
            log=stderr_log if config.progress else None,
        )
        work = run.request.work
        return trainer.run(
            proposals=None if work is None else max(1, int(work)),
            clock=run.clock,
            callback=run.request.callback,
        )
