"""Suite holdout-v1: held-out programs, on the physical fast memory of their preset.

Every model program is frozen; each frozen program loads, derives an instance on its own
preset's fast memory (which its peak live bytes exceed) and plays a random game that
``check`` accepts; the heuristic's answer on each passes ``check``. The answers of ``es``,
``mcts`` and ``exact`` are checked on every program in ``tests/solvers/test_suite_answers.py``.
"""

from __future__ import annotations

import pytest

from mallocgame.check import check_solution
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads.registry import workload_names
from mallocgame.workloads.suite import (
    SUITES,
    suite_instance,
    suite_names,
    suite_preset,
    suite_program,
)
from tests.workloads.suite_checks import assert_plays_on_its_physical_memory

NAMES = suite_names("holdout-v1")
IDS = [n.split("/", 1)[1] for n in NAMES]
GIB = 1 << 30


def test_the_suite_is_registered_as_held_out() -> None:
    suite = SUITES["holdout-v1"]
    assert "held out" in suite.description and "never used to choose a default" in suite.description
    assert suite.capacity_fraction is None  # each preset's physical fast memory
    assert len(NAMES) >= 8
    assert set(NAMES) <= set(workload_names())
    assert {suite_preset(n) for n in NAMES} >= {"tpu_v4i", "gpu_hbm_host", "dram_pmem"}
    sizes = [suite_program(n).num_buffers for n in NAMES]
    assert min(sizes) >= 100 and max(sizes) <= 5_000  # small enough for the suite-wide tests


def test_no_program_is_in_another_suite() -> None:
    others = {n.split("/", 1)[1] for s in SUITES if s != "holdout-v1" for n in suite_names(s)}
    assert not others & set(IDS)


@pytest.mark.parametrize("name", NAMES, ids=IDS)
def test_program_derives_on_its_physical_memory_and_plays(name: str) -> None:
    inst, peak = assert_plays_on_its_physical_memory(name, "xla")
    if inst.hardware.name == "tpu_v4i":
        assert peak <= 8 * GIB  # sized to run on one TPU v4i


@pytest.mark.parametrize("name", NAMES, ids=IDS)
def test_heuristic_answer_passes_check(name: str) -> None:
    inst = suite_instance(name)
    solution = get_solver("heuristic").solve(inst, SolveRequest(seed=0))
    report = check_solution(inst, solution)
    assert report.ok, report.summary()
    assert solution.normalized_reward > 0


def test_every_model_program_is_frozen() -> None:
    pytest.importorskip("flax")
    from mallocgame.workloads.models_holdout import HOLDOUT_PROGRAMS

    assert {f"holdout-v1/{name}" for name in HOLDOUT_PROGRAMS} == set(NAMES)
    for name, model in HOLDOUT_PROGRAMS.items():
        program = suite_program(f"holdout-v1/{name}")
        assert program.source["model"] == model.description
        assert program.source["suite"] == "holdout-v1"
        assert suite_preset(f"holdout-v1/{name}") == (model.preset or SUITES["holdout-v1"].preset)
        assert bool(program.loops) == model.loops


def test_code_llama_parameter_count_matches_the_published_size() -> None:
    pytest.importorskip("flax")
    from mallocgame.workloads.models_holdout import CODELLAMA_34B

    assert 33.5e9 < CODELLAMA_34B.num_params < 34.0e9  # "34B": 33.7 billion


def test_the_offloading_program_weights_exceed_the_gpu() -> None:
    inst = suite_instance("holdout-v1/codellama34b_score_512")
    inputs = sum(x.size for x in inst.tensors if x.def_time < 0)
    assert inputs > inst.hardware.fast_memory_bytes  # the weights alone do not fit the GPU


def test_moe_dispatch_respects_top2_and_capacity() -> None:
    pytest.importorskip("flax")
    import jax
    import numpy as np

    from mallocgame.workloads.models_holdout import top2_dispatch

    gates = np.random.default_rng(0).dirichlet(np.ones(4), 32).astype(np.float32)  # [T 32, E 4]
    top_gates, top_idx = jax.lax.top_k(gates, 2)
    dispatch, combine = (
        np.asarray(a)
        for a in jax.jit(top2_dispatch, static_argnums=(2, 3))(top_gates, top_idx, 4, 8)
    )
    assert dispatch.shape == combine.shape == (32, 4, 8)
    assert dispatch.sum(axis=(1, 2)).max() <= 2  # a token goes to at most its two experts
    assert dispatch.sum(axis=0).max() <= 1  # a slot holds at most one token
    top2 = np.argsort(-gates, axis=1)[:, :2]
    for token in range(32):
        used = set(np.nonzero(dispatch[token].sum(axis=1))[0])
        assert used <= set(top2[token])  # only its two highest gates
        for expert in used:
            gate = combine[token, expert].sum()
            np.testing.assert_allclose(gate, gates[token, expert], rtol=1e-6)
    # experts fill in token order up to their capacity: 64 choices into 4 x 8 slots
    choices = np.bincount(top2.ravel(), minlength=4)
    np.testing.assert_array_equal(dispatch.sum(axis=(0, 2)), np.minimum(choices, 8))
    first = dispatch[0].sum(axis=1)
    assert first[top2[0, 0]] == 1  # the first token's first choice always has a slot


@pytest.mark.parametrize("model_name", ["ScannedDecoderLM", "MambaLM"])
def test_language_models_are_causal(model_name: str) -> None:
    pytest.importorskip("flax")
    import jax
    import numpy as np

    from mallocgame.workloads import models_holdout

    if model_name == "ScannedDecoderLM":
        model = models_holdout.ScannedDecoderLM(
            vocab=50, d_model=16, num_heads=2, num_layers=2, d_ff=32, max_len=12
        )
    else:
        model = models_holdout.MambaLM(vocab=50, d_model=16, num_layers=2)
    tokens = np.arange(12, dtype=np.int32)[None]
    params = jax.jit(model.init)(jax.random.PRNGKey(0), tokens)
    changed = tokens.copy()
    changed[0, 7] = 49
    apply = jax.jit(model.apply)
    before, after = np.asarray(apply(params, tokens)), np.asarray(apply(params, changed))
    assert before.shape == (1, 12, 50)
    np.testing.assert_allclose(before[:, :7], after[:, :7], rtol=1e-5, atol=1e-5)  # past untouched
    assert not np.allclose(before[:, 7:], after[:, 7:])  # the changed token is read
