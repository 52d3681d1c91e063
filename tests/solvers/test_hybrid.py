"""The best-of solver keeps the candidate with the lowest simulated latency."""

from __future__ import annotations

import pytest

from mallocgame.check import check_solution
from mallocgame.errors import SolverError
from mallocgame.simulate import simulate
from mallocgame.solvers import SolveRequest
from mallocgame.solvers.hybrid import BestOfSolver
from mallocgame.workloads.registry import load_workload


def test_best_of_keeps_the_fastest_valid_candidate() -> None:
    inst = load_workload("xla-v1/resnet_infer")
    solution = BestOfSolver().solve(inst, SolveRequest(seed=0, work=2, options={"solvers": ("drop", "random")}))
    record = solution.info["candidates"]
    assert set(record) == {"drop", "random"} and all(c["valid"] for c in record.values())
    chosen = min(record, key=lambda n: record[n]["latency_s"])
    assert solution.info["chosen"] == chosen == "random"
    assert solution.solver == "best-of"
    assert check_solution(inst, solution).ok
    assert simulate(inst, solution).latency_s == record["random"]["latency_s"]


def test_best_of_options_name_known_solvers() -> None:
    solver = BestOfSolver()
    solver.check_options({})
    solver.check_options({"solvers": ["drop", "greedy"]})
    solver.check_options({"solvers": "drop, greedy"})  # as --option solvers=drop,greedy gives it
    for bad, needle in [({"solvers": ["drop", "nope"]}, "unknown solver 'nope'"),
                        ({"solvers": "drop,egrll"}, "unknown solver 'egrll'"),
                        ({"solvers": ""}, "names no solver"), ({"solvers": 3}, "must be a list of str"),
                        ({"solver": "drop"}, r"best-of: unknown option 'solver' \(valid: solvers\)")]:
        with pytest.raises(SolverError, match=needle):
            solver.check_options(bad)
    inst = load_workload("synthetic-v1/small")
    with pytest.raises(SolverError, match="unknown solver 'nope'"):
        solver.solve(inst, SolveRequest(options={"solvers": "drop,nope"}))
    solution = solver.solve(inst, SolveRequest(seed=0, options={"solvers": "drop,greedy"}))
    assert set(solution.info["candidates"]) == {"drop", "greedy"}
