"""The best-of solver keeps the candidate with the lowest simulated latency."""

from __future__ import annotations

from mallocgame.check import check_solution
from mallocgame.simulate import simulate
from mallocgame.solvers import SolveRequest
from mallocgame.solvers.hybrid import BestOfSolver
from mallocgame.workloads.registry import load_workload


def test_best_of_keeps_the_fastest_valid_candidate() -> None:
    inst = load_workload("xla-v1/resnet_infer")
    solution = BestOfSolver(("drop", "random")).solve(inst, SolveRequest(seed=0, work=2))
    record = solution.extra["candidates"]
    assert set(record) == {"drop", "random"} and all(c["valid"] for c in record.values())
    chosen = min(record, key=lambda n: record[n]["latency_s"])
    assert solution.extra["chosen"] == chosen == "random"
    assert solution.solver == "best-of"
    assert check_solution(inst, solution).ok
    assert simulate(inst, solution).latency_s == record["random"]["latency_s"]
