"""Suite torch-v1: the MARL paper's workloads from PyTorch, on the DRAM its machine leaves to tasks.

Each frozen program loads without torch, derives an instance on ``dram_pmem`` with its
physical fast memory (2 GiB) and plays a random game that ``check`` accepts. The
answers of ``heuristic`` (``tests/solvers/test_heuristic.py``, every bundled workload)
and of ``es``, ``mcts`` and ``exact`` (``tests/solvers/test_suite_answers.py``, every
suite program) are checked there. With torch installed, one program is captured
again and must equal its frozen file.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from mallocgame.costmodel import peak_live_bytes
from mallocgame.workloads.registry import workload_names
from mallocgame.workloads.suite import freeze, program_path, suite_names, suite_program
from tests.workloads.suite_checks import assert_plays_on_its_physical_memory

NAMES = suite_names("torch-v1")
GIB = 1 << 30


def test_the_suite_has_the_marl_workloads() -> None:
    short = {n.removeprefix("torch-v1/") for n in NAMES}
    assert {
        "wrn101_2_infer_b256",
        "wrn101_2_infer_b256_node",
        "wrn101_2_infer_b128",
        "resnet152_infer_b256",
        "bert_base_infer_b128_s512",
        "resnet50_train_b32",
    } == short
    assert set(NAMES) <= set(workload_names())


@pytest.mark.parametrize("name", NAMES, ids=[n.split("/", 1)[1] for n in NAMES])
def test_program_derives_on_the_dram_left_to_tasks_and_plays(name: str) -> None:
    # MARL's own task fits the 2 GiB alone: the multi-task study splits them among many
    inst, peak = assert_plays_on_its_physical_memory(
        name, "torch", binds=not name.endswith("_b128")
    )
    assert inst.hardware.name == "dram_pmem" and inst.hardware.fast_memory_bytes == 2 * GIB
    assert peak <= 4 * GIB


def test_the_programs_have_their_models_work() -> None:
    flops = {
        n.removeprefix("torch-v1/"): sum(i.flops for i in suite_program(n).instructions)
        for n in NAMES
    }
    # published forward costs: 22.8 G multiply-adds an image for WRN-101-2, 11.6 G for ResNet-152
    assert 2 * 22.7e9 * 256 < flops["wrn101_2_infer_b256"] < 2 * 22.9e9 * 256
    assert 2 * 11.5e9 * 256 < flops["resnet152_infer_b256"] < 2 * 11.7e9 * 256
    train = suite_program("torch-v1/resnet50_train_b32")
    assert train.source["mode"] == "training_step"
    assert any(i.opcode == "convolution_backward" for i in train.instructions)
    assert train.alias_groups  # batch-norm statistics updated in place
    # the published parameter counts, to the parameter (torchvision's and Hugging Face's models)
    for name, count in (
        ("wrn101_2_infer_b256", 126_886_696),
        ("resnet152_infer_b256", 60_192_808),
        ("bert_base_infer_b128_s512", 109_482_240),
    ):
        params = [
            x
            for x in suite_program(f"torch-v1/{name}").tensors
            if x.def_time < 0 and x.name.rpartition(".")[2] in ("weight", "bias")
        ]
        assert sum(x.size for x in params) == 4 * count, name


def test_marls_granularity_is_the_same_program_with_fewer_decisions() -> None:
    per_tensor = suite_program("torch-v1/wrn101_2_infer_b256")
    per_node = suite_program("torch-v1/wrn101_2_infer_b256_node")
    assert per_node.source["granularity"] == "node" and per_tensor.source["granularity"] == "tensor"
    assert [i.opcode for i in per_node.instructions] == [i.opcode for i in per_tensor.instructions]
    assert [i.flops for i in per_node.instructions] == [i.flops for i in per_tensor.instructions]
    # an operation's outputs are one allocation at node granularity: the max pool's indices (never
    # read) then live as long as its output
    assert (
        peak_live_bytes(per_tensor)
        <= peak_live_bytes(per_node)
        <= 1.1 * peak_live_bytes(per_tensor)
    )
    assert per_node.num_buffers < per_tensor.num_buffers
    weights = [x for x in per_node.tensors if x.def_time < 0 and x.name.endswith(".*")]
    assert len(weights) == 104 + 104 + 1  # one per convolution, batch norm and the classifier


def test_a_frozen_program_is_what_capturing_its_model_gives(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from mallocgame.workloads.models_torch import TORCH_PROGRAMS

    assert {f"torch-v1/{name}" for name in TORCH_PROGRAMS} == set(NAMES)
    name = "torch-v1/bert_base_infer_b128_s512"
    freeze([name], out_dir=tmp_path, suite="torch-v1")
    fresh, bundled = (
        json.loads(gzip.decompress(p.read_bytes()))
        for p in (tmp_path / program_path(name).name, program_path(name))
    )
    for doc in (fresh, bundled):
        doc["source"].pop("extract_seconds")
    assert fresh == bundled
