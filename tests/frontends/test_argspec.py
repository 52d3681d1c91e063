"""Command-line argument specs and function references."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")

from mallocgame.frontends.argspec import ArgSpecError, parse_arg_spec, resolve_function  # noqa: E402


def test_parse_arg_spec() -> None:
    spec = parse_arg_spec("f32[8,64]")
    assert spec.shape == (8, 64) and spec.dtype == jax.numpy.float32
    assert parse_arg_spec("bf16[]").shape == ()
    assert parse_arg_spec(" s32[ 3 ] ").dtype == jax.numpy.int32


@pytest.mark.parametrize("bad", ["f32", "q32[3]", "f32[a]", "f32[3"])
def test_bad_arg_spec(bad: str) -> None:
    with pytest.raises(ArgSpecError, match="bad argument spec"):
        parse_arg_spec(bad)


def test_resolve_function() -> None:
    assert resolve_function("os.path:join")("a", "b").endswith("b")
    for bad, needle in [("os.path", "expected module:function"), ("no_such_mod_x:f", "cannot import"),
                        ("os.path:nope", "no attribute"), ("os:sep", "not callable")]:
        with pytest.raises(ArgSpecError, match=needle):
            resolve_function(bad)
