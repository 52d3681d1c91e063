"""The XLA frontend on tiny programs whose structure is known by hand.

Most tests compile small JAX functions on the CPU; one hand-written HLO module pins
the semantics (views, loops, aliases, live ranges) independently of the JAX version.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mallocgame.errors import InputFileError, MallocGameError
from mallocgame.frontends.hlo_parse import (
    parse_buffer_assignment,
    parse_live_ranges,
    parse_module,
    parse_shape,
    shape_leaves,
)
from mallocgame.frontends.xla import (
    AmbiguousModuleError,
    CompileError,
    DumpError,
    UnsupportedHloError,
    dump_jax,
    extract_dump,
    extract_jax,
    extract_module,
    list_modules,
)
from mallocgame.program import Program, program_from_dict, validate_program
from tests.frontends.test_xla_malformed import LOOP

jax = pytest.importorskip("jax")
jnp = jax.numpy
lax = jax.lax
S = jax.ShapeDtypeStruct
f32, i32 = jnp.float32, jnp.int32


# --------------------------------------------------------------------------- helpers


def buffer_tensor(p: Program, t: int, pos: int) -> int:
    ins = p.instructions[t]
    return (ins.operands + ins.outputs)[pos]


def group_tensors(p: Program, group) -> set[int]:
    return {buffer_tensor(p, t, pos) for t, pos in group}


def xla_key(name: str) -> str:
    return name if "{" in name else name + "{}"


def xla_files(dump_dir: Path, module: str):
    (mod,) = [m for m in list_modules(dump_dir) if m.name == module]
    stem = str(mod.path)[: -len(".txt")]
    ranges = parse_live_ranges(Path(stem + "-live-range.txt").read_text())
    allocations = parse_buffer_assignment(Path(stem + "-buffer-assignment.txt").read_text())
    return ranges, allocations


def assert_agrees_with_xla(p: Program, dump_dir: Path, module: str) -> None:
    """Sizes equal XLA's; live ranges equal XLA's except the documented differences.

    Differences: program inputs (parameters, constants) start at -1 and end at their
    last read, or the end of a loop reading them (XLA keeps entry parameters to the
    end and starts constants where they are printed: we only check that XLA's range
    covers every read); tensors in an alias group live at least as long as XLA's value
    (XLA ends a loop-carried value where the loop's phi takes over). Every alias
    group is one XLA allocation at one offset.
    """
    ranges, allocations = xla_files(dump_dir, module)
    where = {v.key: (a.index, v.offset) for a in allocations for v in a.values}
    size = {v.key: v.size for a in allocations for v in a.values}
    position = {name: i for i, name in enumerate(ranges.sequence)}
    ours_at = [position[ins.name] for ins in p.instructions]
    assert ours_at == sorted(ours_at), "schedule order differs from XLA's sequence"

    def ours_before(pos: int) -> int:
        if pos >= ranges.max_time:
            return len(p.instructions) - 1
        return max(t for t, q in enumerate(ours_at) if q <= pos)

    grouped = (
        set().union(*[group_tensors(p, g) for g in p.alias_groups]) if p.alias_groups else set()
    )
    for x in p.tensors:
        key = xla_key(x.name)
        assert size[key] == x.size, key
        start, end = ranges.ranges[key]
        reads = [t for t, ins in enumerate(p.instructions) if x.id in ins.operands]
        if x.def_time < 0:  # XLA's range covers every read
            assert all(start <= ours_at[t] <= end for t in reads), key
            continue
        assert ours_at[x.def_time] == start, key
        if x.id in grouped:
            assert x.last_use_time >= ours_before(end), key
        else:
            assert x.last_use_time == ours_before(end), key
    for g in p.alias_groups:
        keys = {xla_key(p.tensors[x].name) for x in group_tensors(p, g)}
        assert len({where[k] for k in keys}) == 1, keys


# --------------------------------------------------------------------------- JAX programs


M, K, N = 8, 16, 32


def test_matmul_plus_bias():
    p = extract_jax(
        lambda x, w, b: x @ w + b, S((M, K), f32), S((K, N), f32), S((N,), f32), name="mm"
    )
    validate_program(p)
    assert p.name == "mm" and p.source["frontend"] == "xla" and p.source["module"] == "jit__lambda"
    assert p.source["jax"] == jax.__version__
    x, w, b = p.tensors[:3]
    assert (x.size, w.size, b.size) == (4 * M * K, 4 * K * N, 4 * N)
    assert x.def_time == w.def_time == b.def_time == -1
    assert sum(i.flops for i in p.instructions) == 2 * M * N * K + M * N
    dot = next(t for t, i in enumerate(p.instructions) if i.flops >= 2 * M * N * K)
    (out,) = [t for t in p.tensors if t.live_out]
    assert out.size == 4 * M * N and out.last_use_time == len(p.instructions) - 1
    if len(p.instructions) == 2:  # dot, then the bias add reading its result
        assert dot == 0 and p.instructions[1].flops == M * N
        (mid,) = p.instructions[0].outputs
        assert p.tensors[mid].def_time == 0 and p.tensors[mid].last_use_time == 1
        assert mid in p.instructions[1].operands
    for ins in p.instructions:
        assert ins.count == 1
        assert ins.operand_bytes == tuple(p.tensors[t].size for t in ins.operands)
    assert p.alias_groups == () and p.loops == ()
    assert program_from_dict(p.to_dict()) == p


def test_in_place_update_with_donation():
    p = extract_jax(
        lambda x, i, v: x.at[i].set(v), S((10, 4), f32), S((), i32), S((4,), f32), donate_argnums=0
    )
    (group,) = p.alias_groups
    (t,) = {t for t, _ in group}  # the update instruction: its operand 0 and its output
    ins = p.instructions[t]
    assert "dynamic-update-slice" in ins.name
    assert group == ((t, 0), (t, ins.num_buffers - 1))
    assert group_tensors(p, group) == {0, ins.outputs[0]}  # the donated parameter and the result
    assert ins.operand_bytes[0] == ins.output_bytes[0] == 160  # shape bytes by default
    q = extract_jax(
        lambda x, i, v: x.at[i].set(v),
        S((10, 4), f32),
        S((), i32),
        S((4,), f32),
        donate_argnums=0,
        partial_bytes=True,
    )
    assert q.source["bytes"] == "partial" and p.source["bytes"] == "shape"
    ins = q.instructions[t]
    assert ins.output_bytes == (16,)  # writes one row in place
    assert ins.operand_bytes[0] < 160  # never reads the whole array


def test_in_place_update_without_donation_copies_first():
    p = extract_jax(lambda x, i, v: x.at[i].set(v), S((10, 4), f32), S((), i32), S((4,), f32))
    (group,) = p.alias_groups
    assert p.instructions[0].opcode == "copy"  # XLA copies the parameter it may not write
    assert (0, 1) in group and group_tensors(p, group) == {
        p.instructions[0].outputs[0],
        p.instructions[-1].outputs[0],
    }


def test_donated_argument():
    p = extract_jax(lambda a, g: a - 0.5 * g, S((64,), f32), S((64,), f32), donate_argnums=0)
    (ins,) = p.instructions
    assert ins.flops == 2 * 64
    assert p.alias_groups == (((0, 0), (0, 2)),)  # the read of a and the output
    assert group_tensors(p, p.alias_groups[0]) == {0, ins.outputs[0]}


def test_scan_loop():
    def f(h, xs, w):
        def body(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h

        return lax.scan(body, h, xs)

    p = extract_jax(f, S((4, 16), f32), S((5, 4, 16), f32), S((16, 16), f32), partial_bytes=True)
    (loop,) = p.loops
    assert loop.trip_count == 5
    inside = range(loop.first, loop.last + 1)
    assert all(p.instructions[t].count == 5 for t in inside)
    assert all(i.count == 1 for t, i in enumerate(p.instructions) if t not in inside)
    dot = next(i for i in p.instructions if i.flops >= 2 * 4 * 16 * 16)
    assert dot.count == 5 and dot.flops == 2 * 4 * 16 * 16
    assert sum(i.transcendentals * i.count for i in p.instructions) == 5 * 4 * 16
    # the carried h: its initial value (defined before the loop) and the new h (defined
    # inside) are one group; the stacked output is updated in place
    carried = [
        g
        for g in p.alias_groups
        if {p.tensors[x].def_time < loop.first for x in group_tensors(p, g)} == {True, False}
    ]
    assert len(carried) >= 2
    for x in p.tensors:  # a value read in the loop but defined before it lives to its end
        reads = [t for t, i in enumerate(p.instructions) if x.id in i.operands]
        if x.def_time < loop.first and any(t in inside for t in reads):
            assert x.last_use_time >= loop.last
    xs_reads = [i.operand_bytes[i.operands.index(1)] for i in p.instructions if 1 in i.operands]
    assert xs_reads == [4 * 16 * 4]  # partial bytes: one dynamic slice of xs per iteration


def test_nested_fori_loops_multiply_counts():
    def f(x):
        return lax.fori_loop(
            0, 4, lambda i, x: lax.fori_loop(0, 3, lambda j, y: jnp.sin(y) @ y, x) + 1.0, x
        )

    p = extract_jax(f, S((8, 8), f32))
    outer, inner = p.loops
    assert (outer.trip_count, inner.trip_count) == (4, 3)
    assert outer.first <= inner.first <= inner.last <= outer.last
    dot = next(i for i in p.instructions if i.flops == 2 * 8 * 8 * 8)
    assert dot.count == 12
    assert all(p.instructions[t].count == 12 for t in range(inner.first, inner.last + 1))
    (big,) = [
        g for g in p.alias_groups if any(p.tensors[x].size == 256 for x in group_tensors(p, g))
    ]
    assert len(group_tensors(p, big)) == 3  # initial copy, inner result, outer result


def test_while_without_trip_count_counts_once():
    p = extract_jax(
        lambda x: lax.while_loop(lambda x: jnp.sum(x) < 100.0, lambda x: x * 2.0, x), S((8,), f32)
    )
    (loop,) = p.loops
    assert loop.trip_count == 1 and all(i.count == 1 for i in p.instructions)
    assert "trip count unknown" in p.source["notes"]


def test_conditional_is_one_instruction():
    p = extract_jax(lambda x, k: lax.cond(k > 0, jnp.exp, jnp.log, x), S((8, 32), f32), S((), i32))
    (cond,) = [i for i in p.instructions if i.opcode == "conditional"]
    assert cond.transcendentals == 8 * 32 and 0 in cond.operands
    assert len(set(cond.operands)) == len(cond.operands)


def test_convolution_flops():
    def conv(x, k):
        return lax.conv_general_dilated(
            x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=2
        )

    p = extract_jax(conv, S((2, 8, 8, 4), f32), S((3, 3, 2, 6), f32))
    # SAME padding: per spatial dimension 8 x 3 window positions, 2 of them off the input
    assert sum(i.flops for i in p.instructions) == 2 * (2 * 6) * (8 * 3 - 2) ** 2 * 2


def test_live_ranges_and_sizes_agree_with_xla(tmp_path):
    def mlp(params, x, xs):
        (w1, b1), (w2, b2) = params
        h = jax.nn.relu(x @ w1 + b1)
        y = jax.nn.log_softmax(h @ w2 + b2)

        def body(c, x):
            c = jnp.sin(c) * x + c
            return c, c * 2

        c, ys = lax.scan(body, y, xs)
        return c.sum(), ys

    args = (
        ((S((16, 32), f32), S((32,), f32)), (S((32, 8), f32), S((8,), f32))),
        S((4, 16), f32),
        S((6, 4, 8), f32),
    )
    module = dump_jax(mlp, *args, dump_dir=tmp_path)
    p = extract_dump(tmp_path, module=module)
    assert len(p.loops) == 1 and p.alias_groups
    assert_agrees_with_xla(p, tmp_path, module)
    ranges, allocations = xla_files(tmp_path, module)
    assert ranges.max_time == len(ranges.sequence)
    assert all(v.size <= a.size for a in allocations for v in a.values)


def test_training_step_with_donation_agrees_with_xla(tmp_path):
    def loss(w, x):
        return jnp.mean(jnp.tanh(x @ w[0]) @ w[1])

    def step(w, x):
        g = jax.grad(loss)(w, x)
        return jax.tree.map(lambda a, b: a - 0.1 * b, w, g)

    module = dump_jax(
        step,
        (S((8, 16), f32), S((16, 4), f32)),
        S((2, 8), f32),
        dump_dir=tmp_path,
        donate_argnums=0,
    )
    p = extract_dump(tmp_path, module=module)
    donated = [g for g in p.alias_groups if {0, 1} & group_tensors(p, g)]
    assert len(donated) == 2  # each donated parameter with its updated value
    assert_agrees_with_xla(p, tmp_path, module)


# --------------------------------------------------------------------------- hand-written HLO

HANDMADE = """\
HloModule handmade, is_scheduled=true, input_output_alias={ {1}: (1, {}, may-alias) }, entry_computation_layout={(f32[4,8]{1,0}, f32[8,2]{1,0})->(f32[4,2]{1,0}, f32[8,2]{1,0}, f32[])}

%add_comp (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s.0 = f32[] add(%a, %b)
}

%fused_mul (p0: f32[4,8], p1: f32[8,2]) -> f32[4,2] {
  %p0 = f32[4,8]{1,0} parameter(0)
  %p1 = f32[8,2]{1,0} parameter(1)
  %d = f32[4,2]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="a, \\"quoted\\" {name}"}
  ROOT %e = f32[4,2]{1,0} exponential(%d)
}

%body (t: (s32[], f32[4,8])) -> (s32[], f32[4,8]) {
  %t = (s32[], f32[4,8]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %x = f32[4,8]{1,0} get-tuple-element(%t), index=1
  %one = s32[] constant(1)
  %i2 = s32[] add(%i, %one)
  %x2 = f32[4,8]{1,0} multiply(%x, %x)
  ROOT %r = (s32[], f32[4,8]{1,0}) tuple(%i2, %x2)
}

%cond (t.1: (s32[], f32[4,8])) -> pred[] {
  %t.1 = (s32[], f32[4,8]{1,0}) parameter(0)
  %i.1 = s32[] get-tuple-element(%t.1), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i.1, %n), direction=LT
}

ENTRY %main (x0: f32[4,8], w: f32[8,2]) -> (f32[4,2], f32[8,2], f32[]) {
  %x0 = f32[4,8]{1,0} parameter(0)
  %w = f32[8,2]{1,0} parameter(1)
  %zero = s32[] constant(0)
  %c = f32[4,8]{1,0} copy(%x0)
  %init = (s32[], f32[4,8]{1,0}) tuple(%zero, %c)
  %loop = (s32[], f32[4,8]{1,0}) while(%init), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"3"}}
  %xl = f32[4,8]{1,0} get-tuple-element(%loop), index=1
  %y = f32[4,2]{1,0} fusion(%xl, %w), kind=kOutput, calls=%fused_mul
  %w2 = f32[8,2]{1,0} negate(%w)
  %zf = f32[] constant(0)
  %s = f32[] reduce(%y, %zf), dimensions={0,1}, to_apply=%add_comp
  ROOT %out = (f32[4,2]{1,0}, f32[8,2]{1,0}, f32[]) tuple(%y, %w2, /*index=2*/%s)
}
"""


def test_handmade_module_by_hand():
    p = extract_module(HANDMADE)
    assert [i.name for i in p.instructions] == ["c", "lt", "i2", "x2", "y", "w2", "s"]
    assert [i.count for i in p.instructions] == [1, 3, 3, 3, 1, 1, 1]
    assert [i.flops for i in p.instructions] == [0, 1, 1, 32, 2 * 8 * 8, 16, 8]
    assert p.instructions[4].transcendentals == 8
    names = [x.name for x in p.tensors]
    assert names == ["x0", "w", "zero", "c", "n", "lt", "one", "i2", "x2", "y", "w2", "zf", "s"]
    ranges = {x.name: (x.def_time, x.last_use_time, x.live_out) for x in p.tensors}
    assert ranges == {
        "x0": (-1, 0, False),
        "w": (-1, 5, False),
        "zero": (-1, 3, False),
        "c": (0, 3, False),
        "n": (-1, 3, False),
        "lt": (1, 1, False),
        "one": (-1, 3, False),
        "i2": (2, 3, False),
        "x2": (3, 4, False),
        "y": (4, 6, True),
        "w2": (5, 6, True),
        "zf": (-1, 6, False),
        "s": (6, 6, True),
    }
    assert [(lp.first, lp.last, lp.trip_count) for lp in p.loops] == [(1, 3, 3)]
    assert p.instructions[3].operands == (3, 3)  # x read twice: two buffers
    assert p.alias_groups == (
        ((0, 1), (3, 0), (3, 1), (3, 2), (4, 0)),  # carried x: copy, reads, new value, read after
        ((1, 0), (2, 0), (2, 2)),  # carried counter
        ((4, 1), (5, 0), (5, 1)),  # donated w and the output aliasing it
    )
    assert p.source["notes"] == ""


def test_parse_shapes_and_leaves():
    shape = parse_shape("(s32[], (f32[4,8]{1,0}, bf16[2]), token[], u4[3], s32[<=5])")
    leaves = shape_leaves(shape)
    assert [i for i, _ in leaves] == [(0,), (1, 0), (1, 1), (2,), (3,), (4,)]
    # u4 without E(4) in a layout is not packed: a byte each, as XLA stores it
    assert [a.nbytes for _, a in leaves] == [4, 128, 4, 0, 3, 20]
    m = parse_module(HANDMADE)
    assert m.is_scheduled and m.entry.name == "main" and m.entry.root.name == "out"
    assert m.entry.by_name["out"].operands == ("y", "w2", "s")


# --------------------------------------------------------------------------- errors


def test_empty_or_missing_directory(tmp_path):
    with pytest.raises(DumpError, match="no scheduled module") as err:
        extract_dump(tmp_path)
    assert isinstance(err.value, MallocGameError) and isinstance(err.value, InputFileError)
    with pytest.raises(DumpError, match="not a directory"):
        extract_dump(tmp_path / "nope")


def test_several_modules_must_be_picked(tmp_path):
    dump_jax(lambda x: jnp.tanh(x) @ x, S((4, 4), f32), dump_dir=tmp_path, name="first")
    dump_jax(lambda x: x * 2.0, S((4,), f32), dump_dir=tmp_path)

    def second(x):
        return jnp.exp(x) + jnp.sin(x).sum()

    dump_jax(second, S((8,), f32), dump_dir=tmp_path)
    with pytest.raises(AmbiguousModuleError, match="3 modules") as err:
        extract_dump(tmp_path)
    assert any("jit_second" in c for c in err.value.candidates)
    assert extract_dump(tmp_path, module="jit_second").source["module"] == "jit_second"
    largest = extract_dump(tmp_path, largest=True)
    sizes = {
        m: len(extract_dump(tmp_path, module=m).instructions) for m in ("jit__lambda", "jit_second")
    }
    assert len(largest.instructions) == max(sizes.values())
    # two modules named jit__lambda; only one is more than a single instruction
    assert extract_dump(tmp_path, module="jit__lambda").instructions[-1].flops > 0
    with pytest.raises(DumpError, match="no module matches"):
        extract_dump(tmp_path, module="jit_missing")


# test_xla_malformed's loop of 3 over (counter, x), started from the entry's parameter
ONLY_A_LOOP = (
    LOOP[: LOOP.index("ENTRY")]
    + """\
ENTRY %main (init: (s32[], f32[4])) -> (s32[], f32[4]) {
  %init = (s32[], f32[4]{0}) parameter(0)
  ROOT %loop = (s32[], f32[4]{0}) while(%init), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"TRIP"}}
}
"""
)


def test_the_largest_module_counts_its_loop_bodies(tmp_path: Path) -> None:
    """Modules were ranked by the lines of their entry computation: a training step
    written as one fori_loop (a while line) lost to a helper with a few more top-level
    ops, and a module whose entry is only a while was called trivial."""

    def train(w, x):
        def body(_, w):
            return w - 0.01 * (x.T @ jnp.tanh(x @ w))

        return lax.fori_loop(0, 100, body, w)

    def helper(a):
        return jnp.sort(a), jnp.sort(a.T), jnp.sort(a * a), jnp.sort(a + 1)

    dump_jax(train, S((16, 16), f32), S((8, 16), f32), dump_dir=tmp_path)
    dump_jax(helper, S((8, 8), f32), dump_dir=tmp_path)
    for trip in ("3", "0"):  # a loop that never runs: its condition alone
        path = tmp_path / f"module_9{trip}.jit_loop{trip}.cpu_after_optimizations.txt"
        path.write_text(ONLY_A_LOOP.replace("TRIP", trip))
    sizes = {m.name: m.num_instructions for m in list_modules(tmp_path)}
    for m in list_modules(tmp_path):  # the count shown is what extracting it makes
        assert m.num_instructions == len(extract_dump(m.path).instructions), m.name
    assert sizes["jit_train"] > sizes["jit_helper"]
    assert (sizes["jit_loop3"], sizes["jit_loop0"]) == (3, 1)
    assert extract_dump(tmp_path, largest=True).source["module"] == "jit_train"
    assert not next(m for m in list_modules(tmp_path) if m.name == "jit_loop3").trivial


def test_function_that_does_not_compile():
    with pytest.raises(CompileError, match="JAX could not compile") as err:
        extract_jax(lambda x: x @ x, S((3, 4), f32))
    assert "\n" not in str(err.value) and "dot_general" in str(err.value)


def test_unsupported_opcode_is_named(tmp_path):
    text = HANDMADE.replace("negate(%w)", "frobnicate(%w)")
    (tmp_path / "module_0001.handmade.cpu_after_optimizations.txt").write_text(text)
    with pytest.raises(UnsupportedHloError, match="'frobnicate'") as err:
        extract_dump(tmp_path)
    assert err.value.opcode == "frobnicate"
    with pytest.raises(UnsupportedHloError, match="'infeed'"):
        extract_module(HANDMADE.replace("negate(%w)", "infeed(%w)"))


def test_unscheduled_or_garbled_module():
    with pytest.raises(DumpError, match="not scheduled"):
        extract_module(HANDMADE.replace("is_scheduled=true, ", ""))
    with pytest.raises(DumpError, match="cannot parse"):
        extract_module(HANDMADE.replace("negate(%w)", "negate(%w"))


def test_the_same_function_extracts_to_the_same_instance_whatever_compiled_before():
    # XLA numbers dumped modules per process; the number is not part of the program
    import jax
    import jax.numpy as jnp

    from mallocgame.frontends.xla import extract_jax

    def f(w, x):
        return jnp.tanh(x @ w)

    avals = (jax.ShapeDtypeStruct((16, 8), "float32"), jax.ShapeDtypeStruct((4, 16), "float32"))
    first = extract_jax(f, *avals)
    jax.jit(lambda x: x * 2.0)(jnp.ones(3)).block_until_ready()  # another compile between
    second = extract_jax(f, *avals)
    assert first.source["dump_module"] == "jit_f"
    assert first.to_dict() == second.to_dict()


ASYNC_IN_PLACE = """HloModule m, is_scheduled=true

%wrapped (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %cc = f32[8]{0} custom-call(%p), custom_call_target="update", output_to_operand_aliasing={{}: (0, {})}
}

ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %y = f32[8]{0} negate(%x)
  %s = ((f32[8]{0}), f32[8]{0}, u32[]) async-start(%y), calls=%wrapped, output_to_operand_aliasing={{1}: (0, {})}
  %d = f32[8]{0} async-done(%s)
  ROOT %r = f32[8]{0} negate(%d)
}
"""


def test_a_tuple_shaped_start_writing_in_place_shares_its_operand_s_storage() -> None:
    """An async-start whose output_to_operand_aliasing puts its result (element 1) in its
    operand's storage: the pair was found but not applied (the start's result emitted
    is element 1 of its shape, and pairs were applied for the whole shape only)."""
    program = extract_module(ASYNC_IN_PLACE)
    t = next(t for t, i in enumerate(program.instructions) if i.opcode == "async-start")
    assert any({(t, 0), (t, 1)} <= set(g) for g in program.alias_groups)
