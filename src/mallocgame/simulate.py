"""A latency simulator: the end-to-end time of a program under a memory mapping.

The paper measures the latency of the compiled program on a TPU; the reward of the
game (SPEC section 5) is only a proxy for it. This module stands in for the
measurement with an event-level model that is finer than the reward: copies take
real time on one copy engine, instructions stall for prefetches that could not hide
behind compute, copies out of fast memory block the reuse of their memory and slow
reads of their tensor, copies and instructions share the slow-memory bandwidth, and
loop bodies run iteration by iteration.

:func:`simulate` (an instance and a solution or its allocations) returns a
:class:`SimulationResult` (``latency_s = compute_s + stall_s + drain_s``);
:func:`baseline_latency` is the latency with everything in slow memory, and
:func:`speedup` the paper's ``latency_baseline / latency`` (section 5.1). The simulator
assumes a solution that passes the physical check
(:func:`mallocgame.check.physical_check`); it does not check one itself. Deterministic.
Units: seconds (float) for times, bytes (int) for sizes and offsets; logical steps are
instruction indices ``0 .. T-1``. Loops must nest or be disjoint, and the unrolled
program may hold at most ``max_executions`` executions (else :class:`SimulationError`,
a ``ValueError``). Cost: ``O((instructions + copies) * trips)``.

The model in full (timeline, bandwidth sharing, the copy engine, copies in loops):
docs/simulator.md.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mallocgame.errors import InstanceError, MallocGameError, SolutionError
from mallocgame.fileio import is_finite_real
from mallocgame.instance import Instance, RooflineLatency
from mallocgame.solution import Allocation, Solution

__all__ = [
    "SimulationError",
    "SimulationResult",
    "simulate",
    "baseline_latency",
    "speedup",
    "default_copy_share",
    "execution_time",
    "unroll",
]

MAX_EXECUTIONS = 20_000_000


class SimulationError(MallocGameError, ValueError):
    """The simulator cannot run this instance (loops that overlap without nesting, an
    unrolled program longer than its limit); the message says which."""


_SCAN = 64  # allocations scanned one by one before a vectorized search (reuse after copy-out)
_ANY_TENSOR = -1  # first_overlap's x that excludes no tensor


@dataclass(frozen=True, eq=False)
class SimulationResult:
    """The simulated run of one mapping (see the module docstring for the model).

    Totals in seconds: ``latency_s = compute_s + stall_s + drain_s``.

    Per instruction (length ``T``): ``start_s`` / ``end_s`` are the start and end of
    the instruction's *first* execution, ``busy_s`` its execution time summed over all
    its executions. The whole unrolled timeline is ``exec_step`` (the instruction of
    each execution, in run order), ``exec_start`` and ``exec_end``. Copies, in engine
    order: ``copy_buffer``, ``copy_is_out`` (copy-out or prefetch), ``copy_start`` and
    ``copy_end`` (the engine's busy periods; zero-demand copies are not listed).
    """

    latency_s: float  # end-to-end: last instruction end or last copy finish
    compute_s: float  # sum of execution times (contention included)
    stall_s: float  # time executions waited for copies (prefetches, copy-outs)
    drain_s: float  # copies still running after the last instruction ended
    copy_busy_s: float  # total time the copy engine was busy
    contention_s: float  # part of compute_s due to sharing slow bandwidth with copies
    copy_share: float  # gamma: the copy's share of slow bandwidth while it runs
    num_executions: int
    num_copies: int
    start_s: np.ndarray = field(repr=False)
    end_s: np.ndarray = field(repr=False)
    busy_s: np.ndarray = field(repr=False)
    exec_step: np.ndarray = field(repr=False)
    exec_start: np.ndarray = field(repr=False)
    exec_end: np.ndarray = field(repr=False)
    copy_buffer: np.ndarray = field(repr=False)
    copy_is_out: np.ndarray = field(repr=False)
    copy_start: np.ndarray = field(repr=False)
    copy_end: np.ndarray = field(repr=False)

    def busy_intervals(self) -> list[tuple[float, float]]:
        """The copy engine's busy periods ``(start, end)``, in time order."""
        return list(zip(self.copy_start.tolist(), self.copy_end.tolist()))


# ------------------------------------------------------------------------- the model


def default_copy_share(instance: Instance) -> float:
    """``copy_bandwidth / (copy_bandwidth + slow_bandwidth)``: the copy's share of slow
    bandwidth, below 1 also where a copy bandwidth far above the slow one rounds it to 1.
    Computed as ``1 / (1 + slow_bandwidth / copy_bandwidth)``, whose sum cannot overflow
    (one half for two equal bandwidths near 1e308 too)."""
    hw = instance.hardware
    return min(1.0 / (1.0 + hw.slow_bandwidth / hw.copy_bandwidth), float(np.nextafter(1.0, 0.0)))


def _execution_params(
    instance: Instance, t: int, fast: frozenset[int] | set[int], scale: float, gamma: float
) -> tuple[float, float, float, float]:
    """``(D, fixed, m, rho)`` of one execution of ``t`` doing ``scale`` executions' work.

    ``D`` the uncontended duration, ``fixed`` the delay before the memory phase, ``m``
    the memory phase's uncontended length, ``rho = m / u`` its progress rate (seconds
    of work per second) while a copy runs.
    """
    hw = instance.hardware
    ins = instance.instructions[t]
    m_fast = m_slow = 0.0
    for b in ins.buffers:
        if b in fast:
            m_fast += instance.buffers[b].size / hw.fast_bandwidth
        else:
            m_slow += instance.buffers[b].size / hw.slow_bandwidth
    lat = ins.latency
    if isinstance(lat, RooflineLatency):
        fixed = lat.fixed_s
        one = lat.fixed_s + max(lat.compute_s, m_fast + m_slow)
    else:
        fixed = 0.0
        mask = 0
        for i, b in enumerate(lat.varied):
            if b in fast:
                mask |= 1 << i
        one = lat.latency_s[mask]
        mem = m_fast + m_slow
        if mem > one:  # the table is the measurement: its traffic fits in it
            k = one / mem
            m_fast, m_slow = m_fast * k, m_slow * k
    m = m_fast + m_slow
    if m_slow > 0.0 and gamma > 0.0:
        u = m_fast + m_slow / (1.0 - gamma)
        rho = m / u
    else:
        rho = 1.0
    return scale * one, scale * fixed, scale * m, rho


def _finish(
    start: float,
    d: float,
    fixed: float,
    m: float,
    rho: float,
    bs: Sequence[float],
    bf: Sequence[float],
    k: int,
) -> float:
    """End of an execution starting at ``start`` given the engine's busy periods
    ``[bs[i], bf[i])`` (sorted, disjoint) from index ``k`` on."""
    end = start + d
    if rho >= 1.0 or m <= 0.0:
        return end
    cur = start + fixed
    rem = m
    n = len(bs)
    hit = False
    while k < n:
        s, f = bs[k], bf[k]
        if s > cur:
            gap = s - cur
            if rem <= gap:
                break
            rem -= gap
            cur = s
        if f > cur:
            cap = (f - cur) * rho
            hit = True
            if rem <= cap:
                cur += rem / rho
                rem = 0.0
                break
            rem -= cap
            cur = f
        k += 1
    if not hit:
        return end
    return max(end, cur + rem)


def _copy_share(instance: Instance, copy_share: float | None) -> float:
    """``copy_share``, or the instance's default where None; :class:`SimulationError`
    for what is not a number in [0, 1) (at 1 the copies take all the bandwidth and no
    instruction ends)."""
    if copy_share is None:
        return default_copy_share(instance)
    if isinstance(copy_share, bool) or not isinstance(copy_share, (int, float)):
        raise SimulationError(f"copy_share must be a number in [0, 1), not {copy_share!r:.40}")
    gamma = float(copy_share)
    if not 0.0 <= gamma < 1.0:
        raise SimulationError(f"copy_share must lie in [0, 1), got {gamma}")
    return gamma


def execution_time(
    instance: Instance,
    t: int,
    fast: Iterable[int],
    start: float = 0.0,
    busy: Iterable[tuple[float, float]] = (),
    *,
    copy_share: float | None = None,
    scale: float = 1.0,
) -> float:
    """Seconds one execution of ``t`` takes when it starts at ``start``, the buffers in
    ``fast`` are in fast memory and the copy engine is busy during the ``busy``
    periods (sorted, disjoint ``(begin, end)`` pairs); ``scale`` executions' worth of
    work (see the module docstring). With no busy period this is ``scale * L_t(S)``.
    Raises :class:`SimulationError` for an instruction ``t`` outside ``0 .. T-1``, a
    ``scale`` that is not a finite number at least 0, a ``start`` that is not a finite
    number, ``fast`` that is no collection of buffer ids, or ``busy`` periods that are not
    pairs of finite numbers ``begin <= end``, disjoint.
    """
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
        raise SimulationError(f"instruction {t!r:.40} is not a whole number")
    if not 0 <= t < instance.num_instructions:
        raise SimulationError(f"instruction {t} outside 0..{instance.num_instructions - 1}")
    if (
        isinstance(scale, bool)
        or not isinstance(scale, (int, float))
        or not 0 <= scale < float("inf")
    ):
        raise SimulationError(f"scale must be a finite number at least 0, not {scale!r:.40}")
    if not is_finite_real(start):
        raise SimulationError(f"start must be a finite number of seconds, not {start!r:.40}")
    try:
        fast_set = frozenset(fast)
        bad = next(
            (
                b
                for b in fast_set
                if isinstance(b, (bool, np.bool_))
                or not isinstance(b, (int, np.integer))
                or not 0 <= b < instance.num_buffers
            ),
            None,
        )
    except TypeError:
        raise SimulationError(
            f"fast must be a collection of buffer ids, not {fast!r:.40}"
        ) from None
    if bad is not None:
        raise SimulationError(
            f"fast holds {bad!r:.40}, not a buffer id in 0..{instance.num_buffers - 1}"
        )
    gamma = _copy_share(instance, copy_share)
    d, fixed, m, rho = _execution_params(instance, t, fast_set, scale, gamma)
    pairs = _busy_periods(busy)
    bs = [p[0] for p in pairs]
    bf = [p[1] for p in pairs]
    k = bisect.bisect_right(bf, start)
    return _finish(start, d, fixed, m, rho, bs, bf, k) - start


def _busy_periods(busy: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """``busy`` sorted, as floats; :class:`SimulationError` unless every period is a pair
    of finite numbers ``begin <= end`` and no two overlap."""
    try:
        periods = [tuple(p) for p in busy]
    except TypeError:
        raise SimulationError(f"busy must be (begin, end) pairs, not {busy!r:.40}") from None
    pairs = []
    for p in periods:
        if len(p) != 2 or not (is_finite_real(p[0]) and is_finite_real(p[1])) or p[0] > p[1]:
            raise SimulationError(
                f"busy period {p!r:.60} is not a pair of finite numbers begin <= end"
            )
        pairs.append((float(p[0]), float(p[1])))
    pairs.sort()
    for (b0, e0), (b1, e1) in zip(pairs, pairs[1:]):
        if b1 < e0:
            raise SimulationError(f"busy periods ({b0}, {e0}) and ({b1}, {e1}) overlap")
    return pairs


# --------------------------------------------------------------------------- loops


def _loop_tree(instance: Instance) -> list[tuple[int, int, int, int]]:
    """The loops as ``(first, last, trip_count, parent index or -1)``, outer before inner."""
    loops = sorted(
        ((lp.first, lp.last, lp.trip_count) for lp in instance.loops), key=lambda x: (x[0], -x[1])
    )
    out: list[tuple[int, int, int, int]] = []
    stack: list[int] = []
    for first, last, trip in loops:
        while stack and out[stack[-1]][1] < first:
            stack.pop()
        if stack and last > out[stack[-1]][1]:
            p = out[stack[-1]]
            raise SimulationError(
                f"loops {p[0]}..{p[1]} and {first}..{last} overlap without nesting; "
                "the simulator needs nested or disjoint loop bodies"
            )
        out.append((first, last, trip, stack[-1] if stack else -1))
        stack.append(len(out) - 1)
    return out


def _check_max_executions(max_executions: Any) -> None:
    """:class:`SimulationError` unless ``max_executions`` is a whole number >= 0."""
    if isinstance(max_executions, bool) or not isinstance(max_executions, int):
        raise SimulationError(f"max_executions must be a whole number, not {max_executions!r:.40}")
    if max_executions < 0:
        raise SimulationError(f"max_executions must be >= 0, not {max_executions}")


def unroll(
    instance: Instance, max_executions: int = MAX_EXECUTIONS
) -> tuple[np.ndarray, np.ndarray]:
    """The unrolled program: ``(exec_step, innermost)``.

    ``exec_step`` lists the instruction of each execution in run order (loop bodies
    repeated ``trip_count`` times); ``innermost[t]`` is the index (in
    :func:`_loop_tree` order) of the innermost loop around ``t``, -1 for none.
    Raises :class:`SimulationError` where ``max_executions`` is no whole number >= 0 or
    the unrolled program holds more executions than it (the message gives their exact
    number, or says more than 2**64).
    """
    _check_max_executions(max_executions)
    num_t = instance.num_instructions
    tree = _loop_tree(instance)
    innermost = np.full(num_t, -1, np.int64)
    runs = [1] * len(tree)  # how often each loop's body runs: Python ints, exact, unbounded
    total = num_t
    for i, (first, last, trip, parent) in enumerate(tree):  # outer before inner
        innermost[first : last + 1] = i
        outer = runs[parent] if parent >= 0 else 1
        runs[i] = outer * trip
        total += (runs[i] - outer) * (last - first + 1)  # its body: `outer` runs become runs[i]
    if total > max_executions:
        count = str(total) if total <= 2**64 else "more than 2**64"
        raise SimulationError(
            f"the unrolled program has {count} executions (more than {max_executions})"
        )
    children: dict[int, list[int]] = defaultdict(list)
    for i, (_f, _l, _t, parent) in enumerate(tree):
        children[parent].append(i)

    def seq(first: int, last: int, kids: list[int]) -> np.ndarray:
        parts = []
        cur = first
        for c in kids:
            cf, cl, trip, _ = tree[c]
            if cf > cur:
                parts.append(np.arange(cur, cf, dtype=np.int64))
            body = seq(cf, cl, children.get(c, []))
            parts.append(np.tile(body, trip))
            cur = cl + 1
        if cur <= last:
            parts.append(np.arange(cur, last + 1, dtype=np.int64))
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    exec_step = seq(0, num_t - 1, children.get(-1, []))
    return exec_step, innermost


# ----------------------------------------------------------------------- simulation


def _allocations(solution_or_allocations: Solution | Iterable[Allocation]) -> list[Allocation]:
    """The allocations of a :class:`Solution` or an iterable of them; anything else is a
    :class:`SolutionError`."""
    if isinstance(solution_or_allocations, Solution):
        return list(solution_or_allocations.allocations)
    bad = SolutionError(
        f"simulate: expected a Solution or its allocations, not {solution_or_allocations!r:.80}"
    )
    if isinstance(solution_or_allocations, (str, bytes, Mapping)):
        raise bad
    try:
        allocations = list(solution_or_allocations)
    except TypeError:
        raise bad from None
    if not all(isinstance(a, Allocation) for a in allocations):
        raise bad
    return allocations


def _latest_before(trig: list[int], execs: np.ndarray | list[int]) -> list[tuple[int, int]]:
    """For executions ``execs`` (sorted) the latest trigger before each, as ``(execution,
    index in trig)``, keeping only the first execution after each trigger (``trig`` sorted)."""
    if not trig:
        return []
    if len(trig) == 1 and len(execs) == 1:
        j = int(execs[0])
        return [(j, 0)] if trig[0] < j else []
    idx = np.searchsorted(np.asarray(trig), np.asarray(execs), side="left") - 1
    out = []
    last = -1
    for j, k in zip(np.asarray(execs).tolist(), idx.tolist()):
        if k >= 0 and k != last:
            out.append((j, k))
        last = k
    return out


class _Footprints:
    """The allocations with a start, as rows ``(start, lo, hi, tensor)`` sorted by start:
    the aligned bytes ``[lo, hi)`` of fast memory that a tensor holds from logical step
    ``start`` on; numpy columns for the long scans, ``starts`` for bisection."""

    def __init__(self, inst: Instance, allocs: dict[int, Allocation]) -> None:
        align = inst.hardware.aligned
        self.rows = sorted(
            (a.start, a.offset, a.offset + align(inst.buffers[b].size), inst.buffers[b].tensor_id)
            for b, a in allocs.items()
            if a.start is not None
        )
        rows = self.rows
        self.r_start = np.array([r[0] for r in rows], np.int64)
        self.r_lo = np.array([r[1] for r in rows], np.int64)
        self.r_hi = np.array([r[2] for r in rows], np.int64)
        self.r_x = np.array([r[3] for r in rows], np.int64)
        self.starts: list[int] = self.r_start.tolist()

    def first_overlap(self, k0: int, k1: int, lo: int, hi: int, x: int) -> int | None:
        """The smallest start among rows ``k0 .. k1-1`` overlapping ``[lo, hi)`` (bytes)
        with a tensor other than ``x`` (any tensor for ``_ANY_TENSOR``); ``None`` for none."""
        rows = self.rows
        k = k0
        stop = min(k1, k0 + _SCAN)
        while k < stop:
            rlo, rhi, rx = rows[k][1], rows[k][2], rows[k][3]
            if rlo < hi and rhi > lo and rx != x:
                return rows[k][0]
            k += 1
        if k >= k1:
            return None
        sl = slice(k, k1)
        hit = (self.r_lo[sl] < hi) & (self.r_hi[sl] > lo) & (self.r_x[sl] != x)
        if not hit.any():
            return None
        return int(self.r_start[sl][int(np.argmax(hit))])


class _CopyEngine:
    """The one copy engine: copies run one at a time, in the order they are scheduled.

    ``finish[o]`` is the time (seconds) occurrence ``o`` is done; ``start`` / ``end`` the
    engine's busy periods (one per copy with positive demand, in time order) and ``occ``
    their occurrences; ``free`` the time the engine is next idle.
    """

    __slots__ = ("demand", "deps", "end", "finish", "free", "occ", "start")

    def __init__(
        self, occ_rows: list[tuple[int, int, int, float, int]], deps: Mapping[int, list[int]]
    ) -> None:
        self.deps = deps  # occurrence -> occurrences it waits for
        self.demand = [r[3] for r in occ_rows]  # seconds of engine time per occurrence
        self.finish = [0.0] * len(occ_rows)
        self.free = 0.0
        self.start: list[float] = []
        self.end: list[float] = []
        self.occ: list[int] = []

    def schedule(self, o: int, ready: float) -> None:
        """Run occurrence ``o``, ready at ``ready`` (seconds), once its dependencies are
        done and the engine is free; a zero-demand copy finishes when it is ready."""
        finish = self.finish
        for dep in self.deps.get(o, ()):
            if finish[dep] > ready:
                ready = finish[dep]
        d = self.demand[o]
        if d <= 0.0:
            finish[o] = ready
            return
        free = self.free
        s = ready if ready > free else free
        f = s + d
        self.free = f
        finish[o] = f
        self.start.append(s)
        self.end.append(f)
        self.occ.append(o)


class _Simulation:
    """State of one run of the simulator (the model: docs/simulator.md), one method a phase.

    ``__init__`` unrolls the program and prices each instruction's executions;
    :meth:`plan_copies` lists the copy occurrences and the prefetches executions wait
    for; :meth:`wait_for_slow_reads` and :meth:`wait_for_reuse` add the waits that
    copy-outs impose; :meth:`run` plays the timeline; :meth:`result` packs it up.
    Executions are indexed ``0 .. E-1`` in run order, instructions ``0 .. T-1``.
    """

    def __init__(
        self, inst: Instance, allocs: dict[int, Allocation], gamma: float, max_executions: int
    ) -> None:
        """Unroll the program (:class:`SimulationError` past ``max_executions``) and set
        each instruction's execution parameters (:func:`_execution_params`), every
        execution doing ``count / executions`` of the instruction's work."""
        self.inst = inst
        self.allocs = allocs  # buffer -> its allocation (buffers in fast memory)
        self.gamma = gamma
        num_t = inst.num_instructions
        self.num_t = num_t
        # exec_step (E,): the instruction of each execution; innermost (T,): loop or -1.
        self.exec_step, self.innermost = unroll(inst, max_executions)
        self.num_e = len(self.exec_step)
        counts = np.bincount(self.exec_step, minlength=num_t)
        # Executions grouped by instruction: those of t are order[offs[t] : offs[t + 1]].
        self.order = np.argsort(self.exec_step, kind="stable")
        self.offs = np.zeros(num_t + 1, np.int64)
        np.cumsum(counts, out=self.offs[1:])
        self.simple = self.num_e == num_t  # no loop body runs more than once: execution k is step k

        # ---- per-instruction execution parameters
        fast_by_t: list[set[int]] = [set() for _ in range(num_t)]
        for b in allocs:
            fast_by_t[inst.buffers[b].instruction].add(b)
        self.params = [
            _execution_params(
                inst, t, fast_by_t[t], inst.instructions[t].count / max(1, int(counts[t])), gamma
            )
            for t in range(num_t)
        ]

        # ---- copy occurrences (plan_copies) and what waits for them
        self.occ_rows: list[tuple[int, int, int, float, int]] = []
        self.out_trig: dict[int, list[int]] = {}  # copy-out buffer -> trigger executions (sorted)
        self.pre_trig: dict[int, list[int]] = {}  # prefetch buffer -> trigger executions (sorted)
        self.copy_outs: list[Allocation] = []
        self.occ_id: dict[tuple[int, int], int] = {}  # (buffer, trigger execution) -> occurrence
        # execution -> occurrences it waits for; occurrence -> occurrences it waits for
        self.waits: dict[int, list[int]] = defaultdict(list)
        self.deps: dict[int, list[int]] = defaultdict(list)

    def positions(self, t: int) -> np.ndarray:
        """The executions of instruction ``t``, in run order."""
        return self.order[self.offs[t] : self.offs[t + 1]]

    def pairs(self, x: int, y: int) -> tuple[list[int], list[int]]:
        """(execution of x, next execution of y) for each execution of x followed by
        an execution of y before the next execution of x (x < y)."""
        if self.simple:
            return [x], [y]
        px, py = self.positions(x), self.positions(y)
        if self.innermost[x] == self.innermost[y]:
            return px.tolist(), py.tolist()
        ix = np.searchsorted(px, py) - 1
        prev = np.empty_like(py)
        prev[0] = -1
        prev[1:] = py[:-1]
        xi = px[np.maximum(ix, 0)]
        ok = (ix >= 0) & (xi > prev)
        return xi[ok].tolist(), py[ok].tolist()

    def plan_copies(self) -> None:
        """List the copy occurrences, sorted, as rows ``(due, class, buffer, demand_s,
        consumer)``, and the prefetches each execution waits for.

        Class 0: a copy-out, due at the start of execution ``trigger + 1`` (ready when its
        trigger, an execution of the defining instruction, ends; no consumer, -1). Class 1:
        a prefetch, due at the start of its trigger execution and waited for by its
        consumer, the next execution of the buffer's instruction. ``demand_s``: seconds
        of engine time.
        """
        inst, occ_rows = self.inst, self.occ_rows
        for b, a in sorted(self.allocs.items()):
            if a.action != "Copy" or a.copy is None:
                continue
            buf = inst.buffers[b]
            tau = buf.instruction
            if buf.is_output:
                trig, _ = self.pairs(tau, a.copy[1])
                self.out_trig[b] = trig
                self.copy_outs.append(a)
                for i in trig:
                    occ_rows.append((i + 1, 0, b, buf.demand_s, -1))
            else:
                trig, cons = self.pairs(a.copy[0], tau)
                self.pre_trig[b] = trig
                for i, j in zip(trig, cons):
                    occ_rows.append((i, 1, b, buf.demand_s, j))

        occ_rows.sort()
        occ_id, waits = self.occ_id, self.waits
        for o, (due, cls, b, _d, consumer) in enumerate(occ_rows):
            occ_id[(b, due - 1 if cls == 0 else due)] = o
            if cls == 1:
                waits[consumer].append(o)

    def add_step_wait(self, b: int, step: int) -> None:
        """Make each execution of instruction ``step`` that is the first after a copy-out
        of ``b`` wait for that copy-out."""
        trig = self.out_trig[b]
        for j, k in _latest_before(trig, [step] if self.simple else self.positions(step)):
            self.waits[j].append(self.occ_id[(b, trig[k])])

    def wait_for_slow_reads(self) -> None:
        """Slow reads of copied-out tensors: an operand of a copied-out tensor read from
        slow memory (or copied in at no cost) waits for the copy-out before it; a
        prefetch of one waits for the copy-out before its trigger."""
        inst, allocs = self.inst, self.allocs
        defining_out = {inst.buffers[a.buffer].tensor_id: a.buffer for a in self.copy_outs}
        for buf in inst.buffers:
            if buf.is_output or buf.tensor_id not in defining_out:
                continue
            d = defining_out[buf.tensor_id]
            operand = allocs.get(buf.id)
            if operand is None or (operand.action == "Copy" and operand.copy is None):
                self.add_step_wait(d, buf.instruction)  # slow operand (or instant copy-in)
            elif operand.action == "Copy":
                trig = self.out_trig[d]
                ptrig = self.pre_trig[buf.id]
                for j, k in _latest_before(trig, ptrig):
                    # (the engine's order implies it; kept should the order change)
                    self.deps[self.occ_id[(buf.id, j)]].append(self.occ_id[(d, trig[k])])

    def wait_for_reuse(self) -> None:
        """Reuse of a copy-out's memory: the step where the first later allocation of
        another tensor over the copy-out's bytes starts waits for the copy-out, and so, in
        each loop whose body holds the copy's span, does the step where the first
        allocation in the body up to the copied-out tensor's definition starts over those
        bytes, its own allocation included (reuse in the next iteration, where the body
        defines the tensor anew)."""
        inst = self.inst
        align = inst.hardware.aligned
        rows = _Footprints(inst, self.allocs)
        starts = rows.starts
        tree = _loop_tree(inst)
        for a in self.copy_outs:
            assert a.copy is not None  # copy_outs holds only copies with an interval
            buf = inst.buffers[a.buffer]
            tau, lo, hi = buf.instruction, a.offset, a.offset + align(buf.size)
            steps = set()
            w = rows.first_overlap(
                bisect.bisect_right(starts, tau), len(starts), lo, hi, buf.tensor_id
            )
            if w is not None:
                steps.add(w)
            if not self.simple:  # reuse in the next iteration of a loop around the copy's span
                lp = int(self.innermost[tau])
                while lp >= 0:
                    first, last, _trip, parent = tree[lp]
                    if first <= tau and a.copy[1] <= last:
                        # up to tau itself, the tensor's own rows included: the next
                        # iteration writes a new value into the copy-out's bytes at tau
                        k0 = bisect.bisect_left(starts, first)
                        k1 = bisect.bisect_right(starts, tau)
                        w = rows.first_overlap(k0, k1, lo, hi, _ANY_TENSOR)
                        if w is not None:
                            steps.add(w)
                    lp = parent
            for w in steps:
                self.add_step_wait(a.buffer, w)

    def run(self) -> None:
        """Play the unrolled program on one timeline, in seconds.

        Execution ``i`` starts when ``i - 1`` ends and every copy it waits for is done (the
        wait is stall); copy-outs due at ``i`` enter the engine when ``i - 1`` ends,
        prefetches due at ``i`` when ``i`` starts, and copies left over after the last
        execution; an execution slows down while the engine is busy (:func:`_finish`).
        Sets ``ex_start`` / ``ex_end`` (E,), ``stall``, ``contention``, ``end`` (the last
        execution's end) and ``engine``.
        """
        occ_rows = self.occ_rows
        n_occ = len(occ_rows)
        o_due = [r[0] for r in occ_rows]
        o_cls = [r[1] for r in occ_rows]
        engine = self.engine = _CopyEngine(occ_rows, self.deps)
        schedule = engine.schedule
        finish = engine.finish
        bs, bf = engine.start, engine.end  # the engine's busy periods, growing as copies run
        waits = self.waits
        params = self.params
        finish_time = _finish
        num_e = self.num_e
        ex_start = np.empty(num_e)
        ex_end = np.empty(num_e)
        steps_list = self.exec_step.tolist()
        kp = 0  # first busy period that may still overlap the current execution
        q = 0  # next occurrence to schedule
        prev_end = 0.0
        stall = 0.0
        contention = 0.0
        for i in range(num_e):
            while q < n_occ and o_due[q] == i and o_cls[q] == 0:
                schedule(q, prev_end)
                q += 1
            start = prev_end
            waiting = waits.get(i)
            if waiting:
                for o in waiting:
                    if finish[o] > start:
                        start = finish[o]
            stall += start - prev_end
            while q < n_occ and o_due[q] == i:
                schedule(q, start)
                q += 1
            d, fixed, m, rho = params[steps_list[i]]
            while kp < len(bf) and bf[kp] <= start:
                kp += 1
            end = finish_time(start, d, fixed, m, rho, bs, bf, kp)
            contention += end - (start + d)  # exactly 0 when no copy overlapped it
            ex_start[i] = start
            ex_end[i] = end
            prev_end = end
        while q < n_occ:
            schedule(q, prev_end)
            q += 1
        self.ex_start, self.ex_end = ex_start, ex_end
        self.stall, self.contention, self.end = stall, contention, prev_end

    def result(self) -> SimulationResult:
        """The run as a :class:`SimulationResult`: totals, each instruction's first
        execution and busy time (T,), the timeline (E,) and the copies in engine order."""
        num_t, engine, exec_step = self.num_t, self.engine, self.exec_step
        finish = engine.finish
        last_copy = max(finish) if finish else 0.0
        latency = max(self.end, last_copy)
        durations = self.ex_end - self.ex_start
        first_exec = self.order[self.offs[:-1]] if num_t else np.zeros(0, np.int64)
        busy = np.bincount(exec_step, weights=durations, minlength=num_t) if num_t else np.zeros(0)
        occ_rows, c_occ = self.occ_rows, engine.occ
        return SimulationResult(
            latency_s=float(latency),
            compute_s=float(durations.sum()),
            stall_s=float(self.stall),
            drain_s=float(latency - self.end),
            copy_busy_s=float(sum(c - s for s, c in zip(engine.start, engine.end))),
            contention_s=float(self.contention),
            copy_share=self.gamma,
            num_executions=self.num_e,
            num_copies=len(c_occ),
            start_s=self.ex_start[first_exec] if num_t else np.zeros(0),
            end_s=self.ex_end[first_exec] if num_t else np.zeros(0),
            busy_s=busy,
            exec_step=exec_step,
            exec_start=self.ex_start,
            exec_end=self.ex_end,
            copy_buffer=np.array([occ_rows[o][2] for o in c_occ], np.int64),
            copy_is_out=np.array([occ_rows[o][1] == 0 for o in c_occ], bool),
            copy_start=np.asarray(engine.start, float),
            copy_end=np.asarray(engine.end, float),
        )


def simulate(
    instance: Instance,
    solution_or_allocations: Solution | Iterable[Allocation],
    *,
    copy_share: float | None = None,
    max_executions: int = MAX_EXECUTIONS,
) -> SimulationResult:
    """Simulate the program under a (physically checked) mapping; see the module docstring.

    ``solution_or_allocations``: a :class:`Solution` or its allocations (buffers not
    listed are in slow memory). ``copy_share``: the copy's share of the slow-memory
    bandwidth while it runs, in ``[0, 1)`` (default :func:`default_copy_share`).
    Raises :class:`SimulationError` (a :class:`ValueError`) for allocations naming
    unknown buffers, loops that overlap without nesting, a ``max_executions`` that is no
    whole number >= 0, an unrolled program longer than it or a ``copy_share`` outside
    [0, 1);
    :class:`InstanceError` if ``instance`` is not an :class:`Instance` and
    :class:`SolutionError` if ``solution_or_allocations`` is not a solution or allocations.
    """
    if not isinstance(instance, Instance):
        raise InstanceError(f"simulate: expected an Instance, not {instance!r:.80}")
    gamma = _copy_share(instance, copy_share)
    _check_max_executions(max_executions)
    allocs: dict[int, Allocation] = {}
    for a in _allocations(solution_or_allocations):
        if not 0 <= a.buffer < instance.num_buffers:
            raise SimulationError(f"allocation names unknown buffer {a.buffer}")
        allocs[a.buffer] = a

    sim = _Simulation(instance, allocs, gamma, max_executions)
    sim.plan_copies()
    if sim.copy_outs:
        sim.wait_for_slow_reads()
        sim.wait_for_reuse()
    sim.run()
    return sim.result()


def baseline_latency(instance: Instance, **kwargs: object) -> float:
    """The latency with every buffer in slow memory (no copies): ``sum_t count_t * L_t(empty)``."""
    return simulate(instance, (), **kwargs).latency_s  # type: ignore[arg-type]


def speedup(
    instance: Instance, solution_or_allocations: Solution | Iterable[Allocation], **kwargs: object
) -> float:
    """The paper's ``latency_baseline / latency`` (section 5.1); above 1 is faster.

    Where the mapping's latency is 0: ``inf`` if the baseline's is not, 1.0 if both are.
    """
    lat = simulate(instance, solution_or_allocations, **kwargs).latency_s  # type: ignore[arg-type]
    base = baseline_latency(instance, **kwargs)
    if lat > 0:
        return base / lat
    return math.inf if base > 0 else 1.0
