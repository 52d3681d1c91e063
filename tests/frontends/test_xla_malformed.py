"""Malformed HLO modules are refused by the XLA frontend with one typed line naming the
instruction and what is wrong (no KeyError or IndexError text); loop trip counts of 0
and out of range. Hand-written modules only: no JAX needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from mallocgame.costmodel import derive_instance
from mallocgame.errors import MallocGameError
from mallocgame.frontends.xla import (
    DumpError,
    UnsupportedHloError,
    XlaFrontendError,
    extract_dump,
    extract_module,
)


def _trip(n: str) -> str:
    """A while loop's backend_config stating trip count ``n``."""
    return f'{{"known_trip_count":{{"n":"{n}"}}}}'


# A loop of 3 over (counter, x): lt, i2 and x2 run 3 times; c before it, once.
LOOP = """\
HloModule m, is_scheduled=true

%body (t: (s32[], f32[4])) -> (s32[], f32[4]) {
  %t = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %x = f32[4]{0} get-tuple-element(%t), index=1
  %one = s32[] constant(1)
  %i2 = s32[] add(%i, %one)
  %x2 = f32[4]{0} multiply(%x, %x)
  ROOT %r = (s32[], f32[4]{0}) tuple(%i2, %x2)
}

%cond (t.1: (s32[], f32[4])) -> pred[] {
  %t.1 = (s32[], f32[4]{0}) parameter(0)
  %i.1 = s32[] get-tuple-element(%t.1), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i.1, %n), direction=LT
}

ENTRY %main (x0: f32[4]) -> f32[4] {
  %x0 = f32[4]{0} parameter(0)
  %zero = s32[] constant(0)
  %c = f32[4]{0} negate(%x0)
  %init = (s32[], f32[4]{0}) tuple(%zero, %c)
  %loop = (s32[], f32[4]{0}) while(%init), condition=%cond, body=%body, backend_config=TRIP
  ROOT %xl = f32[4]{0} get-tuple-element(%loop), index=1
}
""".replace("TRIP", _trip("3"))


def _edit(old: str, new: str, text: str = LOOP) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def _refused(text: str, error: type[MallocGameError], needle: str) -> str:
    with pytest.raises(error, match=needle) as err:
        extract_module(text)
    message = str(err.value)
    assert "\n" not in message and "KeyError" not in message and "IndexError" not in message
    return message


def test_the_loop_module_by_hand() -> None:
    p = extract_module(LOOP)
    counts = [(i.name, i.count) for i in p.instructions]
    assert counts == [("c", 1), ("lt", 3), ("i2", 3), ("x2", 3)]
    assert [(lp.first, lp.last, lp.trip_count) for lp in p.loops] == [(1, 3, 3)]


# --------------------------------------------------------------------------- sizes


HUGE = _edit(
    "  %c = f32[4]{0} negate(%x0)\n",
    "  %big = f32[100000000000000000000]{0} broadcast(%x0), dimensions={}\n"
    "  %c = f32[4]{0} slice(%big), slice={[0:4]}\n",
)


def test_a_shape_of_more_than_2_53_bytes_is_refused_naming_it(tmp_path: Path) -> None:
    # It used to crash the cost model (numpy OverflowError in peak_live_bytes).
    _refused(
        HUGE,
        DumpError,
        r"^HLO:23: instruction %big: shape f32\[100000000000000000000\] "
        r"holds 400000000000000000000 bytes, more than 2\*\*53",
    )
    path = tmp_path / "module_0001.m.cpu_after_optimizations.txt"
    path.write_text(HUGE)
    with pytest.raises(DumpError, match=f"^{path}:23: instruction %big"):
        extract_dump(tmp_path)


# --------------------------------------------------------------------------- structure


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        (
            "%loop), index=1",
            "%loop), index=5",
            r"^module m: get-tuple-element xl: tuple index 5 is out of range "
            r"\(operand %loop has 2 elements\)$",
        ),
        (
            "%loop), index=1",
            "%loop), index=one",
            r"^module m: get-tuple-element xl: index 'one' is not a whole number$",
        ),
        (
            "  ROOT %xl = f32[4]{0} get-tuple-element(%loop), index=1",
            "  %xl = f32[4]{0} get-tuple-element(%loop), index=1\n"
            "  ROOT %bad = f32[4]{0} get-tuple-element(%xl), index=0",
            r"^module m: get-tuple-element bad: operand %xl is not a tuple$",
        ),
        (
            "negate(%x0)",
            "negate(%nope)",
            r"^module m: negate c: operand %nope is not defined before it in computation main$",
        ),
        (
            "  %c = f32[4]{0} negate(%x0)\n",
            "  %v = f32[4]{0} bitcast()\n  %c = f32[4]{0} negate(%v)\n",
            r"^module m: bitcast v: has no operand$",
        ),
        (
            "  %n = s32[] constant(3)",
            "  %n = s32[] parameter(1)",
            r"^module m: parameter n: reads parameter 1 of computation cond, which is given 1$",
        ),
        (
            "  %x0 = f32[4]{0} parameter(0)",
            "  %x0 = f32[4]{0} parameter(x)",
            r"^module m: parameter x0: parameter number 'x' is not a whole number$",
        ),
        (
            "  %x0 = f32[4]{0} parameter(0)",
            "  %x0 = f32[4]{0} parameter(0)\n  %x1 = f32[4]{0} parameter(0)",
            r"^module m: parameter x1: parameter 0 of the entry computation is defined twice$",
        ),
        (
            "  %x0 = f32[4]{0} parameter(0)",
            "  %x0 = f32[4]{0} parameter(0)\n  %x2 = f32[4]{0} parameter(2)",
            r"^module m: the entry computation has 2 parameters, none numbered 1 "
            r"\(they are numbered 0 to 1\)$",
        ),
    ],
    ids=[
        "gte-out-of-range",
        "gte-index-text",
        "gte-of-an-array",
        "undefined-operand",
        "view-without-operand",
        "parameter-not-given",
        "parameter-number-text",
        "entry-parameter-twice",  # these two used to be accepted
        "entry-parameter-missing",
    ],
)
def test_a_malformed_instruction_is_named(old: str, new: str, needle: str) -> None:
    _refused(_edit(old, new), XlaFrontendError, needle)
    from mallocgame.frontends.hlo_parse import parse_module
    from mallocgame.frontends.xla import entry_interface

    with pytest.raises(XlaFrontendError, match=needle):  # the same refusal, not a bare error
        entry_interface(parse_module(_edit(old, new)))


# A fusion whose body reduces with a reducer, and a conditional whose branch takes a sine:
# computations the builder never runs, read by the cost model alone.
CALLED = """\
HloModule m, is_scheduled=true

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%fused (p0: f32[4]) -> f32[] {
  %p0 = f32[4]{0} parameter(0)
  %sq = f32[4]{0} multiply(%p0, %p0)
  %zero = f32[] constant(0)
  ROOT %r = f32[] reduce(%sq, %zero), dimensions={0}, to_apply=%sum
}

%branch (q: f32[4]) -> f32[4] {
  %q = f32[4]{0} parameter(0)
  ROOT %sin = f32[4]{0} sine(%q)
}

ENTRY %main (i: s32[], x: f32[4]) -> (f32[], f32[4]) {
  %i = s32[] parameter(0)
  %x = f32[4]{0} parameter(1)
  %f = f32[] fusion(%x), kind=kLoop, calls=%fused
  %c = f32[4]{0} conditional(%i, %x), branch_computations={%branch}
  ROOT %t = (f32[], f32[4]{0}) tuple(%f, %c)
}
"""


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        (
            "multiply(%p0, %p0)",
            "multiply(%p0, %nope)",
            r"^module m: multiply sq: operand %nope is not defined before it in computation "
            r"fused$",
        ),
        (
            "multiply(%p0, %p0)",
            "multiply(%p0, %zero)",
            r"^module m: multiply sq: operand %zero is not defined before it in computation "
            r"fused$",
        ),
        (
            "add(%a, %b)",
            "add(%a, %s)",
            r"^module m: add s: operand %s is not defined before it in computation sum$",
        ),
        (
            "sine(%q)",
            "sine(%p0)",
            r"^module m: sine sin: operand %p0 is not defined before it in computation branch$",
        ),
    ],
    ids=["undefined-in-a-fusion", "defined-after-in-a-fusion", "reads-itself", "in-a-branch"],
)
def test_an_operand_not_defined_before_it_in_any_computation_is_refused(
    old: str, new: str, needle: str
) -> None:
    """Only the computations the builder runs were checked: a fusion body, a reducer or
    a branch reading what it does not define (or defines later) was accepted."""
    _refused(_edit(old, new, CALLED), XlaFrontendError, needle)


@pytest.mark.parametrize("old", ["add(%a, %b)", "multiply(%p0, %p0)", "sine(%q)"])
def test_no_hlo_opcode_in_a_called_computation_is_refused(old: str) -> None:
    """An opcode that is no HLO opcode, in a reducer, a fusion or a branch, cost 0 without
    a word; it is refused as it is in the entry. A real HLO opcode the cost model gives no
    work is read (0 flops), not refused."""
    text = _edit(old, "frobnicate(" + old.partition("(")[2], CALLED)
    with pytest.raises(UnsupportedHloError, match=r"unsupported HLO opcode 'frobnicate'") as err:
        extract_module(text)
    assert err.value.opcode == "frobnicate"
    for real in ("bitcast-convert", "shuffle", "rng-get-and-update-state", "atanh"):
        program = extract_module(_edit(old, real + "(" + old.partition("(")[2], CALLED))
        assert [i.name for i in program.instructions] == ["f", "c"]


def test_a_conditional_without_branches_is_refused_as_a_while_without_body() -> None:
    """A conditional naming no branch computation was read as an instruction that costs
    nothing (the most expensive of no branches: 0 flops)."""
    text = (
        "HloModule m, is_scheduled=true\n"
        "ENTRY %main (p: pred[], x: f32[4]) -> f32[4] {\n"
        "  %p = pred[] parameter(0)\n"
        "  %x = f32[4]{0} parameter(1)\n"
        "  ROOT %c = f32[4]{0} conditional(%p, %x, %x)\n"
        "}\n"
    )
    _refused(text, XlaFrontendError, r"^module m: c: conditional names no branch computation")
    _refused(
        _edit("condition=%cond, body=%body, ", "condition=%cond, "),
        XlaFrontendError,
        r"^module m: loop: attribute 'body' names no computation$",
    )


@pytest.mark.parametrize(
    "root",
    [
        "ROOT %d = f32[2,2]{1,0} dot(), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        "ROOT %d = f32[2,2]{1,0} fusion(%x), kind=kLoop, calls=%nope",
    ],
)
def test_the_entry_interface_of_a_malformed_module_is_one_frontend_error(root: str) -> None:
    from mallocgame.frontends.hlo_parse import parse_module
    from mallocgame.frontends.xla import entry_interface

    text = (
        "HloModule m, is_scheduled=true\n"
        "ENTRY %main (x: f32[2,2]) -> f32[2,2] {\n"
        "  %x = f32[2,2]{1,0} parameter(0)\n"
        f"  {root}\n"
        "}\n"
    )
    with pytest.raises(XlaFrontendError, match="module m: "):
        entry_interface(parse_module(text))


@pytest.mark.parametrize(
    ("alias", "needle"),
    [
        (
            "{ {}: (3, {}, may-alias) }",
            r"input_output_alias names parameter 3, which the entry computation does not have$",
        ),
        (
            "{ {}: (0, {2}, may-alias) }",
            r"input_output_alias names parameter 0 at \{2\}, which it does not have$",
        ),
        (
            "{ {1}: (0, {}, may-alias) }",
            r"input_output_alias names the output at \{1\}, which it does not have$",
        ),
    ],
)
def test_an_alias_of_what_the_module_does_not_have_is_named(alias: str, needle: str) -> None:
    header = "HloModule m, is_scheduled=true"
    text = _edit(header, f"{header}, input_output_alias={alias}")
    _refused(text, XlaFrontendError, r"^module m: " + needle)


DONATED = """\
HloModule m, is_scheduled=true, input_output_alias=ALIAS

ENTRY %main (x: f32[8], y: f32[8]) -> (f32[8], f32[8], f32[1024]) {
  %x = f32[8]{0} parameter(0)
  %y = f32[8]{0} parameter(1)
  %a = f32[8]{0} add(%x, %y)
  %n = f32[8]{0} negate(%a)
  %b = f32[1024]{0} broadcast(%a), dimensions={}
  ROOT %t = (f32[8]{0}, f32[8]{0}, f32[1024]{0}) tuple(%a, %n, %b)
}
"""


@pytest.mark.parametrize(
    ("alias", "needle"),
    [
        (
            "{ {0}: (0, {}, may-alias), {0}: (1, {}, may-alias) }",
            r"input_output_alias aliases the output at \{0\} twice$",
        ),
        (
            "{ {0}: (0, {}, may-alias), {1}: (0, {}, may-alias) }",
            r"input_output_alias aliases parameter 0 at \{\} twice$",
        ),
        (
            "{ {2}: (0, {}, may-alias) }",
            r"input_output_alias aliases parameter 0 at \{\} \(32 bytes\) with the output at "
            r"\{2\} \(4096 bytes\)$",
        ),
    ],
    ids=["output-twice", "parameter-twice", "sizes-differ"],
)
def test_an_alias_that_xla_would_not_verify_is_refused(alias: str, needle: str) -> None:
    # These used to be accepted, joining buffers of different sizes into one group.
    program = extract_module(DONATED.replace("ALIAS", "{ {0}: (0, {}), {1}: (1, {}) }"))
    assert len(program.alias_groups) == 2
    _refused(DONATED.replace("ALIAS", alias), XlaFrontendError, r"^module m: " + needle)


@pytest.mark.parametrize(
    ("update", "needle"),
    [
        (
            'f32[1024]{0} custom-call(%s), custom_call_target="foo", '
            "output_to_operand_aliasing={{}: (0, {})}",
            r"custom-call u: writes its output %u \(4096 bytes\) in place of its operand %s "
            r"\(32 bytes\)$",
        ),
        (
            "f32[1024]{0} dynamic-update-slice(%s, %x, %i)",
            r"dynamic-update-slice u: writes its output %u \(4096 bytes\) in place of its "
            r"operand %s \(32 bytes\)$",
        ),
    ],
    ids=["output-to-operand", "dynamic-update-slice"],
)
def test_an_in_place_update_of_another_size_is_refused(update: str, needle: str) -> None:
    # These used to be accepted, joining a 32-byte buffer with a 4096-byte one.
    text = (
        "HloModule m, is_scheduled=true\n\n"
        "ENTRY %main (x: f32[8], i: s32[]) -> f32[1024] {\n"
        "  %x = f32[8]{0} parameter(0)\n"
        "  %i = s32[] parameter(1)\n"
        "  %s = f32[8]{0} negate(%x)\n"
        f"  ROOT %u = {update}\n"
        "}\n"
    )
    same = text.replace("f32[1024]{0} ", "f32[8]{0} ").replace("-> f32[1024]", "-> f32[8]")
    assert len(extract_module(same).alias_groups) == 1
    _refused(text, XlaFrontendError, r"^module m: " + needle)


# --------------------------------------------------------------------------- trip counts


@pytest.mark.parametrize(
    ("stated", "needle"),
    [
        ('"n":"abc"', r"known_trip_count 'abc' in its backend_config is not a whole number"),
        ('"n":"-3"', r"known_trip_count '-3' in its backend_config is not a whole number"),
        ('"n":"2147483648"', r"known_trip_count 2147483648 is more than 2\*\*31-1"),
    ],
)
def test_a_malformed_or_too_large_trip_count_names_the_loop(stated: str, needle: str) -> None:
    # These used to be counted once, with only a note in source.notes.
    _refused(_edit('"n":"3"', stated), XlaFrontendError, r"^module m: while loop: " + needle)


@pytest.mark.parametrize(
    ("root", "gte", "needle"),
    [
        (
            "tuple(%x2, %i2)",
            "index=1",
            r"its body returns %x2 \(16 bytes\) where it is given %zero \(4 bytes\)$",
        ),
        ("tuple(%i2)", "index=0", r"its operand has 2 array leaves, its body's result 1$"),
    ],
    ids=["swapped", "short"],
)
def test_a_body_result_that_does_not_fit_the_loop_state_is_refused(
    root: str, gte: str, needle: str
) -> None:
    # These used to be accepted, joining the 4-byte counter with the 16-byte array.
    text = _edit("tuple(%i2, %x2)", root)
    text = _edit("get-tuple-element(%loop), index=1", f"get-tuple-element(%loop), {gte}", text)
    _refused(text, XlaFrontendError, r"^module m: while loop: " + needle)


def test_a_loop_of_0_trips_runs_its_condition_once_and_never_its_body() -> None:
    p = extract_module(_edit('"n":"3"', '"n":"0"'))
    assert [(i.name, i.count) for i in p.instructions] == [("c", 1), ("lt", 1)]
    assert p.loops == ()
    c = next(x for x in p.tensors if x.name == "c")
    assert c.live_out and c.last_use_time == 1  # the while's result is its operand
    assert "while loop: trip count 0, its body never runs" in p.source["notes"]
    derive_instance(p, "tpu_v4i")


def test_the_largest_trip_count_is_read() -> None:
    p = extract_module(_edit('"n":"3"', '"n":"2147483647"'))
    assert [i.count for i in p.instructions] == [1] + [2**31 - 1] * 3
    assert derive_instance(p, "tpu_v4i").instructions[1].count == 2**31 - 1


NESTED = """\
HloModule nested, is_scheduled=true

%ibody (a: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  ROOT %ie = f32[4]{0} exponential(%a)
}

%icond (b: f32[4]) -> pred[] {
  %b = f32[4]{0} parameter(0)
  ROOT %ig = pred[] constant(true)
}

%obody (o: f32[4]) -> f32[4] {
  %o = f32[4]{0} parameter(0)
  %on = f32[4]{0} negate(%o)
  ROOT %inner = f32[4]{0} while(%on), condition=%icond, body=%ibody, backend_config=INNER
}

%ocond (q: f32[4]) -> pred[] {
  %q = f32[4]{0} parameter(0)
  ROOT %og = pred[] constant(true)
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %outer = f32[4]{0} while(%x), condition=%ocond, body=%obody, backend_config=OUTER
}
""".replace("OUTER", _trip("65536"))


def test_nested_trip_counts_beyond_2_31_are_refused() -> None:
    p = extract_module(NESTED.replace("INNER", _trip("32767")))
    assert [(i.name, i.count) for i in p.instructions] == [("on", 65536), ("ie", 65536 * 32767)]
    _refused(
        NESTED.replace("INNER", _trip("32768")),
        XlaFrontendError,
        r"^module nested: while inner: trip count 32768 inside loops run 65536 times makes "
        r"2147483648 executions, more than 2\*\*31-1",
    )


CALLS_ITSELF = """\
HloModule m, is_scheduled=true
%r (p: f32[8,16]) -> f32[8,16] {
  %p = f32[8,16]{1,0} parameter(0)
  ROOT %c = f32[8,16]{1,0} call(%p), to_apply=%r
}
ENTRY %main (x: f32[8,16]) -> f32[8,16] {
  %x = f32[8,16]{1,0} parameter(0)
  ROOT %c = f32[8,16]{1,0} call(%x), to_apply=%r
}
"""

FUSION_CALLS_ITSELF = """\
HloModule m, is_scheduled=true
%fs (p0: f32[8,16]) -> f32[8,16] {
  %p0 = f32[8,16]{1,0} parameter(0)
  %d = f32[8,16]{1,0} dynamic-update-slice(%p0, %p0)
  ROOT %g = f32[8,16]{1,0} fusion(%d), kind=kLoop, calls=%fs
}
ENTRY %main (x: f32[8,16]) -> f32[8,16] {
  %x = f32[8,16]{1,0} parameter(0)
  ROOT %f = f32[8,16]{1,0} fusion(%x), kind=kLoop, calls=%fs
}
"""

READS_ITSELF = """\
HloModule m, is_scheduled=true
%fs (p0: f32[8,16]) -> f32[8,16] {
  %p0 = f32[8,16]{1,0} parameter(0)
  ROOT %g = f32[8,16]{1,0} get-tuple-element(%g), index=0
}
ENTRY %main (x: f32[8,16]) -> f32[8,16] {
  %x = f32[8,16]{1,0} parameter(0)
  ROOT %f = f32[8,16]{1,0} fusion(%x), kind=kLoop, calls=%fs
}
"""


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (CALLS_ITSELF, "calls itself"),
        (FUSION_CALLS_ITSELF, "calls itself"),
        (READS_ITSELF, "operand %g is not defined before it in computation fs"),
    ],
)
def test_a_cycle_is_refused_not_followed_for_ever(text: str, needle: str) -> None:
    assert "RecursionError" not in _refused(text, XlaFrontendError, needle)


def test_a_dump_that_is_not_text_is_refused_in_one_line(tmp_path: Path) -> None:
    dump = tmp_path / "module_0001.jit_f.cpu_after_optimizations.txt"
    dump.write_bytes(LOOP.encode() + b"\xff\xfe")
    for where in (dump, tmp_path):
        with pytest.raises(DumpError, match="not HLO text"):
            extract_dump(where)


def test_a_file_that_is_not_text_is_refused_only_where_it_is_picked(tmp_path: Path) -> None:
    """One file of a dump that is not UTF-8 refused the whole dump, whichever module was
    asked for: it is listed as unreadable, never taken as the largest, and refused only
    where it is the module picked."""
    from mallocgame.frontends.xla import AmbiguousModuleError, list_modules

    (tmp_path / "module_0001.jit_f.cpu_after_optimizations.txt").write_text(LOOP)
    bad = tmp_path / "module_0002.jit_g.cpu_after_optimizations.txt"
    bad.write_bytes(LOOP.replace("HloModule m", "HloModule g").encode() * 2 + b"\xff\xfe")
    f, g = list_modules(tmp_path)
    assert (f.unreadable, f.num_instructions) == ("", 4)
    assert (g.unreadable, g.num_instructions) == ("not HLO text (not UTF-8)", 0)
    assert g.describe() == "module_0002.jit_g (unreadable: not HLO text (not UTF-8))"
    for picked in (extract_dump(tmp_path, module="jit_f"), extract_dump(tmp_path, largest=True)):
        assert picked.source["dump_module"] == "module_0001.jit_f"
    with pytest.raises(
        DumpError,
        match=r"module_0002\.jit_g\.cpu_after_optimizations\.txt: not HLO text \(not UTF-8\)$",
    ):
        extract_dump(tmp_path, module="jit_g")
    with pytest.raises(AmbiguousModuleError, match=r"module_0002\.jit_g \(unreadable: not HLO"):
        extract_dump(tmp_path)
    (tmp_path / "module_0001.jit_f.cpu_after_optimizations.txt").unlink()
    with pytest.raises(DumpError, match="not HLO text"):
        extract_dump(tmp_path, largest=True)


def test_an_alias_list_that_cannot_be_read_is_refused_not_skipped() -> None:
    header = "HloModule m, is_scheduled=true"
    for alias in ("{ {0}: (x, {}, may-alias) }", "{ {0}: (0, {}, may-alias), junk }"):
        text = _edit(header, f"{header}, input_output_alias={alias}")
        _refused(text, XlaFrontendError, "cannot read alias list")


def test_a_stray_brace_does_not_drop_the_instructions_after_it() -> None:
    stray = _edit("  %c = f32[4]{0} negate(%x0)\n", "  %c = f32[4]{0} negate(%x0)\n}\n")
    _refused(stray, DumpError, "HLO:[0-9]+: an instruction outside any computation")
    closing = LOOP + "}\n"
    _refused(closing, DumpError, "closes no computation")


def test_the_older_escaped_backend_config_states_a_trip_count() -> None:
    escaped = 'backend_config="{\\"known_trip_count\\":{\\"n\\":\\"3\\"}}"'
    text = _edit("backend_config=" + _trip("3"), escaped)
    text = _edit("compare(%i.1, %n)", "compare(%i.1, %i.1)", text)  # no count to derive
    program = extract_module(text)
    assert [lp.trip_count for lp in program.loops] == [3] and not program.source["notes"]


def test_comment_marks_inside_strings_are_not_comments() -> None:
    # "/*" in one string and "*/" in the next used to be stripped with all between them,
    # the loop's trip count with it (counted once, with a note).
    stated = 'metadata={op_name="jit(f)/a/*b"}, backend_config={"known_trip_count":{"n":"3"}'
    text = _edit("backend_config=" + _trip("3"), stated + ',"note":"x*/y"}')
    text = _edit("compare(%i.1, %n)", "compare(%i.1, %i.1)", text)  # no count to derive
    program = extract_module(text)
    assert [lp.trip_count for lp in program.loops] == [3] and not program.source["notes"]


def test_a_second_root_or_an_unknown_element_type_is_named_with_its_line() -> None:
    root = "  ROOT %xl = f32[4]{0} get-tuple-element(%loop), index=1\n"
    _refused(_edit(root, root + "  ROOT %x2 = f32[4]{0} negate(%xl)\n"), DumpError, "second ROOT")
    unknown = _edit("%c = f32[4]{0} negate(%x0)", "%c = q7[4]{0} negate(%x0)")
    _refused(unknown, DumpError, r"HLO:\d+: instruction %c: unknown element type 'q7'")


def _doubling(levels: int) -> str:
    """A module of ``levels`` computations each calling the one before twice: inlined, the
    first one's negate runs ``2**levels`` times."""
    lines = [
        "HloModule doubling, is_scheduled=true",
        "%c0 (p: f32[8]) -> f32[8] {",
        "  %p = f32[8]{0} parameter(0)",
        "  ROOT %n = f32[8]{0} negate(%p)",
        "}",
    ]
    for k in range(1, levels + 1):
        lines += [
            f"%c{k} (p: f32[8]) -> f32[8] {{",
            "  %p = f32[8]{0} parameter(0)",
            f"  %a = f32[8]{{0}} call(%p), to_apply=%c{k - 1}",
            f"  ROOT %b = f32[8]{{0}} call(%a), to_apply=%c{k - 1}",
            "}",
        ]
    lines += [
        "ENTRY %main (x: f32[8]) -> f32[8] {",
        "  %x = f32[8]{0} parameter(0)",
        f"  ROOT %c = f32[8]{{0}} call(%x), to_apply=%c{levels}",
        "}",
    ]
    return "\n".join(lines) + "\n"


def test_calls_that_inline_too_many_instructions_are_refused_before_reading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # It used to inline every call site, so 24 levels (2**24 negates) ran out of memory.
    from mallocgame.frontends import xla

    text = _doubling(3)  # reads 2 + (3 + 2 * (3 + 2 * (3 + 2 * 2))) = 39 instructions
    assert [i.name for i in extract_module(text).instructions] == ["n"] * 8
    monkeypatch.setattr(xla, "MAX_INLINED_INSTRUCTIONS", 39)
    assert len(extract_module(text).instructions) == 8
    monkeypatch.setattr(xla, "MAX_INLINED_INSTRUCTIONS", 38)
    needle = r"^module doubling: its calls and loop bodies, inlined, make more than 38 instructions"
    _refused(text, XlaFrontendError, needle)
    from mallocgame.frontends.hlo_parse import parse_module
    from mallocgame.frontends.xla import entry_interface

    with pytest.raises(XlaFrontendError, match=needle):
        entry_interface(parse_module(text))
    monkeypatch.undo()
    _refused(_doubling(40), XlaFrontendError, needle.replace("38", "10000000"))


def test_calls_nested_past_the_stack_are_not_said_to_call_themselves() -> None:
    # A chain of nested calls used to be refused as "a computation calls itself".
    levels = 3000
    lines = ["HloModule chain, is_scheduled=true"]
    lines += ["%c0 (p: f32[8]) -> f32[8] {", "  %p = f32[8]{0} parameter(0)"]
    lines += ["  ROOT %n = f32[8]{0} negate(%p)", "}"]
    for k in range(1, levels + 1):
        lines += [f"%c{k} (p: f32[8]) -> f32[8] {{", "  %p = f32[8]{0} parameter(0)"]
        lines += [f"  ROOT %a = f32[8]{{0}} call(%p), to_apply=%c{k - 1}", "}"]
    lines += ["ENTRY %main (x: f32[8]) -> f32[8] {", "  %x = f32[8]{0} parameter(0)"]
    lines += [f"  ROOT %c = f32[8]{{0}} call(%x), to_apply=%c{levels}", "}"]
    message = _refused("\n".join(lines) + "\n", XlaFrontendError, r"^module chain at ")
    assert "calls or tuples nest deeper than this reader follows" in message
    assert "calls itself" not in message
