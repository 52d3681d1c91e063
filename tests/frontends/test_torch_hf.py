"""The PyTorch frontend on Hugging Face ``transformers`` models, as a new user brings them.

The models of the issue that asked for this (each built from its configuration class
with its defaults), captured with their defaults: ``BertModel``, ``GPT2LMHeadModel``
with and without its cache, ``LlamaForCausalLM`` with and without its cache. BERT and
Llama are built on the ``meta`` device (shapes only); GPT-2 on the CPU, as a user's
factory builds it: so built, its core ATen decomposition fails in torch 2.13 (a
``view`` after SDPA's decomposition; on the meta device it does not), and its program
is the undecomposed ATen graph, which says so. A causal LM's training step with a
named loss (``cross-entropy`` against labels) and an AdamW update plays a game that
``check`` accepts. Small inputs (a batch of 2 of
64 tokens) keep the captures to a few seconds each; the graph is the same at any size.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
hf = pytest.importorskip("transformers")

from mallocgame.check import check_solution  # noqa: E402
from mallocgame.costmodel import derive_instance  # noqa: E402
from mallocgame.frontends.torch import TrainingStep, extract_torch  # noqa: E402
from mallocgame.solvers import SolveRequest, get_solver  # noqa: E402

LLAMA = {
    "hidden_size": 1024,
    "intermediate_size": 2816,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
}


def _built(build, device: str):
    with torch.device(device):
        return build().eval()


def _ids(device: str = "meta"):
    return torch.zeros(2, 64, dtype=torch.int64, device=device)


@pytest.mark.parametrize(
    ("label", "build", "cached"),
    [
        ("bert", lambda: hf.BertModel(hf.BertConfig()), False),
        ("gpt2", lambda: hf.GPT2LMHeadModel(hf.GPT2Config()), True),
        ("gpt2_nocache", lambda: hf.GPT2LMHeadModel(hf.GPT2Config(use_cache=False)), False),
        ("llama", lambda: hf.LlamaForCausalLM(hf.LlamaConfig(**LLAMA)), True),
        (
            "llama_nocache",
            lambda: hf.LlamaForCausalLM(hf.LlamaConfig(**LLAMA, use_cache=False)),
            False,
        ),
    ],
)
def test_the_models_users_bring_extract_with_their_defaults(label, build, cached) -> None:
    device = "cpu" if label.startswith("gpt2") else "meta"
    program = extract_torch(_built(build, device), (_ids(device),), name=label)
    notes = program.source["notes"]
    assert "outputs read for their tensors" in notes
    assert ("DynamicCache" in notes) == cached
    if cached:  # each layer's new keys and values are outputs
        layers = 12 if label.startswith("gpt2") else 8
        cache = [x for x in program.tensors if x.live_out and x.def_time >= 0]
        assert len(cache) == 1 + 2 * layers  # the logits, and the cache
    if label.startswith("gpt2"):
        assert program.source["capture"] == "aten"
        assert "core ATen decomposition failed (ValueError: Cannot view" in notes
        assert "lm_head.weight is transformer.wte.weight" in notes
        assert "scaled_dot_product_attention" in {i.opcode for i in program.instructions}
    else:
        assert "capture" not in program.source
    # the matmuls' flops: 2 x tokens x the weights they multiply, whichever graph
    assert sum(i.flops for i in program.instructions) > 2 * 128 * 85e6


def test_a_causal_lm_training_step_with_a_named_loss_plays_under_check() -> None:
    config = hf.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=500, n_positions=64)
    model = hf.GPT2LMHeadModel(config).train()  # tied weights, cache on by default
    step = TrainingStep(loss="cross-entropy", optimizer="adamw")
    program = extract_torch(model, (_ids("cpu"),), training_step=step, labels=_ids("cpu"))
    assert program.source["mode"] == "training_step" and program.source["optimizer"] == "adamw"
    updates = [i for i in program.instructions if i.opcode == "adamw_update"]
    assert len(updates) == len(list(model.parameters()))  # the tied weight once
    inst = derive_instance(program, "gpu_hbm_host", capacity_fraction=0.3)
    for solver in ("heuristic", "random"):
        answer = get_solver(solver).solve(inst, SolveRequest(seed=0))
        report = check_solution(inst, answer)
        assert report.ok, report.summary()
