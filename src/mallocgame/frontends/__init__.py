"""Frontends: turn real compiled programs into :class:`~mallocgame.program.Program` s.

- :mod:`mallocgame.frontends.xla`: XLA dump directories (CPU, GPU and TPU backends) and
  JAX functions.
- :mod:`mallocgame.frontends.xla_placement`: XLA's own memory-space assignment in a GPU
  or TPU module, as the solution ``xla``.
- :mod:`mallocgame.frontends.torch`: PyTorch modules through ``torch.export`` (the
  ``torch`` extra; imported on its own, so this package needs no torch).
"""

from mallocgame.frontends.xla import (
    AmbiguousModuleError,
    CompileError,
    DumpError,
    UnsupportedHloError,
    XlaFrontendError,
    dump_jax,
    extract_dump,
    extract_dump_with_placement,
    extract_jax,
    list_modules,
)
from mallocgame.frontends.xla_placement import PlacementError, XlaPlacement, placement_solution

__all__ = [
    "AmbiguousModuleError",
    "CompileError",
    "DumpError",
    "UnsupportedHloError",
    "XlaFrontendError",
    "PlacementError",
    "XlaPlacement",
    "dump_jax",
    "extract_dump",
    "extract_dump_with_placement",
    "extract_jax",
    "list_modules",
    "placement_solution",
]
