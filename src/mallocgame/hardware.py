"""Hardware presets: two memories, a copy engine and a roofline compute model.

A :class:`HardwarePreset` holds the physical figures of one machine that
:func:`mallocgame.costmodel.derive_instance` turns a hardware-independent
:class:`~mallocgame.program.Program` into an :class:`~mallocgame.instance.Instance`
with. Every figure carries its public source (``sources``) and every figure that is
an estimate rather than a published number is named in ``assumptions``; the same
tables are in ``docs/hardware.md``.

Presets (:data:`PRESETS`):

``tpu_v4i``
    TPU v4i-like (the paper's target): 128 MiB CMEM as fast memory in front of
    8 GiB HBM2 at 614 GB/s, 138 TFLOP/s bf16.
``tpu_v4``, ``tpu_v5e``, ``tpu_v5p``, ``tpu_v6e``
    The TPU generations the ``--target`` s compile for: the fast memory libtpu gives its
    memory-space assignment (v4: 64 MiB of CMEM; v5e and v6e: 128 MiB of VMEM; v5p:
    64 MiB of VMEM) in front of each chip's HBM, with its published bandwidth and bf16
    peak.
``gpu_hbm_host``
    An NVIDIA A100 40GB: its HBM2 as fast memory in front of host memory over
    PCIe 4.0 x16.
``gpu_h100_host``
    An NVIDIA H100 80GB HBM3 as measured (docs/results/gpu-real-h100): HBM3 in front of
    pinned host memory over PCIe gen5 x16, with tiled re-reads of slow matmul operands.
``dram_pmem``
    The MARL paper's machine: DRAM in front of Intel Optane DC persistent memory,
    one 2nd-generation Xeon Scalable socket; the fast memory is the 2 GiB of its
    16 GB of DRAM that the system leaves to the tasks.

Units: bytes, bytes/s, flop/s, transcendentals/s, seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from mallocgame.errors import InstanceError
from mallocgame.fileio import is_finite_number

__all__ = [
    "HardwarePreset",
    "UnknownPresetError",
    "PRESETS",
    "DEFAULT_PRESET",
    "get_preset",
    "preset_names",
    "staged_variant",
]

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


class UnknownPresetError(InstanceError):
    """No hardware preset has the requested name (the message lists the known ones)."""


# The figures that are rates (finite and > 0), in field order.
_RATES = (
    "fast_bandwidth",
    "slow_bandwidth",
    "copy_bandwidth",
    "peak_flops",
    "peak_transcendentals",
)


@dataclass(frozen=True)
class HardwarePreset:
    """The physical figures of one machine (see the module docstring for units)."""

    name: str
    fast_memory_bytes: int  # the physical fast memory
    alignment_bytes: int  # allocation granularity of the fast memory
    fast_bandwidth: float  # bytes/s an instruction reads/writes fast memory at
    slow_bandwidth: float  # bytes/s an instruction reads/writes slow memory at directly
    copy_bandwidth: float  # bytes/s of a copy between the two memories
    peak_flops: float  # flop/s
    peak_transcendentals: float  # transcendental evaluations (exp, log, tanh, ...) per s
    fixed_s: float  # per-instruction-execution overhead, s
    # Output-tile edge (elements) of the matmul kernels: a slow operand of a matmul-like
    # instruction is read once per output tile that needs it (the cost model's tiled slow
    # reads, docs/hardware.md); 0 = off, every slow byte read once (the plain roofline).
    slow_dot_tile: int = 0
    # A slow operand of a matmul-like instruction is copied whole into fast memory before
    # the kernel, which waits for it (the runtime's stage_dot_reads; the cost model's staged
    # slow reads); excludes slow_dot_tile.
    slow_dot_staged: bool = False
    description: str = ""
    sources: tuple[str, ...] = ()  # "figure: value -- public source" citations
    assumptions: tuple[str, ...] = ()  # "figure: why it is an estimate"

    def __post_init__(self) -> None:
        where = f"hardware preset {self.name!r}"
        for key in ("fast_memory_bytes", "alignment_bytes"):  # true is no byte count
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InstanceError(f"{where}: {key} must be a positive integer, got {value!r}")
        for key in _RATES:
            value = getattr(self, key)
            if not (is_finite_number(value) and value > 0):
                raise InstanceError(f"{where}: {key} must be finite and > 0, got {value!r}")
        if not (is_finite_number(self.fixed_s) and self.fixed_s >= 0):
            raise InstanceError(f"{where}: fixed_s must be finite and >= 0, got {self.fixed_s!r}")
        tile = self.slow_dot_tile
        if isinstance(tile, bool) or not isinstance(tile, int) or tile < 0:
            raise InstanceError(f"{where}: slow_dot_tile must be an integer >= 0, got {tile!r}")
        if not isinstance(self.slow_dot_staged, bool):
            raise InstanceError(f"{where}: slow_dot_staged must be true or false")
        if self.slow_dot_staged and tile > 0:
            raise InstanceError(
                f"{where}: slow_dot_staged and slow_dot_tile > 0 are two models of the same "
                "reads; give one"
            )

    def figures(self) -> dict[str, Any]:
        """The numeric figures by field name (for documents and ``source`` records)."""
        return {
            key: getattr(self, key)
            for key in ("fast_memory_bytes", "alignment_bytes", *_RATES, "fixed_s")
        }

    def assumed(self, figure: str) -> bool:
        """Whether ``figure`` (a field name) is listed as an assumption."""
        return any(a.split(":", 1)[0].strip() == figure for a in self.assumptions)


_JOUPPI = (
    "Jouppi et al., 'Ten Lessons From Three Generations Shaped Google's TPUv4i', "
    "ISCA 2021, doi:10.1109/ISCA52012.2021.00010"
)
_A100 = "NVIDIA A100 Tensor Core GPU datasheet (A100 40GB) and NVIDIA A100 architecture whitepaper (2020)"
_CUDA_GUIDE = "NVIDIA CUDA C++ Programming Guide"
_PCIE = (
    "PCI-SIG, PCI Express Base Specification Revision 4.0 (16 GT/s per lane, 128b/130b encoding)"
)
_IZRAELEVITZ = (
    "Izraelevitz et al., 'Basic Performance Measurements of the Intel Optane DC "
    "Persistent Memory Module', arXiv:1903.05714 (2019)"
)
_MARL = "the MARL paper (papers/marl-heterogeneous-memory.txt), sections 'Setup' and 'Experiments'"

# TPU v4i: 4 MXUs of 128x128 bf16 MACs at 1.05 GHz = 4 * 128 * 128 * 2 * 1.05e9 = 137.6e12.
_TPU_HBM = 614e9

TPU_V4I = HardwarePreset(
    name="tpu_v4i",
    fast_memory_bytes=128 * MIB,
    alignment_bytes=512,
    fast_bandwidth=4 * _TPU_HBM,
    slow_bandwidth=_TPU_HBM,
    copy_bandwidth=_TPU_HBM,
    peak_flops=138e12,
    peak_transcendentals=1024 * 1.05e9,
    fixed_s=5e-7,
    description=(
        "TPU v4i-like inference chip: 128 MiB on-chip CMEM (fast) in front of 8 GiB HBM2 "
        "at 614 GB/s (slow); copies are HBM<->CMEM DMAs; 138 TFLOP/s bf16."
    ),
    sources=(
        f"fast_memory_bytes: 128 MiB CMEM -- {_JOUPPI}",
        f"slow_bandwidth: 614 GB/s HBM2 (8 GiB) -- {_JOUPPI}",
        f"copy_bandwidth: bounded by the 614 GB/s HBM2 -- {_JOUPPI}",
        f"peak_flops: 138 TFLOP/s bf16 (4 MXUs of 128x128 at 1.05 GHz) -- {_JOUPPI}",
        f"alignment_bytes: 512 B native DMA access size -- {_JOUPPI}",
        "fast_bandwidth, peak_transcendentals, fixed_s: see assumptions",
    ),
    assumptions=(
        "fast_bandwidth: the CMEM bandwidth is not published; 4x the HBM bandwidth "
        "(2.456 TB/s) is assumed, an on-chip SRAM several times faster than HBM",
        "copy_bandwidth: HBM<->CMEM DMA bandwidth is not published; copies are assumed to "
        "run at the full HBM bandwidth, an upper bound (they share HBM with instructions)",
        "peak_transcendentals: not published; one per vector lane per cycle assumed "
        "(128 lanes x 8 sublanes x 1.05 GHz = 1.075e12/s)",
        "fixed_s: per-instruction overhead not published; 0.5 us assumed",
    ),
)

_LIBTPU = "libtpu 0.0.42.1 (jax[tpu] 0.10.2), compiling for the generation without a TPU"
_CLOUD_TPU = (
    "Cloud TPU documentation, 'TPU {gen}' system architecture (cloud.google.com/tpu/docs/{gen})"
)


_VMEM_EVIDENCE = "the VMEM size libtpu states when a kernel asks for more"


def _tpu_generation(
    doc: str,
    fast_memory_bytes: int,
    hbm: str,
    hbm_bandwidth: float,
    peak_flops: float,
    *,
    fast_memory: str = "VMEM",
    fast_memory_evidence: str = _VMEM_EVIDENCE,
) -> HardwarePreset:
    """The TPU generation ``doc`` (a Cloud TPU page name: v4, v5e, v5p, v6e; the preset is
    ``tpu_<doc>``) as libtpu compiles for it: the fast memory the compiler gives its
    memory-space assignment (as the compiler states it) in front of the HBM, and the
    chip's published figures: ``hbm`` at ``hbm_bandwidth`` B/s, ``peak_flops`` bf16."""
    name = f"tpu_{doc}"
    published = _CLOUD_TPU.format(gen=doc)
    return HardwarePreset(
        name=name,
        fast_memory_bytes=fast_memory_bytes,
        alignment_bytes=512,
        fast_bandwidth=4 * hbm_bandwidth,
        slow_bandwidth=hbm_bandwidth,
        copy_bandwidth=hbm_bandwidth,
        peak_flops=peak_flops,
        peak_transcendentals=peak_flops / 128,
        fixed_s=5e-7,
        description=(
            f"TPU {doc} chip as XLA compiles for it: {fast_memory_bytes // MIB} MiB of "
            f"{fast_memory} (fast) in front of {hbm} at {hbm_bandwidth / 1e9:g} GB/s (slow); "
            f"{peak_flops / 1e12:g} TFLOP/s bf16."
        ),
        sources=(
            f"fast_memory_bytes: {fast_memory_bytes // MIB} MiB {fast_memory}, "
            f"{fast_memory_evidence} -- {_LIBTPU}",
            f"slow_bandwidth: {hbm} at {hbm_bandwidth / 1e9:g} GB/s -- {published}",
            f"copy_bandwidth: bounded by the {hbm_bandwidth / 1e9:g} GB/s HBM -- {published}",
            f"peak_flops: {peak_flops / 1e12:g} TFLOP/s bf16 per chip -- {published}",
            "fast_bandwidth, peak_transcendentals, fixed_s, alignment_bytes: see assumptions",
        ),
        assumptions=(
            f"fast_bandwidth: the {fast_memory} bandwidth is not published; 4x the HBM "
            "bandwidth is assumed, as for tpu_v4i",
            "copy_bandwidth: HBM<->on-chip DMA bandwidth is not published; the full HBM "
            "bandwidth is assumed (an upper bound: copies share HBM with instructions)",
            "peak_transcendentals: not published; peak_flops / 128 assumed, tpu_v4i's ratio "
            "(one result per vector lane per cycle against 128 flops per lane per cycle)",
            "fixed_s: per-instruction overhead not published; 0.5 us assumed, as for tpu_v4i",
            "alignment_bytes: 512 B, the TPU v4i's native DMA access size (Jouppi et al. "
            "2021), assumed for later generations",
        ),
    )


TPU_V4 = _tpu_generation(
    "v4",
    64 * MIB,
    "32 GiB HBM2",
    1200e9,
    275e12,
    fast_memory="CMEM",
    fast_memory_evidence=(
        "the user allocation limit of the CMEM that libtpu states when its memory-space "
        "assignment is given more (xla_tpu_max_cmem_used_by_memory_space_assignment); the "
        "chip has 128 MiB (Jouppi et al., 'TPU v4: An Optically Reconfigurable Supercomputer "
        "for Machine Learning with Hardware Support for Embeddings', ISCA 2023)"
    ),
)
# (Cloud TPU page, VMEM bytes, HBM, HBM bytes/s, bf16 flop/s): the published figures
TPU_V5E = _tpu_generation("v5e", 128 * MIB, "16 GB HBM2", 819e9, 197e12)
TPU_V5P = _tpu_generation("v5p", 64 * MIB, "95 GB HBM2e", 2765e9, 459e12)
TPU_V6E = _tpu_generation("v6e", 128 * MIB, "32 GB HBM", 1638e9, 918e12)

GPU_HBM_HOST = HardwarePreset(
    name="gpu_hbm_host",
    fast_memory_bytes=40 * GIB,
    alignment_bytes=256,
    fast_bandwidth=1555e9,
    slow_bandwidth=25e9,
    copy_bandwidth=25e9,
    peak_flops=19.5e12,
    peak_transcendentals=108 * 16 * 1.41e9,
    fixed_s=2e-6,
    description=(
        "NVIDIA A100 40GB: its HBM2 (1.555 TB/s) as fast memory in front of host memory "
        "over PCIe 4.0 x16 (slow: kernels reading host memory directly, zero-copy; copies: "
        "cudaMemcpy over PCIe); FP32 CUDA-core peak 19.5 TFLOP/s."
    ),
    sources=(
        f"fast_memory_bytes: 40 GB HBM2 (40 GiB as the driver reports it) -- {_A100}",
        f"fast_bandwidth: 1,555 GB/s HBM2 -- {_A100}",
        f"peak_flops: 19.5 TFLOP/s FP32 (non-tensor-core); TF32 tensor core 156 TFLOP/s -- {_A100}",
        f"peak_transcendentals: 108 SMs x 16 results/clock/SM for 32-bit exp2/log2/sin/cos/rsqrt "
        f"(compute capability 8.0) x 1.41 GHz boost clock -- {_CUDA_GUIDE}, section "
        f"'Arithmetic Instructions'; {_A100}",
        f"slow_bandwidth, copy_bandwidth: PCIe 4.0 x16 = 31.5 GB/s per direction theoretical -- {_PCIE}",
        f"alignment_bytes: allocations are aligned to at least 256 bytes -- {_CUDA_GUIDE}, "
        "section 'Device Memory Accesses'",
        "fixed_s: see assumptions",
    ),
    assumptions=(
        "peak_flops: the FP32 CUDA-core figure (19.5 TFLOP/s) is used, not TF32 tensor cores "
        "(156 TFLOP/s): programs are counted in f32 flops including elementwise work, and "
        "TF32 matmuls are opt-in in PyTorch; a matmul-heavy TF32 program would be ~8x faster",
        "slow_bandwidth: 25 GB/s, about 80% of the 31.5 GB/s theoretical PCIe 4.0 x16 "
        "bandwidth, as achieved by pinned-memory transfers in practice (an estimate)",
        "copy_bandwidth: 25 GB/s achieved PCIe 4.0 x16 (an estimate, as slow_bandwidth)",
        "peak_transcendentals: the SFU throughput at the boost clock; sustained clocks are lower",
        "fixed_s: 2 us kernel launch / inter-kernel gap assumed",
    ),
)

# gpu_h100_host: every rate measured by mallocgame.runtime.calibrate on the machine of
# docs/results/gpu-real-h100/ (calibration.csv, 2026-11-26): an NVIDIA H100 80GB HBM3 (SXM5)
# behind a PCIe gen5 x16 link, torch 2.11 + CUDA 13.0.
_H100_RUN = (
    "measured 2026-11-26 on an NVIDIA H100 80GB HBM3, PCIe gen5 x16 (docs/results/gpu-real-h100)"
)
_H100 = "NVIDIA H100 Tensor Core GPU datasheet and NVIDIA H100 (Hopper) architecture whitepaper"
_PCIE5 = (
    "PCI-SIG, PCI Express Base Specification Revision 5.0 (32 GT/s per lane, 128b/130b encoding)"
)

GPU_H100_HOST = HardwarePreset(
    name="gpu_h100_host",
    fast_memory_bytes=81559 * MIB,
    alignment_bytes=256,
    fast_bandwidth=2.78784e12,
    slow_bandwidth=5.09079e10,
    copy_bandwidth=5.48806e10,
    peak_flops=5.11571e13,
    peak_transcendentals=132 * 16 * 1.98e9,
    fixed_s=7.15024e-06,
    slow_dot_tile=64,
    description=(
        "NVIDIA H100 80GB HBM3 (SXM5) as measured: its HBM3 (2.79 TB/s) as fast memory in "
        "front of pinned host memory over PCIe gen5 x16 (slow: kernels reading host-mapped "
        "memory, 50.9 GB/s; copies: the copy engine, 54.9 GB/s); fp32 matmul 51.2 TFLOP/s "
        "(TF32 off, PyTorch's default for matmul); matmul-like instructions re-read a slow "
        "operand once per 64-wide output tile."
    ),
    sources=(
        f"fast_memory_bytes: 81,559 MiB, the HBM3 as the driver reports it -- {_H100_RUN}",
        f"fast_bandwidth: 2.78784e12 B/s, HBM copy of 268435456 B, read + write bytes / time "
        f"-- {_H100_RUN}",
        f"slow_bandwidth: 5.09079e10 B/s, kernel summing 268435456 B of host-mapped memory "
        f"(writing: 5.23751e10 B/s, not used) -- {_H100_RUN}; link: {_PCIE5}",
        f"copy_bandwidth: 5.48806e10 B/s, the slower of pinned host -> HBM (5.49406e10 B/s) and "
        f"HBM -> pinned host (5.48806e10 B/s) copies of 268435456 B -- {_H100_RUN}",
        f"peak_flops: 5.11571e13 flop/s, 8192x8192 fp32 matmul, TF32 off (TF32 on: 3.95831e14, "
        f"bf16: 7.71107e14) -- {_H100_RUN}",
        f"fixed_s: 7.15024e-06 s per op of a chain of 200 tiny in-place adds (launch "
        f"overhead) -- {_H100_RUN}",
        f"slow_dot_tile: 64, fitted on the mlp's measured placements (mean relative error "
        f"0.934 -> 0.085), held out on bert (0.711 -> 0.116) -- {_H100_RUN}; "
        "benchmarks/gpu_model_fit.py",
        f"alignment_bytes: allocations are aligned to at least 256 bytes -- {_CUDA_GUIDE}, "
        "section 'Device Memory Accesses'",
        f"peak_transcendentals: 132 SMs (H100 SXM5) x 16 results/clock/SM (compute capability "
        f"9.0) x 1.98 GHz boost -- {_H100}; {_CUDA_GUIDE}, section 'Arithmetic Instructions'",
    ),
    assumptions=(
        "peak_transcendentals: not measured; the SFU throughput at the boost clock that the "
        "datasheet's 67 TFLOP/s FP32 implies (132 x 128 x 2 x 1.98e9); sustained clocks are lower",
        "peak_flops: the fp32 (TF32 off) matmul rate counts every instruction's flops; PyTorch "
        "runs cuDNN convolutions in TF32 by default (3.95831e14 flop/s measured), so a "
        "convolution-heavy program runs faster than modelled when its data is in HBM",
        "slow_dot_tile: an effective tile fitted to measured step times (a power of two, the "
        "kind of edge cuBLAS's SGEMM kernels use), not read from the kernels; it is applied to "
        "mm/addmm/bmm/baddbmm only: cuDNN convolutions did not follow it (docs/simulator.md)",
    ),
)


def staged_variant(preset: HardwarePreset) -> HardwarePreset:
    """``preset`` with its matmuls' slow operands staged through fast memory
    (``slow_dot_staged``, no tile): the model of the runtime's ``stage_dot_reads``; named
    ``NAME_staged`` (``preset`` itself where it is staged already)."""
    if preset.slow_dot_staged:
        return preset
    return replace(
        preset,
        name=f"{preset.name}_staged",
        slow_dot_tile=0,
        slow_dot_staged=True,
        description=(
            f"{preset.name} with each slow operand of a matmul copied whole into fast memory "
            "before the kernel, which waits for the copy (the runtime's stage_dot_reads)"
        ),
        sources=tuple(s for s in preset.sources if not s.startswith("slow_dot_tile")),
        assumptions=(
            *(a for a in preset.assumptions if not a.startswith("slow_dot_tile")),
            "slow_dot_staged: a model of the runtime's staged matmul reads (a copy at "
            "copy_bandwidth the kernel waits for, then fast reads), not yet checked against "
            "measured step times",
        ),
    )


GPU_H100_HOST_STAGED = staged_variant(GPU_H100_HOST)

# A weighted harmonic mean: instructions read about twice the bytes they write.
_PMEM_READ = 39.4e9
_PMEM_WRITE = 13.9e9
_PMEM_MIXED = 1.0 / ((2.0 / 3.0) / _PMEM_READ + (1.0 / 3.0) / _PMEM_WRITE)

DRAM_PMEM = HardwarePreset(
    name="dram_pmem",
    fast_memory_bytes=2 * GIB,
    alignment_bytes=256,
    fast_bandwidth=100e9,
    slow_bandwidth=24.4e9,  # _PMEM_MIXED = 24.45e9, rounded
    copy_bandwidth=_PMEM_WRITE,
    peak_flops=32 * 2.0e9 * 64,
    peak_transcendentals=1e11,
    fixed_s=1e-6,
    description=(
        "The MARL paper's machine: one 32-core 2nd-generation Xeon Scalable socket, 16 GB "
        "DDR4 DRAM of which the system takes ~14 GB, leaving 2 GB to the tasks (fast), in "
        "front of 128 GB Intel Optane DC persistent memory in App Direct mode (slow); "
        "copies move pages between them."
    ),
    sources=(
        f"fast_memory_bytes: 2 GB of DRAM left to the tasks: 16 GB DRAM (with 128 GB PM), of "
        f"which 'Xeon CPU requires about 14GB of system memory, only 2GB is left for tasks to "
        f"use' -- {_MARL}",
        f"fast_bandwidth: ~100 GB/s local DRAM per socket (six DDR4 channels) -- {_IZRAELEVITZ}",
        f"slow_bandwidth: 39.4 GB/s read, 13.9 GB/s write, six interleaved Optane DC PMMs "
        f"per socket -- {_IZRAELEVITZ}",
        f"copy_bandwidth: 13.9 GB/s Optane DC write bandwidth (six PMMs) -- {_IZRAELEVITZ}",
        f"alignment_bytes: Optane DC accesses media in 256-byte lines -- {_IZRAELEVITZ}",
        f"peak_flops: one socket, 32 cores, 2nd Gen Intel Xeon Scalable (Cascade Lake), "
        f"AVX-512 with two FMA units = 64 f32 flop/cycle/core -- {_MARL}; Intel 64 and "
        "IA-32 Architectures Optimization Reference Manual",
        "peak_transcendentals, fixed_s: see assumptions",
    ),
    assumptions=(
        "fast_bandwidth: ~100 GB/s is the approximate measured per-socket DRAM bandwidth of a "
        "fully populated socket (theoretical 6 x DDR4-2666 = 128 GB/s); the MARL machine's "
        "DIMM population is not stated",
        "slow_bandwidth: the model has one slow bandwidth for reads and writes; the weighted "
        "harmonic mean of 39.4 GB/s read and 13.9 GB/s write for an assumed 2:1 read:write "
        "byte mix is used (24.4 GB/s); six PMMs assumed (the paper's 128 GB PM may be fewer "
        "DIMMs, which would be slower)",
        "copy_bandwidth: the slower (write) direction, so write-backs to PM are not "
        "underestimated; copies into DRAM are modelled ~2.8x too slow",
        "peak_flops: the Xeon SKU is not named (the paper says 'Xeon Gold, 32 cores'); "
        "2.0 GHz AVX-512 all-core clock and two FMA units assumed: 32 x 2.0e9 x 64 = 4.1 TFLOP/s",
        "peak_transcendentals: vectorised libm (AVX-512, ~10 cycles per 16-lane vector) "
        "assumed: ~1e11/s over 32 cores",
        "fixed_s: 1 us per-operator dispatch overhead assumed",
        "fast_memory_bytes: the paper's '2GB' (16 GB less about 14 GB of system memory) is "
        "taken as 2 GiB; the system's share is the paper's approximate figure",
    ),
)

PRESETS: dict[str, HardwarePreset] = {
    p.name: p
    for p in (
        TPU_V4I,
        TPU_V4,
        TPU_V5E,
        TPU_V5P,
        TPU_V6E,
        GPU_HBM_HOST,
        GPU_H100_HOST,
        GPU_H100_HOST_STAGED,
        DRAM_PMEM,
    )
}
DEFAULT_PRESET = TPU_V4I.name  # the paper's machine: bundled suites, dumps and the CLI use it


def preset_names() -> list[str]:
    """The known preset names, sorted."""
    return sorted(PRESETS)


def get_preset(name: str) -> HardwarePreset:
    """The preset called ``name``; :class:`UnknownPresetError` naming the known ones otherwise."""
    try:
        return PRESETS[name]
    except (KeyError, TypeError):
        raise UnknownPresetError(
            f"unknown hardware preset {name!r}; known presets: {', '.join(preset_names())}"
        ) from None
