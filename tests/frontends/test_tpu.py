"""The TPU targets: libtpu compiling without a TPU, and what its modules hold.

The modules in ``data/libtpu`` were written by :mod:`tests.frontends.libtpu_fixtures`
(jax 0.10.2, libtpu 0.0.42.1); the tests that compile run libtpu itself (a second each).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from mallocgame.frontends import tpu
from mallocgame.frontends.argspec import parse_arg_spec
from mallocgame.frontends.hlo_cost import counted_trip_count, trip_count
from mallocgame.frontends.hlo_parse import parse_module
from mallocgame.frontends.xla import (
    CompileError,
    XlaFrontendError,
    extract_dump_with_placement,
    extract_module_with_placement,
    list_modules,
)
from mallocgame.hardware import get_preset
from tests.frontends.libtpu_fixtures import MLP_ARGS, SLICED_DUMP, mlp_grad, vmem_hog

DATA = Path(__file__).parent / "data" / "libtpu"
ROOT = Path(__file__).parents[2]
_SPACE = re.compile(r"(\w+)\[[^\]]*\]\{[^}]*S\((\d+)\)\}")


def _spaces_by_dtype(text: str) -> dict[int, set[str]]:
    """Memory space -> the element types of the values laid out in it."""
    spaces: dict[int, set[str]] = {}
    for dtype, space in _SPACE.findall(text):
        spaces.setdefault(int(space), set()).add(dtype)
    return spaces


@pytest.mark.parametrize("target", list(tpu.TPU_TARGETS))
def test_compiles_for_each_generation_and_extracts(target: str) -> None:
    args = [parse_arg_spec(a) for a in MLP_ARGS]
    program, placement = tpu.extract_jax_tpu(mlp_grad, *args, target=target, name="mlp")
    assert program.name == "mlp" and program.source["target"] == target
    assert len(program.instructions) >= 3
    fast = tpu.TPU_TARGETS[target].fast_spaces
    copies_in = [c for c in placement.copies if c.dest_space in fast]
    assert copies_in, f"{target}: no prefetch into {sorted(fast)}"


@pytest.mark.parametrize("target", list(tpu.TPU_TARGETS))
def test_fast_space_of_each_target_is_where_its_prefetches_go(target: str) -> None:
    """The evidence of the module docstring: prefetches copy into the target's fast space;
    space 2 holds only the synchronization scalars of asynchronous copies."""
    text = (DATA / f"mlp_grad.{target}.txt").read_text()
    dests = set()
    for line in text.splitlines():
        if " copy-start(" in line:
            dest = re.search(r"= \(\w+\[[^\]]*\]\{[^}]*?S\((\d+)\)\}", line)
            dests.add(int(dest.group(1)) if dest else 0)
    assert dests == set(tpu.TPU_TARGETS[target].fast_spaces)
    assert _spaces_by_dtype(text).get(2, set()) <= {"u32", "s32"}


def test_the_fast_spaces_are_the_compilers_own_memories(tmp_path: Path) -> None:
    """libtpu's memory-usage report names the spaces: ``vmem`` (1) on v5e, v5p and v6e; on
    v4 space 3 exists only with the CMEM flag on, so it is the CMEM."""
    args = [parse_arg_spec(a) for a in MLP_ARGS]

    def spaces(target: str, **flags: bool) -> dict[int, str]:
        dump = tmp_path / f"{target}-{len(flags)}"
        options = {"xla_dump_to": str(dump), **flags}
        tpu.compile_for_tpu(mlp_grad, *args, target=target, compiler_options=options)
        report = next(dump.glob("*memory-usage-report.txt")).read_text()
        found = re.findall(r"Memory Space: (\w+) \(color=(\d+)\)", report)
        return {int(color): name for name, color in found}

    assert spaces("tpu-v5e")[1] == "vmem" and spaces("tpu-v6e")[1] == "vmem"
    assert 3 in spaces("tpu-v4")
    assert 3 not in spaces("tpu-v4", xla_tpu_cmem_memory_space_assignment=False)


def test_sliced_prefetches_are_one_copy_of_the_whole_tensor() -> None:
    text = (DATA / "gru_infer_b512.tpu-v5e.txt").read_text()
    assert text.count("slice-start(") == 4 and "ConcatBitcast" in text
    program, placement = extract_module_with_placement(text, name="gru")
    assert not any(i.opcode in ("slice-start", "slice-done") for i in program.instructions)
    assert not any(
        i.opcode == "custom-call" and i.name.startswith("custom-call.2")
        for i in program.instructions
    )
    sliced = [x for x in program.tensors if "hz" in x.name and "kernel" in x.name]
    assert len(sliced) == 1
    copies = [c for c in placement.copies if c.tensor == sliced[0].id]
    assert len(copies) == 1 and copies[0].dest_space == 1 and copies[0].start < copies[0].done


def test_a_value_copied_before_a_loop_overwrites_it_and_read_after_is_its_own_storage() -> None:
    """libtpu starts a loop from an asynchronous copy of ``x`` (copy-start / copy-done, which
    the frontend strips) and reads ``x`` again after the loop: ``x`` was joined to the
    loop's carried value, one "storage" holding two values live at once, both read by one
    instruction, where XLA's buffer assignment keeps them apart."""
    program, _ = extract_module_with_placement((DATA / "loop_over_input.tpu-v5e.txt").read_text())
    (x,) = [t for t in program.tensors if t.name.startswith("x")]
    last = program.instructions[-1]
    (loop,) = program.loops
    assert x.id in last.operands and loop.last < len(program.instructions) - 1  # read after
    for group in program.alias_groups:  # no group holds x
        tensors = {
            (program.instructions[t].operands + program.instructions[t].outputs)[p]
            for t, p in group
        }
        assert x.id not in tensors
    assert "kept apart: " + x.name in program.source["notes"]
    # the loop-carried counter, overwritten in place and never read after, is one storage still
    assert len(program.alias_groups) == 1


def test_a_dumps_sliced_prefetch_reads_as_the_compiled_module_does() -> None:
    """A dump file writes each slice as ``async-start`` around a ``slice`` computation and
    ``async-done``, where the compiled module's text has ``slice-start`` / ``slice-done``:
    both read as one prefetch of the whole tensor (before, the dump's slices and their
    ``ConcatBitcast`` were instructions and the prefetch of ``b`` was lost)."""
    (dump_file,) = SLICED_DUMP.iterdir()
    dump_text = dump_file.read_text()
    assert dump_text.count(" async-start(%b.1), calls=%async_computation") == 4
    assert " slice-start(" not in dump_text
    text = (DATA / "three_layers.tpu-v5e.txt").read_text()
    assert text.count(" slice-start(%b.1)") == 4
    program, placement = extract_module_with_placement(text, name="h")
    from_dump, dump_placement = extract_dump_with_placement(SLICED_DUMP, name="h")
    assert replace(from_dump, source={}) == replace(program, source={})
    assert dump_placement == placement
    assert [i.opcode for i in from_dump.instructions] == ["fusion"] * 3
    (b,) = [x.id for x in from_dump.tensors if x.name == "b.1"]
    (copy,) = [c for c in dump_placement.copies if c.tensor == b]
    assert copy.dest_space == 1 and copy.start < copy.done


def test_a_sliced_prefetch_is_listed_as_the_instructions_it_makes(tmp_path: Path) -> None:
    """The count a dump's listing gives a module (by which the largest is picked) is what
    extracting it makes: a sliced prefetch's slices and their ``ConcatBitcast`` make no
    instruction, whether written as ``async-start`` (a dump file) or ``slice-start``."""
    (module,) = list_modules(SLICED_DUMP)
    program, _ = extract_dump_with_placement(SLICED_DUMP)
    assert module.num_instructions == len(program.instructions) == 3
    compiled = tmp_path / "module_0001.jit_three_layers.after_optimizations.txt"
    compiled.write_text((DATA / "three_layers.tpu-v5e.txt").read_text())
    (module,) = list_modules(tmp_path)
    assert module.num_instructions == 3


def test_an_async_slice_into_the_default_memory_is_an_instruction() -> None:
    """Only a slice into a memory space other than 0 is a sliced prefetch; an
    ``async-start`` of any other slice is an asynchronous instruction, as before."""
    text = """HloModule m, is_scheduled=true

%async_computation (p: f32[1024,128]) -> f32[256,128] {
  %p = f32[1024,128]{1,0} parameter(0)
  ROOT %s = f32[256,128]{1,0} slice(%p), slice={[0:256], [0:128]}
}

ENTRY %main (a: f32[1024,128]) -> f32[256,128] {
  %a = f32[1024,128]{1,0} parameter(0)
  %st = ((f32[1024,128]{1,0}), f32[256,128]{1,0}, s32[]) async-start(%a), calls=%async_computation
  ROOT %d = f32[256,128]{1,0} async-done(%st)
}
"""
    program, placement = extract_module_with_placement(text, name="m")
    assert [i.name for i in program.instructions] == ["st"]
    assert placement.copies == ()


def test_the_counted_loop_of_a_tpu_module_gets_its_trip_count() -> None:
    text = (DATA / "gru_infer_b512.tpu-v5e.txt").read_text()
    assert "known_trip_count" not in text
    program, _ = extract_module_with_placement(text, name="gru")
    assert [lp.trip_count for lp in program.loops] == [100]
    assert "trip count unknown" not in program.source.get("notes", "")


def test_a_sparsecore_offload_is_one_asynchronous_instruction() -> None:
    """v5p offloads a scatter to its SparseCore as ``call-start`` / ``call-done``: the start
    is the instruction (reading the ids and values, writing the sums), the done is a view."""
    text = (DATA / "segment_sum.tpu-v5p.txt").read_text()
    assert "call-start(" in text and 'async_execution_thread="sparsecore"' in text
    program, _ = extract_module_with_placement(text, name="segment_sum")
    assert not any(i.opcode == "call-done" for i in program.instructions)
    (start,) = [i for i in program.instructions if i.opcode == "call-start"]
    (sums,) = start.outputs
    assert program.tensors[sums].shape == "f32[64]" and program.tensors[sums].live_out
    shapes = {program.tensors[t].shape for t in start.operands}
    assert {"s32[65536]", "f32[65536]"} <= shapes
    assert start.flops > 0  # the offloaded computation's cost


@pytest.mark.parametrize("target", ["tpu-v5e", "tpu-v5p", "tpu-v6e"])
def test_each_vmem_preset_has_the_vmem_the_compiler_states(target: str) -> None:
    """A kernel asking for more VMEM than the chip has: libtpu names the VMEM's size,
    which is the fast memory of the generation's preset."""
    with pytest.raises(CompileError, match=r"would exceed memory \(size=(\d+)\)") as info:
        tpu.compile_for_tpu(vmem_hog(200), parse_arg_spec("f32[8,128]"), target=target)
    stated = int(re.search(r"would exceed memory \(size=(\d+)\)", str(info.value)).group(1))
    assert stated == get_preset(tpu.TPU_TARGETS[target].preset).fast_memory_bytes


def test_the_v4_preset_has_the_cmem_the_compiler_gives_its_assignment() -> None:
    """Offered more CMEM than it may use, the v4's memory-space assignment stops on a
    check naming its limit (the process aborts: run in a child)."""
    script = (
        "from mallocgame.frontends import tpu\n"
        "from mallocgame.frontends.argspec import parse_arg_spec\n"
        "from tests.frontends.libtpu_fixtures import MLP_ARGS, mlp_grad\n"
        "args = [parse_arg_spec(a) for a in MLP_ARGS]\n"
        "tpu.compile_for_tpu(mlp_grad, *args, target='tpu-v4', compiler_options="
        "{'xla_tpu_max_cmem_used_by_memory_space_assignment': 10**7})\n"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode != 0
    limit = re.search(r"larger than the user allocation limit \((\d+)\)", done.stderr)
    assert limit, done.stderr[-2000:]
    assert int(limit.group(1)) == get_preset("tpu_v4").fast_memory_bytes


_LOOP = """HloModule m, is_scheduled=true

%cond (p: (s32[], f32[4])) -> pred[] {
  %p = (s32[], f32[4]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(BOUND)
  ROOT %c = pred[] compare(LHS, RHS), direction=DIR
}

%body (q: (s32[], f32[4])) -> (s32[], f32[4]) {
  %q = (s32[], f32[4]) parameter(0)
  %j = s32[] get-tuple-element(%q), index=0
  %one = s32[] constant(STEP)
  %k = s32[] add(%j, %one)
  %v = f32[4] get-tuple-element(%q), index=1
  %w = f32[4] negate(%v)
  ROOT %r = (s32[], f32[4]) tuple(%k, %w)
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %zero = s32[] constant(START)
  %t = (s32[], f32[4]) tuple(%zero, %x)
  %loop = (s32[], f32[4]) while(%t), condition=%cond, body=%body
  ROOT %out = f32[4] get-tuple-element(%loop), index=1
}
"""


@pytest.mark.parametrize(
    ("start", "bound", "step", "direction", "counter_first", "trip"),
    [
        (0, 100, 1, "LT", True, 100),
        (0, 100, 1, "LE", True, 101),
        (3, 10, 2, "LT", True, 4),
        (0, 12, 3, "NE", True, 4),
        (0, 7, 1, "GT", False, 7),
        (5, 2, 1, "LT", True, 0),
        (0, 10, 3, "NE", True, None),  # never equal: not a counted loop
        (5, 0, 1, "NE", True, None),  # a start past the bound: it runs, never 0 trips
        (6, 5, 1, "NE", True, None),
        (0, 10, 1, "EQ", True, None),
        (0, 10, 0, "LT", True, None),
    ],
)
def test_counted_trip_count(
    start: int, bound: int, step: int, direction: str, counter_first: bool, trip: int | None
) -> None:
    lhs, rhs = ("%i", "%n") if counter_first else ("%n", "%i")
    text = (
        _LOOP.replace("BOUND", str(bound))
        .replace("STEP", str(step))
        .replace("START", str(start))
        .replace("DIR", direction)
        .replace("LHS", lhs)
        .replace("RHS", rhs)
    )
    module = parse_module(text)
    loop = module.entry.by_name["loop"]
    assert counted_trip_count(module, module.entry, loop) == trip


def test_a_stated_trip_count_wins_over_the_counted_one() -> None:
    """trip_count: the backend_config's known_trip_count where the loop states one (7,
    though its counter runs 5 trips), else the counted 5."""
    text = _LOOP.replace("BOUND", "5").replace("STEP", "1").replace("START", "0")
    text = text.replace("DIR", "LT").replace("LHS", "%i").replace("RHS", "%n")
    stated = text.replace(
        "body=%body\n", 'body=%body, backend_config={"known_trip_count":{"n":"7"}}\n'
    )
    for source, trips in ((text, 5), (stated, 7)):
        module = parse_module(source)
        assert trip_count(module, module.entry, module.entry.by_name["loop"]) == trips


def test_a_counted_loop_in_a_conditional_costs_its_trips() -> None:
    """A TPU module states no trip count: a counted loop inside a conditional's branch
    costs its counted trips, as the builder counts a loop at the entry."""
    from mallocgame.frontends.hlo_cost import CostModel

    loop = _LOOP.replace("BOUND", "5").replace("STEP", "1").replace("START", "0")
    loop = loop.replace("DIR", "LT").replace("LHS", "%i").replace("RHS", "%n")
    body = loop.split("ENTRY %main")[0]  # cond and body, an entry of its own below
    text = body + (
        "%branch (y: f32[4]) -> f32[4] {\n"
        "  %y = f32[4] parameter(0)\n"
        "  %zero = s32[] constant(0)\n"
        "  %t = (s32[], f32[4]) tuple(%zero, %y)\n"
        "  %loop = (s32[], f32[4]) while(%t), condition=%cond, body=%body\n"
        "  ROOT %out = f32[4] get-tuple-element(%loop), index=1\n"
        "}\n\n"
        "ENTRY %main (x: f32[4], c: s32[]) -> f32[4] {\n"
        "  %x = f32[4] parameter(0)\n"
        "  %c = s32[] parameter(1)\n"
        "  ROOT %r = f32[4] conditional(%c, %x), branch_computations={%branch}\n"
        "}\n"
    )
    module = parse_module(text)
    costs = CostModel(module)
    in_branch = costs.cost(module.entry.by_name["r"], module.entry)
    once = [
        costs.computation_cost(c)
        for c in (module.computations["cond"], module.computations["body"])
    ]
    trip = sum(f for f, _ in once)
    assert trip > 0 and in_branch[0] == 5 * trip  # five trips, not one


def test_unknown_target_is_refused() -> None:
    with pytest.raises(XlaFrontendError, match="unknown TPU target 'tpu-v9'") as refused:
        tpu.tpu_target("tpu-v9")
    assert "cpu," not in str(refused.value)  # not offered: it is refused too
    with pytest.raises(XlaFrontendError, match="unknown TPU target 'cpu'"):
        tpu.tpu_target("cpu")


@pytest.mark.parametrize("target", [["tpu-v4"], None, 4, {"tpu-v4": 1}])
def test_a_target_that_is_no_name_is_refused_before_the_device(target: object) -> None:
    """Before, ``compile_for_tpu(..., target=["tpu-v4"])`` raised a bare ``TypeError`` (the
    device cache hashes the target); now every target not named in TPU_TARGETS is the
    one-line XlaFrontendError an unknown name gets, before libtpu is asked for a device."""
    with pytest.raises(XlaFrontendError, match="unknown TPU target .* \\(a "):
        tpu.tpu_target(target)  # type: ignore[arg-type]
    args = [parse_arg_spec(a) for a in MLP_ARGS]
    with pytest.raises(XlaFrontendError, match="unknown TPU target .* \\(a "):
        tpu.compile_for_tpu(mlp_grad, *args, target=target)  # type: ignore[arg-type]


def test_a_target_that_is_no_name_has_the_default_fast_space() -> None:
    from mallocgame.frontends.xla_placement import DEFAULT_FAST_SPACES

    assert tpu.fast_spaces_of("tpu-v4") == tpu.TPU_TARGETS["tpu-v4"].fast_spaces
    for other in (["tpu-v4"], {"a": 1}, None, 4):  # a list or a dict is unhashable
        assert tpu.fast_spaces_of(other) == DEFAULT_FAST_SPACES


def test_missing_libtpu_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "libtpu" else real(name, *a)
    )
    tpu._device.cache_clear()
    try:
        with pytest.raises(
            tpu.TpuUnavailableError, match=r"needs libtpu: pip install 'jax\[tpu\]=="
        ):
            tpu.compile_for_tpu(mlp_grad, target="tpu-v4")
    finally:
        tpu._device.cache_clear()


def test_a_function_that_does_not_compile_is_one_line() -> None:
    def bad(x):
        return x @ x  # [3, 5] @ [3, 5]: the shapes do not chain

    with pytest.raises(CompileError, match=r"^bad: JAX could not compile it for tpu-v5e: ") as info:
        tpu.compile_for_tpu(bad, parse_arg_spec("f32[3,5]"), target="tpu-v5e")
    assert "\n" not in str(info.value)
