"""The cost model: Program + preset -> Instance, every number checked by hand."""

from __future__ import annotations

import dataclasses
import random

import pytest

from mallocgame.check import check_solution
from mallocgame.costmodel import (
    CAPACITY_RULE,
    EXACT_BENEFIT_MAX_BUFFERS,
    capacity_bytes,
    derive_instance,
    peak_live_bytes,
    slow_read_factors,
)
from mallocgame.errors import InstanceError
from mallocgame.hardware import PRESETS, HardwarePreset, UnknownPresetError
from mallocgame.instance import RooflineLatency, TableLatency, instance_from_dict, validate
from mallocgame.latency import instruction_latency
from mallocgame.program import (
    Program,
    ProgramError,
    ProgramInstruction,
    ProgramLoop,
    ProgramTensor,
)
from mallocgame.solvers import get_solver
from tests.builders import tiny_program

# Round numbers: 100 bytes take 1 s from slow memory, 0.1 s from fast, 2 s to copy.
TOY = HardwarePreset(
    name="toy",
    fast_memory_bytes=1 << 20,
    alignment_bytes=64,
    fast_bandwidth=1000.0,
    slow_bandwidth=100.0,
    copy_bandwidth=50.0,
    peak_flops=1e6,
    peak_transcendentals=1e4,
    fixed_s=0.5,
    sources=("test",),
    assumptions=("fixed_s: test",),
)


def test_peak_live_bytes_by_hand():
    # t0: W+x = 1400; t1: W+x+y = 2000; t2: W+y+z = 2200; t3: z+out = 1200.
    assert peak_live_bytes(tiny_program()) == 2200


def _wide_read(sizes: list[int]) -> Program:
    """One instruction reading one program input of each of ``sizes`` (not validated)."""
    n = len(sizes)
    tensors = tuple(
        ProgramTensor(i, f"in{i}", s, -1, 0, shape=f"u8[{s}]") for i, s in enumerate(sizes)
    )
    tensors += (ProgramTensor(n, "out", 8, 0, 0, live_out=True),)
    ins = ProgramInstruction("sum.0", "add", tuple(range(n)), (n,), tuple(sizes), (8,))
    return Program("wide", (ins,), tensors)


def test_peak_live_bytes_refuses_a_size_outside_spec_range():
    # A shape of more than int64's bytes used to crash numpy (OverflowError); 2**53 is the limit.
    with pytest.raises(
        InstanceError,
        match=r"tensor 1 \(in1, u8\[1180591620717411303424\]\): size "
        r"1180591620717411303424 outside 0..2\*\*53 bytes",
    ):
        peak_live_bytes(_wide_read([8, 2**70]))
    with pytest.raises(InstanceError, match=r"tensor 0 \(in0, u8\[9007199254740993\]\)"):
        peak_live_bytes(_wide_read([2**53 + 1]))
    with pytest.raises(InstanceError, match="tensor 0 .*: size -1 outside"):
        peak_live_bytes(_wide_read([-1]))
    assert peak_live_bytes(_wide_read([2**53])) == 2**53 + 8


def test_peak_live_bytes_is_exact_past_int64():
    # 1100 tensors of 2**53 bytes live together: 1100 * 2**53 > 2**63 would wrap in int64.
    assert peak_live_bytes(_wide_read([2**53] * 1100)) == 1100 * 2**53 + 8


def test_tiny_program_structure():
    inst = derive_instance(tiny_program(), TOY)
    validate(inst)
    assert inst.name == "tiny"
    # Game order: operands then outputs, instruction by instruction.
    assert [ins.buffers for ins in inst.instructions] == [(0,), (1, 2, 3), (4, 5, 6), (7, 8)]
    assert [b.instruction for b in inst.buffers] == [0, 1, 1, 1, 2, 2, 2, 3, 3]
    assert [b.tensor_id for b in inst.buffers] == [1, 0, 1, 2, 2, 0, 3, 3, 4]
    assert [b.is_output for b in inst.buffers] == [
        True,
        False,
        False,
        True,
        False,
        False,
        True,
        False,
        True,
    ]
    assert [b.size for b in inst.buffers] == [400, 1000, 400, 600, 600, 200, 600, 600, 600]
    # One id for the alias group {3, 4, 6, 7}, a fresh one for every other buffer.
    assert [b.alias_id for b in inst.buffers] == [0, 1, 2, 3, 3, 4, 3, 3, 5]
    # Tensors copied.
    assert [(x.size, x.def_time, x.last_use_time, x.live_out) for x in inst.tensors] == [
        (1000, -1, 2, False),
        (400, 0, 1, False),
        (600, 1, 2, False),
        (600, 2, 3, False),
        (600, 3, 3, True),
    ]
    assert [x.name for x in inst.tensors] == ["W", "x", "y", "z", "out"]
    assert [(lp.first, lp.last, lp.trip_count) for lp in inst.loops] == [(1, 2, 3)]
    assert [ins.count for ins in inst.instructions] == [1, 3, 3, 1]
    assert [ins.name for ins in inst.instructions] == ["iota.0", "dot.1", "dus.2", "exp.3"]
    assert [ins.opcode for ins in inst.instructions] == [
        "iota",
        "dot",
        "dynamic-update-slice",
        "exponential",
    ]


def test_tiny_program_numbers_by_hand():
    inst = derive_instance(tiny_program(), TOY)
    approx = lambda v: pytest.approx(v, rel=1e-12, abs=1e-15)  # noqa: E731
    # compute_s = max(flops / 1e6, transcendentals / 1e4); fixed 0.5 s.
    for ins, compute in zip(inst.instructions, [0.0, 2.0, 10.0, 0.015]):
        assert isinstance(ins.latency, RooflineLatency)
        assert ins.latency.compute_s == approx(compute)
        assert ins.latency.fixed_s == 0.5
    # supply = 0.5 + max(compute, all bytes / 1000).
    # t0: 0.4; t1: max(2, 2.0); t2: max(10, 1.4); t3: 1.2.
    assert [ins.supply_s for ins in inst.instructions] == [approx(v) for v in [0.9, 2.5, 10.5, 1.7]]
    # demand = size / 50.
    assert [b.demand_s for b in inst.buffers] == [
        approx(v) for v in [8, 20, 8, 12, 12, 4, 12, 12, 12]
    ]
    # benefit = count * (L(empty) - L({b})).
    # t0: L(empty) = 0.5 + 4 = 4.5, L({b0}) = 0.9.
    # t1 (x3): L(empty) = 0.5 + 20 = 20.5; W fast 11.5, x fast 16.9, y fast 15.1.
    # t2 (x3): L(empty) = 0.5 + max(10, 14) = 14.5; y fast max(10, 8.6) -> 10.5,
    #          W slice fast 0.5 + 12.2 = 12.7, z fast 10.5.
    # t3: L(empty) = 0.5 + 12 = 12.5; either buffer fast 0.5 + 6.6 = 7.1.
    expected = [3.6, 27.0, 10.8, 16.2, 12.0, 5.4, 12.0, 5.4, 5.4]
    assert [b.benefit_s for b in inst.buffers] == [approx(v) for v in expected]


def test_numbers_match_latency_module_exactly():
    inst = derive_instance(tiny_program(), TOY)
    for t, ins in enumerate(inst.instructions):
        full = instruction_latency(inst, t, frozenset(ins.buffers))
        assert ins.supply_s * ins.count == pytest.approx(full, rel=1e-15)
        empty = instruction_latency(inst, t, frozenset())
        for b in ins.buffers:
            assert inst.buffers[b].benefit_s == empty - instruction_latency(inst, t, frozenset({b}))


def test_capacity_rule_by_hand():
    program = tiny_program()
    # 0.25 * 2200 = 550 -> floored to 64-byte units: 512.
    inst = derive_instance(program, TOY)
    hw = inst.hardware
    assert hw.fast_memory_bytes == 512
    assert hw.alignment_bytes == 64
    assert (hw.fast_bandwidth, hw.slow_bandwidth, hw.copy_bandwidth) == (1000.0, 100.0, 50.0)
    assert hw.name == "toy@0.25peak"
    # 0.5 * 2200 = 1100 -> 1088.
    assert derive_instance(program, TOY, capacity_fraction=0.5).hardware.fast_memory_bytes == 1088
    # 0.01 * 2200 = 22 -> 0 units -> at least one alignment unit.
    assert derive_instance(program, TOY, capacity_fraction=0.01).hardware.fast_memory_bytes == 64
    # Recorded in the source, the program's own source kept.
    src = inst.source
    assert src["frontend"] == "hand" and src["model"] == "tiny"
    assert src["preset"] == "toy"
    assert src["capacity_rule"] == CAPACITY_RULE
    assert src["capacity_fraction"] == 0.25
    assert src["peak_live_bytes"] == 2200
    assert src["preset_fast_memory_bytes"] == 1 << 20
    assert derive_instance(program, TOY, name="other").name == "other"


def test_no_fraction_is_the_physical_fast_memory():
    from mallocgame.costmodel import PHYSICAL_CAPACITY_RULE

    inst = derive_instance(tiny_program(), TOY, capacity_fraction=None)
    assert inst.hardware.fast_memory_bytes == TOY.fast_memory_bytes == 1 << 20
    assert inst.hardware.name == "toy"
    assert inst.source["capacity_fraction"] is None
    assert inst.source["capacity_rule"] == PHYSICAL_CAPACITY_RULE
    assert inst.source["peak_live_bytes"] == 2200
    # Everything else is what the rule with a fraction derives.
    ruled = derive_instance(tiny_program(), TOY)
    assert inst.buffers == ruled.buffers and inst.instructions == ruled.instructions


def test_preset_capacity_caps_a_large_program():
    small = HardwarePreset(**{**TOY.__dict__, "name": "small", "fast_memory_bytes": 256})
    inst = derive_instance(tiny_program(), small, capacity_fraction=1.0)
    assert inst.hardware.fast_memory_bytes == 256  # min(256, 2176)
    assert inst.source["peak_live_bytes"] == 2200
    # Directly: a peak above the preset's memory takes the preset's memory.
    tpu = PRESETS["tpu_v4i"]
    assert capacity_bytes(tpu, 10 * 2**30, 0.25) == tpu.fast_memory_bytes
    assert capacity_bytes(tpu, 2**20, 0.25) == 2**18
    assert capacity_bytes(tpu, 10 * 2**30, 1e308) == tpu.fast_memory_bytes  # past any float
    # a physical memory under one alignment unit: that memory, not one unit past it
    tiny = HardwarePreset(**{**tpu.__dict__, "name": "tiny", "fast_memory_bytes": 100})
    assert tpu.alignment_bytes > 100 and capacity_bytes(tiny, 2**20, 0.25) == 100


def test_bad_arguments():
    with pytest.raises(UnknownPresetError):
        derive_instance(tiny_program(), "no_such_preset")
    for bad in (0, -0.5, float("nan"), float("inf"), True, 10**400):
        with pytest.raises(InstanceError):
            derive_instance(tiny_program(), TOY, capacity_fraction=bad)
    inst = derive_instance(tiny_program(), TOY)
    for not_a_program in (inst, None):  # an instance is not derived again
        with pytest.raises(ProgramError, match="derive_instance: expected a Program"):
            derive_instance(not_a_program, TOY)  # type: ignore[arg-type]
    with pytest.raises(InstanceError, match="name must be a string"):
        derive_instance(tiny_program(), TOY, name=5)  # type: ignore[arg-type]


def test_a_fraction_of_any_real_number_type_is_taken_as_a_float():
    """np.float32(0.5) was refused ("must be a finite number > 0"), though any finite value
    > 0 is accepted; it is taken as the float it equals, in the name and the source too."""
    from fractions import Fraction

    import numpy as np

    plain = derive_instance(tiny_program(), TOY, capacity_fraction=0.5)
    for fraction in (np.float32(0.5), np.float64(0.5), Fraction(1, 2)):
        inst = derive_instance(tiny_program(), TOY, capacity_fraction=fraction)
        assert inst.hardware == plain.hardware and inst.hardware.name == "toy@0.5peak"
        assert type(inst.source["capacity_fraction"]) is float
        assert inst.source == plain.source
    whole = derive_instance(tiny_program(), TOY, capacity_fraction=np.int64(1))
    assert whole.hardware == derive_instance(tiny_program(), TOY, capacity_fraction=1.0).hardware
    for bad in (np.float32("nan"), np.float64("inf"), np.float32(0), np.bool_(True), "0.5"):
        with pytest.raises(InstanceError, match="capacity_fraction must be a finite number > 0"):
            derive_instance(tiny_program(), TOY, capacity_fraction=bad)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_presets_by_name_and_file_round_trip(preset):
    inst = derive_instance(tiny_program(), preset)
    assert inst.hardware.name == f"{preset}@0.25peak"
    assert inst.hardware.alignment_bytes == PRESETS[preset].alignment_bytes
    assert inst.hardware.fast_memory_bytes % inst.hardware.alignment_bytes == 0
    again = instance_from_dict(inst.to_dict())
    assert again.sha256 == inst.sha256


def _chain_program(num_instructions: int, *, seed: int = 0, wide: int = 0) -> Program:
    """A chain: instruction t reads the previous output and a parameter (3 buffers each).

    Every fifth instruction updates its input in place: the input's definition and
    read and the output's definition and read form one alias group. The middle third
    is a loop body run 3 times; ``wide`` > 0 appends a concatenate of that many
    parameters (an instruction with ``wide + 1`` buffers).
    """
    rng = random.Random(seed)
    tensors: list[ProgramTensor] = []
    instructions: list[ProgramInstruction] = []
    groups = []
    last = num_instructions - 1
    prev = None
    for t in range(num_instructions):
        param = len(tensors)
        tensors.append(ProgramTensor(param, f"w{t}", rng.randrange(1, 64) * 256, -1, t))
        operands = (param,) if prev is None else (prev, param)
        in_place = prev is not None and t % 5 == 0
        size = tensors[prev].size if in_place else rng.randrange(1, 64) * 256
        out = len(tensors)
        tensors.append(ProgramTensor(out, f"a{t}", size, t, min(t + 1, last)))
        if in_place:
            group = [(t - 1, len(instructions[t - 1].operands)), (t, 0), (t, 2)]
            if t < last:
                group.append((t + 1, 0))
            groups.append(tuple(group))
        in_loop = num_instructions // 3 <= t < 2 * num_instructions // 3
        instructions.append(
            ProgramInstruction(
                f"op.{t}",
                "fusion",
                operands,
                (out,),
                tuple(tensors[x].size for x in operands),
                (size,),
                flops=rng.choice([0.0, 1e3, 1e6, 1e9]),
                transcendentals=rng.choice([0.0, 1e4]),
                count=3 if in_loop else 1,
            )
        )
        prev = out
    if wide:
        t = num_instructions
        params = []
        for i in range(wide):
            params.append(len(tensors))
            tensors.append(ProgramTensor(len(tensors), f"c{i}", rng.randrange(1, 64) * 256, -1, t))
        out = len(tensors)
        total = sum(tensors[x].size for x in params)
        tensors.append(ProgramTensor(out, "concat", total, t, t, live_out=True))
        instructions.append(
            ProgramInstruction(
                "concatenate",
                "concatenate",
                tuple(params),
                (out,),
                tuple(tensors[x].size for x in params),
                (total,),
                flops=1e3,
            )
        )
    return Program(
        name=f"chain{num_instructions}",
        instructions=tuple(instructions),
        tensors=tuple(tensors),
        alias_groups=tuple(groups),
        loops=(ProgramLoop(num_instructions // 3, 2 * num_instructions // 3 - 1, 3),),
    )


def test_large_program_derives():
    program = _chain_program(6700)
    assert program.num_buffers >= 20000
    inst = derive_instance(program, "tpu_v4i")
    assert inst.num_buffers == program.num_buffers
    assert inst.num_alias_groups < inst.num_buffers


def test_wide_instruction_benefits_match_latency_module():
    program = _chain_program(10, wide=EXACT_BENEFIT_MAX_BUFFERS + 36)
    inst = derive_instance(program, "gpu_hbm_host")
    t = len(inst.instructions) - 1
    ins = inst.instructions[t]
    assert len(ins.buffers) > EXACT_BENEFIT_MAX_BUFFERS
    empty = instruction_latency(inst, t, frozenset())
    for b in ins.buffers:
        expected = empty - instruction_latency(inst, t, frozenset({b}))
        assert inst.buffers[b].benefit_s == pytest.approx(expected, rel=1e-9, abs=1e-18)
        assert inst.buffers[b].benefit_s >= 0


def test_benefits_match_latency_module_where_fast_memory_is_the_slower() -> None:
    """Compute-bound with every buffer slow, a fast buffer can still be slower (SPEC lets
    fast memory be the slower one): its benefit is then negative, not 0."""
    slower = HardwarePreset(  # dot.1: 100 s of compute, 20 s of slow reads, 1,004 s fast
        **{**TOY.__dict__, "name": "slower", "fast_bandwidth": 1.0, "peak_flops": 2e4}
    )
    inst = derive_instance(tiny_program(), slower)
    benefits = []
    for t in range(inst.num_instructions):
        empty = instruction_latency(inst, t, frozenset())
        for b in inst.instructions[t].buffers:
            benefits.append(inst.buffers[b].benefit_s)
            assert benefits[-1] == empty - instruction_latency(inst, t, frozenset({b}))
    assert min(benefits) < 0


def test_a_wide_instructions_loss_is_kept_where_fast_memory_is_the_slower() -> None:
    """Past 64 buffers the benefit is computed in one pass: a buffer that slows its
    instruction (fast memory the slower) still has a negative benefit, not 0."""
    slower = HardwarePreset(**{**TOY.__dict__, "name": "slower", "fast_bandwidth": 1.0})
    inst = derive_instance(_chain_program(4, wide=100), slower, capacity_fraction=None)
    wide = max(inst.instructions, key=lambda ins: len(ins.buffers))
    assert len(wide.buffers) > 64
    t = inst.instructions.index(wide)
    empty = instruction_latency(inst, t, frozenset())
    for b in wide.buffers[:5]:
        exact = empty - instruction_latency(inst, t, frozenset({b}))
        assert exact < 0 and inst.buffers[b].benefit_s == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_random_chains_match_latency_module(seed):
    program = _chain_program(40, seed=seed)
    for preset in PRESETS.values():
        inst = derive_instance(program, preset, capacity_fraction=0.3)
        for t, ins in enumerate(inst.instructions):
            empty = instruction_latency(inst, t, frozenset())
            assert ins.supply_s * ins.count == pytest.approx(
                instruction_latency(inst, t, frozenset(ins.buffers)), rel=1e-15
            )
            for b in ins.buffers:
                assert inst.buffers[b].benefit_s == empty - instruction_latency(
                    inst, t, frozenset({b})
                )


@pytest.mark.parametrize("preset", sorted(PRESETS) + ["toy"])
def test_derived_instance_plays_a_full_game(preset):
    for program in (tiny_program(), _chain_program(60, seed=1)):
        inst = derive_instance(program, TOY if preset == "toy" else preset)
        solution = get_solver("random").solve(inst)
        report = check_solution(inst, solution)
        assert report.ok, report


def _matmul_program(opcode: str = "addmm") -> Program:
    """out[128, 256] = bias[256] + x[128, 64] @ w[64, 256], float32 (addmm), or an add."""
    tensors = (
        ProgramTensor(0, "bias", 1024, -1, 0, shape="float32[256]"),
        ProgramTensor(1, "x", 32768, -1, 0, shape="float32[128,64]"),
        ProgramTensor(2, "w", 65536, -1, 0, shape="float32[64,256]"),
        ProgramTensor(3, "out", 131072, 0, 0, live_out=True, shape="float32[128,256]"),
    )
    ins = ProgramInstruction(
        "mm.0", opcode, (0, 1, 2), (3,), (1024, 32768, 65536), (131072,), flops=2 * 128 * 64 * 256
    )
    return Program("matmul", (ins,), tensors)


def test_tiled_slow_reads_of_a_matmul_by_hand():
    tiled = HardwarePreset(**{**TOY.__dict__, "name": "tiled", "slow_dot_tile": 64})
    inst = derive_instance(_matmul_program(), tiled)
    (ins,) = inst.instructions
    # x is read once per 64-wide column tile (256/64 = 4), w once per row tile (128/64 = 2).
    assert isinstance(ins.latency, TableLatency) and ins.latency.varied == (0, 1, 2, 3)
    compute = 2 * 128 * 64 * 256 / TOY.peak_flops  # 4.19 s
    slow = [1024 / 100, 4 * 32768 / 100, 2 * 65536 / 100, 131072 / 100]
    fast = [s / 1000 for s in (1024, 32768, 65536, 131072)]
    table = ins.latency.latency_s
    assert table[0] == pytest.approx(0.5 + max(compute, sum(slow)))  # 3942.4 s all slow
    assert table[0b0010] == pytest.approx(0.5 + slow[0] + fast[1] + slow[2] + slow[3])
    assert table[0b1111] == pytest.approx(0.5 + sum(fast)) == ins.supply_s
    for p, b in enumerate(ins.buffers):
        assert inst.buffers[b].benefit_s == table[0] - table[1 << p]
        by_latency = instruction_latency(inst, 0, set()) - instruction_latency(inst, 0, {b})
        assert inst.buffers[b].benefit_s == by_latency
    assert inst.source["cost_model"]["slow_dot_tile"] == 64
    validate(inst)
    assert check_solution(inst, get_solver("random").solve(inst)).ok


@pytest.mark.parametrize("count", [3, 7, 1000003])
def test_a_tables_benefit_is_the_latency_modules_bit_for_bit(count: int) -> None:
    tiled = HardwarePreset(**{**TOY.__dict__, "name": "tiled", "slow_dot_tile": 64})
    program = _matmul_program()
    counted = dataclasses.replace(
        program, instructions=(dataclasses.replace(program.instructions[0], count=count),)
    )
    inst = derive_instance(counted, tiled)
    for b in inst.instructions[0].buffers:
        by_latency = instruction_latency(inst, 0, set()) - instruction_latency(inst, 0, {b})
        assert inst.buffers[b].benefit_s == by_latency


def test_tiled_slow_reads_are_opt_in():
    # Without the tile (every preset but gpu_h100_host), or for an opcode that is no matmul,
    # the roofline is unchanged and the source records nothing new.
    plain = derive_instance(_matmul_program(), TOY)
    assert isinstance(plain.instructions[0].latency, RooflineLatency)
    assert "slow_dot_tile" not in plain.source["cost_model"]
    tiled = HardwarePreset(**{**TOY.__dict__, "name": "tiled", "slow_dot_tile": 64})
    add = derive_instance(_matmul_program("add"), tiled)
    assert add.instructions[0].latency == plain.instructions[0].latency
    assert [b.benefit_s for b in add.buffers] == [b.benefit_s for b in plain.buffers]


def test_staged_slow_reads_of_a_matmul_by_hand():
    staged = HardwarePreset(**{**TOY.__dict__, "name": "staged", "slow_dot_staged": True})
    inst = derive_instance(_matmul_program(), staged)
    (ins,) = inst.instructions
    assert isinstance(ins.latency, TableLatency) and ins.latency.varied == (0, 1, 2, 3)
    compute = 2 * 128 * 64 * 256 / TOY.peak_flops
    sizes = (1024, 32768, 65536, 131072)  # bias, x, w: operands; out: the output
    fast = [s / TOY.fast_bandwidth for s in sizes]
    copy = [s / TOY.copy_bandwidth for s in sizes[:3]]
    table = ins.latency.latency_s
    # every operand slow: copied whole first (the kernel waits), then read fast; out slow
    assert table[0] == pytest.approx(0.5 + sum(copy) + max(compute, sum(fast[:3]) + 131072 / 100))
    # x fast: its copy is saved
    assert table[0b0010] == pytest.approx(
        0.5 + copy[0] + copy[2] + max(compute, sum(fast[:3]) + 131072 / 100)
    )
    assert table[0b1111] == pytest.approx(0.5 + max(compute, sum(fast))) == ins.supply_s
    for p, b in enumerate(ins.buffers):
        assert inst.buffers[b].benefit_s == table[0] - table[1 << p] > 0
    assert inst.source["cost_model"]["slow_dot_staged"] is True
    assert "slow_dot_tile" not in inst.source["cost_model"]
    validate(inst)
    assert check_solution(inst, get_solver("random").solve(inst)).ok
    # another opcode keeps the roofline
    add = derive_instance(_matmul_program("add"), staged)
    assert isinstance(add.instructions[0].latency, RooflineLatency)


def test_the_staged_preset_is_the_measured_h100_with_staged_reads():
    from mallocgame.hardware import get_preset, staged_variant

    h, staged = get_preset("gpu_h100_host"), get_preset("gpu_h100_host_staged")
    assert staged == staged_variant(h) and staged_variant(staged) is staged
    assert staged.slow_dot_staged and staged.slow_dot_tile == 0
    assert staged.figures() == h.figures()  # the same machine
    assert staged.assumed("slow_dot_staged")
    program = _matmul_program()
    assert derive_instance(program, staged).sha256 != derive_instance(program, h).sha256


def test_slow_read_factors_follow_the_output_shape():
    program = _matmul_program()
    ins = program.instructions[0]
    assert slow_read_factors(program, ins, 64) == (1, 4, 2, 1)
    assert slow_read_factors(program, ins, 100) == (1, 3, 2, 1)  # ceil(256/100), ceil(128/100)
    assert slow_read_factors(program, ins, 0) == (1, 1, 1, 1)
    bmm = ProgramInstruction("bmm", "bmm", (1, 2), (3,), (32768, 65536), (131072,))
    assert slow_read_factors(program, bmm, 64) == (4, 2, 1)
    unknown = Program(
        "noshape", (ins,), tuple(dataclasses.replace(t, shape="") for t in program.tensors)
    )
    assert slow_read_factors(unknown, ins, 64) == (1, 1, 1, 1)
    # an addmm whose operands the frontend merged or deduplicated (node granularity's
    # weight with bias, addmm(b, x, x.t())): left and right unknown, no tile factors
    merged = dataclasses.replace(
        ins, operands=ins.operands[1:], operand_bytes=ins.operand_bytes[1:]
    )
    assert slow_read_factors(program, merged, 64) == (1, 1, 1)


@pytest.mark.parametrize(
    "shape",
    ["float32[128,100000000000]", "float32[128," + "9" * 400 + "]", "f32[" + "9" * 5000 + "]"],
)
def test_a_matmul_shape_its_bytes_cannot_hold_is_refused(shape: str) -> None:
    """A shape that does not describe its tensor set read factors of 10**8 (a latency 10**7
    times too slow) or raised OverflowError from the table."""
    program = _matmul_program()
    out = dataclasses.replace(program.tensors[3], shape=shape)
    bad = dataclasses.replace(program, tensors=(*program.tensors[:3], out))
    with pytest.raises(ProgramError, match="holds more elements than its 131072 bytes can"):
        slow_read_factors(bad, bad.instructions[0], 64)
    tiled = HardwarePreset(**{**TOY.__dict__, "name": "tiled", "slow_dot_tile": 64})
    with pytest.raises(ProgramError, match="mm.0"):
        derive_instance(bad, tiled)
    assert derive_instance(bad, TOY).num_buffers == 4  # untiled presets do not read shapes
