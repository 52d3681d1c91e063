"""Frontends: turn real compiled programs into :class:`~mallocgame.program.Program` s.

- :mod:`mallocgame.frontends.xla`: XLA dump directories and JAX functions.
"""

from mallocgame.frontends.xla import (
    AmbiguousModuleError,
    CompileError,
    DumpError,
    UnsupportedHloError,
    XlaFrontendError,
    dump_jax,
    extract_dump,
    extract_jax,
    list_modules,
)

__all__ = [
    "AmbiguousModuleError",
    "CompileError",
    "DumpError",
    "UnsupportedHloError",
    "XlaFrontendError",
    "dump_jax",
    "extract_dump",
    "extract_jax",
    "list_modules",
]
