"""Projecting mappings onto game trajectories (demonstrations for game-playing agents)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mallocgame.check import check_solution
from mallocgame.game.state import replay
from mallocgame.instance import instance_from_dict
from mallocgame.latency import mapping_reward
from mallocgame.solution import Allocation
from mallocgame.solvers.base import SolveRequest
from mallocgame.solvers.heuristic import HeuristicSolver
from mallocgame.solvers.projection import project
from mallocgame.solvers.random import RandomSolver
from mallocgame.workloads.registry import load_workload, workload_names
from mallocgame.workloads.synthetic import generate
from tests.builders import I, X, build

CONFORMANCE = Path(__file__).parents[1] / "data" / "conformance"
KEPT_TOL = 1e-9


def _conformance(name: str):
    return instance_from_dict(json.loads((CONFORMANCE / f"{name}.json").read_text())["instance"])


def _assert_trajectory(inst, solution) -> None:
    report = check_solution(inst, solution)
    assert report.ok, report.summary()
    assert solution.actions is not None and len(solution.actions) == inst.num_buffers


@pytest.mark.parametrize("name", [n for n in workload_names() if n != "synthetic-v1/16k"])
def test_heuristic_mappings_project_to_legal_trajectories(name: str) -> None:
    inst = load_workload(name)
    mapping = HeuristicSolver().solve(inst)
    trajectory, kept = project(inst, mapping)
    _assert_trajectory(inst, trajectory)
    assert trajectory.solver == "heuristic" and trajectory.seed == mapping.seed
    assert 0.0 <= kept <= 1.0 + KEPT_TOL
    assert kept == pytest.approx(trajectory.reward_s / mapping.reward_s, rel=1e-12)
    assert trajectory.info["kept_fraction"] == kept
    assert trajectory.info["projected_from"] == mapping.reward_s
    # The game's first-fit offsets lose some placements, most of the reward stays.
    # inplace_update_loop keeps least (0.385 on the 28-program suite): the game's
    # lowest-offset placement and Drop-backup of its loop-carried groups cost it.
    assert kept >= 0.35
    if name.startswith("synthetic-v1/") and name != "synthetic-v1/small":
        assert kept >= 0.95
    # Every fast buffer of the trajectory was fast in the mapping.
    assert {a.buffer for a in trajectory.allocations} <= {a.buffer for a in mapping.allocations}


def _round_trip(inst, solution) -> None:
    back, kept = project(inst, solution.allocations, solver="again")
    assert back.actions == solution.actions
    assert back.allocations == solution.allocations
    assert back.reward_s == solution.reward_s
    assert kept == pytest.approx(1.0, abs=1e-9)
    assert back.solver == "again" and back.info["fallbacks"] == 0 and back.info["backups"] == 0


@pytest.mark.parametrize("seed", range(4))
def test_a_trajectory_projects_onto_itself(seed: int) -> None:
    for inst in (generate(250, seed, capacity_fraction=0.1), _conformance("random104"), load_workload("xla-v1/lstm_infer")):
        solution = RandomSolver().solve(inst, SolveRequest(seed=seed, work=2))
        _round_trip(inst, solution)


def test_projected_trajectory_is_a_fixed_point() -> None:
    inst = load_workload("xla-v1/donated_sgd_step")
    trajectory, _ = project(inst, HeuristicSolver().solve(inst))
    _round_trip(inst, trajectory)


def test_empty_mapping_projects_to_all_drop() -> None:
    inst = generate(80, 1)
    trajectory, kept = project(inst, [])
    assert trajectory.actions == (2,) * inst.num_buffers and trajectory.reward_s == 0.0
    assert kept == 1.0 and trajectory.solver == "projection"


def test_fallback_to_the_other_fast_action() -> None:
    # Input P read at 1 and 3. The (invalid) mapping asks NoCopy for the read at 1,
    # which has nothing to extend: the projection copies it in instead, then keeps
    # it for the read at 3 as asked.
    inst = build(tensors=[X(100)], instructions=[I(), I(reads=[0]), I(), I(reads=[0])])
    mapping = [Allocation(0, "NoCopy", 0, 1, 1), Allocation(1, "NoCopy", 0, 2, 3)]
    trajectory, kept = project(inst, mapping)
    _assert_trajectory(inst, trajectory)
    assert trajectory.actions == (0, 1)
    assert trajectory.info["fallbacks"] == 1
    assert kept == pytest.approx(1.0)
    assert replay(inst, list(trajectory.actions)).return_s == mapping_reward(inst, [0, 1])


def test_unknown_buffer_is_rejected() -> None:
    inst = generate(20, 0)
    with pytest.raises(ValueError, match="unknown buffer"):
        project(inst, [Allocation(10_000, "Copy", 0, 0, 0)])
