"""Suites tpu-v1 and tpu-v2: the xla-v2 models compiled by libtpu for a TPU v4 and a TPU
v5e, each frozen with XLA's own placement, which the solver ``xla`` answers with; tpu-v2 is
tpu-v1 extracted again with a convolution's flops counted over the positions that read an
input element.

Every frozen tpu-v2 program (and a sample of tpu-v1's, whose files no longer change)
loads, derives on its generation's physical fast memory and plays a random game ``check``
accepts; every frozen placement belongs to its program. XLA's answer (projected where its
raw reading breaks a rule) passes ``check`` on the programs small enough for the test
suite; ``docs/results.md`` has it on all of them. Each tpu-v2 program is its tpu-v1
program but for the flops of convolutions, which are fewer or the same.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from mallocgame.check import check_solution
from mallocgame.errors import SolverError
from mallocgame.frontends.xla_placement import (
    instance_structure_sha256,
    placement_from_dict,
    placement_to_dict,
    program_structure_sha256,
)
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads.registry import load_workload, workload_names
from mallocgame.workloads.suite import (
    SUITES,
    freeze,
    model_programs,
    suite_names,
    suite_placement,
    suite_program,
)
from tests.workloads.suite_checks import assert_plays_on_its_physical_memory

TPU_V1_SAMPLE = (
    "tpu-v1/gru_infer_b512-v5e",  # 81 buffers
    "tpu-v1/bert_base_train_b32-v5e",  # convolutions tpu-v2 counts otherwise
    "tpu-v1/lstm_infer_b512-v4",  # a loop
)
"""The tpu-v1 programs checked here: the suite's files no longer change (tpu-v2 is its next
version), so three stand for it; tpu-v2's are checked every one."""
NAMES = [*TPU_V1_SAMPLE, *suite_names("tpu-v2")]
SMALL = [n for n in NAMES if suite_program(n).num_buffers <= 1_200]
TPU_SUITES = ("tpu-v1", "tpu-v2")


@pytest.mark.parametrize("suite_name", TPU_SUITES)
def test_the_suite_has_every_tpu_sized_model_for_both_targets(suite_name: str) -> None:
    suite = SUITES[suite_name]
    assert suite.frontend == "tpu" and suite.targets == ("tpu-v4", "tpu-v5e")
    models = [m for m, p in model_programs("xla-v2").items() if p.preset in (None, "tpu_v4i")]
    expected = {f"{suite_name}/{m}-{gen}" for m in models for gen in ("v4", "v5e")}
    names = suite_names(suite_name)
    assert set(names) == expected
    assert set(names) <= set(workload_names())
    for name in names:
        assert suite_program(name).source["target"] == "tpu-" + name.rsplit("-", 1)[1]


@pytest.mark.parametrize("name", suite_names("tpu-v2"), ids=lambda n: n.split("/", 1)[1])
def test_tpu_v2_is_tpu_v1_with_convolution_flops_counted_again(name: str) -> None:
    """The same compile (libtpu 0.0.42.1): the same tensors, alias groups, loops, placement
    and instructions, but for the flops of the convolutions (and fusions holding one), which
    count only the window positions that read an input element."""
    new, old = suite_program(name), suite_program(name.replace("tpu-v2/", "tpu-v1/"))
    assert new.tensors == old.tensors and new.alias_groups == old.alias_groups
    assert new.loops == old.loops and len(new.instructions) == len(old.instructions)
    placement = suite_placement(name)
    assert placement is not None and placement.program == name
    assert replace(placement, program=old.name) == suite_placement(old.name)
    for a, b in zip(new.instructions, old.instructions):
        assert replace(a, flops=b.flops) == b, a.name
        assert a.flops <= b.flops, a.name
        if a.flops < b.flops:
            assert a.opcode in ("convolution", "fusion"), a.name


@pytest.mark.parametrize("name", NAMES, ids=lambda n: n)
def test_program_plays_and_its_placement_belongs_to_it(name: str) -> None:
    assert_plays_on_its_physical_memory(name, "xla", binds=None)
    program, placement = suite_program(name), suite_placement(name)
    assert placement is not None
    assert len(placement.buffers) == len(program.instructions)
    assert placement_from_dict(placement_to_dict(placement)) == placement
    assert all(c.tensor < len(program.tensors) for c in placement.copies)
    assert placement.structure_sha256 == program_structure_sha256(program)
    assert placement.structure_sha256 == instance_structure_sha256(load_workload(name))


@pytest.mark.parametrize("name", SMALL, ids=lambda n: n)
def test_xlas_answer_passes_check(name: str) -> None:
    inst = load_workload(name)
    answer = get_solver("xla").solve(inst, SolveRequest(seed=2**63 - 1))
    assert answer.solver == "xla" and answer.seed == 2**63 - 1
    assert check_solution(inst, answer).ok
    assert 0.0 < answer.info["kept_fraction"] <= 1.0 + 1e-12
    assert answer.info["fast_spaces"] == ([3] if name.endswith("-v4") else [1])


def test_xla_answers_only_where_there_is_a_placement() -> None:
    with pytest.raises(SolverError, match="xla: xla-v2/gru_infer_b512 has no XLA placement"):
        get_solver("xla").solve(load_workload("xla-v2/gru_infer_b512"), SolveRequest())


def test_freeze_writes_the_program_and_its_placement(tmp_path) -> None:
    """One program of the suite, compiled anew, is the frozen one (libtpu is deterministic)."""
    durations = freeze(["gru_infer_b512-v5e"], out_dir=tmp_path, suite="tpu-v2")
    assert list(durations) == ["gru_infer_b512-v5e"]
    frozen = suite_program("tpu-v2/gru_infer_b512-v5e")
    from mallocgame.frontends.xla_placement import load_placement
    from mallocgame.program import load_program

    again = load_program(tmp_path / "gru_infer_b512-v5e.program.json.gz")
    assert again.tensors == frozen.tensors and again.instructions == frozen.instructions
    placement = load_placement(tmp_path / "gru_infer_b512-v5e.xla.json.gz")
    assert placement == suite_placement("tpu-v2/gru_infer_b512-v5e")


def test_freeze_refuses_a_model_the_suite_does_not_have(tmp_path) -> None:
    from mallocgame.errors import InputFileError

    with pytest.raises(InputFileError, match="nope: no such model program in tpu-v2"):
        freeze(["nope"], out_dir=tmp_path, suite="tpu-v2")
    # a model of xla-v2 sized for a GPU: it is there, but not for a TPU
    with pytest.raises(
        InputFileError,
        match="llama2_70b_decode: sized for gpu_hbm_host, so not compiled for TPU targets",
    ):
        freeze(["llama2_70b_decode"], out_dir=tmp_path, suite="tpu-v2")


def test_freeze_refuses_an_unknown_target_before_making_the_folder(tmp_path) -> None:
    from mallocgame.frontends.xla import XlaFrontendError

    out = tmp_path / "out"
    with pytest.raises(XlaFrontendError, match="unknown TPU target 'bogus'"):
        freeze(["gru_infer"], out_dir=out, suite="xla-v1", target="bogus")
    assert not out.exists()


@pytest.mark.parametrize("suite_name", TPU_SUITES)
def test_the_frozen_answer_is_xlas_answer_computed_again(suite_name: str) -> None:
    """The legal answer frozen beside each placement is what the projection gives now."""
    from mallocgame.frontends.tpu import TPU_TARGETS
    from mallocgame.solvers.xla_answer import frozen_xla_answer, xla_answer
    from mallocgame.workloads.suite import xla_answer_path

    name = f"{suite_name}/bigru_tagger_infer_b512-v4"
    inst = load_workload(name)
    assert xla_answer_path(name).is_file()
    frozen = frozen_xla_answer(inst)
    computed = xla_answer(inst, suite_placement(name), TPU_TARGETS["tpu-v4"].fast_spaces)
    assert frozen.solution.allocations == computed.solution.allocations
    assert frozen.raw_failures == computed.raw_failures
    assert frozen.kept_fraction == pytest.approx(computed.kept_fraction)


def test_a_frozen_answer_of_another_instance_is_not_taken() -> None:
    """On another preset the instance differs: XLA's answer is computed for it."""
    from mallocgame.solvers.xla_answer import frozen_xla_answer
    from mallocgame.workloads.suite import suite_instance

    inst = suite_instance("tpu-v1/gru_infer_b512-v5e", "gpu_hbm_host")
    found = frozen_xla_answer(inst)
    assert found.solution.instance_sha256 == inst.sha256
    assert check_solution(inst, found.solution).ok
