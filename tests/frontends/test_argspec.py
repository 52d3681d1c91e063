"""Command-line argument specs and function references."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")

from mallocgame.frontends.argspec import (  # noqa: E402
    ArgSpec,
    ArgSpecError,
    parse_arg_spec,
    parse_spec,
    resolve_function,
)


def test_parse_arg_spec() -> None:
    spec = parse_arg_spec("f32[8,64]")
    assert spec.shape == (8, 64) and spec.dtype == jax.numpy.float32
    assert parse_arg_spec("bf16[]").shape == ()
    assert parse_arg_spec(" s32[ 3 ] ").dtype == jax.numpy.int32


@pytest.mark.parametrize("wide", ["s64[2]", "u64[]", "f64[4]"])
def test_a_64_bit_type_needs_jaxs_64_bit_mode(wide: str) -> None:
    assert parse_spec(wide).nbytes in (8, 16, 32)  # the spec itself is fine: torch takes it
    if jax.config.read("jax_enable_x64"):
        assert parse_arg_spec(wide).dtype.itemsize == 8
        return
    with pytest.raises(ArgSpecError, match="JAX lowers 64-bit types to 32 bits"):
        parse_arg_spec(wide)  # else s64[2] would be lowered to s32[2], half its bytes


@pytest.mark.parametrize("bad", ["f32", "q32[3]", "f32[a]", "f32[3"])
def test_bad_arg_spec(bad: str) -> None:
    with pytest.raises(ArgSpecError, match="bad argument spec"):
        parse_arg_spec(bad)


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ("f32[8,,3]", "dimension 1 is empty"),
        ("f32[,,]", "dimension 0 is empty"),
        ("f32[3,]", "dimension 1 is empty"),
        ("f32[ , 3]", "dimension 0 is empty"),
        ("f32[8,-3]", r"dimension 1 is negative \(-3\)"),
        ("f32[1e20]", r"dimension 0 \('1e20'\) is not a whole number"),
        ("f32[+3]", r"dimension 0 \('\+3'\) is not a whole number"),
        ("u8[9007199254740993]", r"dimension 0 \(9007199254740993\) is more than 2\*\*53"),
        ("s16[4503599627370497]", r"9007199254740994 bytes, more than 2\*\*53"),
        ("f32[2251799813685249]", r"9007199254740996 bytes, more than 2\*\*53"),
        ("f32[100000000,100000000]", r"40000000000000000 bytes, more than 2\*\*53"),
        (
            "f32[0,100000000000000000000]",
            r"dimension 1 \(100000000000000000000\) is more than 2\*\*53",
        ),
        ("f32[[3]]", "expected DTYPE"),
    ],
)
def test_a_bad_spec_is_one_line_naming_it(bad: str, needle: str) -> None:
    with pytest.raises(ArgSpecError, match=needle) as err:
        parse_spec(bad)
    assert str(err.value).startswith(f"bad argument spec {bad!r}: ") and "\n" not in str(err.value)


def test_spec_byte_range_ends_at_2_53() -> None:
    assert parse_spec("u8[9007199254740992]") == ArgSpec("u8", (2**53,))
    assert parse_spec("f32[2251799813685248]").nbytes == 2**53
    assert parse_spec("f32[0, 9007199254740992]").nbytes == 0
    assert parse_spec(" bf16[ ] ") == ArgSpec("bf16", ())


def test_jax_never_sees_a_refused_spec() -> None:
    # A 1e20 dimension used to reach jax.ShapeDtypeStruct and fail with a cut-off TypeError.
    for bad in ("f32[100000000000000000000]", "f32[8,,3]", "f32[,,]"):
        with pytest.raises(ArgSpecError, match="bad argument spec"):
            parse_arg_spec(bad)


def test_resolve_function() -> None:
    assert resolve_function("os.path:join")("a", "b").endswith("b")
    for bad, needle in [
        ("os.path", "expected module:function"),
        ("no_such_mod_x:f", "cannot import"),
        ("os.path:nope", "no attribute"),
        ("os:sep", "not callable"),
    ]:
        with pytest.raises(ArgSpecError, match=needle):
            resolve_function(bad)
