"""Playing a whole proposal through the game, and its fitness.

An EGRL proposal names one action per decision unit (the game's buffer, SPEC section
2) before any is played: int8 ``[B]`` of 0 Copy, 1 NoCopy, 2 Drop. It is played in
game order with Drop-backup (SPEC section 6, :class:`~mallocgame.game.backup.DropBackup`)
so that every proposal yields a complete, valid game. At each buffer the action
played is the proposed one if Drop-backup allows it, else the **nearest allowed** one
in a fixed order (:data:`NEAREST`):

* proposed Copy: Copy, NoCopy, Drop;
* proposed NoCopy: NoCopy, Copy, Drop;
* proposed Drop: Drop, NoCopy, Copy.

Alias groups: the unit is the buffer, and the members of a group must be all in fast
memory at one offset or all in slow memory. The first member decided fixes the
group; later members' proposals are resolved by the nearest-allowed rule (a Copy or
NoCopy proposal in a slow group becomes Drop; a Drop proposal in a fast group becomes
NoCopy, else Copy). Likewise a read of a fast-resident tensor can only be NoCopy.

The action played is a pure function of the game state and the allowed actions, so
Drop-backup runs in its ``deterministic`` mode (the same trajectory as SPEC section 6,
fewer moves replayed). The fitness (:class:`FitnessFn`) is the game's normalized
return, or the simulated speedup of its allocations (``mallocgame.simulate.speedup``,
as MARL measured runtimes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mallocgame.game.backup import DropBackup
from mallocgame.game.state import Game
from mallocgame.game.tables import GameTables
from mallocgame.instance import Instance

__all__ = [
    "NEAREST",
    "nearest_allowed",
    "Played",
    "ProposalPlayer",
    "FitnessFn",
    "MAX_SPEEDUP_FITNESS",
    "speedup_fitness",
]

NEAREST = ((0, 1, 2), (1, 0, 2), (2, 1, 0))
"""For each proposed action, the actions tried in order."""


def nearest_allowed(proposed: int, allowed: np.ndarray) -> int:
    """The first action of ``NEAREST[proposed]`` that ``allowed`` (bool [3]) permits."""
    for action in NEAREST[proposed]:
        if allowed[action]:
            return action
    raise ValueError("no action is allowed")


@dataclass(frozen=True)
class Played:
    """A proposal played to the end: the return (seconds), the normalized return, the
    actions of the complete game (int8 [B]), Drop-backups taken, and how many units
    were played otherwise than proposed; ``cut_at``: the buffer from which the game was
    played Drop first instead, its ``stop`` having come (``None``: it was not)."""

    return_s: float
    normalized: float
    actions: np.ndarray
    backups: int
    overridden: int
    cut_at: int | None = None


class ProposalPlayer:
    """Plays proposals of one instance (one reusable :class:`Game`)."""

    def __init__(self, instance: Instance, tables: GameTables) -> None:
        self.instance = instance
        self.game = Game(instance, tables)

    def play(self, proposal: np.ndarray, stop: Callable[[], bool] | None = None) -> Played:
        """Play ``proposal`` (int [B]) with the nearest-allowed rule and Drop-backup. Once
        ``stop()`` is true (asked before each decision; a wall clock spent) the rest is
        played Drop first, which Drop-backup completes in one pass: a complete game, soon,
        but no longer the proposal's (:attr:`Played.cut_at`)."""
        game = self.game
        game.reset()
        driver = DropBackup(game, deterministic=True)
        wanted = np.asarray(proposal, dtype=np.int64).tolist()
        if len(wanted) != game.num_buffers:
            raise ValueError(
                f"a proposal names {len(wanted)} actions for {game.num_buffers} buffers"
            )
        allowed_of, step = driver.allowed, driver.step
        cut_at: int | None = None
        while not game.complete:
            if stop is not None and cut_at is None and stop():
                cut_at = game.current_buffer
            p = wanted[game.current_buffer] if cut_at is None else 2
            c, n, d = allowed_of().tolist()
            if p == 0:
                action = 0 if c else (1 if n else 2)
            elif p == 1:
                action = 1 if n else (0 if c else 2)
            else:
                action = 2 if d else (1 if n else 0)
            step(action)
        actions = np.asarray(game.actions(), dtype=np.int8)
        overridden = int(np.count_nonzero(actions != np.asarray(wanted, dtype=np.int8)))
        return Played(
            game.return_s, game.normalized_return, actions, driver.backups, overridden, cut_at
        )


def reward_fitness(normalized: float, return_s: float, normalizer_s: float) -> float:
    """A game's ``"reward"`` fitness, higher for a higher return whatever the sign of the
    normalizer ``R`` (SPEC section 5): the normalized return where ``R > 0``, its negation
    where ``R < 0`` (table latencies under which all-fast is slower), the return in
    seconds where ``R = 0`` (every normalized return is 0 there)."""
    if normalizer_s > 0:
        return normalized
    return -normalized if normalizer_s < 0 else return_s


MAX_SPEEDUP_FITNESS = 1e12
"""The ``speedup`` fitness of a mapping whose simulated latency is 0 (table latencies may
be): finite, so that the learner's normalized targets are, and above any real speedup."""


def speedup_fitness(instance: Instance, allocations: Any) -> float:
    """``fitness="speedup"``: :func:`mallocgame.simulate.speedup` of ``allocations`` (a
    solution or allocations), at most :data:`MAX_SPEEDUP_FITNESS`."""
    from mallocgame.simulate import speedup

    return min(float(speedup(instance, allocations)), MAX_SPEEDUP_FITNESS)


class FitnessFn:
    """A proposal's fitness: ``"reward"`` (:func:`reward_fitness` of the game's return)
    or ``"speedup"`` (the simulated baseline latency over the latency under the game's
    allocations)."""

    def __init__(self, instance: Instance, kind: str) -> None:
        if kind not in ("reward", "speedup"):
            raise ValueError(f"unknown fitness {kind!r}")
        self.instance = instance
        self.kind = kind

    def __call__(self, played: Played, game: Game) -> float:
        """The fitness of ``played``; ``game`` is the complete game it was played in."""
        if self.kind == "reward":
            return reward_fitness(played.normalized, played.return_s, game.tables.normalizer_s)
        return speedup_fitness(self.instance, game.allocations())
