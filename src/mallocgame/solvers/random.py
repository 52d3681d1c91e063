"""``random``: uniform over the allowed actions, every game completed with Drop-backup.

With no budget it plays one game; with a work budget (games) or a wall-clock budget
it plays games until the budget is spent (at least one) and keeps the best. A game in
play when the wall clock is spent ends with Drop first, as ``greedy``'s does (a random
game of a program that backs up often can take many times a short budget); where that
game is the answer, ``info["random_until"]`` says at which buffer its policy changed.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from mallocgame.game.backup import DropBackup
from mallocgame.game.state import Game
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import NoConfig, Run, Solver
from mallocgame.solvers.greedy import UntilExpired

__all__ = ["RandomSolver", "UniformPolicy"]


class UniformPolicy:
    """Picks uniformly among the allowed actions, from a seeded numpy generator."""

    def __init__(self, rng: np.random.Generator, chunk: int = 4096) -> None:
        self._rng = rng
        self._chunk = chunk
        self._draws = rng.random(chunk)
        self._next = 0

    def __call__(self, game: Game, allowed: np.ndarray) -> int:
        choices = [a for a, ok in enumerate(allowed.tolist()) if ok]
        if self._next == self._chunk:
            self._draws = self._rng.random(self._chunk)
            self._next = 0
        u = self._draws[self._next]
        self._next += 1
        return choices[int(u * len(choices))]


class RandomSolver(Solver, name="random", work_unit="games"):
    """Random play with Drop-backup; the best of ``work`` games (or of the time budget)."""

    default_work = 1

    def search(self, instance: Instance, config: NoConfig, run: Run) -> Solution:
        policy = UniformPolicy(np.random.default_rng(run.seed))
        game = Game(instance)
        best: Solution | None = None
        best_return = -math.inf  # the game's float running sum of the best game so far
        games = backups = 0
        while best is None or not run.spent(games):
            game.reset()
            driver = DropBackup(game)
            timed = UntilExpired(policy, run)
            driver.play(timed)
            games += 1
            backups += driver.backups
            # games are ranked by their running sums, one with another; an answer's exact
            # reward (which a sum of cancelling latencies can be far from) decides whether
            # it improves, so what the callback sees only ever improves
            if best is None or game.return_s > best_return:
                best_return = game.return_s
                info = {} if timed.cut_at is None else {"random_until": timed.cut_at}
                answer = run.game_answer(game, {"games": games, "backups": backups}, info=info)
                if best is None or answer.reward_s > best.reward_s:
                    best = answer
                    run.improve(best)
        return replace(best, work={"games": games, "backups": backups})
