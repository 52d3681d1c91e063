"""Answers pinned bit for bit: every solver that takes a work budget, on fixed
(program, solver, seed, work budget) cells, gives the same actions and allocations
as the build that recorded :data:`FINGERPRINTS`.

A structural change (the solver contract, the public API, moved modules) must leave
every hash as it is; a change that means to change answers updates the hash here
and says so. Regenerate with ``python tests/solvers/test_fingerprint.py``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from mallocgame.instance import Instance, instance_from_dict
from mallocgame.solution import Solution
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads.registry import load_workload

TINY = Path(__file__).parents[1] / "data" / "conformance" / "tiny_alias.json"

# A MuZero run small enough for the test suite: two games a batch, two simulations,
# the cheap demonstrations only.
MUZERO = {
    "parallel_games": 2,
    "greedy_games": 1,
    "num_simulations": 2,
    "min_replay": 16,
    "batch_size": 8,
    "width": 16,
    "latent_size": 8,
    "demonstrations": "heuristic,greedy",
}

CELLS: list[tuple[str, str, int, int, dict[str, Any]]] = [
    # (program, solver, seed, work budget, options)
    ("xla-v1/gru_infer", "drop", 0, 1, {}),
    ("xla-v1/gru_infer", "random", 3, 5, {}),
    ("xla-v1/gru_infer", "greedy", 0, 1, {}),
    ("xla-v1/gru_infer", "heuristic", 0, 1, {}),
    ("xla-v1/lstm_infer", "heuristic", 0, 1, {}),
    ("xla-v1/gru_infer", "es", 1, 40, {}),
    ("xla-v1/gru_infer", "es", 2, 21, {"hidden": 4, "init": "random"}),
    ("xla-v1/gru_infer", "mcts", 0, 300, {}),
    ("xla-v1/gru_infer", "exact", 0, 500, {}),
    ("xla-v1/gru_infer", "best-of", 0, 3, {"solvers": "heuristic,random"}),
    ("tiny", "exhaustive", 0, 100_000, {}),
    ("xla-v1/gru_infer", "muzero", 0, 4, MUZERO),
    ("xla-v2/alexnet_train_b32", "msa-search", 0, 150, {}),
    ("xla-v1/gru_infer", "muzero-prod", 0, 4, {**MUZERO, "order_search_evaluations": 60}),
]

FINGERPRINTS: dict[str, str] = {
    "xla-v1/gru_infer:drop:s0:w1": "6497355b22a4f245f5051bd5edda64737c5bc856c70165a84aaa98f9003a2ecf",
    "xla-v1/gru_infer:random:s3:w5": "79f47ee0d24fb1b15638897975161fb343af9bda8ae8770754a4a8ee61095046",
    "xla-v1/gru_infer:greedy:s0:w1": "d878e99e87276bbf7562a00fbd9cb12dfe04a09e62ea1a8b66395704c847ca86",
    "xla-v1/gru_infer:heuristic:s0:w1": "ef8ce2550064aa582c21c7a51b5e42544b65d9151a0623a00cf569be98ca9f84",
    "xla-v1/lstm_infer:heuristic:s0:w1": "b503cd478c880f69752c7ba7c98e1a1a9c03e7a01c76088195e9984252c0c3e8",
    "xla-v1/gru_infer:es:s1:w40": "d4fef01f5bf0bc8a75109e3b637c47ec2d82d92661bdfa1aa2bb46afef23c396",
    "xla-v1/gru_infer:es:s2:w21:hidden=4,init=random": "b1cf489ea2a7c2cf731d1c3a635b0a3b647b114638b6b4abbfd8ad811b3c1335",
    "xla-v1/gru_infer:mcts:s0:w300": "1ac98a334b9756b2535c9880ec2681c830837f84127bfc2f3953d073af8a09d8",
    "xla-v1/gru_infer:exact:s0:w500": "fecc0ac78b951a2933f08c7e57bd38d110de53c94e27bdad30d8f1a1063c483e",
    "xla-v1/gru_infer:best-of:s0:w3:solvers=heuristic,random": "ef8ce2550064aa582c21c7a51b5e42544b65d9151a0623a00cf569be98ca9f84",
    "tiny:exhaustive:s0:w100000": "4749527c7fe112cf554a6440b55cf5269cc8cf9343921921bbb80572d938ea04",
    "xla-v1/gru_infer:muzero:s0:w4": "c25fa8436bfd658c38baaf48770f6e60dd16692320f02ffc6f5d2be9dafe4026",
    "xla-v2/alexnet_train_b32:msa-search:s0:w150": "94220090f9e577a1dd7198e798278576e651225cddff13641c9b4ba3d1671e9e",
    "xla-v1/gru_infer:muzero-prod:s0:w4": "e7a17f2d3f6278e17fa480e06b8c5ad171fa1990ec0aea89def4b08318a96684",
}


def _instance(program: str) -> Instance:
    if program == "tiny":
        return instance_from_dict(json.loads(TINY.read_text())["instance"])
    return load_workload(program)


def cell_id(cell: tuple[str, str, int, int, dict[str, Any]]) -> str:
    program, solver, seed, work, options = cell
    muzero = solver.startswith("muzero")  # its cells' many small settings go unnamed
    opts = ",".join(f"{k}={v}" for k, v in sorted(options.items()) if not muzero)
    return f"{program}:{solver}:s{seed}:w{work}" + (f":{opts}" if opts else "")


def fingerprint(solution: Solution) -> str:
    """sha256 of a solution's actions and allocations (nothing that depends on time)."""
    doc = {
        "actions": None if solution.actions is None else list(solution.actions),
        "allocations": [a.to_dict() for a in solution.allocations],
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def solve_cell(cell: tuple[str, str, int, int, dict[str, Any]]) -> Solution:
    program, solver, seed, work, options = cell
    return get_solver(solver).solve(
        _instance(program), SolveRequest(seed=seed, work=work, options=dict(options))
    )


@pytest.mark.parametrize("cell", CELLS, ids=cell_id)
def test_answer_is_pinned(cell: tuple[str, str, int, int, dict[str, Any]]) -> None:
    if cell[1].startswith("muzero"):
        pytest.importorskip("mctx")
    assert fingerprint(solve_cell(cell)) == FINGERPRINTS[cell_id(cell)]


if __name__ == "__main__":
    for cell in CELLS:
        print(f"    {cell_id(cell)!r}: {fingerprint(solve_cell(cell))!r},", flush=True)
    sys.exit(0)
