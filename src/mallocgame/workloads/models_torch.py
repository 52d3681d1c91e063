"""The programs of suite ``torch-v1``: the MARL paper's workloads, captured by the PyTorch frontend.

The registry :data:`TORCH_PROGRAMS` maps a name to a :class:`TorchProgram`. The
models are written here in plain ``torch.nn`` in their published configurations
(torchvision is not used; nothing is downloaded), built on the ``meta`` device (no
memory: shapes only) and captured by :func:`mallocgame.frontends.torch.extract_torch`.
Values are float32, images 3 x 224 x 224, token ids int64.

- **WideResNet-101-2** (Zagoruyko and Komodakis 2016, in torchvision's ImageNet form:
  ResNet-101's bottleneck blocks [3, 4, 23, 3] with the inner 3x3 width doubled,
  126.9 M parameters): the MARL paper's workload, inference; also at MARL's own
  granularity (``granularity="node"``: one decision for a layer's weights, one for
  each activation).
- **ResNet-152** (He et al. 2016, bottleneck blocks [3, 8, 36, 3], 60.2 M
  parameters): the model of the MARL paper's baseline figure (inference runtime
  against the number of tasks), inference.
- **BERT-base** (Devlin et al. 2019: 12 layers, hidden 768, 12 heads, feed-forward
  3072, vocabulary 30,522, 512 positions, 2 token types, GELU, LayerNorm eps 1e-12,
  with the pooler; 109.5 M parameters), inference on sequences of 512 tokens (its longest) with
  no padding (so no attention mask).
- **ResNet-50 training step** (bottleneck blocks [3, 4, 6, 3]): forward, the
  cross-entropy loss and the backward pass to every parameter's gradient, with
  batch norm in training mode (its running statistics updated in place), as
  ``torch.export``'s joint forward-backward graph gives it (no optimizer update).

Batches: the instances run on ``dram_pmem`` with its physical fast memory, the 2 GiB
of DRAM the MARL machine leaves to its tasks, so each batch is picked for the
program's peak live bytes to exceed 2 GiB (the fast memory binds) and is stated in
the program's name and description. One exception: WideResNet-101-2 at batch 128
(1.62 GiB at its peak) is MARL's task of "about 1.5GB", the program of the
multi-task study (:mod:`mallocgame.bench.tasks`), where ``N`` tasks share the 2 GiB.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from mallocgame.frontends.torch import TorchModel, TrainingStep, extract_torch
from mallocgame.program import Program

__all__ = [
    "TorchProgram",
    "TORCH_PROGRAMS",
    "ResNet",
    "BertConfig",
    "BERT_BASE",
    "Bert",
    "wide_resnet101_2",
    "resnet152",
    "resnet50",
]


@dataclass(frozen=True)
class TorchProgram:
    """One program: a module and example inputs on the ``meta`` device, and how to capture them.

    ``builder()`` returns the module (in the mode it is captured in) and its inputs;
    ``training_step`` captures the forward and backward pass (``True``: the module returns
    the loss; a :class:`~mallocgame.frontends.torch.TrainingStep`: its loss and optimizer,
    the labels from the builder); ``granularity`` as in
    :func:`~mallocgame.frontends.torch.extract_torch`;
    ``preset`` the hardware preset the program is sized for (``None``: its suite's).
    """

    name: str
    description: str
    builder: Callable[[], TorchModel]
    training_step: bool | TrainingStep = False
    granularity: str = "tensor"
    preset: str | None = None

    def build(self) -> TorchModel:
        return self.builder()

    def extract(self, name: str) -> Program:
        """The program, captured with the PyTorch frontend and named ``name``."""
        model = self.build()
        return extract_torch(
            model.module,
            model.inputs,
            example_kwargs=model.kwargs,
            labels=model.labels,
            name=name,
            training_step=self.training_step,
            granularity=self.granularity,
        )


# --------------------------------------------------------------------------- ResNets


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (stride here, as torchvision's v1.5), 1x1 expand (x4), each with batch norm; residual add."""  # noqa: E501

    def __init__(self, inplanes: int, planes: int, stride: int, width: int):
        super().__init__()
        out = planes * 4
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        y += identity
        return self.relu(y)


class ResNet(nn.Module):
    """ImageNet ResNet with bottleneck blocks: 7x7/2 stem, 3x3/2 max pool, four stages, average pool, FC.

    ``width_per_group`` 64 is the standard network, 128 the wide (``-2``) one.
    Input ``[B, 3, 224, 224]`` float32, output logits ``[B, num_classes]``.
    """

    def __init__(
        self, layers: tuple[int, int, int, int], width_per_group: int = 64, num_classes: int = 1000
    ):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        inplanes = 64
        stages = []
        for i, blocks in enumerate(layers):
            planes = 64 * 2**i
            width = planes * width_per_group // 64
            stage = []
            for b in range(blocks):
                stage.append(Bottleneck(inplanes, planes, 2 if (b == 0 and i > 0) else 1, width))
                inplanes = planes * 4
            stages.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def wide_resnet101_2() -> ResNet:
    return ResNet((3, 4, 23, 3), width_per_group=128)


def resnet152() -> ResNet:
    return ResNet((3, 8, 36, 3))


def resnet50() -> ResNet:
    return ResNet((3, 4, 6, 3))


class ClassifierLoss(nn.Module):
    """``loss = cross_entropy(model(images), labels)``: what a training step differentiates."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor]:
        return (F.cross_entropy(self.model(images), labels),)


# --------------------------------------------------------------------------- BERT


@dataclass(frozen=True)
class BertConfig:
    """A BERT encoder's published hyper-parameters."""

    vocab: int = 30522
    hidden: int = 768
    layers: int = 12
    heads: int = 12
    intermediate: int = 3072
    max_positions: int = 512
    type_vocab: int = 2
    eps: float = 1e-12


BERT_BASE = BertConfig()


class BertLayer(nn.Module):
    """Post-LayerNorm encoder layer: self-attention (no mask), add & norm, GELU feed-forward, add & norm."""

    def __init__(self, c: BertConfig):
        super().__init__()
        self.heads = c.heads
        self.query, self.key, self.value = (nn.Linear(c.hidden, c.hidden) for _ in range(3))
        self.attn_out = nn.Linear(c.hidden, c.hidden)
        self.attn_norm = nn.LayerNorm(c.hidden, eps=c.eps)
        self.intermediate = nn.Linear(c.hidden, c.intermediate)
        self.output = nn.Linear(c.intermediate, c.hidden)
        self.out_norm = nn.LayerNorm(c.hidden, eps=c.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        d = h // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:  # [b, s, h] -> [b, heads, s, d]
            return t.view(b, s, self.heads, d).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
        context = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, s, h)
        x = self.attn_norm(x + self.attn_out(context))
        return self.out_norm(x + self.output(F.gelu(self.intermediate(x))))


class Bert(nn.Module):
    """BERT encoder with embeddings and pooler.

    Inputs ``input_ids`` and ``token_type_ids``, ``[B, S]`` int64; outputs the sequence
    ``[B, S, hidden]`` and the pooled first token ``[B, hidden]`` (tanh dense).
    """

    position_ids: torch.Tensor  # [1, max_positions] int64, a buffer registered in __init__

    def __init__(self, c: BertConfig = BERT_BASE):
        super().__init__()
        self.word = nn.Embedding(c.vocab, c.hidden)
        self.position = nn.Embedding(c.max_positions, c.hidden)
        self.token_type = nn.Embedding(c.type_vocab, c.hidden)
        self.embed_norm = nn.LayerNorm(c.hidden, eps=c.eps)
        self.register_buffer(
            "position_ids", torch.arange(c.max_positions).unsqueeze(0), persistent=False
        )
        self.layers = nn.ModuleList(BertLayer(c) for _ in range(c.layers))
        self.pooler = nn.Linear(c.hidden, c.hidden)

    def forward(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        positions = self.position_ids[:, : input_ids.shape[1]]
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
        x = self.embed_norm(x)
        for layer in self.layers:
            x = layer(x)
        return x, torch.tanh(self.pooler(x[:, 0]))


# --------------------------------------------------------------------------- the registry


def _images(batch: int) -> torch.Tensor:
    return torch.empty(batch, 3, 224, 224, device="meta")


def _vision_infer(make: Callable[[], nn.Module], batch: int) -> Callable[[], TorchModel]:
    def build() -> TorchModel:
        with torch.device("meta"):
            model = make().eval()
        return TorchModel(model, (_images(batch),))

    return build


def _vision_train(make: Callable[[], nn.Module], batch: int) -> Callable[[], TorchModel]:
    """A training step's module and inputs: uninitialized CPU memory (torch 2.13 derives no joint
    graph from meta parameters), about the size of the parameters and one batch."""

    def build() -> TorchModel:
        with torch.device("meta"):
            model = ClassifierLoss(make()).train()
        model.to_empty(device="cpu")
        images = torch.empty(batch, 3, 224, 224)
        return TorchModel(model, (images, torch.zeros(batch, dtype=torch.int64)))

    return build


def _bert_infer(batch: int, seq: int) -> Callable[[], TorchModel]:
    def build() -> TorchModel:
        with torch.device("meta"):
            model = Bert(BERT_BASE).eval()
        ids = torch.empty(batch, seq, dtype=torch.int64, device="meta")
        return TorchModel(model, (ids, torch.empty_like(ids)))

    return build


def _programs(*programs: TorchProgram) -> dict[str, TorchProgram]:
    return {p.name: p for p in programs}


TORCH_PROGRAMS: dict[str, TorchProgram] = _programs(
    TorchProgram(
        "wrn101_2_infer_b256",
        "WideResNet-101-2 inference (bottleneck [3,4,23,3], inner width x2), batch 256, 224x224, float32",
        _vision_infer(wide_resnet101_2, 256),
    ),
    TorchProgram(
        "wrn101_2_infer_b256_node",
        "WideResNet-101-2 inference, batch 256, at the MARL paper's granularity (granularity='node': "
        "a layer's weights one decision, each operation's activations one)",
        _vision_infer(wide_resnet101_2, 256),
        granularity="node",
    ),
    TorchProgram(
        "wrn101_2_infer_b128",
        "WideResNet-101-2 inference, batch 128, 224x224, float32: the MARL paper's task (about 1.5 GB "
        "a task), the program of its multi-task study (mallocgame bench tasks)",
        _vision_infer(wide_resnet101_2, 128),
    ),
    TorchProgram(
        "resnet152_infer_b256",
        "ResNet-152 inference (bottleneck [3,8,36,3]), batch 256, 224x224, float32",
        _vision_infer(resnet152, 256),
    ),
    TorchProgram(
        "bert_base_infer_b128_s512",
        "BERT-base inference (12 layers, hidden 768, 12 heads, vocab 30522, with pooler), batch 128, "
        "sequence 512, float32",
        _bert_infer(128, 512),
    ),
    TorchProgram(
        "resnet50_train_b32",
        "ResNet-50 training step (forward, cross-entropy, backward to the gradients; batch norm in training "
        "mode), batch 32, 224x224, float32",
        _vision_train(resnet50, 32),
        training_step=True,
    ),
)
"""The ``torch-v1`` programs by name."""
