"""The machine one of N tasks sees, Memory Mode's cache model and Figure 10's counts, by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mallocgame.costmodel import derive_instance, peak_live_bytes
from mallocgame.errors import InstanceError
from mallocgame.hardware import DRAM_PMEM, GIB
from mallocgame.latency import instruction_latency
from mallocgame.sharing import (
    MARL_SOCKET,
    SharedMachine,
    dram_only_latency,
    memory_mode_hit_rates,
    memory_mode_latency,
    reuse_distances,
    task_preset,
    tasks_that_fit,
)
from mallocgame.simulate import baseline_latency
from tests.builders import I, X, build, tiny_program


def test_one_task_has_a_core_and_the_bandwidth_one_core_draws() -> None:
    hw = task_preset(MARL_SOCKET, 1)
    assert hw.name == "dram_pmem/1tasks"
    assert hw.fast_memory_bytes == 2 * GIB
    assert hw.peak_flops == pytest.approx(DRAM_PMEM.peak_flops / 32)
    assert hw.fast_bandwidth == 12.5e9  # a core's, below the socket's 100 GB/s
    # one thread's share of Optane: 39.4/17 GB/s reads, 13.9/4 GB/s writes, mixed 2:1
    assert hw.slow_bandwidth == pytest.approx(
        1 / ((2 / 3) / (39.4e9 / 17) + (1 / 3) / (13.9e9 / 4))
    )
    assert hw.copy_bandwidth == pytest.approx(13.9e9 / 4)


def test_many_tasks_split_the_dram_and_share_the_saturated_bandwidth() -> None:
    hw = task_preset(MARL_SOCKET, 16)
    assert hw.fast_memory_bytes == 2 * GIB // 16
    assert hw.fast_bandwidth == pytest.approx(100e9 / 16)  # 16 cores would draw 200 GB/s
    assert hw.slow_bandwidth == pytest.approx(24.4e9 / 16)
    assert hw.peak_flops == pytest.approx(DRAM_PMEM.peak_flops / 32)  # still a core each


def test_more_tasks_than_cores_time_share_them() -> None:
    hw = task_preset(MARL_SOCKET, 64)
    assert hw.peak_flops == pytest.approx(DRAM_PMEM.peak_flops / 64)
    assert hw.fast_bandwidth == pytest.approx(100e9 / 64)
    assert hw.fast_memory_bytes % DRAM_PMEM.alignment_bytes == 0


@pytest.mark.parametrize("tasks", [0, -1, 2.5, True, 2.0, math.nan, math.inf, "2"])
def test_a_bad_number_of_tasks_is_refused(tasks: object) -> None:
    with pytest.raises(InstanceError, match="number of tasks"):
        task_preset(MARL_SOCKET, tasks)  # type: ignore[arg-type]


def test_a_machine_with_impossible_figures_is_refused() -> None:
    with pytest.raises(InstanceError, match="cores"):
        SharedMachine(DRAM_PMEM, 0, 1.0, 1.0, 1.0, 16 * GIB, 128 * GIB, GIB)
    with pytest.raises(InstanceError, match="core_slow_bandwidth"):
        SharedMachine(DRAM_PMEM, 4, 1.0, math.nan, 1.0, 16 * GIB, 128 * GIB, GIB)
    with pytest.raises(InstanceError, match="system_bytes"):
        SharedMachine(DRAM_PMEM, 4, 1.0, 1.0, 1.0, 16 * GIB, 128 * GIB, 16 * GIB)
    with pytest.raises(InstanceError, match="below the slow memory's size"):
        SharedMachine(DRAM_PMEM, 4, 1.0, 1.0, 1.0, 16 * GIB, 1, GIB)  # tasks would fit -14
    with pytest.raises(InstanceError, match="cores"):
        SharedMachine(DRAM_PMEM, True, 1.0, 1.0, 1.0, 16 * GIB, 128 * GIB, GIB)


def _chain():
    """t0 writes x (100 B); t1 writes y (50 B); t2 reads x; t3 reads y and x."""
    return build(
        tensors=[X(100), X(50), X(10), X(10, live_out=True)],
        instructions=[
            I(writes=[0]),
            I(writes=[1]),
            I(reads=[0], writes=[2]),
            I(reads=[1, 0], writes=[3]),
        ],
    )


def test_reuse_distance_is_the_distinct_bytes_touched_in_between() -> None:
    inst = _chain()
    d = reuse_distances(inst)
    by = {(b.instruction, b.tensor_id): d[b.id] for b in inst.buffers}
    assert by[(0, 0)] == math.inf and by[(1, 1)] == math.inf  # first accesses in a run
    assert by[(2, 0)] == 50  # y was touched between x's write and this read
    assert by[(3, 1)] == 100 + 10  # x and t2's output since y was written
    assert by[(3, 0)] == 0  # read again right after t2 read it


def test_hit_rates_follow_the_direct_mapped_cache_formula() -> None:
    inst = _chain()
    footprint = peak_live_bytes(inst)
    cache = 6400
    rates = memory_mode_hit_rates(inst, 3, cache)
    d = np.minimum(reuse_distances(inst), footprint)
    np.testing.assert_allclose(rates, (1 - 64 / cache) ** (3 * d / 64))
    assert rates[inst.buffers[0].id] == pytest.approx((1 - 64 / cache) ** (3 * footprint / 64))
    more = memory_mode_hit_rates(inst, 6, cache)
    assert np.all(more <= rates) and np.any(more < rates)  # more tasks, more conflicts


def test_memory_mode_lies_between_all_slow_and_all_fast() -> None:
    inst = derive_instance(tiny_program(), task_preset(MARL_SOCKET, 2), capacity_fraction=None)
    slow, fast = baseline_latency(inst), dram_only_latency(inst)
    assert memory_mode_latency(inst, 2, 63) == pytest.approx(slow)  # no line: nothing ever hits
    # one line: only an access with nothing touched since its last one hits, (1 - 64/64)^0
    rates = memory_mode_hit_rates(inst, 2, 64)
    assert set(np.unique(rates)) <= {0.0, 1.0}
    assert np.array_equal(rates == 1.0, reuse_distances(inst) == 0)
    assert memory_mode_latency(inst, 2, 64) <= slow
    assert fast < memory_mode_latency(inst, 2, 1 << 20) < slow
    assert memory_mode_latency(inst, 2, 1 << 40) == pytest.approx(fast, rel=1e-6)
    ideal = sum(
        instruction_latency(inst, t, frozenset(ins.buffers))
        for t, ins in enumerate(inst.instructions)
    )
    assert fast == pytest.approx(ideal)


@pytest.mark.parametrize("cache_bytes", [0, -64, math.nan, math.inf, 2.0**30, True])
def test_memory_mode_refuses_a_cache_that_is_no_whole_number_of_bytes(cache_bytes) -> None:
    with pytest.raises(InstanceError, match="cache_bytes must be a whole number >= 1"):
        memory_mode_hit_rates(_chain(), 1, cache_bytes)
    with pytest.raises(InstanceError, match="cache_bytes"):
        memory_mode_latency(_chain(), 2, cache_bytes)
    with pytest.raises(InstanceError, match="number of tasks"):
        memory_mode_latency(_chain(), math.nan, 64)  # type: ignore[arg-type]
    assert memory_mode_latency(_chain(), np.int64(2), np.int64(2**30)) == memory_mode_latency(
        _chain(), 2, 2**30
    )


def test_tasks_that_fit_each_mode() -> None:
    # MARL: a 1.5 GB task; 2 GB of DRAM left; 128 GB of PM; 14 GB for the system
    fit = tasks_that_fit(MARL_SOCKET, 3 * GIB // 2)
    assert fit == {"app-direct": 1, "memory-mode": (114 * 2) // 3, "both": (130 * 2) // 3}
    for bad in (0, -1, math.nan, math.inf, 0.5, 3.0 * GIB, True):
        with pytest.raises(InstanceError, match="task_bytes must be a whole number >= 1"):
            tasks_that_fit(MARL_SOCKET, bad)
    assert tasks_that_fit(MARL_SOCKET, np.int64(3 * GIB // 2)) == fit


def test_a_machine_of_no_whole_number_of_bytes_is_refused() -> None:
    for bad in (math.inf, math.nan, 16.0 * GIB, True):
        with pytest.raises(InstanceError, match="fast_total_bytes must be a whole number"):
            SharedMachine(DRAM_PMEM, 4, 1.0, 1.0, 1.0, bad, 128 * GIB, GIB)
        with pytest.raises(InstanceError, match="slow_total_bytes must be a whole number"):
            SharedMachine(DRAM_PMEM, 4, 1.0, 1.0, 1.0, 16 * GIB, bad, GIB)
    with pytest.raises(InstanceError, match="core_fast_bandwidth"):
        SharedMachine(DRAM_PMEM, 4, True, 1.0, 1.0, 16 * GIB, 128 * GIB, GIB)


def test_the_machine_cites_its_figures() -> None:
    cited = " ".join(MARL_SOCKET.sources)
    assumed = " ".join(MARL_SOCKET.assumptions)
    assert "Izraelevitz" in cited and "MARL" in cited
    for figure in ("cores", "core_slow_bandwidth", "core_copy_bandwidth", "system_bytes"):
        assert figure in cited, figure
    assert "core_fast_bandwidth" in assumed
