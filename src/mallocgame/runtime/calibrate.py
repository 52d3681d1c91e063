"""Measure the machine's figures a hardware preset needs: bandwidths, matmul rates, overhead.

:func:`calibrate` runs small micro-benchmarks on a memory backend and returns
:class:`Figure` rows (name, value, unit, how it was measured); :func:`calibrated_preset`
turns them into a :class:`~mallocgame.hardware.HardwarePreset` like ``gpu_hbm_host``:

- ``fast_bandwidth``: HBM traffic of a device-to-device copy, ``2 * bytes / s`` (read + write);
- ``slow_bandwidth``: a kernel reading host-mapped memory (``sum`` over it), ``bytes / s``;
  also measured, not used by the preset: a kernel writing host-mapped memory;
- ``copy_bandwidth``: the slower of the copy engine's host -> HBM and HBM -> host copies
  of pinned memory;
- ``peak_flops``: a square fp32 matmul with TF32 off (the cost model counts f32 flops);
  also measured: TF32 and bf16;
- ``fixed_s``: the time per op of a chain of tiny elementwise ops (launch overhead).

Each figure is the best (highest rate, lowest time) of ``repeats`` runs after one
warm-up. ``size_bytes`` sets the transfer size (256 MiB on a GPU is enough to reach the
asymptotic rate; tiny in a dry run on the CPU, where the numbers mean nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mallocgame.hardware import GPU_HBM_HOST, HardwarePreset
from mallocgame.runtime.memory import Memory

__all__ = ["Figure", "calibrate", "calibrated_preset"]


@dataclass(frozen=True)
class Figure:
    """One measured figure: ``value`` in ``unit``; ``method`` says how."""

    name: str
    value: float
    unit: str
    method: str


def _best_time(memory: Memory, fn: Callable[[], Any], repeats: int) -> float:
    fn()
    memory.synchronize()
    best = float("inf")
    for _ in range(repeats):
        start = memory.start_timer()
        fn()
        best = min(best, memory.stop_timer(start))
    return max(best, 1e-9)


def calibrate(
    memory: Memory,
    *,
    size_bytes: int = 256 * 2**20,
    matmul_n: int = 8192,
    repeats: int = 5,
    log: Callable[[str], None] = lambda s: None,
) -> list[Figure]:
    """The figures of the module docstring, measured on ``memory``'s device (the best of
    ``repeats`` timed runs each, at least 1)."""
    from mallocgame.frontends.torch import _torch

    if repeats < 1:  # no timed run: a best time of inf, a bandwidth of 0 that looks measured
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    if size_bytes < 4:  # no float32 element moved: a bandwidth of nothing over a time
        raise ValueError(f"size_bytes must be at least 4 (one float32), got {size_bytes}")
    torch = _torch()
    dev = memory.device
    n = size_bytes // 4
    size_bytes = 4 * n  # what is moved: whole float32 elements
    figures: list[Figure] = []

    def add(name: str, value: float, unit: str, method: str) -> None:
        figures.append(Figure(name, value, unit, method))
        log(f"calibrate {name} = {value:.4g} {unit}")

    def attempt(name: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as exc:
            log(f"calibrate {name} failed: {type(exc).__name__}: {exc}")

    _bandwidths(memory, torch, dev, size_bytes, n, repeats, add, attempt)
    attempt("matmul", lambda: _matmuls(memory, torch, dev, matmul_n, repeats, add))
    attempt("fixed_s", lambda: _overhead(memory, torch, dev, repeats, add))
    return figures


def _bandwidths(
    memory: Memory,
    torch: Any,
    dev: Any,
    size_bytes: int,
    n: int,
    repeats: int,
    add: Callable[..., None],
    attempt: Callable[..., None],
) -> None:
    a = torch.ones(n, dtype=torch.float32, device=dev)
    b = torch.empty_like(a)

    def bandwidth(figure: str, moved: int, run: Callable[[], Any], how: str) -> Callable[[], None]:
        """Measures ``figure``: ``moved`` times ``size_bytes`` over the best time of ``run``."""

        def measure() -> None:
            add(figure, moved * size_bytes / _best_time(memory, run, repeats), "B/s", how)

        return measure

    attempt(
        "fast_bandwidth",
        bandwidth(
            "fast_bandwidth",
            2,
            lambda: b.copy_(a),
            f"HBM copy of {size_bytes} B, read + write bytes / time",
        ),
    )
    host = memory.host_empty((n,), (1,), torch.float32)
    host.dma.fill_(1.0)
    transfers = (
        (
            "copy_in",
            lambda: memory.wait(memory.copy_in(b, host)),
            f"pinned host -> HBM copy of {size_bytes} B (copy engine)",
        ),
        (
            "copy_out",
            lambda: memory.wait(memory.copy_out(host, a)),
            f"HBM -> pinned host copy of {size_bytes} B (copy engine)",
        ),
        (
            "slow_read",
            lambda: host.kernel.sum(),
            f"kernel summing {size_bytes} B of host-mapped memory",
        ),
        (
            "slow_write",
            lambda: torch.add(a, 1.0, out=host.kernel),
            f"kernel writing {size_bytes} B into host-mapped memory (reading HBM)",
        ),
    )
    for name, run, how in transfers:
        attempt(name, bandwidth(f"{name}_bandwidth", 1, run, how))


def _matmuls(
    memory: Memory, torch: Any, dev: Any, matmul_n: int, repeats: int, add: Callable[..., None]
) -> None:
    m = max(matmul_n, 16)
    x = torch.randn(m, m, device=dev)
    y = torch.randn(m, m, device=dev)
    flops = 2.0 * m**3
    tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        t = _best_time(memory, lambda: x @ y, repeats)
        add("peak_flops_fp32", flops / t, "flop/s", f"{m}x{m} fp32 matmul, TF32 off")
        torch.backends.cuda.matmul.allow_tf32 = True
        t = _best_time(memory, lambda: x @ y, repeats)
        add("peak_flops_tf32", flops / t, "flop/s", f"{m}x{m} fp32 matmul, TF32 on")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    xb, yb = x.to(torch.bfloat16), y.to(torch.bfloat16)
    t = _best_time(memory, lambda: xb @ yb, repeats)
    add("peak_flops_bf16", flops / t, "flop/s", f"{m}x{m} bf16 matmul")


def _overhead(memory: Memory, torch: Any, dev: Any, repeats: int, add: Callable[..., None]) -> None:
    z = torch.zeros(16, device=dev)
    chain = 200

    def tiny() -> None:
        for _ in range(chain):
            z.add_(1.0)

    t = _best_time(memory, tiny, repeats)
    add(
        "fixed_s",
        t / chain,
        "s",
        f"per op of a chain of {chain} tiny in-place adds (launch overhead)",
    )


def calibrated_preset(
    figures: list[Figure],
    *,
    name: str = "gpu_measured",
    fast_memory_bytes: int | None = None,
    base: HardwarePreset = GPU_HBM_HOST,
) -> HardwarePreset:
    """A preset from measured figures (module docstring); the figures it has no measurement
    for (transcendentals) are ``base``'s. The model's correction for tiled slow reads
    (``slow_dot_tile``) is not a measurement and is left off (0), whatever ``base`` has, so
    that a run can compare the plain roofline on measured figures with a tiled preset."""
    by = {f.name: f.value for f in figures}
    return HardwarePreset(
        name=name,
        fast_memory_bytes=int(fast_memory_bytes or base.fast_memory_bytes),
        alignment_bytes=base.alignment_bytes,
        fast_bandwidth=by["fast_bandwidth"],
        slow_bandwidth=by["slow_read_bandwidth"],
        copy_bandwidth=min(by["copy_in_bandwidth"], by["copy_out_bandwidth"]),
        peak_flops=by["peak_flops_fp32"],
        peak_transcendentals=base.peak_transcendentals,
        fixed_s=by["fixed_s"],
        description="measured on this machine by mallocgame.runtime.calibrate",
        sources=tuple(f"{f.name}: {f.value:.4g} {f.unit} -- {f.method}" for f in figures),
        assumptions=(f"peak_transcendentals: not measured; {base.name}'s figure",),
    )
