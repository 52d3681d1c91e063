"""Solution files (SPEC section 7): typed work, bound and diagnostics; files written
before them still load; a sweep record's solution loads; malformed files are typed errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mallocgame.errors import FormatError, InputFileError, SolutionError
from mallocgame.solution import (
    RECORD_FORMAT,
    Allocation,
    Solution,
    load_solution,
    save_solution,
    solution_from_dict,
)

SOLUTION = Solution(
    instance="tiny",
    instance_sha256="ab" * 32,
    solver="es",
    seed=3,
    wall_s=1.5,
    allocations=(Allocation(0, "Copy", 512, 0, 2, (0, 1)), Allocation(2, "NoCopy", 0, None, None)),
    reward_s=2.5e-6,
    normalized_reward=0.25,
    actions=(0, 1, 2),
    work={"games": 40, "generations": 3},
    bound_s=4e-6,
    info={"status": "OPTIMAL", "note": ["x"]},
)


def test_a_solution_round_trips_with_work_bound_and_info(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    save_solution(SOLUTION, path)
    doc = json.loads(path.read_text())
    assert (
        doc["work"] == {"games": 40, "generations": 3} and doc["bound_s"] == 4e-6
    )  # SPEC section 7 keys
    assert doc["info"] == {"status": "OPTIMAL", "note": ["x"]}
    assert load_solution(path) == SOLUTION


def test_empty_work_bound_and_info_are_not_written() -> None:
    doc = Solution("t", "0" * 64, "drop", 0, 0.0, (), 0.0, 0.0).to_dict()
    assert not {"work", "bound_s", "info", "actions"} & set(doc)
    back = solution_from_dict(doc)
    assert back.work == {} and back.bound_s is None and back.info == {} and back.actions is None


def test_absent_optional_keys_take_their_defaults() -> None:
    doc = SOLUTION.to_dict()
    for key in ("solver", "seed", "wall_s", "actions", "work", "bound_s", "info"):
        doc.pop(key, None)
    back = solution_from_dict(doc)
    assert (back.solver, back.seed, back.wall_s, back.bound_s) == ("", 0, 0.0, None)


def test_a_file_written_before_info_existed_loads_its_diagnostics_into_info() -> None:
    doc = {**SOLUTION.to_dict(), "status": "FEASIBLE", "candidates": {"random": {"valid": True}}}
    del doc["info"]
    old = solution_from_dict(doc)
    assert old.info == {"status": "FEASIBLE", "candidates": {"random": {"valid": True}}}
    assert old.work == SOLUTION.work and old.bound_s == SOLUTION.bound_s


def test_the_solution_of_a_sweep_record_loads(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    path.write_text(
        json.dumps({"format": RECORD_FORMAT, "version": 1, "solution": SOLUTION.to_dict()})
    )
    assert load_solution(path) == SOLUTION
    path.write_text(json.dumps({"format": RECORD_FORMAT, "version": 1}))
    with pytest.raises(FormatError, match="without its solution"):
        load_solution(path)
    for version in (99, None, True, "1", 1.0):  # a record this package does not read
        doc = {"format": RECORD_FORMAT, "version": version, "solution": SOLUTION.to_dict()}
        path.write_text(json.dumps(doc))
        with pytest.raises(FormatError, match="a sweep record of version"):
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
        ({"bound_s": "high"}, SolutionError, "'bound_s' must be a finite number"),
        ({"bound_s": 10**400}, SolutionError, "'bound_s' must be a finite number"),
        ({"bound_s": None}, SolutionError, "'bound_s' must be a finite number"),  # not absent
        ({"bound_s": True}, SolutionError, "'bound_s' must be a finite number"),
        ({"reward_s": 10**400}, SolutionError, "'reward_s' must be a finite number"),
        ({"wall_s": "soon"}, SolutionError, "'wall_s' must be a finite number"),
        ({"wall_s": ""}, SolutionError, "'wall_s' must be a finite number"),  # not 0
        ({"wall_s": None}, SolutionError, "'wall_s' must be a finite number"),  # not 0
        ({"wall_s": False}, SolutionError, "'wall_s' must be a finite number"),
        ({"version": 1.0}, FormatError, "unsupported solution version 1.0"),
        ({"seed": 1.5}, SolutionError, "'seed' must be a whole number"),  # not seed 0
        ({"seed": 2**64}, SolutionError, "'seed' must be a whole number"),
        ({"instance": ["z"]}, SolutionError, "'instance' must be a string"),
        ({"solver": 3}, SolutionError, "'solver' must be a string"),
        (
            {
                "allocations": [
                    {"buffer": 0, "action": "Copy", "offset": 2**64, "start": 0, "end": 0}
                ]
            },
            SolutionError,
            r"magnitude at most 2\*\*53",
        ),
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


# ------------------------------------------------------- solutions refused where they are made


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"reward_s": float("nan")}, r"^solution: 'reward_s' must be a finite number, not nan$"),
        ({"reward_s": float("inf")}, "'reward_s' must be a finite number"),
        (
            {"normalized_reward": float("nan")},
            "'normalized_reward' must be a finite number, not nan",
        ),
        ({"wall_s": -float("inf")}, "'wall_s' must be a finite number"),
        ({"wall_s": "soon"}, "'wall_s' must be a finite number, not 'soon'"),
        ({"reward_s": True}, "'reward_s' must be a finite number, not True"),
        (
            {"bound_s": float("nan")},
            r"^solution: 'bound_s' must be a finite number or None, not nan$",
        ),
        ({"work": {"games": float("nan")}}, "'work' must map names to finite numbers"),
        ({"allocations": ({"buffer": 0},)}, "'allocations' must hold Allocation objects"),
        ({"actions": (0.0, 1, 2)}, r"^solution: 'actions' holds 0\.0, not a whole number$"),
        ({"actions": (True, 1, 2)}, "'actions' holds True, not a whole number"),
        ({"actions": "012"}, "'actions' must be a sequence of integers, not '012'"),
        ({"actions": 3}, "'actions' must be a sequence of integers, not 3"),
        ({"seed": "zero"}, r"^solution: 'seed' must be a whole number, not 'zero'$"),
        ({"seed": 1.0}, "'seed' must be a whole number, not 1.0"),
        ({"seed": True}, "'seed' must be a whole number, not True"),
        ({"seed": 2**64}, "'seed' must be a whole number of at most 64 bits"),
        ({"instance_sha256": 5}, r"^solution: 'instance_sha256' must be a string, not 5$"),
        ({"instance": None}, "'instance' must be a string, not None"),
        ({"solver": b"es"}, "'solver' must be a string, not b'es'"),
        # a None allocations raised a bare TypeError; an info of 3 or with a non-string key
        # was kept, then saving raised TypeError or wrote a duplicate key
        ({"allocations": None}, "'allocations' must be Allocation objects, not None"),
        ({"info": 3}, "'info' must map names"),
        ({"info": {1: 2, "1": 3}}, "info has the key 1, not a string"),
        # ... at any depth: a nested {1: 'a', '1': 'b'} was saved with a duplicate key
        ({"info": {"x": {1: "a", "1": "b"}}}, r"info\.x has the key 1, not a string"),
        ({"info": {"x": [{2, 3}]}}, r"info\.x\[0\] is \{2, 3\} \(set\), no JSON value"),
    ],
)
def test_a_solution_with_a_non_finite_number_is_refused_where_it_is_made(
    change: dict,
    needle: str,
) -> None:
    from dataclasses import replace

    with pytest.raises(SolutionError, match=needle):
        replace(SOLUTION, **change)


def test_numpy_numbers_in_info_are_kept_as_python_s() -> None:
    from dataclasses import replace

    import numpy as np

    s = replace(SOLUTION, info={"loss": np.float32(0.5), "n": [np.int64(3), (np.bool_(True),)]})
    assert s.info == {"loss": 0.5, "n": [3, (True,)]}
    assert type(s.info["loss"]) is float and type(s.info["n"][0]) is int


def test_allocations_given_as_an_iterator_are_kept(tmp_path: Path) -> None:
    """A generator's allocations were used up by the type check: the solution kept none,
    and saved "allocations": []."""
    from dataclasses import replace

    from mallocgame.solution import load_solution, save_solution

    assert SOLUTION.allocations
    again = replace(SOLUTION, allocations=(a for a in SOLUTION.allocations))
    assert again.allocations == SOLUTION.allocations and isinstance(again.allocations, tuple)
    assert (
        replace(SOLUTION, allocations=list(SOLUTION.allocations)).allocations == again.allocations
    )
    save_solution(again, tmp_path / "s.json")
    assert load_solution(tmp_path / "s.json").allocations == SOLUTION.allocations


def test_numpy_numbers_and_actions_are_kept_as_the_files_types() -> None:
    from dataclasses import replace

    import numpy as np

    s = replace(
        SOLUTION,
        reward_s=np.float32(0.5),
        normalized_reward=np.float64(0.25),
        wall_s=np.int64(2),
        bound_s=np.float32(1.0),
        actions=np.array([0, 1, 2]),
    )
    numbers = (s.reward_s, s.normalized_reward, s.wall_s, s.bound_s)
    assert numbers == (0.5, 0.25, 2.0, 1.0) and all(type(v) is float for v in numbers)
    assert s.actions == (0, 1, 2) and all(type(a) is int for a in s.actions)
    assert replace(SOLUTION, actions=[0, 1, 2]).actions == (0, 1, 2)


def test_a_solution_made_with_numpy_seed_and_work_saves_and_loads(tmp_path) -> None:
    from dataclasses import replace

    import numpy as np

    s = replace(SOLUTION, seed=np.int64(7), work={"games": np.int64(3), "rate": np.float32(0.5)})
    assert type(s.seed) is int and s.work == {"games": 3, "rate": 0.5}
    assert type(s.work["games"]) is int and type(s.work["rate"]) is float
    save_solution(s, tmp_path / "s.json")
    assert load_solution(tmp_path / "s.json") == s


@pytest.mark.parametrize(
    "args, needle",
    [
        (
            (0, "Copy", "512", 0, 2),
            r"^allocation: 'buffer' and 'offset' must be integers of magnitude "
            r"at most 2\*\*53, not 0 and '512'$",
        ),
        ((0, "Copy", float("nan"), 0, 2), "'buffer' and 'offset' must be integers"),
        ((0, "Copy", 2**60, 0, 2), "'buffer' and 'offset' must be integers of magnitude at most 2"),
        ((True, "Copy", 0, 0, 2), "'buffer' and 'offset' must be integers"),
        ((0, 1, 0, 0, 2), r"^allocation of buffer 0: 'action' must be a string, not 1$"),
        (
            (0, "Copy", 0, 0.5, 2),
            r"'start' and 'end' must be None or integers of magnitude at most 2\*\*53, not 0\.5 and 2$",
        ),
        ((0, "Copy", 0, 0, "2"), "'start' and 'end' must be None or integers"),
        (
            (0, "Copy", 0, 0, 2, (0,)),
            r"'copy' must be None or a pair of integers of magnitude at most 2\*\*53, not \(0,\)",
        ),
        ((0, "Copy", 0, 0, 2, "01"), "'copy' must be None or a pair"),
        ((0, "Copy", 0, 0, 2, (0, 1.5)), "'copy' must be None or a pair"),
    ],
)
def test_a_malformed_allocation_is_a_typed_error(args: tuple, needle: str) -> None:
    with pytest.raises(SolutionError, match=needle):
        Allocation(*args)


def test_an_allocation_takes_numpy_integers_and_leaves_the_rules_to_the_check() -> None:
    import numpy as np

    Allocation(-1, "Drop", 0, None, 3, (2, 1))  # well typed: mallocgame.check judges the rest

    a = Allocation(np.int64(3), "Copy", np.int32(64), np.int64(0), np.int64(2), [np.int64(0), 1])
    assert a == Allocation(3, "Copy", 64, 0, 2, (0, 1))
    assert all(type(v) is int for v in (a.buffer, a.offset, a.start, a.end, *a.copy))
    assert json.loads(json.dumps(a.to_dict()))["copy"] == [0, 1]


def test_save_never_writes_a_non_finite_number(tmp_path: Path) -> None:
    from dataclasses import replace

    path = tmp_path / "s.json"
    info = {"loss": float("nan"), "curve": [1.0, float("inf")], "ok": {"x": -float("inf")}}
    diverged = replace(SOLUTION, info=info)
    save_solution(diverged, path)
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert load_solution(path).info == {"loss": None, "curve": [1.0, None], "ok": {"x": None}}


def test_save_to_a_directory_is_one_output_error_and_leaves_it(tmp_path: Path) -> None:
    from mallocgame.errors import OutputFileError

    with pytest.raises(OutputFileError, match=r"a directory, not a file$"):
        save_solution(SOLUTION, tmp_path)
    assert tmp_path.is_dir() and list(tmp_path.iterdir()) == []


def test_the_largest_seed_round_trips(tmp_path: Path) -> None:
    from dataclasses import replace

    path = tmp_path / "s.json"
    # the largest seed a request takes; one in a file from before requests were checked
    for seed in (2**63 - 1, -1):
        save_solution(replace(SOLUTION, seed=seed), path)
        assert load_solution(path).seed == seed
