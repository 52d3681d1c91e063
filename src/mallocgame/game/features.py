"""A compact, fixed-length feature vector of a game decision, for simple learned policies.

:func:`decision_features` describes the current decision of a
:class:`~mallocgame.game.state.Game` as a float32 vector of ``len(FEATURE_NAMES)``
values: the paper's Table 1 features of the current buffer (normalized), a few
static facts about its tensor and alias group, the state of its group and tensor,
what each action would place, and global progress. It is meant for policies that
look at one decision at a time (linear or small MLP policies trained by evolution
strategies, the gymnasium environment of :mod:`mallocgame.game.gym`); it does not
encode the whole memory grid.

Cost: everything that depends only on the instance (per-buffer rows of the static
features) is computed once per instance by :class:`FeatureExtractor`; a call then
copies one precomputed row and fills in about twenty dynamic values, with no loop
over buffers (a few microseconds). :func:`decision_features` keeps one extractor per
:class:`~mallocgame.game.tables.GameTables` object (released with the tables).

Every feature is finite and lies in ``[FEATURE_LOW, FEATURE_HIGH] = [-1, 10]``
(values that could exceed that range are clipped). All features are 0 when the game
is over (complete or infeasible). ``T`` is the number of instructions, ``B`` the
number of buffers, ``R`` the reward normalizer (SPEC section 5), ``C`` the fast
memory capacity in bytes, ``τ`` the current buffer's target time.

Features (index: name: meaning and scale):

Current buffer, static (paper Table 1; ``tensor_id`` and ``alias_id`` are arbitrary
labels, so they are described by the group and tensor features below instead):

 0. ``size``: aligned size / ``C``; clipped to [0, 10] (> 1: never fits).
 1. ``is_output``: 1 for an output, 0 for an operand.
 2. ``target_time``: ``τ / T``, in [0, 1).
 3. ``live_start``: tensor's ``def_time / T``, in [-1/T, 1) (negative: program input).
 4. ``live_end``: tensor's ``last_use_time / T``, in [0, 1).
 5. ``live_length``: ``(last_use_time - def_time) / T``, in [0, 1].
 6. ``demand``: ``demand_s`` / mean ``supply_s`` per step (how many average steps of
    copy supply a Copy needs); clipped to [0, 10] (0 when all supply is 0 and the
    demand is 0, 10 when there is demand but no supply at all).
 7. ``benefit_share``: ``benefit_s * B / R``: the benefit relative to an equal share
    of the best possible return per buffer; clipped to [-1, 10] (0 when ``R`` is 0).
 8. ``benefit_rel``: ``benefit_s / max_b |benefit_s|``, in [-1, 1] (0 if all are 0).

Tensor and alias group, static:

 9. ``live_out``: 1 if the tensor is a program result (output NoCopy is illegal).
10. ``group_size``: ``log2`` of the number of buffers in the alias group, clipped to
    [0, 10] (0 for a group of its own).
11. ``later_reads``: ``log2(1 + n)``, ``n`` = the operands of the same tensor after
    this buffer in game order; clipped to [0, 10].
12. ``next_read_gap``: (target time of the next operand of the same tensor after this
    buffer - ``τ``) / ``T``, in [0, 1]; 1 when there is none.

State of the group and tensor (dynamic):

13. ``tensor_resident``: 1 if the buffer reads a fast-resident tensor (its defining
    output was placed with NoCopy; only NoCopy can be legal), else 0.
14. ``group_fast``: 1 if the alias group is already in fast memory (Drop illegal).
15. ``group_slow``: 1 if the alias group is already in slow memory (only Drop legal).

Actions (dynamic; Drop places nothing, so it has only a legal flag):

16. ``legal_copy``, 17. ``legal_nocopy``, 18. ``legal_drop``: 1 if legal, else 0
    (equal to :meth:`Game.legal_mask`).
19. ``copy_interval``: Copy's memory interval length / ``T``, in [0, 1]; 0 if illegal.
20. ``copy_offset``: Copy's offset / ``C``, in [0, 1] (below 1 but as float32 rounds it);
    0 if illegal.
21. ``copy_span``: Copy's copy-interval length / ``T`` (the steps the prefetch or the
    write-back overlaps), in [0, 1]; 0 if illegal or no copy (zero demand).
22. ``nocopy_interval``: NoCopy's memory interval length / ``T``, in [0, 1]; 0 if
    illegal or empty (tensor already resident up to ``τ``).
23. ``nocopy_offset``: NoCopy's offset / ``C``, in [0, 1] (as ``copy_offset``); 0 if
    illegal or empty.

Global progress (dynamic):

24. ``progress``: current buffer / ``B``, in [0, 1).
25. ``return``: return so far / ``R``, clipped to [-1, 10] (0 when ``R`` is 0; in
    [0, 1] for roofline latencies).
26. ``supply_here``: remaining supply at ``τ`` / ``supply_s[τ]``, in [0, 1]
    (1 when ``supply_s[τ]`` is 0).
27. ``supply_next``: the same ratio at the first step a Copy of this buffer would
    draw from (``τ-1`` for an operand, ``τ+1`` for an output), in [0, 1]; 0 when that
    step does not exist or lies at or before the tensor's definition.
28. ``bias``: constant 1 (0 when the game is over, like every feature).

Implementation note: the action outcomes, the group state and the per-step remaining
supply are read through the game's read-only views (:class:`~mallocgame.game.state.StateViews`)
without copying: :meth:`Game.supply_left` copies all ``T`` values, and three
:meth:`Game.outcome` calls cost more than the rest of the features together.
"""

from __future__ import annotations

import math
import weakref

import numpy as np

from mallocgame.errors import InstanceError
from mallocgame.game.state import Game
from mallocgame.game.tables import GameTables, build_tables
from mallocgame.instance import Instance

__all__ = [
    "FEATURE_NAMES",
    "NUM_FEATURES",
    "FEATURE_LOW",
    "FEATURE_HIGH",
    "FeatureExtractor",
    "decision_features",
    "feature_extractor",
]

FEATURE_NAMES: tuple[str, ...] = (
    "size",
    "is_output",
    "target_time",
    "live_start",
    "live_end",
    "live_length",
    "demand",
    "benefit_share",
    "benefit_rel",
    "live_out",
    "group_size",
    "later_reads",
    "next_read_gap",
    "tensor_resident",
    "group_fast",
    "group_slow",
    "legal_copy",
    "legal_nocopy",
    "legal_drop",
    "copy_interval",
    "copy_offset",
    "copy_span",
    "nocopy_interval",
    "nocopy_offset",
    "progress",
    "return",
    "supply_here",
    "supply_next",
    "bias",
)
NUM_FEATURES = len(FEATURE_NAMES)
FEATURE_LOW = -1.0
FEATURE_HIGH = 10.0

_IDX = {name: i for i, name in enumerate(FEATURE_NAMES)}
(
    F_RESIDENT,
    F_GROUP_FAST,
    F_GROUP_SLOW,
    F_LEGAL_COPY,
    F_LEGAL_NOCOPY,
    F_LEGAL_DROP,
    F_COPY_INTERVAL,
    F_COPY_OFFSET,
    F_COPY_SPAN,
    F_NOCOPY_INTERVAL,
    F_NOCOPY_OFFSET,
    F_PROGRESS,
    F_RETURN,
    F_SUPPLY_HERE,
    F_SUPPLY_NEXT,
    F_BIAS,
) = (_IDX[n] for n in FEATURE_NAMES[13:])

# Game state layout (see game/kernels.py): group_state values and out[3, 6] columns.
_SLOW = -1


def finite_reciprocal(x: float) -> float:
    """``1 / x`` where that is a finite number, else 0: for ``x`` zero, infinite, NaN, or
    so small (subnormal) that its reciprocal overflows. A scale of the observations, which
    are never inf or NaN."""
    if x == 0.0 or not math.isfinite(x):
        return 0.0
    inverse = 1.0 / x
    return inverse if math.isfinite(inverse) else 0.0


def finite_reciprocals(x: np.ndarray) -> np.ndarray:
    """:func:`finite_reciprocal` of each positive entry of ``x``, 0 for the others."""
    with np.errstate(divide="ignore", over="ignore"):
        inverse = 1.0 / np.where(x > 0.0, x, 1.0)
    return np.where((x > 0.0) & np.isfinite(inverse), inverse, 0.0)


def _static_rows(instance: Instance, tb: GameTables) -> np.ndarray:
    """The instance-only features 0..12 of every buffer: float32 [B, NUM_FEATURES]."""
    num_b, num_t = tb.num_buffers, tb.num_instructions
    rows = np.zeros((num_b, NUM_FEATURES), dtype=np.float32)
    if num_b == 0:
        return rows
    inv_t = 1.0 / max(num_t, 1)
    tau = tb.buffer_time
    is_out = tb.buffer_is_out
    tensor = tb.buffer_tensor
    def_time = tb.tensor_def[tensor]
    last_use = tb.tensor_last_use[tensor]

    cap = max(tb.capacity, 1)
    rows[:, 0] = np.clip(tb.buffer_aligned / cap, 0.0, 10.0)
    rows[:, 1] = is_out
    rows[:, 2] = tau * inv_t
    rows[:, 3] = def_time * inv_t
    rows[:, 4] = last_use * inv_t
    rows[:, 5] = np.clip((last_use - def_time) * inv_t, 0.0, 1.0)

    supply = tb.supply_s
    mean_supply = float(supply.mean()) if num_t else 0.0
    demand = tb.buf_demand
    if mean_supply > 0.0:
        with np.errstate(over="ignore"):  # a subnormal mean: the ratio's cap of 10 still holds
            rows[:, 6] = np.clip(demand / mean_supply, 0.0, 10.0)
    else:
        rows[:, 6] = np.where(demand > 0.0, 10.0, 0.0)

    benefit = np.fromiter((b.benefit_s for b in instance.buffers), dtype=np.float64, count=num_b)
    benefit = np.nan_to_num(benefit, nan=0.0, posinf=0.0, neginf=0.0)
    r = tb.normalizer_s
    if r != 0.0 and math.isfinite(num_b / r):  # a subnormal R: no scale (inf * 0 is NaN)
        rows[:, 7] = np.clip(benefit * (num_b / r), -1.0, 10.0)
    top = float(np.abs(benefit).max())
    if top > 0.0:
        rows[:, 8] = benefit / top

    rows[:, 9] = tb.tensor_live_out[tensor]
    rows[:, 10] = np.clip(np.log2(tb.group_size[tb.buffer_group]), 0.0, 10.0)

    # Later reads of the same tensor, in game order: sort by (tensor, buffer id).
    order = np.lexsort((np.arange(num_b), tensor))
    ten_sorted = tensor[order]
    read_sorted = ~is_out[order]
    cum = np.cumsum(read_sorted)  # reads up to and including position i
    seg_end = np.searchsorted(ten_sorted, ten_sorted, side="right") - 1
    reads_after = cum[seg_end] - cum
    # Position of the next read at or after i + 1 (num_b when none).
    pos = np.where(read_sorted, np.arange(num_b), num_b)
    next_at = np.minimum.accumulate(pos[::-1])[::-1]
    next_read = np.append(next_at[1:], num_b)
    has_next = next_read <= seg_end
    gap = np.ones(num_b, dtype=np.float64)
    nxt = order[np.where(has_next, next_read, 0)]
    gap[has_next] = (tau[nxt[has_next]] - tau[order[has_next]]) * inv_t
    later = np.empty(num_b, dtype=np.float64)
    later[order] = np.clip(np.log2(1.0 + reads_after), 0.0, 10.0)
    gap_by_id = np.empty(num_b, dtype=np.float64)
    gap_by_id[order] = np.clip(gap, 0.0, 1.0)
    rows[:, 11] = later
    rows[:, 12] = gap_by_id
    rows[:, F_BIAS] = 1.0
    return rows


class FeatureExtractor:
    """Computes :data:`FEATURE_NAMES` for games of one instance.

    Args:
        source: a :class:`Game` (its instance and tables are used) or an
            :class:`Instance`.
        tables: the instance's tables when ``source`` is an instance (built when
            omitted; only their static arrays are read).

    Call it with a game of that instance: ``extractor(game)`` returns a new float32
    array ``[NUM_FEATURES]``; ``extractor(game, out=buf)`` writes into ``buf``.
    The extractor keeps only its own precomputed arrays and the instance's hash (not the
    instance or tables). Tables or a game of another instance: :class:`InstanceError`.
    """

    def __init__(self, source: Game | Instance, tables: GameTables | None = None) -> None:
        if isinstance(source, Game):
            instance, tables = source.instance, source.tables
        else:
            instance = source
            if tables is None:
                tables = build_tables(instance)
            elif tables.instance_sha256 != instance.sha256:
                raise InstanceError(
                    f"FeatureExtractor: the tables are not {instance.name}'s (build_tables)"
                )
        tb = tables
        self._instance_sha256 = instance.sha256
        self._instance_name = instance.name
        self.num_buffers = tb.num_buffers
        self.num_steps = tb.num_instructions
        self._rows = _static_rows(instance, tb)
        # Per buffer: target time, group, is_output, def_time, as Python-friendly arrays.
        self._tau = tb.buffer_time.tolist()
        self._group = tb.buffer_group.tolist()
        self._is_out = tb.buffer_is_out.tolist()
        self._def = tb.tensor_def[tb.buffer_tensor].tolist() if self.num_buffers else []
        supply = tb.supply_s
        self._inv_supply = finite_reciprocals(supply)
        # no supply to use up where its reciprocal is 0 (none, or subnormal), as observe.py
        self._supply_zero = (self._inv_supply == 0.0).tolist()
        self._inv_supply_list = self._inv_supply.tolist()
        self._inv_t = 1.0 / max(self.num_steps, 1)
        self._inv_b = 1.0 / max(self.num_buffers, 1)
        self._inv_cap = 1.0 / max(tb.capacity, 1)
        self._inv_r = finite_reciprocal(tb.normalizer_s)

    def __call__(self, game: Game, out: np.ndarray | None = None) -> np.ndarray:
        if game.tables.instance_sha256 != self._instance_sha256:
            raise InstanceError(
                f"FeatureExtractor: a game of {game.instance.name}, not of {self._instance_name}"
            )
        if out is None:
            out = np.zeros(NUM_FEATURES, dtype=np.float32)
        b = game.current_buffer
        # out rows: (legal, offset, start, end, copy_start, copy_end) per action.
        (lc, oc, sc, ec, csc, cec), (ln, on, sn, en, _, _), (ld, *_) = game.views.analysis.tolist()
        if b >= self.num_buffers or not (lc or ln or ld):
            out[:] = 0.0
            return out
        out[:] = self._rows[b]
        tau = self._tau[b]
        inv_t = self._inv_t

        if game.reads_fast_resident(b) >= 0:
            out[F_RESIDENT] = 1.0
        gs = int(game.views.group_state[self._group[b]])
        if gs >= 0:
            out[F_GROUP_FAST] = 1.0
        elif gs == _SLOW:
            out[F_GROUP_SLOW] = 1.0

        if lc:
            out[F_LEGAL_COPY] = 1.0
            if sc >= 0:
                out[F_COPY_INTERVAL] = (ec - sc + 1) * inv_t
                out[F_COPY_OFFSET] = oc * self._inv_cap
            if csc >= 0:
                out[F_COPY_SPAN] = (cec - csc + 1) * inv_t
        if ln:
            out[F_LEGAL_NOCOPY] = 1.0
            if sn >= 0:
                out[F_NOCOPY_INTERVAL] = (en - sn + 1) * inv_t
                out[F_NOCOPY_OFFSET] = on * self._inv_cap
        if ld:
            out[F_LEGAL_DROP] = 1.0

        out[F_PROGRESS] = b * self._inv_b
        ret = game.return_s * self._inv_r
        out[F_RETURN] = -1.0 if ret < -1.0 else (10.0 if ret > 10.0 else ret)

        left = game.views.supply_left
        if self._supply_zero[tau]:
            out[F_SUPPLY_HERE] = 1.0
        else:
            out[F_SUPPLY_HERE] = min(1.0, float(left[tau]) * self._inv_supply_list[tau])
        t = tau + 1 if self._is_out[b] else tau - 1
        if 0 <= t < self.num_steps and t > self._def[b]:
            out[F_SUPPLY_NEXT] = (
                1.0 if self._supply_zero[t] else min(1.0, float(left[t]) * self._inv_supply_list[t])
            )
        return out


# One extractor per GameTables object, dropped when the tables are garbage collected.
_CACHE: dict[int, tuple[weakref.ref[GameTables], FeatureExtractor]] = {}


def feature_extractor(game: Game) -> FeatureExtractor:
    """The cached :class:`FeatureExtractor` of ``game``'s tables (built on first use)."""
    tb = game.tables
    key = id(tb)
    entry = _CACHE.get(key)
    if entry is not None and entry[0]() is tb:
        return entry[1]
    extractor = FeatureExtractor(game)

    def _drop(_ref: object, key: int = key) -> None:
        current = _CACHE.get(key)
        if current is not None and current[0] is _ref:
            del _CACHE[key]

    _CACHE[key] = (weakref.ref(tb, _drop), extractor)
    return extractor


def decision_features(game: Game) -> np.ndarray:
    """The features of ``game``'s current decision: float32 ``[NUM_FEATURES]``, named by
    :data:`FEATURE_NAMES` (see the module docstring for each one's meaning and scale);
    all zeros when the game is over."""
    return feature_extractor(game)(game)
