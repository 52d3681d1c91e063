"""The ``exhaustive`` solver: the optimum and its bound where float64 sums cancel."""

from __future__ import annotations

from mallocgame.check import check_solution
from mallocgame.solvers import get_solver
from tests.builders import cancelling_instance


def test_the_answer_is_the_optimum_and_its_reward_the_bound() -> None:
    """cancelling_instance's float64 score ranks [0, 0, 2, 0] (reward 1.9e-4) first: the
    answer was that game, and its bound below the optimum's reward, 2.3e-4."""
    inst = cancelling_instance()
    answer = get_solver("exhaustive").solve(inst)
    assert answer.actions == (0, 2, 0, 2) and check_solution(inst, answer).ok
    assert answer.reward_s == answer.bound_s == 2.3e-4
