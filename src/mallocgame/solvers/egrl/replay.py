"""The replay buffer every individual's rollouts go into (MARL Algorithm 1's ``R``).

EGRL's MDP has one step: the state is the program's graph (the same for every
proposal of a run), the action the whole proposal, the reward its fitness. A
transition is therefore a proposal (int8 ``[U]``) and its fitness (float); the buffer
is a ring of ``capacity`` of them, the oldest replaced first.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["Replay"]


class Replay:
    """A ring of ``capacity`` proposals of ``num_units`` actions and their fitness."""

    def __init__(self, capacity: int, num_units: int) -> None:
        self.capacity = capacity
        self.num_units = num_units
        self._actions = np.zeros(
            (0, num_units), dtype=np.int8
        )  # storage, grown by doubling to [capacity, U]
        self._fitness = np.zeros(0, dtype=np.float64)
        self.size = 0  # proposals kept
        self.next = 0  # ring position of the next write once full
        self.added = 0  # proposals ever added

    @property
    def actions(self) -> np.ndarray:
        """The proposals kept: int8 [size, U] (a view)."""
        return self._actions[: self.size]

    @property
    def fitness(self) -> np.ndarray:
        """Their fitness: float64 [size] (a view)."""
        return self._fitness[: self.size]

    def _grow(self, rows: int) -> None:
        rows = min(max(rows, 2 * self._actions.shape[0], 16), self.capacity)
        actions = np.zeros((rows, self.num_units), dtype=np.int8)
        fitness = np.zeros(rows, dtype=np.float64)
        actions[: self.size], fitness[: self.size] = self.actions, self.fitness
        self._actions, self._fitness = actions, fitness

    def add(self, proposal: np.ndarray, fitness: float) -> None:
        """Keep ``proposal`` (int [U]) with its ``fitness``."""
        proposal = np.asarray(proposal, dtype=np.int8)
        if proposal.shape != (self.num_units,):
            raise ValueError(f"a proposal of shape {proposal.shape}, expected ({self.num_units},)")
        if self.size < self.capacity:
            if self.size == self._actions.shape[0]:
                self._grow(self.size + 1)
            row = self.size
            self.size += 1
        else:
            row = self.next
            self.next = (self.next + 1) % self.capacity
        self._actions[row] = proposal
        self._fitness[row] = fitness
        self.added += 1

    def sample(self, batch: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``batch`` transitions drawn uniformly with replacement: (int8 [batch, U],
        float64 [batch])."""
        if self.size == 0:
            raise ValueError("the replay buffer is empty")
        rows = rng.integers(0, self.size, size=batch)
        return self.actions[rows], self.fitness[rows]

    def fitness_scale(self) -> tuple[float, float]:
        """Mean and standard deviation (at least 1e-6 of the mean's size, and > 0) of
        the fitness kept: the learner standardizes its targets with them."""
        mean = float(self.fitness.mean()) if self.size else 0.0
        std = float(self.fitness.std()) if self.size else 0.0
        return mean, max(std, 1e-6 * abs(mean), 1e-12)

    def state_dict(self) -> dict[str, Any]:
        return {
            "actions": self.actions,
            "fitness": self.fitness,
            "next": self.next,
            "added": self.added,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Take over :meth:`state_dict`'s ``state``, checked: proposals ``[n, U]`` of
        actions 0-2 with ``n`` fitness values, ``n <= capacity``, and the ring position
        and count :meth:`add` would have left (``next`` 0 and ``added == n`` until the
        ring is full, then ``0 <= next < capacity`` and ``added >= n``), the two whole
        numbers (never rounded); else ``ValueError``."""
        actions = np.asarray(state["actions"])
        fitness = np.asarray(state["fitness"], dtype=np.float64)
        rows = actions.shape[0] if actions.ndim == 2 else -1
        if (
            actions.ndim != 2
            or actions.shape[1] != self.num_units
            or actions.dtype.kind not in "iu"
        ):
            raise ValueError(
                f"replay proposals of shape {actions.shape} ({actions.dtype}), "
                f"expected whole numbers [n, {self.num_units}]"
            )
        if fitness.shape != (rows,) or rows > self.capacity:
            raise ValueError("replay arrays of inconsistent sizes")
        if rows and not ((actions >= 0) & (actions <= 2)).all():
            raise ValueError("a replay proposal with an action outside 0-2")
        position, added = _whole(state["next"], "position"), _whole(state["added"], "count")
        full = rows == self.capacity
        if not (0 <= position < self.capacity if full else position == 0) or not (
            added >= rows if full else added == rows
        ):
            raise ValueError(
                f"replay position {position} and count {added} do not fit {rows} proposals "
                f"of capacity {self.capacity}"
            )
        self._actions, self._fitness = actions.astype(np.int8), fitness.copy()
        self.size = rows
        self.next, self.added = position, added


def _whole(value: Any, what: str) -> int:
    """``value`` (a checkpoint's) as a whole number: an integer, or a float without a
    fraction; else ``ValueError`` (a bool, infinity, NaN, 2.5, a string)."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, float | np.floating) and math.isfinite(value) and float(value) % 1 == 0:
        return int(value)
    raise ValueError(f"replay {what} {value!r} is not a whole number")
