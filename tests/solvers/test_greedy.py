"""``greedy``: one deterministic game; under a wall-clock budget it still ends complete."""

from __future__ import annotations

from mallocgame.check import check_solution
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads.registry import load_workload


def test_without_a_budget_the_game_is_greedy_to_its_end_and_the_same_each_time() -> None:
    inst = load_workload("xla-v1/gru_infer")
    first = get_solver("greedy").solve(inst, SolveRequest(seed=0))
    again = get_solver("greedy").solve(inst, SolveRequest(seed=5))
    assert first.actions == again.actions and "greedy_until" not in first.info
    assert check_solution(inst, first).ok and first.normalized_reward > 0


def test_a_spent_clock_completes_the_game_drop_first() -> None:
    inst = load_workload("synthetic-v1/16k")  # its greedy game backs up for about a minute
    answer = get_solver("greedy").solve(inst, SolveRequest(seed=0, seconds=1e-9))
    assert answer.info["greedy_until"] == 0 and check_solution(inst, answer).ok
    assert answer.normalized_reward < 0.01  # nearly every buffer dropped
