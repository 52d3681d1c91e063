"""MMap-MuZero (paper sections 4.3 and 5, appendix C) on JAX, flax, optax and mctx.

Modules: ``config`` (hyperparameters), ``transforms`` (value transform, two-hot),
``networks`` (representation, dynamics, prediction), ``search`` (batched mctx search),
``selfplay`` (lockstep games with Drop-backup), ``replay`` (games and training
batches), ``learner`` (loss and optimizer step), ``train`` (the loop, checkpoints),
``solver`` (the ``muzero`` and ``muzero-nosearch`` solvers).

Only ``solver`` is imported by the solver registry, and it imports JAX lazily.
"""

from mallocgame.solvers.muzero.solver import MuZeroNoSearchSolver, MuZeroSolver

__all__ = ["MuZeroSolver", "MuZeroNoSearchSolver"]
