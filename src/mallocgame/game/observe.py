"""The MuZero agent's observation of a game state (paper section 4.3.1), kept incrementally.

:class:`Observer` follows one :class:`~mallocgame.game.state.Game` and writes its
observation as a dict of fixed-shape float32 numpy arrays (shapes from
:func:`observation_shapes`, named by :data:`OBSERVATION_KEYS`). ``B`` is the number
of buffers, ``T`` the number of instructions (steps), ``C`` the fast memory capacity
in bytes, ``τ`` the current buffer's target time, ``k`` / ``l`` / ``S`` / ``W`` /
``A`` / ``P`` / ``V`` the :class:`ObservationConfig` fields ``future_buffers`` /
``same_tensor_buffers`` / ``grid_steps`` / ``grid_window`` / ``grid_addr`` /
``profile_bins`` / ``supply_window``.

Arrays (all float32; every array is all zeros when the game is over, complete or
infeasible):

- ``"buffers"`` [1 + k + l, NUM_BUFFER_FEATURES]: row 0 the current buffer, rows
  1..k the next ``k`` buffers in game order (ids ``b+1 .. b+k``), rows k+1..k+l the
  next ``l`` buffers after the current one with the same ``tensor_id`` (in game
  order, operands and outputs alike). Columns 0..12 are the static paper-Table-1
  features 0..12 of :mod:`mallocgame.game.features` (same meaning and scale, in
  [-1, 10]); column 13 (:data:`BUF_PRESENT`) is 1 for a real buffer. Rows past the
  end of the program (or of the tensor's buffers) are padding: all zero.
- ``"decision"`` [NUM_FEATURES]: :func:`mallocgame.game.features.decision_features`
  of the current decision (action legality, intervals, offsets, group and tensor
  state, progress, return, supply), in [-1, 10].
- ``"globals"`` [4] (:data:`GLOBAL_NAMES`): move number / B clipped to [0, 10] (the
  move number is given by the caller: moves played, including those Drop-backup
  undid); current buffer index / B in [0, 1); 0-based index of the current buffer
  among its alias group's buffers in game order / group size in [0, 1); buffers of
  the group after the current one (all still undecided) / group size in [0, 1).
- ``"grid"`` [S, A]: binary image of fast-memory occupancy (the memory map M_t of the
  paper) over the ``W`` steps ``[τ - W//2, τ - W//2 + W)``; row ``i`` max-pools the
  ``W / S`` steps ``τ - W//2 + i*W/S ...`` (steps outside ``[0, T)`` count as empty),
  column ``j`` max-pools profile bins ``j*P/A .. (j+1)*P/A - 1``. The row holding
  ``τ`` is ``(W//2) // (W/S)`` (row ``S/2`` when ``W/S`` divides ``W//2``).
- ``"profile"`` [P]: binary occupancy at ``τ`` of the ``P`` address bins; bin ``p``
  covers the addresses ``[p * C / P, (p + 1) * C / P)`` (real-valued bounds: ``C / P``
  bytes each, not necessarily whole bytes).
- ``"supply"`` [V]: remaining copy supply over initial supply (SPEC's
  ``W[t] / supply_s[t]``, :meth:`Game.supply_left` over ``supply_s``) for the steps
  ``[τ - V//2, τ - V//2 + V)``, in [0, 1]; 1 where ``supply_s[t]`` is 0 inside the
  program, 0 outside the program.

Occupancy: a cell/bin is 1 when any placed allocation touches it: the memory interval
``[start, end]`` (steps, inclusive) of any buffer placed in fast memory (Copy or
NoCopy; an operand NoCopy that extends its tensor's allocation adds its own interval
``[A.end + 1, τ]``; one that keeps the tensor resident adds nothing) at the bytes
``[offset, offset + aligned size)``, i.e. the address bins ``floor(offset * P / C)``
to ``ceil((offset + size) * P / C) - 1`` (in floating point, within a bin, where ``C x
P`` passes int64). Empty intervals and zero-size buffers touch nothing.

Incremental maintenance: the observer keeps ``occ`` [T, P] int32, the number of
allocations touching each (step, bin), and per buffer the rectangle it added. Each
:meth:`Observer.sync` adds the rectangles of buffers decided since the last sync
(from ``Game._alloc`` rows, layout in :mod:`mallocgame.game.kernels`) and, when the
game went back (``undo_to``, Drop-backup, ``reset``), subtracts exactly what it had
added for the undone buffers (from its own record, never from the undone ``_alloc``
rows). A step costs one rectangle add (O(length x bins) of that allocation); nothing
is rebuilt. Contract: sync (or observe) after every undo before the game advances
again, as a self-play loop that observes after every Drop-backup step does; then the
counts are exact. An undo followed by new decisions with no sync in between is caught
only if it changed the last synced buffer's ``_alloc`` row (an O(1) check; Drop rows
all look alike, so often it did not); ``sync(verify=True)`` compares every synced row
(O(B)) and is exact whatever happened in between.

Cost (``benchmarks/observe_speed.py``, xla-v1/bert_train, 3,091 buffers, random
Drop-backup play on a 2-core x86 machine): about 14 µs median per decision for sync
plus writing a batch row, of which about 4 µs are the decision features and about
6 µs the call into the compiled kernel.

Everything that depends only on the instance and the config (the static buffer rows,
the buffer index lists, the alias-group positions, the per-step inverse supply) is
computed once per (tables, config) and shared by all observers of those tables.
"""

from __future__ import annotations

import math
import operator
import weakref
from dataclasses import dataclass, fields

import numpy as np

from mallocgame.game.features import (
    NUM_FEATURES,
    FeatureExtractor,
    feature_extractor,
    finite_reciprocals,
)
from mallocgame.game.kernels import (
    A_ACTION,
    A_END,
    A_OFFSET,
    A_START,
    C_CURRENT,
    COPY,
    NOCOPY,
    O_LEGAL,
)
from mallocgame.game.state import Game
from mallocgame.game.tables import B_ALIGNED, B_GROUP, B_TENSOR, B_TIME, I_SUPPLY, GameTables
from mallocgame.jit import jit as _jit  # numba.njit(cache=True, nogil=True)
from mallocgame.options import check_ranges, setting

__all__ = [
    "ObservationConfig",
    "Observer",
    "observation_shapes",
    "empty_batch",
    "OBSERVATION_KEYS",
    "NUM_STATIC_FEATURES",
    "NUM_BUFFER_FEATURES",
    "BUF_PRESENT",
    "GLOBAL_NAMES",
]

NUM_STATIC_FEATURES = 13  # features 0..12 of mallocgame.game.features (paper Table 1)
BUF_PRESENT = NUM_STATIC_FEATURES  # column of the "present" flag in a buffer row
NUM_BUFFER_FEATURES = NUM_STATIC_FEATURES + 1
GLOBAL_NAMES: tuple[str, ...] = ("move", "progress", "group_index", "group_left")
OBSERVATION_KEYS: tuple[str, ...] = ("buffers", "decision", "globals", "grid", "profile", "supply")
MOVE_CLIP = 10.0  # globals[0] = min(move_number / B, MOVE_CLIP)

NUM_GLOBALS = len(GLOBAL_NAMES)
# Columns of Observer._rec [B, 8]: the rectangle buffer b added (steps R_T0..R_T1, bins
# R_P0..R_P1; R_T0 = -1: none), then the _alloc columns A_ACTION..A_END it came from.
R_T0, R_T1, R_P0, R_P1, R_SEEN = range(5)
_SEEN = A_END + 1


@dataclass(frozen=True)
class ObservationConfig:
    """Sizes of the observation (paper section 4.3.1; the paper uses k = 5, a 128 x 128
    memory-map image and the full-resolution profile). Each field lies in its declared
    range, ``grid_steps`` divides ``grid_window`` (each image row max-pools a whole
    number of steps) and ``grid_addr`` divides ``profile_bins`` (``ValueError``
    otherwise); ``profile_bins`` is also the address resolution of the
    maintained occupancy counts."""

    future_buffers: int = setting(
        5, "k: buffers after the current one in game order (>= 0)", within="[0, 64]"
    )
    same_tensor_buffers: int = setting(
        3, "l: later buffers of the current buffer's tensor (>= 0)", within="[0, 64]"
    )
    grid_steps: int = setting(
        32, "S: time rows of the memory-map image (divides grid_window)", within="[1, 1024]"
    )
    grid_window: int = setting(
        128, "W: steps the image covers, [t - W/2, t + W/2)", within="[1, 65536]"
    )
    grid_addr: int = setting(
        32, "A: address columns of the image (divides profile_bins)", within="[1, 1024]"
    )
    profile_bins: int = setting(
        64, "P: address bins of the memory profile at the current step", within="[1, 4096]"
    )
    supply_window: int = setting(
        32, "V: steps of remaining copy supply, [t - V/2, t + V/2)", within="[1, 65536]"
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"ObservationConfig.{f.name} must be an int, got {value!r}")
            object.__setattr__(self, f.name, int(value))
        check_ranges(self)
        if self.grid_window % self.grid_steps != 0:
            raise ValueError(
                f"ObservationConfig.grid_window ({self.grid_window}) must be a multiple of "
                f"grid_steps ({self.grid_steps}): each image row pools a whole number of steps"
            )
        if self.profile_bins % self.grid_addr != 0:
            raise ValueError(
                f"ObservationConfig.profile_bins ({self.profile_bins}) must be a multiple of "
                f"grid_addr ({self.grid_addr}): each image column pools whole profile bins"
            )

    @property
    def buffer_rows(self) -> int:
        """Rows of the ``"buffers"`` array: ``1 + k + l``."""
        return 1 + self.future_buffers + self.same_tensor_buffers


def observation_shapes(
    config: ObservationConfig = ObservationConfig(),
) -> dict[str, tuple[int, ...]]:
    """Shape of each observation array (all float32), keyed by :data:`OBSERVATION_KEYS`."""
    return {
        "buffers": (config.buffer_rows, NUM_BUFFER_FEATURES),
        "decision": (NUM_FEATURES,),
        "globals": (len(GLOBAL_NAMES),),
        "grid": (config.grid_steps, config.grid_addr),
        "profile": (config.profile_bins,),
        "supply": (config.supply_window,),
    }


def empty_batch(config: ObservationConfig, batch_size: int) -> dict[str, np.ndarray]:
    """Zeroed float32 batch arrays ``[batch_size, *shape]`` for :meth:`Observer.observe`."""
    batch_size = operator.index(batch_size)
    if batch_size < 0:
        raise ValueError(f"batch_size must be >= 0, got {batch_size}")
    return {
        key: np.zeros((batch_size, *shape), dtype=np.float32)
        for key, shape in observation_shapes(config).items()
    }


# ---------------------------------------------------------------------------- kernels


@_jit
def _row_matches(alloc, rec, b):
    for c in range(_SEEN):
        if rec[b, R_SEEN + c] != alloc[b, c]:
            return False
    return True


_I64_MAX = 2**63 - 1


@_jit
def _sync(alloc, aligned, capacity, occ, rec, synced, current, verify):
    """Bring ``occ`` from the first ``synced`` decisions to the game's first ``current``.

    ``rec`` [B, 8] int64: per buffer, the rectangle it added (first step, last step,
    first bin, last bin; first step -1 for none) and the ``_alloc`` columns
    A_ACTION..A_END it was read from. Buffers from the first whose ``_alloc`` row no
    longer matches (checked: the last one only, or all with ``verify``) and those
    the game undid are subtracted with their recorded rectangles, then the game's new
    decisions are added. Returns the new synced count (``current``).
    """
    num_bins = occ.shape[1]
    in_int64 = capacity <= _I64_MAX // num_bins  # offset x bins cannot wrap around
    keep = min(synced, current)
    if keep > 0 and (verify or not _row_matches(alloc, rec, keep - 1)):
        for b in range(keep):
            if not _row_matches(alloc, rec, b):
                keep = b
                break
    for b in range(synced - 1, keep - 1, -1):
        t0 = rec[b, R_T0]
        if t0 >= 0:
            occ[t0 : rec[b, R_T1] + 1, rec[b, R_P0] : rec[b, R_P1] + 1] -= 1
            rec[b, R_T0] = -1
    for b in range(keep, current):
        for c in range(_SEEN):
            rec[b, R_SEEN + c] = alloc[b, c]
        rec[b, R_T0] = -1
        action = alloc[b, A_ACTION]
        start = alloc[b, A_START]
        size = aligned[b]
        if (action == COPY or action == NOCOPY) and start >= 0 and size > 0:
            end = alloc[b, A_END]
            offset = alloc[b, A_OFFSET]
            if in_int64:
                p0 = offset * num_bins // capacity
                p1 = min(((offset + size) * num_bins - 1) // capacity, num_bins - 1)
            else:  # C x P past int64 (petabytes): in floating point, within a bin
                scale = num_bins / capacity
                p0 = min(int(offset * scale), num_bins - 1)
                p1 = min(max(int(math.ceil((offset + size) * scale)) - 1, p0), num_bins - 1)
            occ[start : end + 1, p0 : p1 + 1] += 1
            rec[b, R_T0] = start
            rec[b, R_T1] = end
            rec[b, R_P0] = p0
            rec[b, R_P1] = p1
    return current


@_jit
def _observe(
    alloc,
    legal,
    supply_left,
    inv_supply,
    stat_i,
    stat_f,
    occ,
    rec,
    synced,
    current,
    capacity,
    move_scale,
    window,
    supply_window,
    index,
    buffers,
    glob,
    grid,
    profile,
    supply,
):
    """Sync, then write row ``index`` of the batch arrays (all but ``"decision"``).

    ``legal``: the game's ``views.analysis`` [3, 6]. ``stat_i`` / ``stat_f``: :class:`_Static`.
    Returns the new synced count, or -1 (nothing done) if an array's shape is wrong
    or ``index`` is out of range.
    """
    num_t, num_bins = occ.shape
    num_rows = buffers.shape[1]
    steps, addr = grid.shape[1], grid.shape[2]
    n = buffers.shape[0]
    if (
        stat_i.shape[1] != num_rows + 2
        or buffers.shape[2] != NUM_BUFFER_FEATURES
        or glob.shape[1] != NUM_GLOBALS
        or profile.shape[1] != num_bins
        or supply.shape[1] != supply_window
        or steps < 1
        or addr < 1
        or window % steps != 0
        or num_bins % addr != 0
        or glob.shape[0] != n
        or grid.shape[0] != n
        or profile.shape[0] != n
        or supply.shape[0] != n
        or index < 0
        or index >= n
    ):
        return -1
    synced = _sync(alloc, stat_i[:, num_rows], capacity, occ, rec, synced, current, False)

    over = current >= stat_f.shape[0] - 1  # complete
    if over or (legal[0, O_LEGAL] == 0 and legal[1, O_LEGAL] == 0 and legal[2, O_LEGAL] == 0):
        buffers[index] = 0.0
        glob[index] = 0.0
        grid[index] = 0.0
        profile[index] = 0.0
        supply[index] = 0.0
        return synced
    b = current
    tau = stat_i[b, num_rows + 1]

    for i in range(num_rows):
        r = stat_i[b, i]
        for c in range(NUM_BUFFER_FEATURES):
            buffers[index, i, c] = stat_f[r, c]
    glob[index, 0] = min(move_scale, MOVE_CLIP)
    for c in range(1, NUM_GLOBALS):
        glob[index, c] = stat_f[b, NUM_BUFFER_FEATURES + c - 1]

    for p in range(num_bins):
        profile[index, p] = 1.0 if occ[tau, p] > 0 else 0.0

    pool_t = window // steps
    pool_p = num_bins // addr
    first = tau - window // 2
    acc = np.empty(num_bins, dtype=np.int32)
    for i in range(steps):
        t0 = max(first + i * pool_t, 0)
        t1 = min(first + (i + 1) * pool_t, num_t)
        acc[:] = 0
        for t in range(t0, t1):
            for p in range(num_bins):
                acc[p] |= occ[t, p]
        for j in range(addr):
            hit = 0
            for p in range(j * pool_p, (j + 1) * pool_p):
                hit |= acc[p]
            grid[index, i, j] = 1.0 if hit != 0 else 0.0

    first = tau - supply_window // 2
    for i in range(supply_window):
        t = first + i
        if t < 0 or t >= num_t:
            supply[index, i] = 0.0
        elif inv_supply[t] == 0.0:
            supply[index, i] = 1.0
        else:
            supply[index, i] = min(max(supply_left[t] * inv_supply[t], 0.0), 1.0)
    return synced


# ---------------------------------------------------------------------- static arrays


class _Static:
    """Instance- and config-only arrays shared by the observers of one tables object.

    ``stat_i`` [max(B, 1), R + 2] int64 (``R = 1 + k + l``): per buffer, the rows of
    ``stat_f`` its ``"buffers"`` array shows (``B``: the padding row), then its
    aligned size (bytes), then its target time.
    ``stat_f`` [B + 1, NUM_BUFFER_FEATURES + 3] float32: per buffer its buffer row
    (static features 0..12 and the present flag 1; row ``B`` all zero), then globals
    1..3 (b / B, index in its group / group size, later buffers of the group / group
    size).
    ``inv_supply`` [T] float64: ``1 / supply_s[t]`` (1/s), 0 where ``supply_s[t]`` is 0.
    """

    def __init__(
        self, extractor: FeatureExtractor, tb: GameTables, config: ObservationConfig
    ) -> None:
        num_b = tb.num_buffers
        bi = tb.buf_int
        ids = np.arange(num_b, dtype=np.int64)
        k, l = config.future_buffers, config.same_tensor_buffers  # noqa: E741 (the docstring's l)
        num_rows = config.buffer_rows

        stat_f = np.zeros((num_b + 1, NUM_BUFFER_FEATURES + NUM_GLOBALS - 1), dtype=np.float32)
        stat_f[:num_b, :NUM_STATIC_FEATURES] = extractor._rows[:, :NUM_STATIC_FEATURES]
        stat_f[:num_b, BUF_PRESENT] = 1.0

        stat_i = np.full((max(num_b, 1), num_rows + 2), num_b, dtype=np.int64)
        stat_i[:num_b, 0] = ids
        for j in range(1, k + 1):
            stat_i[:num_b, j] = np.minimum(ids + j, num_b)
        if num_b > 0:
            # Next l buffers of the same tensor: neighbours in (tensor, id) order.
            tensor = bi[:, B_TENSOR]
            order = np.lexsort((ids, tensor))
            pos = np.empty(num_b, dtype=np.int64)
            pos[order] = ids
            ten_sorted = tensor[order]
            seg_end = np.searchsorted(ten_sorted, ten_sorted, side="right")[pos]  # one past
            for j in range(1, l + 1):
                at = pos + j
                stat_i[:num_b, k + j] = np.where(
                    at < seg_end, order[np.minimum(at, num_b - 1)], num_b
                )
            stat_i[:num_b, num_rows] = bi[:, B_ALIGNED]
            stat_i[:num_b, num_rows + 1] = bi[:, B_TIME]

            # Index of each buffer among its alias group's buffers, in game order.
            group = bi[:, B_GROUP]
            order = np.lexsort((ids, group))
            g_sorted = group[order]
            index_in_group = np.empty(num_b, dtype=np.int64)
            index_in_group[order] = ids - np.searchsorted(g_sorted, g_sorted, side="left")
            size = tb.group_size[group].astype(np.float64)
            stat_f[:num_b, NUM_BUFFER_FEATURES] = ids / num_b
            stat_f[:num_b, NUM_BUFFER_FEATURES + 1] = index_in_group / size
            stat_f[:num_b, NUM_BUFFER_FEATURES + 2] = (size - index_in_group - 1) / size
        else:
            stat_i[:, num_rows:] = 0
        self.stat_i = stat_i
        self.stat_f = stat_f
        supply = tb.ins_float[:, I_SUPPLY]
        self.inv_supply = finite_reciprocals(supply)
        self.aligned = np.ascontiguousarray(stat_i[:, num_rows])


_STATIC: dict[tuple[int, ObservationConfig], tuple[weakref.ref[GameTables], _Static]] = {}


def _static_for(game: Game, config: ObservationConfig) -> _Static:
    """The shared :class:`_Static` of ``game``'s tables and ``config`` (built on first use)."""
    tb = game.tables
    key = (id(tb), config)
    entry = _STATIC.get(key)
    if entry is not None and entry[0]() is tb:
        return entry[1]
    static = _Static(feature_extractor(game), tb, config)

    def _drop(ref: object, key: tuple[int, ObservationConfig] = key) -> None:
        current = _STATIC.get(key)
        if current is not None and current[0] is ref:
            del _STATIC[key]

    _STATIC[key] = (weakref.ref(tb, _drop), static)
    return static


# ---------------------------------------------------------------------------- observer


class Observer:
    """Follows one game and writes its observation (see the module docstring).

    Args:
        game: the game to observe; it may be stepped, undone (``undo_to``, Drop-backup)
            and ``reset()`` freely between calls (see :meth:`sync`).
        config: the observation sizes.

    Attributes:
        occ: int32 [T, profile_bins], the number of placed allocations touching each
            (step, address bin), as of the last :meth:`sync`.
        config: the :class:`ObservationConfig`.
    """

    def __init__(self, game: Game, config: ObservationConfig = ObservationConfig()) -> None:
        if not isinstance(config, ObservationConfig):
            raise TypeError(f"config must be an ObservationConfig, got {type(config).__name__}")
        self._game = game
        self.config = config
        self._shapes = observation_shapes(config)
        tb = game.tables
        self._static = _static_for(game, config)
        self._extractor = feature_extractor(game)
        self._inv_b = 1.0 / max(tb.num_buffers, 1)
        self._capacity = max(int(tb.capacity), 1)
        self.occ = np.zeros((tb.num_instructions, config.profile_bins), dtype=np.int32)
        self._rec = np.full((max(tb.num_buffers, 1), R_SEEN + _SEEN), -1, dtype=np.int64)
        self._synced = 0
        self.sync()

    @property
    def game(self) -> Game:
        """The observed game."""
        return self._game

    @property
    def synced(self) -> int:
        """Decisions reflected in :attr:`occ` (the game's ``current_buffer`` at the last sync)."""
        return self._synced

    def reset(self) -> None:
        """Forget everything and rebuild :attr:`occ` from the game's current state."""
        self.occ[:] = 0
        self._rec[:] = -1
        self._synced = 0
        self.sync()

    def sync(self, verify: bool = False) -> None:
        """Bring :attr:`occ` up to date with the game: add the rectangles of new decisions,
        subtract the recorded rectangles of undone ones.

        Exact when, between two syncs, the game only advanced or only went back
        (``step``, ``undo_to``, Drop-backup, ``reset``). If it went back and then
        advanced again, the change is noticed only when it altered the last synced
        buffer's ``_alloc`` row (O(1) check) unless ``verify``: then every synced
        buffer's row is compared with the one it added (O(B), a few microseconds for
        3,000 buffers) and the counts are exact in every case.
        """
        views = self._game.views
        self._synced = _sync(
            views.alloc,
            self._static.aligned,
            self._capacity,
            self.occ,
            self._rec,
            self._synced,
            int(views.counters[C_CURRENT]),
            verify,
        )

    def observe(
        self,
        move_number: int = 0,
        out: dict[str, np.ndarray] | None = None,
        index: int | None = None,
    ) -> dict[str, np.ndarray]:
        """Sync, then write the observation of the game's current state.

        Args:
            move_number: moves played so far, including those Drop-backup undid
                (``globals[0] = min(max(move_number, 0) / B, 10)``).
            out: batch arrays (e.g. from :func:`empty_batch`), each key's array
                float32 ``[batch, *shape]`` (any layout); row ``index`` is written in
                place and the other rows are left alone.
            index: the batch row to write: required with ``out``, in ``[0, batch)``.

        Returns:
            Without ``out``: a new dict of float32 arrays of the shapes of
            :func:`observation_shapes`. With ``out``: ``out`` itself (like numpy's
            ``out=`` arguments; ``out[key][index]`` is the observation).

        Raises:
            ValueError: ``index`` without ``out`` or the reverse, an ``out`` array of the
                wrong shape, or ``index`` not an int (a bool, a float) or out of range.
        """
        if out is None:
            if index is not None:
                raise ValueError("index is given but out is not")
            batch = {
                key: np.empty((1, *shape), dtype=np.float32) for key, shape in self._shapes.items()
            }
            self._write(move_number, batch, 0)
            return {key: arr[0] for key, arr in batch.items()}
        if index is None:
            raise ValueError("observe(out=...) needs the batch row index")
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise ValueError(f"observe(out=...): the batch row index must be an int, not {index!r}")
        self._write(move_number, out, index)
        return out

    def _write(self, move_number: int, out: dict[str, np.ndarray], index: int) -> None:
        game = self._game
        st = self._static
        cfg = self.config
        views = game.views
        decision, shapes = out["decision"], self._shapes  # (the kernel checks the others)
        if (
            out["grid"].shape[1:] != shapes["grid"]
            or decision.shape[1:] != shapes["decision"]
            or decision.shape[0] != out["buffers"].shape[0]
        ):
            self._raise_bad_out(out, index)
        synced = _observe(
            views.alloc,
            views.analysis,
            views.supply_left,
            st.inv_supply,
            st.stat_i,
            st.stat_f,
            self.occ,
            self._rec,
            self._synced,
            int(views.counters[C_CURRENT]),
            self._capacity,
            max(move_number, 0) * self._inv_b,
            cfg.grid_window,
            cfg.supply_window,
            index,
            out["buffers"],
            out["globals"],
            out["grid"],
            out["profile"],
            out["supply"],
        )
        if synced < 0:
            self._raise_bad_out(out, index)
        self._synced = synced
        self._extractor(game, out=out["decision"][index])  # all zeros when the game is over

    def _raise_bad_out(self, out: dict[str, np.ndarray], index: int) -> None:
        sizes = set()
        for key, shape in self._shapes.items():
            arr = out[key]
            if arr.ndim != len(shape) + 1 or arr.shape[1:] != shape:
                raise ValueError(
                    f"out[{key!r}] has shape {arr.shape}, expected [batch, *{shape}] "
                    "(float32, e.g. from empty_batch)"
                )
            sizes.add(arr.shape[0])
        if len(sizes) != 1:
            raise ValueError(f"the out arrays have different batch sizes: {sorted(sizes)}")
        raise ValueError(f"batch index {index} out of range for batch size {sizes.pop()}")
