"""``random``: the best of its games; under a wall-clock budget the game in play when the
clock is spent ends Drop first, as ``greedy``'s does."""

from __future__ import annotations

from mallocgame.check import check_solution
from mallocgame.game.state import replay
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads.registry import load_workload


def test_a_work_budget_plays_whole_random_games() -> None:
    inst = load_workload("xla-v1/gru_infer")
    answer = get_solver("random").solve(inst, SolveRequest(seed=3, work=4))
    again = get_solver("random").solve(inst, SolveRequest(seed=3, work=4))
    assert answer.actions == again.actions and answer.work["games"] == 4
    assert "random_until" not in answer.info and check_solution(inst, answer).ok


def test_a_spent_clock_completes_the_game_drop_first() -> None:
    # a random game of it backs up about a hundred times: many times a short budget
    inst = load_workload("hf-v1/qwen2_0_5b_train_b8_s2048")
    answer = get_solver("random").solve(inst, SolveRequest(seed=0, seconds=1e-9))
    assert answer.info["random_until"] == 0 and answer.work["games"] == 1
    assert check_solution(inst, answer).ok and replay(inst, answer.actions).complete
    drop_first = get_solver("greedy").solve(inst, SolveRequest(seed=0, seconds=1e-9))
    assert answer.actions == drop_first.actions  # Drop first from the first buffer
