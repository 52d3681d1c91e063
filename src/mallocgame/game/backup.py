"""Drop-backup (paper section 4.3.2, SPEC section 6): complete every game.

One implementation for every solver that plays the game. :class:`DropBackup`
wraps a :class:`~mallocgame.game.state.Game` that starts at a backup point (the
initial state is one), remembers the latest backup point, and when play reaches a
state with no legal action at buffer ``b`` it undoes to that backup point and from
then on allows only Drop for ``b``'s alias group (and, if ``b`` reads a
fast-resident tensor, for the group of that tensor's defining output).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mallocgame.errors import IllegalActionError
from mallocgame.game.state import DROP, Game, is_action
from mallocgame.game.tables import B_GROUP, X_DEF_BUFFER

__all__ = ["DropBackup", "Policy", "play"]

Policy = Callable[[Game, np.ndarray], int]
"""Chooses an action given the game and the allowed actions (bool [3], at least one True)."""

_DROP_ONLY = np.array([False, False, True])


class DropBackup:
    """Plays a game with Drop-backup. ``backups`` counts the returns to a backup point."""

    def __init__(
        self,
        game: Game,
        *,
        deterministic: bool = False,
        on_back_up: Callable[[Game], None] | None = None,
        backup_mark: int | None = None,
    ) -> None:
        """``deterministic``: the caller's policy is a pure function of the game state
        and the allowed actions (greedy, an argmax policy). Then a back-up need only
        undo to the first decision after the backup point that the newly forced groups
        change: replaying from the backup point would repeat every earlier decision
        (same states, same policy) and find no new backup point before it. The
        completed trajectory is identical to SPEC section 6's; only faster on large
        programs, where every back-up would otherwise replay thousands of decisions.

        ``on_back_up(game)`` is called at each state with no allowed action, before the
        back-up undoes it (the game is read there, never changed).

        ``backup_mark``: to go on with a game part-played without back-ups, the mark of
        the latest backup point it passed (the caller vouches for it; a state with no
        allowed action backs up at once); by default the game must be at a backup point
        now (a fresh game is).
        """
        if backup_mark is None and not game.is_backup_point:
            raise ValueError("Drop-backup must start at a backup point (e.g. a fresh game)")
        if backup_mark is not None and not (
            isinstance(backup_mark, (int, np.integer))
            and not isinstance(backup_mark, bool)
            and 0 <= backup_mark <= game.mark()
        ):
            raise ValueError(
                f"backup mark {backup_mark} is not among the {game.mark()} decisions made"
            )
        if backup_mark == game.mark() and not game.is_backup_point:
            raise ValueError(
                f"backup mark {backup_mark} is the current state, which is not a backup point"
            )
        self.game = game
        self.forced_drop = np.zeros(game.tables.num_groups, dtype=bool)
        self._buffer_group = game.tables.buf_int[:, B_GROUP]
        self._forced_buffer = np.zeros(game.num_buffers + 1, dtype=bool)  # by buffer id
        self.backup_mark = game.mark() if backup_mark is None else int(backup_mark)
        self.backups = 0
        self.deterministic = deterministic
        self.on_back_up = on_back_up
        while not self.allowed().any() and not game.complete:  # given a stuck state
            self._back_up()

    def allowed(self) -> np.ndarray:
        """Legal actions of the current buffer less those Drop-backup forbids: bool [3]."""
        mask = self.game.legal_mask()
        if self._forced_buffer[self.game.current_buffer]:
            return mask & _DROP_ONLY
        return mask

    def step(self, action: int) -> float:
        """Play an allowed ``action``; if that leaves no allowed action, back up. Returns the reward."""
        return self.advance(action)[0]

    def advance(self, action: int) -> tuple[float, np.ndarray]:
        """:meth:`step`, returning also the allowed actions after it (bool [3]): what
        :meth:`allowed` would give, without computing it again."""
        game = self.game
        if not is_action(action):
            raise IllegalActionError(f"{action!r} is not an action (0, 1 or 2)")
        if (
            action != DROP
            and self._forced_buffer[game.current_buffer]
            and game.legal_mask()[action]
        ):
            raise IllegalActionError(
                f"buffer {game.current_buffer}: Drop-backup allows only Drop here"
            )
        reward = game.step(action)
        if game.is_backup_point:
            self.backup_mark = game.mark()
        allowed = self.allowed()
        while not allowed.any() and not game.complete:
            self._back_up()
            allowed = self.allowed()
        return reward, allowed

    def play_forced(self) -> np.ndarray:
        """Play every decision that has one allowed action, backing up where one has none,
        until the game is complete or a decision has a choice; return that decision's
        allowed actions (bool [3]; all False when complete).

        The game is the one that :meth:`step` would play with the only allowed action at
        each of those decisions, only faster (one compiled loop): for callers whose
        policy is not asked where there is no choice.
        """
        return self._play_forced_from(self.allowed())

    def step_to_choice(self, action: int) -> np.ndarray:
        """:meth:`step`, then :meth:`play_forced`; returns what :meth:`play_forced` does."""
        return self._play_forced_from(self.advance(action)[1])

    def _play_forced_from(self, allowed: np.ndarray) -> np.ndarray:
        game = self.game
        while True:
            a0, a1, a2 = allowed.tolist()
            choices = a0 + a1 + a2
            if choices >= 2 or game.complete:
                return allowed
            if choices == 1:
                _, mark = game.step_forced(self._forced_buffer)
                if mark >= 0:
                    self.backup_mark = mark
            else:
                self._back_up()
            allowed = self.allowed()

    def _back_up(self) -> None:
        game = self.game
        if self.on_back_up is not None:
            self.on_back_up(game)
        b = game.current_buffer
        groups = [game.group_of(b)]
        tensor = game.reads_fast_resident(b)
        if tensor >= 0:
            groups.append(game.group_of(int(game.tables.ten_int[tensor, X_DEF_BUFFER])))
        if self.forced_drop[groups].all():
            # Cannot happen under SPEC section 6 (each back-up forces a new group); if it
            # did, dropping everything after the backup point still completes the game.
            groups = list(range(len(self.forced_drop)))
        self.forced_drop[groups] = True
        self._forced_buffer[:-1] = self.forced_drop[self._buffer_group]
        target = self.backup_mark
        if self.deterministic:
            changed = np.flatnonzero(self._forced_buffer[target : b + 1])
            target += int(changed[0]) if changed.size else b - target
        game.undo_to(target)
        self.backups += 1

    def play(self, policy: Policy) -> None:
        """Play to the end of the game, asking ``policy`` for every decision."""
        game = self.game
        allowed = self.allowed()
        while not game.complete:
            allowed = self.advance(policy(game, allowed))[1]


def play(game: Game, policy: Policy) -> DropBackup:
    """Complete ``game`` (at a backup point) with ``policy`` and Drop-backup; returns the driver."""
    driver = DropBackup(game)
    driver.play(policy)
    return driver
