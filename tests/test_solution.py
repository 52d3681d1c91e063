"""Solution files (SPEC section 7): typed work, bound and diagnostics; files written
before them still load; a sweep record's solution loads; malformed files are typed errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mallocgame.errors import FormatError, InputFileError, SolutionError
from mallocgame.solution import RECORD_FORMAT, Allocation, Solution, load_solution, save_solution, solution_from_dict

SOLUTION = Solution(
    instance="tiny", instance_sha256="ab" * 32, solver="es", seed=3, wall_s=1.5,
    allocations=(Allocation(0, "Copy", 512, 0, 2, (0, 1)), Allocation(2, "NoCopy", 0, None, None)),
    reward_s=2.5e-6, normalized_reward=0.25, actions=(0, 1, 2),
    work={"games": 40, "generations": 3}, bound_s=4e-6, info={"status": "OPTIMAL", "note": ["x"]},
)


def test_a_solution_round_trips_with_work_bound_and_info(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    save_solution(SOLUTION, path)
    doc = json.loads(path.read_text())
    assert doc["work"] == {"games": 40, "generations": 3} and doc["bound_s"] == 4e-6  # SPEC section 7 keys
    assert doc["info"] == {"status": "OPTIMAL", "note": ["x"]}
    assert load_solution(path) == SOLUTION


def test_empty_work_bound_and_info_are_not_written() -> None:
    doc = Solution("t", "0" * 64, "drop", 0, 0.0, (), 0.0, 0.0).to_dict()
    assert not {"work", "bound_s", "info", "actions"} & set(doc)
    back = solution_from_dict(doc)
    assert back.work == {} and back.bound_s is None and back.info == {} and back.actions is None


def test_a_file_written_before_info_existed_loads_its_diagnostics_into_info() -> None:
    doc = {**SOLUTION.to_dict(), "status": "FEASIBLE", "candidates": {"random": {"valid": True}}}
    del doc["info"]
    old = solution_from_dict(doc)
    assert old.info == {"status": "FEASIBLE", "candidates": {"random": {"valid": True}}}
    assert old.work == SOLUTION.work and old.bound_s == SOLUTION.bound_s


def test_the_solution_of_a_sweep_record_loads(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    path.write_text(json.dumps({"format": RECORD_FORMAT, "version": 1, "solution": SOLUTION.to_dict()}))
    assert load_solution(path) == SOLUTION
    path.write_text(json.dumps({"format": RECORD_FORMAT, "version": 1}))
    with pytest.raises(FormatError, match="without its solution"):
        load_solution(path)


@pytest.mark.parametrize(
    "change, error, needle",
    [
        ({"format": "other"}, FormatError, "format is 'other'"),
        ({"version": 2}, FormatError, "unsupported solution version"),
        ({"version": True}, FormatError, "unsupported solution version True"),
        ({"reward_s": float("nan")}, SolutionError, "'reward_s' must be a finite number"),
        ({"work": {"games": "many"}}, SolutionError, "'work' must be an object of finite numbers"),
        ({"work": [1]}, SolutionError, "'work' must be an object of finite numbers"),
        ({"bound_s": "high"}, SolutionError, "'bound_s' must be a finite number or null"),
        ({"bound_s": 10**400}, SolutionError, "'bound_s' must be a finite number or null"),
        ({"reward_s": 10**400}, SolutionError, "'reward_s' must be a finite number"),
        ({"wall_s": "soon"}, SolutionError, "'wall_s' must be a finite number"),
        ({"allocations": [{"buffer": 0, "action": "Copy", "offset": 2**64, "start": 0, "end": 0}]},
         SolutionError, r"magnitude at most 2\*\*53"),
        ({"info": []}, SolutionError, "'info' must be an object"),
        ({"actions": [0, "1"]}, SolutionError, "'actions' must be a list of integers"),
        ({"allocations": [{"buffer": 0}]}, SolutionError, "allocation 0: missing key 'action'"),
    ],
)
def test_a_malformed_solution_is_a_typed_error(change: dict, error: type, needle: str) -> None:
    with pytest.raises(error, match=needle):
        solution_from_dict({**SOLUTION.to_dict(), **change})


def test_a_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputFileError):
        load_solution(tmp_path / "nope.json")
