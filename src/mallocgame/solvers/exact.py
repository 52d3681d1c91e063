"""``exact``: the memory mapping problem solved as a CP-SAT model, with a proven bound.

:class:`ExactSolver` builds a model of the physical rules of SPEC section 7 for an
:class:`~mallocgame.instance.Instance` (:class:`MappingModel`) and solves it with
OR-Tools CP-SAT, warm-started from a few game rollouts and the heuristic's mapping. It
does not play the game: the answer is a mapping (``actions = None``) that passes
:func:`mallocgame.check.physical_check`, its reward recomputed exactly (seconds, SPEC
section 5).

Guarantees: every complete game's mapping is in the model, so an OPTIMAL answer is at
least the game's best return. ``Solution.bound_s`` (seconds) is an upper bound on the
reward of every game: the smaller of CP-SAT's bound and the LP bound of
:mod:`mallocgame.solvers.bound`; only the LP bound (``info["upper_bound_s"]``) bounds
every physically valid mapping. ``info["status"]`` is CP-SAT's (OPTIMAL, FEASIBLE,
UNKNOWN; INFEASIBLE only as below), or NOT_RUN when the wall-clock budget cannot cover
building the model or CP-SAT refuses it as invalid (an integer overflow: sizes near 2**53
over a thousand steps), ``info["note"]`` says which; the best warm start, the heuristic's
or a game's, is then the answer.
The model always has a solution (drop every buffer), so a CP-SAT INFEASIBLE is a presolve
bug: the model is solved again with less presolve (``PRESOLVE_RETRIES``, listed in
``info["presolve_retries"]``); the status stays INFEASIBLE only if the budget ran out
first or every retry said it again.

Budgets: wall clock (everything included) and/or work in CP-SAT deterministic time,
milliseconds (``work_unit = "dtime_ms"``); with a work budget and no wall-clock budget
the answer is reproducible from the seed (``workers`` more than 1 is refused there: CP-SAT's
workers race; so is a ``warm_start_s`` above 0: its games are timed by the wall clock).
With neither, at most ``DEFAULT_SECONDS``.

The model, the proof that it holds every game mapping, what is exact and what is
relaxed, and the CP-SAT 9.12-9.15 ``AddNoOverlap2D`` bug it avoids: docs/exact-model.md.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from mallocgame.check import physical_check
from mallocgame.errors import SolverError
from mallocgame.game.kernels import walk_back, walk_forward
from mallocgame.instance import Buffer, Instance, Tensor
from mallocgame.latency import mapping_reward
from mallocgame.options import check_ranges, setting
from mallocgame.solution import Allocation, Solution
from mallocgame.solvers.base import Run, Solver, SolveRequest, Stopwatch
from mallocgame.solvers.bound import (
    RooflineTerm,
    TableTerm,
    bound_details,
    instruction_gains,
    reach,
    rounding_margin,
    trivial_bound,
)

if TYPE_CHECKING:
    from ortools.sat.python.cp_model import CpSolver

__all__ = ["ExactConfig", "ExactSolver", "MappingModel", "copy_in_start", "copy_out_end"]

DEFAULT_SECONDS = 60.0
# model building, seconds per buffer (measured: 0.10 to 0.15 ms where no alias group is cut,
# 0.7 ms on xla-v1/lstm_lm_train with its group cells below) and per group step cell
# (group_step_cells; measured: 16 to 22 us on xla-v1/lstm_lm_train, 37,642 cells, and on
# 1,716 buffers of one alias group, 322,801 cells, on a 2-core machine)
BUILD_S_PER_BUFFER = 1e-3
BUILD_S_PER_CELL = 25e-6
# the LP bound's building, seconds per buffer (measured: ~22 us on xla-v2/resnet152_train_b16,
# 26,915 buffers, 2-core AMD EPYC): a wall-clock budget gives it at most a quarter
LP_S_PER_BUFFER = 25e-6
SCALE_EPS = 1e-6  # total rounding of the scaled objective, as a fraction of the trivial bound
# the most units the objective's terms may span (their counts times their largest magnitudes):
# CP-SAT's objective and bound pass through doubles, exact on integers only up to 2**53
OBJECTIVE_SPAN = 2**40
HINT_DETERMINISTIC_S = 5.0  # completing a warm start's hint without a wall clock: its limit
# CP-SAT parameters for a second and third solve after a wrong INFEASIBLE (each adds to the
# previous): without presolve probing, then without presolve
PRESOLVE_RETRIES: tuple[dict[str, Any], ...] = (
    {"cp_model_probing_level": 0},
    {"cp_model_presolve": False},
)


@dataclass(frozen=True)
class ExactConfig:
    """The settings of ``exact``."""

    workers: int = setting(
        1, "CP-SAT search workers (1 with a work budget alone: reproducible)", within="[1, 256]"
    )
    cumulative: bool = setting(True, "add the redundant cumulative (capacity over time) constraint")
    warm_start: bool = setting(True, "play a few games first, as a hint and a fallback answer")
    warm_start_s: float | None = setting(
        None,
        "seconds of warm-start games (none: a small share of the budget; under a wall-clock "
        "budget at most what it leaves after building the model and 0.5 s of search; "
        "above 0, refused with a work budget alone)",
        within="[0, 604800]",
    )
    heuristic_start: bool = setting(True, "hint CP-SAT with the heuristic's mapping")
    force_model: bool = setting(False, "build the model even when the budget looks too small")
    log: bool = setting(False, "print CP-SAT's search log")

    def __post_init__(self) -> None:
        check_ranges(self)


# ------------------------------------------------------------------- copy intervals


def copy_in_start(
    supply: Sequence[float] | np.ndarray, tau: int, demand: float, lo: int
) -> int | None:
    """Latest ``s >= lo`` from which the game's copy walk before ``tau`` covers ``demand``
    on the whole ``supply`` (``tau`` for zero demand), or ``None``."""
    if demand == 0:
        return tau
    supply = np.asarray(supply, dtype=np.float64)
    s = walk_back(supply, np.zeros(len(supply), dtype=np.int8), tau, lo - 1, demand)
    return None if s < 0 else int(s)


def copy_out_end(supply: Sequence[float] | np.ndarray, tau: int, demand: float) -> int | None:
    """Earliest ``e`` at which the game's copy walk after ``tau`` covers ``demand`` on
    the whole ``supply`` (``tau`` for zero demand), or ``None`` if the program ends first."""
    if demand == 0:
        return tau
    supply = np.asarray(supply, dtype=np.float64)
    e = walk_forward(supply, np.zeros(len(supply), dtype=np.int8), tau, len(supply), demand)
    return None if e < 0 else int(e)


# -------------------------------------------------------------------------- the model


def _neg(lit: Any) -> Any:
    """The negation of a literal or of a Python bool."""
    return (not lit) if isinstance(lit, bool) else ~lit


@dataclass
class _Read:
    buffer: int
    tau: int
    s: int | None  # Copy start (latest feasible), None: no Copy
    cp: Any = None  # BoolVar or 0
    att: dict[Any, Any] = field(default_factory=dict)  # chain key -> BoolVar
    ext: dict[Any, Any] = field(default_factory=dict)
    st: Any = None  # start of the memory box (tau + 1 when empty)
    bp: Any = None  # box present


@dataclass
class _Out:
    buffer: int
    tau: int
    e_min: int | None
    nc: Any = None
    cp: Any = None
    m: Any = None  # memory end


@dataclass
class _Rects:
    """The boxes of rule 2 as CP-SAT intervals: time (steps), address (alignment units),
    and each box's height for the cumulative constraint."""

    xs: list[Any] = field(default_factory=list)
    ys: list[Any] = field(default_factory=list)
    demands: list[Any] = field(default_factory=list)


class MappingModel:
    """The CP-SAT model of one instance (docs/exact-model.md)."""

    def __init__(self, inst: Instance, *, cumulative: bool = True) -> None:
        from ortools.sat.python import cp_model

        self.inst = inst
        hw = inst.hardware
        self.align = hw.alignment_bytes
        self.capu = hw.fast_memory_bytes // self.align
        self.model = cp_model.CpModel()
        self.supply = np.array([ins.supply_s for ins in inst.instructions], dtype=np.float64)
        self.zu = [hw.aligned(b.size) // self.align for b in inst.buffers]
        self.reach = reach(inst)
        self._add_groups()

        self.outs: dict[int, _Out] = {}
        self.reads: dict[int, _Read] = {}
        self.copies: list[tuple[Any, int, int]] = []  # (literal, first, last) copy intervals
        boxes: list[tuple[int, Any, Any, Any]] = []  # (buffer, start, end_incl, presence)
        for x in inst.tensors:
            self._add_tensor(x, boxes)
        self._add_copy_channel()
        # rule 2: boxes time x address, one box per step for groups that may self-overlap
        self._add_no_overlap(boxes, cumulative)
        self._add_objective()

    # --------------------------------------------------------- groups and chains

    def _add_groups(self) -> None:
        """Per alias group ``g``: ``fast[g]`` (in fast memory) and ``k[g]``, its offset in
        alignment units (0 when slow); a group that cannot be fast is fixed slow."""
        m = self.model
        groups: dict[int, list[int]] = defaultdict(list)  # by Instance.group_ids
        for b, g in enumerate(self.inst.group_ids):
            groups[g].append(b)
        self.groups = groups
        self.fast: dict[int, Any] = {}
        self.k: dict[int, Any] = {}
        for g, members in groups.items():
            zmax = max(self.zu[b] for b in members)
            ok = zmax <= self.capu and all(self.reach.feasible[b] for b in members)
            self.fast[g] = m.new_bool_var(f"fast_g{g}")
            if not ok:
                m.add(self.fast[g] == 0)
            self.k[g] = m.new_int_var(0, max(0, self.capu - zmax) if ok else 0, f"k_g{g}")
            m.add(self.k[g] == 0).only_enforce_if(~self.fast[g])
        self.gof = list(self.inst.group_ids)

    def _fast_b(self, b: int) -> Any:
        """The literal of buffer ``b``'s group being in fast memory."""
        return self.fast[self.gof[b]]

    def _add_tensor(self, x: Tensor, boxes: list[tuple[int, Any, Any, Any]]) -> None:
        """Tensor ``x``: its output's actions and memory end, then its reads in time order,
        each copied in or attached to a chain (the output, or an earlier Copy read)."""
        out = None
        # chain extents before the next read: key -> (expr, lo, hi)
        extent: dict[Any, tuple[Any, int, int]] = {}
        o = int(self.reach.output[x.id])
        if o >= 0:
            out, m_hi = self._add_output(x, o, boxes)
            extent["out"] = (out.m, out.tau, m_hi)
        for b in self.reach.reads[x.id]:
            rd = self._add_read(x, b, out, extent, boxes)
            self._advance_extents(rd, extent)
            if rd.s is not None:
                extent[b] = (rd.tau, rd.tau, rd.tau)
            self.reads[b] = rd

    def _add_output(
        self, x: Tensor, o: int, boxes: list[tuple[int, Any, Any, Any]]
    ) -> tuple[_Out, int]:
        """Output buffer ``o`` of ``x``: NoCopy or Copy when fast, its memory end (step) and
        box; returns it and the memory end's upper bound (step)."""
        m = self.model
        buf = self.inst.buffers[o]
        tau = buf.instruction
        e_min = copy_out_end(self.supply, tau, buf.demand_s)
        out = _Out(o, tau, e_min)
        out.nc = m.new_bool_var(f"nc_{o}")
        out.cp = m.new_bool_var(f"cp_{o}")
        m.add(out.nc + out.cp == self._fast_b(o))
        if x.live_out:
            m.add(out.nc == 0)
        if e_min is None:
            m.add(out.cp == 0)
        m_hi = max(x.last_use_time, e_min if e_min is not None else tau)
        out.m = m.new_int_var(tau, m_hi, f"m_{o}")
        m.add(out.m == x.last_use_time).only_enforce_if(out.nc)
        if e_min is not None:
            m.add(out.m >= e_min).only_enforce_if(out.cp)
            if buf.demand_s > 0:
                self.copies.append((out.cp, tau + 1, e_min))
        m.add(out.m == tau).only_enforce_if(~self._fast_b(o))
        boxes.append((o, tau, out.m, self._fast_b(o)))
        self.outs[o] = out
        return out, m_hi

    def _add_read(
        self,
        x: Tensor,
        b: int,
        out: _Out | None,
        extent: dict[Any, tuple[Any, int, int]],
        boxes: list[tuple[int, Any, Any, Any]],
    ) -> _Read:
        """Read buffer ``b`` of ``x``: copied in (latest start), or attached to one of the
        chains in ``extent``, or slow; its box starts where the copy or the extension does."""
        m = self.model
        buf = self.inst.buffers[b]
        tau = buf.instruction
        s = copy_in_start(self.supply, tau, buf.demand_s, x.def_time + 1)
        rd = _Read(b, tau, s)
        if s is not None:
            rd.cp = m.new_bool_var(f"cp_{b}")
            if out is not None:
                m.add_implication(rd.cp, ~out.nc)
            if buf.demand_s > 0:
                self.copies.append((rd.cp, s, tau - 1))
        else:
            rd.cp = 0
        rd.st = m.new_int_var(x.def_time + 1, tau + 1, f"st_{b}")
        rd.bp = m.new_bool_var(f"bp_{b}")
        parts = [rd.cp] if s is not None else []
        for key, (ext_expr, lo, hi) in list(extent.items()):
            e = self._attach(rd, key, ext_expr, lo, hi, out)
            if e is not None:
                parts.append(e)
        m.add(sum(parts) == rd.bp) if parts else m.add(rd.bp == 0)
        m.add((rd.cp if s is not None else 0) + sum(rd.att.values()) == self._fast_b(b))
        if s is not None:
            m.add(rd.st == s).only_enforce_if(rd.cp)
        m.add(rd.st == tau + 1).only_enforce_if(~rd.bp)
        if out is not None:
            m.add_implication(out.nc, self._fast_b(b))
        boxes.append((b, rd.st, tau, rd.bp))
        return rd

    def _attach(
        self, rd: _Read, key: Any, ext_expr: Any, lo: int, hi: int, out: _Out | None
    ) -> Any:
        """The literal of read ``rd`` joining chain ``key`` (``"out"`` or a Copy read's
        buffer) whose extent ``ext_expr`` (a step in ``[lo, hi]``) it may extend to its
        step; returns the literal of that extension ``[E + 1, tau]``, ``None`` if it cannot
        happen."""
        m, gof, b, tau = self.model, self.gof, rd.buffer, rd.tau
        a = m.new_bool_var(f"att_{b}_{key}")
        rd.att[key] = a
        if key == "out":
            assert out is not None
            src_group = gof[out.buffer]
            m.add_implication(a, self._fast_b(out.buffer))
        else:
            src_group = gof[key]
            m.add_implication(a, self.reads[key].cp)
        if src_group != gof[b]:
            m.add(self.k[gof[b]] == self.k[src_group]).only_enforce_if(a)
        # extension: [E + 1, tau] when E < tau
        if hi < tau:
            lt: Any = True
        elif lo >= tau:
            return None
        else:
            lt = m.new_bool_var(f"lt_{b}_{key}")
            m.add(ext_expr <= tau - 1).only_enforce_if(lt)
            m.add(ext_expr >= tau).only_enforce_if(~lt)
        e = a if lt is True else m.new_bool_var(f"ext_{b}_{key}")
        if lt is not True:
            m.add_bool_and([a, lt]).only_enforce_if(e)
            m.add_bool_or([~a, ~lt, e])
        rd.ext[key] = e
        m.add(rd.st == ext_expr + 1).only_enforce_if(e)
        return e

    def _advance_extents(self, rd: _Read, extent: dict[Any, tuple[Any, int, int]]) -> None:
        """Move the extents of the chains ``rd`` may join past its step (where it joins)."""
        m, b, tau = self.model, rd.buffer, rd.tau
        for key, a in rd.att.items():
            ext_expr, lo, hi = extent[key]
            if key == "out":
                new_hi = max(hi, tau)
                nxt = m.new_int_var(lo, new_hi, f"E_out_{b}")
                mx = m.new_int_var(max(lo, tau), new_hi, f"Emax_out_{b}")
                m.add_max_equality(mx, [ext_expr, tau])
                m.add(nxt == mx).only_enforce_if(a)
                m.add(nxt == ext_expr).only_enforce_if(~a)
                extent[key] = (nxt, lo, new_hi)
            else:
                nxt = m.new_int_var(lo, tau, f"E_{key}_{b}")
                m.add(nxt == tau).only_enforce_if(a)
                m.add(nxt == ext_expr).only_enforce_if(~a)
                extent[key] = (nxt, lo, tau)

    def _add_copy_channel(self) -> None:
        """Rule 5: at most one chosen copy interval holds each pair of steps."""
        per_pair: dict[int, list[Any]] = defaultdict(list)
        for lit, first, last in self.copies:
            for p in range(first, last):
                per_pair[p].append(lit)
        for lits in per_pair.values():
            if len(lits) > 1:
                self.model.add_at_most_one(lits)

    # -------------------------------------------------------------------- rule 2

    def _potential_range(self, b: int) -> tuple[int, int]:
        e_min = self.outs[b].e_min if self.inst.buffers[b].is_output else None
        return potential_range(self.inst, b, e_min)

    def _reify_le(self, expr: Any, c: int, name: str) -> Any:
        """A literal for ``expr <= c`` (a Python bool when ``expr`` is a constant)."""
        if isinstance(expr, int):
            return expr <= c
        m = self.model
        lit = m.new_bool_var(name)
        m.add(expr <= c).only_enforce_if(lit)
        m.add(expr >= c + 1).only_enforce_if(~lit)
        return lit

    def _conj(self, lits: list[Any], name: str) -> Any:
        """A literal for the conjunction of ``lits`` (Python bools allowed)."""
        if any(lit is False for lit in lits):
            return False
        lits = [lit for lit in lits if lit is not True]
        if not lits:
            return True
        if len(lits) == 1:
            return lits[0]
        m = self.model
        c = m.new_bool_var(name)
        m.add_bool_and(lits).only_enforce_if(c)
        m.add_bool_or([~lit for lit in lits] + [c])
        return c

    def _add_no_overlap(self, boxes: list[tuple[int, Any, Any, Any]], cumulative: bool) -> None:
        """Rule 2. Boxes of different alias groups must not meet; boxes of one group may.
        Where two members of a group could both hold a step (their potential time
        ranges meet), the group's boxes are cut: each member keeps its parts before and
        after the hull ``[c0, c1]`` of such steps, and inside the hull the group has one
        box per step, its union (as tall as its tallest member there)."""
        m = self.model
        by_group: dict[int, list[tuple[int, Any, Any, Any]]] = defaultdict(list)
        for box in boxes:
            if self.zu[box[0]] > 0:
                by_group[self.gof[box[0]]].append(box)
        rects = _Rects()
        for g, members in by_group.items():
            self._add_group_boxes(rects, g, members)
        if rects.xs:
            m.add_no_overlap_2d(rects.xs, rects.ys)
            if cumulative:
                m.add_cumulative(rects.xs, rects.demands, self.capu)

    def _add_box(
        self, rects: _Rects, g: int, start: Any, end: Any, present: Any, height: Any, name: str
    ) -> None:
        """Box ``[start, end]`` (inclusive steps) x ``[k_g, k_g + height)`` (alignment
        units), present where ``present`` holds."""
        m = self.model
        if present is False:
            return
        if present is True:
            present = m.new_constant(1)
        size = end + 1 - start
        rects.xs.append(m.new_optional_interval_var(start, size, end + 1, present, f"x_{name}"))
        # y optional with the same literal: CP-SAT (9.12-9.15) wrongly proves
        # infeasibility with optional x and mandatory y intervals
        if isinstance(height, int):
            top: Any = self.k[g] + height
        else:
            top = m.new_int_var(0, self.capu, f"top_{name}")
            m.add(top == self.k[g] + height)
        rects.ys.append(m.new_optional_interval_var(self.k[g], height, top, present, f"y_{name}"))
        rects.demands.append(height)

    def _add_group_boxes(
        self, rects: _Rects, g: int, members: list[tuple[int, Any, Any, Any]]
    ) -> None:
        """Group ``g``'s boxes: each member's own, or, where two members could hold one
        step, cut at the hull of such steps with one box per step inside it."""
        ranges = {b: self._potential_range(b) for b, *_ in members}
        hull = contested_hull(list(ranges.values()))
        if hull is None:
            for b, start, end, present in members:
                self._add_box(rects, g, start, end, present, self.zu[b], str(b))
            return
        c0, c1 = hull
        per_step: dict[int, list[tuple[Any, int]]] = defaultdict(list)
        for member in members:
            self._cut_member(rects, g, member, ranges[member[0]], (c0, c1), per_step)
        for t, covs in sorted(per_step.items()):
            self._add_step_box(rects, g, t, covs)

    def _cut_member(
        self,
        rects: _Rects,
        g: int,
        member: tuple[int, Any, Any, Any],
        potential: tuple[int, int],
        hull: tuple[int, int],
        per_step: dict[int, list[tuple[Any, int]]],
    ) -> None:
        """Member box ``(b, start, end, present)`` of group ``g``, of ``potential`` steps,
        cut at the ``hull`` of contested steps: its parts before and after the hull are
        boxes; for each step inside, the literal of ``b`` holding it and ``b``'s height go
        to ``per_step``."""
        m = self.model
        b, start, end, present = member
        r0, r1 = potential
        c0, c1 = hull
        z = self.zu[b]
        is_out = self.inst.buffers[b].is_output  # outputs: fixed start; reads: fixed end
        if r1 < c0 or r0 > c1:
            self._add_box(rects, g, start, end, present, z, str(b))
            return
        if r0 < c0:  # the part before the hull
            if is_out:
                left_end = m.new_int_var(start, c0 - 1, f"lend_{b}")
                m.add_min_equality(left_end, [end, c0 - 1])
                self._add_box(rects, g, start, left_end, present, z, f"{b}L")
            else:
                lit = self._conj([present, self._reify_le(start, c0 - 1, f"le_{b}_L")], f"pl_{b}")
                self._add_box(rects, g, start, c0 - 1, lit, z, f"{b}L")
        if r1 > c1:  # the part after the hull
            if is_out:
                lit = self._conj([present, _neg(self._reify_le(end, c1, f"le_{b}_R"))], f"pr_{b}")
                self._add_box(rects, g, c1 + 1, end, lit, z, f"{b}R")
            else:
                right_start = m.new_int_var(c1 + 1, end + 1, f"rstart_{b}")
                m.add_max_equality(right_start, [start, c1 + 1])
                self._add_box(rects, g, right_start, end, present, z, f"{b}R")
        for t in range(max(r0, c0), min(r1, c1) + 1):
            if is_out:
                inside = _neg(self._reify_le(end, t - 1, f"in_{b}_{t}"))
            else:
                inside = self._reify_le(start, t, f"in_{b}_{t}")
            cov = self._conj([present, inside], f"cov_{b}_{t}")
            if cov is not False:
                per_step[t].append((cov, z))

    def _add_step_box(self, rects: _Rects, g: int, t: int, covs: list[tuple[Any, int]]) -> None:
        """Group ``g``'s box at contested step ``t``: present where a member holds the step
        (``covs``: its literal and height, alignment units), as tall as the tallest such."""
        m = self.model
        lits = [c for c, _ in covs]
        if any(c is True for c in lits):
            occ: Any = True
        elif len(lits) == 1:
            occ = lits[0]
        else:
            occ = m.new_bool_var(f"occ_{g}_{t}")
            m.add_max_equality(occ, lits)
        sizes = {z for _, z in covs}
        if len(sizes) == 1:
            h: Any = sizes.pop()
        else:
            h = m.new_int_var(0, max(sizes), f"h_{g}_{t}")
            m.add_max_equality(h, [z * c if c is not True else z for c, z in covs])
        self._add_box(rects, g, t, t, occ, h, f"g{g}_{t}")

    # ------------------------------------------------------------------ objective

    def _add_objective(self) -> None:
        """The objective (docs/exact-model.md, Objective and Scaling): each instruction's
        term (:func:`_scale_terms`), in integer units of ``trivial / units_per_trivial``
        seconds. ``units_per_trivial`` is ``max(W, 1) / SCALE_EPS`` (``W`` the rounding
        weight), lowered where the terms would span more than :data:`OBJECTIVE_SPAN` units
        (huge counts): ``objective_span`` is the span used."""
        m = self.model
        inst = self.inst
        terms = instruction_gains(inst)
        self.trivial = trivial_bound(inst, self.reach)
        weight = sum(t.count * (len(inst.instructions[t.t].buffers) + 2) for t in terms)
        # integer units per trivial bound: one unit is SCALE_EPS * trivial / weight seconds
        self.units_per_trivial = max(weight, 1) / SCALE_EPS
        self.objective_span = 0
        if not self.trivial > 0:
            m.maximize(0)
            return
        feasible = self.reach.feasible
        units = self.units_per_trivial
        scaled = _scale_terms(inst, terms, feasible, self.trivial, units)
        span = _span(scaled)
        for _ in range(8):
            # CP-SAT holds the objective and its bound in doubles too: past 2**53 units they
            # round, and its bound (even an OPTIMAL) can be false. Fewer units per trivial
            # bound only coarsen the rounding up, which keeps the bound valid.
            if span <= OBJECTIVE_SPAN:
                break
            units *= 0.5 * OBJECTIVE_SPAN / span
            scaled = _scale_terms(inst, terms, feasible, self.trivial, units)
            span = _span(scaled)
        self.units_per_trivial, self.objective_span = units, span
        objective = []
        for term in scaled:
            if term.vals:
                k = len(term.varied)
                idx = m.new_int_var(0, (1 << k) - 1, f"mask_{term.t}")
                m.add(
                    idx == sum((1 << i) * self.fast[self.gof[b]] for i, b in enumerate(term.varied))
                )
                r = m.new_int_var(term.lo, term.hi, f"r_{term.t}")
                m.add_element(idx, list(term.vals), r)
            else:
                r = m.new_int_var(term.lo, term.hi, f"r_{term.t}")
                # r = min(a, ...) exactly: a free r below both let CP-SAT's search raise
                # the objective a unit per solution (10 s, no proof, on 10 buffers)
                m.add_min_equality(
                    r, [term.a, term.bb + sum(c * self.fast[self.gof[b]] for c, b in term.coefs)]
                )
            objective.append(term.count * r)
        m.maximize(sum(objective))

    def seconds(self, value: float) -> float:
        """A scaled objective value in seconds."""
        return value / self.units_per_trivial * self.trivial

    # ----------------------------------------------------------------- extraction

    def allocations(self, value: Callable[[Any], int]) -> list[Allocation]:
        """The mapping of a (partial) assignment read through ``value``."""
        inst = self.inst
        out: list[Allocation] = []
        fast_g = {g: bool(value(v)) for g, v in self.fast.items()}
        for b in inst.buffers:
            g = self.gof[b.id]
            if not fast_g[g]:
                continue
            offset = int(value(self.k[g])) * self.align
            if b.is_output:
                o = self.outs[b.id]
                x = inst.tensors[b.tensor_id]
                if value(o.nc):
                    out.append(Allocation(b.id, "NoCopy", offset, o.tau, x.last_use_time, None))
                else:
                    end = int(value(o.m))
                    assert o.e_min is not None  # no Copy out without a copy-out end (cp == 0)
                    copy = (o.tau + 1, o.e_min) if b.demand_s > 0 else None
                    out.append(Allocation(b.id, "Copy", offset, o.tau, end, copy))
            else:
                rd = self.reads[b.id]
                if rd.s is not None and value(rd.cp):
                    copy = (rd.s, rd.tau - 1) if b.demand_s > 0 else None
                    out.append(Allocation(b.id, "Copy", offset, rd.s, rd.tau, copy))
                elif value(rd.bp):
                    out.append(Allocation(b.id, "NoCopy", offset, int(value(rd.st)), rd.tau, None))
                else:
                    out.append(Allocation(b.id, "NoCopy", offset, None, None, None))
        return out

    def complete_hint(self, seconds: float | None, deterministic_s: float | None = None) -> bool:
        """Turn the partial hint into a complete one: solve with the hinted variables
        fixed (cheap: the rest follows by propagation) and hint every variable; a
        complete feasible hint is CP-SAT's first solution. Keeps the partial hint
        if that fails, or if it takes longer than ``seconds`` of wall clock or
        ``deterministic_s`` of CP-SAT's deterministic time (the limit that makes a work
        budget's answer the same on any machine)."""
        from ortools.sat.python import cp_model

        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.fix_variables_to_their_hinted_value = True
        if seconds is not None:
            solver.parameters.max_time_in_seconds = seconds
        if deterministic_s is not None:
            solver.parameters.max_deterministic_time = deterministic_s
        solver.parameters.stop_after_first_solution = True
        status = solver.solve(self.model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return False
        m = self.model
        variables = [m.get_int_var_from_proto_index(k) for k in range(len(m.proto.variables))]
        values = [solver.value(v) for v in variables]
        m.clear_hints()
        for v, x in zip(variables, values):
            m.add_hint(v, x)
        return True

    def add_hint(self, allocations: list[Allocation]) -> None:
        """Hint the model with a game mapping (the canonical form of docs/exact-model.md):
        group fast/offsets, output and operand actions, and each NoCopy read's chain."""
        inst = self.inst
        m = self.model
        by_buffer = {a.buffer: a for a in allocations}
        for g, members in self.groups.items():
            fast = [by_buffer[b] for b in members if b in by_buffer]
            m.add_hint(self.fast[g], bool(fast))
            m.add_hint(self.k[g], fast[0].offset // self.align if fast else 0)
        # per tensor: (end, decision order, chain) of its non-empty allocations so far
        held: dict[int, list[tuple[int, int, Any]]] = defaultdict(list)
        for b in inst.buffers:
            a = by_buffer.get(b.id)
            if b.is_output:
                o = self.outs[b.id]
                m.add_hint(o.nc, a is not None and a.action == "NoCopy")
                m.add_hint(o.cp, a is not None and a.action == "Copy")
                x = inst.tensors[b.tensor_id]
                if a is None:
                    m.add_hint(o.m, o.tau)
                    continue
                assert a.end is not None  # an output's allocation starts at its definition
                if a.action == "NoCopy":
                    end = x.last_use_time
                else:
                    e_min = o.e_min if o.e_min is not None else o.tau
                    end = max(e_min, min(a.end, max(e_min, x.last_use_time)))
                m.add_hint(o.m, end)
                held[b.tensor_id].append((a.end, b.id, "out"))  # the game's end picks chains
                continue
            rd = self.reads[b.id]
            chain = None
            if a is not None and a.action == "NoCopy" and held[b.tensor_id]:
                end, _, chain = max(held[b.tensor_id], key=lambda item: (item[0], -item[1]))
                if end < rd.tau:
                    held[b.tensor_id].append((rd.tau, b.id, chain))
            if rd.s is not None:
                copy = a is not None and a.action == "Copy"
                m.add_hint(rd.cp, copy)
                if copy:
                    held[b.tensor_id].append((rd.tau, b.id, b.id))
            for key, lit in rd.att.items():
                m.add_hint(lit, key == chain)


@dataclass(frozen=True)
class _ScaledTerm:
    """One instruction's term of the objective, integer units per execution: ``r`` in
    ``[lo, hi]``, counted ``count`` times. Roofline: ``r = min(a, bb + sum_b c [b fast])``
    (``coefs``: pairs ``(c, b)``); table (``vals`` not empty): ``r = vals[mask]`` over the
    fast ``varied`` buffers."""

    t: int
    count: int
    lo: int
    hi: int
    a: int = 0
    bb: int = 0
    coefs: tuple[tuple[int, int], ...] = ()
    varied: tuple[int, ...] = ()
    vals: tuple[int, ...] = ()


def _scale_terms(
    inst: Instance,
    terms: list[RooflineTerm | TableTerm],
    feasible: np.ndarray,
    trivial: float,
    units: float,
) -> list[_ScaledTerm]:
    """The objective's terms at ``units`` integer units per ``trivial`` seconds (> 0),
    every value rounded up (so the scaled objective bounds the reward) and clamped.

    Left out: terms whose float value is 0 for every mapping (their exact value is at most
    their instruction's :func:`~mallocgame.solvers.bound.rounding_margin`, which the bound
    adds) and buffers that cannot be fast. Losses below ``-floor`` are raised to ``-floor``
    (a mapping with such a loss scores below 0, worse than dropping everything, and
    raising a value keeps the bound valid)."""
    cap = 4.0 * units + 4.0  # no value that matters exceeds this

    def up(v: float, count: int = 1, limit: float | None = None) -> int:
        # One execution's value; ``count`` of them make at most ``cap`` units, so that
        # count * r stays inside int64 for CP-SAT (counts reach 2**31 - 1).
        q = (v / trivial) * units
        limit = cap / count if limit is None else limit
        q = min(max(q, -limit), limit)  # also tames overflow for tiny (subnormal) bounds
        return math.ceil(q + abs(q) * 1e-12)

    total_floor = 2 * (up(trivial) + 1)
    out: list[_ScaledTerm] = []
    for term in terms:
        bufs = inst.instructions[term.t].buffers
        floor = -(-total_floor // term.count)  # count * floor units of loss: below 0
        if isinstance(term, RooflineTerm):
            if term.a <= 0 and all(d >= 0 for d in term.deltas):
                continue  # min(0, B + D) with B, D >= 0: 0 for every mapping
            pos = sum(d for b, d in zip(bufs, term.deltas) if feasible[b] and d > 0)
            a, bb = up(min(term.a, term.b + pos), term.count), up(term.b, term.count)
            coefs = [
                (max(up(d, term.count), -floor), b)
                for b, d in zip(bufs, term.deltas)
                if feasible[b] and d != 0
            ]
            neg = sum(c for c, _ in coefs if c < 0)
            if neg < 0:  # fast memory slower than slow (SPEC allows it): B clamped to the
                # count's share of ``cap`` would make min(A, B + ...) fall below the
                # true gain; clamped instead at A - neg, past which the min is A for every
                # mapping, it stays exact
                bb = up(term.b, term.count, limit=a - neg)
            lo = max(min(a, bb + neg), -floor * (len(coefs) + 1))
            out.append(_ScaledTerm(term.t, term.count, min(lo, a), a, a, bb, tuple(coefs)))
        else:
            blocked = sum(1 << i for i, b in enumerate(term.varied) if not feasible[b])
            vals = tuple(
                0 if mask & blocked else max(up(g, term.count), -floor)
                for mask, g in enumerate(term.gains)
            )
            if max(vals) <= 0 and min(vals) >= 0:
                continue
            out.append(
                _ScaledTerm(term.t, term.count, min(vals), max(vals), varied=term.varied, vals=vals)
            )
    return out


def _span(terms: list[_ScaledTerm]) -> int:
    """The most units any partial sum of the objective's terms can reach in magnitude."""
    return sum(t.count * max(-t.lo, t.hi) for t in terms)


# ------------------------------------------------------------------------ the solver


def potential_range(inst: Instance, b: int, e_min: int | None) -> tuple[int, int]:
    """The steps buffer ``b`` may hold fast memory over (rule 2), inclusive: an output's
    from its instruction to its tensor's last use or its copy-out's end ``e_min``
    (:func:`copy_out_end`, ``None`` where none), an operand's from its tensor's definition
    on to its instruction."""
    buf = inst.buffers[b]
    x = inst.tensors[buf.tensor_id]
    if buf.is_output:
        return buf.instruction, max(x.last_use_time, e_min if e_min is not None else 0)
    return x.def_time + 1, buf.instruction


def contested_hull(ranges: Sequence[tuple[int, int]]) -> tuple[int, int] | None:
    """The first and the last step that two of the inclusive step ``ranges`` share
    (``None`` where no two meet): the first start that falls inside an earlier-starting
    range, and the last end that falls inside a later-ending one."""
    first = None
    last_end = -1
    for r0, r1 in sorted(ranges):
        if r0 <= last_end:
            first = r0
            break
        last_end = max(last_end, r1)
    if first is None:
        return None
    first_start = max((r1 for _, r1 in ranges), default=0) + 1
    for r0, r1 in sorted(ranges, key=lambda r: -r[1]):
        if r1 >= first_start:
            return first, r1
        first_start = min(first_start, r0)
    raise AssertionError("two ranges meet, so one ends inside a later-ending one")


def build_seconds(inst: Instance) -> float:
    """About how long building ``inst``'s model takes (seconds; a calibration, no timing):
    :data:`BUILD_S_PER_BUFFER` per buffer and :data:`BUILD_S_PER_CELL` per cell of
    :func:`group_step_cells`."""
    return BUILD_S_PER_BUFFER * inst.num_buffers + BUILD_S_PER_CELL * group_step_cells(inst)


def group_step_cells(inst: Instance) -> int:
    """The per-step parts of the model's cut alias groups (``MappingModel._add_no_overlap``),
    which its build makes one at a time beside each buffer's box: for each group two of
    whose members (of non-zero size) could hold one step, one per step of the hull of such
    steps and one per member per hull step its potential time range covers."""
    hw = inst.hardware
    groups: dict[int, list[Buffer]] = defaultdict(list)
    for b, g in zip(inst.buffers, inst.group_ids):
        if hw.aligned(b.size) > 0:
            groups[g].append(b)
    supply = np.array([ins.supply_s for ins in inst.instructions], dtype=np.float64)
    cells = 0
    for members in groups.values():
        if len(members) < 2:
            continue
        ranges = [
            potential_range(
                inst, b.id, copy_out_end(supply, b.instruction, b.demand_s) if b.is_output else None
            )
            for b in members
        ]
        hull = contested_hull(ranges)
        if hull is None:
            continue
        c0, c1 = hull
        cells += c1 + 1 - c0
        cells += sum(max(0, min(r1, c1) + 1 - max(r0, c0)) for r0, r1 in ranges)
    return cells


def warm_start(
    instance: Instance, seconds: float | None, seed: int, *, max_moves: int | None = None
) -> tuple[float, list[Allocation], dict[str, Any]]:
    """A quick game mapping to hint CP-SAT with (and to fall back on).

    Plays one random game, two greedy policies (prefer NoCopy, prefer Copy; Drop
    buffers with no benefit) and then more random games, all with Drop-backup, until
    ``seconds`` are spent (the first three games unless the deadline has passed; none
    starts after it). Past the deadline, or past ``max_moves`` moves in one game
    (default 4 per buffer), a game is finished by preferring Drop, which completes it
    quickly. Returns the best game's ``(reward_s, allocations,
    info)``; without ``seconds`` only the first three games are played (reproducible).
    """

    from mallocgame.game.backup import DropBackup
    from mallocgame.game.state import COPY, DROP, NOCOPY, Game
    from mallocgame.solvers.random import UniformPolicy

    clock = Stopwatch(seconds)
    benefit = [b.benefit_s > 0 for b in instance.buffers]
    cap = max_moves if max_moves is not None else 4 * max(instance.num_buffers, 1)

    def greedy(order: tuple[int, ...]) -> Callable[[Game, np.ndarray], int]:
        def policy(game: Game, allowed: np.ndarray) -> int:
            if not benefit[game.current_buffer] and allowed[DROP]:
                return DROP
            return next(a for a in order if allowed[a])

        return policy

    def play(game: Game, policy: Callable[[Game, np.ndarray], int]) -> int:
        game.reset()
        driver = DropBackup(game)
        moves = 0
        while not game.complete:
            allowed = driver.allowed()
            if moves >= cap or (seconds is not None and clock.expired()):
                action = DROP if allowed[DROP] else int(np.flatnonzero(allowed)[0])
            else:
                action = policy(game, allowed)
            driver.step(action)
            moves += 1
        return driver.backups

    game = Game(instance)
    best: tuple[float, list[Allocation]] = (0.0, [])
    source = "drop"
    random_policy = UniformPolicy(np.random.default_rng(seed))
    policies: list[tuple[str, Any]] = [
        ("random", random_policy),  # cheap even on large programs: a first answer
        ("greedy-nocopy", greedy((NOCOPY, COPY, DROP))),
        ("greedy-copy", greedy((COPY, NOCOPY, DROP))),
    ]
    games = 0
    while games < len(policies) or (seconds is not None and not clock.expired()):
        if seconds is not None and clock.expired():
            break  # a game past the deadline is forced to Drop: it would gain next to nothing
        name, policy = policies[games] if games < len(policies) else ("random", random_policy)
        play(game, policy)
        games += 1
        if game.return_s > best[0]:
            best = (float(game.return_s), game.allocations())
            source = name
    # the game's return is a float sum of gains, which can be off by more than SPEC section 7's
    # relative 1e-9 where latencies of very different magnitudes cancel; the answer's is exact
    reward = mapping_reward(instance, (a.buffer for a in best[1])) if best[1] else 0.0
    return reward, best[1], {"games": games, "source": source, "reward_s": reward}


def _heuristic_mapping(instance: Instance, seed: int) -> tuple[float, list[Allocation]] | None:
    """The XLA-like heuristic's mapping (``None`` where this build has none, or it fails)."""
    try:
        from mallocgame.solvers.heuristic import HeuristicSolver
    except ImportError:
        return None
    try:
        solution = HeuristicSolver().solve(instance, SolveRequest(seed=seed))
    except ArithmeticError:
        # A warm start only: the heuristic's float arithmetic and the float of its exact
        # reward can only fail (ZeroDivisionError, OverflowError) on an instance outside
        # SPEC's ranges, where the exact solver goes on without it.
        return None
    return solution.reward_s, list(solution.allocations)


def _deterministic_time(solver: CpSolver) -> float:
    """CP-SAT's deterministic time of the last solve (an attribute since 9.15)."""
    value = getattr(solver, "deterministic_time", None)
    if value is None:
        value = solver.response_proto.deterministic_time
    return float(value() if callable(value) else value)


@functools.cache
def _recorder_class() -> type:
    """The class of :func:`_recorder`'s callbacks (a CP-SAT class: defined on first use,
    so that importing this module does not import OR-Tools)."""
    from ortools.sat.python import cp_model

    class _Recorder(cp_model.CpSolverSolutionCallback):
        """Keeps every solution that improves the true reward; reports it if asked."""

        def __init__(self, on_solution: Callable[[Any], None]) -> None:
            super().__init__()
            self._on_solution = on_solution

        def on_solution_callback(self) -> None:
            self._on_solution(self)

    return _Recorder


def _recorder(on_solution: Callable[[Any], None]) -> Any:
    """A CP-SAT solution callback that calls ``on_solution(callback)`` on each solution."""
    return _recorder_class()(on_solution)


class ExactSolver(Solver, name="exact", work_unit="dtime_ms", config=ExactConfig):
    """CP-SAT over the mapping model; optimal or the best found within the budget."""

    def check_budget(self, config: ExactConfig, seconds: float | None, work: int | None) -> None:
        """A work budget alone promises an answer that follows from the seed: one worker,
        and the warm start's three games (no ``warm_start_s``: it times games by the clock)."""
        if work is None or seconds is not None:
            return
        if config.workers > 1:
            raise SolverError(
                f"exact: workers={config.workers} with a work budget alone: CP-SAT's workers "
                "race, so the answer would not follow from the seed; give workers=1, or a "
                "budget in seconds"
            )
        if config.warm_start_s:  # (0: no games, nothing timed)
            raise SolverError(
                f"exact: warm_start_s={config.warm_start_s!r} with a work budget alone: the "
                "warm start would play games for that many seconds of wall clock, so the "
                "answer would depend on the machine's speed; leave warm_start_s out (three "
                "games), or give a budget in seconds"
            )

    def search(self, instance: Instance, cfg: ExactConfig, run: Run) -> Solution:
        ex = _ExactRun(instance, cfg, run)
        # Building the model costs about build_seconds (Python); skip CP-SAT when that
        # would not leave it time to search (the warm start stands).
        use_model = ex.model_fits()
        ex.add_warm_starts(use_model)
        if not use_model:
            return self._without_model(ex, "budget too small to build the CP-SAT model")
        model = MappingModel(instance, cumulative=cfg.cumulative)
        invalid = model.model.validate().strip()
        if invalid:  # e.g. an integer overflow in AddNoOverlap2D's areas (huge sizes, long)
            why = invalid.splitlines()[0].removesuffix("{").strip()
            return self._without_model(ex, f"CP-SAT refused the model ({why})", ex.clock.elapsed)
        return ex.solve_model(model)

    def _without_model(self, ex: _ExactRun, why: str, build_s: float = 0.0) -> Solution:
        """The answer when the model is not searched (``why``, for the note: the budget is
        too small to build it, or CP-SAT refuses it; ``build_s`` the seconds it took when
        built): the best warm start that passes the physical check and gains
        (:meth:`_ExactRun.choose`), its ``source`` the one it came from (``heuristic`` or
        ``game``), else dropping every buffer (``drop``)."""
        chosen: dict[str, Any] = {}
        allocs, reward = ex.choose(chosen)
        source = chosen["source"]
        info = {
            "status": "NOT_RUN",
            "note": f"{why}; the best warm start returned ({source})",
            "build_s": build_s,
            "upper_bound_s": ex.bound_info["bound_s"],
            "warm_start": ex.warm_info,
            "cp_bound_s": None,
            "source": source,
        }
        work = {"dtime_ms": 0, "branches": 0, "conflicts": 0}
        bound_s = ex.bound_info["bound_s"]
        return ex.run.mapping_answer(allocs, reward, work, bound_s=bound_s, info=info)


class _ExactRun:
    """State of one ``exact`` search: its budgets, the warm starts, and the improving
    mappings found (by their true reward, seconds)."""

    def __init__(self, instance: Instance, cfg: ExactConfig, run: Run) -> None:
        self.instance, self.cfg, self.run = instance, cfg, run
        self.request, self.clock = run.request, run.clock
        seconds = self.request.seconds
        if seconds is None and self.request.work is None:
            seconds = DEFAULT_SECONDS
        self.seconds = seconds  # the wall-clock budget, seconds (None: work budget only)
        # the LP bound where it takes at most a quarter of a wall-clock budget; else the
        # trivial one (valid too, and CP-SAT's own bound may tighten it)
        lp = seconds is None or seconds >= 4 * LP_S_PER_BUFFER * instance.num_buffers
        self.bound_info = bound_details(
            instance, lp=lp, time_limit=None if seconds is None else 0.25 * seconds
        )
        self.found: list[tuple[float, list[Allocation]]] = []  # improving mappings
        self.best = 0.0  # dropping everything gains 0: report only what beats it
        self.starts: list[tuple[float, list[Allocation], str]] = []  # (reward_s, mapping, source)
        self.warm_info: dict[str, Any] = {}

    @functools.cached_property
    def build_s(self) -> float:
        """The model's estimated build time (:func:`build_seconds`), three times over."""
        return 3 * build_seconds(self.instance)

    def improve(self, reward: float, allocs: list[Allocation], work: dict[str, int]) -> None:
        """Keep ``allocs`` (true reward ``reward``, seconds) if it beats the best so far, and
        report it to the request's callback if it passes the physical check."""
        if reward <= self.best:
            return
        self.best = reward
        self.found.append((reward, allocs))
        if self.request.callback is not None and not physical_check(self.instance, allocs):
            self.run.improve(self.run.mapping_answer(allocs, reward, work))

    def model_fits(self) -> bool:
        """Whether the wall-clock budget left covers building the model (:attr:`build_s`)
        with half a second to spare for CP-SAT."""
        seconds, clock = self.seconds, self.clock
        return (
            seconds is None or self.cfg.force_model or seconds - clock.elapsed >= self.build_s + 0.5
        )

    def add_warm_starts(self, use_model: bool) -> None:
        """Warm starts (hints for CP-SAT, and fallbacks): the XLA-like heuristic when this
        build has it and there is time, and a few game rollouts (the budget's share
        without the model)."""
        cfg, seconds, clock, instance = self.cfg, self.seconds, self.clock, self.instance
        if cfg.heuristic_start and (
            seconds is None or seconds - clock.elapsed > 3e-4 * instance.num_buffers + 0.2
        ):
            h = _heuristic_mapping(instance, self.request.seed)
            if h is not None:
                self.starts.append((h[0], h[1], "heuristic"))
                self.warm_info["heuristic_reward_s"] = h[0]
                self.improve(h[0], h[1], {"heuristic": 1})
        if cfg.warm_start or not use_model:
            share: float | None
            if not use_model:
                assert seconds is not None  # the model always fits without a clock
                share = max(0.0, 0.9 * (seconds - clock.elapsed) - 0.1)
            else:
                default = (
                    min(2.0, 0.05 * seconds, 0.002 * instance.num_buffers) if seconds else None
                )
                share = cfg.warm_start_s if cfg.warm_start_s is not None else default
                if seconds is not None and cfg.warm_start_s is not None:
                    # a wall-clock budget covers everything: the games get at most what it
                    # leaves after building the model and half a second of search
                    left = seconds - clock.elapsed - self.build_s
                    share = min(cfg.warm_start_s, max(0.0, left - 0.5))
            w_reward, w_allocs, info = warm_start(instance, share, self.request.seed)
            self.starts.append((w_reward, w_allocs, "game"))
            self.warm_info.update(
                games=info["games"], game_policy=info["source"], game_reward_s=info["reward_s"]
            )
            self.improve(w_reward, w_allocs, {"games": info["games"]})

    def hint(self, model: MappingModel) -> None:
        """Hint ``model`` with the best warm start whose hint completes (in at most a
        twentieth of a wall-clock budget; without one, in :data:`HINT_DETERMINISTIC_S` of
        deterministic time, so that a work budget's answer does not depend on the machine)."""
        seconds = self.seconds
        hint_limit = max(0.05, 0.05 * seconds) if seconds else None
        self.warm_info["hint"] = None
        for reward, allocs, source in sorted(self.starts, key=lambda item: -item[0]):
            if reward <= 0 or not allocs:
                continue
            model.model.clear_hints()
            model.add_hint(allocs)
            if model.complete_hint(hint_limit, None if seconds else HINT_DETERMINISTIC_S):
                self.warm_info["hint"] = source
                break

    def cp_solver(self) -> tuple[CpSolver, float]:
        """A CP-SAT solver set up for the budgets left, and the wall-clock margin (seconds)
        it leaves for the answer."""
        from ortools.sat.python import cp_model

        cfg, request, seconds = self.cfg, self.request, self.seconds
        solver = cp_model.CpSolver()
        params = solver.parameters
        params.num_workers = cfg.workers
        params.random_seed = int(request.seed) % 2**31  # CP-SAT's seed is a 32-bit int
        params.log_search_progress = cfg.log
        margin = 0.0
        if seconds is not None:
            margin = min(0.5, 0.05 * seconds) + 0.02
            left = max(0.05, seconds - self.clock.elapsed - margin)
            params.max_time_in_seconds = left
            # presolve probing can take most of a short budget on large models
            probe = min(1.0, max(0.01, left / 100))
            params.presolve_probing_deterministic_time_limit = probe
            params.probing_deterministic_time_limit = probe
        if request.work is not None:
            params.max_deterministic_time = request.work / 1000.0
        return solver, margin

    def solve_model(self, model: MappingModel) -> Solution:
        """Hint ``model`` (built, valid), solve it with CP-SAT, and answer with the best
        mapping that passes the physical check, CP-SAT's status and the bound (seconds)."""
        self.hint(model)
        build_s = self.clock.elapsed
        solver, margin = self.cp_solver()

        def on_solution(cb: Any) -> None:
            allocs = model.allocations(cb.value)
            work = {"branches": int(cb.num_branches), "conflicts": int(cb.num_conflicts)}
            self.improve(mapping_reward(self.instance, [a.buffer for a in allocs]), allocs, work)

        status, work, retries = self.search_with_retries(model, solver, margin, on_solution)
        extra: dict[str, Any] = {
            "status": solver.status_name(status),
            "build_s": build_s,
            "upper_bound_s": self.bound_info["bound_s"],
            "warm_start": self.warm_info,
        }
        if retries:
            extra["presolve_retries"] = retries
        self.cp_bound(model, solver, status, extra)
        if _found_solution(status):  # the final solution too
            allocs = model.allocations(solver.value)
            self.found.append((mapping_reward(self.instance, [a.buffer for a in allocs]), allocs))
        chosen, reward = self.choose(extra)
        bound_s = self.bound(reward, extra)
        return self.run.mapping_answer(chosen, reward, work, bound_s=bound_s, info=extra)

    def search_with_retries(
        self,
        model: MappingModel,
        solver: CpSolver,
        margin: float,
        on_solution: Callable[[Any], None],
    ) -> tuple[Any, dict[str, int], list[str]]:
        """CP-SAT's status, work (deterministic ms, branches, conflicts) and the retries
        made (as ``key=value`` strings) after an INFEASIBLE.

        Dropping every buffer satisfies the model, so INFEASIBLE is CP-SAT's error: its
        presolve (9.15) can cut every solution (docs/exact-model.md). Solve again with
        less presolve, in what is left of the budgets."""
        from ortools.sat.python import cp_model

        request, seconds, params = self.request, self.seconds, solver.parameters
        status = solver.solve(model.model, _recorder(on_solution))
        work = {
            "dtime_ms": int(round(_deterministic_time(solver) * 1000)),
            "branches": int(solver.num_branches),
            "conflicts": int(solver.num_conflicts),
        }
        retries: list[str] = []
        for retry in PRESOLVE_RETRIES:
            if status != cp_model.INFEASIBLE:
                break
            if seconds is not None:
                left = seconds - self.clock.elapsed - margin
                if left < 0.05:
                    break
                params.max_time_in_seconds = left
            if request.work is not None:
                left_work = request.work / 1000.0 - work["dtime_ms"] / 1000.0
                if left_work <= 0:
                    break
                params.max_deterministic_time = left_work
            for key, value in retry.items():
                setattr(params, key, value)
            retries.append(", ".join(f"{key}={value}" for key, value in retry.items()))
            status = solver.solve(model.model, _recorder(on_solution))
            work["dtime_ms"] += int(round(_deterministic_time(solver) * 1000))
            work["branches"] += int(solver.num_branches)
            work["conflicts"] += int(solver.num_conflicts)
        return status, work, retries

    def cp_bound(
        self, model: MappingModel, solver: CpSolver, status: Any, extra: dict[str, Any]
    ) -> None:
        """CP-SAT's bound in seconds into ``extra["cp_bound_s"]`` (``None`` without one),
        raised by the instance's :func:`~mallocgame.solvers.bound.rounding_margin` like the
        LP and trivial bounds: the model's terms are float64 values, which may fall short of
        the exact reward they stand for."""
        from ortools.sat.python import cp_model

        cp_bound = None
        if _found_solution(status):  # (UNKNOWN reports no bound)
            margin = rounding_margin(self.instance, model.reach)
            if model.trivial > 0:
                cp_bound = model.seconds(solver.best_objective_bound) * (1 + 1e-12) + margin
            elif status == cp_model.OPTIMAL:
                cp_bound = margin
        if cp_bound is not None and not math.isfinite(cp_bound):
            cp_bound = None
        if model.objective_span > OBJECTIVE_SPAN:  # its counts alone span more units
            # (hundreds of instructions run 2**31 - 1 times): CP-SAT's doubles round, so
            # neither its bound nor its proof of optimality stands
            if cp_bound is not None or extra["status"] == "OPTIMAL":
                _note(
                    extra,
                    f"the objective spans {model.objective_span} units, more than CP-SAT's "
                    "doubles hold exactly: its bound and proof are not used",
                )
            if extra["status"] == "OPTIMAL":
                extra["status"] = "FEASIBLE"
            cp_bound = None
        extra["cp_bound_s"] = cp_bound

    def bound(self, reward: float, extra: dict[str, Any]) -> float:
        """The answer's bound (seconds): the smaller of CP-SAT's and the LP bound, at least 0
        and never below ``reward``, the answer's.

        A safety net: where a mapping of the model (a CP-SAT solution or a game's) beats
        CP-SAT's bound, that bound is false; it is dropped (``extra["cp_bound_s"] = None``)
        and an OPTIMAL status becomes FEASIBLE. Where only the heuristic's mapping (which
        the model may not hold) beats it, ``bound_s`` is the LP bound. Both are noted in
        ``extra["note"]``."""
        cp_bound = extra["cp_bound_s"]
        if cp_bound is not None:
            heuristic = [allocs for _, allocs, source in self.starts if source == "heuristic"]
            in_model = max(
                (r for r, allocs in self.found if not any(allocs is h for h in heuristic)),
                default=0.0,
            )
            if in_model > cp_bound:
                _note(
                    extra,
                    f"CP-SAT's bound {cp_bound!r} s is below the reward {in_model!r} s of a "
                    "mapping in its model: dropped",
                )
                if extra["status"] == "OPTIMAL":
                    extra["status"] = "FEASIBLE"
                extra["cp_bound_s"] = cp_bound = None
            elif reward > cp_bound:
                _note(
                    extra,
                    f"the heuristic's mapping ({reward!r} s) beats CP-SAT's bound "
                    f"{cp_bound!r} s of the model: bound_s is the LP bound",
                )
                cp_bound = None
        lp_bound = self.bound_info["bound_s"]
        bound = lp_bound if cp_bound is None else min(cp_bound, lp_bound)
        return bound if bound > 0.0 else 0.0  # never -0.0 (max(-0.0, 0.0) is -0.0)

    def choose(self, extra: dict[str, Any]) -> tuple[list[Allocation], float]:
        """The best mapping found that passes the physical check, and its reward (seconds);
        dropping every buffer if none does. Notes rejections in ``extra["note"]`` and the
        mapping's source in ``extra["source"]``."""
        chosen: list[Allocation] | None = None
        reward = 0.0
        for r, allocs in sorted(self.found, key=lambda item: -item[0]):
            if r <= 0:
                break
            failures = physical_check(self.instance, allocs)
            if not failures:
                chosen, reward = allocs, r
                break
            extra["note"] = extra.get("note", "") + (
                f"model solution of reward {r!r} s rejected by the physical check "
                f"({failures[0].kind}: {failures[0].message}); "
            )
        if chosen is None:
            if "note" in extra:
                extra["note"] += "fell back to dropping every buffer"
            chosen, reward = [], 0.0
        extra["source"] = (
            next((name for _, allocs, name in self.starts if allocs is chosen), "cp-sat")
            if chosen
            else "drop"
        )
        return chosen, reward


def _note(extra: dict[str, Any], text: str) -> None:
    """Add ``text`` to ``extra["note"]`` (notes are separated by semicolons)."""
    before = extra.get("note", "").rstrip("; ")
    extra["note"] = f"{before}; {text}" if before else text


def _found_solution(status: Any) -> bool:
    """Whether a CP-SAT status has a solution (OPTIMAL or FEASIBLE)."""
    from ortools.sat.python import cp_model

    return status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
