"""TPU targets: a JAX function compiled by the real TPU compiler, without a TPU.

``libtpu`` (``pip install 'jax[tpu]==<the installed jax>'``, the ``tpu`` extra) holds
XLA's TPU backend, memory-space assignment (MSA) included. JAX's ahead-of-time
topologies (:func:`jax.experimental.topologies.get_topology_desc`) give devices of a TPU
generation on a machine that has none, and ``jax.jit(...).lower(...).compile()`` for
such a device runs the whole TPU pipeline and returns the scheduled module, XLA's own
placement in it (:mod:`mallocgame.frontends.xla_placement`).

Targets (:data:`TPU_TARGETS`): ``tpu-v4``, ``tpu-v5e``, ``tpu-v5p``, ``tpu-v6e``, each
compiled for one chip of the smallest slice of its generation. ``fast_spaces`` is the
memory space a target's MSA places values in, read from what libtpu writes (jax 0.10.2,
libtpu 0.0.42.1): on v4 its prefetches (``copy-start``, cross-program prefetches) copy into
``S(3)``, which exists only while ``xla_tpu_cmem_memory_space_assignment`` is on (its
default): the v4's CMEM; on v5e, v5p and v6e into ``S(1)``, which the compiler's
memory-usage report names ``vmem``; ``S(2)`` (``smem``) holds only the ``u32[]`` sync flags
of asynchronous copies. ``tests/frontends/test_tpu.py`` re-derives this from compiles.

Each target's ``preset`` (:mod:`mallocgame.hardware`) has the fast memory the compiler
states for it: the VMEM size libtpu names when a kernel asks for more (v5e, v6e: 128 MiB;
v5p: 64 MiB), and on v4 the CMEM limit it names when its memory-space assignment is
offered more (64 MiB).

Errors: an unknown target, libtpu missing (:class:`TpuUnavailableError`, the line saying
how to install it) and a function that does not compile for the target
(:class:`~mallocgame.frontends.xla.CompileError`) are one line each.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from mallocgame.errors import MallocGameError
from mallocgame.frontends.xla import (
    CompileError,
    XlaFrontendError,
    extract_module_with_placement,
    no_persistent_cache,
)
from mallocgame.frontends.xla_placement import DEFAULT_FAST_SPACES, XlaPlacement
from mallocgame.program import Program

__all__ = [
    "TPU_TARGETS",
    "TpuTarget",
    "TpuUnavailableError",
    "tpu_target",
    "fast_spaces_of",
    "compile_for_tpu",
    "extract_jax_tpu",
]


@dataclass(frozen=True)
class TpuTarget:
    """One TPU generation: ``topology`` as :func:`get_topology_desc` names it, the memory
    spaces its MSA uses as the fast memory (module docstring)."""

    name: str
    topology: str
    fast_spaces: frozenset[int]
    fast_memory: str  # what the fast space is on the chip
    preset: str  # the hardware preset of the generation (mallocgame.hardware)


TPU_TARGETS: Mapping[str, TpuTarget] = {
    t.name: t
    for t in (
        TpuTarget("tpu-v4", "v4:2x2x1", frozenset({3}), "CMEM", "tpu_v4"),
        TpuTarget("tpu-v5e", "v5e:2x2", frozenset({1}), "VMEM", "tpu_v5e"),
        TpuTarget("tpu-v5p", "v5p:2x2x1", frozenset({1}), "VMEM", "tpu_v5p"),
        TpuTarget("tpu-v6e", "v6e:2x2", frozenset({1}), "VMEM", "tpu_v6e"),
    )
}
"""The TPU generations a function can be compiled for, by ``--target`` name."""

_QUIET_START = {
    "TPU_SKIP_MDS_QUERY": "1",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "TPU_WORKER_ID": "0",
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
}
"""libtpu's start-up without a TPU: no metadata-server query, a single local worker, and
no lock file (several processes may compile at once: there is no chip to share)."""


class TpuUnavailableError(XlaFrontendError):
    """libtpu is not installed, or cannot give a device of the target."""


def tpu_target(name: str) -> TpuTarget:
    """The target named ``name`` (one of :data:`TPU_TARGETS`); anything else, a name not
    among them or not a string at all (a list, ``None``), raises :class:`XlaFrontendError`."""
    if isinstance(name, str) and name in TPU_TARGETS:  # first: a list is unhashable
        return TPU_TARGETS[name]
    shown = f"'{name}'" if isinstance(name, str) else f"{name!r} (a {type(name).__name__})"
    raise XlaFrontendError(
        f"unknown TPU target {shown} (have: {', '.join(TPU_TARGETS)}; for the CPU, extract_jax)"
    )


def fast_spaces_of(target: object) -> frozenset[int]:
    """The memory spaces XLA's placement uses as the fast memory on ``target`` (a name of
    :data:`TPU_TARGETS`); anything else (a CPU or GPU module, no target recorded): the
    alternate memory space 1 (:data:`~mallocgame.frontends.xla_placement.DEFAULT_FAST_SPACES`)."""
    if isinstance(target, str) and target in TPU_TARGETS:  # first: a list is unhashable
        return TPU_TARGETS[target].fast_spaces
    return DEFAULT_FAST_SPACES


@contextlib.contextmanager
def _stderr_held() -> Iterator[None]:
    """Hold back what libtpu's C++ start-up writes to file descriptor 2 (warnings about the
    accelerator type of a host that has none)."""
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        try:
            os.dup2(sink.fileno(), 2)
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


@cache
def _device(name: str) -> Any:
    """A device of target ``name`` (libtpu's ahead-of-time topology; made once a process)."""
    target = tpu_target(name)
    if importlib.util.find_spec("libtpu") is None:
        from importlib.metadata import version

        raise TpuUnavailableError(
            f"compiling for {name} needs libtpu: pip install 'jax[tpu]=={version('jax')}' "
            "(or the project's tpu extra, which make setup installs)"
        )
    for key, value in _QUIET_START.items():
        os.environ.setdefault(key, value)
    from jax.experimental import topologies

    try:
        with _stderr_held():
            topology = topologies.get_topology_desc(topology_name=target.topology, platform="tpu")
    except Exception as exc:
        raise TpuUnavailableError(
            f"libtpu gave no {name} device ({type(exc).__name__}: {_first_line(exc)})"
        ) from None
    return topology.devices[0]


def _first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else ""


def _abstract_args(args: Sequence[Any], static: set[int]) -> list[Any]:
    """Every array leaf of the non-static arguments as a ``jax.ShapeDtypeStruct``: the
    compile needs shapes only, and an array committed to the CPU cannot go to a TPU."""
    import jax

    def leaf(x: Any) -> Any:
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return jax.ShapeDtypeStruct(x.shape, x.dtype)
        return x

    return [a if i in static else jax.tree.map(leaf, a) for i, a in enumerate(args)]


def compile_for_tpu(
    fn: Callable[..., Any],
    *example_args: Any,
    target: str,
    name: str | None = None,
    donate_argnums: int | Sequence[int] = (),
    static_argnums: int | Sequence[int] = (),
    compiler_options: Mapping[str, Any] | None = None,
) -> str:
    """The scheduled HLO module (text) of ``fn`` compiled by libtpu for ``target``.

    ``example_args`` as for :func:`~mallocgame.frontends.xla.extract_jax` (only their
    shapes and dtypes are used); ``compiler_options`` are passed to XLA as they are
    (libtpu's flags, e.g. its MSA settings). Raises :class:`XlaFrontendError` for a
    ``target`` not named in :data:`TPU_TARGETS` (a string that is none of them, or not a
    string), :class:`TpuUnavailableError` or :class:`~mallocgame.frontends.xla.CompileError`.
    """
    import jax
    from jax.sharding import SingleDeviceSharding

    tpu_target(target)  # first: _device is cached, and a list (unhashable) fails its cache
    device = _device(target)
    label = name or getattr(fn, "__name__", "function")
    static = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums)
    try:
        with no_persistent_cache(jax):  # a cache hit would compile nothing anew
            jitted = jax.jit(
                fn,
                in_shardings=SingleDeviceSharding(device),
                donate_argnums=donate_argnums,
                static_argnums=tuple(sorted(static)),
            )
            lowered = jitted.lower(*_abstract_args(example_args, static))
            compiled = lowered.compile(compiler_options=dict(compiler_options or {}))
            return str(compiled.as_text())
    except MallocGameError:
        raise
    except Exception as exc:
        raise CompileError(
            f"{label}: JAX could not compile it for {target}: "
            f"{type(exc).__name__}: {_first_line(exc)}"
        ) from None


def extract_jax_tpu(
    fn: Callable[..., Any],
    *example_args: Any,
    target: str,
    name: str | None = None,
    donate_argnums: int | Sequence[int] = (),
    static_argnums: int | Sequence[int] = (),
    partial_bytes: bool = False,
    compiler_options: Mapping[str, Any] | None = None,
) -> tuple[Program, XlaPlacement]:
    """The program of ``fn`` compiled for ``target`` (:func:`compile_for_tpu`), and XLA's own
    placement in it (read with the target's ``fast_spaces`` by
    :func:`~mallocgame.frontends.xla_placement.placement_solution`)."""
    text = compile_for_tpu(
        fn,
        *example_args,
        target=target,
        name=name,
        donate_argnums=donate_argnums,
        static_argnums=static_argnums,
        compiler_options=compiler_options,
    )
    return extract_module_with_placement(
        text,
        name=name,
        partial_bytes=partial_bytes,
        source={"target": target},
        where=f"{name or getattr(fn, '__name__', 'function')} compiled for {target}",
    )
