"""Tests of the latency simulator (mallocgame.simulate).

The small cases are worked by hand on the builder's toy hardware: fast memory 1000
B/s, slow memory 100 B/s, copies 100 B/s (a 100-byte buffer takes 1 s to copy or to
move through slow memory, 0.1 s through fast memory); a copy takes half of the slow
bandwidth while it runs (copy_share = 100 / (100 + 100)). Mappings are made by
playing the game (``replay``), so each is a legal solution, and each is checked.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mallocgame.check import physical_check
from mallocgame.game import replay
from mallocgame.instance import Instance, instance_from_dict
from mallocgame.latency import instruction_latency
from mallocgame.simulate import (
    SimulationError,
    baseline_latency,
    default_copy_share,
    execution_time,
    simulate,
    speedup,
    unroll,
)
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads import synthetic
from mallocgame.workloads.registry import load_workload
from mallocgame.workloads.suite import SUITE, suite_names
from tests.builders import B, I, X, build, build_doc, roofline, table

COPY, NOCOPY, DROP = 0, 1, 2


def _with_loops(doc: dict, loops: list[tuple[int, int, int]]) -> Instance:
    doc = dict(doc)
    doc["loops"] = [{"first": f, "last": l, "trip_count": n} for f, l, n in loops]
    return instance_from_dict(doc)


def _play(inst: Instance, actions: list[int]):
    allocs = replay(inst, actions).allocations()
    assert physical_check(inst, allocs) == []
    return allocs


def _slow_sum(inst: Instance) -> float:
    return sum(instruction_latency(inst, t, set()) for t in range(inst.num_instructions))


def _consistent(r) -> None:
    assert r.latency_s == pytest.approx(r.compute_s + r.stall_s + r.drain_s, rel=1e-12, abs=1e-15)


# --------------------------------------------------------------------- all in slow memory


@pytest.mark.parametrize(
    "name",
    [
        "xla-v1/alexnet_train_b32",
        "xla-v1/lstm_infer",
        "xla-v1/inplace_update_loop",
        "synthetic-v1/1k",
    ],
)
def test_all_slow_latency_is_the_sum_of_latencies(name: str) -> None:
    inst = load_workload(name)
    r = simulate(inst, [])
    assert r.latency_s == pytest.approx(_slow_sum(inst), rel=1e-12)
    assert r.stall_s == 0 and r.drain_s == 0 and r.num_copies == 0 and r.contention_s == 0
    assert baseline_latency(inst) == r.latency_s
    # the per-instruction busy time is count * L_t(empty)
    expect = [instruction_latency(inst, t, set()) for t in range(inst.num_instructions)]
    np.testing.assert_allclose(r.busy_s, expect, rtol=1e-12)
    _consistent(r)


def test_all_slow_with_a_count_no_loop_explains_and_a_table() -> None:
    # instruction 1 runs 3 times (no listed loop): its one execution lasts 3 * L
    inst = build(
        [X(100), X(50), X(200)],
        [
            I(reads=[0], writes=[1], latency=roofline(compute_s=0.5, fixed_s=0.25)),
            I(reads=[1], writes=[2], count=3, latency=table([0, 1], [4.0, 3.0, 2.0, 1.0])),
        ],
    )
    r = simulate(inst, [])
    # i0: 0.25 + max(0.5, (100 + 50) / 100) = 1.75; i1: 3 * 4.0 = 12
    assert r.latency_s == pytest.approx(13.75)
    assert r.latency_s == pytest.approx(_slow_sum(inst))
    assert r.num_executions == 2
    np.testing.assert_allclose(r.exec_start, [0.0, 1.75])


# ------------------------------------------------------------------------------ prefetch


@pytest.mark.parametrize("compute", [0.5, 1.0, 2.0, 3.0, 4.0])
def test_prefetch_that_cannot_hide_stalls_for_exactly_the_difference(compute: float) -> None:
    # i0 computes for `compute` s; the game believes its supply of 3 s hides the 3 s
    # prefetch of X0 (300 bytes) for i1. i1 then reads X0 from fast memory: 0.3 s.
    inst = build(
        [X(300)],
        [I(supply=3.0, latency=roofline(compute_s=compute)), I(reads=[0], supply=1.0)],
    )
    allocs = _play(inst, [COPY])
    assert allocs[0].copy == (0, 0)
    r = simulate(inst, allocs)
    assert r.stall_s == pytest.approx(max(0.0, 3.0 - compute))
    assert r.latency_s == pytest.approx(max(compute, 3.0) + 0.3)
    assert r.start_s[1] == pytest.approx(max(compute, 3.0))
    assert r.copy_start.tolist() == [0.0] and r.copy_end.tolist() == pytest.approx([3.0])
    assert r.copy_busy_s == pytest.approx(3.0)
    assert r.contention_s == 0  # i0 moves no slow bytes
    _consistent(r)
    # the reward model sees no stall: the simulator is finer than the reward
    assert speedup(inst, allocs) == pytest.approx((compute + 3.0) / (max(compute, 3.0) + 0.3))


def test_prefetch_slows_the_slow_traffic_it_overlaps() -> None:
    # i0 reads X1 (100 B) from slow memory while X0 (100 B) is prefetched for i1:
    # i0's slow traffic runs at half speed for the copy's second: 0.5 s of work done
    # in [0, 1], the other 0.5 s in [1, 1.5]; i1 starts at 1.5, reads X0 fast in 0.1 s.
    inst = build([X(100), X(100)], [I(reads=[1], supply=1.0), I(reads=[0], supply=1.0)])
    allocs = _play(inst, [DROP, COPY])
    r = simulate(inst, allocs)
    assert r.exec_end.tolist() == pytest.approx([1.5, 1.6])
    assert r.contention_s == pytest.approx(0.5)
    assert r.stall_s == 0
    # with copies taking none of the slow bandwidth there is no contention
    r0 = simulate(inst, allocs, copy_share=0.0)
    assert r0.exec_end.tolist() == pytest.approx([1.0, 1.1])
    assert r0.contention_s == 0
    assert default_copy_share(inst) == 0.5


def test_default_copy_share_of_huge_bandwidths() -> None:
    # copy + slow overflowed to inf, and the share to 0.0 (copies taking no bandwidth)
    for bw, half in [(1e308, 0.5), (1.7e308, 0.5), (1e308 / 3, 0.5)]:
        inst = build([X(100)], [I(writes=[0])], slow_bw=bw, copy_bw=bw, fast_bw=bw)
        assert default_copy_share(inst) == half
        assert simulate(inst, ()).copy_share == half
    inst = build([X(100)], [I(writes=[0])], slow_bw=1e308, copy_bw=1.5e308, fast_bw=1.7e308)
    assert default_copy_share(inst) == pytest.approx(0.6)
    inst = build([X(100)], [I(writes=[0])], slow_bw=1.0, copy_bw=1e308)  # rounds to 1: kept below
    assert default_copy_share(inst) == float(np.nextafter(1.0, 0.0))


def test_instruction_ending_under_a_copy() -> None:
    # i0 reads 40 B slow (0.4 s) entirely under the 1 s prefetch: at half speed, 0.8 s;
    # i1 then waits 0.2 s for the prefetch
    inst = build([X(100), X(40)], [I(reads=[1], supply=1.0), I(reads=[0], supply=1.0)])
    r = simulate(inst, _play(inst, [DROP, COPY]))
    assert r.exec_end.tolist() == pytest.approx([0.8, 1.1])
    assert r.stall_s == pytest.approx(0.2)
    assert r.contention_s == pytest.approx(0.4)
    assert execution_time(inst, 0, set(), 0.0, [(0.0, 1.0)]) == pytest.approx(0.8)
    assert execution_time(inst, 0, set(), 0.5, [(0.0, 1.0)]) == pytest.approx(0.65)  # 0.5 + 0.15
    assert execution_time(inst, 0, set(), 0.0, []) == pytest.approx(0.4)
    for share in (1.0, 1.5, -0.5):  # as simulate refuses them (1: no instruction would end)
        with pytest.raises(ValueError, match="copy_share must lie in"):
            execution_time(inst, 0, set(), 0.0, [(0.0, 1.0)], copy_share=share)


def test_compute_bound_instruction_absorbs_contention() -> None:
    # i0: compute 3 s, 100 slow bytes (1 s): contended it needs 2 s of its 3 s, no slower
    inst = build(
        [X(100), X(100)], [I(reads=[1], supply=1.0, latency=roofline(compute_s=3.0)), I(reads=[0])]
    )
    r = simulate(inst, _play(inst, [DROP, COPY]))
    assert r.exec_end[0] == pytest.approx(3.0)
    assert r.contention_s == pytest.approx(0.0, abs=1e-12)


# ------------------------------------------------------------------------------ copy-out


def _copy_out_then_reuse(second: int) -> tuple[Instance, list]:
    # i0 produces X0 (100 B, a result) in fast memory and copies it out during i1
    # (compute 0.5 s); i2 produces X1 (100 B) in the same bytes (NoCopy) or in slow
    # memory (Drop). The fast memory holds one of them.
    inst = build(
        [X(100, live_out=True), X(100)],
        [I(writes=[0]), I(latency=roofline(compute_s=0.5)), I(writes=[1])],
        capacity=100,
    )
    allocs = _play(inst, [COPY, second])
    return inst, allocs


def test_copy_out_delays_the_reuse_of_its_memory() -> None:
    inst, allocs = _copy_out_then_reuse(NOCOPY)
    assert [(a.offset, a.start, a.end, a.copy) for a in allocs] == [
        (0, 0, 1, (1, 1)),
        (0, 2, 2, None),
    ]
    r = simulate(inst, allocs)
    # i0 [0, 0.1] (fast write), copy-out [0.1, 1.1], i1 [0.1, 0.6], i2 waits until 1.1
    assert r.copy_start.tolist() == pytest.approx([0.1])
    assert r.copy_end.tolist() == pytest.approx([1.1])
    assert r.exec_start.tolist() == pytest.approx([0.0, 0.1, 1.1])
    assert r.exec_end.tolist() == pytest.approx([0.1, 0.6, 1.2])
    assert r.stall_s == pytest.approx(0.5)
    assert r.latency_s == pytest.approx(1.2)
    assert r.copy_is_out.tolist() == [True]
    _consistent(r)


def test_copy_out_contends_with_a_slow_write_instead() -> None:
    inst, allocs = _copy_out_then_reuse(DROP)
    r = simulate(inst, allocs)
    # i2 writes 100 B slow from 0.6: half speed until the copy ends at 1.1 (0.25 s of
    # work), the remaining 0.75 s at full speed: ends at 1.85
    assert r.exec_start[2] == pytest.approx(0.6)
    assert r.exec_end[2] == pytest.approx(1.85)
    assert r.stall_s == 0
    assert r.contention_s == pytest.approx(0.25)


def test_slow_read_waits_for_the_copy_out() -> None:
    # X0 copied out during i1 (0.2 s); i2 reads X0 from slow memory: it waits for the
    # copy-out (ends at 1.1), then reads 100 B slow in 1 s
    inst = build(
        [X(100)],
        [I(writes=[0]), I(latency=roofline(compute_s=0.2)), I(reads=[0])],
    )
    allocs = _play(inst, [COPY, DROP])
    r = simulate(inst, allocs)
    assert r.exec_start.tolist() == pytest.approx([0.0, 0.1, 1.1])
    assert r.latency_s == pytest.approx(2.1)
    assert r.stall_s == pytest.approx(0.8)
    assert r.contention_s == 0


def test_prefetch_of_a_copied_out_tensor_starts_after_it() -> None:
    inst = build(
        [X(100)],
        [
            I(writes=[0]),
            I(latency=roofline(compute_s=0.2)),
            I(latency=roofline(compute_s=0.2)),
            I(reads=[0]),
        ],
    )
    allocs = _play(inst, [COPY, COPY])
    assert [a.copy for a in allocs] == [(1, 1), (2, 2)]
    r = simulate(inst, allocs)
    # copy-out [0.1, 1.1]; the prefetch is due at 0.3 (i2 starts) but starts at 1.1
    assert r.copy_start.tolist() == pytest.approx([0.1, 1.1])
    assert r.copy_end.tolist() == pytest.approx([1.1, 2.1])
    assert r.exec_start[3] == pytest.approx(2.1)
    assert r.latency_s == pytest.approx(2.2)


def test_copy_out_of_a_result_drains_after_the_last_instruction() -> None:
    inst = build([X(100, live_out=True)], [I(writes=[0]), I(latency=roofline(compute_s=0.3))])
    r = simulate(inst, _play(inst, [COPY]))
    assert r.exec_end[-1] == pytest.approx(0.4)
    assert r.latency_s == pytest.approx(1.1)
    assert r.drain_s == pytest.approx(0.7)
    _consistent(r)


# ----------------------------------------------------------------------------------- loops


def test_loop_body_runs_trip_count_times() -> None:
    doc = build_doc(
        [X(100), X(100), X(100)],
        [
            I(reads=[0], writes=[1]),
            I(reads=[1], writes=[2], count=4, latency=roofline(compute_s=1.5)),
            I(reads=[2]),
        ],
    )
    inst = _with_loops(doc, [(1, 1, 4)])
    r = simulate(inst, [])
    assert r.exec_step.tolist() == [0, 1, 1, 1, 1, 2]
    assert r.num_executions == 6
    # i0: 2 s slow; i1: 4 executions of max(1.5, 2) = 2 s; i2: 1 s
    assert r.latency_s == pytest.approx(2 + 4 * 2 + 1)
    assert r.latency_s == pytest.approx(_slow_sum(inst))
    assert r.busy_s.tolist() == pytest.approx([2, 8, 1])
    assert r.start_s.tolist() == pytest.approx([0, 2, 10])  # first executions
    assert r.end_s.tolist() == pytest.approx([2, 4, 11])


def _loop_instance(supply0: float, supply1: float) -> Instance:
    # i0 (1 s) before the loop; body i1 (1 s) and i2 (reads X0, 200 B) run 3 times
    doc = build_doc(
        [X(200)],
        [
            I(supply=supply0, latency=roofline(compute_s=1.0)),
            I(supply=supply1, count=3, latency=roofline(compute_s=1.0)),
            I(reads=[0], count=3),
        ],
    )
    return _with_loops(doc, [(1, 2, 3)])


def test_prefetch_inside_a_loop_body_happens_every_iteration() -> None:
    inst = _loop_instance(1.0, 2.0)
    allocs = _play(inst, [COPY])
    assert allocs[0].copy == (1, 1)
    r = simulate(inst, allocs)
    # each iteration: i1 1 s while the 2 s copy runs, stall 1 s, i2 0.2 s (fast read)
    assert r.num_copies == 3
    assert r.stall_s == pytest.approx(3.0)
    assert r.latency_s == pytest.approx(1.0 + 3 * 2.2)
    assert r.copy_start.tolist() == pytest.approx([1.0, 3.2, 5.4])


def test_prefetch_into_a_loop_happens_once() -> None:
    inst = _loop_instance(1.0, 1.0)
    allocs = _play(inst, [COPY])
    assert allocs[0].copy == (0, 1)
    r = simulate(inst, allocs)
    # the copy [0, 2] hides behind i0 and i1; later iterations find X0 resident
    assert r.num_copies == 1
    assert r.stall_s == 0
    assert r.latency_s == pytest.approx(1.0 + 3 * 1.2)


def test_copy_out_from_a_loop_to_after_it_happens_once() -> None:
    # body i0 (writes X0) run 3 times; X0 copied out during i1 (after the loop), a result
    doc = build_doc(
        [X(100, live_out=True)],
        [I(writes=[0], count=3), I(latency=roofline(compute_s=2.0))],
    )
    inst = _with_loops(doc, [(0, 0, 3)])
    r = simulate(inst, _play(inst, [COPY]))
    assert r.num_copies == 1
    assert r.copy_start.tolist() == pytest.approx([0.3])  # after the last iteration
    assert r.latency_s == pytest.approx(2.3)


def test_copy_out_blocks_the_reuse_of_its_memory_in_the_next_iteration() -> None:
    # loop body (2 iterations): i0 (0.2 s), i1 updates X0 in place into X1 (one alias
    # group), i2 (0.5 s). X0 is prefetched during i0, X1 (a result) copied out during
    # i2. The next iteration's prefetch of X0 into the same bytes must wait for the
    # copy-out: i0 of iteration 2 waits.
    doc = build_doc(
        [X(100), X(100, live_out=True)],
        [
            I(count=2, latency=roofline(compute_s=0.2)),
            I(reads=[B(0, alias="c")], writes=[B(1, alias="c")], count=2),
            I(count=2, latency=roofline(compute_s=0.5)),
        ],
    )
    inst = _with_loops(doc, [(0, 2, 2)])
    allocs = _play(inst, [COPY, COPY])
    assert [(a.offset, a.start, a.end, a.copy) for a in allocs] == [
        (0, 0, 1, (0, 0)),
        (0, 1, 2, (2, 2)),
    ]
    r = simulate(inst, allocs)
    # iteration 1: i0 [0, 0.2], prefetch [0, 1], i1 [1, 1.2], copy-out [1.2, 2.2], i2 [1.2, 1.7]
    # iteration 2: i0 waits for the copy-out: [2.2, 2.4], prefetch [2.2, 3.2], i1 [3.2, 3.4],
    # copy-out [3.4, 4.4], i2 [3.4, 3.9]; the last copy-out drains until 4.4
    assert r.exec_start.tolist() == pytest.approx([0, 1, 1.2, 2.2, 3.2, 3.4])
    assert r.copy_start.tolist() == pytest.approx([0, 1.2, 2.2, 3.4])
    assert r.copy_is_out.tolist() == [False, True, False, True]
    assert r.stall_s == pytest.approx(0.8 + 0.5 + 0.8)
    assert r.latency_s == pytest.approx(4.4)
    assert r.drain_s == pytest.approx(0.5)
    _consistent(r)


def test_a_copy_out_in_a_loop_ends_before_the_next_iteration_writes_the_tensor_again() -> None:
    # loop body (3 iterations): i0 writes X0 (copied out during i1, 1 s), i1 (0.1 s);
    # i2 reads X0 after the loop. Each iteration's i0 writes a new X0 into the bytes the
    # last copy-out reads: it waits for that copy-out.
    doc = build_doc(
        [X(100)],
        [
            I(writes=[0], count=3, latency=roofline(compute_s=0.1)),
            I(count=3, latency=roofline(compute_s=0.1)),
            I(reads=[0], latency=roofline(compute_s=0.1)),
        ],
    )
    inst = _with_loops(doc, [(0, 1, 3)])
    allocs = _play(inst, [COPY, DROP])
    assert [(a.start, a.end, a.copy) for a in allocs if a.action == "Copy"] == [(0, 1, (1, 1))]
    r = simulate(inst, allocs)
    # iteration k (k = 0, 1, 2): i0 starts when the copy-out of iteration k - 1 is done;
    # i2 reads X0 from slow memory once the last copy-out is done, 1 s
    assert r.exec_step.tolist() == [0, 1, 0, 1, 0, 1, 2]
    assert r.exec_start.tolist() == pytest.approx([0, 0.1, 1.1, 1.2, 2.2, 2.3, 3.3])
    assert r.copy_start.tolist() == pytest.approx([0.1, 1.2, 2.3])
    assert r.stall_s == pytest.approx(3 * 0.9)
    assert r.latency_s == pytest.approx(4.3)
    _consistent(r)


def test_unroll_nested_loops_and_overlap_error() -> None:
    doc = build_doc([X(1)], [I(count=1), I(count=6), I(count=6), I(count=2), I(count=1)])
    inst = _with_loops(doc, [(1, 3, 2), (1, 2, 3)])
    steps, _ = unroll(inst)
    assert steps.tolist() == [0] + ([1, 2] * 3 + [3]) * 2 + [4]
    assert simulate(inst, []).latency_s == pytest.approx(_slow_sum(inst))
    bad = _with_loops(doc, [(1, 2, 2), (2, 3, 2)])
    with pytest.raises(ValueError, match="overlap"):
        simulate(bad, [])


def test_a_program_past_max_executions_is_refused_with_its_true_count() -> None:
    doc = build_doc([X(100), X(100, live_out=True)], [I(reads=[0], writes=[1], count=2**31 - 1)])
    inst = _with_loops(doc, [(0, 0, 2**31 - 1)])
    with pytest.raises(SimulationError, match=r"has 2147483647 executions \(more than 20000000\)$"):
        unroll(inst)
    nested = _with_loops(doc, [(0, 0, 2**31 - 1)] * 2)  # (2**31 - 1)**2 executions
    with pytest.raises(SimulationError, match=rf"has {(2**31 - 1) ** 2} executions"):
        simulate(nested, [])
    deep = _with_loops(doc, [(0, 0, 2**31 - 1)] * 5)
    with pytest.raises(
        SimulationError, match=rf"has more than 2\*\*64 executions \(more than {2**70}\)"
    ):
        simulate(deep, [], max_executions=2**70)  # an int64 overflow was an OverflowError
    for limit, needle in [(-5, "max_executions must be >= 0, not -5"), (2.0, "whole number")]:
        with pytest.raises(SimulationError, match=needle):
            simulate(inst, [], max_executions=limit)
        with pytest.raises(SimulationError, match=needle):
            unroll(inst, limit)
    small = _with_loops(build_doc([X(1)], [I(count=3)]), [(0, 0, 3)])
    assert unroll(small, 3)[0].tolist() == [0, 0, 0]
    with pytest.raises(SimulationError, match=r"has 3 executions \(more than 2\)"):
        unroll(small, 2)
    assert simulate(small, [], max_executions=2**70).num_executions == 3


def test_unknown_buffer_is_an_error() -> None:
    inst, allocs = _copy_out_then_reuse(NOCOPY)
    with pytest.raises(SimulationError, match="unknown buffer"):
        simulate(inst, [allocs[0].__class__(99, "Copy", 0, 0, 1, (1, 1))])


def test_bad_arguments_are_simulation_errors() -> None:
    inst, allocs = _copy_out_then_reuse(NOCOPY)
    for share, needle in [(1.5, "copy_share must lie in"), ("abc", "copy_share must be a number")]:
        with pytest.raises(SimulationError, match=needle):
            simulate(inst, allocs, copy_share=share)
    with pytest.raises(SimulationError, match="max_executions must be a whole number"):
        simulate(inst, allocs, max_executions="x")
    for t in (-1, inst.num_instructions, 10**6):
        with pytest.raises(SimulationError, match="outside 0"):
            execution_time(inst, t, ())
    for scale in (-1.0, float("nan"), float("inf"), "2"):
        with pytest.raises(SimulationError, match="scale must be a finite number"):
            execution_time(inst, 0, (), scale=scale)
    assert execution_time(inst, np.int64(0), ()) == execution_time(inst, 0, ())
    # a NaN or infinite start returned NaN; bad fast sets and periods raised TypeError or
    # were used as they were (a reversed period ignored)
    for start in (float("nan"), float("inf"), "0", True):
        with pytest.raises(SimulationError, match="start must be a finite number"):
            execution_time(inst, 0, (), start=start)
    with pytest.raises(SimulationError, match="fast must be a collection"):
        execution_time(inst, 0, None)
    # ids that are not buffers were left out without a word (all slow)
    for fast in ({"0"}, "01", {0.5}, {True}, {inst.num_buffers}, {-1}):
        with pytest.raises(SimulationError, match="not a buffer id"):
            execution_time(inst, 0, fast)
    # an int past a float's range raised OverflowError
    with pytest.raises(SimulationError, match="start must be a finite number"):
        execution_time(inst, 0, (), start=10**400)
    with pytest.raises(SimulationError, match="is not a pair of finite numbers"):
        execution_time(inst, 0, (), busy=[(0, 10**400)])
    for busy, needle in [
        ([("a", "b")], "is not a pair of finite numbers"),
        ([(0.0, float("nan"))], "is not a pair of finite numbers"),
        ([(0.5, 0.2)], "is not a pair of finite numbers"),
        ([(0.0, 1.0, 2.0)], "is not a pair of finite numbers"),
        ([(0.0, 0.5), (0.2, 0.6)], "overlap"),
        ([1.0], "busy must be"),
    ]:
        with pytest.raises(SimulationError, match=needle):
            execution_time(inst, 0, (), busy=busy)
    touching = [(0.0, 0.5), (0.5, 1.0)]
    assert execution_time(inst, 0, (), busy=iter(touching)) == execution_time(
        inst, 0, (), busy=[(0.0, 1.0)]
    )


# ------------------------------------------------------------------------------ monotone


def _scale(inst: Instance, r, t: int) -> float:
    mult = np.bincount(r.exec_step, minlength=inst.num_instructions)
    return inst.instructions[t].count / mult[t]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(20, 160),
    inst_seed=st.integers(0, 10_000),
    sol_seed=st.integers(0, 10_000),
    loop=st.booleans(),
)
def test_faster_memory_never_makes_an_instruction_slower(
    n: int, inst_seed: int, sol_seed: int, loop: bool
) -> None:
    inst = synthetic.generate(n, inst_seed, loop=loop)
    sol = get_solver("random").solve(inst, SolveRequest(seed=sol_seed))
    r = simulate(inst, sol)
    busy = r.busy_intervals()
    fast = {a.buffer for a in sol.allocations}
    for k, t in enumerate(r.exec_step.tolist()):
        scale = _scale(inst, r, t)
        mine = {b for b in inst.instructions[t].buffers if b in fast}
        dur = r.exec_end[k] - r.exec_start[k]
        start = r.exec_start[k]
        # the simulated execution is the model's execution time ...
        again = execution_time(inst, t, mine, start, busy, scale=scale)
        assert again == pytest.approx(dur, rel=1e-9, abs=1e-18)
        # ... never shorter than with the engine idle, which is scale * L_t(S_t)
        idle = execution_time(inst, t, mine, start, (), scale=scale)
        assert idle <= dur * (1 + 1e-12) + 1e-18
        assert idle == pytest.approx(
            instruction_latency(inst, t, mine) / inst.instructions[t].count * scale
        )
        # ... and each of its fast buffers, put back in slow memory, makes it no faster
        for b in mine:
            slower = execution_time(inst, t, mine - {b}, start, busy, scale=scale)
            assert slower >= dur * (1 - 1e-12) - 1e-18
        everything_slow = execution_time(inst, t, set(), start, busy, scale=scale)
        assert everything_slow >= dur * (1 - 1e-12) - 1e-18
    _consistent(r)


# ------------------------------------------------------------------------ speedup numbers


@pytest.mark.parametrize(
    "name", ["xla-v1/alexnet_train_b32", "xla-v1/lstm_infer", "synthetic-v1/1k"]
)
def test_speedup_of_drop_is_one(name: str) -> None:
    inst = load_workload(name)
    sol = get_solver("drop").solve(inst, SolveRequest(seed=0))
    assert speedup(inst, sol) == 1.0


def test_speedup_of_a_zero_latency_mapping() -> None:
    # each instruction takes 1 s with its buffer slow, 0 s with it fast
    zero_fast = table([0], [1.0, 0.0])
    inst = build([X(100)], [I(writes=[0], latency=zero_fast), I(reads=[0], latency=zero_fast)])
    allocs = _play(inst, [NOCOPY, NOCOPY])
    assert simulate(inst, allocs).latency_s == 0.0 and baseline_latency(inst) == 2.0
    assert speedup(inst, allocs) == math.inf  # not 1.0: the mapping saved all 2 s
    free = table([0], [0.0, 0.0])
    inst = build([X(100)], [I(writes=[0], latency=free), I(reads=[0], latency=free)])
    assert speedup(inst, _play(inst, [NOCOPY, NOCOPY])) == 1.0  # 0 s against 0 s


def test_random_solutions_speed_up_most_suite_programs() -> None:
    names = suite_names(SUITE)
    speedups = []
    for name in names:
        inst = load_workload(name)
        sol = get_solver("random").solve(inst, SolveRequest(seed=0))
        r = simulate(inst, sol)
        _consistent(r)
        speedups.append(baseline_latency(inst) / r.latency_s)
    faster = sum(s > 1.0 for s in speedups)
    assert faster >= math.ceil(0.75 * len(names)), dict(zip(names, speedups))


def test_reward_correlates_negatively_with_latency() -> None:
    inst = load_workload("xla-v1/transformer_train")
    rewards, latencies = [], []
    for seed in range(12):
        sol = get_solver("random").solve(inst, SolveRequest(seed=seed))
        rewards.append(sol.reward_s)
        latencies.append(simulate(inst, sol).latency_s)
    assert np.corrcoef(rewards, latencies)[0, 1] < -0.5


@pytest.mark.parametrize("mapping", [None, 42, "Copy", {"buffer": 0}, [None], [{"buffer": 0}]])
def test_what_is_not_a_solution_or_allocations_is_a_solution_error(small, mapping) -> None:
    from mallocgame.errors import SolutionError

    with pytest.raises(SolutionError, match=r"^simulate: expected a Solution or its allocations"):
        simulate(small, mapping)


def test_what_is_not_an_instance_is_an_instance_error() -> None:
    from mallocgame.errors import InstanceError

    with pytest.raises(InstanceError, match=r"^simulate: expected an Instance, not None$"):
        simulate(None, [])
