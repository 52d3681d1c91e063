"""Suite tpu-v1: the xla-v2 models compiled by libtpu for a TPU v4 and a TPU v5e, each
frozen with XLA's own placement, which the solver ``xla`` answers with.

Every frozen program loads, derives on ``tpu_v4i``'s physical fast memory and plays a
random game ``check`` accepts; every frozen placement belongs to its program. XLA's
answer (projected where its raw reading breaks a rule) passes ``check`` on the programs
small enough for the test suite; ``docs/results.md`` has it on all of them.
"""

from __future__ import annotations

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

NAMES = suite_names("tpu-v1")
IDS = [n.split("/", 1)[1] for n in NAMES]
SMALL = [n for n in NAMES if suite_program(n).num_buffers <= 1_200]


def test_the_suite_has_every_tpu_sized_model_for_both_targets() -> None:
    suite = SUITES["tpu-v1"]
    assert suite.frontend == "tpu" and suite.targets == ("tpu-v4", "tpu-v5e")
    models = [m for m, p in model_programs("xla-v2").items() if p.preset in (None, "tpu_v4i")]
    expected = {f"tpu-v1/{m}-{gen}" for m in models for gen in ("v4", "v5e")}
    assert set(NAMES) == expected
    assert set(NAMES) <= set(workload_names())
    for name in NAMES:
        assert suite_program(name).source["target"] == "tpu-" + name.rsplit("-", 1)[1]


@pytest.mark.parametrize("name", NAMES, ids=IDS)
def test_program_plays_and_its_placement_belongs_to_it(name: str) -> None:
    assert_plays_on_its_physical_memory(name, "xla", binds=None)
    program, placement = suite_program(name), suite_placement(name)
    assert placement is not None
    assert len(placement.buffers) == len(program.instructions)
    assert placement_from_dict(placement_to_dict(placement)) == placement
    assert all(c.tensor < len(program.tensors) for c in placement.copies)
    assert placement.structure_sha256 == program_structure_sha256(program)
    assert placement.structure_sha256 == instance_structure_sha256(load_workload(name))


@pytest.mark.parametrize("name", SMALL, ids=[n.split("/", 1)[1] for n in SMALL])
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
    durations = freeze(["gru_infer_b512-v5e"], out_dir=tmp_path, suite="tpu-v1")
    assert list(durations) == ["gru_infer_b512-v5e"]
    frozen = suite_program("tpu-v1/gru_infer_b512-v5e")
    from mallocgame.frontends.xla_placement import load_placement
    from mallocgame.program import load_program

    again = load_program(tmp_path / "gru_infer_b512-v5e.program.json.gz")
    assert again.tensors == frozen.tensors and again.instructions == frozen.instructions
    placement = load_placement(tmp_path / "gru_infer_b512-v5e.xla.json.gz")
    assert placement == suite_placement("tpu-v1/gru_infer_b512-v5e")


def test_freeze_refuses_a_model_the_suite_does_not_have(tmp_path) -> None:
    from mallocgame.errors import InputFileError

    with pytest.raises(InputFileError, match="llama2_70b_decode: no such model program in tpu-v1"):
        freeze(["llama2_70b_decode"], out_dir=tmp_path, suite="tpu-v1")


def test_the_frozen_answer_is_xlas_answer_computed_again() -> None:
    """The legal answer frozen beside each placement is what the projection gives now."""
    from mallocgame.frontends.tpu import TPU_TARGETS
    from mallocgame.solvers.xla_answer import frozen_xla_answer, xla_answer
    from mallocgame.workloads.suite import xla_answer_path

    name = "tpu-v1/bigru_tagger_infer_b512-v4"
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
