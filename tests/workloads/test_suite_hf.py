"""Suite hf-v1: Hugging Face ``transformers`` models, inference and training steps.

Each frozen program loads without torch or transformers and derives an instance on its
preset's physical fast memory (``dram_pmem`` or ``gpu_hbm_host``), which its peak live
bytes exceed. ``heuristic`` and ``muzero-prod`` answer every program, ``es`` all but the
largest, and ``check`` accepts each answer; each instance's hash is pinned. Budgets:
``muzero-prod`` its cheapest agent, as ``tests/solvers/muzero/test_prod.py`` runs it, in
1.5 s (on the larger programs its candidate is then the greedy game); ``es`` a work
budget of one game, its initial mean policy's, on the programs of fewer than
:data:`ES_BUFFERS` buffers. On the training steps above that (4,776 to 11,028 buffers),
one such game takes 5 to 12 s of the 2-core machine, where the heuristic's mapping
takes 0.5 s, and shows nothing that the 26,915-buffer program of
``tests/solvers/test_suite_answers.py`` does not (that module plays two hf-v1 programs
with ``es``, ``mcts`` and ``exact``). The random game that the other suites' tests play
is left out here for the same cost. With transformers installed, the smallest program
is captured again and must equal its frozen file, and ``tests/frontends/test_torch_hf.py``
captures the models of the issue's table.
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
ES_BUFFERS = 4_000  # es plays the programs below this size (module docstring)
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


# sha256 of each instance: a change of the capture, the frozen files or the cost model that
# changes one is a new version of the suite (hf-v2), not a silent edit of v1.
PINNED_SHA256 = {
    "bert_base_infer_b64_s512": "40b4b4eff47eeb303de0a2394a9b9d9ad8c8de321fb9ee0ef94da4998b8da5ee",
    "bert_base_mlm_train_b8_s512": "f8bc0ac1b49f2ed7c06833ad8980dbe71ac1b1e9fb5339792b9c252418a0a0b7",
    "distilbert_cls_train_b32_s512": "5d252ee5697669aef335ce7748ab5b639106ae6013faaf876fcc5f3ed4318a20",
    "distilbert_infer_b64_s512": "7374eec4303dfc40378c3b4ada62b8ede7aa0545f139aed98894c95f07a30caf",
    "gpt2_infer_b8_s1024": "1d90d9e868d10a2f7c8e3b31e0fd701c3af4a50808aa03575ae4b1de33fdb368",
    "gpt2_train_b8_s1024": "d717b525ec2eb893c2635dde6490139ec35c1f350611246ab1ff071a394a2aa5",
    "llama_1b_infer_b4_s2048": "730b3182fe77f12f3a2e5e4899a53c54bf61f326bcf6e4ffa4f85c5019e2c861",
    "llama_1b_train_b8_s2048": "e4c8c10467267e07cbc2265e682f0957c3ffa5581e1445e5f4aec24df98d4572",
    "qwen2_0_5b_infer_b4_s2048": "59d73982de78061ef866604c1d18192dab62c04b119fa4d697226ce8b13af32f",
    "qwen2_0_5b_train_b8_s2048": "a0def1628e6deef5fc6bb78c725912f808a4015ec75d2290aa0547319908f607",
    "t5_small_infer_b64_s512": "7ab3ceab7b1b4b5e02e82df4f4a089ef001028124c4d442ec08bbc68a834c4ac",
    "t5_small_train_b32_s512": "5f9d294ee32619244ed024794f5ee60ee42c4a07e3533dd04dc1c2e145339de8",
    "vit_b16_infer_b512": "6e24185ea53c1da7c60e94622dfa69a643f48b65a636bdb9256ada4235178523",
    "vit_b16_train_b32": "5b63f61a66ac833d333de6bd18f117f906054d129df488f0dbd361f627b2c748",
    "whisper_base_encoder_infer_b16": "45b60ba26065dce2c8108b9500f90c901f84c4417722d4009029aa969514b960",
}


def test_the_instances_are_pinned_by_their_hashes() -> None:
    found = {n.removeprefix("hf-v1/"): suite_instance(n).sha256 for n in NAMES}
    assert found == PINNED_SHA256


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
        get_solver("muzero-prod").solve(
            inst, SolveRequest(seed=0, work=1, seconds=1.5, options=one_game)
        )
    ]
    if inst.num_buffers < ES_BUFFERS:
        es_request = SolveRequest(seed=0, work=1, options={"population": 2, "workers": 1})
        answers.append(get_solver("es").solve(inst, es_request))
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
