"""Example-argument specs for the command line: ``f32[8,64]`` -> ``jax.ShapeDtypeStruct``.

A spec is ``DTYPE[D0,D1,...]``: an element type of :data:`DTYPES` and whole-number
dimensions (``f32[]`` is a scalar, spaces are read past). A spec is refused, with one
line naming it, where a dimension is empty (``f32[8,,3]``), negative, not a whole
number, or more than ``2**53``, or where the array's bytes (elements times the element
width of :data:`DTYPE_BYTES`) exceed ``2**53``, the byte range of SPEC section 1: a
larger argument could never become an instance, and JAX or PyTorch would fail on it
with a cut-off message of their own.

Also resolves ``package.module:function`` names to the function.
"""

from __future__ import annotations

import importlib
import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mallocgame.errors import MallocGameError
from mallocgame.instance import MAX_BYTES

__all__ = [
    "ArgSpec",
    "ArgSpecError",
    "parse_spec",
    "parse_arg_spec",
    "resolve_function",
    "DTYPES",
]

DTYPES = {
    "pred": "bool",
    "s8": "int8",
    "s16": "int16",
    "s32": "int32",
    "s64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "f16": "float16",
    "bf16": "bfloat16",
    "f32": "float32",
    "f64": "float64",
}
# Bytes per element of each spec type (the same keys as DTYPES).
DTYPE_BYTES = {
    "pred": 1,
    "s8": 1,
    "s16": 2,
    "s32": 4,
    "s64": 8,
    "u8": 1,
    "u16": 2,
    "u32": 4,
    "u64": 8,
    "f16": 2,
    "bf16": 2,
    "f32": 4,
    "f64": 8,
}
_SPEC = re.compile(r"^\s*([a-z0-9]+)\[([^\[\]]*)\]\s*$")
_WHOLE = re.compile(r"^[0-9]+$")
_NEGATIVE = re.compile(r"^-\s*[0-9]+$")


class ArgSpecError(MallocGameError):
    """A malformed argument spec or a function that cannot be imported."""


@dataclass(frozen=True)
class ArgSpec:
    """One parsed argument spec: ``dtype`` a key of :data:`DTYPES` (``"f32"``), ``dims``
    the dimensions (``()`` for a scalar), each in ``0 .. 2**53``."""

    dtype: str
    dims: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        """Bytes of the array: elements times the element width (at most ``2**53``)."""
        return math.prod(self.dims) * DTYPE_BYTES[self.dtype]


def _bad(spec: str, why: str) -> ArgSpecError:
    return ArgSpecError(f"bad argument spec {spec!r}: {why}")


def parse_spec(spec: str) -> ArgSpec:
    """``"f32[8,64]"`` -> ``ArgSpec("f32", (8, 64))``, checked as the module docstring says.

    Needs neither JAX nor PyTorch; raises :class:`ArgSpecError` naming the spec.
    """
    match = _SPEC.match(spec)
    if not match or match.group(1) not in DTYPES:
        raise _bad(
            spec,
            f"expected DTYPE[D0,D1,...] with DTYPE one of {', '.join(DTYPES)} (e.g. f32[8,64])",
        )
    inside = match.group(2)
    dims: list[int] = []
    for k, piece in enumerate(inside.split(",") if inside.strip() else ()):
        piece = piece.strip()
        if not piece:
            raise _bad(spec, f"dimension {k} is empty (expected DTYPE[D0,D1,...], e.g. f32[8,64])")
        if _NEGATIVE.match(piece):
            raise _bad(spec, f"dimension {k} is negative ({piece})")
        if not _WHOLE.match(piece):
            raise _bad(spec, f"dimension {k} ({piece!r}) is not a whole number")
        dim = int(piece)
        if dim > MAX_BYTES:
            raise _bad(spec, f"dimension {k} ({dim}) is more than 2**53")
        dims.append(dim)
    parsed = ArgSpec(match.group(1), tuple(dims))
    if parsed.nbytes > MAX_BYTES:
        raise _bad(
            spec, f"{parsed.nbytes} bytes, more than 2**53 (the byte range of SPEC section 1)"
        )
    return parsed


def parse_arg_spec(spec: str) -> Any:
    """``"f32[8,64]"`` -> ``jax.ShapeDtypeStruct((8, 64), float32)`` (``"f32[]"`` is a scalar);
    the spec is checked by :func:`parse_spec` before JAX sees it. A 64-bit type (``s64``,
    ``u64``, ``f64``) needs JAX's 64-bit mode (``JAX_ENABLE_X64=1``): without it JAX would
    lower it to 32 bits, half the bytes the spec names, so it is refused instead."""
    parsed = parse_spec(spec)
    import jax
    import jax.numpy as jnp

    if parsed.dtype in ("s64", "u64", "f64") and not jax.config.read("jax_enable_x64"):
        raise _bad(
            spec,
            "JAX lowers 64-bit types to 32 bits unless JAX_ENABLE_X64=1 is set; set it, or give "
            f"the 32-bit type ({parsed.dtype[0]}32)",
        )
    return jax.ShapeDtypeStruct(parsed.dims, jnp.dtype(DTYPES[parsed.dtype]))


def resolve_function(target: str) -> Callable[..., Any]:
    """Import ``package.module:function`` (the current directory is searched too)."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ArgSpecError(f"bad function {target!r}: expected module:function")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ArgSpecError(f"cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    fn: object = module  # the module, then each attribute along the dotted path
    for part in attr.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise ArgSpecError(f"{module_name} has no attribute {attr!r}")
    if not callable(fn):
        raise ArgSpecError(f"{target} is not callable")
    return fn
