"""Scheduled modules from the TPU and GPU backends, written by hand in their syntax.

``data/tpu_mlp``: a TPU module after XLA's memory-space assignment (tiled layouts,
``S(1)``, a cross-program prefetch, a prefetch, an eviction, an asynchronous
all-reduce, sharding annotations). ``data/gpu_step``: a GPU module with asynchronous
collectives (all-gather, all-reduce, collective-permute, an ``async-start`` wrapping an
all-gather), send/recv and a custom-call aliasing its output with an operand.
``data/gpu_offload``: host offloading (``S(5)``) of an activation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mallocgame.frontends.xla import (
    DumpError,
    UnsupportedHloError,
    XlaFrontendError,
    extract_dump,
    extract_dump_with_placement,
    extract_module,
    list_modules,
)
from mallocgame.frontends.xla_placement import BufferSpace, XlaCopy

DATA = Path(__file__).parent / "data"


def _names(program, ids) -> list[str]:
    return [program.tensors[x].name for x in ids]


def test_dump_file_names_of_every_backend(tmp_path: Path) -> None:
    module = (DATA / "gpu_offload").glob("*.txt").__next__().read_text()
    for name in (
        "module_0001.jit_f.cpu_after_optimizations.txt",
        "module_0002.jit_g.sm_9.0_gpu_after_optimizations.txt",
        "module_0003.SyncTensorsGraph.4.after_optimizations.txt",
        "module_0003.SyncTensorsGraph.4.after_optimizations-buffer-assignment.txt",  # not a module
        "module_0003.SyncTensorsGraph.4.after_optimizations_before_buffer_assignment.txt",  # not one either
    ):
        (tmp_path / name).write_text(module)
    found = {(m.prefix, m.name, m.id) for m in list_modules(tmp_path)}
    assert {m.num_instructions for m in list_modules(tmp_path)} == {
        6
    }  # XLA's copies are not counted
    assert found == {
        ("module_0001.jit_f", "jit_f", "0001"),
        ("module_0002.jit_g", "jit_g", "0002"),
        ("module_0003.SyncTensorsGraph.4", "SyncTensorsGraph.4", "0003"),
    }


def test_tpu_module_strips_xlas_memory_space_assignment() -> None:
    program, placement = extract_dump_with_placement(DATA / "tpu_mlp")
    assert [i.name for i in program.instructions] == [
        "fusion.1",
        "fusion.2",
        "fusion.3",
        "all-reduce-start",
    ]
    f1, f2, f3, ar = program.instructions
    # copy-done is the copied tensor: fusion.3 reads fusion.1 (evicted, then read) and the weight.
    assert _names(program, f1.operands) == ["Arg_0.1", "Arg_1.2"]
    assert _names(program, f3.operands) == ["fusion.1", "Arg_2.3"]
    # Sizes are what the tiled layouts store: bf16[64,512] T(8,128)(2,1), f32[] T(256).
    assert f1.output_bytes == (64 * 512 * 2,) and f2.output_bytes == (256 * 4,)
    assert f1.flops == 2 * 64 * 512 * 256 and f1.transcendentals == 64 * 512
    assert _names(program, ar.operands) == ["fusion.2"] and ar.opcode == "all-reduce-start"
    assert program.tensors[ar.outputs[0]].live_out and program.tensors[f3.outputs[0]].live_out
    assert "3 copy-start/copy-done pairs" in program.source["notes"]
    assert placement.buffers[0] == (BufferSpace(0), BufferSpace(1, 0), BufferSpace(1))
    assert placement.buffers[2] == (BufferSpace(0, 2), BufferSpace(1, 1), BufferSpace(0))
    assert placement.copies == (
        XlaCopy(
            tensor=program.instructions[0].operands[1],
            source_space=0,
            dest_space=1,
            start=0,
            done=0,
        ),
        XlaCopy(tensor=f3.operands[1], source_space=0, dest_space=1, start=1, done=2),
        XlaCopy(tensor=f1.outputs[0], source_space=1, dest_space=0, start=1, done=2),
    )
    assert placement.spaces == frozenset({0, 1})
    assert extract_dump(DATA / "tpu_mlp") == program


def test_gpu_module_with_async_collectives_and_an_aliasing_custom_call() -> None:
    program = extract_dump(DATA / "gpu_step")
    by_name = {i.name: i for i in program.instructions}
    assert list(by_name) == [
        "all-gather-start",
        "custom-call.1",
        "async-start",
        "custom-call.2",
        "all-reduce-start",
        "recv",
        "send",
        "collective-permute-start",
        "fusion",
    ]
    # A start writes only its result (element 1 of its tuple), not the echo of its operand.
    ag = by_name["all-gather-start"]
    assert _names(program, ag.operands) == ["p2"] and ag.output_bytes == (8192 * 4,)
    assert _names(program, by_name["async-start"].outputs) == ["async-start{1}"]
    # *-done is the start's result; the fusion reads both gathers.
    assert _names(program, by_name["fusion"].operands) == ["all-gather-start{1}", "async-start{1}"]
    assert _names(program, by_name["collective-permute-start"].operands) == ["all-reduce-start"]
    assert by_name["recv"].operands == () and _names(program, by_name["recv"].outputs) == [
        "recv{0}"
    ]
    assert _names(program, by_name["send"].operands) == ["p3"] and by_name["send"].outputs == ()
    # output_to_operand_aliasing: custom-call.2 updates the gemm's result in place.
    t1, t3 = list(by_name).index("custom-call.1"), list(by_name).index("custom-call.2")
    # all-reduce-start updates its operand p2 in place (XLA's default), so p2's reads (by
    # all-gather-start and async-start) and the result's (collective-permute-start) are one group.
    t4, t7 = (
        list(by_name).index("all-reduce-start"),
        list(by_name).index("collective-permute-start"),
    )
    assert program.alias_groups == (
        ((0, 0), (2, 0), (t4, 0), (t4, 1), (t7, 0)),
        ((t1, 2), (t3, 0), (t3, 2)),
    )
    assert by_name["custom-call.1"].flops == 2 * 1024**3
    roots = {
        program.tensors[x].name for x in range(len(program.tensors)) if program.tensors[x].live_out
    }
    assert roots == {"custom-call.2", "fusion", "collective-permute-start{1}", "recv{0}"}


def test_host_offloading_copies_are_stripped() -> None:
    program, placement = extract_dump_with_placement(DATA / "gpu_offload")
    assert [i.name for i in program.instructions] == [
        "fusion.0",
        "custom-call.0",
        "fusion.1",
        "fusion.2",
        "fusion.3",
        "fusion.4",
    ]
    assert _names(program, program.instructions[-1].operands) == ["fusion.0", "fusion.3"]
    assert [(c.source_space, c.dest_space, c.start, c.done) for c in placement.copies] == [
        (0, 5, 1, 2),
        (5, 0, 4, 5),
    ]


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        (
            "  %fusion.3 =",
            "  %copy-done.9 = bf16[512,256]{1,0:T(8,128)(2,1)S(1)} copy-done(%copy-start.1)\n"
            "  %fusion.3 =",
            r"^module jit_mlp_step: copy-done copy-done.9: ends copy-start copy-start.1, which "
            r"copy-done copy-done.1 ends already$",
        ),
        (
            "copy-done(%copy-start.1)",
            "get-tuple-element(%copy-start.1), index=0",
            r"^module jit_mlp_step: copy-start copy-start.1: no copy-done ends it$",
        ),
        (
            "%copy-start.1 = (bf16[512,256]{1,0:T(8,128)(2,1)S(1)}, "
            "bf16[512,256]{1,0:T(8,128)(2,1)}, u32[]{:S(2)}) copy-start",
            "%copy-start.1 = bf16[512,256]{1,0:T(8,128)(2,1)S(1)} copy-start",
            r"^module jit_mlp_step: copy-start copy-start.1: its shape bf16\[512,256\] is not a "
            r"tuple \(the copy, its source, a context\), as a copy-start returns$",
        ),
    ],
    ids=["ended-twice", "never-ended", "not-a-tuple"],
)
def test_a_copy_start_not_ended_once_or_not_a_tuple_is_refused(
    old: str, new: str, needle: str
) -> None:
    """A copy-start ended twice or never was read (and counted in the note as a pair); one
    that is not a tuple was said to copy a tuple."""
    (path,) = (DATA / "tpu_mlp").iterdir()
    text = path.read_text()
    assert text.count(old) == 1
    with pytest.raises(XlaFrontendError, match=needle) as err:
        extract_module(text.replace(old, new))
    assert not isinstance(err.value, UnsupportedHloError)


def test_copy_of_a_tuple_and_a_stray_copy_done_are_refused() -> None:
    head = "HloModule m, is_scheduled=true\n\nENTRY %main (p: (f32[4], f32[4])) -> f32[4] {\n"
    text = head + (
        "  %p = (f32[4]{0}, f32[4]{0}) parameter(0)\n"
        "  %cs = ((f32[4]{0:S(1)}, f32[4]{0:S(1)}), (f32[4]{0}, f32[4]{0}), u32[]) copy-start(%p)\n"
        "  %cd = (f32[4]{0:S(1)}, f32[4]{0:S(1)}) copy-done(%cs)\n"
        "  ROOT %g = f32[4]{0:S(1)} get-tuple-element(%cd), index=0\n}\n"
    )
    with pytest.raises(UnsupportedHloError, match="copies a tuple"):
        extract_module(text)
    stray = head.replace("(p: (f32[4], f32[4]))", "(p: f32[4])") + (
        "  %p = (f32[4]{0}, f32[4]{0}, u32[]) parameter(0)\n"
        "  ROOT %cd = f32[4]{0:S(1)} copy-done(%p)\n}\n"
    )
    with pytest.raises(XlaFrontendError, match="copy-done cd does not end a copy-start"):
        extract_module(stray)
    with pytest.raises(DumpError, match="not a directory"):
        extract_dump(DATA / "no_such_dump")
