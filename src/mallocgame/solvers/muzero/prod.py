"""``muzero-prod``: MMap-MuZero-prod, the production agent of the paper (section 5).

The heuristic answers first (seconds, even on 27,000 buffers), the rest of the budget
trains ``muzero``, whose candidate is the best of its self-play games and of the games
its policy network plays alone every ``eval_every`` learner steps (``answer="both"``:
on programs of thousands of buffers, 16 simulations of search per move play worse
than the network's own policy), and the answer is whichever of the two has the lower
simulated latency (:func:`~mallocgame.solvers.hybrid.choose_fastest`; on a tie the heuristic's).
So a ``muzero-prod`` answer is never slower in simulation than ``heuristic``'s, the
paper's guarantee with the simulator standing in for the measurement.

Settings: ``muzero``'s, with restarts inside the best game on by default
(:class:`~mallocgame.solvers.muzero.config.MuZeroProdConfig`: ``restart_fraction`` 0.5);
the heuristic runs with its defaults. Work unit: the agent's self-play games. The callback
sees the heuristic's answer first, then each new best game of the agent; their
``solver`` names them (``heuristic``, ``muzero``). The answer's ``info`` has
``chosen``, ``latency_s`` and ``candidates`` (each candidate's reward, normalized
reward, simulated latency and validity) beside the chosen candidate's own ``info``; its
``work`` is the agent's.
"""

from __future__ import annotations

from dataclasses import replace

from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import Run, SolveRequest
from mallocgame.solvers.heuristic import HeuristicSolver
from mallocgame.solvers.hybrid import choose_fastest
from mallocgame.solvers.muzero.config import MuZeroConfig, MuZeroProdConfig
from mallocgame.solvers.muzero.solver import MuZeroSolver

__all__ = ["MuZeroProdSolver", "AGENT", "BASELINE"]

AGENT = "muzero"  # the candidates' solver names
BASELINE = "heuristic"


class MuZeroProdSolver(MuZeroSolver, name="muzero-prod", config=MuZeroProdConfig):
    """The heuristic's mapping or MMap-MuZero's, whichever runs faster in simulation."""

    answer = "both"  # the agent's candidate: its best game, with search or its policy's alone

    def search(self, instance: Instance, config: MuZeroConfig, run: Run) -> Solution:
        baseline = HeuristicSolver().solve(instance, SolveRequest(seed=run.seed))
        run.improve(baseline)
        agent = self.train(instance, config, run, solver_name=AGENT)
        choice = choose_fastest(instance, [baseline, agent])
        return replace(choice.solution, work=agent.work, info=choice.info())
