"""Reward against simulated latency (the paper's Table 5).

For each program: many solutions (random games with different seeds, the heuristic's
mapping and its projection onto a game trajectory), each checked, its reward and its
simulated latency; the Pearson correlation between the two. The reward is the
paper's proxy for latency, so a strongly negative correlation says the proxy works.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mallocgame.check import check_solution
from mallocgame.simulate import baseline_latency, simulate
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.solvers.projection import project
from mallocgame.workloads.registry import load_workload

__all__ = ["CorrelationRow", "reward_latency_correlation", "format_correlation"]


@dataclass(frozen=True)
class CorrelationRow:
    program: str
    solutions: int
    pearson: float  # correlation of reward_s and simulated latency_s
    min_speedup: float  # over all-slow, among the solutions
    max_speedup: float


def reward_latency_correlation(program: str, random_games: int = 40) -> CorrelationRow:
    """Pearson(reward, latency) over ``random_games`` random games, the heuristic and its projection."""
    inst = load_workload(program)
    solutions = [get_solver("random").solve(inst, SolveRequest(seed=seed)) for seed in range(random_games)]
    heuristic = get_solver("heuristic").solve(inst)
    solutions += [heuristic, project(inst, heuristic)[0]]
    rewards, latencies = [], []
    for solution in solutions:
        report = check_solution(inst, solution)
        if not report.ok:
            raise AssertionError(f"{program}: {solution.solver} answer invalid: {report.summary()}")
        rewards.append(solution.reward_s)
        latencies.append(simulate(inst, solution).latency_s)
    base = baseline_latency(inst)
    pearson = float(np.corrcoef(rewards, latencies)[0, 1])
    return CorrelationRow(program, len(solutions), pearson, base / max(latencies), base / min(latencies))


def format_correlation(rows: list[CorrelationRow]) -> str:
    lines = ["| program | solutions | Pearson(reward, latency) | speedup range |",
             "| --- | ---: | ---: | --- |"]
    for r in rows:
        lines.append(f"| {r.program} | {r.solutions} | {r.pearson:.3f} | {r.min_speedup:.3f} – {r.max_speedup:.3f} |")
    return "\n".join(lines)
