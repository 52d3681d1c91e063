"""muzero-prod: the faster of the heuristic's and the agent's mapping, never slower than
the heuristic in simulation, on every bundled program."""

from __future__ import annotations

import pytest

from mallocgame.check import check_solution
from mallocgame.simulate import simulate
from mallocgame.solution import load_solution, save_solution
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.solvers.hybrid import choose_fastest
from mallocgame.workloads.registry import load_workload, workload_names
from tests.solvers.muzero.test_muzero_train import TINY

ONE_GAME = {**TINY, "demonstrations": "greedy", "parallel_games": 1, "greedy_games": 1, "num_simulations": 2}
"""The cheapest agent: one game of two simulations per move; the greedy game as its
demonstration, which answers where the agent's game is not complete within the budget
(one game of synthetic-v1/16k takes far longer: docs/muzero-experiments.md)."""


@pytest.mark.parametrize("name", workload_names())
def test_never_slower_than_the_heuristic(name: str) -> None:
    inst = load_workload(name)
    answer = get_solver("muzero-prod").solve(inst, SolveRequest(seed=0, work=1, seconds=5.0, options=ONE_GAME))
    heuristic = get_solver("heuristic").solve(inst)
    assert check_solution(inst, answer).ok
    latency = simulate(inst, answer).latency_s
    assert latency <= simulate(inst, heuristic).latency_s
    candidates = answer.info["candidates"]
    assert set(candidates) == {"heuristic", "muzero"} and all(c["valid"] for c in candidates.values())
    assert latency == answer.info["latency_s"] == min(c["latency_s"] for c in candidates.values())
    assert candidates["heuristic"]["reward_s"] == heuristic.reward_s


def test_the_answer_records_both_candidates_and_the_winner(lstm, tmp_path) -> None:
    seen: list[str] = []
    request = SolveRequest(seed=0, work=8, options=TINY, callback=lambda imp: seen.append(imp.solution.solver))
    answer = get_solver("muzero-prod").solve(lstm, request)
    assert answer.solver == "muzero-prod" and answer.seed == 0
    assert seen[0] == "heuristic" and set(seen[1:]) == {"muzero"}  # the heuristic first, then the agent's bests
    chosen = answer.info["chosen"]
    other = ({"heuristic", "muzero"} - {chosen}).pop()
    candidates = answer.info["candidates"]
    assert candidates[chosen]["latency_s"] <= candidates[other]["latency_s"]
    assert answer.normalized_reward == candidates[chosen]["normalized_reward"]
    assert answer.work["games"] >= 8  # the agent's work
    save_solution(answer, tmp_path / "a.json")
    assert load_solution(tmp_path / "a.json").info["candidates"] == candidates


def test_a_work_budget_gives_the_same_answer() -> None:
    inst = load_workload("xla-v1/gru_infer")
    runs = [get_solver("muzero-prod").solve(inst, SolveRequest(seed=3, work=4, options=TINY)) for _ in range(2)]
    assert runs[0].allocations == runs[1].allocations and runs[0].info["chosen"] == runs[1].info["chosen"]


def test_a_tie_goes_to_the_earlier_candidate(lstm) -> None:
    heuristic = get_solver("heuristic").solve(lstm)
    again = get_solver("heuristic").solve(lstm, SolveRequest(seed=1))
    choice = choose_fastest(lstm, [heuristic, again])
    assert choice.solution is heuristic
    assert [c.solver for c in choice.candidates] == ["heuristic", "heuristic"]


def test_muzero_settings_are_its_settings_with_restarts_on_by_default() -> None:
    prod = get_solver("muzero-prod").settings({"num_simulations": "8"})
    assert prod["restart_fraction"] == 0.5
    assert prod == get_solver("muzero").settings({"num_simulations": "8", "restart_fraction": "0.5"})
    assert get_solver("muzero-prod").settings({"restart_fraction": "0"})["restart_fraction"] == 0.0


def test_prod_and_muzero_configs_share_one_compilation() -> None:
    from mallocgame.solvers.muzero.config import MuZeroConfig, MuZeroProdConfig
    from mallocgame.solvers.muzero.train import compiled_functions

    assert compiled_functions(MuZeroProdConfig()) is compiled_functions(MuZeroConfig())


def test_the_agents_candidate_is_its_best_game_with_search_or_its_policys_alone(lstm) -> None:
    seen: list = []
    request = SolveRequest(seed=0, work=8, options={**TINY, "eval_every": 1}, callback=seen.append)
    answer = get_solver("muzero-prod").solve(lstm, request)
    assert answer.work["eval_games"] > 0  # the policy network played alone too
    agent = max((imp.solution for imp in seen if imp.solution.solver == "muzero"), key=lambda s: s.reward_s)
    assert answer.info["candidates"]["muzero"]["reward_s"] == agent.reward_s
