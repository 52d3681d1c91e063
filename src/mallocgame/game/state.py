"""The memory mapping game: public interface over the compiled rule kernels.

:class:`Game` plays one instance buffer by buffer (SPEC sections 2-6). It keeps the
legality and outcome of every action of the current buffer ready (computed once per
decision), so :meth:`Game.legal_mask` costs nothing and :meth:`Game.step` is one
compiled call. :meth:`Game.mark` / :meth:`Game.undo_to` go back any number of
decisions exactly (an undo trail), :meth:`Game.clone` copies the whole state.

Observation: none here (see :mod:`mallocgame.game.features`). Action: 0 Copy,
1 NoCopy, 2 Drop. Reward: seconds saved, SPEC section 5. Termination: after the
last buffer (complete) or in a state with no legal action (infeasible).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mallocgame.errors import (
    GameOverError,
    IllegalActionError,
    InstanceError,
    NoSuchIdError,
    UndoError,
)
from mallocgame.game import kernels as K
from mallocgame.game.tables import B_GROUP, B_IS_OUT, B_TENSOR, I_SUPPLY, GameTables, build_tables
from mallocgame.instance import Instance
from mallocgame.solution import ACTION_NAMES, Allocation

__all__ = [
    "Game",
    "StateViews",
    "COPY",
    "NOCOPY",
    "DROP",
    "ACTION_NAMES",
    "is_action",
    "warm_game_kernels",
]

COPY, NOCOPY, DROP = K.COPY, K.NOCOPY, K.DROP

_warm = False  # the compiled kernels loaded in this process (warm_game_kernels)


@dataclass(frozen=True)
class StateViews:
    """Read-only views of a game's state arrays, for observers that must not copy them
    (layouts in :mod:`mallocgame.game.kernels`). Each shows the game as it is now: a
    later step or undo changes what it holds; writing to one raises ``ValueError``."""

    alloc: (
        np.ndarray
    )  # int64 [B, 6]: each decided buffer's action, offset, memory and copy interval
    analysis: np.ndarray  # int64 [3, 6]: per action (legal, offset, start, end, copy start, end)
    group_state: np.ndarray  # int64 [G]: each alias group's offset (bytes), -1 slow, -2 undecided
    supply_left: np.ndarray  # float64 [T]: copy supply left per step, seconds
    counters: np.ndarray  # int64 [5]: the kernels' counters (C_CURRENT: the current buffer)


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


class Game:
    """One game of an instance; cheap to step, undo and clone (``copy.copy`` and
    ``copy.deepcopy`` clone too; a pickled game is rebound to its own arrays when loaded).

    Args:
        instance: the instance to play.
        tables: its :func:`~mallocgame.game.tables.build_tables` arrays, to share
            them between many games of one instance (built when omitted).

    Raises :class:`InstanceError` if ``instance`` is not an :class:`Instance` or
    ``tables`` not :class:`GameTables` (or ``None``).
    """

    def __init__(self, instance: Instance, tables: GameTables | None = None) -> None:
        if not isinstance(instance, Instance):
            raise InstanceError(f"Game: expected an Instance, not {instance!r:.80}")
        if tables is not None and not isinstance(tables, GameTables):
            raise InstanceError(f"Game: tables must be GameTables or None, not {tables!r:.80}")
        if tables is not None and tables.instance_sha256 != instance.sha256:
            raise InstanceError(f"Game: the tables are not {instance.name}'s (build_tables)")
        self.instance = instance
        self.tables = tables if tables is not None else build_tables(instance)
        tb = self.tables
        num_b, num_t = tb.num_buffers, tb.num_instructions
        self._supply_left = np.empty(num_t, dtype=np.float64)
        self._pair_used = np.empty(num_t, dtype=np.int8)
        self._alloc = np.empty((num_b, 6), dtype=np.int64)
        self._group_state = np.empty(tb.num_groups, dtype=np.int64)
        self._group_left = np.empty(tb.num_groups, dtype=np.int64)
        self._ten_state = np.empty((tb.num_tensors, 3), dtype=np.int64)
        self._active = np.empty(max(num_b, 1), dtype=np.int64)
        self._block_end = np.empty(max(num_b, 1) // K.BLOCK + 1, dtype=np.int64)
        self._trail_t = np.empty(num_t + num_b, dtype=np.int64)
        self._trail_w = np.empty(num_t + num_b, dtype=np.float64)
        self._record = np.empty((max(num_b, 1), 6), dtype=np.int64)
        self._record_return = np.empty(max(num_b, 1), dtype=np.float64)
        self._ctr = np.zeros(5, dtype=np.int64)
        self._ret = np.zeros(1, dtype=np.float64)
        self._out = np.empty((3, 6), dtype=np.int64)
        self._lo = np.empty(max(num_b, 1), dtype=np.int64)
        self._hi = np.empty(max(num_b, 1), dtype=np.int64)
        self._bind()
        self.reset()

    def _bind(self) -> None:
        tb = self.tables
        self.views = StateViews(
            alloc=_read_only(self._alloc),
            analysis=_read_only(self._out),
            group_state=_read_only(self._group_state),
            supply_left=_read_only(self._supply_left),
            counters=_read_only(self._ctr),
        )
        fast_bw, slow_bw = float(tb.hw[2]), float(tb.hw[3])
        state = (
            self._supply_left,
            self._pair_used,
            self._alloc,
            self._group_state,
            self._group_left,
            self._ten_state,
            self._active,
            self._block_end,
            self._trail_t,
            self._trail_w,
            self._record,
            self._record_return,
            self._ctr,
            self._ret,
            self._out,
            self._lo,
            self._hi,
        )
        self._apply_args = (
            tb.buf_int,
            tb.buf_demand,
            tb.ins_int,
            tb.ins_float,
            tb.ins_buf,
            tb.table_s,
            tb.ten_int,
            tb.capacity,
            tb.alignment,
            fast_bw,
            slow_bw,
            *state,
        )
        self._undo_args = (tb.buf_int, tb.buf_demand, tb.ten_int, tb.capacity, tb.alignment, *state)
        self._analyze_args = (
            tb.buf_int,
            tb.buf_demand,
            tb.ten_int,
            tb.capacity,
            tb.alignment,
            self._supply_left,
            self._pair_used,
            self._alloc,
            self._group_state,
            self._ten_state,
            self._active,
            self._block_end,
            self._ctr,
            self._out,
            self._lo,
            self._hi,
        )

    # ------------------------------------------------------------------ lifecycle

    def reset(self) -> None:
        """Back to the initial state: nothing decided, all supply free."""
        tb = self.tables
        self._supply_left[:] = tb.ins_float[:, I_SUPPLY]
        self._pair_used[:] = 0
        self._alloc[:] = -1
        self._group_state[:] = K.UNDECIDED
        self._group_left[:] = tb.group_size
        self._ten_state[:, K.T_RESIDENT] = 0
        self._ten_state[:, K.T_LATEST] = -1
        reads = tb.buf_int[tb.buf_int[:, B_IS_OUT] == 0, B_TENSOR]
        self._ten_state[:, K.T_READS_LEFT] = np.bincount(reads, minlength=tb.num_tensors)
        self._ctr[:] = 0
        self._ret[0] = 0.0
        K.analyze(*self._analyze_args)

    _DERIVED = ("views", "_apply_args", "_undo_args", "_analyze_args")
    """What :meth:`_bind` makes from the state arrays: never pickled or copied, made again."""

    def __getstate__(self) -> dict[str, object]:
        return {k: v for k, v in vars(self).items() if k not in self._DERIVED}

    def __setstate__(self, state: dict[str, object]) -> None:
        vars(self).update(state)
        self._bind()  # the views and the kernels' arguments of these arrays, not the pickled ones

    def __copy__(self) -> Game:
        return self.clone()  # a copy that shared the state arrays would step the original too

    def __deepcopy__(self, memo: dict[int, object]) -> Game:
        return self.clone()

    def clone(self) -> Game:
        """An independent copy of this game in its current state (tables shared)."""
        other = object.__new__(Game)
        other.instance = self.instance
        other.tables = self.tables
        for name, value in vars(self).items():
            if isinstance(value, np.ndarray):
                setattr(other, name, value.copy())
        other._bind()
        return other

    # ---------------------------------------------------------------------- queries

    @property
    def num_buffers(self) -> int:
        return self.tables.num_buffers

    @property
    def current_buffer(self) -> int:
        """Id of the buffer to decide next (= decisions made so far)."""
        return int(self._ctr[K.C_CURRENT])

    @property
    def complete(self) -> bool:
        return self.current_buffer >= self.num_buffers

    @property
    def infeasible(self) -> bool:
        """No legal action for the current buffer: the game is lost."""
        return not self.complete and not self._out[:, K.O_LEGAL].any()

    @property
    def done(self) -> bool:
        return self.complete or self.infeasible

    @property
    def is_backup_point(self) -> bool:
        """No undecided buffer is in a fast group or reads a fast-resident tensor (SPEC section 6)."""
        return self._ctr[K.C_PENDING_FAST] == 0 and self._ctr[K.C_PENDING_RESIDENT] == 0

    @property
    def return_s(self) -> float:
        """Sum of the rewards so far (seconds)."""
        return float(self._ret[0])

    @property
    def normalized_return(self) -> float:
        r = self.tables.normalizer_s
        return self.return_s / r if r != 0 else 0.0

    def legal_mask(self) -> np.ndarray:
        """Legal actions of the current buffer: bool [3] (Copy, NoCopy, Drop); all False when done."""
        return self._out[:, K.O_LEGAL] != 0

    def outcome(self, action: int) -> tuple[int, int, int, int, int] | None:
        """What ``action`` would place now: (offset, start, end, copy_start, copy_end), -1 for
        none; ``None`` if illegal (Drop places nothing and gives all -1);
        :class:`IllegalActionError` for what is not an action (an int 0..2)."""
        if not is_action(action):
            raise IllegalActionError(f"{action!r} is not an action (0, 1 or 2)")
        row = self._out[action]
        if row[K.O_LEGAL] == 0:
            return None
        return tuple(int(v) for v in row[1:])  # type: ignore[return-value]

    def _id(self, value: int, count: int, what: str) -> int:
        """``value`` as one of ``count`` ids of ``what``; :class:`NoSuchIdError` otherwise."""
        if not (_whole(value) and 0 <= value < count):
            raise NoSuchIdError(f"{value!r:.40} is not a {what} id (0..{count - 1})")
        return int(value)

    def group_of(self, buffer: int) -> int:
        """Dense alias-group index of ``buffer`` (:class:`NoSuchIdError` for no buffer's
        id; so for the three queries below)."""
        buffer = self._id(buffer, self.num_buffers, "buffer")
        return int(self.tables.buf_int[buffer, B_GROUP])

    def reads_fast_resident(self, buffer: int) -> int:
        """The tensor ``buffer`` reads if that tensor is fast-resident, else -1."""
        tb = self.tables
        buffer = self._id(buffer, self.num_buffers, "buffer")
        if tb.buf_int[buffer, B_IS_OUT]:
            return -1
        x = int(tb.buf_int[buffer, B_TENSOR])
        return x if self._ten_state[x, K.T_RESIDENT] else -1

    def supply_left(self) -> np.ndarray:
        """Remaining copy supply per step, seconds [T] (a copy)."""
        return self._supply_left.copy()

    def placements(self) -> np.ndarray:
        """The decided buffers' rows, int64 [decided, 6]: action (0 Copy, 1 NoCopy, 2 Drop),
        offset (bytes), memory interval start and end (steps; -1 -1 when empty), copy
        interval start and end (-1 -1 for none). Row ``b`` is buffer ``b``. A read-only
        view of the state, not a copy: a later step or undo changes what it shows."""
        view = self._alloc[: self.current_buffer]
        view.flags.writeable = False
        return view

    def pair_used(self) -> np.ndarray:
        """``pair_used[t]``: steps ``t`` and ``t+1`` lie in one copy interval, bool [T] (a copy)."""
        return self._pair_used != 0

    def group_offset(self, group: int) -> int:
        """Alias group ``group``'s state: its fast offset (bytes), -1 slow, -2 undecided."""
        group = self._id(group, len(self._group_state), "alias group")
        return int(self._group_state[group])

    def latest_allocation(self, tensor: int) -> int:
        """The buffer holding ``tensor``'s non-empty allocation with the latest end (the one
        an operand NoCopy extends), or -1 if none."""
        tensor = self._id(tensor, len(self._ten_state), "tensor")
        return int(self._ten_state[tensor, K.T_LATEST])

    def actions(self) -> list[int]:
        """The actions played so far, in game order."""
        return [int(a) for a in self._alloc[: self.current_buffer, K.A_ACTION]]

    def allocations(self) -> list[Allocation]:
        """One :class:`Allocation` per buffer placed in fast memory so far, by buffer id."""
        result = []
        rows = self._alloc[: self.current_buffer]
        for b in np.flatnonzero(rows[:, K.A_ACTION] <= NOCOPY):
            action, offset, start, end, cs, ce = (int(v) for v in rows[b])
            result.append(
                Allocation(
                    buffer=int(b),
                    action=ACTION_NAMES[action],
                    offset=offset,
                    start=None if start < 0 else start,
                    end=None if start < 0 else end,
                    copy=None if cs < 0 else (cs, ce),
                )
            )
        return result

    # ---------------------------------------------------------------------- actions

    def step(self, action: int) -> float:
        """Play ``action`` for the current buffer; return its reward (seconds).

        Raises :class:`GameOverError` when the game is over and
        :class:`IllegalActionError` when ``action`` is not legal now.
        """
        # an int 0..2 (a float, a bool or an array is not an action); O_LEGAL all 0 when over.
        # :func:`is_action` inlined on the hot path: a plain int pays one type test beside
        # the membership test.
        if (
            (type(action) is not int and not _whole(action))
            or action not in (0, 1, 2)
            or self._out[action, 0] == 0
        ):
            self._raise_illegal(action)
        return K.apply(*self._apply_args, action)

    def step_forced(self, drop_only: np.ndarray) -> tuple[int, int]:
        """Play every decision from the current one on that has exactly one allowed
        action (a legal one; Drop alone where ``drop_only[b]``), in one compiled loop, as
        :meth:`step` would one by one; stop at the end, at a decision with a choice, or at
        one with no allowed action.

        Args:
            drop_only: bool [num_buffers + 1], by buffer id: the buffers whose only allowed
                action is Drop when it is legal (Drop-backup's forced groups).

        Returns:
            (decisions played, :meth:`mark` of the latest backup point reached after one
            of them, or -1 where none was).
        """
        if (
            not isinstance(drop_only, np.ndarray)
            or drop_only.dtype != np.bool_
            or drop_only.shape != (self.num_buffers + 1,)
        ):
            raise ValueError(f"drop_only must be bool [{self.num_buffers + 1}]")
        played, mark = K.apply_forced(*self._apply_args, drop_only)
        return int(played), int(mark)

    def _raise_illegal(self, action: int) -> None:
        if self.done:
            state = "complete" if self.complete else "infeasible"
            raise GameOverError(f"the game is over ({state}); no action can be played")
        name = ACTION_NAMES[action] if is_action(action) else repr(action)
        legal = [ACTION_NAMES[a] for a in range(3) if self._out[a, K.O_LEGAL]]
        raise IllegalActionError(
            f"buffer {self.current_buffer}: action {name} is illegal (legal: {', '.join(legal)})"
        )

    def mark(self) -> int:
        """A mark of the current state for :meth:`undo_to` (the number of decisions)."""
        return self.current_buffer

    def undo_to(self, mark: int) -> None:
        """Undo decisions until only the first ``mark`` are made (exactly, trail-based);
        :class:`UndoError` unless ``mark`` is a whole number in ``0 .. decisions made``."""
        if not _whole(mark) or not 0 <= mark <= self.current_buffer:
            raise UndoError(f"cannot undo to {mark!r}: {self.current_buffer} decisions made")
        K.undo_to(*self._undo_args, int(mark))

    def undo(self, steps: int = 1) -> None:
        """Undo the last ``steps`` decisions; :class:`UndoError` unless ``steps`` is a
        whole number in ``0 .. decisions made``."""
        if not _whole(steps) or not 0 <= steps <= self.current_buffer:
            raise UndoError(f"cannot undo {steps!r} decisions: {self.current_buffer} made")
        self.undo_to(self.current_buffer - int(steps))


def _whole(value: object) -> bool:
    """An integer (NumPy's too) that is not a ``bool``."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def is_action(value: object) -> bool:
    """Whether ``value`` is an action: an int 0..2 (NumPy's too), never a float, a bool
    or an array that compares equal to one."""
    return (type(value) is int or _whole(value)) and value in (0, 1, 2)


def replay(
    instance: Instance, actions: list[int] | tuple[int, ...], tables: GameTables | None = None
) -> Game:
    """Play ``actions`` from the start; raises :class:`IllegalActionError` naming the step."""
    game = Game(instance, tables)
    for i, action in enumerate(actions):
        if game.done:
            raise GameOverError(f"step {i}: the game is over, {len(actions) - i} actions left")
        try:
            game.step(int(action) if is_action(action) else action)  # 0.7 is no action
        except IllegalActionError as exc:
            raise IllegalActionError(f"step {i}: {exc}") from None
    return game


def warm_game_kernels(instance: Instance) -> None:
    """Load the game's compiled kernels (numba's cache) in this process, once: a game of
    ``instance`` made, one move played, undone, the forced moves played. Loading them
    takes about half a second in a fresh process; called before a solver's clock starts
    (:meth:`~mallocgame.solvers.base.Solver.solve`, for every caller, under a wall-clock
    budget), it keeps that loading out of the budget, so that the budget is the solver's
    alone. Later calls cost nothing."""
    global _warm
    if _warm:
        return
    game = Game(instance)  # analyze
    legal = np.flatnonzero(game.legal_mask())
    if legal.size:
        game.step(int(legal[0]))  # apply
        game.undo_to(0)  # undo_to
        game.step_forced(np.zeros(game.num_buffers + 1, dtype=bool))  # apply_forced
    _warm = True
