"""Shapes and layouts as the CPU, GPU and TPU backends print them."""

from __future__ import annotations

import pytest

from mallocgame.frontends.hlo_parse import (
    ArrayShape,
    HloParseError,
    Layout,
    _strip_comments,
    parse_layout,
    parse_module,
    parse_shape,
)


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [
        ("f32[8,16]{1,0}", 8 * 16 * 4),  # CPU: no tiles, no padding
        ("f32[3,5]{1,0:T(2,2)}", 4 * 6 * 4),  # the tiled-layout document's example
        ("bf16[300,200]{1,0:T(8,128)(2,1)}", 304 * 256 * 2),  # the second tile packs bf16 pairs
        ("f32[10,3]{0,1:T(8,128)}", 8 * 128 * 4),  # column-major: physical [3,10] -> [8,128]
        (
            "f32[4,10,3]{2,1,0:T(8,128)}",
            4 * 16 * 128 * 4,
        ),  # a tile covers the minor dimensions only
        ("s32[4]{0:T(128)}", 128 * 4),
        ("f32[]{:T(256)}", 256 * 4),  # a tile longer than the shape sees leading 1s
        ("s4[16]{0:E(4)}", 8),
        ("s4[1000]{0}", 1000),  # unpacked without E(n): a byte each, as XLA stores it
        ("u2[1000]", 1000),
        ("f4e2m1fn[1000]{0}", 1000),
        ("s4[1000]{0:E(4)}", 500),
        ("pred[7]{0:T(1024)E(32)}", 1024 * 4),  # E(n) overrides the element width
        ("f32[3,5]{1,0:T(*,2)}", 3 * 6 * 4),  # '*': a combined dimension pads nothing
        ("f32[8,128]{1,0:T(8,128)L(1024)D(D,C)}", 8 * 128 * 4),  # other items are read past
    ],
)
def test_stored_bytes_include_tile_padding(text: str, nbytes: int) -> None:
    assert parse_shape(text).nbytes == nbytes


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("f32[3,200]{0,0:T(8,128)}", r"layout \{0,0\} is not an order of the 2 dimensions"),
        ("f32[3]{5,0}", "is not an order of the 1 dimensions"),
        ("f32[8]{0:T(0)}", "a tile's sizes are at least 1"),
        ("f32[8]{0:T(-8)}", "a tile's sizes are at least 1"),
        ("f32[8]{0:E(0)}", "an element width E"),
    ],
)
def test_a_layout_that_cannot_be_is_refused(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_shape(text)


def test_an_unbounded_dynamic_dimension_is_refused() -> None:
    assert parse_shape("f32[<=8,16]").nbytes == 8 * 16 * 4  # bounded: its bound
    with pytest.raises(ValueError, match="unbounded dynamic dimension"):
        parse_shape("f32[?,16]")


def test_memory_space_and_layout_fields() -> None:
    shape = parse_shape("bf16[256,512]{1,0:T(8,128)(2,1)S(1)}")
    assert shape.memory_space == 1
    assert shape.layout == Layout((1, 0), ((8, 128), (2, 1)), 0, 1)
    assert str(shape) == "bf16[256,512]"
    assert parse_shape("f32[4]").memory_space == 0 and parse_shape("f32[4]").layout is None
    # The layout is not part of a shape's identity: a prefetched copy has the same shape.
    assert shape == ArrayShape("bf16", (256, 512))
    leaves = parse_shape("(bf16[64]{0:T(128)(2,1)S(1)}, bf16[64]{0:T(128)(2,1)}, u32[]{:S(2)})")
    assert [leaf.memory_space for leaf in leaves] == [1, 0, 2]
    assert parse_layout("1,0") == Layout((1, 0))


def test_unreadable_layout_is_refused_with_its_line() -> None:
    text = (
        "HloModule m, is_scheduled=true\n\nENTRY %main (p: f32[4]) -> f32[4] {\n"
        "  ROOT %p = f32[4]{0:T(8)?} parameter(0)\n}\n"
    )
    with pytest.raises(HloParseError, match=r"HLO:4: cannot parse"):
        parse_module(text)


def test_computation_closed_with_an_execution_thread() -> None:
    text = (
        "HloModule m, is_scheduled=true\n\n"
        "%async_computation (p.1: f32[4]) -> f32[4] {\n"
        "  ROOT %p.1 = f32[4]{0} parameter(0)\n"
        '}, execution_thread="main"\n\n'
        "ENTRY %main (p: f32[4]) -> f32[4] {\n"
        "  ROOT %p = f32[4]{0} parameter(0)\n"
        "}\n"
    )
    module = parse_module(text)
    assert set(module.computations) == {"async_computation", "main"}


# --------------------------------------------------------------------------- malformed modules


def _module(entry_body: str, *, before: str = "") -> str:
    """A scheduled module whose ENTRY computation holds ``entry_body`` (lines 4 on)."""
    return (
        "HloModule m, is_scheduled=true\n\n"
        + before
        + "ENTRY %main (p: f32[4]) -> f32[4] {\n"
        + entry_body
        + "}\n"
    )


GOOD = "  %p = f32[4]{0} parameter(0)\n  ROOT %n = f32[4]{0} negate(%p)\n"


def test_a_well_formed_module_parses() -> None:
    module = parse_module(_module(GOOD))
    assert [ins.name for ins in module.entry.instructions] == ["p", "n"]


def test_bytes_are_exact_past_float64() -> None:
    # 2**53 + 1 elements: a float product would round it down to 2**53.
    assert parse_shape("u8[9007199254740993]").nbytes == 2**53 + 1
    assert parse_shape("s4[9007199254740993]{0:E(4)}").nbytes == 2**52 + 1  # half bytes round up
    assert parse_shape("f32[100000000000000000000]").nbytes == 4 * 10**20


@pytest.mark.parametrize(
    ("shape", "named"),
    [
        ("f32[100000000000000000000]{0}", r"shape f32\[100000000000000000000\] holds 4"),
        ("u8[9007199254740993]{0}", r"shape u8\[9007199254740993\] holds 9007199254740993 bytes"),
        (
            "(f32[4]{0}, s8[3,9007199254740992]{1,0})",
            r"shape s8\[3,9007199254740992\] \(element \{1\}\)",
        ),
    ],
)
def test_a_shape_of_more_than_2_53_bytes_is_refused(shape: str, named: str) -> None:
    text = _module(
        f"  %p = f32[4]{{0}} parameter(0)\n  %big = {shape} custom-call(%p)\n"
        "  ROOT %n = f32[4]{0} negate(%p)\n"
    )
    with pytest.raises(HloParseError, match=r"^HLO:5: instruction %big: " + named) as err:
        parse_module(text)
    assert "more than 2**53" in str(err.value) and "\n" not in str(err.value)


def test_the_largest_shape_of_spec_is_read() -> None:
    text = _module(
        "  %p = u8[9007199254740992]{0} parameter(0)\n  ROOT %n = f32[4]{0} negate(%p)\n"
    )
    assert parse_module(text).entry.instructions[0].shape.nbytes == 2**53


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            _module(GOOD + "  %n = f32[4]{0} abs(%p)\n"),
            r"^HLO:6: instruction %n is defined twice in computation main$",
        ),
        (_module(""), r"^HLO:4: computation main has no instructions$"),
        (
            _module(GOOD, before="%empty (a: f32[]) -> f32[] {\n}\n\n"),
            r"^HLO:4: computation empty has no instructions$",
        ),
        (
            _module(
                GOOD,
                before="%c (a: f32[]) -> f32[] {\n  ROOT %a = f32[] parameter(0)\n}\n\n"
                "%c (b: f32[]) -> f32[] {\n  ROOT %b = f32[] parameter(0)\n}\n\n",
            ),
            r"^HLO:7: computation c is defined twice$",
        ),
        (
            _module(GOOD)
            + "\nENTRY %other (q: f32[4]) -> f32[4] {\n  ROOT %q = f32[4]{0} parameter(0)\n}\n",
            r"^HLO:8: a second ENTRY computation \(other; the first is main\)$",
        ),
        (
            _module("  %p = f32[4,-2]{1,0} parameter(0)\n  ROOT %n = f32[4]{0} negate(%p)\n"),
            r"^HLO:4: cannot parse .*negative dimension -2",
        ),
    ],
    ids=[
        "duplicate-name",
        "empty-entry",
        "empty-computation",
        "duplicate-computation",
        "second-entry",
        "negative-dimension",
    ],
)
def test_a_malformed_module_is_one_line_naming_the_problem(text: str, needle: str) -> None:
    with pytest.raises(HloParseError, match=needle):
        parse_module(text)


@pytest.mark.parametrize(
    ("text", "layout"),
    [
        ("1,0:T(8,128)(2,1)S(1)", Layout((1, 0), ((8, 128), (2, 1)), 0, 1)),
        ("0: T(128) E(4)\tS(2) ", Layout((0,), ((128,),), 4, 2)),  # whitespace between items
        ("1,0:L(1024)D(D,C)T(*,2)#(3)", Layout((1, 0), ((None, 2),))),  # others read past
        ("0:", Layout((0,))),
    ],
)
def test_layout_items_are_read_one_after_another(text: str, layout: Layout) -> None:
    assert parse_layout(text) == layout


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("0:" + "T" * 2000, "'" + "T" * 40 + "...'"),  # no parentheses: was quadratic
        ("0:T(8)" + "T" * 2000 + "(", "'" + "T" * 40 + "...'"),
        ("0:T(8)x", "'x'"),
        ("0:T(8) (2)", "'(2)'"),
        ("0:T((8))", "'T((8))'"),
        ("0:" + "T(" * 1000, "'" + "T(" * 20 + "...'"),
    ],
    ids=["letters", "letters-after-a-tile", "junk", "a-tile-without-item", "nested", "opened"],
)
def test_an_unreadable_layout_item_is_shown_cut_short(text: str, shown: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_layout(text)
    assert str(err.value) == f"cannot read layout item {shown}"


@pytest.mark.parametrize(
    ("line", "stripped"),
    [
        ("(f32[], /*index=5*/f32[8]{0})", "(f32[], f32[8]{0})"),
        ("a/*1*/b/*2*/c", "abc"),
        ("/* a /* b */ c */", " c */"),  # a comment ends at the first */
        ("/**/x/*/y", "x/*/y"),  # '/*/' opens and does not close
        ("/* " * 1000 + "x", "/* " * 1000 + "x"),  # no */: kept (was quadratic)
        ("/* " * 1000 + "*/x", "x"),
        ("*/ a */", "*/ a */"),
        ('op_name="f/*b", x={"n":"3","m":"x*/y"}', 'op_name="f/*b", x={"n":"3","m":"x*/y"}'),
        ('"a\\"/*b*/" /*c*/ "/*"/**/', '"a\\"/*b*/"  "/*"'),  # an escaped quote stays in
        ('"\\\\"/*c*/x', '"\\\\"x'),  # an escaped backslash ends nothing
        ('/*"*/x"/*"', 'x"/*"'),  # a quote in a comment opens no string
        ('"/* ' * 1000, '"/* ' * 1000),
    ],
    ids=[
        "index",
        "two",
        "nested",
        "unclosed-slash",
        "many-unclosed",
        "many-closed",
        "no-open",
        "in-strings",
        "escaped-quote",
        "escaped-backslash",
        "quote-in-comment",
        "many-in-strings",
    ],
)
def test_comments_are_stripped_in_one_pass(line: str, stripped: str) -> None:
    assert _strip_comments(line) == stripped


def test_operands_are_names_after_at_most_a_shape() -> None:
    older = (
        "  %p = f32[4]{0} parameter(0)\n"
        "  %t = (f32[4]{0}, token[]) tuple(f32[4]{0} %p, token[] %k)\n"
        "  %g = f32[4]{0} get-tuple-element((f32[4]{0}, token[]) %t), index=0\n"
        "  ROOT %n = f32[4]{0} add(f32[4]{1,0:T(8)} %g, p)\n"
    )
    module = parse_module(_module(older))
    assert [ins.operands for ins in module.entry.instructions] == [
        (),
        ("p", "k"),
        ("t",),
        ("g", "p"),
    ]


@pytest.mark.parametrize(
    "operands",
    ["%p %p", "f32[4]{0} %p %p", "f32[4]x %p", "f32[4]{0}{0} %p", "f32 %p", "%p, %p p"],
)
def test_an_operand_that_is_not_one_name_is_refused(operands: str) -> None:
    # The words before the last used to be dropped: add(%x %y) read as add(%y).
    text = _module(f"  %p = f32[4]{{0}} parameter(0)\n  ROOT %n = f32[4]{{0}} add({operands})\n")
    with pytest.raises(
        HloParseError, match=r"^HLO:5: cannot parse .*is not one name, after at most a shape"
    ):
        parse_module(text)
