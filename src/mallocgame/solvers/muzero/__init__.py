"""MMap-MuZero (paper sections 4.3 and 5, appendix C) on JAX, flax, optax and mctx.

Modules: ``config`` (hyperparameters), ``transforms`` (value transform, two-hot),
``networks`` (representation, dynamics, prediction), ``search`` (batched mctx search),
``selfplay`` (lockstep games with Drop-backup), ``replay`` (games and training
batches), ``learner`` (loss and optimizer step), ``train`` (the loop, checkpoints),
``solver`` (the ``muzero`` and ``muzero-nosearch`` solvers), ``prod`` (``muzero-prod``:
the faster of the heuristic's mapping and the agent's).

Only ``solver`` and ``prod`` are imported by the solver registry; JAX is imported
only when one of them solves.
"""

from mallocgame.solvers.muzero.prod import MuZeroProdSolver
from mallocgame.solvers.muzero.solver import MuZeroNoSearchSolver, MuZeroSolver

__all__ = ["MuZeroSolver", "MuZeroNoSearchSolver", "MuZeroProdSolver"]
