"""Time a placed program: median step time, spread, peak HBM, and whether results match.

:func:`measure` prepares a :class:`~mallocgame.runtime.torch_run.PlacedRunner` (inputs
where the plan starts them, outside the timing), runs it ``warmup`` times, at least once
(the first run is the checked one: its results are compared with ``reference``, exactly),
then times ``steps`` runs one by one
(each run issued, then waited for: CUDA events on a GPU, the wall clock on the CPU) and
reports the median and the 10th / 90th percentiles in seconds, and the peak fast-memory
bytes allocated during the timed runs above what was allocated before the runner was
prepared (the framework default's resident inputs are therefore counted; None where the
backend cannot tell, the CPU stand-in).
:func:`hbm_over_plan` runs a plan once more and says, step by step, how much fast memory
the run held beyond what the plan holds there.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mallocgame.runtime.memory import HostTensor, Memory
from mallocgame.runtime.plan import PlacementPlan
from mallocgame.runtime.torch_graph import BoundGraph
from mallocgame.runtime.torch_run import PlacedRunner

__all__ = [
    "Measurement",
    "measure",
    "hbm_over_plan",
    "warm_and_time",
    "check_runs",
    "compare_results",
]


@dataclass(frozen=True)
class Measurement:
    """One placement's timing (seconds), memory (bytes) and result check."""

    steps: int
    median_s: float
    p10_s: float
    p90_s: float
    peak_hbm_bytes: int | None  # None: the backend cannot tell (the CPU stand-in)
    identical: bool  # every result equal to the reference, element for element (NaN to NaN)
    max_abs_diff: float
    staged: tuple[str, ...]  # nodes whose host-memory outputs went through HBM
    staged_why: tuple[str, ...] = ()  # per staged op: "op: why", its first refusal
    dot_staged_bytes: int = 0  # host operands copied to HBM for matmuls, per run

    @classmethod
    def of(
        cls,
        times: list[float],
        *,
        peak_hbm_bytes: int | None,
        identical: bool,
        max_abs_diff: float,
        staged: tuple[str, ...] = (),
        staged_why: tuple[str, ...] = (),
        dot_staged_bytes: int = 0,
    ) -> Measurement:
        """The measurement of the timed runs ``times`` (seconds, at least one)."""
        arr = np.asarray(times)
        return cls(
            steps=len(times),
            median_s=float(np.median(arr)),
            p10_s=float(np.percentile(arr, 10)),
            p90_s=float(np.percentile(arr, 90)),
            peak_hbm_bytes=None if peak_hbm_bytes is None else int(peak_hbm_bytes),
            identical=identical,
            max_abs_diff=max_abs_diff,
            staged=staged,
            staged_why=staged_why,
            dot_staged_bytes=int(dot_staged_bytes),
        )

    def peak_hbm_text(self) -> str:
        """The peak HBM as the logs print it: ``"12.3 MiB"``, ``"n/a"`` where not measured."""
        if self.peak_hbm_bytes is None:
            return "n/a"
        return f"{self.peak_hbm_bytes / 2**20:.1f} MiB"


def flat_tensors(value: Any) -> list[Any]:
    """The tensors of a nest of lists, tuples and dicts (a dict's values in its order), in
    order: what a module takes and returns, as the reference and the capture read it."""
    if isinstance(value, dict):
        return [t for v in value.values() for t in flat_tensors(v)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in flat_tensors(v)]
    return [value] if hasattr(value, "dtype") and hasattr(value, "shape") else []


def compare_results(got: Any, reference: Any) -> tuple[bool, float]:
    """``(identical, max |got - reference|)`` over the tensors of two result nests:
    identical where every element is equal, NaN where the reference has NaN (``-0.0``
    equals ``0.0``); a NaN on one side only is an infinite difference."""
    a, b = flat_tensors(got), flat_tensors(reference)
    if len(a) != len(b):
        return False, float("inf")
    identical, worst = True, 0.0
    for x, y in zip(a, b):
        if tuple(x.shape) != tuple(y.shape) or x.dtype != y.dtype:
            return False, float("inf")
        if not x.numel():
            continue
        x, y = x.to("cpu"), y.to("cpu")
        if x.is_floating_point() or x.is_complex():
            x, y = (x.double(), y.double()) if x.is_floating_point() else (x, y)
            both_nan = x.isnan() & y.isnan()
            same = (x == y) | both_nan
            diff = (x - y).abs().where(~same, 0.0)
            # what is left NaN has a NaN on one side only: infinitely far
            diff = diff.nan_to_num(nan=math.inf, posinf=math.inf)
        else:  # in float64: an int64 difference such as 2**62 - -2**62 would overflow
            same = x == y
            diff = (x.double() - y.double()).abs()
        identical = identical and bool(same.all())
        worst = max(worst, float(diff.max()))
    return identical, worst


def check_runs(warmup: int, steps: int) -> None:
    """``ValueError`` unless ``steps >= 1`` timed runs and ``warmup >= 1`` untimed ones (the
    first untimed run is the one whose results are checked: there is always one)."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a whole number of at least 1, got {steps!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 1:
        raise ValueError(
            f"warmup must be a whole number of at least 1 (the checked first run), got {warmup!r}"
        )


def measure(
    graph: BoundGraph,
    plan: PlacementPlan,
    memory: Memory,
    reference: Any,
    *,
    warmup: int = 3,
    steps: int = 10,
    max_seconds: float | None = None,
    shared_host: dict[int, HostTensor] | None = None,
    deadline: float | None = None,
    stage_dot_reads: bool = False,
) -> Measurement:
    """Prepare, check and time ``plan`` on ``memory`` (see the module docstring).

    ``max_seconds``: stop timing once this much wall time has gone into the timed runs
    (at least 3 runs are timed); ``deadline``: a ``time.perf_counter()`` past which no
    further warm-up or timed run starts (at least 1 run is timed); ``shared_host``: input
    host copies shared between the placements of one program (filled on first use);
    ``stage_dot_reads``: matmuls read their host operands through an HBM scratch copy
    (:class:`~mallocgame.runtime.torch_run.PlacedRunner`). ``ValueError`` for ``steps``
    below 1 (nothing to time) or ``warmup`` below 1 (its first run is the checked one).
    """
    check_runs(warmup, steps)
    memory.release_dead()
    base = memory.allocated()
    runner = PlacedRunner(graph, plan, memory, stage_dot_reads=stage_dot_reads)
    runner.prepare(shared_host)
    results = runner.run()
    memory.join()
    memory.synchronize()
    identical, worst = compare_results(results, reference)
    del results
    times = warm_and_time(
        runner.run,
        memory,
        warmup=warmup,
        steps=steps,
        max_seconds=max_seconds,
        deadline=deadline,
    )
    peak = memory.peak()
    return Measurement.of(
        times,
        peak_hbm_bytes=None if peak is None else max(peak - base, 0),
        identical=identical,
        max_abs_diff=worst,
        staged=tuple(sorted(runner.staged)),
        staged_why=tuple(f"{op}: {why}" for op, why in sorted(runner.staged_why.items())),
        dot_staged_bytes=runner.dot_staged_bytes,
    )


def hbm_over_plan(
    graph: BoundGraph,
    plan: PlacementPlan,
    memory: Memory,
    *,
    shared_host: dict[int, HostTensor] | None = None,
    stage_dot_reads: bool = False,
) -> list[int]:
    """Bytes of fast memory the backend held over each step of one run of ``plan`` beyond
    what the plan holds there (:meth:`PlacementPlan.hbm_bytes`), above what was allocated
    before the run: its peak from the step's copies in to its frees, minus the plan's
    bytes at that instruction (``T`` values; negative where the run holds less). Kernel
    workspaces, staged results and blocks a copy has yet to read count; they are what the
    game does not see, and so do matmuls' scratch copies with ``stage_dot_reads``. Empty
    where the backend cannot count (the CPU stand-in)."""
    memory.release_dead()
    base = memory.allocated()
    runner = PlacedRunner(graph, plan, memory, stage_dot_reads=stage_dot_reads)
    runner.prepare(shared_host)
    memory.synchronize()
    peaks: list[int | None] = []
    runner.run(step_peaks=peaks)
    memory.join()
    memory.synchronize()
    counted = [peak for peak in peaks if peak is not None]
    if len(counted) < len(peaks):
        return []
    return [peak - base - planned for peak, planned in zip(counted, plan.hbm_bytes())]


def warm_and_time(
    run: Callable[[], Any],
    memory: Memory,
    *,
    warmup: int,
    steps: int,
    max_seconds: float | None = None,
    deadline: float | None = None,
) -> list[float]:
    """After a first (checked) run: ``warmup - 1`` more untimed runs of ``run``, a new
    fast-memory peak, then up to ``steps`` timed runs one at a time (seconds); stops timing
    once ``max_seconds`` went into them (at least 3 timed) or past ``deadline`` (a
    ``time.perf_counter()``; at least 1 timed, and no further warm-up run)."""

    def late() -> bool:
        return deadline is not None and time.perf_counter() > deadline

    for _ in range(warmup - 1):
        if late():
            break
        run()
    memory.synchronize()
    memory.reset_peak()
    times: list[float] = []
    began = time.perf_counter()
    for i in range(steps):
        start = memory.start_timer()
        run()
        times.append(memory.stop_timer(start))
        if late() or (
            max_seconds is not None and i >= 2 and time.perf_counter() - began > max_seconds
        ):
            break
    return times
