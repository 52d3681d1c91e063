"""Drop-backup (paper section 4.3.2, SPEC section 6): complete every game.

One implementation for every solver that plays the game. :class:`DropBackup`
wraps a :class:`~mallocgame.game.state.Game` that starts at a backup point (the
initial state is one), remembers the latest backup point, and when play reaches a
state with no legal action at buffer ``b`` it undoes to that backup point and from
then on allows only Drop for ``b``'s alias group (and, if ``b`` reads a
fast-resident tensor, for the group of that tensor's defining output).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from mallocgame.game.state import Game
from mallocgame.game.tables import X_DEF_BUFFER

__all__ = ["DropBackup", "Policy", "play"]

Policy = Callable[[Game, np.ndarray], int]
"""Chooses an action given the game and the allowed actions (bool [3], at least one True)."""

_DROP_ONLY = np.array([False, False, True])


class DropBackup:
    """Plays a game with Drop-backup. ``backups`` counts the returns to a backup point."""

    def __init__(self, game: Game) -> None:
        if not game.is_backup_point:
            raise ValueError("Drop-backup must start at a backup point (e.g. a fresh game)")
        self.game = game
        self.forced_drop = np.zeros(game.tables.num_groups, dtype=bool)
        self.backup_mark = game.mark()
        self.backups = 0

    def allowed(self) -> np.ndarray:
        """Legal actions of the current buffer less those Drop-backup forbids: bool [3]."""
        mask = self.game.legal_mask()
        b = self.game.current_buffer
        if b < self.game.num_buffers and self.forced_drop[self.game.group_of(b)]:
            return mask & _DROP_ONLY
        return mask

    def step(self, action: int) -> float:
        """Play an allowed ``action``; if that leaves no allowed action, back up. Returns the reward."""
        if not self.allowed()[action]:
            # The game raises the precise error for an illegal action; a legal action the
            # Drop-backup forbids is an error of the caller's policy.
            if self.game.legal_mask()[action]:
                raise ValueError(
                    f"buffer {self.game.current_buffer}: Drop-backup allows only Drop here"
                )
        reward = self.game.step(action)
        if self.game.is_backup_point:
            self.backup_mark = self.game.mark()
        while not self.game.complete and not self.allowed().any():
            self._back_up()
        return reward

    def _back_up(self) -> None:
        game = self.game
        b = game.current_buffer
        before = int(self.forced_drop.sum())
        self.forced_drop[game.group_of(b)] = True
        tensor = game.reads_fast_resident(b)
        if tensor >= 0:
            producer = int(game.tables.ten_int[tensor, X_DEF_BUFFER])
            self.forced_drop[game.group_of(producer)] = True
        if int(self.forced_drop.sum()) == before:
            # Cannot happen under SPEC section 6 (each back-up forces a new group); if it
            # did, dropping everything after the backup point still completes the game.
            self.forced_drop[:] = True
        game.undo_to(self.backup_mark)
        self.backups += 1

    def play(self, policy: Policy) -> None:
        """Play to the end of the game, asking ``policy`` for every decision."""
        game = self.game
        while not game.complete:
            allowed = self.allowed()
            action = policy(game, allowed)
            self.step(action)


def play(game: Game, policy: Policy) -> DropBackup:
    """Complete ``game`` (at a backup point) with ``policy`` and Drop-backup; returns the driver."""
    driver = DropBackup(game)
    driver.play(policy)
    return driver

