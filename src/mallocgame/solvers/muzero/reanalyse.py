"""Reanalyse with demonstrations (paper section 3; Schrittwieser et al., 2021; Table 6).

Reanalyse searches positions of games already played, or of demonstrations, again with
the newest network, and replaces their policy targets and root values with the new
search's: "the MCTS procedure generates fresh policy and value targets for each state
of the demonstration" (the paper). Value targets bootstrap from root values (see
:mod:`~mallocgame.solvers.muzero.replay`), so refreshed root values refresh them too.

What is reanalysed here (a :class:`Reanalyser` keeps these *kept games*, which the
replay's eviction never removes):

- **demonstrations**: complete trajectories of other solvers, replayed into records
  (``config.demonstrations``: ``heuristic``, the XLA-style heuristic's mapping projected
  onto the game, :func:`~mallocgame.solvers.projection.project`; ``greedy``, the
  Copy > NoCopy > Drop rule; ``es``, the best game evolution strategies find in a
  share of the budget, played before training starts). Their actions and rewards are
  the demonstration's; their policy and value targets come from the search (with
  ``imitation`` > 0, mixed with the demonstration's own action). They are training
  data, never answers: the solver's answer is always one of its own self-play games.
- **the best self-play game** (``config.reanalyse_best``): the record of the best game
  so far, replaced when a better one is played.

The self-play replay turns over within seconds here (20,000 positions are a few dozen
games of a 500-buffer program), so its games are not reanalysed: their targets are
already fresh.

Each learner step searches the next ``parallel_games`` kept positions (one batched
search, the shape self-play compiled; round-robin over all kept positions), and a
fraction ``reanalyse_fraction`` of each training batch is drawn from the kept games.
With ``imitation = w`` > 0 a kept position's policy target is ``(1 - w) π_search + w
onehot(a)``, ``a`` the action the kept game played there: behaviour cloning of the
kept games, mixed into the search's improvement.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from mallocgame.errors import SolverError
from mallocgame.game.observe import Observer, empty_batch
from mallocgame.game.state import Game
from mallocgame.game.tables import GameTables
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers.base import SolveRequest
from mallocgame.solvers.muzero.config import DEMONSTRATION_SOURCES, MuZeroConfig
from mallocgame.solvers.muzero.replay import Batch, GameRecord, draw, stored
from mallocgame.solvers.muzero.search import SearchResult, fold_key

__all__ = ["Reanalyser", "trajectory_record", "demonstration"]


def demonstration(
    instance: Instance,
    source: str,
    seed: int,
    *,
    seconds: float | None = None,
    es_games: int = 2000,
    es_workers: int = 2,
    given: Solution | None = None,
) -> Solution:
    """The solution of demonstration ``source``; its ``actions`` are a complete game trajectory.

    ``heuristic``: the XLA-style heuristic's mapping projected onto the game, the
    projection's repair stopping after ``seconds`` (with ``None``, its replay budget
    alone: then the same mapping gives the same game); ``greedy``: Copy > NoCopy > Drop,
    Drop first once ``seconds`` are spent;
    ``es``: the best game of evolution strategies (its default settings, on
    ``es_workers`` processes, at most the machine's cores) within ``seconds`` of
    wall-clock, or, with ``seconds`` ``None``, within ``es_games`` games (then the same
    seed gives the same game); its ``work`` says how many games it played.

    ``given``: ``source``'s answer for ``instance`` computed already (by a caller that
    needed it too, as ``muzero-prod`` needs the heuristic's), used instead of solving
    again: the heuristic's mapping is projected as its own would be, a game is taken as
    it is. :class:`SolverError` if it answers another program or solver, or is a
    ``greedy`` or ``es`` answer without a game.
    """
    if given is not None:
        _check_given(instance, source, given)
    request = SolveRequest(seed=seed)
    if source == "heuristic":
        from mallocgame.solvers.heuristic import HeuristicSolver
        from mallocgame.solvers.projection import project

        mapping = given if given is not None else HeuristicSolver().solve(instance, request)
        solution, _kept = project(instance, mapping, seconds=seconds)
    elif given is not None and source in DEMONSTRATION_SOURCES:
        solution = given
    elif source == "greedy":
        from mallocgame.solvers.greedy import GreedySolver

        solution = GreedySolver().solve(
            instance,
            SolveRequest(seed=seed, seconds=None if seconds is None else max(seconds, 1e-9)),
        )
    elif source == "es":
        from mallocgame.solvers.es import EsSolver

        workers = max(1, min(es_workers, os.cpu_count() or 1))
        solution = EsSolver().solve(
            instance,
            SolveRequest(
                seed=seed,
                seconds=None if seconds is None else max(seconds, 1e-9),
                work=None if seconds is not None else es_games,
                options={"workers": workers},
            ),
        )
    else:
        raise SolverError(
            f"unknown demonstration '{source}' (have: {', '.join(DEMONSTRATION_SOURCES)})"
        )
    assert solution.actions is not None  # all are game trajectories
    return solution


def _check_given(instance: Instance, source: str, given: Solution) -> None:
    """Refuse a given demonstration that cannot stand for ``source`` on ``instance``."""
    if given.instance_sha256 != instance.sha256:
        raise SolverError(
            f"the given {source} demonstration answers program {given.instance!r}, "
            f"not {instance.name!r}"
        )
    if given.solver != source:
        raise SolverError(f"a {given.solver} answer given as the {source} demonstration")
    if source != "heuristic" and given.actions is None:
        raise SolverError(f"the given {source} demonstration has no game (no actions)")


def trajectory_record(
    instance: Instance,
    tables: GameTables,
    config: MuZeroConfig,
    actions: Sequence[int],
    scale: float,
) -> GameRecord:
    """A complete action sequence replayed into a :class:`GameRecord` (``L = B`` moves).

    Observations, allowed actions and rewards (seconds times ``scale``) are the game's;
    policies are uniform and root values 0 until the record is reanalysed.

    Raises:
        SolverError: an action is illegal where it is played, or the game does not end
            complete.
    """
    game = Game(instance, tables)
    observer = Observer(game, config.observation)
    length = len(actions)
    obs = empty_batch(config.observation, length)
    allowed = np.zeros((length, 3), dtype=bool)
    rewards = np.zeros(length, dtype=np.float32)
    for t, action in enumerate(actions):
        if game.complete:
            raise SolverError(f"demonstration has {length} actions; the game ended after {t}")
        observer.observe(t, out=obs, index=t)
        allowed[t] = game.legal_mask()
        if not allowed[t, int(action)]:
            raise SolverError(
                f"demonstration action {action} is not legal at buffer {game.current_buffer}"
            )
        before = game.return_s
        game.step(int(action))
        rewards[t] = (game.return_s - before) * scale
    if not game.complete:
        raise SolverError(f"demonstration of {length} actions leaves the game incomplete")
    return stored(
        GameRecord(
            observations=obs,
            actions=np.asarray(actions, dtype=np.int8),
            rewards=rewards,
            policies=np.full((length, 3), 1.0 / 3.0, np.float32),
            root_values=np.zeros(length, np.float32),
            allowed=allowed,
        )
    )


class Reanalyser:
    """The kept games (demonstrations and the best self-play game) and their fresh targets.

    Args:
        config: ``parallel_games`` is the batch of one reanalysis search.
        search: the batched search of self-play
            (``search(params, key, obs, allowed, temperature, q_scale)``).
        q_scale: the search's ``c_scale`` (as self-play's).
        key: the root of the reanalysis searches' keys (search ``i`` uses
            ``fold_in(key, i)``).
    """

    def __init__(
        self,
        config: MuZeroConfig,
        search: Callable[..., SearchResult],
        q_scale: np.float32,
        key: jax.Array,
    ) -> None:
        self.config = config
        self.search = search
        self.q_scale = q_scale
        self.key = key
        self.demonstrations: list[GameRecord] = []
        self.best: GameRecord | None = None
        self.best_return = -np.inf  # scaled return of the kept best game
        self.cursor = 0  # next kept position to search (round-robin)
        self.searches = 0  # reanalysis search calls so far
        self.positions_searched = 0
        self._obs = empty_batch(config.observation, config.parallel_games)
        self._allowed = np.zeros((config.parallel_games, 3), dtype=bool)

    @property
    def games(self) -> list[GameRecord]:
        """The kept games: demonstrations, then the best self-play game."""
        return self.demonstrations + ([self.best] if self.best is not None else [])

    @property
    def positions(self) -> int:
        """Positions in the kept games."""
        return sum(len(g) for g in self.games)

    def add_demonstration(
        self, record: GameRecord, params: dict | None, stop: Callable[[], bool] | None = None
    ) -> None:
        """Keep ``record`` and search every one of its positions once with ``params`` (None:
        none), in order, until ``stop()`` says so (a wall-clock budget spent): the positions
        left keep the targets they came with (a replayed record's: uniform policies, root
        values 0) until :meth:`refresh` reaches them."""
        if record.allowed is None:
            raise ValueError("a reanalysed record needs its allowed actions")
        self.demonstrations.append(record)
        if params is not None:
            self._search_all(record, params, stop)

    def _search_all(
        self, record: GameRecord, params: dict, stop: Callable[[], bool] | None = None
    ) -> None:
        n = self.config.parallel_games
        for first in range(0, len(record), n):
            if stop is not None and stop():
                return
            rows = [(record, t) for t in range(first, min(first + n, len(record)))]
            self._search(params, rows)

    def keep_best(
        self,
        record: GameRecord,
        search_with: dict | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """Keep ``record`` as the best self-play game if its return beats the kept one's.

        Its policy targets and root values are copied (reanalysis rewrites them; the
        replay's copy keeps its own); observations are shared, never written. With
        ``search_with`` (network parameters) every position of the kept copy is searched
        at once: for a record replayed from actions (:func:`trajectory_record`), whose
        targets are not yet a search's; until ``stop()`` says so (a wall-clock budget
        spent), the positions left keep their replayed targets until :meth:`refresh`
        reaches them.
        """
        if record.allowed is None:
            raise ValueError("a reanalysed record needs its allowed actions")
        if record.bootstrap is not None:
            raise ValueError("the kept best game must be a whole game, not a record cut short")
        total = float(np.sum(record.rewards, dtype=np.float64))
        if total <= self.best_return:
            return False
        self.best = GameRecord(
            observations=record.observations,
            actions=record.actions,
            rewards=record.rewards,
            policies=record.policies.copy(),
            root_values=record.root_values.copy(),
            allowed=record.allowed,
        )
        self.best_return = total
        if search_with is not None:
            self._search_all(self.best, search_with, stop)
        return True

    def refresh(self, params: dict) -> None:
        """Search the next ``parallel_games`` kept positions (round-robin) with ``params``."""
        rows = self.next_rows()
        if rows:
            self._search(params, rows)

    def next_rows(self) -> list[tuple[GameRecord, int]]:
        """The next ``parallel_games`` kept positions (round-robin; none if none is kept),
        as (record, move) pairs; the cursor moves past them."""
        games = self.games
        total = sum(len(g) for g in games)
        if total == 0:
            return []
        starts = np.concatenate([[0], np.cumsum([len(g) for g in games])])
        flat = (self.cursor + np.arange(self.config.parallel_games)) % total
        which = np.searchsorted(starts, flat, side="right") - 1
        rows = [(games[int(g)], int(p - starts[g])) for g, p in zip(which, flat)]
        self.cursor = int((self.cursor + len(rows)) % total)
        return rows

    def search_inputs(
        self, rows: list[tuple[GameRecord, int]]
    ) -> tuple[dict[str, np.ndarray], np.ndarray, jax.Array]:
        """The batched search's observations, allowed actions and key for ``rows`` (a short
        batch padded with its first row); counts one search. The arrays are this
        reanalyser's own buffers, rewritten by the next call (Ray copies a call's arguments
        when it is sent)."""
        self._fill(rows)
        key = fold_key(self.key, self.searches)
        self.searches += 1
        return self._obs, self._allowed, key

    def apply(
        self, rows: list[tuple[GameRecord, int]], policies: np.ndarray, values: np.ndarray
    ) -> None:
        """The search's improved policies and root values become ``rows``' targets (the
        policy mixed with the kept game's own action by ``imitation``)."""
        w = np.float32(self.config.imitation)
        for i, (record, t) in enumerate(rows):
            record.policies[t] = (1 - w) * policies[i]
            record.policies[t, int(record.actions[t])] += w
            record.root_values[t] = values[i]
        self.positions_searched += len(rows)

    def _fill(self, rows: list[tuple[GameRecord, int]]) -> None:
        for i, (record, t) in enumerate(rows):
            for name, batch in self._obs.items():
                batch[i] = record.observations[name][t]
            assert record.allowed is not None  # add() and add_demonstration() refuse others
            self._allowed[i] = record.allowed[t]
        for i in range(len(rows), self.config.parallel_games):  # pad a short batch
            for batch in self._obs.values():
                batch[i] = batch[0]
            self._allowed[i] = self._allowed[0]

    def _search(self, params: dict, rows: list[tuple[GameRecord, int]]) -> None:
        """One batched search of the positions ``rows``; their targets are replaced."""
        obs, allowed, key = self.search_inputs(rows)
        result = self.search(params, key, obs, allowed, np.float32(1.0), self.q_scale)
        self.apply(rows, np.asarray(result.policy), np.asarray(result.root_value))

    def sample(self, batch_size: int, unroll: int, rng: np.random.Generator) -> Batch:
        """``batch_size`` kept positions drawn uniformly (see :func:`~.replay.draw`)."""
        return draw(self.games, batch_size, unroll, rng, self.config.discount, self.config.td_steps)

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "demonstrations": {str(i): g.state_dict() for i, g in enumerate(self.demonstrations)},
            "cursor": self.cursor,
            "searches": self.searches,
            "positions_searched": self.positions_searched,
        }
        if self.best is not None:
            state["best"] = self.best.state_dict()
            state["best_return"] = self.best_return
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        demos = state["demonstrations"]
        self.demonstrations = [GameRecord.from_state_dict(demos[k]) for k in sorted(demos, key=int)]
        self.best = GameRecord.from_state_dict(state["best"]) if "best" in state else None
        self.best_return = float(state.get("best_return", -np.inf))
        self.cursor = int(state["cursor"])
        self.searches = int(state["searches"])
        self.positions_searched = int(state["positions_searched"])
