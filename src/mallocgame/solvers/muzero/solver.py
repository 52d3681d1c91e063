"""The ``muzero`` and ``muzero-nosearch`` solvers (SPEC section 8 names).

``muzero``: MMap-MuZero trained on the instance within the budget; the answer is the
best complete self-play game. ``muzero-nosearch``: the same training, but the answer
is the best game the policy network plays alone, without search (the paper's
"learning only" ablation of section 5). Work unit: self-play games.

Options (``SolveRequest.options``): any :class:`~mallocgame.solvers.muzero.config.MuZeroConfig`
field (``obs_``-prefixed for the observation), plus ``checkpoint_dir`` (checkpoints,
resume, and ``best.solution.json`` kept up to date) and ``progress`` (true: progress
lines on stderr).
"""

from __future__ import annotations

from typing import Any, Mapping

from mallocgame.errors import SolverError
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import SolveRequest, Solver, Stopwatch, json_settings

__all__ = ["MuZeroSolver", "MuZeroNoSearchSolver"]


class MuZeroSolver(Solver):
    """MMap-MuZero; the best self-play game found within the budget."""

    name = "muzero"
    work_unit = "games"
    answer = "search"

    def check_options(self, options: Mapping[str, Any]) -> None:
        """Any :class:`MuZeroConfig` field (checked as the run would), ``checkpoint_dir``, ``progress``."""
        self._config(options)

    def settings(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Every :class:`MuZeroConfig` field, defaults filled in (not ``checkpoint_dir``,
        ``progress``: where a run keeps its files and what it prints)."""
        import dataclasses

        return json_settings(dataclasses.asdict(self._config(options)))

    @staticmethod
    def _config(options: Mapping[str, Any]) -> Any:
        """The :class:`MuZeroConfig` of ``options`` (no JAX import)."""
        from mallocgame.solvers.muzero.config import coerce_option, config_from_options

        rest = dict(options)
        rest.pop("checkpoint_dir", None)
        coerce_option(rest.pop("progress", False), False, "progress")
        return config_from_options(rest)

    def solve(self, instance: Instance, request: SolveRequest = SolveRequest()) -> Solution:
        clock = Stopwatch(request.seconds)  # the budget covers imports, setup, compilation
        self.check_options(request.options)
        # JAX is imported only when a MuZero solver runs.
        try:
            from mallocgame.solvers.muzero.config import coerce_option, config_from_options
            from mallocgame.solvers.muzero.train import Trainer, stderr_log
        except ImportError as exc:
            raise SolverError(f"{self.name} needs JAX, flax, optax and mctx "
                              f"(pip install 'mallocgame[muzero]'): {exc}") from None

        options = dict(request.options)
        checkpoint_dir = options.pop("checkpoint_dir", None)
        progress = coerce_option(options.pop("progress", False), False, "progress")
        config = config_from_options(options)
        trainer = Trainer(
            instance, config, seed=request.seed, answer=self.answer, checkpoint_dir=checkpoint_dir,
            log=stderr_log if progress else None, solver_name=self.name,
        )
        return trainer.run(games=request.work, callback=request.callback, clock=clock)


class MuZeroNoSearchSolver(MuZeroSolver):
    """MMap-MuZero trained as usual; the answer is played by the policy network, no search."""

    name = "muzero-nosearch"
    answer = "policy"
