"""The frozen suite xla-v1: every program loads, derives a valid instance, and plays."""

from __future__ import annotations

import sys

import pytest

from mallocgame.check import check_solution
from mallocgame.errors import InputFileError
from mallocgame.program import validate_program
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads.registry import load_workload, workload_names
from mallocgame.workloads.suite import SUITE, suite_instance, suite_names, suite_program

NAMES = suite_names(SUITE)


def test_suite_has_the_frontend_programs() -> None:
    short = {n.removeprefix(f"{SUITE}/") for n in NAMES}
    assert {
        "alexnet_train_b32",
        "resnet_infer",
        "transformer_train",
        "lstm_infer",
        "inplace_update_loop",
        "donated_sgd_step",
    } <= short
    assert set(NAMES) <= set(workload_names())


@pytest.mark.parametrize("name", NAMES)
def test_program_derives_instance_that_plays(name: str) -> None:
    program = suite_program(name)
    validate_program(program)
    assert program.source["frontend"] == "xla"
    inst = suite_instance(name)
    assert inst.name == name and load_workload(name) is inst
    total = sum(x.size for x in inst.tensors)
    assert 0 < inst.hardware.fast_memory_bytes < total  # the capacity binds
    solution = get_solver("random").solve(inst, SolveRequest(seed=0))
    report = check_solution(inst, solution)
    assert report.ok, report.summary()
    assert solution.reward_s > 0


def test_loops_and_aliases_survive_freezing() -> None:
    lstm = suite_program(f"{SUITE}/lstm_infer")
    assert lstm.loops and lstm.loops[0].trip_count == 16
    assert any(ins.count == 16 for ins in lstm.instructions)
    assert suite_program(f"{SUITE}/donated_sgd_step").alias_groups
    assert suite_program(f"{SUITE}/inplace_update_loop").alias_groups


def test_unknown_suite_program() -> None:
    with pytest.raises(InputFileError, match="not a program of the bundled suite"):
        suite_program(f"{SUITE}/nope")


def test_suite_shape() -> None:
    from mallocgame.workloads.suite import TABLE2_PROGRAMS

    sizes = {name: suite_program(name).num_buffers for name in NAMES}
    assert len(NAMES) >= 24
    assert min(sizes.values()) < 300 and max(sizes.values()) > 16_000
    assert sum(1 for name in NAMES if suite_program(name).loops) >= 5
    for name, target in zip(TABLE2_PROGRAMS, (300, 3_000, 9_000, 10_000)):
        assert abs(sizes[name] - target) <= 0.1 * target, (name, sizes[name])


def test_at_least_five_training_steps() -> None:
    pytest.importorskip("flax")
    from mallocgame.workloads.models import MODEL_PROGRAMS

    short = [name.removeprefix(f"{SUITE}/") for name in NAMES]
    assert sum(1 for name in short if MODEL_PROGRAMS[name].training) >= 5


def test_the_agent_split_is_a_frozen_quarter_by_name() -> None:
    from mallocgame.workloads.suite import agent_split

    names = suite_names("xla-v1")
    held, train = agent_split(names, "held-out"), agent_split(names, "train")
    assert sorted(held + train) == sorted(names) and not set(held) & set(train)
    assert agent_split(names, "all") == names
    # frozen: the held-out programs of xla-v1 as the split was first drawn
    assert held == [
        "xla-v1/alphatensor_matmul",
        "xla-v1/gru_infer",
        "xla-v1/mlp_mixer_infer",
        "xla-v1/resnet50_train",
        "xla-v1/transformer_nmt_train",
        "xla-v1/transformer_train",
    ]
    assert agent_split(["xla-v1/gru_infer"], "train") == []
    with pytest.raises(ValueError, match="split must be"):
        agent_split(names, "test")


@pytest.mark.parametrize(
    ("suite", "package", "extra"), [("hf-v1", "transformers", "hf"), ("torch-v1", "torch", "torch")]
)
def test_extracting_a_suite_without_its_packages_names_the_extra(
    monkeypatch, suite, package, extra
) -> None:
    from mallocgame.workloads.suite import SUITES, model_programs

    module = SUITES[suite].models.partition(":")[0]
    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, package, None)
    with pytest.raises(
        InputFileError, match=rf"needs the '{extra}' extra \(pip install 'mallocgame\[{extra}\]'\)"
    ):
        model_programs(suite)


def _extracted_again(name: str, more_flops: float = 0.0):
    """What extracting ``name``'s model again gives, without compiling: its frozen program
    with the frontend's own ``source`` (``dump_module`` without the number it was frozen
    with), ``more_flops`` added to its first instruction's."""
    from dataclasses import replace

    frozen = suite_program(name)
    source = {k: v for k, v in frozen.source.items() if k not in ("model", "suite")}
    source.pop("extract_seconds")
    source["dump_module"] = source["dump_module"].partition(".")[2]
    first = replace(frozen.instructions[0], flops=frozen.instructions[0].flops + more_flops)
    return replace(frozen, source=source, instructions=(first, *frozen.instructions[1:]))


def test_freezing_an_unchanged_program_again_keeps_its_file(tmp_path, monkeypatch) -> None:
    """Freezing in place a program that comes out the same but for its extraction's
    duration keeps its file, and so its instance's hash; a changed one is written."""
    import shutil

    from mallocgame.costmodel import derive_instance
    from mallocgame.program import load_program
    from mallocgame.workloads import suite

    pytest.importorskip("flax")
    name = f"{SUITE}/gru_infer"
    path = tmp_path / suite.program_path(name).name
    shutil.copyfile(suite.program_path(name), path)
    before = path.read_bytes()
    monkeypatch.setattr(suite, "extract_model", lambda *a, **k: (_extracted_again(name), None))
    lines: list[str] = []
    suite.freeze(["gru_infer"], out_dir=tmp_path, progress=lines.append, suite=SUITE)
    assert path.read_bytes() == before and lines[0].endswith(", unchanged, kept")
    inst = derive_instance(load_program(path), "tpu_v4i", capacity_fraction=0.25, name=name)
    assert inst.sha256 == suite_instance(name).sha256
    monkeypatch.setattr(suite, "extract_model", lambda *a, **k: (_extracted_again(name, 1e6), None))
    lines.clear()
    suite.freeze(["gru_infer"], out_dir=tmp_path, progress=lines.append, suite=SUITE)
    assert path.read_bytes() != before and "kept" not in lines[0]
    assert load_program(path).instructions == _extracted_again(name, 1e6).instructions
