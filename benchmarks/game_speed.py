"""Game speed: decisions per second and the cost of going back 100 decisions.

A decision is reading the legal mask, choosing, and stepping (through the
Drop-backup driver, as every solver plays). Policies: ``random`` (uniform over the
allowed actions) and ``greedy`` (Copy, else NoCopy, else Drop). ``forced loop``: how
many times faster a greedy game is when the decisions without a choice are played by
``DropBackup.play_forced`` and ``step_to_choice`` (one compiled loop, as ``es`` plays
them) than one by one.
Going back: undo 100 decisions from the middle of a greedy game (trail-based undo),
and, for comparison, ``clone`` of the whole state (a snapshot).

Usage: ``python benchmarks/game_speed.py [--sizes 1000 4000 16000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from mallocgame.bench.inputs import at_least
from mallocgame.game import Game, build_tables
from mallocgame.game.backup import DropBackup
from mallocgame.solvers.random import UniformPolicy
from mallocgame.workloads.synthetic import generate


def greedy(game: Game, allowed: np.ndarray) -> int:
    """Copy, else NoCopy, else Drop."""
    return int(np.argmax(allowed))


class Counting:
    """Wraps a policy and counts the decisions it makes."""

    def __init__(self, policy) -> None:
        self.policy = policy
        self.decisions = 0

    def __call__(self, game: Game, allowed: np.ndarray) -> int:
        self.decisions += 1
        return self.policy(game, allowed)


def decisions_per_second(game: Game, policy, repeat: int) -> tuple[float, float]:
    """Best-of-``repeat`` decisions/s over whole games, and the normalized return."""
    best = 0.0
    for _ in range(repeat):
        game.reset()
        counting = Counting(policy)
        start = time.perf_counter()
        DropBackup(game).play(counting)
        elapsed = time.perf_counter() - start
        best = max(best, counting.decisions / elapsed)
    return best, game.normalized_return


def greedy_game_seconds(game: Game, repeat: int, forced_loop: bool) -> float:
    """Best-of-``repeat`` seconds of one greedy game; with ``forced_loop``, the
    decisions without a choice played by :meth:`DropBackup.play_forced`."""
    best = float("inf")
    for _ in range(repeat):
        game.reset()
        start = time.perf_counter()
        driver = DropBackup(game)
        if forced_loop:
            allowed = driver.play_forced()
            while not game.complete:
                allowed = driver.step_to_choice(greedy(game, allowed))
        else:
            driver.play(greedy)
        best = min(best, time.perf_counter() - start)
    return best


def go_back_cost(game: Game, depth: int = 100, trials: int = 200) -> tuple[float, float]:
    """Median seconds to undo ``depth`` decisions mid-game, and to clone the state."""
    game.reset()
    DropBackup(game).play(greedy)
    trajectory = game.actions()
    game.undo_to(game.num_buffers // 2)
    mark = game.mark()
    actions = trajectory[mark - depth : mark]
    undo_times, clone_times = [], []
    for _ in range(trials):
        start = time.perf_counter()
        game.undo_to(mark - depth)
        undo_times.append(time.perf_counter() - start)
        for a in actions:
            game.step(a)
        start = time.perf_counter()
        game.clone()
        clone_times.append(time.perf_counter() - start)
    return float(np.median(undo_times)), float(np.median(clone_times))


def warm_up() -> None:
    """Compile (or load from numba's cache) every kernel the timings call, outside them:
    the game's, the Drop-backup's and the forced loop's (``play_forced``,
    ``step_to_choice``), which would otherwise weigh on the first size's ``forced loop``."""
    warm = Game(generate(200, seed=1))
    DropBackup(warm).play(greedy)
    warm.undo_to(0)
    greedy_game_seconds(warm, 1, forced_loop=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        type=at_least(200),  # going back undoes 100 decisions from the middle of a game
        nargs="+",
        default=[1000, 4000, 16000],
        help="buffers, at least 200 each (default 1000 4000 16000)",
    )
    parser.add_argument("--repeat", type=at_least(1), default=3, help="best of (default 3)")
    args = parser.parse_args()

    print(
        f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, "
        f"python {platform.python_version()}, numpy {np.__version__}"
    )
    warm_up()
    print(
        f"{'buffers':>8} {'random dec/s':>13} {'greedy dec/s':>13} {'forced loop':>12} "
        f"{'undo 100 (us)':>14} {'clone (us)':>11} {'greedy reward':>14}"
    )
    for n in args.sizes:
        # synthetic-v1's instances: those of the speeds recorded in docs/results.md
        inst = generate(n, seed=0, version=1)
        game = Game(inst, build_tables(inst))
        rnd, _ = decisions_per_second(game, UniformPolicy(np.random.default_rng(0)), args.repeat)
        grd, reward = decisions_per_second(game, greedy, args.repeat)
        one_by_one = greedy_game_seconds(game, args.repeat, forced_loop=False)
        looped = greedy_game_seconds(game, args.repeat, forced_loop=True)
        undo_s, clone_s = go_back_cost(game)
        print(
            f"{inst.num_buffers:>8} {rnd:>13,.0f} {grd:>13,.0f} {one_by_one / looped:>11.2f}x "
            f"{undo_s * 1e6:>14.1f} {clone_s * 1e6:>11.1f} {reward:>14.3f}"
        )


if __name__ == "__main__":
    main()
