"""Project any mapping onto a game trajectory (so it can seed game-playing agents).

A mapping made outside the game (the ``heuristic`` solver's, or any valid set of
allocations) chooses offsets and intervals the game cannot express: the game places
at the lowest offset that fits and copies over the shortest interval that covers the
demand. :func:`project` replays the mapping's *decisions* instead: for each buffer in
game order it plays the legal action closest to what the mapping did, under
Drop-backup (:class:`~mallocgame.game.backup.DropBackup`), so the game always
completes:

- the mapping placed the buffer with Copy (NoCopy): play Copy (NoCopy) if allowed,
  else the other fast action if allowed, else Drop;
- the mapping left the buffer in slow memory: play Drop if allowed, else (its alias
  group is already fast, or it reads a fast-resident tensor) a fast action;
- an output the mapping copied out falls back to NoCopy (fast-resident) only when
  the mapping also has every read of its tensor in fast memory, so the fallback
  never forces reads into fast memory that the mapping left in slow memory.

The result is a complete legal trajectory (a :class:`~mallocgame.solution.Solution`
with ``actions``) and ``kept_fraction`` = its reward / the mapping's reward
(:func:`~mallocgame.latency.mapping_reward`; 1.0 when the mapping's reward is 0).
For roofline latencies the projected fast set is a subset of the mapping's, so the
fraction is at most 1. A game trajectory's own allocations project back onto the
same trajectory (fraction 1).
"""

from __future__ import annotations

import time
from typing import Iterable

import numpy as np

from mallocgame.game.backup import DropBackup
from mallocgame.game.state import COPY, DROP, NOCOPY, Game
from mallocgame.instance import Instance
from mallocgame.latency import mapping_reward
from mallocgame.solution import Allocation, Solution
from mallocgame.solvers.base import solution_from_game

__all__ = ["project", "ProjectionPolicy"]


class ProjectionPolicy:
    """A Drop-backup policy that follows a mapping's decisions, buffer by buffer.

    ``wanted[b]`` is the mapping's action for buffer ``b`` (0 Copy, 1 NoCopy, 2 Drop);
    ``fallbacks`` counts the buffers where the wanted action was not allowed.
    """

    def __init__(self, instance: Instance, allocations: Iterable[Allocation]) -> None:
        n = instance.num_buffers
        self.wanted = np.full(n, DROP, dtype=np.int64)
        for a in allocations:
            if not 0 <= a.buffer < n:
                raise ValueError(f"allocation names unknown buffer {a.buffer}")
            self.wanted[a.buffer] = COPY if a.action == "Copy" else NOCOPY
        # An output may fall back to NoCopy (fast-resident) only if the mapping has all
        # of its tensor's reads in fast memory.
        reads_fast = np.ones(len(instance.tensors), dtype=bool)
        for b in instance.buffers:
            if not b.is_output and self.wanted[b.id] == DROP:
                reads_fast[b.tensor_id] = False
        self.resident_ok = np.array(
            [not b.is_output or reads_fast[b.tensor_id] for b in instance.buffers], dtype=bool
        )
        self.fallbacks = 0

    def __call__(self, game: Game, allowed: np.ndarray) -> int:
        b = game.current_buffer
        want = int(self.wanted[b])
        if allowed[want]:
            return want
        self.fallbacks += 1
        if want == DROP:
            order = (NOCOPY, COPY)
        elif want == COPY:
            order = (NOCOPY, DROP) if self.resident_ok[b] else (DROP, NOCOPY)
        else:
            order = (COPY, DROP)
        for action in order:
            if allowed[action]:
                return action
        raise AssertionError("Drop-backup offers at least one action")  # pragma: no cover


def project(
    instance: Instance,
    allocations: Iterable[Allocation] | Solution,
    *,
    solver: str | None = None,
    seed: int | None = None,
) -> tuple[Solution, float]:
    """The game trajectory closest to a mapping, and the fraction of its reward kept.

    Args:
        instance: the instance the mapping is for.
        allocations: the mapping's allocations, or a :class:`Solution` (its
            allocations; its solver name and seed are carried over).
        solver: the ``solver`` recorded in the result (default: the solution's solver,
            else ``"projection"``); ``seed`` likewise (default 0).

    Returns:
        ``(solution, kept_fraction)``: a complete trajectory (``actions`` set; it
        passes :func:`mallocgame.check.check_solution`) whose ``info`` records
        ``projected_from`` (the mapping's reward), ``kept_fraction``, ``fallbacks``
        and ``backups``.
    """
    start = time.perf_counter()
    if isinstance(allocations, Solution):
        source = allocations
        allocations = source.allocations
        solver = solver if solver is not None else source.solver
        seed = seed if seed is not None else source.seed
    allocations = list(allocations)
    solver = solver if solver is not None else "projection"
    seed = seed if seed is not None else 0

    policy = ProjectionPolicy(instance, allocations)
    game = Game(instance)
    driver = DropBackup(game)
    driver.play(policy)

    target = mapping_reward(instance, [a.buffer for a in allocations])
    kept = game.return_s / target if target != 0 else 1.0
    solution = solution_from_game(
        instance, game, solver=solver, seed=seed, wall_s=time.perf_counter() - start,
        info={
            "projected_from": target,
            "kept_fraction": kept,
            "fallbacks": policy.fallbacks,
            "backups": driver.backups,
        },
    )
    return solution, kept
