"""The cost model: a :class:`~mallocgame.program.Program` plus a hardware preset -> an Instance.

:func:`derive_instance` is cheap (one pass over the program, O(instructions +
buffers + tensors)), so a program extracted once can be played on any preset.

Buffers (SPEC section 2)
    In game order: for each instruction ``t``, its operands in order, then its outputs
    in order; buffer id = running index. A buffer's ``size`` is the bytes the
    instruction moves for it (``operand_bytes`` / ``output_bytes``), its ``tensor_id``
    the program tensor. ``alias_id``: the members of each program alias group share
    one id; every other buffer gets a fresh id of its own (ids are numbered in game
    order of first appearance).

Latency (SPEC section 5), per instruction ``t`` with ``count`` executions
    ``compute_s = max(flops / peak_flops, transcendentals / peak_transcendentals)``,
    ``fixed_s = preset.fixed_s`` (a roofline latency), so for one execution
    ``L_t(S) = fixed_s + max(compute_s, sum_b size_b / bw_b)``, ``bw_b`` the fast
    bandwidth for ``b`` in ``S``, the slow bandwidth otherwise.

    - ``supply_s = L_t(all buffers of t)`` for one execution (an underestimate of the
      time the instruction runs, so copies overlapping it never slow it down);
    - ``demand_s = size / copy_bandwidth`` per buffer;
    - ``benefit_s = count * (L_t(empty) - L_t({b}))`` per buffer, computed with the
      same floating-point operations as :func:`mallocgame.latency.instruction_latency`
      (exactly equal for instructions of up to :data:`EXACT_BENEFIT_MAX_BUFFERS`
      buffers; for larger ones the memory term is updated incrementally, equal to
      within rounding).

Tiled slow reads (opt-in: presets with ``slow_dot_tile > 0``, e.g. ``gpu_h100_host``)
    A matmul kernel computes its output in tiles and reads, for each tile, the strips of
    both operands it needs; an operand in HBM is re-read from the L2 cache, but one read
    by the kernel straight from slow (host-mapped) memory crosses the link again for
    every tile. So for ``mm``, ``addmm``, ``bmm`` and ``baddbmm`` (output ``[..., M, N]``,
    from the output tensor's shape) a slow left operand is counted
    ``ceil(N / tile)`` times and a slow right operand ``ceil(M / tile)`` times
    (:func:`slow_read_factors`); other buffers, and every fast one, once. Such an
    instruction gets a ``table`` latency over its buffers (SPEC section 5) holding
    ``fixed_s + max(compute_s, sum_b size_b * f_b / bw_b)`` for each fast set, ``f_b`` the
    factor where ``b`` is slow, 1 where it is fast; ``supply_s`` is unchanged (all fast).
    Instructions of other opcodes, of more than 8 buffers, or whose output shape is
    unknown keep the roofline. With ``slow_dot_tile = 0`` (every other preset) nothing
    changes. Evidence and validation: docs/simulator.md, "Measured on an H100".

Staged slow reads (opt-in: presets with ``slow_dot_staged``, e.g. ``gpu_h100_host_staged``)
    The runtime's ``stage_dot_reads`` (:class:`~mallocgame.runtime.torch_run.PlacedRunner`):
    a matmul's (``mm``, ``addmm``, ``bmm``, ``baddbmm``) operand in slow memory is copied
    whole into a scratch fast-memory tensor before the kernel, which waits for the copy
    and then reads it at fast bandwidth. Such an instruction gets a ``table`` latency
    holding ``fixed_s + sum_{operands b slow} size_b / copy_bandwidth + max(compute_s,
    sum_b size_b / bw_b)``, ``bw_b = fast_bandwidth`` for a fast buffer and a staged
    operand, ``slow_bandwidth`` for a slow output; ``supply_s`` is unchanged (all fast).
    Instructions of other opcodes or of more than 8 buffers keep the roofline.

Capacity rule
    ``capacity_fraction=None``: the preset's physical fast memory, as it is (programs
    at the size they run, like suite ``xla-v2``). With a fraction, the fast memory is
    made to bind also on small programs compiled on a CPU, whose live data would fit
    a preset's physical fast memory many times over: the instance's capacity is that
    fraction of the program's peak live bytes, capped by the physical fast memory::

        fast_memory_bytes = min(preset.fast_memory_bytes,
                                max(alignment,
                                    floor_to_alignment(min(capacity_fraction * peak_live_bytes,
                                                           preset.fast_memory_bytes))))

    (:func:`capacity_bytes`; for a preset whose fast memory is a multiple of its alignment,
    every bundled one, this is the :data:`CAPACITY_RULE` the instance records, kept as it
    is so that every derived instance keeps its hash)

    with :func:`peak_live_bytes` = max over ``t`` of the summed sizes of the tensors
    live at ``t`` (live range ``[max(def_time, 0), last_use_time]`` inclusive, so a
    program input is live from 0 to its last use). The instance records it: hardware
    ``name`` = ``"{preset}@{fraction:g}peak"`` (the preset's name alone without a
    fraction) and ``source`` = the program's source plus ``preset``, ``capacity_rule``,
    ``capacity_fraction`` (``None`` without one),
    ``peak_live_bytes``, ``preset_fast_memory_bytes`` and the compute figures of
    the preset (``cost_model``).
"""

from __future__ import annotations

import math
import re
from dataclasses import fields
from operator import attrgetter
from typing import Any

import numpy as np

from mallocgame.errors import InstanceError
from mallocgame.fileio import is_finite_real
from mallocgame.hardware import HardwarePreset, get_preset
from mallocgame.instance import (
    MAX_BYTES,
    Buffer,
    Hardware,
    Instance,
    Instruction,
    Loop,
    RooflineLatency,
    TableLatency,
    Tensor,
    validate,
)
from mallocgame.program import Program, ProgramError, ProgramInstruction, validate_program

__all__ = [
    "CAPACITY_RULE",
    "PHYSICAL_CAPACITY_RULE",
    "DEFAULT_CAPACITY_FRACTION",
    "EXACT_BENEFIT_MAX_BUFFERS",
    "derive_instance",
    "peak_live_bytes",
    "capacity_bytes",
    "DOT_OPCODES",
    "slow_read_factors",
]

DEFAULT_CAPACITY_FRACTION = 0.25
EXACT_BENEFIT_MAX_BUFFERS = 64
CAPACITY_RULE = (
    "fast_memory_bytes = max(alignment, min(preset.fast_memory_bytes, "
    "floor_to_alignment(capacity_fraction * peak_live_bytes)))"
)
PHYSICAL_CAPACITY_RULE = "fast_memory_bytes = preset.fast_memory_bytes"


def peak_of(sizes: np.ndarray, def_time: np.ndarray, last_use: np.ndarray, num_steps: int) -> int:
    """Max over steps ``0 .. num_steps-1`` of the summed ``sizes`` live at that step.

    Tensor ``i`` is live over ``[max(def_time[i], 0), last_use[i]]`` (inclusive; a
    program input never read, ``last_use = -1``, is live at no step). Arrays: int64 [X];
    ``sizes`` may instead be an object array of Python ints (exact where their sum would
    overflow int64).
    """
    if num_steps == 0:
        return 0
    diff = np.zeros(num_steps + 1, dtype=object if sizes.dtype == object else np.int64)
    np.add.at(diff, np.maximum(def_time, 0), sizes)
    np.add.at(diff, np.minimum(last_use, num_steps - 1) + 1, -sizes)
    return max(int(np.cumsum(diff)[:num_steps].max()), 0)


def peak_live_bytes(program: Program | Instance) -> int:
    """Max over instructions ``t`` of the summed sizes of the tensors live at ``t``.

    A tensor is live over ``[max(def_time, 0), last_use_time]`` (inclusive): a program
    input from time 0 to its last use (one never read, ``last_use_time = -1``, is live
    at no step), an output from its definition to its last use. Works on a program or
    an instance (both have ``tensors`` and ``instructions``).

    Raises :class:`~mallocgame.errors.InstanceError` naming the tensor (and its shape)
    whose size is outside ``0 .. 2**53`` bytes (SPEC section 1); exact at any number of
    tensors (summed as Python ints where int64 could overflow).
    """
    tensors = program.tensors
    for x in tensors:
        if not (isinstance(x.size, (int, np.integer)) and 0 <= x.size <= MAX_BYTES):
            shape = getattr(x, "shape", "")
            raise InstanceError(
                f"tensor {x.id} ({x.name}{', ' + shape if shape else ''}): size {x.size!r} "
                "outside 0..2**53 bytes (SPEC section 1)"
            )
    sizes = [int(x.size) for x in tensors]
    return peak_of(
        np.array(sizes, dtype=np.int64 if sum(sizes) < 2**63 else object),
        np.fromiter((x.def_time for x in tensors), dtype=np.int64, count=len(tensors)),
        np.fromiter((x.last_use_time for x in tensors), dtype=np.int64, count=len(tensors)),
        len(program.instructions),
    )


def capacity_bytes(preset: HardwarePreset, peak: int, capacity_fraction: float) -> int:
    """The capacity rule (module docstring) for a program of ``peak`` live bytes."""
    align = preset.alignment_bytes
    # capped before the floor: a large fraction times the peak can pass any float (inf)
    scaled = math.floor(min(capacity_fraction * peak, preset.fast_memory_bytes))
    floored = (scaled // align) * align
    return min(preset.fast_memory_bytes, max(align, floored))  # never past the physical


def compute_seconds(flops: float, transcendentals: float, preset: HardwarePreset) -> float:
    """``max(flops / peak_flops, transcendentals / peak_transcendentals)``."""
    return max(flops / preset.peak_flops, transcendentals / preset.peak_transcendentals)


DOT_OPCODES = ("mm", "addmm", "bmm", "baddbmm")  # operands [..., bias], left, right
DOT_OPERANDS = {"mm": 2, "addmm": 3, "bmm": 2, "baddbmm": 3}
"""A matmul's distinct operands in argument order; fewer where the frontend merged or
deduplicated some (a module's weight and bias at node granularity, ``addmm(b, x, x.t())``),
and then which is left and which right is not known."""
MAX_TABLE_BUFFERS = 8  # SPEC section 5: a table varies at most 8 buffers
_SHAPE = re.compile(r"\[([0-9,\s]*)\]\s*$")


_MAX_DIM_DIGITS = 20  # a dimension past 10**20 elements describes no tensor of <= 2**53 bytes
_ELEMENTS_PER_BYTE = 8  # the most elements a byte holds (one bit each)


def _dims(shape: str) -> tuple[int, ...] | None:
    """``(8, 64)`` from a shape string such as ``"float32[8,64]"``; ``None`` if unreadable
    (no trailing ``[...]`` of whole numbers, or a dimension of more than 20 digits)."""
    m = _SHAPE.search(shape)
    if m is None:
        return None
    parts = [p for p in m.group(1).replace(" ", "").split(",") if p]
    if any(len(p) > _MAX_DIM_DIGITS for p in parts):
        return None
    return tuple(int(p) for p in parts)


def slow_read_factors(program: Program, ins: ProgramInstruction, tile: int) -> tuple[int, ...]:
    """How many times ``ins`` reads each of its buffers (operands, then outputs) when it is
    in slow memory, for matmul kernels of ``tile``-wide output tiles (module docstring).

    For an opcode of :data:`DOT_OPCODES` with its :data:`DOT_OPERANDS` operands whose
    first output has a shape ``[..., M, N]``: ``ceil(N / tile)`` for the left operand (the
    second last), ``ceil(M / tile)`` for the right one (the last), 1 for the rest; all 1
    otherwise (operands merged or repeated: left and right unknown), or with ``tile <= 0``.
    Raises :class:`~mallocgame.program.ProgramError` where that shape holds more elements
    than its tensor's bytes can (more than 8 a byte): the shape does not describe it.
    """
    k = len(ins.operands) + len(ins.outputs)
    ones = (1,) * k
    if tile <= 0 or DOT_OPERANDS.get(ins.opcode) != len(ins.operands) or not ins.outputs:
        return ones
    out = program.tensors[ins.outputs[0]]
    shape = getattr(out, "shape", "")
    dims = _dims(shape)
    if _SHAPE.search(shape) is not None and (
        dims is None or math.prod(dims) > _ELEMENTS_PER_BYTE * out.size
    ):
        raise ProgramError(
            f"instruction {ins.name}: the shape {shape:.80} of its output {out.name} holds "
            f"more elements than its {out.size} bytes can"
        )
    if dims is None or len(dims) < 2 or min(dims) < 1:
        return ones
    m, n = dims[-2], dims[-1]
    factors = list(ones)
    factors[len(ins.operands) - 2] = -(-n // tile)
    factors[len(ins.operands) - 1] = -(-m // tile)
    return tuple(factors)


def _tiled_table(
    sizes: tuple[int, ...],
    factors: tuple[int, ...],
    compute: float,
    fixed: float,
    fast_bw: float,
    slow_bw: float,
) -> tuple[float, ...]:
    """``L(mask) = fixed + max(compute, sum_i term_i)`` for every fast set ``mask`` (bit
    ``i``: buffer ``i`` fast); ``term_i = size_i / fast_bw`` when fast, else
    ``size_i * factor_i / slow_bw``; summed left to right."""
    table = []
    for mask in range(1 << len(sizes)):
        mem = 0.0
        for i, size in enumerate(sizes):
            mem += size / fast_bw if mask >> i & 1 else size * factors[i] / slow_bw
        table.append(fixed + max(compute, mem))
    return tuple(table)


def _staged_table(
    sizes: tuple[int, ...],
    operands: int,
    compute: float,
    fixed: float,
    bandwidths: tuple[float, float, float],
) -> tuple[float, ...]:
    """``L(mask) = fixed + stall + max(compute, mem)`` for every fast set ``mask`` (bit ``i``:
    buffer ``i`` fast): each slow one of the first ``operands`` buffers adds
    ``size / copy_bw`` to ``stall`` and ``size / fast_bw`` to ``mem`` (staged), a slow output
    ``size / slow_bw``, a fast buffer ``size / fast_bw``; ``bandwidths``: ``(fast_bw,
    slow_bw, copy_bw)``, bytes/s."""
    fast_bw, slow_bw, copy_bw = bandwidths
    table = []
    for mask in range(1 << len(sizes)):
        stall = mem = 0.0
        for i, size in enumerate(sizes):
            if mask >> i & 1:
                mem += size / fast_bw
            elif i < operands:
                stall += size / copy_bw
                mem += size / fast_bw
            else:
                mem += size / slow_bw
        table.append(fixed + stall + max(compute, mem))
    return tuple(table)


def _resolve(preset: HardwarePreset | str) -> HardwarePreset:
    if isinstance(preset, HardwarePreset):
        return preset
    return get_preset(preset)


def derive_instance(
    program: Program,
    preset: HardwarePreset | str,
    *,
    capacity_fraction: float | None = DEFAULT_CAPACITY_FRACTION,
    name: str | None = None,
) -> Instance:
    """The game instance of ``program`` on ``preset`` (a preset or its name); see the module docstring.

    Raises :class:`~mallocgame.program.ProgramError` for an invalid program,
    :class:`~mallocgame.hardware.UnknownPresetError` for an unknown preset name and
    :class:`~mallocgame.errors.InstanceError` for a ``capacity_fraction`` that is
    neither ``None`` (the physical fast memory) nor a finite real number > 0 (NumPy's too,
    not a bool), which is taken as a ``float``.
    """
    if not isinstance(program, Program):  # an Instance is not re-derived: its program is
        raise ProgramError(f"derive_instance: expected a Program, not {program!r:.80}")
    if name is not None and not isinstance(name, str):
        raise InstanceError(f"derive_instance: name must be a string, not {name!r:.80}")
    hw_preset = _resolve(preset)
    _check_capacity_fraction(capacity_fraction)
    if capacity_fraction is not None:  # np.float32(0.5) too: the name and source hold a float
        capacity_fraction = float(capacity_fraction)
    validate_program(program)

    peak = peak_live_bytes(program)
    hardware = _derived_hardware(hw_preset, peak, capacity_fraction)
    buffers, instructions = _buffers_and_instructions(program, hw_preset, hardware)
    instance = Instance(
        name=program.name if name is None else name,
        hardware=hardware,
        instructions=tuple(instructions),
        tensors=_instance_tensors(program),
        buffers=tuple(buffers),
        loops=tuple(Loop(lp.first, lp.last, lp.trip_count) for lp in program.loops),
        source=_derived_source(program, hw_preset, capacity_fraction, peak),
    )
    validate(instance)
    return instance


def _check_capacity_fraction(capacity_fraction: float | None) -> None:
    """:class:`InstanceError` unless ``capacity_fraction`` is ``None`` or a finite real
    number > 0 (NumPy's too, not a bool)."""
    if capacity_fraction is not None and (
        not is_finite_real(capacity_fraction) or capacity_fraction <= 0
    ):
        raise InstanceError(
            f"capacity_fraction must be a finite number > 0, got {capacity_fraction!r}"
        )


def _derived_hardware(
    hw_preset: HardwarePreset, peak: int, capacity_fraction: float | None
) -> Hardware:
    """The instance's hardware: the preset's, with the capacity rule's fast memory (bytes)
    and name for a program of ``peak`` live bytes."""
    if capacity_fraction is None:
        fast_bytes, hw_name = hw_preset.fast_memory_bytes, hw_preset.name
    else:
        fast_bytes = capacity_bytes(hw_preset, peak, capacity_fraction)
        hw_name = f"{hw_preset.name}@{capacity_fraction:g}peak"
    return Hardware(
        name=hw_name,
        fast_memory_bytes=fast_bytes,
        alignment_bytes=hw_preset.alignment_bytes,
        fast_bandwidth=hw_preset.fast_bandwidth,
        slow_bandwidth=hw_preset.slow_bandwidth,
        copy_bandwidth=hw_preset.copy_bandwidth,
    )


class _AliasIds:
    """Alias ids of the buffers in game order: a program group's members share one id, every
    other buffer gets a fresh one; ids numbered in game order of first use."""

    def __init__(self, program: Program) -> None:
        self.groups_at: dict[int, dict[int, int]] = {}  # instruction -> position -> group
        for g, group in enumerate(program.alias_groups):
            for t, p in group:
                self.groups_at.setdefault(t, {})[p] = g
        self.group_alias: dict[int, int] = {}
        self.next_alias = 0

    def of(self, t: int, p: int) -> int:
        """The alias id of buffer position ``p`` of instruction ``t`` (called in game order)."""
        gmap = self.groups_at.get(t)
        g = None if gmap is None else gmap.get(p)
        if g is None:
            alias = self.next_alias
            self.next_alias += 1
            return alias
        if g not in self.group_alias:
            self.group_alias[g] = self.next_alias
            self.next_alias += 1
        return self.group_alias[g]


class _Latency:
    """One instruction's latency terms on a preset (seconds): its ``supply_s``, its latency
    model and each buffer's ``benefit_s`` (module docstring)."""

    def __init__(
        self,
        program: Program,
        ins: ProgramInstruction,
        hw_preset: HardwarePreset,
        hardware: Hardware,
    ) -> None:
        sizes = ins.operand_bytes + ins.output_bytes
        fast_bw, slow_bw = hardware.fast_bandwidth, hardware.slow_bandwidth
        self.fast_bw, self.slow_bw = fast_bw, slow_bw
        self.k = k = len(sizes)
        self.fixed = fixed = hw_preset.fixed_s
        self.compute = compute = compute_seconds(ins.flops, ins.transcendentals, hw_preset)
        self.count = count = ins.count

        # Memory terms, summed left to right exactly as latency.instruction_latency does;
        # prefix[p] is the sum of the first p slow terms.
        self.slow_terms = [s / slow_bw for s in sizes]
        self.prefix = prefix = [0.0] * (k + 1)
        mem_slow = 0.0
        for i, v in enumerate(self.slow_terms):
            mem_slow += v
            prefix[i + 1] = mem_slow
        self.mem_slow = mem_slow
        mem_fast = 0.0
        for s in sizes:
            mem_fast += s / fast_bw
        self.supply = fixed + max(compute, mem_fast)
        self.lat_empty = count * (fixed + max(compute, mem_slow))
        # Compute-bound with every buffer slow: no single buffer changes the latency
        # (rounding is monotone, so each L({b}) term is <= mem_slow <= compute), where
        # fast memory is the faster (a slower one can make the memory time the larger).
        self.compute_bound = compute >= mem_slow and fast_bw >= slow_bw
        self.exact = k <= EXACT_BENEFIT_MAX_BUFFERS
        factors = slow_read_factors(program, ins, hw_preset.slow_dot_tile)
        self.table: tuple[float, ...] | None = None
        if k <= MAX_TABLE_BUFFERS and any(f != 1 for f in factors):
            self.table = _tiled_table(sizes, factors, compute, fixed, fast_bw, slow_bw)
            self.supply = self.table[-1]
        elif hw_preset.slow_dot_staged and k <= MAX_TABLE_BUFFERS and ins.opcode in DOT_OPCODES:
            self.table = _staged_table(
                sizes,
                len(ins.operands),
                compute,
                fixed,
                (fast_bw, slow_bw, hardware.copy_bandwidth),
            )
            self.supply = self.table[-1]

    def benefit(self, p: int, size: int) -> float:
        """``benefit_s`` of the buffer at position ``p`` (``size`` bytes): seconds saved over
        all executions by that buffer alone in fast memory."""
        count, fixed, compute = self.count, self.fixed, self.compute
        if self.table is not None:  # as latency.instruction_latency forms it, bit for bit
            return count * self.table[0] - count * self.table[1 << p]
        if self.compute_bound:
            return 0.0
        if self.exact:
            mem_b = self.prefix[p] + size / self.fast_bw
            for i in range(p + 1, self.k):
                mem_b += self.slow_terms[i]
            return self.lat_empty - count * (fixed + max(compute, mem_b))
        mem_b = self.mem_slow - self.slow_terms[p] + size / self.fast_bw
        benefit = self.lat_empty - count * (fixed + max(compute, mem_b))
        # rounding alone: no buffer slows its instruction where fast memory is the faster
        # (where it is the slower, SPEC allows it, the loss is real and kept)
        return max(0.0, benefit) if self.fast_bw >= self.slow_bw else benefit

    def model(self, buffers: tuple[int, ...]) -> RooflineLatency | TableLatency:
        """The instruction's latency model over its ``buffers`` (their ids)."""
        if self.table is None:
            return RooflineLatency(compute_s=self.compute, fixed_s=self.fixed)
        return TableLatency(varied=buffers, latency_s=self.table)


def _buffers_and_instructions(
    program: Program, hw_preset: HardwarePreset, hardware: Hardware
) -> tuple[list[Buffer], list[Instruction]]:
    """The instance's buffers (SPEC section 2, in game order) and instructions."""
    copy_bw = hardware.copy_bandwidth
    aliases = _AliasIds(program)
    buffers: list[Buffer] = []
    instructions: list[Instruction] = []
    for t, ins in enumerate(program.instructions):
        tensor_ids = ins.operands + ins.outputs
        sizes = ins.operand_bytes + ins.output_bytes
        num_ops = len(ins.operands)
        latency = _Latency(program, ins, hw_preset, hardware)
        first = len(buffers)
        for p, size in enumerate(sizes):
            buffers.append(
                Buffer(
                    len(buffers),
                    t,
                    tensor_ids[p],
                    aliases.of(t, p),
                    p >= num_ops,
                    size,
                    size / copy_bw,
                    latency.benefit(p, size),
                )
            )
        ids = tuple(range(first, len(buffers)))
        instructions.append(
            Instruction(
                name=ins.name,
                opcode=ins.opcode,
                count=ins.count,
                supply_s=latency.supply,
                buffers=ids,
                latency=latency.model(ids),
            )
        )
    return buffers, instructions


def _instance_tensors(program: Program) -> tuple[Tensor, ...]:
    """The program's tensors as the instance's."""
    values = attrgetter(*(f.name for f in fields(Tensor)))  # in the fields' order
    return tuple(Tensor(*values(x)) for x in program.tensors)


def _derived_source(
    program: Program, hw_preset: HardwarePreset, capacity_fraction: float | None, peak: int
) -> dict[str, Any]:
    """The instance's ``source``: the program's, plus the preset, the capacity rule and the
    cost model's figures (module docstring)."""
    source: dict[str, Any] = dict(program.source)
    source.update(
        {
            "preset": hw_preset.name,
            "capacity_rule": PHYSICAL_CAPACITY_RULE if capacity_fraction is None else CAPACITY_RULE,
            "capacity_fraction": None if capacity_fraction is None else float(capacity_fraction),
            "peak_live_bytes": peak,
            "preset_fast_memory_bytes": hw_preset.fast_memory_bytes,
            "cost_model": {
                "peak_flops": hw_preset.peak_flops,
                "peak_transcendentals": hw_preset.peak_transcendentals,
                "fixed_s": hw_preset.fixed_s,
            },
        }
    )
    if hw_preset.slow_dot_tile > 0:
        source["cost_model"]["slow_dot_tile"] = hw_preset.slow_dot_tile
    if hw_preset.slow_dot_staged:
        source["cost_model"]["slow_dot_staged"] = True
    return source
