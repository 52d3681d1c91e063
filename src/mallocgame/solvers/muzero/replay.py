"""Replay of self-play games, and the training batches MuZero unrolls from them.

A :class:`GameRecord` holds one finished self-play game as arrays over its ``L``
moves (every move played, including moves a Drop-backup later undid: the move that
led to the back-up carries the return it lost as a negative reward, so rewards sum to
the game's final return). A record cut short (``bootstrap`` set: a windowed restart's
searched moves, :mod:`~mallocgame.solvers.muzero.selfplay`) ends before the game does;
``bootstrap`` is the discounted return of the moves played after its last one, the
value of the state it ends in. :class:`Replay` keeps the newest games up to
``capacity`` positions and samples uniformly over positions; :func:`draw` samples
from any list of records (Reanalyse's kept games use it too).

Value targets are computed when a position is drawn, from the record's rewards and
its *current* root values, so a root value refreshed by Reanalyse changes every
target that bootstraps from it.

A batch (:class:`Batch`) for unroll length ``K`` holds, per sampled position ``t``:
the observation at ``t``; actions ``t .. t+K-1`` (uniform random past the end);
value targets ``z[t+k]`` (n-step returns bootstrapped from the search's root values, and
from ``bootstrap`` where the n steps reach the end of a record cut short; past the end
of a game 0: its end is absorbing); reward targets ``u[t+k-1]`` for ``k >= 1`` (0 past
the end); policy targets ``π[t+k]`` and a mask that is 1 where ``t+k < L``; and
``known``, 1 where the value and reward targets are known: everywhere for a whole game;
for a record cut short up to ``t+k = L`` (the value there is ``bootstrap``), not past it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "GameRecord",
    "Batch",
    "Replay",
    "draw",
    "stored",
]

STORED_AS_BYTES = ("grid", "profile")
"""Observation parts that are binary images: stored as uint8, returned as float32."""


def discounted_returns(rewards: np.ndarray, discount: float, tail: float = 0.0) -> np.ndarray:
    """``g[t] = Σ_{t<=i<L} γ^(i-t) u[i] + γ^(L-t) tail``: float64 ``[L + 1]`` with ``g[L] =
    tail`` (0 where the record ends the game; a record cut short's ``bootstrap``)."""
    g = np.zeros(len(rewards) + 1, dtype=np.float64)
    g[-1] = tail
    for t in range(len(rewards) - 1, -1, -1):
        g[t] = rewards[t] + discount * g[t + 1]
    return g


def bootstrapped(
    g: np.ndarray, root_values: np.ndarray, t: np.ndarray, discount: float, n: int
) -> np.ndarray:
    """n-step targets at positions ``t`` (int ``[M]``, each in ``[0, L]``) from returns ``g``
    (``[L + 1]``, see :func:`discounted_returns`) and ``root_values`` ``[L]``: float32
    ``[M]``; where the n steps reach ``L`` the target is ``g[t]`` (its tail included)."""
    length = len(g) - 1
    end = np.minimum(t + n, length)
    powers = discount ** (end - t).astype(np.float64)
    z = g[t] - powers * g[end]
    boot = end < length
    z[boot] += powers[boot] * root_values[end[boot]]
    z[~boot] += powers[~boot] * g[length]
    return z.astype(np.float32)


@dataclass
class GameRecord:
    """One self-play game of ``L`` moves.

    ``observations``: dict of arrays ``[L, ...]`` (the observation before each move);
    ``actions`` ``[L]`` int8; ``rewards`` ``[L]`` float32 (scaled; with back-up
    penalties); ``policies`` ``[L, 3]`` float32 (search policy); ``root_values`` ``[L]``
    float32 (the search's value of each position, scaled units); ``allowed`` ``[L, 3]``
    bool (the actions allowed at each position: Reanalyse searches the position again
    and needs them; ``None`` when not recorded); ``bootstrap`` (scaled units): for a
    record cut short, the discounted return of the moves played after its last one
    (``None``: the record ends the game).
    """

    observations: dict[str, np.ndarray]
    actions: np.ndarray
    rewards: np.ndarray
    policies: np.ndarray
    root_values: np.ndarray
    allowed: np.ndarray | None = None
    bootstrap: float | None = None
    _returns: tuple[tuple[float, float | None], np.ndarray] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __len__(self) -> int:
        return int(self.actions.shape[0])

    def returns_to_go(self, discount: float) -> np.ndarray:
        """:func:`discounted_returns` of this game's rewards and bootstrap, cached (rewards
        never change; the cache is keyed by the discount and the bootstrap)."""
        key = (discount, self.bootstrap)
        if self._returns is None or self._returns[0] != key:
            tail = 0.0 if self.bootstrap is None else self.bootstrap
            self._returns = (key, discounted_returns(self.rewards, discount, tail))
        return self._returns[1]

    def value_targets(self, t: np.ndarray, discount: float, n: int) -> np.ndarray:
        """n-step value targets at positions ``t`` (int array, each in ``[0, L]``): float32,
        ``Σ_{i<n} γ^i u[t+i] + γ^n v[t+n]`` with today's root values; where ``t+n`` reaches
        ``L`` it is ``Σ_{t<=i<L} γ^(i-t) u[i] + γ^(L-t) bootstrap`` (bootstrap 0 for a whole
        game), and at ``t = L`` it is ``bootstrap``."""
        return bootstrapped(self.returns_to_go(discount), self.root_values, t, discount, n)

    def state_dict(self) -> dict[str, Any]:
        state = {
            "observations": dict(self.observations),
            "actions": self.actions,
            "rewards": self.rewards,
            "policies": self.policies,
            "root_values": self.root_values,
        }
        if self.allowed is not None:
            state["allowed"] = self.allowed
        if self.bootstrap is not None:
            state["bootstrap"] = self.bootstrap
        return state

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> GameRecord:
        allowed = state.get("allowed")
        bootstrap = state.get("bootstrap")
        return cls(
            observations={k: np.asarray(v) for k, v in state["observations"].items()},
            actions=np.asarray(state["actions"]),
            rewards=np.asarray(state["rewards"]),
            policies=np.array(state["policies"], dtype=np.float32),  # copies: Reanalyse writes them
            root_values=np.array(state["root_values"], dtype=np.float32),
            allowed=None if allowed is None else np.asarray(allowed, dtype=bool),
            bootstrap=None if bootstrap is None else float(bootstrap),
        )


@dataclass
class Batch:
    """A training batch: ``N`` positions unrolled ``K`` steps (shapes in brackets)."""

    observations: dict[str, np.ndarray]  # [N, ...]
    actions: np.ndarray  # [N, K] int32
    values: np.ndarray  # [N, K+1] float32
    rewards: np.ndarray  # [N, K+1] float32 (index 0 unused, 0)
    policies: np.ndarray  # [N, K+1, 3] float32
    mask: np.ndarray  # [N, K+1] float32, 1 where the position is inside the game
    known: np.ndarray  # [N, K+1] float32, 1 where the value and reward targets are known

    def __len__(self) -> int:
        return int(self.actions.shape[0])

    @staticmethod
    def concatenate(batches: Sequence[Batch]) -> Batch:
        """The rows of ``batches`` one after the other (same ``K`` and observation keys)."""
        return Batch(
            observations={
                k: np.concatenate([b.observations[k] for b in batches])
                for k in batches[0].observations
            },
            actions=np.concatenate([b.actions for b in batches]),
            values=np.concatenate([b.values for b in batches]),
            rewards=np.concatenate([b.rewards for b in batches]),
            policies=np.concatenate([b.policies for b in batches]),
            mask=np.concatenate([b.mask for b in batches]),
            known=np.concatenate([b.known for b in batches]),
        )


def stored(record: GameRecord) -> GameRecord:
    """``record`` with its binary images as uint8 (in place; returned for chaining)."""
    for key in STORED_AS_BYTES:
        if key in record.observations:
            record.observations[key] = record.observations[key].astype(np.uint8)
    return record


def draw(
    games: Sequence[GameRecord],
    batch_size: int,
    unroll: int,
    rng: np.random.Generator,
    discount: float,
    td_steps: int,
) -> Batch:
    """``batch_size`` positions drawn uniformly over all positions of ``games``, unrolled
    ``unroll`` steps (value targets from today's root values, see the module docstring)."""
    lengths = np.fromiter((len(g) for g in games), dtype=np.int64, count=len(games))
    starts = np.concatenate([[0], np.cumsum(lengths)])
    total = int(starts[-1])
    if total == 0:
        raise ValueError("no positions to draw from")
    flat = rng.integers(0, total, size=batch_size)
    which = np.searchsorted(starts, flat, side="right") - 1
    first = games[0].observations
    obs = {k: np.empty((batch_size, *v.shape[1:]), dtype=np.float32) for k, v in first.items()}
    actions = rng.integers(0, 3, size=(batch_size, unroll)).astype(np.int32)
    values = np.zeros((batch_size, unroll + 1), np.float32)
    rewards = np.zeros((batch_size, unroll + 1), np.float32)
    policies = np.full((batch_size, unroll + 1, 3), 1.0 / 3.0, np.float32)
    mask = np.zeros((batch_size, unroll + 1), np.float32)
    known = np.ones((batch_size, unroll + 1), np.float32)
    for i, (g, pos) in enumerate(zip(which, flat)):
        game = games[int(g)]
        t = int(pos - starts[g])
        length = len(game)
        for k, v in game.observations.items():
            obs[k][i] = v[t]
        stop = min(t + unroll + 1, length)
        n = stop - t
        values[i, :n] = game.value_targets(np.arange(t, stop), discount, td_steps)
        policies[i, :n] = game.policies[t:stop]
        mask[i, :n] = 1.0
        acts = min(t + unroll, length) - t
        actions[i, :acts] = game.actions[t : t + acts]
        rewards[i, 1 : acts + 1] = game.rewards[t : t + acts]
        if game.bootstrap is not None and length - t <= unroll:  # the unroll reaches the cut
            values[i, length - t] = game.value_targets(np.array([length]), discount, td_steps)[0]
            known[i, length - t + 1 :] = 0.0
    return Batch(obs, actions, values, rewards, policies, mask, known)


class Replay:
    """The newest games, up to ``capacity`` positions (oldest games evicted whole)."""

    def __init__(self, capacity: int, discount: float, td_steps: int) -> None:
        self.capacity = capacity
        self.discount = discount
        self.td_steps = td_steps
        self.games: deque[GameRecord] = deque()
        self.positions = 0
        self.games_added = 0

    def add(self, record: GameRecord) -> None:
        """Store a finished game; evict the oldest games."""
        if len(record) == 0:
            return
        self.games.append(stored(record))
        self.positions += len(record)
        self.games_added += 1
        while self.positions > self.capacity and len(self.games) > 1:
            self.positions -= len(self.games.popleft())

    def sample(self, batch_size: int, unroll: int, rng: np.random.Generator) -> Batch:
        """``batch_size`` positions drawn uniformly, unrolled ``unroll`` steps."""
        if self.positions == 0:
            raise ValueError("the replay is empty")
        return draw(self.games, batch_size, unroll, rng, self.discount, self.td_steps)

    def state_dict(self) -> dict[str, Any]:
        return {
            "games": {str(i): g.state_dict() for i, g in enumerate(self.games)},
            "games_added": self.games_added,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.games = deque(
            GameRecord.from_state_dict(state["games"][k]) for k in sorted(state["games"], key=int)
        )
        self.positions = sum(len(g) for g in self.games)
        self.games_added = int(state["games_added"])
