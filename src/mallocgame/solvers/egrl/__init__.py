"""EGRL (Khadka et al., ICLR 2021; the MARL report's agent) on JAX, flax and optax.

Modules, one job each: ``config`` (the settings), ``graph`` (the program as a graph
with static node features), ``networks`` (Graph U-Net, actor, critics), ``proposals``
(playing a whole proposal through the game; fitness), ``population`` (graph policies
and Boltzmann chromosomes; selection, crossover, mutation), ``replay`` (the shared
replay buffer), ``sac`` (the discrete soft actor-critic learner), ``trainer`` (the
generations, budgets, checkpoints), ``solver`` (the ``egrl`` solver).

Only ``solver`` and ``config`` are imported by the solver registry; JAX is imported
only when ``egrl`` solves. The design: docs/egrl.md.
"""

from mallocgame.solvers.egrl.config import EgrlConfig
from mallocgame.solvers.egrl.solver import EgrlSolver

__all__ = ["EgrlSolver", "EgrlConfig"]
