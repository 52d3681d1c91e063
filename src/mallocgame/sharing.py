"""Many copies of one program on one machine: the machine one task sees, and Memory Mode.

The MARL report runs ``N`` WideResNet-101 inference tasks at once on a 32-core Xeon
socket with 16 GB of DRAM and 128 GB of Optane persistent memory and plots the latency
of one task against ``N`` (papers/marl-heterogeneous-memory.txt, Figures 3, 10, 11).
A :class:`SharedMachine` holds the figures of such a socket beside its
:class:`~mallocgame.hardware.HardwarePreset` (one task's machine when it runs alone).

:func:`task_preset` is the machine each of ``N`` identical tasks sees:

- compute: one core, ``peak_flops / cores`` (and the same for transcendentals); with
  more tasks than cores, cores are time-shared: ``peak_flops / N``;
- each bandwidth (fast, slow, copy): ``min(core_share, total / N)``, where
  ``core_share`` is what one core can draw (``core_*_bandwidth``, scaled by
  ``cores / N`` when cores are time-shared): one task cannot draw the socket's whole
  bandwidth, and ``N`` tasks share it evenly once they saturate it;
- fast memory: the DRAM left to the tasks, split evenly
  (``floor_to_alignment(fast_memory_bytes / N)``).

Placements that need no solver, for ``N`` tasks:

- :func:`dram_only_latency`: MARL's "DRAM only" machine (128 GB of DRAM, the ideal):
  every buffer at the fast bandwidth, no copies.
- :func:`memory_mode_latency`: Intel's Memory Mode, the DRAM a direct-mapped cache of
  64-byte lines in front of the persistent memory, shared by all tasks. An access hits
  if no other line mapped to its set was touched since the line's previous access;
  with pages placed at random, ``d`` distinct bytes touched in between (by all tasks)
  leave it in the cache with probability ``(1 - 64/C)^(d/64) ≈ exp(-d / C)``, ``C``
  the cache's bytes. ``d`` is ``N`` times the distinct bytes the task itself touched
  since its previous access to the tensor (a reuse distance: the sizes of the distinct
  tensors its instructions touched in between, at most its peak live bytes ``F``); a
  tensor's first access in a run (a weight, a new activation's memory) was last
  touched one run earlier: ``d = N * F`` (the allocator reuses a run's addresses, so a
  run touches about ``F`` distinct bytes). A hit moves at the fast bandwidth, a miss at
  the slow one. Not modelled: the fill and write-back traffic of misses beyond the
  slow bandwidth's read/write mix, the system's own memory in the cache, loop bodies'
  reuse (an instruction's ``count`` multiplies its latency).

:func:`tasks_that_fit` is MARL's Figure 10: how many tasks' memory fits each mode's
main memory, whatever their latency.

Units: bytes, bytes/s, flop/s, seconds.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from mallocgame.costmodel import peak_live_bytes
from mallocgame.errors import InstanceError
from mallocgame.hardware import DRAM_PMEM, GIB, HardwarePreset
from mallocgame.instance import Instance, RooflineLatency

__all__ = [
    "SharedMachine",
    "MARL_SOCKET",
    "task_preset",
    "dram_only_latency",
    "memory_mode_latency",
    "memory_mode_hit_rates",
    "reuse_distances",
    "tasks_that_fit",
]

_LINE = 64  # bytes of a Memory Mode cache line


def _is_real(value: object) -> bool:
    """Whether ``value`` is a real number and not a bool (``True`` is no bandwidth)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _whole(value: object, what: str, least: int) -> int:
    """``value`` as an ``int`` if it is a whole number (an integer type, numpy's
    included; not a bool, not a float, so never NaN or an infinity) of at least
    ``least``; :class:`~mallocgame.errors.InstanceError` naming ``what`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        raise InstanceError(f"{what} must be a whole number >= {least}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class SharedMachine:
    """A socket that many tasks share (see the module docstring for the model).

    ``preset`` is one task's machine when it runs alone with the whole socket's
    bandwidth; its ``fast_memory_bytes`` is the DRAM left to the tasks.
    """

    preset: HardwarePreset
    cores: int
    core_fast_bandwidth: float  # bytes/s one core draws from the fast memory
    core_slow_bandwidth: float  # bytes/s one core draws from the slow memory
    core_copy_bandwidth: float  # bytes/s of copies one core drives
    fast_total_bytes: int  # the whole fast memory (DRAM), the system's share included
    slow_total_bytes: int  # the whole slow memory (persistent memory)
    system_bytes: int  # what the system itself keeps in main memory
    sources: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.cores, bool) or not (isinstance(self.cores, int) and self.cores >= 1):
            raise InstanceError(
                f"shared machine: cores must be a positive integer, got {self.cores!r}"
            )
        for key in ("core_fast_bandwidth", "core_slow_bandwidth", "core_copy_bandwidth"):
            value = getattr(self, key)
            if not (_is_real(value) and math.isfinite(value) and value > 0):
                raise InstanceError(f"shared machine: {key} must be finite and > 0, got {value!r}")
        for key in ("fast_total_bytes", "slow_total_bytes", "system_bytes"):
            _whole(getattr(self, key), f"shared machine: {key}", 0 if key == "system_bytes" else 1)
        if not 0 <= self.system_bytes < self.fast_total_bytes:
            raise InstanceError("shared machine: system_bytes must be below the fast memory's size")
        if not self.system_bytes < self.slow_total_bytes:  # else a negative count of tasks fits
            raise InstanceError("shared machine: system_bytes must be below the slow memory's size")


_IZRAELEVITZ = (
    "Izraelevitz et al., 'Basic Performance Measurements of the Intel Optane DC Persistent "
    "Memory Module', arXiv:1903.05714 (2019)"
)
_MARL = "the MARL report (papers/marl-heterogeneous-memory.txt), sections 3.1, 4 and 6.2"

# One thread's share of the Optane bandwidth: reads scale with threads up to 39.4 GB/s at
# 17 threads, writes saturate at 13.9 GB/s with 4; a 2:1 read:write byte mix as the preset.
_CORE_PM_READ = 39.4e9 / 17
_CORE_PM_WRITE = 13.9e9 / 4
_CORE_PM_MIXED = 1.0 / ((2.0 / 3.0) / _CORE_PM_READ + (1.0 / 3.0) / _CORE_PM_WRITE)

MARL_SOCKET = SharedMachine(
    preset=DRAM_PMEM,
    cores=32,
    core_fast_bandwidth=12.5e9,
    core_slow_bandwidth=_CORE_PM_MIXED,
    core_copy_bandwidth=_CORE_PM_WRITE,
    fast_total_bytes=16 * GIB,
    slow_total_bytes=128 * GIB,
    system_bytes=14 * GIB,
    sources=(
        f"cores: 32 ('We ran until 32 tasks to saturate CPU cores (32)') -- {_MARL}",
        f"fast_total_bytes, slow_total_bytes: 16 GB DRAM and 128 GB PM -- {_MARL}",
        f"system_bytes: 'Xeon CPU requires about 14GB of system memory' -- {_MARL}",
        f"core_slow_bandwidth: Optane reads scale with threads to 39.4 GB/s at 17 threads "
        f"(2.32 GB/s a thread), writes saturate at 13.9 GB/s with 4 threads (3.48 GB/s a thread); "
        f"their 2:1 harmonic mean, 2.61 GB/s -- {_IZRAELEVITZ}",
        "core_copy_bandwidth: one thread's share of the saturated write bandwidth, "
        f"3.48 GB/s -- {_IZRAELEVITZ}",
    ),
    assumptions=(
        "one task a core: MARL's DRAM-only runtimes stay flat from 1 to 32 tasks, which a task "
        "using every core could not do",
        "core_fast_bandwidth: 12.5 GB/s, the socket's ~100 GB/s reached by 8 cores (single-core "
        "DRAM bandwidth on Xeon Scalable parts is 10-15 GB/s); not measured on MARL's machine",
        "per-core bandwidths are the saturated bandwidth divided by the threads that saturate it "
        "(linear scaling up to saturation)",
        "Memory Mode: the whole 16 GB of DRAM caches the tasks' data; the system's own memory is "
        "assumed cold",
    ),
)
"""MARL's machine: one 32-core Xeon socket, 16 GB DRAM, 128 GB Optane DC (App Direct)."""


def _check_tasks(tasks: object) -> int:
    return _whole(tasks, "the number of tasks", 1)


def task_preset(machine: SharedMachine, tasks: int) -> HardwarePreset:
    """The machine one of ``tasks`` identical tasks sees (module docstring), named
    ``"{preset}/{tasks}tasks"``; :class:`~mallocgame.errors.InstanceError` unless ``tasks``
    is a whole number >= 1."""
    tasks = _check_tasks(tasks)
    hw = machine.preset
    share = min(1.0, machine.cores / tasks)  # of one core
    align = hw.alignment_bytes
    fast_bytes = max(align, (hw.fast_memory_bytes // tasks) // align * align)
    return replace(
        hw,
        name=f"{hw.name}/{tasks}tasks",
        fast_memory_bytes=fast_bytes,
        fast_bandwidth=min(share * machine.core_fast_bandwidth, hw.fast_bandwidth / tasks),
        slow_bandwidth=min(share * machine.core_slow_bandwidth, hw.slow_bandwidth / tasks),
        copy_bandwidth=min(share * machine.core_copy_bandwidth, hw.copy_bandwidth / tasks),
        peak_flops=hw.peak_flops / max(machine.cores, tasks),
        peak_transcendentals=hw.peak_transcendentals / max(machine.cores, tasks),
        description=f"one of {tasks} tasks sharing: {hw.description}",
    )


def dram_only_latency(instance: Instance) -> float:
    """One task's latency with every buffer in fast memory and no copies (seconds)."""
    return _latency(instance, np.ones(instance.num_buffers))


def reuse_distances(instance: Instance) -> np.ndarray:
    """Per buffer, the distinct bytes the task touches between its previous access to
    the buffer's tensor and this one (float [B]; a tensor's first access in a run:
    ``inf``, to be read as one run). Tensors count at their size; an instruction
    touches the tensors of all its buffers."""
    num_t = instance.num_instructions
    sizes = np.array([x.size for x in instance.tensors], dtype=np.float64)
    # Fenwick tree over time steps: the size of each tensor at its latest access step.
    tree = np.zeros(num_t + 1, dtype=np.float64)

    def add(i: int, value: float) -> None:
        i += 1
        while i <= num_t:
            tree[i] += value
            i += i & -i

    def prefix(i: int) -> float:  # sum over steps < i
        total = 0.0
        while i > 0:
            total += tree[i]
            i -= i & -i
        return total

    last = np.full(len(sizes), -1, dtype=np.int64)
    out = np.full(instance.num_buffers, np.inf)
    for t, ins in enumerate(instance.instructions):
        touched = []
        for b in ins.buffers:
            x = instance.buffers[b].tensor_id
            p = int(last[x])
            if p >= 0:
                out[b] = prefix(t) - prefix(p + 1)  # tensors last touched in (p, t)
            touched.append(x)
        for x in dict.fromkeys(touched):
            if last[x] >= 0:
                add(int(last[x]), -sizes[x])
            add(t, sizes[x])
            last[x] = t
    return out


def memory_mode_hit_rates(instance: Instance, tasks: int, cache_bytes: int) -> np.ndarray:
    """Per buffer, the probability that its access hits the DRAM cache when ``tasks``
    copies of ``instance`` share ``cache_bytes`` of it (float [B]; module docstring).
    :class:`~mallocgame.errors.InstanceError` unless ``tasks`` and ``cache_bytes`` are
    whole numbers >= 1 (not a bool, a float, NaN or an infinity)."""
    tasks = _check_tasks(tasks)
    cache_bytes = _whole(cache_bytes, "cache_bytes", 1)
    footprint = float(peak_live_bytes(instance))
    own = np.minimum(reuse_distances(instance), footprint)
    lines = tasks * own / _LINE
    if cache_bytes < _LINE:  # not one line of cache: nothing hits
        return np.zeros_like(own)
    return np.power(1.0 - _LINE / cache_bytes, lines)  # a cache of one line: reuse 0 hits


def memory_mode_latency(instance: Instance, tasks: int, cache_bytes: int) -> float:
    """One task's latency in Memory Mode (seconds): each buffer's bytes at the fast
    bandwidth with its hit rate, at the slow bandwidth otherwise; no copies.
    :class:`~mallocgame.errors.InstanceError` as :func:`memory_mode_hit_rates`."""
    return _latency(instance, memory_mode_hit_rates(instance, tasks, cache_bytes))


def _latency(instance: Instance, fast_fraction: np.ndarray) -> float:
    """``sum_t count * (fixed + max(compute, sum_b size_b * (f_b / fast + (1 - f_b) / slow)))``
    with ``f_b`` the fraction of ``b``'s bytes served by the fast memory (roofline
    instructions; a table latency counts a buffer fast when ``f_b >= 0.5``)."""
    hw = instance.hardware
    total = 0.0
    for ins in instance.instructions:
        lat = ins.latency
        if isinstance(lat, RooflineLatency):
            mem = 0.0
            for b in ins.buffers:
                f = fast_fraction[b]
                mem += instance.buffers[b].size * (
                    f / hw.fast_bandwidth + (1.0 - f) / hw.slow_bandwidth
                )
            one = lat.fixed_s + max(lat.compute_s, mem)
        else:
            mask = sum(1 << i for i, b in enumerate(lat.varied) if fast_fraction[b] >= 0.5)
            one = lat.latency_s[mask]
        total += ins.count * one
    return total


def tasks_that_fit(machine: SharedMachine, task_bytes: int) -> Mapping[str, int]:
    """How many tasks of ``task_bytes`` each fit in main memory, by mode (MARL's Figure 10):

    - ``"app-direct"``: only the DRAM is main memory (what the system leaves of it);
    - ``"memory-mode"``: the persistent memory is main memory, the DRAM its cache;
    - ``"both"``: DRAM and persistent memory are both main memory (MARL, and every
      placement of this project).

    :class:`~mallocgame.errors.InstanceError` unless ``task_bytes`` is a whole number
    >= 1 (not a bool, a float, NaN or an infinity): each count is a whole number.
    """
    task_bytes = _whole(task_bytes, "task_bytes", 1)
    left = machine.fast_total_bytes - machine.system_bytes
    return {
        "app-direct": left // task_bytes,
        "memory-mode": (machine.slow_total_bytes - machine.system_bytes) // task_bytes,
        "both": (machine.fast_total_bytes + machine.slow_total_bytes - machine.system_bytes)
        // task_bytes,
    }
