"""Suite xla-v2: programs at their published sizes, on the physical fast memory of their preset.

Each program loads, derives an instance on its own preset with the preset's own fast
memory, and plays a game that ``check`` accepts. The answers of ``heuristic``
(``tests/solvers/test_heuristic.py``) and of ``es``, ``mcts`` and ``exact``
(``tests/solvers/test_suite_answers.py``) are checked on every program there.
"""

from __future__ import annotations

import pytest

from mallocgame.hardware import get_preset
from mallocgame.workloads.registry import workload_names
from mallocgame.workloads.suite import (
    SUITES,
    suite_instance,
    suite_names,
    suite_preset,
    suite_program,
)
from tests.workloads.suite_checks import assert_plays_on_its_physical_memory

NAMES = suite_names("xla-v2")
GIB = 1 << 30


def test_the_suite_spans_the_papers_sizes() -> None:
    sizes = {name: suite_program(name).num_buffers for name in NAMES}
    on_tpu = [name for name in NAMES if suite_preset(name) == "tpu_v4i"]
    assert len(on_tpu) >= 24
    assert min(sizes[n] for n in on_tpu) < 300 and max(sizes[n] for n in on_tpu) > 16_000
    assert set(NAMES) <= set(workload_names())
    assert sum(1 for n in NAMES if suite_program(n).loops) >= 5


def test_the_offloading_programs_exceed_the_gpu() -> None:
    offload = [name for name in NAMES if suite_preset(name) == "gpu_hbm_host"]
    assert len(offload) >= 2
    hbm = get_preset("gpu_hbm_host").fast_memory_bytes
    for name in offload:
        inst = suite_instance(name)
        assert inst.hardware.fast_memory_bytes == hbm
        inputs = sum(x.size for x in inst.tensors if x.def_time < 0)
        assert inputs > hbm, name  # the weights alone do not fit the GPU


@pytest.mark.parametrize("name", NAMES, ids=[n.split("/", 1)[1] for n in NAMES])
def test_program_derives_on_its_physical_memory_and_plays(name: str) -> None:
    inst, peak = assert_plays_on_its_physical_memory(name, "xla")
    if inst.hardware.name == "tpu_v4i":
        assert peak <= 8 * GIB  # sized to run on one TPU v4i


def test_every_model_program_is_frozen() -> None:
    pytest.importorskip("flax")
    from mallocgame.workloads.models_v2 import V2_PROGRAMS

    assert {f"xla-v2/{name}" for name in V2_PROGRAMS} == set(NAMES)
    for name, model in V2_PROGRAMS.items():
        assert suite_program(f"xla-v2/{name}").source["model"] == model.description
        assert suite_preset(f"xla-v2/{name}") == (model.preset or SUITES["xla-v2"].preset)


def test_llama_parameter_count_matches_the_published_size() -> None:
    pytest.importorskip("flax")
    from mallocgame.workloads.models_v2 import LLAMA2_70B, TINYLLAMA_1B

    assert 68.5e9 < LLAMA2_70B.num_params < 69.5e9  # "70B": 68.98 billion
    assert 1.0e9 < TINYLLAMA_1B.num_params < 1.2e9
