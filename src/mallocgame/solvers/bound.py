"""A fast upper bound on the reward of any physically valid mapping (SPEC sections 5, 7).

:func:`upper_bound` returns seconds ``U`` with ``U >= reward(M)`` for every mapping
``M`` that passes :func:`mallocgame.check.physical_check`, hence also for every
complete game trajectory (each one passes it) and for every solver's answer. It is
recorded with every result as a yardstick (``bound_s``); :func:`bound_details`
gives its parts.

How it is made, and why it is a bound
-------------------------------------

1. **What can be fast at all** (a superset, computed to a fixpoint). A buffer can be
   in fast memory only if its aligned size fits the fast memory and so does every
   buffer of its alias group (rule 3: the group is fast as a whole). An output can
   be fast only as NoCopy (not for a ``live_out`` tensor, rule 7; and only if every
   read of its tensor can be fast, since a NoCopy output forbids slow reads) or as
   Copy (its copy interval ``[tau+1, e]`` needs supply >= demand, rule 5: some ``e
   <= T-1`` must exist). An operand can be fast only if some source can bring its
   tensor there (rule 6): the tensor's output in fast memory, or an operand Copy of
   the tensor, whose copy interval ends at that read's ``tau'-1`` and must cover its
   demand from steps after the definition. Supply sums are tested with a loose
   tolerance (1e-6 relative, plus the rounding of prefix sums) so that this is a
   superset of what the checker accepts.
2. **Trivial bound**: the best each instruction can gain when every buffer that can
   be fast is, chosen independently per instruction: roofline ``count * min(A,
   B + sum of positive deltas)``, tables the best mask of feasible buffers. It is
   at most ``R`` (the normalizer) for roofline programs.
3. **LP relaxation** (solved by OR-Tools' GLOP), with ``x_g`` in [0, 1] the fast
   fraction of alias group ``g`` (one variable per group, rule 3):

   * roofline reward of one execution of ``t``: ``r_t <= A_t``, ``r_t <= B_t +
     sum_b delta_b x_g(b)`` where ``A = max(0, M0 - c)``, ``B = max(0, c - M0)``,
     ``M0 = sum size/slow_bw``, ``c = compute_s``, ``delta_b = size_b (1/slow_bw -
     1/fast_bw)``: exactly ``L_t(empty) - L_t(S)`` = ``min(A, B + D(S))`` at 0/1
     points, and its concave (min-of-linear) form is a valid relaxation;
   * table reward: a distribution ``lambda`` over the masks of the feasible varied
     buffers (consistent with alias groups) whose marginals are the ``x`` (the
     concave envelope of the table), reward ``sum lambda_m gain_m``;
   * memory, one row per step ``t``: ``sum over clusters C of occ_{C,t} <=
     capacity``. Facts used, each from the physical rules: a fast output's own
     memory interval starts at its target time; a NoCopy output allows no slow read
     and no operand Copy of its tensor (rule 7), so its tensor stays covered until
     its last read; a Copy output's memory holds its copy interval, which ends no
     earlier than the earliest ``e`` whose supply covers the demand; so from the
     target time to the earlier of those two ends some allocation of the tensor is
     in fast memory; a fast operand of tensor ``X`` at
     ``tau`` needs allocations of ``X`` covering a contiguous segment from a
     source start to ``tau`` (rule 6), and a source starts no later than
     ``S = max over possible sources`` (the output at ``def_time``, an operand
     Copy of ``X`` at ``min(latest copy start, tau)``), so at each step of ``[S,
     tau]`` some allocation of ``X`` (of at least the smallest aligned size among
     ``X``'s buffers) is in fast memory. Allocations of different alias groups
     never share bytes (rule 2); a *cluster* joins the tensors whose buffers share
     alias groups, so allocations in different clusters add up, and within a
     cluster only the largest required size is counted (``occ_{C,t} >= w x_g`` for
     each requirement). Every 0/1 valid mapping satisfies all rows, so the LP
     optimum bounds its reward.

   The LP is solved in normalized units; its value is inflated by ``1e-6`` of the
   trivial bound to absorb solver tolerances, and the result is the smaller of the
   trivial and the LP bounds. Copy supply beyond per-copy feasibility and the
   pair rule are not in the LP (relaxed).
4. **Rounding**: the terms are float64 sums and differences of nearly equal numbers
   where the fast and slow bandwidths are close, or the compute time is the memory
   time, and the checker judges the bound against the exact reward (rational
   arithmetic). Both bounds are raised by :func:`rounding_margin`, a few ulps of each
   instruction's latencies, so that they hold there too (about 1e-15 of the latencies:
   invisible at the digits a table shows).

Cost: linear in the instance plus the LP (about a second on 16,000 buffers).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from mallocgame.instance import Instance, RooflineLatency, tensor_clusters

__all__ = [
    "upper_bound",
    "bound_details",
    "Reach",
    "reach",
    "trivial_bound",
    "instruction_gains",
    "rounding_margin",
]

LOOSE_RTOL = 1e-6  # supply tolerance of the feasibility superset (checker: 1e-9)
LP_SLACK = 1e-6  # LP value inflated by this fraction of the trivial bound


# ------------------------------------------------------------------------ latency terms


@dataclass(frozen=True)
class RooflineTerm:
    """``count * min(A, B + sum_b delta_b [b fast])`` seconds saved by instruction ``t``."""

    t: int
    count: int
    a: float
    b: float
    buffers: tuple[int, ...]
    deltas: tuple[float, ...]


@dataclass(frozen=True)
class TableTerm:
    """``count * gains[mask]`` seconds saved (``gains[0] == 0``), bit ``i`` = ``varied[i]``."""

    t: int
    count: int
    varied: tuple[int, ...]
    gains: tuple[float, ...]


def instruction_gains(inst: Instance) -> list[RooflineTerm | TableTerm]:
    """The reward of each instruction as a function of its fast buffers (SPEC section 5)."""
    hw = inst.hardware
    inv = 1.0 / hw.slow_bandwidth - 1.0 / hw.fast_bandwidth
    terms: list[RooflineTerm | TableTerm] = []
    for t, ins in enumerate(inst.instructions):
        lat = ins.latency
        if isinstance(lat, RooflineLatency):
            m0 = sum(inst.buffers[b].size / hw.slow_bandwidth for b in ins.buffers)
            c = lat.compute_s
            terms.append(
                RooflineTerm(
                    t,
                    ins.count,
                    max(0.0, m0 - c),
                    max(0.0, c - m0),
                    tuple(ins.buffers),
                    tuple(inst.buffers[b].size * inv for b in ins.buffers),
                )
            )
        else:
            base = lat.latency_s[0]
            terms.append(
                TableTerm(t, ins.count, tuple(lat.varied), tuple(base - v for v in lat.latency_s))
            )
    return terms


# ------------------------------------------------------------------------ reachability


@dataclass(frozen=True)
class Reach:
    """What each buffer can physically be (a superset; see the module docstring).

    ``latest_start``: operands, the latest start of a Copy's copy interval (``tau`` for
    zero demand, -1 when no Copy is possible); ``earliest_end``: outputs, the earliest
    end of a Copy's copy interval (``tau`` for zero demand, -1 when none).
    """

    zu: np.ndarray  # aligned size in alignment units
    capu: int  # fast memory in alignment units
    latest_start: np.ndarray
    earliest_end: np.ndarray
    out_nocopy_ok: np.ndarray  # outputs: NoCopy allowed (not live_out, all reads can be fast)
    feasible: np.ndarray  # bool per buffer
    reads: list[list[int]]  # per tensor, its operand buffers in game order
    output: np.ndarray  # per tensor, its defining output buffer or -1


def _prefix(inst: Instance) -> tuple[np.ndarray, float]:
    supply = np.array([ins.supply_s for ins in inst.instructions], np.float64)
    prefix = np.r_[0.0, np.cumsum(supply)]
    slack = (len(supply) + 2) * np.finfo(np.float64).eps * (prefix[-1] if len(prefix) else 0.0)
    return prefix, slack


def reach(inst: Instance) -> Reach:
    """Compute :class:`Reach` for ``inst`` (loose supply tests, fixpoint feasibility)."""
    hw = inst.hardware
    a = hw.alignment_bytes
    nb, nt = inst.num_buffers, inst.num_instructions
    capu = hw.fast_memory_bytes // a
    size = np.array([b.size for b in inst.buffers], np.int64)
    zu = -(-size // a)
    tau = np.array([b.instruction for b in inst.buffers], np.int64)
    is_out = np.array([b.is_output for b in inst.buffers], bool)
    tid = np.array([b.tensor_id for b in inst.buffers], np.int64)
    gid = np.array(inst.group_ids, np.int64)
    demand = np.array([b.demand_s for b in inst.buffers], np.float64)
    def_time = np.array([x.def_time for x in inst.tensors], np.int64)
    live_out = np.array([x.live_out for x in inst.tensors], bool)
    prefix, slack = _prefix(inst)
    need = demand * (1 - LOOSE_RTOL) - slack

    latest = np.full(nb, -1, np.int64)
    ops = np.flatnonzero(~is_out)
    if len(ops):
        t = tau[ops]
        s = np.searchsorted(prefix, prefix[t] - need[ops], side="right") - 1
        s = np.minimum(s, t - 1)
        s = np.where(demand[ops] == 0, t, s)
        ok = s >= np.maximum(def_time[tid[ops]] + 1, 0)
        latest[ops] = np.where(ok, s, -1)
    earliest = np.full(nb, -1, np.int64)
    outs = np.flatnonzero(is_out)
    if len(outs):
        t = tau[outs]
        e = np.searchsorted(prefix, prefix[np.minimum(t + 1, nt)] + need[outs], side="left") - 1
        e = np.maximum(e, t + 1)
        e = np.where(demand[outs] == 0, t, e)
        earliest[outs] = np.where(e <= nt - 1, e, -1)

    reads: list[list[int]] = [[] for _ in inst.tensors]
    output = np.full(len(inst.tensors), -1, np.int64)
    for b in inst.buffers:
        if b.is_output:
            output[b.tensor_id] = b.id
        else:
            reads[b.tensor_id].append(b.id)

    num_groups = int(gid.max()) + 1 if nb else 0
    feasible = zu <= capu
    out_nc = np.zeros(nb, bool)
    while True:
        group_ok = np.ones(num_groups, bool)
        np.logical_and.at(group_ok, gid, feasible)
        feas = feasible & group_ok[gid]
        # outputs
        read_all_ok = np.ones(len(inst.tensors), bool)
        np.logical_and.at(read_all_ok, tid[ops], feas[ops])
        out_nc[:] = False
        out_nc[outs] = ~live_out[tid[outs]] & read_all_ok[tid[outs]]
        out_ok = np.zeros(nb, bool)
        out_ok[outs] = feas[outs] & (out_nc[outs] | (earliest[outs] >= 0))
        # operands: some source for the tensor
        tensor_out_ok = np.zeros(len(inst.tensors), bool)
        tensor_out_ok[tid[outs]] = out_ok[outs]
        copy_src = np.zeros(len(inst.tensors), bool)
        np.logical_or.at(copy_src, tid[ops], feas[ops] & (latest[ops] >= 0))
        new = feas.copy()
        new[outs] = out_ok[outs]
        new[ops] = feas[ops] & (tensor_out_ok[tid[ops]] | copy_src[tid[ops]])
        if np.array_equal(new, feasible):
            break
        feasible = new
    return Reach(zu, capu, latest, earliest, out_nc, feasible, reads, output)


# ------------------------------------------------------------------------ trivial bound


def _best_mask_gain(term: TableTerm, feasible: np.ndarray) -> float:
    allowed = 0
    for i, b in enumerate(term.varied):
        if feasible[b]:
            allowed |= 1 << i
    return max(g for m, g in enumerate(term.gains) if m & ~allowed == 0)


def trivial_bound(inst: Instance, r: Reach | None = None) -> float:
    """Every instruction at its best over the buffers that can be fast (seconds)."""
    r = reach(inst) if r is None else r
    total = 0.0
    for term in instruction_gains(inst):
        total += term.count * _term_best(term, r.feasible)
    return total


def rounding_margin(inst: Instance, r: Reach | None = None) -> float:
    """Seconds by which float64 terms (:func:`instruction_gains`) may fall short of the
    exact reward they bound: for each instruction with a buffer that can be fast, its count
    times ``8 (n + 2)`` ulps of its slow and fast memory times and its compute time
    (roofline, ``n`` its buffers), or 8 ulps of its largest table latency. Zero where
    nothing can be fast (the reward is then exactly 0)."""
    r = reach(inst) if r is None else r
    hw = inst.hardware
    eps = float(np.finfo(np.float64).eps)
    total = 0.0
    for ins in inst.instructions:
        if not any(r.feasible[b] for b in ins.buffers):
            continue
        lat = ins.latency
        if isinstance(lat, RooflineLatency):
            size = sum(inst.buffers[b].size for b in ins.buffers)
            scale = size / hw.slow_bandwidth + size / hw.fast_bandwidth + lat.compute_s
            total += ins.count * 8 * (len(ins.buffers) + 2) * eps * scale
        else:
            total += ins.count * 8 * eps * max(abs(v) for v in lat.latency_s)
    return total


def _term_best(term: RooflineTerm | TableTerm, feasible: np.ndarray) -> float:
    if isinstance(term, RooflineTerm):
        d = sum(x for b, x in zip(term.buffers, term.deltas) if feasible[b] and x > 0)
        return max(0.0, min(term.a, term.b + d))
    return max(0.0, _best_mask_gain(term, feasible))


# --------------------------------------------------------------------------- the LP


class _LP:
    """A sparse LP built row by row: ``maximize c x`` s.t. ``lo <= A x <= hi``."""

    def __init__(self) -> None:
        self.lb: list[float] = []
        self.ub: list[float] = []
        self.obj: list[float] = []
        self.rows: list[tuple[list[int], list[float], float, float]] = []

    def var(self, lb: float, ub: float, obj: float = 0.0) -> int:
        self.lb.append(lb)
        self.ub.append(ub)
        self.obj.append(obj)
        return len(self.lb) - 1

    def row(self, idx: list[int], coef: list[float], lo: float, hi: float) -> None:
        merged: dict[int, float] = {}
        for i, c in zip(idx, coef):
            merged[i] = merged.get(i, 0.0) + c
        self.rows.append((list(merged), list(merged.values()), lo, hi))

    def solve(self, time_limit: float | None = None) -> float | None:
        # a generated protobuf module, which ortools ships without a stub
        from ortools.linear_solver import linear_solver_pb2  # type: ignore[attr-defined]
        from ortools.linear_solver.python import model_builder_helper as mbh

        model = linear_solver_pb2.MPModelProto(maximize=True)
        for lb, ub, c in zip(self.lb, self.ub, self.obj):
            model.variable.add(lower_bound=lb, upper_bound=ub, objective_coefficient=c)
        for idx, coef, lo, hi in self.rows:
            ct = model.constraint.add(lower_bound=lo, upper_bound=hi)
            ct.var_index.extend(idx)
            ct.coefficient.extend(coef)
        request = linear_solver_pb2.MPModelRequest(
            model=model, solver_type=linear_solver_pb2.MPModelRequest.GLOP_LINEAR_PROGRAMMING
        )
        if time_limit is not None:
            request.solver_time_limit_seconds = time_limit
        helper = mbh.ModelSolverHelper("glop")
        raw = helper.solve_serialized_request(request.SerializeToString())
        response = linear_solver_pb2.MPSolutionResponse.FromString(raw)
        if response.status != linear_solver_pb2.MPSOLVER_OPTIMAL:
            return None
        return float(response.objective_value)


def _memory_items(inst: Instance, r: Reach) -> list[tuple[int, int, int, int, int]]:
    """``(cluster, lo, hi, weight_units, buffer)``: if ``buffer`` is fast, its cluster
    holds at least ``weight_units`` at every step of ``[lo, hi]``."""
    cluster = np.array(tensor_clusters(inst), np.int64)
    items = []
    for x in inst.tensors:
        bufs = list(r.reads[x.id]) + ([int(r.output[x.id])] if r.output[x.id] >= 0 else [])
        feas = [b for b in bufs if r.feasible[b]]
        if not feas:
            continue
        w_min = int(min(r.zu[b] for b in feas))
        o = int(r.output[x.id])
        out_ok = o >= 0 and r.feasible[o]
        if out_ok:
            # its own allocation starts at def_time (rule 4)
            if r.zu[o] > 0:
                items.append((int(cluster[x.id]), x.def_time, x.def_time, int(r.zu[o]), o))
            # NoCopy: no read may be slow or a Copy (rule 7), so the output is the only
            # source and X's allocations cover def_time .. its last read (rule 6);
            # Copy: its own memory interval holds its copy interval [tau+1, e >= e_min]
            ends = []
            if r.out_nocopy_ok[o]:
                ends.append(
                    max([inst.buffers[b].instruction for b in r.reads[x.id]], default=x.def_time)
                )
            if r.earliest_end[o] >= 0:
                ends.append(int(r.earliest_end[o]))
            end = min(ends) if ends else x.def_time
            if w_min > 0 and end > x.def_time:
                items.append((int(cluster[x.id]), x.def_time, end, w_min, o))
        copy_starts = [
            int(r.latest_start[b])
            for b in r.reads[x.id]
            if r.feasible[b] and r.latest_start[b] >= 0
        ]
        for b in r.reads[x.id]:
            if not r.feasible[b] or w_min == 0:
                continue
            tau = inst.buffers[b].instruction
            starts = [min(s, tau) for s in copy_starts]
            if out_ok:
                starts.append(x.def_time)
            lo = max(starts) if starts else tau
            items.append((int(cluster[x.id]), lo, tau, w_min, b))
    return items


def _lp_bound(inst: Instance, r: Reach, scale: float, time_limit: float | None) -> float | None:
    """The LP relaxation's optimum in seconds (``None`` if the LP solver failed)."""
    lp = _LP()
    gid = inst.group_ids
    gvar: dict[int, int] = {}

    def x(b: int) -> int | None:
        if not r.feasible[b]:
            return None
        g = gid[b]
        if g not in gvar:
            gvar[g] = lp.var(0.0, 1.0)
        return gvar[g]

    for term in instruction_gains(inst):
        best = _term_best(term, r.feasible)
        if best <= 0:
            continue
        w = term.count / scale
        if isinstance(term, RooflineTerm):
            # in units of `scale` seconds per execution
            rv = lp.var(-math.inf, term.a / scale, term.count)
            idx, coef = [rv], [1.0]
            for b, d in zip(term.buffers, term.deltas):
                v = x(b)
                if v is not None and d != 0:
                    idx.append(v)
                    coef.append(-d / scale)
            lp.row(idx, coef, -math.inf, term.b / scale)
        else:
            bits = [i for i, b in enumerate(term.varied) if r.feasible[term.varied[i]]]
            masks = []
            for m in range(1 << len(term.varied)):
                if any(m >> i & 1 and i not in bits for i in range(len(term.varied))):
                    continue
                groups_in = {gid[term.varied[i]] for i in bits if m >> i & 1}
                groups_out = {gid[term.varied[i]] for i in bits if not m >> i & 1}
                if groups_in & groups_out:
                    continue  # one alias group both fast and slow
                masks.append(m)
            lam = {m: lp.var(0.0, 1.0, w * term.gains[m]) for m in masks}
            lp.row(list(lam.values()), [1.0] * len(lam), 1.0, 1.0)
            for i in bits:
                v = x(term.varied[i])
                assert v is not None  # bits index the feasible buffers: x() gives each a variable
                idx = [lam[m] for m in masks if m >> i & 1] + [v]
                lp.row(idx, [1.0] * (len(idx) - 1) + [-1.0], 0.0, 0.0)

    # memory rows: per step, per cluster the largest requirement
    capu = r.capu
    if capu > 0:
        per_step: dict[int, dict[int, dict[int, int]]] = {}
        for c, lo, hi, wu, b in _memory_items(inst, r):
            v = x(b)
            if v is None:
                continue
            for t in range(lo, hi + 1):
                slot = per_step.setdefault(t, {}).setdefault(c, {})
                if wu > slot.get(v, 0):
                    slot[v] = wu
        for clusters in per_step.values():
            if sum(max(reqs.values()) for reqs in clusters.values()) <= capu:
                continue  # everything that can be there fits: the row is redundant
            idx, coef = [], []
            for reqs in clusters.values():
                if len(reqs) == 1:
                    ((v, wu),) = reqs.items()
                    idx.append(v)
                    coef.append(wu / capu)
                else:
                    u = lp.var(0.0, math.inf)
                    for v, wu in reqs.items():
                        lp.row([u, v], [1.0, -wu / capu], 0.0, math.inf)
                    idx.append(u)
                    coef.append(1.0)
            lp.row(idx, coef, -math.inf, 1.0)
    if not lp.lb:
        return 0.0
    value = lp.solve(time_limit)
    if value is None:
        return None
    return value * scale


def bound_details(
    inst: Instance, *, lp: bool = True, time_limit: float | None = None
) -> dict[str, Any]:
    """The parts of the bound: ``trivial_s``, ``lp_s`` (or None), each with the
    :func:`rounding_margin`, ``bound_s``, times."""
    start = time.perf_counter()
    r = reach(inst)
    trivial = trivial_bound(inst, r)
    margin = rounding_margin(inst, r)
    out: dict[str, Any] = {"trivial_s": trivial + margin, "lp_s": None}
    if lp and trivial > 0:
        value = _lp_bound(inst, r, trivial, time_limit)
        if value is not None:
            out["lp_s"] = value + LP_SLACK * trivial + margin
    out["bound_s"] = min(out["trivial_s"], out["lp_s"] if out["lp_s"] is not None else math.inf)
    out["seconds"] = time.perf_counter() - start
    return out


def upper_bound(instance: Instance) -> float:
    """Seconds no physically valid mapping of ``instance`` can beat (module docstring)."""
    return float(bound_details(instance)["bound_s"])
