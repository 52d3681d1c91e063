"""A sweep record's numbers recomputed from the solution it keeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mallocgame.bench.recheck import Rechecker, checked_candidates
from mallocgame.bench.speedups import candidate_records
from mallocgame.bench.sweep import Job, job_path, job_records, run_sweep
from mallocgame.simulate import baseline_latency, simulate
from mallocgame.solution import load_solution
from mallocgame.solvers.bound import upper_bound
from mallocgame.workloads.registry import load_workload

PROGRAM = "xla-v1/lstm_infer"


def _record(tmp_path: Path, solver: str) -> tuple[Path, dict]:
    job = Job(PROGRAM, solver, 0, None, 2)
    run_sweep([job], tmp_path, workers=1)
    path = job_path(tmp_path, job)
    return path, json.loads(path.read_text())


def test_every_number_a_table_reads_is_recomputed(tmp_path: Path) -> None:
    path, doc = _record(tmp_path, "random")
    lies = {
        "valid": True,
        "failures": "",
        "latency_s": 1e-9,
        "baseline_latency_s": -1.0,
        "reward_s": 1e3,
        "normalized_reward": 0.99,
        "upper_bound_s": 1e-12,
        "bound_s": 1e-12,
        "buffers": 1,
        "work": {"games": 9},
    }
    record = Rechecker().record(path, {**doc, **lies})
    inst = load_workload(PROGRAM)
    solution = load_solution(path)
    assert record["valid"] and record["failures"] == ""
    assert record["latency_s"] == simulate(inst, solution).latency_s
    assert record["baseline_latency_s"] == baseline_latency(inst)
    assert record["reward_s"] == solution.reward_s
    assert record["normalized_reward"] == solution.normalized_reward
    assert record["upper_bound_s"] == pytest.approx(upper_bound(inst)) and record["bound_s"] is None
    assert record["buffers"] == inst.num_buffers and record["work"] == dict(solution.work)
    assert all(record[k] == doc[k] for k in ("program", "solver", "seed"))


@pytest.mark.parametrize(
    "edit, reason",
    [
        (
            lambda d: d["solution"].update(normalized_reward=7.5),
            "its solution fails check: reward_mismatch",
        ),
        (
            lambda d: d["solution"].update(instance_sha256="0" * 64),
            "its solution fails check: instance_mismatch",
        ),
        (lambda d: d["solution"]["allocations"].pop(), "its solution fails check"),
        (lambda d: d["solution"].pop("allocations"), "its solution cannot be read"),
        (lambda d: d.pop("solution"), "keeps no solution to re-check"),
        (lambda d: d.update(program="no/such-program"), "cannot load its program to re-check it"),
        (lambda d: d.update(program=None), "names no program"),
        (lambda d: d.update(seed=1), "its seed 1 is not its solution's"),  # another cell's
        (lambda d: d.update(solver="es"), "its solver 'es' is not its solution's"),
    ],
)
def test_a_record_that_cannot_be_rechecked_is_invalid_with_one_line(
    tmp_path: Path, edit, reason: str
) -> None:
    path, doc = _record(tmp_path, "heuristic")
    edit(doc)
    record = Rechecker().record(path, {**doc, "valid": True, "latency_s": 1.0})
    assert not record["valid"] and record["latency_s"] is None
    assert record["failures"].startswith(f"{path}: {reason}") and "\n" not in record["failures"]


def test_job_records_are_rechecked(tmp_path: Path) -> None:
    path, doc = _record(tmp_path, "random")
    path.write_text(json.dumps({**doc, "latency_s": 1e-9}))
    [record] = job_records(tmp_path, [Job(PROGRAM, "random", 0, None, 2)])
    assert record["latency_s"] == doc["latency_s"]


def test_a_hybrids_candidates_are_the_checked_numbers(tmp_path: Path) -> None:
    path, doc = _record(tmp_path, "best-of")  # heuristic and random; the heuristic is faster
    info = doc["solution"]["info"]
    assert info["chosen"] == "heuristic"
    rechecker = Rechecker()
    # the chosen one's stored numbers are not read: the record's solution is
    info["candidates"]["heuristic"].update(latency_s=1e-9, normalized_reward=0.99)
    record = rechecker.record(path, doc)
    candidates = checked_candidates(record)
    assert candidates["heuristic"]["latency_s"] == record["latency_s"] == doc["latency_s"]
    assert candidates["heuristic"]["normalized_reward"] == record["normalized_reward"]
    assert candidates["random"]["valid"]
    assert candidates["random"]["latency_s"] >= record["latency_s"]
    # another's stored latency below the chosen one's (the fastest) is not one a run writes
    info["candidates"]["random"]["latency_s"] = record["latency_s"] / 2
    candidates = checked_candidates(rechecker.record(path, doc))
    assert not candidates["random"]["valid"]
    assert "below the chosen one's" in candidates["random"]["failures"]
    info["candidates"]["random"]["latency_s"] = float("nan")
    assert not checked_candidates(rechecker.record(path, doc))["random"]["valid"]
    # a record whose solution fails the check: none of its candidates counts
    doc["solution"]["normalized_reward"] = 7.5
    derived = candidate_records([rechecker.record(path, doc)])
    assert [d["valid"] for d in derived] == [False, False]
    assert all("fails check" in d["failures"] for d in derived)


@pytest.mark.parametrize("chosen", [7, "nosuch", ["heuristic"], {"heuristic": 1}])
def test_a_hybrid_whose_chosen_names_no_candidate_has_every_candidate_invalid(
    tmp_path: Path, chosen
) -> None:
    """A list or an object as info["chosen"] ended bench speedups in a TypeError traceback
    (unhashable type); like a number, it names no candidate."""
    path, doc = _record(tmp_path, "best-of")
    doc["solution"]["info"]["chosen"] = chosen
    record = Rechecker().record(path, doc)
    assert record["valid"]  # the record's own answer is re-checked from its solution
    candidates = checked_candidates(record)
    assert sorted(candidates) == ["heuristic", "random"]
    assert all(not c["valid"] for c in candidates.values())
    assert all("names no chosen candidate" in c["failures"] for c in candidates.values())
    assert [d["valid"] for d in candidate_records([record])] == [False, False]


@pytest.mark.parametrize("solution", ["oops", [], None, {"info": "oops"}])
def test_a_record_whose_solution_is_not_an_object_has_no_candidates(
    tmp_path: Path, solution
) -> None:
    path, doc = _record(tmp_path, "heuristic")
    record = Rechecker().record(path, {**doc, "solution": solution})
    assert not record["valid"]
    assert checked_candidates(record) == {} and candidate_records([record]) == []
