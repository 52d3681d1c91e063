"""Frozen modules of the real TPU compiler (libtpu) for the frontend's tests.

``python -m tests.frontends.libtpu_fixtures`` compiles :func:`mlp_grad` for every TPU
target, ``gru_infer_b512`` of ``xla-v2`` (sliced prefetches, a counted loop) for
``tpu-v5e`` and :func:`segment_sum` for ``tpu-v5p`` (a scatter offloaded to the
SparseCore: ``call-start`` / ``call-done``), and writes their scheduled modules to
``data/libtpu/`` (no TPU needed). :func:`three_layers` (a sliced prefetch) for ``tpu-v5e``
is written twice: the compiled module's text, and the module of the dump the same compile
writes (``xla_dump_to``), which spells the sliced prefetch ``async-start`` /
``async-done`` around a ``slice`` computation (:data:`SLICED_DUMP`, its source-file
tables cut). :func:`loop_over_input` for ``tpu-v5e``: a loop started from an asynchronous
copy of a value read again after it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

DATA = Path(__file__).parent / "data" / "libtpu"
MLP_ARGS = ("f32[512,1024]", "f32[1024,512]", "f32[256,512]")
SEGMENT_SUM_ARGS = ("s32[65536]", "f32[65536]")
SLICED_ARGS = ("f32[512,1024]", "f32[1024,1024]", "f32[1024,1024]")
SLICED_DUMP = DATA / "three_layers.tpu-v5e.dump"
_TABLES = re.compile(r"^(?:FileNames|FunctionNames|FileLocations|StackFrames)\n(?:.+\n)*\n", re.M)


def mlp_grad(w1: jax.Array, w2: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The gradient of a two-layer tanh MLP's squared output: a small training step."""

    def loss(w1: jax.Array, w2: jax.Array) -> jax.Array:
        return jnp.sum(jnp.tanh(jnp.tanh(x @ w1) @ w2) ** 2)

    return jax.grad(loss, argnums=(0, 1))(w1, w2)


def three_layers(a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
    """Three tanh layers and a sum: on v5e, libtpu prefetches ``b`` in four slices."""
    x = jnp.tanh(a @ b)
    y = jnp.tanh(x @ c)
    z = jnp.tanh(y @ b.T)
    return (z @ c).sum()


def write_sliced_prefetch() -> None:
    """:func:`three_layers` for ``tpu-v5e``: the compiled module's text, and the dump's
    module (its source-file tables cut) in :data:`SLICED_DUMP`."""
    import shutil
    import tempfile

    from mallocgame.frontends.argspec import parse_arg_spec
    from mallocgame.frontends.tpu import compile_for_tpu

    args = [parse_arg_spec(a) for a in SLICED_ARGS]
    with tempfile.TemporaryDirectory() as dump:
        options = {"xla_dump_to": dump}
        text = compile_for_tpu(three_layers, *args, target="tpu-v5e", compiler_options=options)
        (module,) = Path(dump).glob("module_*.after_optimizations.txt")
        shutil.rmtree(SLICED_DUMP, ignore_errors=True)
        SLICED_DUMP.mkdir(parents=True)
        (SLICED_DUMP / module.name).write_text(_TABLES.sub("", module.read_text()))
    (DATA / "three_layers.tpu-v5e.txt").write_text(text)


LOOP_ARGS = ("f32[256,256]", "f32[256,256]")


def loop_over_input(x: jax.Array, w: jax.Array) -> jax.Array:
    """Seven tanh layers in a loop started from ``x``, then ``x`` read again: libtpu starts
    the loop from an asynchronous copy of ``x`` (``copy-start`` / ``copy-done``) and
    copies it again for the read after the loop."""
    y = jax.lax.fori_loop(0, 7, lambda i, c: jnp.tanh(c @ w), x)
    return y * 3 + x


def segment_sum(ids: jax.Array, values: jax.Array) -> jax.Array:
    """The sums of ``values`` over 64 segments (``ids``): a scatter-add."""
    return jax.ops.segment_sum(values, ids, num_segments=64)


def vmem_hog(mib: int) -> Callable[[jax.Array], jax.Array]:
    """A Pallas TPU kernel of ``[8, 128] f32 -> [8, 128] f32`` that asks for a ``mib`` MiB
    scratch buffer in VMEM: compiled for a TPU with less, libtpu names its VMEM size."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_ref: Any, o_ref: Any, scratch: Any) -> None:
        scratch[...] = jnp.zeros_like(scratch)
        o_ref[...] = x_ref[...] + scratch[0:8, :]

    rows = mib * 2**20 // (128 * 4)
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        scratch_shapes=[pltpu.VMEM((rows, 128), jnp.float32)],
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=(mib + 8) * 2**20),
    )


def main() -> None:
    from mallocgame.frontends.argspec import parse_arg_spec
    from mallocgame.frontends.tpu import TPU_TARGETS, compile_for_tpu
    from mallocgame.workloads.suite import model_programs

    DATA.mkdir(parents=True, exist_ok=True)
    args = [parse_arg_spec(a) for a in MLP_ARGS]
    for target in TPU_TARGETS:
        text = compile_for_tpu(mlp_grad, *args, target=target)
        (DATA / f"mlp_grad.{target}.txt").write_text(text)
    fn, example, jit_kwargs = model_programs("xla-v2")["gru_infer_b512"].build()
    text = compile_for_tpu(fn, *example, target="tpu-v5e", **jit_kwargs)
    (DATA / "gru_infer_b512.tpu-v5e.txt").write_text(text)
    args = [parse_arg_spec(a) for a in SEGMENT_SUM_ARGS]
    text = compile_for_tpu(segment_sum, *args, target="tpu-v5p")
    (DATA / "segment_sum.tpu-v5p.txt").write_text(text)
    write_sliced_prefetch()
    args = [parse_arg_spec(a) for a in LOOP_ARGS]
    text = compile_for_tpu(loop_over_input, *args, target="tpu-v5e")
    (DATA / "loop_over_input.tpu-v5e.txt").write_text(text)
    print(f"wrote {len(os.listdir(DATA))} modules to {DATA}")


if __name__ == "__main__":
    main()
