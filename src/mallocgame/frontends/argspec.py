"""Example-argument specs for the command line: ``f32[8,64]`` -> ``jax.ShapeDtypeStruct``.

Also resolves ``package.module:function`` names to the function.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from typing import Any, Callable

from mallocgame.errors import MallocGameError

__all__ = ["ArgSpecError", "parse_arg_spec", "resolve_function", "DTYPES"]

DTYPES = {
    "pred": "bool", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
}
_SPEC = re.compile(r"^\s*([a-z0-9]+)\[([0-9,\s]*)\]\s*$")


class ArgSpecError(MallocGameError):
    """A malformed argument spec or a function that cannot be imported."""


def parse_arg_spec(spec: str) -> Any:
    """``"f32[8,64]"`` -> ``jax.ShapeDtypeStruct((8, 64), float32)`` (``"f32[]"`` is a scalar)."""
    match = _SPEC.match(spec)
    if not match or match.group(1) not in DTYPES:
        raise ArgSpecError(
            f"bad argument spec {spec!r}: expected DTYPE[D0,D1,...] with DTYPE one of "
            f"{', '.join(DTYPES)} (e.g. f32[8,64])"
        )
    import jax
    import jax.numpy as jnp

    dims = tuple(int(d) for d in match.group(2).replace(" ", "").split(",") if d)
    return jax.ShapeDtypeStruct(dims, jnp.dtype(DTYPES[match.group(1)]))


def resolve_function(target: str) -> Callable[..., Any]:
    """Import ``package.module:function`` (the current directory is searched too)."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ArgSpecError(f"bad function {target!r}: expected module:function")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's input
        raise ArgSpecError(f"cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    fn = module
    for part in attr.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise ArgSpecError(f"{module_name} has no attribute {attr!r}")
    if not callable(fn):
        raise ArgSpecError(f"{target} is not callable")
    return fn
