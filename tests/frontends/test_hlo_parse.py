"""Shapes and layouts as the CPU, GPU and TPU backends print them."""

from __future__ import annotations

import pytest

from mallocgame.frontends.hlo_parse import (
    ArrayShape,
    HloParseError,
    Layout,
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
        ("f32[4,10,3]{2,1,0:T(8,128)}", 4 * 16 * 128 * 4),  # a tile covers the minor dimensions only
        ("s32[4]{0:T(128)}", 128 * 4),
        ("f32[]{:T(256)}", 256 * 4),  # a tile longer than the shape sees leading 1s
        ("s4[16]{0:E(4)}", 8),
        ("pred[7]{0:T(1024)E(32)}", 1024 * 4),  # E(n) overrides the element width
        ("f32[3,5]{1,0:T(*,2)}", 3 * 6 * 4),  # '*': a combined dimension pads nothing
        ("f32[8,128]{1,0:T(8,128)L(1024)D(D,C)}", 8 * 128 * 4),  # other items are read past
    ],
)
def test_stored_bytes_include_tile_padding(text: str, nbytes: int) -> None:
    assert parse_shape(text).nbytes == nbytes


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
    text = "HloModule m, is_scheduled=true\n\nENTRY %main (p: f32[4]) -> f32[4] {\n" \
           "  ROOT %p = f32[4]{0:T(8)?} parameter(0)\n}\n"
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
