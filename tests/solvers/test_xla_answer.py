"""XLA's own placement as a legal answer: checked, projected where the raw reading breaks
a rule, its fast set within XLA's."""

from __future__ import annotations

from pathlib import Path

import pytest

from mallocgame.check import check_solution
from mallocgame.costmodel import derive_instance
from mallocgame.frontends.xla import extract_module_with_placement
from mallocgame.hardware import get_preset
from mallocgame.solvers.xla_answer import xla_answer

LIBTPU = Path(__file__).parents[1] / "frontends" / "data" / "libtpu"
HAND = Path(__file__).parents[1] / "frontends" / "data" / "tpu_mlp"


def _instance_and_placement(path: Path):
    text = path.read_text() if path.is_file() else next(path.glob("*.txt")).read_text()
    program, placement = extract_module_with_placement(text, name=path.stem)
    return derive_instance(program, get_preset("tpu_v4i"), capacity_fraction=None), placement


@pytest.mark.parametrize(
    ("module", "fast"),
    [
        ("mlp_grad.tpu-v4.txt", {3}),
        ("mlp_grad.tpu-v5p.txt", {1}),
        ("gru_infer_b512.tpu-v5e.txt", {1}),
    ],
)
def test_a_libtpu_placement_becomes_a_legal_answer(module: str, fast: set[int]) -> None:
    instance, placement = _instance_and_placement(LIBTPU / module)
    answer = xla_answer(instance, placement, fast)
    assert check_solution(instance, answer.solution).ok
    assert answer.solution.solver == "xla" and answer.solution.actions is not None
    # libtpu's copies break the game's stricter rules here: projected, and said so
    assert answer.projected and not check_solution(instance, answer.raw).ok
    assert answer.solution.info["raw_failures"] == dict(answer.raw_failures)
    assert 0.0 < answer.kept_fraction <= 1.0 + 1e-12
    raw_fast = {a.buffer for a in answer.raw.allocations}
    assert {a.buffer for a in answer.solution.allocations} <= raw_fast
    assert answer.solution.normalized_reward > 0.0


def test_a_legal_reading_is_kept_as_it_is() -> None:
    instance, placement = _instance_and_placement(HAND)
    answer = xla_answer(instance, placement, {1})
    if answer.projected:  # the hand-written module's reading must be legal for this test
        pytest.fail(f"the tpu_mlp reading breaks {dict(answer.raw_failures)}")
    assert answer.solution is answer.raw and answer.kept_fraction == 1.0
