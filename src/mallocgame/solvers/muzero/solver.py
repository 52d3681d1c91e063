"""The ``muzero`` and ``muzero-nosearch`` solvers (SPEC section 8 names).

``muzero``: MMap-MuZero trained on the instance within the budget; the answer is the
best complete self-play game (where none is complete when the budget ends, the best
demonstration's game, ``info["fallback"]``; a run resumed from such an answer keeps it
until a self-play game beats it, so resuming never makes the answer worse).
``muzero-nosearch``: the same training, but the answer
is the best game the policy network plays alone, without search (the paper's
"learning only" ablation of section 5). Work unit: self-play games. Settings:
:class:`~mallocgame.solvers.muzero.config.MuZeroConfig`; JAX is imported only when
one of them solves.
"""

from __future__ import annotations

from dataclasses import replace

from mallocgame.game import Game
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import Run, Solver, missing_dependencies
from mallocgame.solvers.muzero.config import WHERE_FIELDS, MuZeroConfig

__all__ = ["MuZeroSolver", "MuZeroNoSearchSolver"]


class MuZeroSolver(Solver, name="muzero", work_unit="games", config=MuZeroConfig):
    """MMap-MuZero; the best self-play game found within the budget."""

    answer = "search"  # the answer: the best game played with search
    where_fields = WHERE_FIELDS

    def search(self, instance: Instance, config: MuZeroConfig, run: Run) -> Solution:
        return self.train(instance, config, run, solver_name=self.name)

    def train(
        self, instance: Instance, config: MuZeroConfig, run: Run, *, solver_name: str
    ) -> Solution:
        """Train within ``run``'s budgets (its clock, its work in games); the answer and
        every improvement passed to the callback are named ``solver_name``. A program
        with no buffers is answered without training: its game is complete at the start."""
        if instance.num_buffers == 0:
            answer = replace(run.game_answer(Game(instance), {"games": 0}), solver=solver_name)
            run.improve(answer)
            return answer
        try:
            from mallocgame.solvers.checkpoint import stderr_log
            from mallocgame.solvers.muzero.train import Trainer
        except ImportError as exc:
            raise missing_dependencies(self.name, "JAX, flax, optax and mctx", exc) from None
        trainer = Trainer(
            instance,
            config,
            seed=run.seed,
            answer=self.answer,
            checkpoint_dir=config.checkpoint_dir,
            log=stderr_log if config.progress else None,
            solver_name=solver_name,
            given_demonstrations=run.request.demonstrations,
        )
        progress = run.request.progress
        on_game = (
            None if progress is None else lambda *_: progress({"games": trainer.counters.games})
        )
        try:
            return trainer.run(
                games=run.request.work,
                callback=run.request.callback,
                clock=run.clock,
                on_game=on_game,
            )
        finally:
            trainer.close()


class MuZeroNoSearchSolver(MuZeroSolver, name="muzero-nosearch"):
    """MMap-MuZero trained as usual; the answer is played by the policy network, no search."""

    answer = "policy"
