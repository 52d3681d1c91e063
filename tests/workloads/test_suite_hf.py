"""Suite hf-v1: Hugging Face ``transformers`` models, inference and training steps.

Each frozen program loads without torch or transformers and derives an instance on its
preset's physical fast memory (``dram_pmem`` or ``gpu_hbm_host``), which its peak live
bytes exceed. ``heuristic``, ``es`` and ``muzero-prod`` answer every program and
``check`` accepts each answer. Budgets: ``es`` a work budget of one game (its initial
mean policy's: a game on the 0.5 B and 1.1 B training steps, 9,470 and 11,028 buffers
with a fast memory a third of their peak, takes 7 to 21 s on the 2-core machine, where
the heuristic's mapping takes 0.5 s); ``muzero-prod`` its cheapest agent, as
``tests/solvers/muzero/test_prod.py`` runs it. The random game that the other suites'
tests play is left out here for that cost (``tests/solvers/test_suite_answers.py`` plays
two hf-v1 programs with ``es``, ``mcts`` and ``exact``). With transformers installed,
the smallest program is captured again and must equal its frozen file, and
``tests/frontends/test_torch_hf.py`` captures the models of the issue's table.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from mallocgame.check import check_solution
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads.registry import workload_names
from mallocgame.workloads.suite import (
    freeze,
    program_path,
    suite_instance,
    suite_names,
    suite_program,
)
from tests.solvers.muzero.test_prod import ONE_GAME
from tests.workloads.suite_checks import assert_plays_on_its_physical_memory

NAMES = suite_names("hf-v1")
MODELS = (
    "bert_base",
    "distilbert",
    "gpt2",
    "llama_1b",
    "qwen2_0_5b",
    "t5_small",
    "vit_b16",
    "whisper_base",
)


def test_the_suite_has_its_models_for_inference_and_training() -> None:
    short = [n.removeprefix("hf-v1/") for n in NAMES]
    assert len(short) == 15 and set(NAMES) <= set(workload_names())
    for model in MODELS:
        assert any(s.startswith(model) and "_infer" in s for s in short), model
        if model != "whisper_base":  # its encoder: inference only
            assert any(s.startswith(model) and "_train" in s for s in short), model
    for name in NAMES:
        source = suite_program(name).source
        assert source["frontend"] == "torch" and source["module"]
        if "_train" in name:  # the model's own loss, backward, an AdamW update
            assert source["mode"] == "training_step"
            assert (source["loss"], source["optimizer"]) == ("model", "adamw")
        else:
            assert source["mode"] == "eval"


@pytest.mark.parametrize("name", NAMES, ids=[n.split("/", 1)[1] for n in NAMES])
def test_program_binds_its_fast_memory_and_every_solver_answers(name: str) -> None:
    inst, _ = assert_plays_on_its_physical_memory(name, "torch", solver="heuristic")
    big = "_train" in name and ("llama" in name or "qwen" in name)
    assert inst.hardware.name == ("gpu_hbm_host" if big else "dram_pmem")
    one_game = {**ONE_GAME, "order_search_share": 0}
    answers = [
        get_solver("es").solve(
            inst, SolveRequest(seed=0, work=1, options={"population": 2, "workers": 1})
        ),
        get_solver("muzero-prod").solve(
            inst, SolveRequest(seed=0, work=1, seconds=3.0, options=one_game)
        ),
    ]
    for answer in answers:
        report = check_solution(inst, answer)
        assert report.ok, f"{answer.solver}: {report.summary()}"


def test_the_language_models_keep_their_cache_and_tie_their_weights() -> None:
    gpt2 = suite_program("hf-v1/gpt2_infer_b8_s1024")
    notes = gpt2.source["notes"]
    assert "DynamicCache" in notes and "lm_head.weight is transformer.wte.weight" in notes
    keys = [x for x in gpt2.tensors if x.live_out and x.size == 8 * 12 * 1024 * 64 * 4]
    assert len(keys) == 2 * 12  # every layer's keys and values are outputs
    llama = suite_program("hf-v1/llama_1b_train_b8_s2048")
    updates = [i for i in llama.instructions if i.opcode == "adamw_update"]
    assert len(updates) == 3 + 22 * 9  # embedding, final norm, output; 9 tensors a layer
    params = sum(llama.tensors[i.operands[0]].size for i in updates) // 4
    assert 1.09e9 < params < 1.11e9  # TinyLlama's 1.1 B parameters


def test_a_frozen_program_is_what_capturing_its_model_gives(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    name = "hf-v1/distilbert_infer_b64_s512"
    freeze([name], out_dir=tmp_path, suite="hf-v1")
    fresh, bundled = (
        json.loads(gzip.decompress(p.read_bytes()))
        for p in (tmp_path / program_path(name).name, program_path(name))
    )
    for doc in (fresh, bundled):
        doc["source"].pop("extract_seconds")
        doc["source"].pop("torch")
    assert fresh == bundled
    suite_instance.cache_clear()
