"""Self-play: ``N`` games of one instance played in lockstep, one batched search per move.

Every slot holds a :class:`~mallocgame.game.state.Game` driven by
:class:`~mallocgame.game.backup.DropBackup` (paper section 4.3.2, SPEC section 6) and
an incremental :class:`~mallocgame.game.observe.Observer`. Per move, all ``N``
observations and allowed-action masks go to one search call; each slot plays its
action. When a move leads to an infeasible state, Drop-backup returns that game to
its backup point and forces Drop for the offending groups; the move is recorded
with reward = the change of the game's return it caused, i.e. its own reward minus
the return the back-up undid (the paper's local penalty). That penalty exists only in
the training targets: solutions are complete games, scored by SPEC section 5.

The first ``config.greedy_games`` slots exploit: they play the improved policy's most
probable allowed action instead of the search's sampled one (Gumbel noise or visit
sampling), so that some games follow the current network's best line; their moves
are trained on like any other.

A finished game goes to the caller as a :class:`FinishedGame` and the slot starts a
new game at once, so the batch stays full.

Restarts (``config.restart_fraction`` > 0): a new game in one of the other slots
begins, with that probability, at a state of :attr:`SelfPlay.restart_actions` (the
trainer sets it to its best game) instead of the initial state: the first ``t``
actions of that game are replayed without search (``t`` uniform in ``[1, B)``) and the
agent plays on from there. The game is complete and scored like any other; its record
holds only the moves the agent played (``FinishedGame.start`` = ``t``), so its rewards
sum to the return gained after the restart point. Before the trainer's first self-play
game is complete, :attr:`SelfPlay.restart_actions` is the best demonstration's game, and
the slots that have not played yet draw their restarts inside it at once
(:meth:`SelfPlay.restart_unplayed`): on a program of thousands of buffers the first
batch of fresh games would otherwise take most of a short budget.

Windowed restarts (``config.restart_window`` = ``W`` > 0): a restarted game is searched
for ``W`` moves only; then, in the same step, it plays the rest of the game without
search, taking the restart game's decision for each buffer where Drop-backup allows it
and Drop (else the first allowed action) where not; a back-up during the play-out undoes
only to the first decision it changes (Drop-backup's ``deterministic`` mode: the
play-out is a function of the state), so it keeps the window's decisions before that.
Such a game is a probe for a better answer around its restart point, at the cost of
``W`` batched moves instead of the rest of the game: it is scored like any other
(``FinishedGame.played_out``), and its record holds the ``W`` searched moves only, cut
short: its ``bootstrap`` is the play-out's discounted return (scaled), the value of the
state after the window under the play-out (a back-up in the play-out that undoes window
moves is part of that return: the record's rewards and the bootstrap sum, undiscounted,
to the return gained after the restart point). The trainer keeps such records only with
``config.window_records``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import jax
import numpy as np

from mallocgame.errors import SolverError
from mallocgame.game.backup import DropBackup
from mallocgame.game.observe import Observer, empty_batch
from mallocgame.game.state import DROP, Game
from mallocgame.game.tables import GameTables
from mallocgame.instance import Instance
from mallocgame.solvers.muzero.config import MuZeroConfig
from mallocgame.solvers.muzero.replay import GameRecord
from mallocgame.solvers.muzero.search import SearchResult

__all__ = ["FinishedGame", "SelfPlay", "reward_scale", "play_policy"]


def reward_scale(tables: GameTables, config: MuZeroConfig) -> float:
    """Multiplier from seconds of reward to the targets' units (``value_scale / R``; 1
    where R is not positive, or so small that the quotient overflows)."""
    r = tables.normalizer_s
    scale = config.value_scale / r if r > 0 else 1.0
    return scale if math.isfinite(scale) else 1.0


@dataclass(frozen=True)
class FinishedGame:
    """A completed self-play game: its training record and its outcome."""

    record: GameRecord  # the agent's moves (a windowed restart's: its window, cut short with a bootstrap)
    actions: tuple[int, ...]  # the complete game's actions (a valid solution's trajectory)
    return_s: float  # SPEC section 5 return, seconds
    backups: int  # Drop-backups during the game
    # decisions replayed from SelfPlay.restart_actions before the agent played (0: a fresh game)
    start: int = 0
    played_out: bool = False  # a windowed restart completed without search after its window


class _Slot:
    """One game in the batch and the record of the moves played in it."""

    def __init__(self, game: Game, config: MuZeroConfig) -> None:
        self.game = game
        self.observer = Observer(game, config.observation)
        self.start()

    def start(
        self, prefix: Sequence[int] = (), follow: Sequence[int] = (), window: int = 0
    ) -> None:
        """A new game, first replaying ``prefix`` (decisions of a complete game) without search;
        with ``follow`` (a complete game's decisions, one per buffer) and ``window`` > 0, the
        game is searched for ``window`` moves and then played out along ``follow``."""
        self.game.reset()
        self.observer.reset()
        self.driver = DropBackup(self.game)
        for action in prefix:
            if self.game.complete or not self.driver.allowed()[int(action)]:
                break  # cannot happen for a complete game's own decisions; stop the prefix if it did
            self.driver.step(int(action))
        self.first = self.game.current_buffer if prefix else 0
        self.moves = self.first
        self.follow = tuple(follow) if window > 0 else ()
        self.window_end = self.moves + window if self.follow else None
        self.played_out = False  # whether moves were played along follow, not by the agent
        self.tail = 0.0  # the play-out's discounted return, scaled (the record's bootstrap)
        self.observations: dict[str, list[np.ndarray]] = {}
        self.actions: list[int] = []
        self.rewards: list[float] = []
        self.policies: list[np.ndarray] = []
        self.root_values: list[float] = []
        self.allowed: list[np.ndarray] = []


class SelfPlay:
    """``config.parallel_games`` games of ``instance`` in lockstep.

    ``search(params, key, obs, allowed, temperature, q_scale) -> SearchResult`` is the
    batched search of :func:`~mallocgame.solvers.muzero.search.make_search`.
    """

    def __init__(
        self,
        instance: Instance,
        tables: GameTables,
        config: MuZeroConfig,
        search: Callable[..., SearchResult],
    ) -> None:
        self.instance = instance
        self.config = config
        self.search = search
        self.scale = reward_scale(tables, config)
        self.q_scale = np.float32(config.search_q_scale(tables.num_buffers))
        self.slots = [_Slot(Game(instance, tables), config) for _ in range(config.parallel_games)]
        self.obs = empty_batch(config.observation, config.parallel_games)
        self.allowed = np.zeros((config.parallel_games, 3), dtype=bool)
        self.restart_actions: tuple[int, ...] = ()  # the complete game restarts replay a prefix of
        # game steps played without search in windowed restarts' play-outs
        self.played_out_steps = 0

    def step(
        self,
        params: dict,
        key: jax.Array,
        temperature: float = 1.0,
        rng: np.random.Generator | None = None,
    ) -> list[FinishedGame]:
        """Play one move in every game; returns the games that finished with it.

        ``rng`` draws the restarts of the games that start after this move (none without it).
        """
        for i, slot in enumerate(self.slots):
            slot.observer.observe(slot.moves, out=self.obs, index=i)
            self.allowed[i] = slot.driver.allowed()
        result = self.search(
            params, key, self.obs, self.allowed, np.float32(temperature), self.q_scale
        )
        actions = np.asarray(result.action)
        policies = np.asarray(result.policy)
        values = np.asarray(result.root_value)
        finished = []
        greedy = self.config.greedy_games
        if greedy:  # exploitation slots: the improved policy's most probable allowed action
            masked = np.where(self.allowed[:greedy], policies[:greedy], -1.0)
            actions = actions.copy()
            actions[:greedy] = np.argmax(masked, axis=1)
        for i, slot in enumerate(self.slots):
            action = int(actions[i])
            if not self.allowed[i, action]:
                raise SolverError(
                    f"search chose action {action}, not allowed at buffer "
                    f"{slot.game.current_buffer}"
                )
            for name, batch in self.obs.items():
                slot.observations.setdefault(name, []).append(batch[i].copy())
            before = slot.game.return_s
            slot.driver.step(action)
            slot.actions.append(action)
            slot.rewards.append((slot.game.return_s - before) * self.scale)
            slot.policies.append(policies[i])
            slot.root_values.append(float(values[i]))
            slot.allowed.append(self.allowed[i].copy())
            slot.moves += 1
            if slot.window_end is not None and slot.moves >= slot.window_end:
                self._play_out(slot)
            if slot.game.complete:
                finished.append(self._finish(slot))
                self._start(i, rng)
        return finished

    def restart_unplayed(self, rng: np.random.Generator) -> int:
        """Every slot that has not played a move yet starts again, drawing a restart inside
        :attr:`restart_actions` as a slot does after a finished game; returns how many
        now start inside it."""
        restarted = 0
        for i, slot in enumerate(self.slots):
            if slot.actions or slot.first:
                continue
            if self._start(i, rng):
                restarted += 1
        return restarted

    def _start(self, slot: int, rng: np.random.Generator | None) -> bool:
        """A new game in ``slot``: fresh, or (drawn with ``rng``) restarted inside
        :attr:`restart_actions`, windowed if ``config.restart_window`` > 0. Returns
        whether it is a restart."""
        prefix = self._restart_prefix(slot, rng)
        self.slots[slot].start(
            prefix, self.restart_actions, self.config.restart_window if prefix else 0
        )
        return bool(prefix)

    def _restart_prefix(self, slot: int, rng: np.random.Generator | None) -> tuple[int, ...]:
        """The decisions a new game in ``slot`` replays first: ``()`` for a fresh game."""
        best = self.restart_actions
        if rng is None or len(best) < 2 or slot < self.config.greedy_games:
            return ()
        if rng.random() >= self.config.restart_fraction:
            return ()
        return best[: int(rng.integers(1, len(best)))]

    def _play_out(self, slot: _Slot) -> None:
        """Completes ``slot``'s game without search along ``slot.follow`` (Drop-backup);
        ``slot.tail`` becomes the play-out's discounted return (scaled)."""
        game, driver, follow = slot.game, slot.driver, slot.follow
        driver.deterministic = True
        rewards = []
        while not game.complete:
            allowed = driver.allowed()
            action = int(follow[game.current_buffer])
            if not allowed[action]:
                action = DROP if allowed[DROP] else int(np.flatnonzero(allowed)[0])
            before = game.return_s
            driver.step(action)
            rewards.append((game.return_s - before) * self.scale)
            slot.played_out = True
            self.played_out_steps += 1
        tail, discount = 0.0, self.config.discount
        for reward in reversed(rewards):
            tail = reward + discount * tail
        slot.tail = tail

    def _finish(self, slot: _Slot) -> FinishedGame:
        record = GameRecord(
            observations={k: np.stack(v) for k, v in slot.observations.items()},
            actions=np.asarray(slot.actions, dtype=np.int8),
            rewards=np.asarray(slot.rewards, dtype=np.float32),
            policies=np.asarray(slot.policies, dtype=np.float32),
            root_values=np.asarray(slot.root_values, dtype=np.float32),
            allowed=np.asarray(slot.allowed, dtype=bool).reshape(-1, 3),
            bootstrap=slot.tail if slot.played_out else None,
        )
        return FinishedGame(
            record,
            tuple(slot.game.actions()),
            slot.game.return_s,
            slot.driver.backups,
            slot.first,
            slot.played_out,
        )


def play_policy(
    instance: Instance,
    tables: GameTables,
    config: MuZeroConfig,
    params: dict,
    policy: Callable[..., jax.Array],
    stop: Callable[[], bool] | None = None,
) -> Game | None:
    """One complete game (Drop-backup) choosing the prior's best allowed action, no search;
    ``None`` where ``stop()`` (asked before each network call) ends it first."""
    game = Game(instance, tables)
    observer = Observer(game, config.observation)
    driver = DropBackup(game)
    obs = empty_batch(config.observation, 1)
    allowed = np.zeros((1, 3), dtype=bool)
    moves = 0
    while not game.complete:
        allowed[0] = driver.allowed()
        if allowed[0].sum() == 1:
            action = int(np.flatnonzero(allowed[0])[0])
        else:
            if stop is not None and stop():
                return None
            observer.observe(moves, out=obs, index=0)
            action = int(np.asarray(policy(params, obs, allowed))[0])
        driver.step(action)
        observer.sync()  # after every step: a back-up may have undone synced decisions
        moves += 1
    return game
