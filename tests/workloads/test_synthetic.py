"""Tests of the synthetic workload generator (mallocgame.workloads.synthetic)."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mallocgame.costmodel import derive_instance, peak_live_bytes
from mallocgame.errors import InputFileError, InstanceError
from mallocgame.hardware import get_preset
from mallocgame.instance import Buffer, Instance, load_instance, save_instance, validate
from mallocgame.latency import instruction_latency
from mallocgame.program import validate_program
from mallocgame.workloads import synthetic
from mallocgame.workloads.synthetic import SYNTHETIC_NAMES, generate, named, program

# sha256 of each named instance: a change of the generator or of the cost model that
# changes them is a new version of the suite (synthetic-v3), not a silent edit.
PINNED_SHA256 = {
    "synthetic-v1/small": "ce0c8c23e5bec529da99cbf13eed9579c908301ef3cbfb02268099f902e9a1b2",
    "synthetic-v1/1k": "563d190e01d735c4ff01bcc85fc4d48cff8b627b07c0195370ef6f0dd49e8a25",
    "synthetic-v1/4k": "dc19920e820ca3716ee3cff7a701ae24b5d77a4695c86b597d887cdb67e10e58",
    "synthetic-v1/16k": "3599338c572d86d8b854c83e6ff9ef4de2652c1e756569965f4d8d9fb09eb70b",
    "synthetic-v2/small": "03106872df5ef304c348606f82d16b6dfdea7181c39a79878392db32d1868aae",
    "synthetic-v2/1k": "fb912b631df29df22ca54b0a5057104f1832b868e746800699943e3b8903abd7",
    "synthetic-v2/4k": "b8d39ac0a40a577e90f81ded8d51b98a2d419f9438d6d6d47af7aaa122f1b5a1",
    "synthetic-v2/16k": "512f90eb532a4149b2f0be5920478441e5c5ac7964ba76424599783276d50f30",
}


def _reads(inst: Instance) -> dict[int, list[int]]:
    """Tensor id -> times it is read, in game order."""
    out: dict[int, list[int]] = defaultdict(list)
    for b in inst.buffers:
        if not b.is_output:
            out[b.tensor_id].append(b.instruction)
    return out


@pytest.fixture(scope="module")
def big() -> Instance:
    return generate(4000, 3, loop=True)


@settings(max_examples=60, deadline=None)
@given(num_buffers=st.integers(1, 400), seed=st.integers(0, 2**32 - 1))
def test_valid_with_exact_buffer_count(num_buffers: int, seed: int) -> None:
    inst = generate(num_buffers, seed)
    validate(inst)
    assert inst.num_buffers == num_buffers


@settings(max_examples=30, deadline=None)
@given(num_buffers=st.integers(5, 400), seed=st.integers(0, 2**32 - 1))
def test_structure_rules(num_buffers: int, seed: int) -> None:
    inst = generate(num_buffers, seed)
    _check_sizes_and_costs(inst)
    _check_alias_groups(inst)
    _check_live_ranges(inst)
    _check_capacity(inst, 0.25)
    _check_alias_groups(generate(num_buffers, seed, version=1), version=1)


def test_versions_differ_in_the_alias_groups_alone() -> None:
    v1, v2 = (program(2000, 5, loop=True, version=v) for v in (1, 2))
    assert (v1.name, v2.name) == ("synthetic-v1/b2000-s5-loop", "synthetic-v2/b2000-s5-loop")
    assert (v1.instructions, v1.tensors, v1.loops) == (v2.instructions, v2.tensors, v2.loops)
    # chained in-place updates of one storage are one group in v2, a pair each in v1
    assert 0 < len(v2.alias_groups) < len(v1.alias_groups)
    # v2's groups hold more than the in-place pairs: the tensors' other reads and definitions
    assert (
        sum(map(len, v2.alias_groups)) > sum(map(len, v1.alias_groups)) == 2 * len(v1.alias_groups)
    )
    assert program(2000, 5, loop=True) == v2  # the newest version is the default
    for version in (0, 3, True, "2", 2.0):
        with pytest.raises(ValueError, match="version must be one of"):
            program(10, 0, version=version)


def _check_sizes_and_costs(inst: Instance) -> None:
    hw = inst.hardware
    for b in inst.buffers:
        x = inst.tensors[b.tensor_id]
        assert b.size == x.size
        assert 1024 <= b.size <= 4 * 1024 * 1024
        assert b.demand_s == pytest.approx(b.size / hw.copy_bandwidth, rel=1e-12)
        gain = instruction_latency(inst, b.instruction, frozenset()) - instruction_latency(
            inst, b.instruction, frozenset([b.id])
        )
        assert b.benefit_s == pytest.approx(gain, rel=1e-9, abs=1e-18)
    for t, ins in enumerate(inst.instructions):
        all_fast = instruction_latency(inst, t, frozenset(ins.buffers)) / ins.count
        assert ins.supply_s == pytest.approx(all_fast, rel=1e-12)
        assert ins.latency.compute_s >= 0


def _in_place_pairs(inst: Instance) -> list[tuple[Buffer, Buffer]]:
    """(operand 0, first output) of every dynamic-update-slice: the in-place updates."""
    pairs = []
    for ins in inst.instructions:
        if ins.opcode == "dynamic-update-slice":
            buffers = [inst.buffers[i] for i in ins.buffers]
            pairs.append((buffers[0], next(b for b in buffers if b.is_output)))
    return pairs


def _check_alias_groups(inst: Instance, version: int = synthetic.LATEST) -> None:
    """The alias groups re-derived from the in-place updates: version 2, SPEC section 1
    (every buffer of the tensors that share storage); version 1, each in-place operand
    buffer with its output buffer alone."""
    groups: dict[int, list[int]] = defaultdict(list)
    for b in inst.buffers:
        groups[b.alias_id].append(b.id)
    assert sorted(groups) == list(range(len(groups)))  # compact, in game order
    reads = _reads(inst)
    pairs = _in_place_pairs(inst)
    for operand, output in pairs:
        assert not operand.is_output and operand.instruction == output.instruction
        assert operand.size == output.size and operand.alias_id == output.alias_id
        # An in-place updated value is never read afterwards.
        assert max(reads[operand.tensor_id]) == operand.instruction
    if version == 1:
        expected = [{o.id, y.id} for o, y in pairs]
    else:
        storage = list(range(len(inst.tensors)))  # tensors sharing storage, merged naively
        for operand, output in pairs:
            old, new = storage[output.tensor_id], storage[operand.tensor_id]
            storage = [new if s == old else s for s in storage]
        joined = {b.tensor_id for pair in pairs for b in pair}
        by_storage: dict[int, set[int]] = defaultdict(set)
        for b in inst.buffers:
            if b.tensor_id in joined:
                by_storage[storage[b.tensor_id]].add(b.id)
        expected = list(by_storage.values())
    found = [set(m) for m in groups.values() if len(m) > 1]
    assert sorted(map(sorted, found)) == sorted(map(sorted, expected))


def _check_live_ranges(inst: Instance) -> None:
    last = inst.num_instructions - 1
    reads = _reads(inst)
    body_end = {}
    for lp in inst.loops:
        for t in range(lp.first, lp.last + 1):
            body_end[t] = lp.last
    for x in inst.tensors:
        times = reads[x.id]
        expected = max([x.def_time, *times, *(body_end.get(t, t) for t in times)])
        if x.live_out:
            assert x.def_time >= 0 and x.last_use_time == last
        else:
            assert x.last_use_time == expected
        if x.def_time < 0:
            assert times, "every program input is read"
    for t, ins in enumerate(inst.instructions):
        assert ins.count == (inst.loops[0].trip_count if t in body_end else 1)


def _check_capacity(inst: Instance, fraction: float) -> None:
    align = inst.hardware.alignment_bytes
    peak = peak_live_bytes(inst)
    cap = get_preset("tpu_v4i").fast_memory_bytes
    assert inst.hardware.fast_memory_bytes == max(
        align, min(cap, int(fraction * peak) // align * align)
    )


def test_deterministic_in_seed() -> None:
    a, b, c = generate(300, 11), generate(300, 11), generate(300, 12)
    assert a == b and a.sha256 == b.sha256
    assert a.sha256 != c.sha256
    for seed in (None, -1, 1.5, True, "3"):  # None: a new program on every call, one name
        with pytest.raises(ValueError, match="seed must be an integer >= 0"):
            generate(50, seed)


def test_loop_argument_changes_only_the_loop() -> None:
    with_loop, without = generate(500, 4, loop=True), generate(500, 4, loop=False)
    # two programs, two default names (an instance keyed by name is never the other)
    assert (with_loop.name, without.name, generate(500, 4).name) == (
        "synthetic-v2/b500-s4-loop",
        "synthetic-v2/b500-s4-noloop",
        "synthetic-v2/b500-s4",
    )
    assert len(with_loop.loops) == 1 and without.loops == ()
    lp = with_loop.loops[0]
    assert 0 <= lp.first <= lp.last < with_loop.num_instructions and lp.trip_count >= 2
    assert [i.opcode for i in with_loop.instructions] == [i.opcode for i in without.instructions]
    _check_live_ranges(with_loop)
    assert generate(20, 4, loop=True).loops == ()  # too small for a loop


def test_capacity_fraction_binds() -> None:
    for fraction in (0.1, 0.5):
        inst = generate(800, 2, capacity_fraction=fraction)
        _check_capacity(inst, fraction)
        assert inst.hardware.fast_memory_bytes < peak_live_bytes(inst)


def test_instance_is_the_cost_models_on_a_preset() -> None:
    prog = program(300, 7, loop=True)
    validate_program(prog)
    assert prog.num_buffers == 300 and len(prog.loops) == 1
    assert generate(300, 7, loop=True) == derive_instance(prog, "tpu_v4i")
    hw = generate(50, 0).hardware
    preset = get_preset("tpu_v4i")
    assert (hw.slow_bandwidth, hw.fast_bandwidth, hw.alignment_bytes) == (
        preset.slow_bandwidth,
        preset.fast_bandwidth,
        preset.alignment_bytes,
    )
    other = generate(50, 0, preset="gpu_hbm_host")
    assert other.hardware.slow_bandwidth == get_preset("gpu_hbm_host").slow_bandwidth
    assert [b.size for b in other.buffers] == [b.size for b in generate(50, 0).buffers]


def test_named_instances_are_pinned() -> None:
    assert set(PINNED_SHA256) == set(SYNTHETIC_NAMES)
    for name, sha in PINNED_SHA256.items():
        assert named(name).sha256 == sha, f"{name} changed: a new generator is a new suite version"


def test_program_looks_like_compiled_ml(big: Instance) -> None:
    validate(big)
    _check_alias_groups(big)
    _check_live_ranges(big)
    opcodes = {i.opcode for i in big.instructions}
    assert {"fusion", "dot", "convolution", "dynamic-update-slice"} <= opcodes
    outputs = [sum(big.buffers[b].is_output for b in i.buffers) for i in big.instructions]
    assert max(outputs) == 2 and sum(o == 1 for o in outputs) > 0.8 * len(outputs)
    reads = _reads(big)
    inputs = [x for x in big.tensors if x.def_time < 0]
    activations = [x for x in big.tensors if x.def_time >= 0]
    assert sum(len(reads[x.id]) >= 3 for x in inputs) >= 10  # weights re-read
    assert max(x.last_use_time for x in inputs) > big.num_instructions // 2
    distances = [t - x.def_time for x in activations for t in reads[x.id]]
    soon = sum(d <= 4 for d in distances)
    assert soon > 0.7 * len(distances)  # mostly read soon after definition
    assert sum(d > 50 for d in distances) > 20  # skip connections
    read_once_or_more = sum(bool(reads[x.id]) for x in activations)
    assert read_once_or_more > 0.85 * len(activations)
    assert any(x.live_out for x in activations)
    assert big.num_alias_groups < big.num_buffers
    sizes = sorted(x.size for x in big.tensors)
    assert sizes[len(sizes) // 10] < 16 * 1024 and sizes[-len(sizes) // 10] > 512 * 1024


def test_named_instances() -> None:
    sizes = {"small": 60, "1k": 1000, "4k": 4000, "16k": 16000}
    expected = {f"synthetic-v{v}/{name}": (v, n) for v in (1, 2) for name, n in sizes.items()}
    assert set(expected) == set(SYNTHETIC_NAMES)
    for name, (version, size) in expected.items():
        inst = named(name)
        assert inst.name == name and inst.num_buffers == size
        assert inst.loops
        _check_alias_groups(inst, version)
    with pytest.raises(InputFileError, match="unknown synthetic workload"):
        named("synthetic-v1/nope")


def test_file_round_trip(tmp_path) -> None:
    inst = generate(120, 5, loop=True)
    path = tmp_path / "synthetic.json.gz"
    save_instance(inst, path)
    loaded = load_instance(path)
    assert loaded.sha256 == inst.sha256
    assert loaded.buffers == inst.buffers and loaded.loops == inst.loops


@pytest.mark.parametrize(
    ("num_buffers", "fraction", "error"),
    [
        (0, 0.25, ValueError),
        (-3, 0.25, ValueError),
        (2.5, 0.25, ValueError),
        (10, 0.0, InstanceError),
        (10, -1.0, InstanceError),
        (10, math.nan, InstanceError),
    ],
)
def test_bad_arguments(num_buffers: int, fraction: float, error: type) -> None:
    with pytest.raises(error):
        synthetic.generate(num_buffers, 0, capacity_fraction=fraction)


@pytest.mark.parametrize("loop", ["no", 0, 1, "", 1.0])
def test_a_loop_that_is_not_a_bool_is_refused(loop: object) -> None:
    """``loop`` is True, False or None: ``"no"`` is no ``True``, nor ``0`` a ``False``."""
    with pytest.raises(ValueError, match="loop must be True, False or None"):
        synthetic.program(100, 0, loop=loop)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="loop must be True, False or None"):
        synthetic.generate(100, 0, loop=loop)  # type: ignore[arg-type]
