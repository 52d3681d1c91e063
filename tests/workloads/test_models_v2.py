"""The model programs of suite xla-v2: the Llama-style decoder computes what it should, and
a frozen program is what compiling its model gives again."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flax")

import jax
import jax.numpy as jnp

from mallocgame.workloads import models_v2
from mallocgame.workloads.suite import freeze, program_path

TINY = models_v2.LlamaConfig("tiny", vocab=64, d_model=32, layers=2, heads=4, kv_heads=2, ffn=48)


@pytest.fixture(autouse=True)
def _float32(monkeypatch):
    """Run the decoder in float32: XLA's CPU runtime has no bf16 x bf16 -> f32 dot to execute
    (compiling one, which is all the suite does, works); the arithmetic tested is the same."""
    monkeypatch.setattr(models_v2, "BF16", jnp.float32)


def test_the_kv_cache_path_matches_full_causal_attention() -> None:
    """A decode step at position p over a cache filled with the keys and values of positions
    0..p-1 gives what full causal attention over 0..p gives at its last position."""
    params = models_v2._llama_params(TINY, concrete=True)
    w = params["layers"][0]
    rng = np.random.default_rng(1)
    b, p, max_len = 2, 5, 8
    x = jnp.asarray(rng.standard_normal((b, p + 1, TINY.d_model)), models_v2.BF16)
    positions = jnp.broadcast_to(jnp.arange(p + 1), (b, p + 1))
    full, (k_all, v_all) = models_v2._llama_layer(TINY, w, x, positions, None, None, None)

    cache_shape = (b, TINY.kv_heads, max_len, TINY.head_dim)
    k_cache = jnp.zeros(cache_shape, models_v2.BF16).at[:, :, :p].set(k_all[:, :, :p])
    v_cache = jnp.zeros(cache_shape, models_v2.BF16).at[:, :, :p].set(v_all[:, :, :p])
    step, (k_new, _) = models_v2._llama_layer(
        TINY, w, x[:, p:], positions[:, p:], k_cache, v_cache, jnp.int32(p)
    )
    np.testing.assert_allclose(np.asarray(step[:, 0]), np.asarray(full[:, p]), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(
        np.asarray(k_new[:, :, p], np.float32), np.asarray(k_all[:, :, p], np.float32)
    )
    assert not np.asarray(k_new[:, :, p + 1 :], np.float32).any()  # later positions untouched


def test_decode_and_generate_run_and_update_the_caches_in_place() -> None:
    decode, args, kwargs = models_v2._llama_decode_step(TINY, 2, 8, concrete=True)
    assert kwargs == {"donate_argnums": (1,)}
    tokens, caches = jax.jit(decode)(*args)
    assert tokens.shape == (2,) and tokens.dtype == jnp.int32 and len(caches) == TINY.layers
    generate, args, _ = models_v2._llama_generate(TINY, 2, 8, 3, concrete=True)
    out, caches = jax.jit(generate)(*args)
    assert out.shape == (3, 2)
    assert np.asarray(caches[0][0][:, :, 5:], np.float32).any()  # positions 5, 6, 7 written


def test_a_frozen_program_is_what_compiling_its_model_gives(tmp_path: Path) -> None:
    name = "xla-v2/gru_infer_b512"
    freeze([name], out_dir=tmp_path, suite="xla-v2")
    fresh, bundled = (
        json.loads(gzip.decompress(p.read_bytes()))
        for p in (tmp_path / program_path(name).name, program_path(name))
    )
    for doc in (fresh, bundled):
        for volatile in ("extract_seconds", "dump_module"):
            doc["source"].pop(volatile, None)
    assert fresh == bundled
