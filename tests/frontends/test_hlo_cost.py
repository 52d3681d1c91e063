"""Per-instruction work of HLO (mallocgame.frontends.hlo_cost): the trip count a while
loop states, and what a loop costs, on hand-written instructions."""

from __future__ import annotations

from pathlib import Path

import pytest

from mallocgame.frontends.hlo_cost import CostModel, known_trip_count
from mallocgame.frontends.hlo_parse import HloInstruction, HloParseError, parse_module


def _while(config: str) -> HloInstruction:
    return HloInstruction("loop", "while", (), ("init",), {"backend_config": config})


@pytest.mark.parametrize(
    ("config", "count"),
    [
        ('{"known_trip_count":{"n":"3"},"known_init_step":{"init":"0","step":"1"}}', 3),
        ('{"known_trip_count":{"n":12}}', 12),
        ('{"known_trip_count":{}}', 0),  # proto3 JSON leaves out a 0
        ('{"known_trip_count":{"n":"0"}}', 0),
        ('{"known_trip_count":{"n":"2147483647"}}', 2**31 - 1),
        ('{"known_induction_variable":{"tuple_index":"0"}}', None),
        ("", None),
    ],
)
def test_stated_trip_counts(config: str, count: int | None) -> None:
    assert known_trip_count(_while(config)) == count


NOT_WHOLE = "in its backend_config is not a whole number"


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ('{"known_trip_count":{"n":"abc"}}', f"known_trip_count 'abc' {NOT_WHOLE}"),
        ('{"known_trip_count":{"n":"-3"}}', f"known_trip_count '-3' {NOT_WHOLE}"),
        ('{"known_trip_count":{"n":-3}}', f"known_trip_count '-3' {NOT_WHOLE}"),
        ('{"known_trip_count":{"n":"2.5"}}', f"known_trip_count '2.5' {NOT_WHOLE}"),
        (
            '{"known_trip_count":5}',
            r"""known_trip_count '5' in its backend_config is not \{"n":COUNT\}""",
        ),
        (
            '{"known_trip_count":{"n":"2147483648"}}',
            r"known_trip_count 2147483648 is more than 2\*\*31-1",
        ),
    ],
)
def test_a_malformed_or_too_large_trip_count_names_the_loop(config: str, needle: str) -> None:
    with pytest.raises(HloParseError, match=r"^while loop: " + needle):
        known_trip_count(_while(config))


LOOP = """\
HloModule m, is_scheduled=true

%body (t: f32[4]) -> f32[4] {
  %t = f32[4]{0} parameter(0)
  %m = f32[4]{0} multiply(%t, %t)
  ROOT %e = f32[4]{0} exponential(%m)
}

%cond (c: f32[4]) -> pred[] {
  %c = f32[4]{0} parameter(0)
  %s = f32[4]{0} sine(%c)
  ROOT %go = pred[] constant(true)
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %loop = f32[4]{0} while(%x), condition=%cond, body=%body, backend_config=CONFIG
}
"""


@pytest.mark.parametrize(("trip", "work"), [("5", (5 * 4.0, 5 * (4.0 + 4.0))), ("0", (0.0, 4.0))])
def test_a_loop_costs_its_trip_count_and_a_loop_of_0_its_condition_once(
    trip: str, work: tuple[float, float]
) -> None:
    # condition: a sine (4 transcendentals); body: a multiply (4 flops) and an exponential (4)
    module = parse_module(LOOP.replace("CONFIG", f'{{"known_trip_count":{{"n":"{trip}"}}}}'))
    assert CostModel(module).cost(module.entry.by_name["loop"], module.entry) == work


CONDITIONAL = """\
HloModule m, is_scheduled=true

%mul (a: f32[1000]) -> f32[1000] {
  %a = f32[1000]{0} parameter(0)
  ROOT %m = f32[1000]{0} multiply(%a, %a)
}

%exp (b: f32[1000]) -> f32[1000] {
  %b = f32[1000]{0} parameter(0)
  %e = f32[1000]{0} exponential(%b)
  ROOT %l = f32[1000]{0} log(%e)
}

ENTRY %main (i: s32[], x: f32[1000]) -> f32[1000] {
  %i = s32[] parameter(0)
  %x = f32[1000]{0} parameter(1)
  ROOT %c = f32[1000]{0} conditional(%i, %x, %x), branch_computations={%mul, %exp}
}
"""


def test_a_conditional_costs_the_most_of_any_branch_in_each_property() -> None:
    # As XLA's HloCostAnalysis::HandleConditional: the flops of the multiply branch and
    # the transcendentals of the exp branch, not the lexicographically larger branch.
    module = parse_module(CONDITIONAL)
    assert CostModel(module).cost(module.entry.root, module.entry) == (1000.0, 2000.0)


def test_an_asynchronous_all_reduce_costs_what_the_synchronous_one_does() -> None:
    from mallocgame.frontends.xla import extract_module

    text = """HloModule m, is_scheduled=true
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %main (x: f32[1024]) -> (f32[1024], f32[1024]) {
  %x = f32[1024]{0} parameter(0)
  %ar = f32[1024]{0} all-reduce(%x), replica_groups={}, to_apply=%sum
  %ars = f32[1024]{0} all-reduce-start(%x), replica_groups={}, to_apply=%sum
  %ard = f32[1024]{0} all-reduce-done(%ars)
  ROOT %t = (f32[1024]{0}, f32[1024]{0}) tuple(%ar, %ard)
}
"""
    flops = {i.opcode: i.flops for i in extract_module(text).instructions}
    assert flops["all-reduce"] == flops["all-reduce-start"] == 1024


FUSION_OFF_ROOT = """HloModule m, is_scheduled=true
%fc (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  %inner = f32[8]{0} fusion(%p), kind=kLoop, calls=%fc
  ROOT %e = f32[8]{0} exponential(%inner)
}
ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  ROOT %f = f32[8]{0} fusion(%x), kind=kLoop, calls=%fc
}
"""

FUSION_AT_ROOT = """HloModule m, is_scheduled=true
%fs (p0: f32[8]) -> f32[8] {
  %p0 = f32[8]{0} parameter(0)
  %d = f32[8]{0} dynamic-update-slice(%p0, %p0)
  ROOT %g = f32[8]{0} fusion(%d), kind=kLoop, calls=%fs
}
ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  ROOT %f = f32[8]{0} fusion(%x), kind=kLoop, calls=%fs
}
"""


def test_a_fusion_that_calls_itself_is_refused_not_costed_0() -> None:
    # Its cost used to be taken as 0 where it met itself (8 transcendentals in all).
    module = parse_module(FUSION_OFF_ROOT)
    with pytest.raises(HloParseError, match=r"^computation fc calls itself, directly or through"):
        CostModel(module).cost(module.entry.root, module.entry)
    module = parse_module(FUSION_AT_ROOT)  # its in-place pairs followed it for ever
    with pytest.raises(HloParseError, match=r"^computation fs calls itself, directly or through"):
        CostModel(module).in_place_pairs(module.entry.root)


IN_PLACE = """HloModule m, is_scheduled=true
%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%wrapped (w0: f32[8], w1: f32[8]) -> f32[8] {
  %w0 = f32[8]{0} parameter(0)
  %w1 = f32[8]{0} parameter(1)
  ROOT %cc = f32[8]{0} custom-call(%w0, %w1), custom_call_target="x"
}
ENTRY %main (x: f32[8], y: f32[8], i: s32[4], j: s32[4]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %y = f32[8]{0} parameter(1)
  %i = s32[4]{0} parameter(2)
  %j = s32[4]{0} parameter(3)
  %n = s32[] constant(4)
  %t = (f32[8]{0}, f32[8]{0}) tuple(%x, %y)
  %ars1 = f32[8]{0} all-reduce-start(%x), replica_groups={}, to_apply=%sum
  %ars2 = (f32[8]{0}, f32[8]{0}) all-reduce-start(%x, %y), replica_groups={}, to_apply=%sum
  %ars_nvshmem = f32[8]{0} all-reduce-start(%x), to_apply=%sum, backend_config={"backend":"NVSHMEM"}
  %rag = f32[8]{0} ragged-all-to-all(%x, %y, %i, %j, %i, %j), replica_groups={{0,1}}
  %sds = f32[<=8]{0} set-dimension-size(%x, %n), dimensions={0}
  %cp = f32[8]{0} collective-permute(%x, %y, %i, %j), slice_sizes={{4}}
  %cp_tuple = (f32[8]{0}, f32[8]{0}) collective-permute(%x, %t, %i, %j), slice_sizes={{4},{4}}
  %cps = (f32[8], f32[8], u32[], u32[]) collective-permute-start(%x, %y, %i, %j), slice_sizes={{4}}
  %cp_plain = f32[8]{0} collective-permute(%x), source_target_pairs={{0,1}}
  %as = ((f32[8], f32[8]), f32[8], s32[]) async-start(%x, %y), calls=%wrapped,\
 output_to_operand_aliasing={{1}: (1, {})}
  ROOT %z = f32[8]{0} add(%x, %y)
}
"""


@pytest.mark.parametrize(
    ("name", "pairs"),
    [
        ("ars1", [(0, (), ())]),
        ("ars2", [(0, (), (0,)), (1, (), (1,))]),
        ("ars_nvshmem", []),  # XLA's one-shot NVSHMEM all-reduce needs separate buffers
        ("rag", [(1, (), ())]),
        ("sds", [(0, (), ())]),
        ("cp", [(1, (), ())]),
        ("cp_tuple", [(1, (), ()), (1, (0,), (0,)), (1, (1,), (1,))]),
        ("cps", [(1, (), (1,))]),
        ("cp_plain", []),
        ("as", [(1, (), (1,))]),
    ],
)
def test_what_xla_updates_in_place_by_default_has_its_pairs(
    name: str, pairs: list[tuple[int, tuple[int, ...], tuple[int, ...]]]
) -> None:
    # Before, only dynamic-update-slice, scatter and output_to_operand_aliasing of
    # custom calls and fusions had pairs: each of these had none.
    module = parse_module(IN_PLACE)
    assert CostModel(module).in_place_pairs(module.entry.by_name[name]) == pairs


RAGGED = """HloModule m, is_scheduled=true
ENTRY %main (x: f32[8], y: f32[8], i: s32[4], j: s32[4]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %y = f32[8]{0} parameter(1)
  %i = s32[4]{0} parameter(2)
  %j = s32[4]{0} parameter(3)
  %out = f32[8]{0} negate(%y)
  ROOT %rag = f32[8]{0} ragged-all-to-all(%x, %out, %i, %j, %i, %j), replica_groups={{0,1}}
}
"""


def test_an_in_place_collective_puts_its_buffer_and_result_in_one_alias_group() -> None:
    from mallocgame.frontends.xla import extract_dump, extract_module

    program = extract_module(RAGGED)
    t = next(t for t, i in enumerate(program.instructions) if i.opcode == "ragged-all-to-all")
    assert any({(t, 1), (t, 6)} <= set(g) for g in program.alias_groups)  # operand 1, output
    # the bundled dumps' asynchronous all-reduces: operand and result in one group
    for dump in ("tpu_mlp", "gpu_step"):
        program = extract_dump(Path(__file__).parent / "data" / dump)
        t = next(t for t, i in enumerate(program.instructions) if i.opcode == "all-reduce-start")
        assert any({(t, 0), (t, 1)} <= set(g) for g in program.alias_groups), dump


GEMM = """HloModule m, is_scheduled=true
ENTRY %main (p0: f32[64,1024], p1: f32[64,32]) -> f32[1024,32] {
  %p0 = f32[64,1024]{1,0} parameter(0)
  %p1 = f32[64,32]{1,0} parameter(1)
  %gemm = (f32[1024,32]{1,0}, s8[4194304]{0}) custom-call(%p0, %p1), \
custom_call_target="__cublas$gemm", backend_config=CONFIG
  ROOT %r = f32[1024,32]{1,0} get-tuple-element(%gemm), index=0
}
"""


def _gemm_config(lhs: str) -> str:
    dims = f'"lhs_contracting_dimensions":[{lhs}],"rhs_contracting_dimensions":["0"]'
    return f'{{"gemm_backend_config":{{"alpha_real":1,"dot_dimension_numbers":{{{dims}}}}}}}'


@pytest.mark.parametrize(
    ("config", "k"),
    [
        # the lhs f32[64,1024] contracts its dimension 0: K = 64, not its last (1024)
        (_gemm_config('"0"'), 64),
        ('"' + _gemm_config("0").replace('"', '\\"') + '"', 64),  # the older, escaped form
        (_gemm_config(""), 1),
        ('{"operation_queue_id":"0"}', 1024),  # none stated: the lhs's last dimension
    ],
)
def test_a_gemm_contracts_the_lhs_dimensions_its_config_states(config: str, k: int) -> None:
    # Before, every gemm contracted its lhs's last dimension: 16x the work here.
    module = parse_module(GEMM.replace("CONFIG", config))
    gemm = module.entry.by_name["gemm"]
    assert CostModel(module).cost(gemm, module.entry) == (2.0 * 1024 * 32 * k, 0.0)


@pytest.mark.parametrize("lhs", ['"2"', '"x"', '"-1"'])
def test_a_gemm_contracting_no_dimension_of_its_lhs_is_refused(lhs: str) -> None:
    module = parse_module(GEMM.replace("CONFIG", _gemm_config(lhs)))
    with pytest.raises(HloParseError, match=r"^custom-call gemm: lhs_contracting_dimensions "):
        CostModel(module).cost(module.entry.by_name["gemm"], module.entry)


CONV = """HloModule m, is_scheduled=true
ENTRY %main (x: f32[LHS], k: f32[KERNEL]) -> f32[OUT] {
  %x = f32[LHS]{LL} parameter(0)
  %k = f32[KERNEL]{KL} parameter(1)
  ROOT %c = f32[OUT]{OL} convolution(%x, %k), ATTRS
}
"""


def _conv_flops(lhs: str, kernel: str, out: str, attrs: str) -> float:
    def layout(dims: str) -> str:
        return ",".join(str(d) for d in reversed(range(dims.count(",") + 1)))

    text = CONV.replace("LHS", lhs).replace("KERNEL", kernel).replace("OUT", out)
    text = text.replace("LL", layout(lhs)).replace("KL", layout(kernel))
    module = parse_module(text.replace("OL", layout(out)).replace("ATTRS", attrs))
    return CostModel(module).cost(module.entry.root, module.entry)[0]


@pytest.mark.parametrize(
    ("lhs", "kernel", "out", "attrs", "flops"),
    [
        # libtpu's batched matmul 8 x (128x256 . 256x64): the batch is a spatial dimension
        # dilated by 8 and strided by 7, so that each output reads one batch (8x before)
        (
            "8,128,256",
            "8,256,64",
            "8,128,64",
            "window={size=8 stride=7 lhs_dilate=8}, dim_labels=0bf_0io->0bf",
            2.0 * 8 * 128 * 256 * 64,
        ),
        # libtpu's grouped 3x3 convolution of 4 groups: the groups a dilated dimension
        # (4x before); the SAME padding's positions outside the input are not work either
        (
            "2,16,16,4,16",
            "3,3,16,4,16",
            "2,16,16,4,16",
            "window={size=3x3x4 stride=1x1x3 pad=1_1x1_1x0_0 lhs_dilate=1x1x4}, "
            "dim_labels=b012f_01i2o->b012f",
            2.0 * 2 * 16 * 16 * (16 * 3 - 2) ** 2 * 4,
        ),
        # a 1-D convolution of 5 elements by 3, padded 1 each side: 13 of the 15 positions
        ("1,5,1", "3,1,1", "1,5,1", "window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f", 2.0 * 13),
        # no window: every kernel element, as before
        ("4,8", "8,16", "4,16", "dim_labels=bf_io->bf", 2.0 * 4 * 16 * 8),
    ],
)
def test_a_convolution_counts_only_the_positions_that_read_its_input(
    lhs: str, kernel: str, out: str, attrs: str, flops: float
) -> None:
    assert _conv_flops(lhs, kernel, out, attrs) == flops


def test_valid_positions_are_the_pairs_that_land_on_an_input_element() -> None:
    import itertools

    from mallocgame.frontends.hlo_cost import _valid_positions

    for size, out, window, stride, pad, lhs_dil, rhs_dil in itertools.product(
        (1, 3, 7), (1, 4, 9), (1, 2, 5), (1, 2, 3), (-2, 0, 1, 4), (1, 2, 3), (1, 2)
    ):
        every = [o * stride - pad + k * rhs_dil for o in range(out) for k in range(window)]
        brute = sum(x % lhs_dil == 0 and 0 <= x // lhs_dil < size for x in every)
        got = _valid_positions(size, out, window, stride, pad, lhs_dil, rhs_dil)
        assert got == brute, (size, out, window, stride, pad, lhs_dil, rhs_dil)
