"""Frozen modules of the real TPU compiler (libtpu) for the frontend's tests.

``python -m tests.frontends.libtpu_fixtures`` compiles :func:`mlp_grad` for every TPU
target and ``gru_infer_b512`` of ``xla-v2`` (sliced prefetches, a counted loop) for
``tpu-v5e``, and writes their scheduled modules to ``data/libtpu/`` (no TPU needed).
"""

from __future__ import annotations

import os
from pathlib import Path

import jax
import jax.numpy as jnp

DATA = Path(__file__).parent / "data" / "libtpu"
MLP_ARGS = ("f32[512,1024]", "f32[1024,512]", "f32[256,512]")


def mlp_grad(w1: jax.Array, w2: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The gradient of a two-layer tanh MLP's squared output: a small training step."""

    def loss(w1: jax.Array, w2: jax.Array) -> jax.Array:
        return jnp.sum(jnp.tanh(jnp.tanh(x @ w1) @ w2) ** 2)

    return jax.grad(loss, argnums=(0, 1))(w1, w2)


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
    print(f"wrote {len(os.listdir(DATA))} modules to {DATA}")


if __name__ == "__main__":
    main()
