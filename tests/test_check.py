"""Tests of the solution checker (SPEC section 7): every conformance trajectory is
valid, and each corruption is caught with the right failure kind."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import mallocgame.game
from mallocgame import check
from mallocgame.check import CheckReport, Failure, check_solution, physical_check
from mallocgame.errors import IllegalActionError
from mallocgame.instance import Instance, instance_from_dict
from mallocgame.latency import mapping_reward, normalize
from mallocgame.solution import Allocation, Solution, solution_from_dict
from tests.builders import CONFORMANCE_NAMES, conformance_vector, trajectory_solution

# ---------------------------------------------------------------------------- helpers


CASES = [
    (name, k)
    for name in CONFORMANCE_NAMES
    for k in range(len(conformance_vector(name)["trajectories"]))
]


def _replace(sol: Solution, buffer: int, **changes: Any) -> Solution:
    """``sol`` with buffer ``buffer``'s allocation changed (or removed if ``changes`` is
    ``{"drop": True}``)."""
    allocs = []
    for a in sol.allocations:
        if a.buffer != buffer:
            allocs.append(a)
        elif not changes.get("drop"):
            allocs.append(dataclasses.replace(a, **changes))
    return dataclasses.replace(sol, allocations=tuple(allocs))


def _kinds(failures: Sequence[Failure]) -> set[str]:
    return {f.kind for f in failures}


def _instance(
    steps: Sequence[Sequence[tuple[int, bool]]],
    tensors: Sequence[tuple[int, int, int, bool]],
    *,
    supply: Sequence[float],
    demand: dict[int, float] | None = None,
    alias: dict[int, int] | None = None,
    capacity: int = 1024,
    alignment: int = 256,
) -> Instance:
    """A hand-made instance. ``steps[t]`` lists instruction ``t``'s buffers in game
    order as ``(tensor, is_output)``; ``tensors`` are ``(size, def_time,
    last_use_time, live_out)``. Buffer ids count up in game order; every buffer has
    demand 1.0 s and its own alias group unless ``demand`` / ``alias`` say otherwise."""
    demand, alias = demand or {}, alias or {}
    buffers, instructions = [], []
    for t, step in enumerate(steps):
        ids = []
        for tensor, is_output in step:
            b = len(buffers)
            ids.append(b)
            buffers.append(
                {
                    "id": b,
                    "instruction": t,
                    "tensor_id": tensor,
                    "alias_id": alias.get(b, b),
                    "is_output": is_output,
                    "size": tensors[tensor][0],
                    "demand_s": demand.get(b, 1.0),
                }
            )
        instructions.append(
            {
                "name": f"i{t}",
                "count": 1,
                "supply_s": supply[t],
                "buffers": ids,
                "latency": {"kind": "roofline", "compute_s": 0.0},
            }
        )
    return instance_from_dict(
        {
            "format": "mallocgame-instance",
            "version": 1,
            "name": "hand",
            "hardware": {
                "name": "toy",
                "fast_memory_bytes": capacity,
                "alignment_bytes": alignment,
                "fast_bandwidth": 1000.0,
                "slow_bandwidth": 100.0,
                "copy_bandwidth": 256.0,
            },
            "instructions": instructions,
            "tensors": [
                {"id": i, "size": s, "def_time": d, "last_use_time": u, "live_out": o}
                for i, (s, d, u, o) in enumerate(tensors)
            ],
            "buffers": buffers,
        }
    )


X, Y, Z = 0, 1, 2


def _chain(
    *,
    z_live_out: bool = False,
    supply: Sequence[float] = (1.0, 1.0, 0.5, 1.0),
    alias: dict[int, int] | None = None,
) -> Instance:
    """The hand instance most tests use. All sizes are one 256-byte unit, the fast
    memory holds four.

    step      0        1       2       3
    reads     X (b0)   Y (b2)  X (b3)  X (b4)  Y (b5)
    outputs   Y (b1)                   Z (b6)
    supply_s  1.0      1.0     0.5     1.0        (by default)
    demand_s is 1.0 s for every buffer but b5 (0.5 s).
    X is a program input; Y lives 0..3; Z is produced at 3 (a result if z_live_out).
    """
    return _instance(
        [[(X, False), (Y, True)], [(Y, False)], [(X, False)], [(X, False), (Y, False), (Z, True)]],
        [(256, -1, 3, False), (256, 0, 3, False), (256, 3, 3, z_live_out)],
        supply=supply,
        demand={5: 0.5},
        alias=alias,
    )


def A(
    buffer: int,
    action: str,
    offset: int,
    start: int | None = None,
    end: int | None = None,
    copy: tuple[int, int] | None = None,
) -> Allocation:
    return Allocation(buffer, action, offset, start, end, copy)


# ------------------------------------------------------------------- report and kinds


def test_report_ok_kinds_and_summary() -> None:
    assert CheckReport(()).ok and CheckReport(()).summary() == ""
    report = CheckReport((Failure("overlap", "a and b", (1, 2)), Failure("misaligned", "c", (3,))))
    assert not report.ok
    assert report.kinds == {"overlap", "misaligned"}
    assert report.summary() == "overlap: a and b\nmisaligned: c"


def test_a_failure_of_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="^unknown failure kind 'overlaps' "):
        Failure("overlaps", "a and b")  # type: ignore[arg-type]


def test_failure_kinds_are_the_documented_ones() -> None:
    assert set(check.FAILURE_KINDS) == {
        "illegal_action",
        "incomplete",
        "allocation_mismatch",
        "reward_mismatch",
        "instance_mismatch",
        "misaligned",
        "over_capacity",
        "overlap",
        "alias_split",
        "alias_offset",
        "interval_shape",
        "copy_overlap",
        "copy_supply",
        "data_flow",
        "slow_read",
        "false_bound",
    }


# ------------------------------------------------------------ conformance: all valid


@pytest.mark.parametrize("name,k", CASES)
def test_conformance_allocations_pass(name: str, k: int) -> None:
    inst, sol = trajectory_solution(name, k, with_actions=False)
    assert physical_check(inst, sol.allocations) == []
    # also reward_s == the mapping's reward and normalized_reward == reward_s / R
    report = check_solution(inst, sol)
    assert report.ok, report.summary()


# --------------------------------------------- conformance corruptions: rules 1, 2, 3


def _tiny_alias_optimal() -> tuple[Instance, Solution]:
    """tiny_alias, optimal game (capacity 1024, alignment 256): b1 Copy at 0 over
    steps 0..1, b2 Copy at 256 over 1..2, b3 NoCopy at 256 (empty), b4 Copy at 512
    over 0..3; each one 256-byte unit."""
    assert conformance_vector("tiny_alias")["trajectories"][0]["kind"] == "optimal"
    return trajectory_solution("tiny_alias", 0, with_actions=False)


@pytest.mark.parametrize(
    "offset,kinds",
    [
        (512, set()),  # unchanged
        (0, {"overlap"}),  # onto b1's unit, both live at steps 0..1
        (768, set()),  # the free last unit
        (600, {"misaligned"}),  # [600, 856) is free and inside, but not a multiple of 256
        (1024, {"over_capacity"}),  # aligned, but [1024, 1280) is past the end
        (-256, {"over_capacity"}),
    ],
)
def test_offsets_of_tiny_alias(offset: int, kinds: set[str]) -> None:
    inst, sol = _tiny_alias_optimal()
    failures = physical_check(inst, _replace(sol, 4, offset=offset).allocations)
    assert _kinds(failures) == kinds
    if kinds == {"overlap"}:
        assert failures[0].buffers == (1, 4)


def _random101_seed1() -> tuple[Instance, Solution]:
    """random101, seed 1: alias group 8 = buffers 4 (tensor 3's output, NoCopy [1,3]),
    5 and 8 (its reads, NoCopy, empty) and 10 (tensor 5's output, Copy [3,5]), all at
    offset 2048; 4 and 10 share step 3 at the same bytes, which one group may."""
    inst, sol = trajectory_solution("random101", 1, with_actions=False)
    group = {b.id for b in inst.buffers if b.alias_id == 8}
    assert group == {4, 5, 8, 10}
    placed = {a.buffer: a for a in sol.allocations}
    assert {placed[b].offset for b in group} == {2048}
    assert placed[4].end == placed[10].start == 3
    return inst, sol


def test_one_alias_group_may_overlap_itself() -> None:
    inst, sol = _random101_seed1()
    assert physical_check(inst, sol.allocations) == []
    # the same two buffers in different groups are an overlap
    regrouped = dataclasses.replace(
        inst,
        buffers=tuple(
            dataclasses.replace(b, alias_id=100) if b.id == 10 else b for b in inst.buffers
        ),
    )
    assert _kinds(physical_check(regrouped, sol.allocations)) == {"overlap"}


def test_alias_group_split() -> None:
    # dropping b10 leaves 4, 5, 8 fast and 10 slow; tensor 5 is never read, so no other rule
    inst, sol = _random101_seed1()
    failures = physical_check(inst, _replace(sol, 10, drop=True).allocations)
    assert _kinds(failures) == {"alias_split"}
    assert failures[0].buffers == (4, 5, 8, 10)


def test_alias_group_at_two_offsets() -> None:
    # b10 (1024 bytes, steps 3..5) moved to the free [3072, 4096): no overlap, but the
    # group is now at 2048 and 3072
    inst, sol = _random101_seed1()
    failures = physical_check(inst, _replace(sol, 10, offset=3072).allocations)
    assert _kinds(failures) == {"alias_offset"}
    assert failures[0].buffers == (4, 5, 8, 10)


# ---------------------------------------------------- hand-made cases on the chain


CHAIN_CASES = {
    # --- valid
    # Y copied out over step 1 (supply 1.0 >= 1.0), then kept in place for b5:
    # the segment 0..3 at offset 0 begins at Y's production.
    "copy_out_then_extend": ([A(1, "Copy", 0, 0, 1, (1, 1)), A(5, "NoCopy", 0, 2, 3)], set()),
    # Y produced NoCopy over its live range, both reads NoCopy (empty).
    "resident": ([A(1, "NoCopy", 0, 0, 3), A(2, "NoCopy", 0), A(5, "NoCopy", 0)], set()),
    # b4 prefetched over 1..2 (1.5 >= 1.0), b5 over 2 (0.5 >= 0.5): they share step 2 only.
    "copies_share_one_step": (
        [A(4, "Copy", 0, 1, 3, (1, 2)), A(5, "Copy", 256, 2, 3, (2, 2))],
        set(),
    ),
    # Touching is no overlap: b1 [0,256) over 0..1 and b3 [256,512) over 1..2 meet at
    # step 1 side by side; b1 and b5 share offset 0 over 0..1 and 2..3.
    "touching": (
        [A(1, "Copy", 0, 0, 1, (1, 1)), A(3, "Copy", 256, 1, 2, (1, 1)), A(5, "NoCopy", 0, 2, 3)],
        set(),
    ),
    # --- rule 2
    # b1 over 0..1 and b3 over 1..2 both at [0, 256) at step 1.
    "overlap": ([A(1, "Copy", 0, 0, 1, (1, 1)), A(3, "Copy", 0, 1, 2, (1, 1))], {"overlap"}),
    # --- rule 4
    # operand copy must end at tau-1 = 2
    "copy_ends_early": ([A(4, "Copy", 0, 1, 3, (1, 1))], {"interval_shape"}),
    # operand memory must end at its target time 2
    "operand_ends_late": ([A(3, "Copy", 0, 0, 3, (0, 1))], {"interval_shape"}),
    # Y exists from step 0 on: a copy-in cannot start at 0 (supply is ample: 2.5 s)
    "copy_in_before_def": ([A(5, "Copy", 0, 0, 3, (0, 2))], {"interval_shape"}),
    # an output's memory starts at its target time 3
    "output_starts_early": ([A(6, "NoCopy", 0, 2, 3)], {"interval_shape"}),
    "output_empty": ([A(6, "NoCopy", 0)], {"interval_shape"}),
    "past_the_end": ([A(6, "NoCopy", 0, 3, 4)], {"interval_shape"}),
    "reversed": ([A(6, "NoCopy", 0, 3, 2)], {"interval_shape"}),
    "nocopy_with_copy": (
        [A(1, "NoCopy", 0, 0, 3), A(2, "NoCopy", 0), A(5, "NoCopy", 0, copy=(2, 2))],
        {"interval_shape"},
    ),
    # copy 1..2 not inside memory 2..3 (supply 1.5 would do)
    "copy_outside_memory": ([A(4, "Copy", 0, 2, 3, (1, 2))], {"interval_shape"}),
    # an output's copy-out starts at tau+1 = 1
    "copy_out_at_production": ([A(1, "Copy", 0, 0, 1, (0, 1))], {"interval_shape"}),
    "copy_reversed": ([A(4, "Copy", 0, 1, 3, (2, 1))], {"interval_shape"}),
    # a prefetch with no memory interval: malformed, and nothing holds the data at step 3
    "copy_operand_empty": ([A(4, "Copy", 0, None, None, (1, 2))], {"interval_shape", "data_flow"}),
    "unknown_buffer": ([A(99, "NoCopy", 0, 3, 3)], {"interval_shape"}),
    "negative_buffer": ([A(-1, "NoCopy", 0, 3, 3)], {"interval_shape"}),
    "duplicate": ([A(6, "NoCopy", 0, 3, 3), A(6, "NoCopy", 256, 3, 3)], {"interval_shape"}),
    "drop_is_no_allocation": ([A(6, "Drop", 0, 3, 3)], {"interval_shape"}),
    # --- rule 5
    # b4 and b5 both copy over 1..2: the pair (1, 2) lies in two copy intervals
    "copy_overlap": (
        [A(4, "Copy", 0, 1, 3, (1, 2)), A(5, "Copy", 256, 1, 3, (1, 2))],
        {"copy_overlap"},
    ),
    # b4 over step 2 only: 0.5 s of supply for 1.0 s of demand
    "copy_short": ([A(4, "Copy", 0, 2, 3, (2, 2))], {"copy_supply"}),
    "copy_missing": ([A(4, "Copy", 0, 3, 3)], {"copy_supply"}),
    # --- rule 6
    # b5 kept in place over 2..3 but nothing brought Y to offset 0
    "no_source": ([A(5, "NoCopy", 0, 2, 3)], {"data_flow"}),
    "no_source_empty": ([A(5, "NoCopy", 0)], {"data_flow"}),
    # Y copied out over 0..1, b5 resident over 3..3: step 2 is uncovered
    "gap": ([A(1, "Copy", 0, 0, 1, (1, 1)), A(5, "NoCopy", 0, 3, 3)], {"data_flow"}),
    # the extension sits at another offset than Y's production
    "other_offset": ([A(1, "Copy", 0, 0, 1, (1, 1)), A(5, "NoCopy", 256, 2, 3)], {"data_flow"}),
    # --- rule 7
    # Y produced NoCopy (never written to slow memory) but b2 reads it from there
    "slow_read_of_resident": ([A(1, "NoCopy", 0, 0, 3), A(5, "NoCopy", 0)], {"slow_read"}),
    # b5 copies Y in from slow memory, where it never was (supply 1.5 >= 0.5)
    "copy_in_of_resident": (
        [A(1, "NoCopy", 0, 0, 3), A(2, "NoCopy", 0), A(5, "Copy", 256, 1, 3, (1, 2))],
        {"slow_read"},
    ),
}


@pytest.mark.parametrize("case", sorted(CHAIN_CASES))
def test_chain_case(case: str) -> None:
    allocations, kinds = CHAIN_CASES[case]
    assert _kinds(physical_check(_chain(), allocations)) == kinds


def test_same_group_overlap_allowed() -> None:
    # b1 resident over 0..3 and b5 over 2..3 at the same bytes: one physical place if
    # they are one alias group, an overlap otherwise
    allocations = [A(1, "NoCopy", 0, 0, 3), A(2, "NoCopy", 0), A(5, "NoCopy", 0, 2, 3)]
    assert physical_check(_chain(alias={5: 1}), allocations) == []
    failures = physical_check(_chain(), allocations)
    assert _kinds(failures) == {"overlap"} and failures[0].buffers == (1, 5)


@pytest.mark.parametrize("live_out", [False, True])
def test_result_must_reach_slow_memory(live_out: bool) -> None:
    # Z produced NoCopy: fine unless Z is a program result
    failures = physical_check(_chain(z_live_out=live_out), [A(6, "NoCopy", 0, 3, 3)])
    assert _kinds(failures) == ({"slow_read"} if live_out else set())


@pytest.mark.parametrize("supply,ok", [(1.0 - 1e-10, True), (1.0 - 1e-8, False)])
def test_supply_tolerance(supply: float, ok: bool) -> None:
    # b4's copy over step 2 alone, against its demand of 1.0 s: short by 1e-10 is
    # within the relative 1e-9, short by 1e-8 is not
    inst = _chain(supply=(1.0, 1.0, supply, 1.0))
    failures = physical_check(inst, [A(4, "Copy", 0, 2, 3, (2, 2))])
    assert _kinds(failures) == (set() if ok else {"copy_supply"})


def test_zero_size_buffers_occupy_nothing() -> None:
    # Step 1 reads A (256 bytes) and B (size 0 or 1), both copied in over step 0
    # (0.5 s each of its 1.0 s; one step in common is allowed) to offset 0.
    def inst(size_b: int) -> Instance:
        return _instance(
            [[], [(0, False), (1, False)]],
            [(256, -1, 1, False), (size_b, -1, 1, False)],
            supply=(1.0, 1.0),
            demand={0: 0.5, 1: 0.5},
        )

    allocations = [A(0, "Copy", 0, 0, 1, (0, 0)), A(1, "Copy", 0, 0, 1, (0, 0))]
    assert physical_check(inst(0), allocations) == []
    assert _kinds(physical_check(inst(1), allocations)) == {"overlap"}


def test_zero_demand_copy_needs_no_interval() -> None:
    # a zero-demand prefetch has an empty copy interval and memory [tau, tau]
    inst = _instance([[(0, False)]], [(256, -1, 0, False)], supply=(0.0,), demand={0: 0.0})
    assert physical_check(inst, [A(0, "Copy", 0, 0, 0)]) == []
    # but it still needs its memory interval: without one nothing holds the data
    assert _kinds(physical_check(inst, [A(0, "Copy", 0)])) == {"interval_shape", "data_flow"}


# ------------------------------------------------------------------ overlap sweep


def _brute_overlaps(inst: Instance, allocations: Sequence[Allocation]) -> set[tuple[int, int]]:
    pairs = set()
    hw = inst.hardware
    for i, a in enumerate(allocations):
        for b in allocations[i + 1 :]:
            za, zb = (hw.aligned(inst.buffers[x.buffer].size) for x in (a, b))
            if (
                inst.buffers[a.buffer].alias_id != inst.buffers[b.buffer].alias_id
                and a.start is not None
                and b.start is not None
                and za
                and zb
                and max(a.start, b.start) <= min(a.end, b.end)
                and max(a.offset, b.offset) < min(a.offset + za, b.offset + zb)
            ):
                pairs.add((min(a.buffer, b.buffer), max(a.buffer, b.buffer)))
    return pairs


@st.composite
def _layouts(draw: st.DrawFn) -> tuple[Instance, list[Allocation], int]:
    """Outputs of random sizes (0 to 3 units of 64 bytes) placed NoCopy at random
    offsets over random intervals; groups either all distinct or drawn from three."""
    num_steps = draw(st.integers(1, 6))
    n = draw(st.integers(1, 12))
    distinct = draw(st.booleans())
    steps: list[list[tuple[int, bool]]] = [[] for _ in range(num_steps)]
    tensors, ends = [], []
    for i in range(n):
        t = draw(st.integers(0, num_steps - 1))
        steps[t].append((i, True))
        ends.append(draw(st.integers(t, num_steps - 1)))
        tensors.append((draw(st.sampled_from([0, 1, 64, 100, 128, 192])), t, ends[-1], False))
    alias = {} if distinct else {b: draw(st.integers(0, 2)) + 1000 for b in range(n)}
    inst = _instance(
        steps, tensors, supply=[1.0] * num_steps, alias=alias, capacity=1 << 20, alignment=64
    )
    allocations = []
    for b in inst.buffers:
        if draw(st.booleans()):
            x = inst.tensors[b.tensor_id]
            allocations.append(
                A(b.id, "NoCopy", 64 * draw(st.integers(0, 6)), x.def_time, x.last_use_time)
            )
    chunk = draw(st.sampled_from([1, 2, 5, 1 << 21]))
    return inst, allocations, chunk


@settings(max_examples=300, deadline=None)
@given(_layouts())
def test_overlap_sweep_matches_brute_force(
    layout: tuple[Instance, list[Allocation], int],
) -> None:
    inst, allocations, chunk = layout
    with mock.patch.object(check, "_ROWS_PER_CHUNK", chunk):
        found = [f for f in physical_check(inst, allocations) if f.kind == "overlap"]
    expected = _brute_overlaps(inst, allocations)
    reported = {f.buffers for f in found}
    assert all(len(p) == 2 for p in reported)
    # every overlapping pair, nothing false (a pair was missed where a block overlapped
    # two earlier ones: only the one ending last was tried)
    assert reported == expected


@st.composite
def _boxes(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
    """Random non-empty boxes ``[a0, a1) x [b0, b1)`` and their alias groups."""
    n = draw(st.integers(1, 14))
    ints = st.integers(0, 8)
    a0, b0 = (np.array(draw(st.lists(ints, min_size=n, max_size=n)), np.int64) for _ in "ab")
    da = np.array(draw(st.lists(st.integers(1, 5), min_size=n, max_size=n)), np.int64)
    db = np.array(draw(st.lists(st.integers(1, 5), min_size=n, max_size=n)), np.int64)
    groups = draw(st.sampled_from([n, 3]))
    group = np.array(draw(st.lists(st.integers(0, groups - 1), min_size=n, max_size=n)), np.int64)
    if groups == n:
        group = np.arange(n)
    return a0, a0 + da, b0, b0 + db, group


# Group 0 sits at [0,1) and [9,10) around group 1 at [2,6) and group 2 at [4,5):
# only 1 and 2 meet, though group 0's hull [0,10) covers both.
_SPLIT_GROUP = tuple(
    np.array(v, np.int64)
    for v in ([0, 0, 0, 0], [1, 1, 1, 1], [0, 9, 2, 4], [1, 10, 6, 5], [0, 0, 1, 2])
)


@settings(max_examples=300, deadline=None)
@given(_boxes(), st.sampled_from([1, 4, 1 << 21]))
@example(_SPLIT_GROUP, 1 << 21)
def test_box_sweep_both_ways(boxes: tuple[np.ndarray, ...], chunk: int) -> None:
    a0, a1, b0, b1, group = boxes
    n = len(a0)
    expected = {
        (i, j)
        for i in range(n)
        for j in range(i + 1, n)
        if group[i] != group[j]
        and max(a0[i], a0[j]) < min(a1[i], a1[j])
        and max(b0[i], b0[j]) < min(b1[i], b1[j])
    }
    with mock.patch.object(check, "_ROWS_PER_CHUNK", chunk):
        for args in ((a0, a1, b0, b1, group), (b0, b1, a0, a1, group)):
            i, j = check._intersecting_boxes(*args)
            found = set(zip(i.tolist(), j.tolist()))
            assert found == expected


def test_every_overlapping_pair_is_a_failure() -> None:
    """Three inputs at step 0 over bytes [0, 20), [5, 40) and [14, 34): the pair (0, 2) was
    not reported (each block was tried against the earlier one ending last only)."""
    from tests.builders import I, X, build

    inst = build([X(20), X(35), X(20)], [I(reads=[0, 1, 2])], capacity=64, alignment=1)
    allocations = [A(0, "NoCopy", 0, 0, 0), A(1, "NoCopy", 5, 0, 0), A(2, "NoCopy", 14, 0, 0)]
    overlaps = [f.buffers for f in physical_check(inst, allocations) if f.kind == "overlap"]
    assert sorted(overlaps) == [(0, 1), (0, 2), (1, 2)]


def test_numpy_integers_are_integers() -> None:
    # allocations built from numpy arrays (as a solver may) are checked the same way
    allocations = [
        A(1, "Copy", np.int64(0), np.int64(0), np.int64(1), (np.int64(1), np.int64(1))),
        A(5, "NoCopy", np.int64(0), np.int64(2), np.int64(3)),
    ]
    assert physical_check(_chain(), allocations) == []


# ----------------------------------------------------------------------- large scale


def _large(num_steps: int = 4000) -> tuple[Instance, list[Allocation]]:
    """About 16,000 buffers, all in fast memory, valid. Step t reads the input X_t
    and Y_{t-1}, Y_{t-2}, and produces Y_t (live t..t+2). Y_t is produced NoCopy at
    unit t % 3 and read NoCopy; X_t (t >= 1) is prefetched over step t-1 into unit
    3 + t % 2. Every unit is 256 bytes, so 5 units fit."""
    steps, tensors = [], []
    for t in range(num_steps):
        tensors.append((256, -1, t, False))  # X_t = tensor 2t
        tensors.append((256, t, min(t + 2, num_steps - 1), False))  # Y_t = tensor 2t+1
        step = [(2 * t, False)] + [(2 * (t - k) + 1, False) for k in (1, 2) if t - k >= 0]
        steps.append(step + [(2 * t + 1, True)])
    inst = _instance(steps, tensors, supply=[1.0] * num_steps, capacity=5 * 256)
    allocations = []
    for b in inst.buffers:
        t, x = b.instruction, b.tensor_id
        if x % 2:  # Y_(x//2), produced at x // 2
            unit = (x // 2) % 3
            if b.is_output:
                allocations.append(A(b.id, "NoCopy", 256 * unit, t, inst.tensors[x].last_use_time))
            else:
                allocations.append(A(b.id, "NoCopy", 256 * unit))
        elif t >= 1:
            allocations.append(A(b.id, "Copy", 256 * (3 + t % 2), t - 1, t, (t - 1, t - 1)))
    return inst, allocations


def test_large_instance() -> None:
    # Speed is measured in benchmarks/check_speed.py; here: a large valid mapping
    # passes, and the same mapping crammed at offset 0 is caught.
    inst, allocations = _large()
    assert inst.num_buffers > 15_000 and len(allocations) > 15_000
    assert physical_check(inst, allocations) == []
    crammed = [dataclasses.replace(a, offset=0) for a in allocations]
    assert "overlap" in _kinds(physical_check(inst, crammed))


# ------------------------------------------------------------- solutions and rewards


def test_instance_mismatch() -> None:
    inst, sol = trajectory_solution("tiny_chain", 0, with_actions=False)
    report = check_solution(inst, dataclasses.replace(sol, instance_sha256="0" * 64))
    assert report.kinds == {"instance_mismatch"}


def test_a_solution_for_another_instance_fails_on_that_alone() -> None:
    _, sol = trajectory_solution("random104", 0, with_actions=True)
    other, _ = trajectory_solution("random105", 0, with_actions=False)
    report = check_solution(other, sol)
    assert len(report.failures) == 1 and report.kinds == {"instance_mismatch"}
    assert sol.instance in report.failures[0].message


@pytest.mark.parametrize("factor,ok", [(1.0 + 1e-12, True), (1.01, False)])
def test_reward_against_mapping(factor: float, ok: bool) -> None:
    inst, sol = trajectory_solution("random104", 0, with_actions=False)
    assert sol.reward_s > 0
    changed = dataclasses.replace(
        sol, reward_s=sol.reward_s * factor, normalized_reward=sol.normalized_reward * factor
    )
    assert check_solution(inst, changed).kinds == (set() if ok else {"reward_mismatch"})


def test_normalized_reward_must_match() -> None:
    inst, sol = trajectory_solution("random104", 0, with_actions=False)
    changed = dataclasses.replace(sol, normalized_reward=sol.normalized_reward + 0.01)
    assert check_solution(inst, changed).kinds == {"reward_mismatch"}


def test_mapping_made_outside_the_game() -> None:
    # the chain's "copies_share_one_step" mapping, with the reward of its buffers
    inst = _chain()
    allocations, _ = CHAIN_CASES["copies_share_one_step"]
    reward = mapping_reward(inst, {4, 5})
    assert reward > 0
    sol = Solution(
        inst.name, inst.sha256, "hand", 0, 0.0, tuple(allocations), reward, normalize(inst, reward)
    )
    assert check_solution(inst, sol).ok
    wrong = dataclasses.replace(sol, reward_s=mapping_reward(inst, {4}))
    assert check_solution(inst, wrong).kinds == {"reward_mismatch"}


# ------------------------------------------------------------------------ replay


class _RecordedGame:
    """A stand-in for ``mallocgame.game.Game`` that follows one recorded conformance
    trajectory: the legal actions of its steps, then its allocations and return."""

    def __init__(self, traj: dict[str, Any]) -> None:
        self._steps = traj["steps"]
        self._traj = traj
        self._k = 0

    @property
    def done(self) -> bool:
        return self._k == len(self._steps)

    @property
    def return_s(self) -> float:
        return self._traj["reward_s"]

    def legal_mask(self) -> np.ndarray:
        mask = np.zeros(3, bool)
        mask[self._steps[self._k]["legal"]] = True
        return mask

    def step(self, action: int) -> float:
        if action not in self._steps[self._k]["legal"]:
            raise IllegalActionError(f"action {action}")
        self._k += 1
        return 0.0

    def allocations(self) -> list[Allocation]:
        doc = {
            "format": "mallocgame-solution",
            "version": 1,
            "instance": "",
            "instance_sha256": "",
            "allocations": self._traj["allocations"],
            "reward_s": 0.0,
            "normalized_reward": 0.0,
        }
        return list(solution_from_dict(doc).allocations)


@pytest.fixture(params=["recorded", "real"])
def game(request: pytest.FixtureRequest) -> str:
    """Run a replay test with the recorded stand-in, and with the real game once it exists."""
    if request.param == "real" and not hasattr(mallocgame.game, "Game"):
        pytest.skip("mallocgame.game.Game does not exist yet")
    return request.param


def _replay_case(
    game: str, name: str, k: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[Instance, Solution, dict[str, Any]]:
    inst, sol = trajectory_solution(name, k, with_actions=True)
    traj = conformance_vector(name)["trajectories"][k]
    if game == "recorded":
        monkeypatch.setattr(
            mallocgame.game, "Game", lambda _inst: _RecordedGame(traj), raising=False
        )
    return inst, sol, traj


@pytest.mark.parametrize("name,k", CASES)
def test_replay_of_conformance_trajectory(
    game: str, name: str, k: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    inst, sol, _ = _replay_case(game, name, k, monkeypatch)
    report = check_solution(inst, sol)
    assert report.ok, report.summary()


@pytest.mark.parametrize("name,k", CASES)
def test_replay_illegal_action(
    game: str, name: str, k: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the first step with an illegal action gets it
    inst, sol, traj = _replay_case(game, name, k, monkeypatch)
    step = next((s for s, st_ in enumerate(traj["steps"]) if len(st_["legal"]) < 3), None)
    if step is None:
        pytest.skip("every action is legal at every step")
    bad = next(a for a in (0, 1, 2) if a not in traj["steps"][step]["legal"])
    actions = list(sol.actions)
    actions[step] = bad
    report = check_solution(inst, dataclasses.replace(sol, actions=tuple(actions)))
    replay = [f for f in report.failures if f.kind == "illegal_action"]
    assert len(replay) == 1 and replay[0].buffers == (step,)
    assert report.kinds == {"illegal_action"}


@pytest.mark.parametrize("cut", [1, -1])
def test_replay_wrong_length(game: str, cut: int, monkeypatch: pytest.MonkeyPatch) -> None:
    inst, sol, _ = _replay_case(game, "tiny_alias", 0, monkeypatch)
    actions = sol.actions[:-1] if cut == 1 else sol.actions + (2,)
    report = check_solution(inst, dataclasses.replace(sol, actions=actions))
    assert report.kinds == {"incomplete"}


def test_replay_reward_mismatch(game: str, monkeypatch: pytest.MonkeyPatch) -> None:
    inst, sol, _ = _replay_case(game, "random103", 0, monkeypatch)
    changed = dataclasses.replace(
        sol, reward_s=sol.reward_s * 1.001, normalized_reward=sol.normalized_reward * 1.001
    )
    failures = check_solution(inst, changed).failures
    # one from the replay, one from the reward of the allocated buffers
    assert [f.kind for f in failures] == ["reward_mismatch", "reward_mismatch"]


def test_replay_allocation_mismatch(game: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # tiny_alias optimal with b4 moved to the free unit at 768: physically valid,
    # but the game places it at 512
    inst, sol, _ = _replay_case(game, "tiny_alias", 0, monkeypatch)
    failures = check_solution(inst, _replace(sol, 4, offset=768)).failures
    assert [(f.kind, f.buffers) for f in failures] == [("allocation_mismatch", (4,))]
    # a buffer the game leaves in slow memory claimed as fast
    extra = dataclasses.replace(sol, allocations=sol.allocations + (A(0, "Copy", 768, 0, 0),))
    assert ("allocation_mismatch", (0,)) in [
        (f.kind, f.buffers) for f in check_solution(inst, extra).failures
    ]


@pytest.mark.parametrize("name,k", CASES)
def test_replay_other_legal_action(name: str, k: int) -> None:
    # Only the real game knows where another legal action leads: either a later
    # action becomes illegal or the allocations differ from the recorded ones.
    if not hasattr(mallocgame.game, "Game"):
        pytest.skip("mallocgame.game.Game does not exist yet")
    inst, sol = trajectory_solution(name, k, with_actions=True)
    traj = conformance_vector(name)["trajectories"][k]
    step = next((s for s, st_ in enumerate(traj["steps"]) if len(st_["legal"]) > 1), None)
    if step is None:
        pytest.skip("no step with a choice")
    other = next(a for a in traj["steps"][step]["legal"] if a != traj["actions"][step])
    actions = list(sol.actions)
    actions[step] = other
    report = check_solution(inst, dataclasses.replace(sol, actions=tuple(actions)))
    assert report.kinds & {"illegal_action", "allocation_mismatch"}


# ------------------------------------------------------ extreme values (issue 21)

_EXTREME_FLOATS = st.sampled_from(
    [
        0.0,
        5e-324,
        1e-308,
        1e-12,
        1.0,
        1e12,
        1.0000001e12,
        1e15,
        1e300,
        1.7976931348623157e308,
        -1e-300,
    ]
) | st.floats(allow_nan=False, allow_infinity=False)
_EXTREME_INTS = st.sampled_from(
    [0, 1, 2**31 - 1, 2**31, 2**53 - 1, 2**53, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 10**30]
)
_FLOAT_FIELDS = [
    ("hardware", "fast_bandwidth"),
    ("hardware", "slow_bandwidth"),
    ("hardware", "copy_bandwidth"),
    ("instructions", "supply_s"),
    ("latency", "compute_s"),
    ("latency", "fixed_s"),
    ("buffers", "demand_s"),
    ("buffers", "benefit_s"),
]
_INT_FIELDS = [
    ("hardware", "fast_memory_bytes"),
    ("hardware", "alignment_bytes"),
    ("instructions", "count"),
    ("buffers", "size"),
    ("tensors", "size"),
]


def _set(doc: dict, where: tuple[str, str], index: int, value: Any) -> None:
    part, key = where
    if part == "hardware":
        doc["hardware"][key] = value
    elif part == "latency":
        ins = doc["instructions"][index % len(doc["instructions"])]
        if ins["latency"].get("kind") == "roofline":
            ins["latency"][key] = value
    else:
        doc[part][index % len(doc[part])][key] = value


def _greedy_solution(inst: Instance) -> Solution:
    from mallocgame.game import Game
    from mallocgame.game.backup import DropBackup
    from mallocgame.solvers.base import solution_from_game

    game = Game(inst)
    DropBackup(game).play(lambda g, allowed: int(allowed.argmax()))
    return solution_from_game(inst, game, solver="greedy", seed=0, wall_s=0.0, work={"games": 1})


@settings(max_examples=150, deadline=None)
@given(
    changes=st.lists(
        st.one_of(
            st.tuples(st.sampled_from(_FLOAT_FIELDS), st.integers(0, 10**6), _EXTREME_FLOATS),
            st.tuples(st.sampled_from(_INT_FIELDS), st.integers(0, 10**6), _EXTREME_INTS),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_extreme_numbers_are_refused_or_answered_correctly(changes) -> None:
    """Every outcome of loading extreme but well-formed numbers is a clean refusal, or an
    instance on which a game's answer is finite and valid and a wrong reward is caught."""
    from mallocgame.errors import MallocGameError
    from mallocgame.simulate import simulate

    doc = conformance_vector("random105")["instance"]
    for where, index, value in changes:
        _set(doc, where, index, value)
    try:
        inst = instance_from_dict(doc)
    except MallocGameError as exc:
        assert "\n" not in str(exc)
        return
    sol = _greedy_solution(inst)
    assert np.isfinite(sol.reward_s) and np.isfinite(sol.normalized_reward)
    assert check_solution(inst, sol).ok
    assert np.isfinite(simulate(inst, sol).latency_s)
    wrong = dataclasses.replace(sol, normalized_reward=sol.normalized_reward + 0.5)
    assert "reward_mismatch" in check_solution(inst, wrong).kinds


@pytest.mark.parametrize("huge", [1e308, 1e12])
def test_supply_beside_a_copy_never_counts_for_it(huge: float) -> None:
    """The checker once said valid when two steps' supply summed past the largest float:
    now such an instance is refused at load, and inside the ranges a copy in steps of no
    supply is caught however large the supply elsewhere."""
    from mallocgame.errors import InstanceError

    inst, sol = trajectory_solution("random105", 0, with_actions=False)
    copied = next(
        a for a in sol.allocations if a.copy is not None and inst.buffers[a.buffer].demand_s > 0
    )
    lo, hi = copied.copy
    doc = inst.to_dict()
    for t, ins in enumerate(doc["instructions"]):
        ins["supply_s"] = 0.0 if lo <= t <= hi else huge
    if huge > 1e12:
        with pytest.raises(InstanceError, match="supply_s must be in 0..1e12"):
            instance_from_dict(doc)
        return
    starved = instance_from_dict(doc)
    report = check_solution(starved, dataclasses.replace(sol, instance_sha256=starved.sha256))
    assert "copy_supply" in report.kinds


@settings(max_examples=200, deadline=None)
@given(
    supply=st.lists(
        st.sampled_from([0.0, 5e-324, 1e-300, 1e-9, 0.5, 1.0, 1e6, 1e12]) | st.floats(0, 1e12),
        min_size=1,
        max_size=40,
    ),
    demand=st.floats(0, 1e12),
    data=st.data(),
)
def test_supply_sums_are_exact(supply: list[float], demand: float, data) -> None:
    """The checker's supply rule agrees with exact rational arithmetic."""
    from fractions import Fraction

    t0 = data.draw(st.integers(0, len(supply) - 1))
    t1 = data.draw(st.integers(t0, len(supply) - 1))
    inst = mock.Mock()
    inst.instructions = [mock.Mock(supply_s=s) for s in supply]
    inst.buffers = [mock.Mock(demand_s=demand)]
    failed = bool(check._supply_failures(inst, np.array([0]), np.array([t0]), np.array([t1])))
    exact = sum(Fraction(s) for s in supply[t0 : t1 + 1])
    threshold = Fraction((1 - check.SUPPLY_RTOL) * demand)
    if exact >= threshold:
        assert not failed
    elif exact < threshold * (1 - Fraction(1, 10**12)):
        assert failed
