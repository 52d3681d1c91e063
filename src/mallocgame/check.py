"""The solution checker: SPEC section 7's physical check, replay and reward checks.

:func:`physical_check` tests a set of allocations against the seven physical rules of
SPEC section 7, independently of the game; :func:`check_solution` adds the instance
hash, the replay of a trajectory's ``actions`` through :class:`mallocgame.game.Game`
and the consistency of ``reward_s`` / ``normalized_reward``. Each broken rule is one
:class:`Failure` with a fixed ``kind`` (see :data:`FAILURE_KINDS`) and the buffers
involved; a :class:`CheckReport` collects them.

Units: seconds (float) for times, supplies, demands and rewards; bytes (int) for
sizes and offsets; logical time steps are instruction indices ``0 .. T-1``, and
memory and copy intervals are inclusive step ranges.

The checks that could be quadratic (rule 2, address x time overlap; rule 5, shared
copy steps) are sweeps over sorted numpy arrays; the rest are linear passes.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from numbers import Integral
from typing import TYPE_CHECKING, Literal, get_args

import numpy as np

from mallocgame.errors import IllegalActionError, InstanceError, SolutionError
from mallocgame.instance import Instance
from mallocgame.latency import exact_mapping_reward, exact_reward_normalizer
from mallocgame.solution import ACTION_NAMES, Allocation, Solution

if TYPE_CHECKING:
    from mallocgame.game import Game

__all__ = [
    "FAILURE_KINDS",
    "FailureKind",
    "Failure",
    "CheckReport",
    "physical_check",
    "check_solution",
]

FailureKind = Literal[
    "illegal_action",  # a replayed action is not legal in the game (SPEC section 4)
    "incomplete",  # fewer actions than buffers, or more
    "allocation_mismatch",  # the replay places a buffer differently from the solution
    "reward_mismatch",  # reward_s / normalized_reward disagree with the exact reward
    "false_bound",  # bound_s is below the solution's own reward (or negative): not a bound
    "instance_mismatch",  # the solution was made for another instance (hash)
    "misaligned",  # rule 1: offset not a multiple of the alignment
    "over_capacity",  # rule 1: [offset, offset + z) outside the fast memory
    "overlap",  # rule 2: two alias groups share bytes at one step
    "alias_split",  # rule 3: a group partly in fast, partly in slow memory
    "alias_offset",  # rule 3: a group in fast memory at several offsets
    "interval_shape",  # rule 4, and malformed allocations (unknown buffer, duplicate, ...)
    "copy_overlap",  # rule 5: two copy intervals share two consecutive steps
    "copy_supply",  # rule 5: a copy interval's supply does not cover its demand
    "data_flow",  # rule 6: a fast operand's data does not come from a copy-in or its producer
    "slow_read",  # rule 7: a read from slow memory of a value that never reached it
]
"""The kinds of broken rule a :class:`Failure` names."""

FAILURE_KINDS: tuple[FailureKind, ...] = get_args(FailureKind)

SUPPLY_RTOL = Fraction(1, 10**9)  # rule 5: supply must reach (1 - 1e-9) * demand, exactly
REWARD_RTOL = Fraction(1, 10**9)  # reward_s, normalized_reward and bound_s: relative, exactly
_ROWS_PER_CHUNK = 1 << 21  # rule 2 sweep: (allocation, step) rows held at once


@dataclass(frozen=True)
class Failure:
    """One broken rule: its ``kind`` (one of :data:`FAILURE_KINDS`), a readable
    ``message`` and the ids of the buffers involved (sorted, possibly empty)."""

    kind: FailureKind
    message: str
    buffers: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in FAILURE_KINDS:
            raise ValueError(
                f"unknown failure kind {self.kind!r} (one of {', '.join(FAILURE_KINDS)})"
            )


@dataclass(frozen=True)
class CheckReport:
    """The outcome of a check: valid when there are no failures."""

    failures: tuple[Failure, ...]

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def kinds(self) -> frozenset[str]:
        """The distinct failure kinds found."""
        return frozenset(f.kind for f in self.failures)

    def summary(self) -> str:
        """One line ``kind: message`` per failure (the empty string when valid)."""
        return "\n".join(f"{f.kind}: {f.message}" for f in self.failures)


def _fail(kind: FailureKind, message: str, buffers: Iterable[int] = ()) -> Failure:
    return Failure(kind, message, tuple(sorted(set(int(b) for b in buffers))))


def _describe(a: Allocation | None) -> str:
    if a is None:
        return "slow memory (no allocation)"
    memory = "empty" if a.start is None else f"[{a.start}, {a.end}]"
    return f"{a.action} at offset {a.offset}, memory {memory}, copy {a.copy}"


def _ids(buffers: Iterable[int], limit: int = 12) -> str:
    """``buffers`` as a short readable list (at most ``limit`` ids)."""
    items = sorted(buffers)
    text = ", ".join(str(b) for b in items[:limit])
    return text + (f", ... ({len(items)} in all)" if len(items) > limit else "")


# ------------------------------------------------------------------ allocations, rule 4


def _index_allocations(
    inst: Instance, allocations: Iterable[Allocation]
) -> tuple[dict[int, Allocation], list[Failure]]:
    """The allocations by buffer id, and failures for those that name no buffer,
    repeat one, or carry an unknown action (these are left out of every other rule)."""
    by_buffer: dict[int, Allocation] = {}
    failures = []
    for a in allocations:
        if not 0 <= a.buffer < inst.num_buffers:
            failures.append(_fail("interval_shape", f"allocation names unknown buffer {a.buffer}"))
        elif a.buffer in by_buffer:
            failures.append(
                _fail("interval_shape", f"buffer {a.buffer} has a second allocation", [a.buffer])
            )
        elif a.action not in ACTION_NAMES[:2]:
            failures.append(
                _fail(
                    "interval_shape",
                    f"buffer {a.buffer}: action {a.action!r} is not Copy or NoCopy",
                    [a.buffer],
                )
            )
        else:
            by_buffer[a.buffer] = a
    return by_buffer, failures


def _is_interval(start: object, end: object, num_steps: int) -> bool:
    """Whether ``[start, end]`` is a non-empty interval of steps ``0 .. num_steps-1``."""
    return (
        isinstance(start, Integral)
        and isinstance(end, Integral)
        and 0 <= int(start) <= int(end) < num_steps
    )


def _memory_well_formed(a: Allocation, num_steps: int) -> bool:
    """Empty (``start = end = None``) or a non-empty interval of steps."""
    return (a.start is None and a.end is None) or _is_interval(a.start, a.end, num_steps)


def _copy_well_formed(a: Allocation, num_steps: int) -> bool:
    """A Copy whose copy interval is a non-empty interval of steps."""
    return (
        a.action == "Copy" and a.copy is not None and _is_interval(a.copy[0], a.copy[1], num_steps)
    )


def _shape_problems(inst: Instance, a: Allocation) -> list[str]:
    """Rule 4 for one allocation, plus the agreement of its action with its shape."""
    b = inst.buffers[a.buffer]
    tau = b.instruction
    num_steps = inst.num_instructions
    if not _memory_well_formed(a, num_steps):
        return [
            f"memory interval [{a.start}, {a.end}] is neither empty nor inside 0..{num_steps - 1}"
        ]
    problems = []
    if a.start is None:
        if b.is_output:
            problems.append(f"an output's memory interval must start at its target time {tau}")
        elif a.action == "Copy":
            problems.append("a Copy needs a non-empty memory interval")
    elif b.is_output and a.start != tau:
        problems.append(f"output memory interval [{a.start}, {a.end}] does not start at {tau}")
    elif not b.is_output:
        if a.end != tau:
            problems.append(f"operand memory interval [{a.start}, {a.end}] does not end at {tau}")
        def_time = inst.tensors[b.tensor_id].def_time
        if a.start <= def_time:
            problems.append(
                f"operand memory interval starts at {a.start}, before its tensor exists "
                f"(defined at {def_time})"
            )
    if a.copy is None:
        return problems
    if a.action != "Copy":
        problems.append(f"a NoCopy has no copy interval, got {a.copy}")
    elif not _copy_well_formed(a, num_steps):
        problems.append(f"copy interval {a.copy} is not an interval of steps 0..{num_steps - 1}")
    else:
        c0, c1 = a.copy
        if a.start is None or a.end is None or not a.start <= c0 <= c1 <= a.end:
            problems.append(f"copy interval {a.copy} is not inside the memory interval")
        if not b.is_output and c1 != tau - 1:
            problems.append(f"operand copy interval {a.copy} does not end at {tau - 1}")
        if b.is_output and c0 != tau + 1:
            problems.append(f"output copy interval {a.copy} does not start at {tau + 1}")
    return problems


def _check_shapes(inst: Instance, allocs: Mapping[int, Allocation]) -> list[Failure]:
    """Rule 4: memory and copy intervals of the right shape for each buffer."""
    return [
        _fail("interval_shape", f"buffer {a.buffer} ({a.action}): {problem}", [a.buffer])
        for a in allocs.values()
        for problem in _shape_problems(inst, a)
    ]


# --------------------------------------------------------------------- rules 1 and 3


def _check_placement(inst: Instance, allocs: Mapping[int, Allocation]) -> list[Failure]:
    """Rule 1: aligned offsets, ``[offset, offset + z)`` inside the fast memory."""
    hw = inst.hardware
    failures = []
    for a in allocs.values():
        z = hw.aligned(inst.buffers[a.buffer].size)
        if a.offset % hw.alignment_bytes:
            failures.append(
                _fail(
                    "misaligned",
                    f"buffer {a.buffer}: offset {a.offset} is not a multiple of "
                    f"{hw.alignment_bytes}",
                    [a.buffer],
                )
            )
        if a.offset < 0 or a.offset + z > hw.fast_memory_bytes:
            failures.append(
                _fail(
                    "over_capacity",
                    f"buffer {a.buffer}: bytes [{a.offset}, {a.offset + z}) outside the fast "
                    f"memory of {hw.fast_memory_bytes} bytes",
                    [a.buffer],
                )
            )
    return failures


def _check_alias_groups(inst: Instance, allocs: Mapping[int, Allocation]) -> list[Failure]:
    """Rule 3: each alias group all in fast memory at one offset, or all in slow memory."""
    groups: dict[int, list[int]] = defaultdict(list)
    for b in inst.buffers:
        groups[b.alias_id].append(b.id)
    failures = []
    for group, members in groups.items():
        fast = [b for b in members if b in allocs]
        if not fast:
            continue
        if len(fast) < len(members):
            slow = [b for b in members if b not in allocs]
            failures.append(
                _fail(
                    "alias_split",
                    f"alias group {group}: buffers {_ids(fast)} in fast memory but "
                    f"{_ids(slow)} in slow memory",
                    members,
                )
            )
        offsets = sorted({allocs[b].offset for b in fast})
        if len(offsets) > 1:
            failures.append(
                _fail(
                    "alias_offset",
                    f"alias group {group}: buffers {_ids(fast)} at several offsets {offsets}",
                    fast,
                )
            )
    return failures


# ---------------------------------------------------------------------------- rule 2


def _running_argmax(values: np.ndarray, seg_start: np.ndarray) -> np.ndarray:
    """For each position, the position of the largest value strictly before it in its
    segment (``-1`` at a segment's first position); segments are runs that begin
    where ``seg_start`` is true."""
    n = len(values)
    order = np.lexsort((np.arange(n), values))
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    seg = np.cumsum(seg_start) - 1
    # seg * n + rank grows from segment to segment, so one running max serves all.
    best = order[np.maximum.accumulate(seg * n + rank) - seg * n]
    before = np.empty(n, np.int64)
    before[0] = -1
    before[1:] = best[:-1]
    before[seg_start] = -1
    return before


def _expand(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ranges ``starts[k] .. starts[k] + counts[k] - 1``: each member and its ``k``."""
    owner = np.repeat(np.arange(len(counts)), counts)
    return np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(counts.sum()), owner


def _meeting_pairs(
    event: np.ndarray, idx: np.ndarray, group: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of boxes of different groups that meet in the second dimension at one event.

    Row ``r`` says box ``idx[r]`` (``[lo, hi)`` in the second dimension, alias
    ``group``) is live at ``event[r]``. At each event the boxes of one group are
    merged into disjoint blocks; then a block overlaps some block sorted before it iff it
    overlaps the one with the largest end among them, which finds every such block at
    once (none, for a valid mapping); for each, every earlier block of its event whose end
    passes its start is one it overlaps. Returns ``(i, j)`` arrays: the boxes of every
    such block pair that meet.
    """
    order = np.lexsort((lo[idx], group[idx], event))
    event, idx = event[order], idx[order]
    row_lo, row_hi, g = lo[idx], hi[idx], group[idx]
    new_seg = np.r_[True, (event[1:] != event[:-1]) | (g[1:] != g[:-1])]
    new_block = new_seg | (row_lo >= row_hi[_running_argmax(row_hi, new_seg)])
    first = np.flatnonzero(new_block)
    size = np.diff(np.r_[first, len(idx)])
    b_event, b_lo, b_hi = event[first], row_lo[first], np.maximum.reduceat(row_hi, first)

    order = np.lexsort((b_lo, b_event))
    seg_start = np.r_[True, b_event[order][1:] != b_event[order][:-1]]
    s_lo, s_hi = b_lo[order], b_hi[order]
    partner = _running_argmax(s_hi, seg_start)
    hit = np.flatnonzero((partner >= 0) & (s_hi[partner] > s_lo))
    seg_first = np.maximum.accumulate(np.where(seg_start, np.arange(len(order)), 0))
    earlier = [seg_first[q] + np.flatnonzero(s_hi[seg_first[q] : q] > s_lo[q]) for q in hit]
    p = order[np.concatenate(earlier)] if len(hit) else np.empty(0, np.int64)
    j = np.repeat(order[hit], [len(e) for e in earlier])
    # every member of block p against every member of block j
    k, pair = _expand(np.zeros_like(p), size[p] * size[j])
    x = first[p][pair] + k // size[j][pair]
    y = first[j][pair] + k % size[j][pair]
    meet = (row_lo[x] < row_hi[y]) & (row_lo[y] < row_hi[x])
    return idx[x][meet], idx[y][meet]


def _live_rows(
    first: np.ndarray, last: np.ndarray, w0: int, w1: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(event, box)`` rows for boxes live at events ``w0 .. w1``; box ``i`` is
    live at events ``first[i] .. last[i]``."""
    sel = np.flatnonzero((first <= w1) & (last >= w0))
    f = np.maximum(first[sel], w0)
    events, owner = _expand(f, np.minimum(last[sel], w1) - f + 1)
    return events, sel[owner]


def _sweep_events(a0: np.ndarray, a1: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sweeping boxes ``[a0, a1)`` at their starts: for each event (a distinct start),
    how many boxes are live; for each box its first and last event."""
    events = np.unique(a0)
    first = np.searchsorted(events, a0)
    last = np.searchsorted(events, a1) - 1
    n = len(events)
    live = np.cumsum(np.bincount(first, minlength=n + 1) - np.bincount(last + 1, minlength=n + 1))
    return live[:n], first, last


def _intersecting_boxes(
    a0: np.ndarray, a1: np.ndarray, b0: np.ndarray, b1: np.ndarray, group: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``i < j`` of non-empty boxes ``[a0, a1) x [b0, b1)`` of different groups
    that intersect.

    Two boxes meet iff both are live where the later one starts in dimension a, and
    meet in dimension b there; so a sweep over the starts in dimension a, in chunks
    of at most about ``_ROWS_PER_CHUNK`` (event, box) rows, finds them.
    """
    live, first, last = _sweep_events(a0, a1)
    cuts = np.searchsorted(np.cumsum(live), np.arange(_ROWS_PER_CHUNK, live.sum(), _ROWS_PER_CHUNK))
    bounds = np.unique(np.r_[0, cuts, len(live)])
    found = [
        _meeting_pairs(*_live_rows(first, last, int(w0), int(w1)), group, b0, b1)
        for w0, w1 in zip(bounds[:-1], bounds[1:] - 1)
    ]
    i, j = (np.concatenate(parts) for parts in zip(*found))
    n = len(a0)
    key = np.unique(np.minimum(i, j) * n + np.maximum(i, j))
    return key // n, key % n


def _check_overlap(inst: Instance, allocs: Mapping[int, Allocation]) -> list[Failure]:
    """Rule 2: no two allocations of different alias groups share bytes at a step.

    Only non-empty allocations of non-zero aligned size occupy memory: boxes of
    steps x bytes. The sweep runs along whichever dimension holds fewer rows (steps
    for a sensible mapping, bytes when many long allocations sit at few offsets).
    """
    hw = inst.hardware
    live = [
        a
        for a in allocs.values()
        if a.start is not None
        and _memory_well_formed(a, inst.num_instructions)
        and hw.aligned(inst.buffers[a.buffer].size) > 0
    ]
    if len(live) < 2:
        return []
    ranks: dict[int, int] = {}  # alias ids are any integer at or above 0: ranked to fit int64
    group = np.array(
        [ranks.setdefault(inst.buffers[a.buffer].alias_id, len(ranks)) for a in live], np.int64
    )
    lo = np.array([a.offset for a in live], np.int64)
    hi = lo + np.array([hw.aligned(inst.buffers[a.buffer].size) for a in live], np.int64)
    t0 = np.array([a.start for a in live], np.int64)
    t1 = np.array([a.end for a in live], np.int64) + 1
    if _sweep_events(t0, t1)[0].sum() <= _sweep_events(lo, hi)[0].sum():
        i, j = _intersecting_boxes(t0, t1, lo, hi, group)
    else:
        i, j = _intersecting_boxes(lo, hi, t0, t1, group)
    return [_overlap_failure(inst, live[x], live[y]) for x, y in zip(i, j)]


def _overlap_failure(inst: Instance, a: Allocation, b: Allocation) -> Failure:
    def part(c: Allocation) -> str:
        z = inst.hardware.aligned(inst.buffers[c.buffer].size)
        return (
            f"buffer {c.buffer} (alias group {inst.buffers[c.buffer].alias_id}, bytes "
            f"[{c.offset}, {c.offset + z}), steps {c.start}..{c.end})"
        )

    assert a.start is not None and b.start is not None  # both are live allocations
    step = max(a.start, b.start)
    message = f"{part(a)} and {part(b)} overlap from step {step}"
    return _fail("overlap", message, [a.buffer, b.buffer])


# ---------------------------------------------------------------------------- rule 5


def _check_copies(inst: Instance, allocs: Mapping[int, Allocation]) -> list[Failure]:
    """Rule 5: copy intervals share at most one step pairwise; supply covers demand."""
    num_steps = inst.num_instructions
    failures = [
        _fail(
            "copy_supply",
            f"buffer {a.buffer}: Copy with demand {inst.buffers[a.buffer].demand_s} s "
            "and no copy interval",
            [a.buffer],
        )
        for a in allocs.values()
        if a.action == "Copy" and a.copy is None and inst.buffers[a.buffer].demand_s > 0
    ]
    copies = [
        (a.buffer, a.copy)
        for a in allocs.values()
        if a.copy is not None and _copy_well_formed(a, num_steps)
    ]
    if not copies:
        return failures
    buf = np.array([b for b, _ in copies], np.int64)
    c0 = np.array([c[0] for _, c in copies], np.int64)
    c1 = np.array([c[1] for _, c in copies], np.int64)
    failures += _shared_pair_failures(buf, c0, c1, num_steps)
    failures += _supply_failures(inst, buf, c0, c1)
    return failures


def _shared_pair_failures(
    buf: np.ndarray, c0: np.ndarray, c1: np.ndarray, num_steps: int
) -> list[Failure]:
    """One failure per run of step pairs ``(t, t+1)`` lying in two or more copy intervals."""
    # Interval [c0, c1] holds the pairs c0 .. c1-1.
    per_pair = np.cumsum(
        np.bincount(c0, minlength=num_steps) - np.bincount(c1, minlength=num_steps)
    )[: num_steps - 1]
    bad = per_pair > 1
    if not bad.any():
        return []
    edges = np.diff(np.r_[0, bad.astype(np.int8), 0])
    failures = []
    for p0, p1 in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1):
        involved = buf[(c0 <= p1) & (c1 > p0)]
        failures.append(
            _fail(
                "copy_overlap",
                f"steps {p0}..{p1 + 1}: consecutive steps lie in several copy intervals "
                f"(buffers {_ids(involved)})",
                involved,
            )
        )
    return failures


def _supply_failures(
    inst: Instance, buf: np.ndarray, c0: np.ndarray, c1: np.ndarray
) -> list[Failure]:
    """Copy intervals whose steps' ``supply_s`` sum to less than ``(1 - 1e-9) * demand``,
    both sides exact (rationals); float prefix sums only clear the intervals far from it."""
    supply = np.array([ins.supply_s for ins in inst.instructions], np.float64)
    demand = np.array([inst.buffers[b].demand_s for b in buf], np.float64)
    prefix = np.r_[0.0, np.cumsum(supply)]
    # Prefix differences may be off by the rounding of the running sum; only the
    # intervals they cannot clear are summed exactly (all of them if the running sum
    # is not finite, which the instance's ranges rule out for a validated instance).
    slack = len(supply) * np.finfo(np.float64).eps * prefix[-1]
    unclear = prefix[c1 + 1] - prefix[c0] - slack < demand
    if not np.isfinite(slack):
        unclear[:] = True
    failures = []
    for k in np.flatnonzero(unclear):
        have = sum((Fraction(float(w)) for w in supply[c0[k] : c1[k] + 1]), Fraction(0))
        if have < (1 - SUPPLY_RTOL) * Fraction(float(demand[k])):
            failures.append(
                _fail(
                    "copy_supply",
                    f"buffer {buf[k]}: copy interval [{c0[k]}, {c1[k]}] supplies "
                    f"{float(have):.17g} s < (1 - 1e-9) x demand {demand[k]:.17g} s",
                    [buf[k]],
                )
            )
    return failures


# --------------------------------------------------------------------- rules 6 and 7


def _defining_outputs(inst: Instance) -> dict[int, int]:
    """Tensor id -> the id of its defining output buffer (program inputs have none)."""
    return {b.tensor_id: b.id for b in inst.buffers if b.is_output}


def _coverage(
    inst: Instance, allocs: Mapping[int, Allocation]
) -> dict[tuple[int, int], list[tuple[int, int, float]]]:
    """For each ``(tensor, offset)``: the maximal contiguous step segments covered by
    its non-empty allocations, as ``(lo, hi, first source start)`` sorted by ``lo``;
    a source is the defining output or an operand Copy (``inf`` when none)."""
    spans: dict[tuple[int, int], list[tuple[int, int, bool]]] = defaultdict(list)
    for a in allocs.values():
        if (
            a.start is not None
            and a.end is not None
            and _memory_well_formed(a, inst.num_instructions)
        ):
            b = inst.buffers[a.buffer]
            source = b.is_output or a.action == "Copy"
            spans[(b.tensor_id, a.offset)].append((a.start, a.end, source))
    segments: dict[tuple[int, int], list[tuple[int, int, float]]] = {}
    for key, items in spans.items():
        merged: list[list[float]] = []
        for s, e, source in sorted(items):
            if merged and s <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e, math.inf])
            if source:
                merged[-1][2] = min(merged[-1][2], s)
        segments[key] = [(int(lo), int(hi), src) for lo, hi, src in merged]
    return segments


def _check_data_flow(inst: Instance, allocs: Mapping[int, Allocation]) -> list[Failure]:
    """Rule 6: each fast operand is served by a contiguous run of allocations of its
    tensor at its offset that begins with a copy-in or the tensor's production."""
    segments = _coverage(inst, allocs)
    failures = []
    for a in allocs.values():
        b = inst.buffers[a.buffer]
        if b.is_output:
            continue
        tau = b.instruction
        where = f"buffer {b.id} (operand of tensor {b.tensor_id} at step {tau}, offset {a.offset})"
        segs = segments.get((b.tensor_id, a.offset), [])
        k = bisect_right(segs, (tau, math.inf, math.inf)) - 1
        if k < 0 or segs[k][1] < tau:
            failures.append(
                _fail(
                    "data_flow",
                    f"{where}: no allocation of its tensor there covers step {tau}",
                    [b.id],
                )
            )
        elif segs[k][2] > tau:
            lo, hi, _ = segs[k]
            failures.append(
                _fail(
                    "data_flow",
                    f"{where}: the allocations covering steps {lo}..{hi} have no copy-in or "
                    f"production of the tensor starting by step {tau}",
                    [b.id],
                )
            )
    return failures


def _check_slow_reads(inst: Instance, allocs: Mapping[int, Allocation]) -> list[Failure]:
    """Rule 7: reads from slow memory only of values that reach it; results end there."""
    defining = _defining_outputs(inst)

    def in_slow(buffer: int) -> bool:  # not placed, or placed with a copy between memories
        return buffer not in allocs or allocs[buffer].action == "Copy"

    slow_reads: dict[int, list[int]] = defaultdict(list)
    for b in inst.buffers:
        if not b.is_output and in_slow(b.id):
            slow_reads[b.tensor_id].append(b.id)
    failures = []
    for tensor, readers in sorted(slow_reads.items()):
        d = defining.get(tensor)
        if d is not None and not in_slow(d):
            failures.append(
                _fail(
                    "slow_read",
                    f"buffers {_ids(readers)} read tensor {tensor} from slow memory, but its "
                    f"defining output {d} was placed NoCopy and never written there",
                    [*readers, d],
                )
            )
    for x in inst.tensors:
        d = defining.get(x.id)
        if x.live_out and d is not None and not in_slow(d):
            failures.append(
                _fail(
                    "slow_read",
                    f"tensor {x.id} is a program result, but its defining output {d} was "
                    "placed NoCopy and never written to slow memory",
                    [d],
                )
            )
    return failures


# ----------------------------------------------------------------------- public checks


def physical_check(inst: Instance, allocations: Iterable[Allocation]) -> list[Failure]:
    """The physical check of SPEC section 7 (rules 1-7), independent of the game.

    ``allocations`` lists the buffers placed in fast memory; every other buffer is in
    slow memory. Returns the failures found (empty when the mapping is physically
    valid). Malformed allocations (unknown buffer, a second one for a buffer, an
    unknown action) are reported as ``interval_shape`` and otherwise ignored;
    malformed intervals are left out of the rules that need them.
    """
    allocs, failures = _index_allocations(inst, allocations)
    for rule in (
        _check_placement,
        _check_overlap,
        _check_alias_groups,
        _check_shapes,
        _check_copies,
        _check_data_flow,
        _check_slow_reads,
    ):
        failures += rule(inst, allocs)
    return failures


def _allocation_key(a: Allocation) -> tuple[object, ...]:
    return (a.action, a.offset, a.start, a.end, None if a.copy is None else tuple(a.copy))


def _relative_error(claim: float, exact: Fraction) -> Fraction | None:
    """``|claim - exact| / |exact|`` exactly (``None`` when ``claim`` is not finite; an
    infinite error when ``exact`` is 0 and ``claim`` is not)."""
    if not isinstance(claim, (int, float)) or isinstance(claim, bool) or not math.isfinite(claim):
        return None
    diff = abs(Fraction(claim) - exact)
    if exact == 0:
        return Fraction(0) if diff == 0 else Fraction(10**9)
    return diff / abs(exact)


def _claim_failure(name: str, claim: object, exact: Fraction, what: str) -> list[Failure]:
    """A ``reward_mismatch`` unless ``claim`` is within ``REWARD_RTOL`` of ``exact``."""
    error = _relative_error(claim, exact)  # type: ignore[arg-type]
    if error is not None and error <= REWARD_RTOL:
        return []
    off = "is not a finite number" if error is None else f"is off by {float(error):.3g} (relative)"
    return [
        _fail(
            "reward_mismatch",
            f"{name} {claim!r} {off}: {what} {float(exact)!r} "
            f"(SPEC section 7 allows a relative 1e-9)",
        )
    ]


def _illegal(step: int, action: int, why: str = "is illegal") -> list[Failure]:
    name = ACTION_NAMES[action] if action in (0, 1, 2) else repr(action)
    return [_fail("illegal_action", f"step {step}: action {name} {why} for buffer {step}", [step])]


def _replay(inst: Instance, actions: Sequence[int]) -> tuple[list[Failure], Game | None]:
    """Play ``actions`` in a fresh game; return failures and the finished game (or None).

    Step ``k`` decides buffer ``k`` (buffer ids are in game order).
    """
    from mallocgame.game import Game  # imported here: the game imports more than a check needs

    game = Game(inst)
    n = inst.num_buffers
    for step, action in enumerate(actions):
        if step >= n:
            return [_fail("incomplete", f"{len(actions)} actions for {n} buffers: too many")], None
        if game.done:
            return _illegal(step, action, "comes after the game ended (no legal action)"), None
        if action not in (0, 1, 2) or not game.legal_mask()[action]:
            return _illegal(step, action), None
        try:
            game.step(action)
        except IllegalActionError:
            return _illegal(step, action), None
    if len(actions) < n:
        return [_fail("incomplete", f"{len(actions)} actions for {n} buffers: too few")], None
    return [], game


def _replay_failures(inst: Instance, solution: Solution) -> list[Failure]:
    """Replay ``solution.actions``: legal, complete, the same allocations. (The replay's
    return is the reward of those allocations, held to the exact value by
    :func:`_reward_failures`: one reference, not the game's float64 running sum.)"""
    failures, game = _replay(inst, solution.actions or ())
    if game is None:
        return failures
    replayed = {a.buffer: a for a in game.allocations()}
    claimed: dict[int, Allocation] = {}
    for a in solution.allocations:
        claimed.setdefault(a.buffer, a)
    for b in sorted(replayed.keys() | claimed.keys()):
        mine, theirs = claimed.get(b), replayed.get(b)
        if mine is None or theirs is None or _allocation_key(mine) != _allocation_key(theirs):
            failures.append(
                _fail(
                    "allocation_mismatch",
                    f"buffer {b}: solution has {_describe(mine)}, the replay gives "
                    f"{_describe(theirs)}",
                    [b],
                )
            )
    return failures


def _reward_failures(inst: Instance, solution: Solution) -> list[Failure]:
    """``reward_s`` against the exact reward of the allocated buffers, ``normalized_reward``
    against the exact ``reward / R``, both to ``REWARD_RTOL`` relative (SPEC section 7);
    ``bound_s`` (when present) not below the exact reward by more than that, nor negative."""
    reward = exact_mapping_reward(inst, {a.buffer for a in solution.allocations})
    normalizer = exact_reward_normalizer(inst)
    normalized = reward / normalizer if normalizer != 0 else Fraction(0)
    failures = _claim_failure(
        "reward_s", solution.reward_s, reward, "the allocated buffers' exact reward is"
    )
    failures += _claim_failure(
        "normalized_reward",
        solution.normalized_reward,
        normalized,
        f"the exact reward / R (R = {float(normalizer)!r} s) is",
    )
    bound = solution.bound_s
    if bound is not None:
        if not isinstance(bound, (int, float)) or not math.isfinite(bound):
            failures.append(_fail("false_bound", f"bound_s {bound!r} is not a finite number"))
        elif bound < 0 or Fraction(bound) < (1 - REWARD_RTOL) * reward:
            failures.append(
                _fail(
                    "false_bound",
                    f"bound_s {bound!r} s is not an upper bound: the solution's own reward is "
                    f"{float(reward)!r} s"
                    + (
                        " (and Drop everywhere has reward 0: no bound is below 0)"
                        if bound < 0
                        else ""
                    ),
                )
            )
    return failures


def check_solution(inst: Instance, solution: Solution) -> CheckReport:
    """Validate ``solution`` for ``inst`` (SPEC section 7 and 8's ``check``).

    Checks the instance hash, replays ``actions`` when present (legal, complete,
    reproducing the allocations exactly), runs the physical check, and compares
    ``reward_s`` with the exact reward of the allocated buffers, ``normalized_reward``
    with the exact ``reward / R`` (each to a relative ``REWARD_RTOL``), and ``bound_s``
    with the reward it claims to bound. A solution for another
    instance (hash) fails with ``instance_mismatch`` alone: the rules of one instance
    say nothing useful about a mapping of another.
    """
    if not isinstance(inst, Instance):
        raise InstanceError(f"check_solution: expected an Instance, got {type(inst).__name__}")
    if not isinstance(solution, Solution):
        raise SolutionError(f"check_solution: expected a Solution, got {type(solution).__name__}")
    if solution.instance_sha256 != inst.sha256:
        if solution.instance == inst.name:
            why = (
                f"solution names instance {inst.name!r} but its instance_sha256 "
                f"({solution.instance_sha256}) is not this file's ({inst.sha256}): the "
                "instance or the solution was edited, or they come from different versions"
            )
        else:
            why = (
                f"solution is for instance {solution.instance!r} (hash "
                f"{solution.instance_sha256}); this instance ({inst.name}) has {inst.sha256}"
            )
        return CheckReport((_fail("instance_mismatch", why),))
    failures = []
    if solution.actions is not None:
        failures += _replay_failures(inst, solution)
    failures += physical_check(inst, solution.allocations)
    failures += _reward_failures(inst, solution)
    return CheckReport(tuple(failures))
