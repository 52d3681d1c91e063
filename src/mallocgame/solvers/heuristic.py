"""``heuristic``: a simplified re-implementation of XLA's memory-space assignment (MSA).

:class:`HeuristicSolver` maps an :class:`~mallocgame.instance.Instance` the way XLA's
memory-space assignment does, outside the game's buffer order: candidates (tensors
joined by alias groups) in order of memory-boundedness; per use, NoCopy residency, an
eviction right after the producer, or a prefetch placed by XLA's overlap-to-copy-time
ratios; copies within the steps' supply; offsets by best fit. The answer is a mapping (a
:class:`~mallocgame.solution.Solution` with ``actions=None``) that always passes
:func:`mallocgame.check.physical_check`: the solver checks itself and reruns with any
offending alias group forced to slow memory. :func:`msa_allocations` returns the
allocations alone.

Deterministic: one pass (``work_unit = "passes"``); the seed is recorded, never used.

The algorithm, what is kept from XLA and what is left out: docs/heuristic.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from mallocgame.check import physical_check
from mallocgame.game.kernels import REL_EPS, sort_ranges, walk_back, walk_forward
from mallocgame.instance import Instance, RooflineLatency, tensor_clusters
from mallocgame.jit import jit as _jit  # numba.njit(cache=True, nogil=True)
from mallocgame.latency import mapping_reward
from mallocgame.options import check_ranges, setting
from mallocgame.solution import Allocation, Solution
from mallocgame.solvers.base import Run, Solver

__all__ = [
    "HeuristicConfig",
    "HeuristicSolver",
    "OrderedAssignment",
    "heuristic_answer",
    "msa_allocations",
]

MAX_VERIFY_ROUNDS = 8  # reruns after a failed physical check before giving up (all slow)

PLACEMENT_COUNTS = ("resident", "evictions", "prefetches", "extensions", "kept")
"""The heuristic's counts (in its answer's ``work``) of what its mapping holds: tensors
kept resident, evictions, prefetches, NoCopy extensions of a chain, reads kept on one."""

_SLOW, _REQUIRED, _OPTIONAL = 0, 1, 2


@dataclass(frozen=True)
class HeuristicConfig:
    """The settings of ``heuristic`` (XLA's CostAnalysisPrefetchIntervalPicker test defaults)."""

    preferred_overlap_to_async_copy_ratio: float = setting(
        1.5, "a prefetch's preferred overlap, as a multiple of its copy time", within="(0, 1e3]"
    )
    max_overlap_to_mem_size_async_copy_ratio: float = setting(
        10.0,
        "the longest overlap (and NoCopy stay), as a multiple of max_overlap_basis's copy time",
        within="(0, 1e3]",
    )
    max_overlap_basis: Literal["memory", "buffer"] = setting(
        "memory",
        "copy time the longest overlap scales: the whole fast memory's (XLA today) or the buffer's",
    )
    skip_unprofitable: bool = setting(
        True, "leave uses that would not lower their instruction's latency slow"
    )

    def __post_init__(self) -> None:
        check_ranges(self)


# ------------------------------------------------------------------------ compiled parts


@_jit
def _best_fit(t0, t1, o0, o1, grp, n, start, end, size, group, capacity, fixed, lo, hi):
    """Offset for ``size`` bytes over steps ``[start, end]`` beside the ``n`` placed
    rectangles of other groups: ``fixed`` if that fits (when ``fixed >= 0``), else the
    start of the smallest free range that holds it; -1 if none."""
    k = 0
    for i in range(n):
        if t0[i] <= end and t1[i] >= start and grp[i] != group:
            lo[k] = o0[i]
            hi[k] = o1[i]
            k += 1
    if fixed >= 0:
        if fixed + size > capacity:
            return -1
        if size == 0:
            return fixed
        for i in range(k):
            if lo[i] < fixed + size and fixed < hi[i]:
                return -1
        return fixed
    if size > capacity:
        return -1
    if size == 0:
        return 0
    sort_ranges(k, lo, hi)
    best = -1
    best_gap = capacity + 1
    cur = 0
    for i in range(k):
        if lo[i] > cur:
            gap = lo[i] - cur
            if gap >= size and gap < best_gap:
                best = cur
                best_gap = gap
        if hi[i] > cur:
            cur = hi[i]
    gap = capacity - cur
    if gap >= size and gap < best_gap:
        best = cur
    return best


@_jit
def _prefetch_window(supply_left, prefix, pair_used, use, def_time, demand, max_elapsed):
    """For an operand copy before step ``use``: ``(latest, earliest)`` copy starts.

    ``latest`` is where the game's backward walk stops (the free supply of
    ``[latest, use-1]`` covers ``demand``); ``earliest`` extends the interval while
    its pairs are free, it stays after ``def_time`` and its elapsed time (supply sum)
    stays within ``max_elapsed``. ``(-1, -1)`` if no copy fits.
    """
    latest = walk_back(supply_left, pair_used, use, def_time, demand)
    if latest < 0:
        return -1, -1
    earliest = latest
    while earliest - 1 > def_time and earliest - 1 >= 0 and not pair_used[earliest - 1]:
        if prefix[use] - prefix[earliest - 1] > max_elapsed:
            break
        earliest -= 1
    return latest, earliest


@_jit
def _eviction_window(supply_left, prefix, pair_used, tau, num_steps, demand, preferred_elapsed):
    """For an output copy after step ``tau``: ``(shortest, preferred)`` copy ends.

    ``shortest`` is where the game's forward walk stops; ``preferred`` extends it
    (pairs free, inside the program) until the interval's elapsed time reaches
    ``preferred_elapsed``. ``(-1, -1)`` if no copy fits.
    """
    shortest = walk_forward(supply_left, pair_used, tau, num_steps, demand)
    if shortest < 0:
        return -1, -1
    preferred = shortest
    while prefix[preferred + 1] - prefix[tau + 1] < preferred_elapsed:
        if preferred + 1 > num_steps - 1 or pair_used[preferred]:
            break
        preferred += 1
    return shortest, preferred


@_jit
def _consume(supply_left, pair_used, c0, c1, demand, backward):
    """Take ``demand`` from the supply of ``[c0, c1]`` (from ``c1`` down when
    ``backward``, else from ``c0`` up) and mark the pairs of the interval used."""
    need = demand
    if backward:
        t = c1
        while t >= c0 and need > REL_EPS * demand:
            take = min(supply_left[t], need)
            supply_left[t] -= take
            need -= take
            t -= 1
    else:
        t = c0
        while t <= c1 and need > REL_EPS * demand:
            take = min(supply_left[t], need)
            supply_left[t] -= take
            need -= take
            t += 1
    for p in range(c0, c1):
        pair_used[p] = 1


# --------------------------------------------------------------------------- the algorithm


class _Chain:
    """A tensor's current stay in fast memory: its offset, its last step, and the time
    of its latest use (or definition), where the next use segment starts."""

    __slots__ = ("end", "offset", "segment_start")

    def __init__(self, offset: int, end: int, segment_start: int) -> None:
        self.offset, self.end, self.segment_start = offset, end, segment_start


class _Msa:
    """State of one run of the assignment (the algorithm: docs/heuristic.md)."""

    def __init__(self, inst: Instance, opts: HeuristicConfig, forced_slow: set[int]) -> None:
        self.inst = inst
        self.opts = opts
        hw = inst.hardware
        num_b, num_t, num_x = inst.num_buffers, inst.num_instructions, len(inst.tensors)
        self.num_t = num_t
        self.capacity = hw.fast_memory_bytes
        bufs = inst.buffers
        self.time = [b.instruction for b in bufs]
        self.group = list(inst.group_ids)  # dense: an alias id may be any label
        self.zsize = [hw.aligned(b.size) for b in bufs]
        self.demand = [b.demand_s for b in bufs]
        group_size: dict[int, int] = {}
        for g in self.group:
            group_size[g] = group_size.get(g, 0) + 1
        self.multi = {g for g, n in group_size.items() if n > 1}
        self.forced_slow = set(forced_slow)

        self.def_buf = [-1] * num_x
        self.reads: list[list[int]] = [[] for _ in range(num_x)]
        for buf in bufs:
            if buf.is_output:
                self.def_buf[buf.tensor_id] = buf.id
            else:
                self.reads[buf.tensor_id].append(buf.id)  # game order = time order
        self.def_time = [x.def_time for x in inst.tensors]
        self.last_use = [x.last_use_time for x in inst.tensors]
        self.live_out = [x.live_out for x in inst.tensors]

        supply = np.array([ins.supply_s for ins in inst.instructions], dtype=np.float64)
        self.prefix = np.concatenate([[0.0], np.cumsum(supply)])
        self.supply_left = supply.copy()
        self.pair_used = np.zeros(num_t, dtype=np.int8)
        self.ratio_max = opts.max_overlap_to_mem_size_async_copy_ratio
        self.per_buffer_max = opts.max_overlap_basis == "buffer"
        self.memory_max = self.ratio_max * hw.fast_memory_bytes / hw.copy_bandwidth

        # Latency state per instruction, for marginal benefits (SPEC section 5).
        self.kind = [0] * num_t  # 0 roofline, 1 table
        self.count = [float(ins.count) for ins in inst.instructions]
        self.compute = [0.0] * num_t
        self.mem = [0.0] * num_t  # roofline: current memory time of one execution
        self.mask = [0] * num_t  # table: current fast bits
        self.table: list[tuple[float, ...]] = [()] * num_t
        self.delta = [0.0] * num_b  # roofline: memory time a buffer saves in fast memory
        self.bit = [-1] * num_b
        inv = 1.0 / hw.slow_bandwidth - 1.0 / hw.fast_bandwidth
        for t, ins in enumerate(inst.instructions):
            lat = ins.latency
            if isinstance(lat, RooflineLatency):
                self.compute[t] = lat.compute_s
                self.mem[t] = sum(bufs[b].size for b in ins.buffers) / hw.slow_bandwidth
                for b in ins.buffers:
                    self.delta[b] = bufs[b].size * inv
            else:
                self.kind[t] = 1
                self.table[t] = lat.latency_s
                for i, b in enumerate(lat.varied):
                    self.bit[b] = i

        # Rectangles placed in fast memory (time x address), one per non-empty allocation.
        cap = max(num_b, 1)
        self.t0 = np.zeros(cap, np.int64)
        self.t1 = np.zeros(cap, np.int64)
        self.o0 = np.zeros(cap, np.int64)
        self.o1 = np.zeros(cap, np.int64)
        self.rgrp = np.zeros(cap, np.int64)
        self.n_rect = 0
        self._lo = np.zeros(cap, np.int64)
        self._hi = np.zeros(cap, np.int64)

        self.goff: dict[int, int] = {}  # offset of each multi-buffer group placed so far
        self.alloc: dict[int, Allocation] = {}
        self.log: list[tuple[Any, ...]] = []
        # candidates and retries count attempts; the placement counts (PLACEMENT_COUNTS)
        # count what the mapping holds: a rollback takes back those of what it undoes
        self.stats = {"candidates": 0, "retries": 0, **dict.fromkeys(PLACEMENT_COUNTS, 0)}

    # --------------------------------------------------------------------- benefits

    def static_benefit(self, b: int) -> float:
        """XLA's per-position alternate-memory benefit (cost_analysis), loop-weighted."""
        t = self.time[b]
        if self.kind[t] == 0:
            mem, comp = self.mem[t], self.compute[t]
            if mem > comp:
                return self.delta[b] * self.count[t]
            return mem - comp
        if self.bit[b] < 0:
            return 0.0
        tab = self.table[t]
        return self.count[t] * (tab[0] - tab[1 << self.bit[b]])

    def marginal(self, b: int) -> float:
        """Seconds saved by placing ``b`` now, given the buffers of its instruction placed."""
        t = self.time[b]
        c = self.count[t]
        if self.kind[t] == 0:
            comp, mem = self.compute[t], self.mem[t]
            return c * (max(comp, mem) - max(comp, mem - self.delta[b]))
        bit = self.bit[b]
        if bit < 0:
            return 0.0
        mask = self.mask[t]
        if mask >> bit & 1:
            return 0.0
        tab = self.table[t]
        return c * (tab[mask] - tab[mask | (1 << bit)])

    # ------------------------------------------------------------- placement primitives

    def status(self, b: int, forced: set[int]) -> int:
        g = self.group[b]
        if g in forced or g in self.forced_slow:
            return _SLOW
        return _REQUIRED if g in self.multi else _OPTIONAL

    def fixed_offset(self, b: int) -> int:
        return self.goff.get(self.group[b], -1)

    def fit(self, start: int, end: int, b: int, fixed: int) -> int:
        return int(
            _best_fit(
                self.t0,
                self.t1,
                self.o0,
                self.o1,
                self.rgrp,
                self.n_rect,
                start,
                end,
                self.zsize[b],
                self.group[b],
                self.capacity,
                fixed,
                self._lo,
                self._hi,
            )
        )

    def place(
        self,
        b: int,
        action: str,
        offset: int,
        start: int | None,
        end: int | None,
        copy: tuple[int, int] | None = None,
    ) -> None:
        self.alloc[b] = Allocation(b, action, offset, start, end, copy)
        self.log.append(("alloc", b))
        if start is not None and self.zsize[b] > 0:
            assert end is not None  # an allocation in fast memory has both ends
            i = self.n_rect
            self.t0[i], self.t1[i] = start, end
            self.o0[i], self.o1[i] = offset, offset + self.zsize[b]
            self.rgrp[i] = self.group[b]
            self.n_rect += 1
            self.log.append(("rect",))
        g = self.group[b]
        if g in self.multi and g not in self.goff:
            self.goff[g] = offset
            self.log.append(("goff", g))
        t = self.time[b]
        if self.kind[t] == 0:
            self.log.append(("mem", t, self.mem[t]))  # the value before, restored exactly
            self.mem[t] -= self.delta[b]
        elif self.bit[b] >= 0:
            self.log.append(("mask", t, self.mask[t]))
            self.mask[t] |= 1 << self.bit[b]

    def use_channel(self, c0: int, c1: int, demand: float, backward: bool) -> None:
        self.log.append(
            (
                "chan",
                c0,
                c1,
                self.supply_left[c0 : c1 + 1].copy(),
                self.pair_used[c0 : c1 + 1].copy(),
            )
        )
        _consume(self.supply_left, self.pair_used, c0, c1, demand, backward)

    def tally(self, key: str) -> None:
        """One more placement of kind ``key`` (of :data:`PLACEMENT_COUNTS`), taken back
        by a rollback past it."""
        self.log.append(("count", key))
        self.stats[key] += 1

    def rollback(self, mark: int) -> None:
        while len(self.log) > mark:
            entry = self.log.pop()
            kind = entry[0]
            if kind == "count":
                self.stats[entry[1]] -= 1
            elif kind == "alloc":
                del self.alloc[entry[1]]
            elif kind == "rect":
                self.n_rect -= 1
            elif kind == "goff":
                del self.goff[entry[1]]
            elif kind == "mem":
                self.mem[entry[1]] = entry[2]
            elif kind == "mask":
                self.mask[entry[1]] = entry[2]
            else:  # chan
                _, c0, c1, supply, pairs = entry
                self.supply_left[c0 : c1 + 1] = supply
                self.pair_used[c0 : c1 + 1] = pairs

    def max_elapsed(self, b: int) -> float:
        """The longest overlap of a copy of ``b``, and its longest stay without one."""
        if self.per_buffer_max:
            return self.ratio_max * self.demand[b]
        return self.memory_max

    def no_copy_ok(self, b: int, start: int, end: int) -> bool:
        """The picker's CanAllocateInAlternateMemoryNoCopy for ``b``: the elapsed time
        strictly between ``start`` and ``end`` is within the limit."""
        if end - start <= 1:
            return True
        return self.prefix[end] - self.prefix[start + 1] <= self.max_elapsed(b)

    # ------------------------------------------------------------------ decisions

    def try_resident(self, x: int, d: int, forced: set[int]) -> bool:
        """Definition in fast memory for the whole live range; every read NoCopy."""
        if self.live_out[x]:
            return False
        members = [d, *self.reads[x]]
        offsets = set()
        required = False
        for b in members:
            s = self.status(b, forced)
            if s == _SLOW:
                return False
            required |= s == _REQUIRED
            if self.group[b] in self.goff:
                offsets.add(self.goff[self.group[b]])
        if len(offsets) > 1:
            return False
        if (
            not required
            and self.opts.skip_unprofitable
            and sum(self.marginal(b) for b in members) <= 0
        ):
            return False
        start, end = self.time[d], self.last_use[x]
        # Every use segment (definition -> first read -> ... -> end of the live range)
        # must be short enough to stay without a copy.
        times = [start, *(self.time[r] for r in self.reads[x]), end]
        if not all(self.no_copy_ok(d, a, b) for a, b in zip(times, times[1:])):
            return False
        offset = self.fit(start, end, d, offsets.pop() if offsets else -1)
        if offset < 0 or not all(self.inside(r, offset) for r in self.reads[x]):
            return False  # a read larger than its tensor (SPEC section 4) must fit there too
        self.place(d, "NoCopy", offset, start, end)
        for r in self.reads[x]:
            self.place(r, "NoCopy", offset, None, None)
        self.tally("resident")
        return True

    def inside(self, b: int, offset: int) -> bool:
        """Whether buffer ``b`` at ``offset`` lies inside the fast memory (a read may be
        larger than the tensor whose offset it shares)."""
        return offset + self.zsize[b] <= self.capacity

    def copy_without_transfer(self, b: int, t: int, fixed: int, counter: str) -> _Chain | None:
        """A Copy of zero demand for buffer ``b``: fast memory at step ``t`` alone, no copy
        interval (SPEC section 4); counted under ``stats[counter]``."""
        offset = self.fit(t, t, b, fixed)
        if offset < 0:
            return None
        self.place(b, "Copy", offset, t, t)
        self.tally(counter)
        return _Chain(offset, t, t)

    def try_evict(self, d: int) -> _Chain | None:
        """Definition in fast memory, copied out at once (an output Copy)."""
        tau = self.time[d]
        fixed = self.fixed_offset(d)
        demand = self.demand[d]
        if demand <= 0:
            return self.copy_without_transfer(d, tau, fixed, "evictions")
        shortest, preferred = _eviction_window(
            self.supply_left,
            self.prefix,
            self.pair_used,
            tau,
            self.num_t,
            demand,
            self.opts.preferred_overlap_to_async_copy_ratio * demand,
        )
        if shortest < 0:
            return None
        # Preferred end first, then shorter ones; a shorter interval fits wherever a
        # longer one does, so the first fit going down is found by bisection.
        end, offset = self._latest_fit(tau, shortest, preferred, d, fixed, grow_end=True)
        if end < 0:
            return None
        self.use_channel(tau + 1, end, demand, backward=False)
        self.place(d, "Copy", offset, tau, end, (tau + 1, end))
        self.tally("evictions")
        return _Chain(offset, end, tau)

    def try_prefetch(self, x: int, r: int, fixed: int) -> _Chain | None:
        """An operand Copy for read ``r`` (the tensor is in slow memory)."""
        use = self.time[r]
        demand = self.demand[r]
        if demand <= 0:
            return self.copy_without_transfer(r, use, fixed, "prefetches")
        latest, earliest = _prefetch_window(
            self.supply_left,
            self.prefix,
            self.pair_used,
            use,
            self.def_time[x],
            demand,
            max(self.max_elapsed(r), demand),
        )
        if latest < 0:
            return None
        target = self.opts.preferred_overlap_to_async_copy_ratio * demand
        # The start whose overlap (supply of [s, use-1]) is closest to the preferred
        # one; the earlier start on a tie, as PreferredPrefetchStartTime.
        best, best_diff = latest, math.inf
        for s in range(latest, earliest - 1, -1):
            diff = abs(self.prefix[use] - self.prefix[s] - target)
            if diff <= best_diff:
                best, best_diff = s, diff
            else:
                break  # the overlap only grows further from the target
        start, offset = self._latest_fit(use, best, latest, r, fixed, grow_end=False)
        if start < 0:
            return None
        self.use_channel(start, use - 1, demand, backward=True)
        self.place(r, "Copy", offset, start, use, (start, use - 1))
        self.tally("prefetches")
        return _Chain(offset, use, use)

    def _latest_fit(
        self, anchor: int, lo: int, hi: int, b: int, fixed: int, grow_end: bool
    ) -> tuple[int, int]:
        """Over candidate interval bounds from the preferred one towards the shortest
        interval, the first (longest) that fits; ``(-1, -1)`` if none does.

        ``grow_end``: intervals ``[anchor, e]`` for ``e`` from ``hi`` down to ``lo``;
        otherwise ``[s, anchor]`` for ``s`` from ``lo`` up to ``hi``.
        """

        def attempt(v: int) -> int:
            return self.fit(anchor, v, b, fixed) if grow_end else self.fit(v, anchor, b, fixed)

        preferred, shortest = (hi, lo) if grow_end else (lo, hi)
        offset = attempt(preferred)
        if offset >= 0:
            return preferred, offset
        offset = attempt(shortest)
        if offset < 0:
            return -1, -1
        good, good_offset, bad = shortest, offset, preferred
        while abs(good - bad) > 1:
            mid = (good + bad) // 2
            o = attempt(mid)
            if o >= 0:
                good, good_offset = mid, o
            else:
                bad = mid
        return good, good_offset

    def place_tensor(self, x: int, forced: set[int], allow_resident: bool) -> int:
        """Allocate tensor ``x``'s definition and reads; returns -1, or the alias group
        of a buffer that its group requires in fast memory but could not be placed."""
        d = self.def_buf[x]
        chain: _Chain | None = None
        if d >= 0:
            sd = self.status(d, forced)
            if sd != _SLOW:
                required = sd == _REQUIRED
                if allow_resident and self.try_resident(x, d, forced):
                    return -1
                if required or not self.opts.skip_unprofitable or self.marginal(d) > 0:
                    chain = self.try_evict(d)
                    if chain is None and required:
                        return self.group[d]
        for r in self.reads[x]:
            s = self.status(r, forced)
            if s == _SLOW:
                continue
            required = s == _REQUIRED
            use = self.time[r]
            gain = self.marginal(r)
            fixed = self.fixed_offset(r) if required else -1
            if chain is not None and (fixed < 0 or fixed == chain.offset):
                if use <= chain.end:
                    if (required or gain >= 0) and self.inside(r, chain.offset):
                        self.place(r, "NoCopy", chain.offset, None, None)
                        chain.segment_start = use
                        self.tally("kept")
                    continue
                if not required and self.opts.skip_unprofitable and gain <= 0:
                    continue
                if (
                    self.no_copy_ok(r, chain.segment_start, use)
                    and self.fit(chain.end + 1, use, r, chain.offset) >= 0
                ):
                    self.place(r, "NoCopy", chain.offset, chain.end + 1, use)
                    chain.end = chain.segment_start = use
                    self.tally("extensions")
                    continue
            elif not required and self.opts.skip_unprofitable and gain <= 0:
                continue
            new_chain = self.try_prefetch(x, r, fixed)
            if new_chain is not None:
                chain = new_chain
                continue
            if required:
                return self.group[r]
        return -1

    def allocate_candidate(self, tensors: list[int]) -> None:
        """Place one candidate, retrying with fewer fast alias groups on failure."""
        self.stats["candidates"] += 1
        forced: set[int] = set()
        allow_resident = True
        while True:
            mark = len(self.log)
            failed = -1
            for x in tensors:
                failed = self.place_tensor(x, forced, allow_resident)
                if failed >= 0:
                    break
            if failed < 0:
                return
            self.rollback(mark)
            self.stats["retries"] += 1
            if allow_resident:
                allow_resident = False
            else:
                forced.add(failed)
                allow_resident = True

    def candidates(self) -> list[list[int]]:
        """Tensors joined by multi-buffer alias groups, ordered by memory-boundedness."""
        inst = self.inst
        cluster = tensor_clusters(inst)
        members: dict[int, list[int]] = {}
        for x in range(len(inst.tensors)):
            if self.def_buf[x] >= 0 or self.reads[x]:
                members.setdefault(cluster[x], []).append(x)
        keyed = []
        for root, xs in members.items():
            xs.sort(key=lambda x: (self.def_time[x], x))
            bufs = sorted(
                b
                for x in xs
                for b in ([self.def_buf[x]] if self.def_buf[x] >= 0 else []) + self.reads[x]
            )
            acc = None
            for b in bufs:
                v = self.static_benefit(b)
                if acc is None:
                    acc = v
                elif acc > 0 and v > 0:
                    acc += v
                else:
                    acc = max(acc, v)
            size = max(max(inst.tensors[x].size for x in xs), 1)
            boundedness = (acc or 0.0) / math.sqrt(size)
            keyed.append((-boundedness, -size, bufs[0], root, xs))
        keyed.sort(key=lambda k: k[:4])
        return [k[4] for k in keyed]

    def run(self) -> list[Allocation]:
        for tensors in self.candidates():
            self.allocate_candidate(tensors)
        return [self.alloc[b] for b in sorted(self.alloc)]


def _verified_run(
    instance: Instance, options: HeuristicConfig
) -> tuple[list[Allocation], dict[str, int], frozenset[int]]:
    """The MSA-like mapping, its counts, and the alias groups forced to slow memory to
    make it pass the physical check."""
    forced: set[int] = set()
    rounds = 0
    while True:
        msa = _Msa(instance, options, forced)
        allocations = msa.run()
        failures = physical_check(instance, allocations)
        rounds += 1
        if not failures:
            break
        group = instance.group_ids
        bad = {group[b] for f in failures for b in f.buffers}
        if not bad or rounds >= MAX_VERIFY_ROUNDS:
            allocations = []  # (and none of its placements: their counts are 0)
            break
        # Groups of the buffers involved, and of every buffer of their tensors.
        tensors = {instance.buffers[b].tensor_id for f in failures for b in f.buffers}
        bad |= {group[b.id] for b in instance.buffers if b.tensor_id in tensors}
        forced |= bad
    stats = dict(msa.stats)
    if not allocations:
        stats.update(dict.fromkeys(PLACEMENT_COUNTS, 0))
    stats["verify_rounds"] = rounds
    return allocations, stats, frozenset(forced)


def msa_allocations(
    instance: Instance, options: HeuristicConfig = HeuristicConfig()
) -> tuple[list[Allocation], dict[str, int]]:
    """The MSA-like mapping of ``instance`` (verified with the physical check) and
    counts of what it did."""
    allocations, stats, _ = _verified_run(instance, options)
    return allocations, stats


class OrderedAssignment:
    """The heuristic's assignment with its candidate order given from outside.

    The heuristic places *candidates* (tensors joined by alias groups) one after another,
    greedily; :attr:`default_order` is its own order (memory-boundedness), a list of
    candidate indices ``0 .. num_candidates-1``. :meth:`assign` places them in any other
    order, with the groups the heuristic's own run had to force to slow memory kept slow.
    Successive calls share work: only the candidates after the longest prefix the new
    order shares with the previous call's are placed again (the placements before it are
    kept, the rest rolled back). The result is not checked: an order can give a mapping
    that fails :func:`mallocgame.check.physical_check`.

    Building one runs the heuristic (:func:`msa_allocations`): :attr:`heuristic_allocations`
    and :attr:`heuristic_stats` are its verified mapping and counts, the heuristic's answer
    (:func:`heuristic_answer`). Its own order placed again gives that mapping, unless the
    verification gave up (``verify_rounds`` at :data:`MAX_VERIFY_ROUNDS`): then the
    heuristic's answer is the empty mapping and its own order's placement fails the check.
    """

    def __init__(self, instance: Instance, options: HeuristicConfig = HeuristicConfig()) -> None:
        self.instance = instance
        self.heuristic_allocations, self.heuristic_stats, forced = _verified_run(instance, options)
        self._msa = _Msa(instance, options, set(forced))
        self.candidates: tuple[tuple[int, ...], ...] = tuple(
            tuple(c) for c in self._msa.candidates()
        )
        self.default_order: tuple[int, ...] = tuple(range(len(self.candidates)))
        self._order = np.full(len(self.candidates), -1, np.int64)  # the last order placed
        self._marks: list[int] = []  # log length before the candidate at each position
        self._candidate_of_buffer = np.full(instance.num_buffers, -1, np.int64)
        for i, tensors in enumerate(self.candidates):
            for x in tensors:
                d = self._msa.def_buf[x]
                for b in ([d] if d >= 0 else []) + self._msa.reads[x]:
                    self._candidate_of_buffer[b] = i

    @property
    def num_candidates(self) -> int:
        return len(self.candidates)

    def candidate_of(self, buffer: int) -> int:
        """The candidate that holds ``buffer`` (-1: none, a buffer of no tensor's reads or
        definition)."""
        return int(self._candidate_of_buffer[buffer])

    def assign(self, order: Sequence[int] | np.ndarray) -> list[Allocation]:
        """The allocations of placing the candidates in ``order`` (a permutation of
        ``0 .. num_candidates-1``, whole numbers, never rounded; :class:`ValueError`
        otherwise), sorted by buffer."""
        given = np.asarray(order)
        n = self.num_candidates
        whole = given.dtype.kind in "biu" or (
            given.dtype.kind == "f"
            and bool(np.all((given >= 0) & (given < n) & (given == np.floor(given))))
        )
        new = given.astype(np.int64) if whole else given
        if not whole or new.shape != (n,) or not np.array_equal(np.sort(new), np.arange(n)):
            raise ValueError(f"an order is a permutation of the {n} candidates")
        differ = np.flatnonzero(new[: len(self._marks)] != self._order[: len(self._marks)])
        keep = int(differ[0]) if differ.size else len(self._marks)
        if keep < len(self._marks):
            self._msa.rollback(self._marks[keep])
            del self._marks[keep:]
        msa = self._msa
        for position in range(keep, n):
            self._marks.append(len(msa.log))
            msa.allocate_candidate(list(self.candidates[new[position]]))
        self._order = new
        return [msa.alloc[b] for b in sorted(msa.alloc)]


class HeuristicSolver(Solver, name="heuristic", work_unit="passes", config=HeuristicConfig):
    """XLA memory-space-assignment-like mapping (docs/heuristic.md); one pass, no search."""

    def search(self, instance: Instance, config: HeuristicConfig, run: Run) -> Solution:
        answer = heuristic_answer(run, *msa_allocations(instance, config))
        run.improve(answer)
        return answer


def heuristic_answer(
    run: Run, allocations: Sequence[Allocation], stats: Mapping[str, int]
) -> Solution:
    """``run``'s answer of the heuristic's mapping ``allocations`` and its counts ``stats``
    (:func:`msa_allocations`; work: its verification rounds as ``passes``)."""
    reward = mapping_reward(run.instance, [a.buffer for a in allocations])
    return run.mapping_answer(allocations, reward, {"passes": stats["verify_rounds"], **stats})
