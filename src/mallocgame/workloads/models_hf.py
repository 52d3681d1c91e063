"""The programs of suite ``hf-v1``: Hugging Face ``transformers`` models as people fine-tune and serve them.

The registry :data:`HF_PROGRAMS` maps a name to a
:class:`~mallocgame.workloads.models_torch.TorchProgram`. Every model is built from
its ``transformers`` configuration class with the published sizes of a checkpoint
(random weights: nothing is downloaded) and captured by the PyTorch frontend with
its defaults: the model's own outputs (``ModelOutput``, the KV cache of a causal LM),
its default attention (SDPA) and, for a training step, its own loss (``labels=``,
``--loss model``) and an AdamW update (:data:`mallocgame.frontends.torch.OPTIMIZERS`).
Inference modules are built on the ``meta`` device (shapes only); a training step's
parameters are uninitialized CPU memory (torch's joint graph needs real ones).
Values are float32, token ids and labels int64.

Needs the optional extra ``hf`` (``pip install 'mallocgame[hf]'``: ``transformers``);
the frozen programs load and play without it. ``mallocgame extract --suite hf-v1``
regenerates them.

Presets: inference and the small models' training steps run on ``dram_pmem`` (the
2 GiB of DRAM before persistent memory); the training steps of the 0.5 B and 1.1 B
language models on ``gpu_hbm_host`` (40 GiB of HBM before host memory: the working
set of a fine-tuning step offloaded to the host). Each batch is chosen for the
program's peak live bytes to exceed its fast memory, and is in its name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import transformers as hf

from mallocgame.frontends.torch import TorchModel, TrainingStep
from mallocgame.workloads.models_torch import TorchProgram

__all__ = ["HF_PROGRAMS", "CONFIGS"]

CONFIGS: dict[str, Callable[[], Any]] = {
    # bert-base-uncased: 12 layers, hidden 768, 12 heads, 110 M parameters.
    "bert_base": lambda: hf.BertConfig(),
    # distilbert-base-uncased: 6 layers, hidden 768, 66 M parameters.
    "distilbert": lambda: hf.DistilBertConfig(),
    # gpt2 (small): 12 layers, hidden 768, 124 M parameters, output layer tied to the embedding.
    "gpt2": lambda: hf.GPT2Config(),
    # TinyLlama-1.1B: the Llama-2 architecture, 22 layers, hidden 2048, 32 heads, 4 KV heads.
    "llama_1b": lambda: hf.LlamaConfig(
        vocab_size=32000,
        hidden_size=2048,
        intermediate_size=5632,
        num_hidden_layers=22,
        num_attention_heads=32,
        num_key_value_heads=4,
        max_position_embeddings=2048,
        rms_norm_eps=1e-5,
    ),
    # Qwen2-0.5B: 24 layers, hidden 896, 14 heads, 2 KV heads, vocabulary 151,936, tied output.
    "qwen2_0_5b": lambda: hf.Qwen2Config(
        vocab_size=151936,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
    ),
    # t5-small: 6 + 6 layers, d_model 512, 8 heads, feed-forward 2048, 60 M parameters.
    "t5_small": lambda: hf.T5Config(),
    # google/vit-base-patch16-224: 12 layers, hidden 768, 16x16 patches of 224x224 images.
    "vit_b16": lambda: hf.ViTConfig(num_labels=1000),
    # openai/whisper-base: encoder of 6 layers, d_model 512, 8 heads, 80 mel bins x 3000 frames.
    "whisper_base": lambda: hf.WhisperConfig(
        d_model=512,
        encoder_layers=6,
        encoder_attention_heads=8,
        decoder_layers=6,
        decoder_attention_heads=8,
        encoder_ffn_dim=2048,
        decoder_ffn_dim=2048,
        num_mel_bins=80,
    ),
}
"""Each model's ``transformers`` configuration at its checkpoint's sizes."""

_STEP = TrainingStep(loss="model", optimizer="adamw")


def _ids(*dims: int, device: str) -> torch.Tensor:
    return torch.zeros(dims, dtype=torch.int64, device=device)


def _infer(
    model_class: Callable[[Any], Any], config: str, inputs: Callable[[str], dict[str, Any]]
) -> Callable[[], TorchModel]:
    """An inference program: the model on the meta device, in eval mode, with keyword inputs."""

    def build() -> TorchModel:
        with torch.device("meta"):
            model = model_class(CONFIGS[config]()).eval()
        return TorchModel(model, (), kwargs=inputs("meta"))

    return build


def _train(
    model_class: Callable[[Any], Any],
    config: str,
    inputs: Callable[[str], dict[str, Any]],
    labels: tuple[int, ...],
) -> Callable[[], TorchModel]:
    """A training step's model: uninitialized CPU parameters, in train mode (dropout on)."""

    def build() -> TorchModel:
        with torch.device("meta"):
            model = model_class(CONFIGS[config]()).train()
        model.to_empty(device="cpu")
        model.tie_weights()  # to_empty gives each name of a tied weight its own tensor
        return TorchModel(model, (), kwargs=inputs("cpu"), labels=_ids(*labels, device="cpu"))

    return build


def _tokens(batch: int, seq: int) -> Callable[[str], dict[str, Any]]:
    return lambda device: {"input_ids": _ids(batch, seq, device=device)}


def _seq2seq(batch: int, seq: int, target: int) -> Callable[[str], dict[str, Any]]:
    return lambda device: {
        "input_ids": _ids(batch, seq, device=device),
        "decoder_input_ids": _ids(batch, target, device=device),
    }


def _images(batch: int) -> Callable[[str], dict[str, Any]]:
    return lambda device: {"pixel_values": torch.zeros(batch, 3, 224, 224, device=device)}


def _audio(batch: int) -> Callable[[str], dict[str, Any]]:
    return lambda device: {"input_features": torch.zeros(batch, 80, 3000, device=device)}


def _encoder(config: Any) -> Any:
    return hf.WhisperModel(config).get_encoder()


def _programs(*programs: TorchProgram) -> dict[str, TorchProgram]:
    return {p.name: p for p in programs}


_DRAM, _GPU = "dram_pmem", "gpu_hbm_host"


def _inference(
    name: str,
    description: str,
    model_class: Callable[[Any], Any],
    config: str,
    inputs: Callable[[str], dict[str, Any]],
    preset: str = _DRAM,
) -> TorchProgram:
    return TorchProgram(name, description, _infer(model_class, config, inputs), preset=preset)


def _training_step(
    name: str,
    description: str,
    model_class: Callable[[Any], Any],
    config: str,
    inputs: Callable[[str], dict[str, Any]],
    labels: tuple[int, ...],
    preset: str = _DRAM,
) -> TorchProgram:
    """The model's own loss, the backward pass and an AdamW update, on CPU parameters."""
    build = _train(model_class, config, inputs, labels)
    return TorchProgram(name, description, build, training_step=_STEP, preset=preset)


HF_PROGRAMS: dict[str, TorchProgram] = _programs(
    _inference(
        "bert_base_infer_b64_s512",
        "BERT-base (BertModel) inference, batch 64, sequence 512",
        hf.BertModel,
        "bert_base",
        _tokens(64, 512),
    ),
    _training_step(
        "bert_base_mlm_train_b8_s512",
        "BERT-base masked-LM (BertForMaskedLM) training step: its loss, backward, AdamW; "
        "batch 8, sequence 512",
        hf.BertForMaskedLM,
        "bert_base",
        _tokens(8, 512),
        (8, 512),
    ),
    _inference(
        "distilbert_infer_b64_s512",
        "DistilBERT (DistilBertModel) inference, batch 64, sequence 512",
        hf.DistilBertModel,
        "distilbert",
        _tokens(64, 512),
    ),
    _training_step(
        "distilbert_cls_train_b32_s512",
        "DistilBERT sequence classification (DistilBertForSequenceClassification, 2 labels) "
        "training step: its loss, backward, AdamW; batch 32, sequence 512",
        hf.DistilBertForSequenceClassification,
        "distilbert",
        _tokens(32, 512),
        (32,),
    ),
    _inference(
        "gpt2_infer_b8_s1024",
        "GPT-2 small (GPT2LMHeadModel) inference with its KV cache, batch 8, sequence 1024",
        hf.GPT2LMHeadModel,
        "gpt2",
        _tokens(8, 1024),
    ),
    _training_step(
        "gpt2_train_b8_s1024",
        "GPT-2 small causal-LM training step: its loss, backward, AdamW; batch 8, sequence 1024",
        hf.GPT2LMHeadModel,
        "gpt2",
        _tokens(8, 1024),
        (8, 1024),
    ),
    _inference(
        "llama_1b_infer_b4_s2048",
        "TinyLlama-1.1B (LlamaForCausalLM) inference with its KV cache, batch 4, sequence 2048",
        hf.LlamaForCausalLM,
        "llama_1b",
        _tokens(4, 2048),
    ),
    _training_step(
        "llama_1b_train_b8_s2048",
        "TinyLlama-1.1B causal-LM training step: its loss, backward, AdamW; batch 8, sequence 2048",
        hf.LlamaForCausalLM,
        "llama_1b",
        _tokens(8, 2048),
        (8, 2048),
        preset=_GPU,
    ),
    _inference(
        "qwen2_0_5b_infer_b4_s2048",
        "Qwen2-0.5B (Qwen2ForCausalLM) inference with its KV cache, batch 4, sequence 2048",
        hf.Qwen2ForCausalLM,
        "qwen2_0_5b",
        _tokens(4, 2048),
    ),
    _training_step(
        "qwen2_0_5b_train_b8_s2048",
        "Qwen2-0.5B causal-LM training step: its loss, backward, AdamW; batch 8, sequence 2048",
        hf.Qwen2ForCausalLM,
        "qwen2_0_5b",
        _tokens(8, 2048),
        (8, 2048),
        preset=_GPU,
    ),
    _inference(
        "t5_small_infer_b64_s512",
        "T5-small (T5ForConditionalGeneration) inference, batch 64, source 512, target 128 tokens",
        hf.T5ForConditionalGeneration,
        "t5_small",
        _seq2seq(64, 512, 128),
    ),
    _training_step(
        "t5_small_train_b32_s512",
        "T5-small training step: its loss, backward, AdamW; batch 32, source 512, target 128",
        hf.T5ForConditionalGeneration,
        "t5_small",
        _seq2seq(32, 512, 128),
        (32, 128),
    ),
    _inference(
        "vit_b16_infer_b512",
        "ViT-B/16 (ViTForImageClassification, 1000 classes) inference, batch 512, 224x224",
        hf.ViTForImageClassification,
        "vit_b16",
        _images(512),
    ),
    _training_step(
        "vit_b16_train_b32",
        "ViT-B/16 image classification training step: its loss, backward, AdamW; batch 32",
        hf.ViTForImageClassification,
        "vit_b16",
        _images(32),
        (32,),
    ),
    _inference(
        "whisper_base_encoder_infer_b16",
        "Whisper-base encoder (WhisperModel's encoder) inference, batch 16, 80 mel bins x 3000 "
        "frames (30 s of audio)",
        _encoder,
        "whisper_base",
        _audio(16),
    ),
)
"""The ``hf-v1`` programs by name."""
