"""Reward against simulated latency (the paper's Table 5 and Figure 6).

Two ways to draw the solutions of a program, each checked, with its reward and its
simulated latency, and the Pearson correlation between the two (the reward is the
paper's proxy for latency, so a strongly negative correlation says the proxy works):

- :func:`reward_latency_correlation`: random games with different seeds, the
  heuristic's mapping and its projection onto a game trajectory;
- :func:`training_correlation`: as the paper did, about ten self-play games taken at
  evenly spaced stages of one MMap-MuZero training run (``muzero``, JAX needed).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mallocgame.bench.inputs import budget_seconds, whole_number
from mallocgame.bench.markdown import markdown_table
from mallocgame.check import check_solution
from mallocgame.errors import SolverError
from mallocgame.fileio import write_bytes_atomic
from mallocgame.instance import Instance
from mallocgame.simulate import baseline_latency, simulate
from mallocgame.solution import Solution
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.solvers.projection import project
from mallocgame.workloads.registry import load_workload

__all__ = [
    "CorrelationRow",
    "reward_latency_correlation",
    "format_correlation",
    "TrainingSample",
    "TrainingCorrelation",
    "training_correlation",
    "UNREAD_SETTINGS",
    "format_training_correlation",
    "write_training_csv",
    "plot_training_correlation",
]


@dataclass(frozen=True)
class CorrelationRow:
    program: str
    solutions: int
    pearson: float  # correlation of reward_s and simulated latency_s
    min_speedup: float  # over all-slow, among the solutions
    max_speedup: float


def reward_latency_correlation(program: str, random_games: int = 40) -> CorrelationRow:
    """Pearson(reward, latency) over ``random_games`` (at least 1) random games, the
    heuristic and its projection; NaN where every reward or every latency is the same."""
    whole_number(random_games, "random_games", 1)
    inst = load_workload(program)
    solutions = [
        get_solver("random").solve(inst, SolveRequest(seed=seed)) for seed in range(random_games)
    ]
    heuristic = get_solver("heuristic").solve(inst)
    solutions += [
        heuristic,
        project(inst, heuristic, repairs=0)[0],
    ]  # the plain replay, as in the published table
    rewards = [solution.reward_s for solution in solutions]
    latencies = [_checked_latency(inst, solution, program) for solution in solutions]
    base = baseline_latency(inst)
    pearson = _pearson(rewards, latencies)
    return CorrelationRow(
        program, len(solutions), pearson, base / max(latencies), base / min(latencies)
    )


def format_correlation(rows: list[CorrelationRow]) -> str:
    lines = [
        "| program | solutions | Pearson(reward, latency) | speedup range |",
        "| --- | ---: | ---: | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r.program} | {r.solutions} | {_shown(r.pearson)} | "
            f"{r.min_speedup:.3f} – {r.max_speedup:.3f} |"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class TrainingSample:
    """One self-play game of a training run, checked and simulated."""

    program: str
    elapsed_s: float  # seconds into the run when the game was complete
    game: int  # its place among the run's complete self-play games, from 1
    normalized_reward: float  # SPEC section 5 reward over the normalizer
    latency_s: float  # simulated end-to-end latency, seconds
    speedup: float  # the heuristic's simulated latency over this one's


@dataclass(frozen=True)
class TrainingCorrelation:
    """Table 5's row: the samples of one run and the Pearson correlation of their
    rewards and latencies (NaN where every sample has the same reward or latency)."""

    program: str
    seconds: float  # the run's wall-clock budget (its duration where it had a work budget only)
    seed: int
    games: int  # complete self-play games in the run
    samples: tuple[TrainingSample, ...]
    pearson: float
    answer_speedup: float  # the run's answer (its best game) over the heuristic, simulated

    @property
    def distinct_rewards(self) -> int:
        return len({round(s.normalized_reward, 9) for s in self.samples})


def _shown(pearson: float) -> str:
    """A Pearson correlation as a table shows it: ``n/a`` where it is undefined (NaN)."""
    return "n/a" if np.isnan(pearson) else f"{pearson:.3f}"


def _pearson(xs: list[float], ys: list[float]) -> float:
    if len(xs) < 2 or np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return float("nan")
    return float(np.corrcoef(xs, ys)[0, 1])


def _checked_latency(inst: Instance, solution: Solution, program: str) -> float:
    report = check_solution(inst, solution)
    if not report.ok:
        raise AssertionError(f"{program}: {solution.solver} answer invalid: {report.summary()}")
    return simulate(inst, solution).latency_s


UNREAD_SETTINGS = ("checkpoint_dir", "checkpoint_seconds", "progress", "progress_seconds")
"""muzero settings :func:`training_correlation` refuses: its run has no checkpoint folder
and no progress lines, so they would be ignored without a word."""


def training_correlation(
    program: str,
    seconds: float | None = None,
    *,
    games: int | None = None,
    seed: int = 0,
    samples: int = 10,
    options: Mapping[str, Any] | None = None,
) -> TrainingCorrelation:
    """Train ``muzero`` (settings ``options``) on ``program`` for ``seconds`` or until
    ``games`` self-play games are complete (the first to end; one is needed); of its
    complete self-play games, in the order they were complete, take ``samples`` at
    evenly spaced places (all of them where there are fewer), check and simulate each.

    Raises :class:`~mallocgame.errors.SolverError` when JAX is missing, for a setting of
    :data:`UNREAD_SETTINGS` (the run keeps no checkpoints and prints no progress lines),
    or when the run completes fewer than two self-play games (nothing to correlate).
    """
    from mallocgame.game.state import replay as replay_actions
    from mallocgame.solvers.base import Stopwatch, solution_from_game

    if samples < 2:
        raise SolverError(f"samples must be at least 2, not {samples}")
    if seconds is not None:
        budget_seconds(seconds, "seconds")  # NaN would never end the run
    if seconds is None and games is None:
        raise SolverError("the training run needs a budget: seconds, games or both")
    config = get_solver("muzero").config(dict(options or {}))
    for key in UNREAD_SETTINGS:  # asked of the run, which does none (progress=false: as it does)
        if key in (options or {}) and getattr(config, key) not in (None, False):
            raise SolverError(
                f"the training correlation keeps no checkpoints and prints no progress lines: "
                f"drop the setting {key}"
            )
    try:
        from mallocgame.solvers.muzero.train import Trainer
    except ImportError as exc:
        raise SolverError(
            f"the training correlation needs JAX, flax, optax and mctx "
            f"(pip install 'mallocgame[muzero]'): {exc}"
        ) from None
    inst = load_workload(program)
    played: list[
        tuple[float, tuple[int, ...]]
    ] = []  # (seconds into the run, actions) per complete game
    trainer = Trainer(inst, config, seed=seed, answer="search", solver_name="muzero")
    answer = trainer.run(
        games=games,
        clock=Stopwatch(seconds),
        on_game=lambda done, elapsed: played.append((elapsed, done.actions)),
    )
    if len(played) < 2:
        raise SolverError(
            f"{program}: {len(played)} self-play game(s) complete in the budget; "
            f"the correlation needs at least 2 (give it more time)"
        )
    heuristic = _checked_latency(inst, get_solver("heuristic").solve(inst), program)
    picked = sorted(
        {int(round(i)) for i in np.linspace(0, len(played) - 1, min(samples, len(played)))}
    )
    rows = []
    for index in picked:
        elapsed, actions = played[index]
        solution = solution_from_game(
            inst, replay_actions(inst, actions), solver="muzero", seed=seed, wall_s=elapsed
        )
        latency = _checked_latency(inst, solution, program)
        rows.append(
            TrainingSample(
                program,
                round(elapsed, 3),
                index + 1,
                solution.normalized_reward,
                latency,
                heuristic / latency,
            )
        )
    pearson = _pearson([r.normalized_reward for r in rows], [r.latency_s for r in rows])
    answer_speedup = heuristic / _checked_latency(inst, answer, program)
    budget = seconds if seconds is not None else answer.wall_s
    return TrainingCorrelation(
        program, budget, seed, len(played), tuple(rows), pearson, answer_speedup
    )


def format_training_correlation(rows: list[TrainingCorrelation]) -> str:
    """Table 5: per program the agent's speedup over the heuristic and the correlation."""
    return markdown_table(
        [
            "program",
            "budget",
            "games",
            "samples (distinct rewards)",
            "answer's speedup over heuristic",
            "Pearson(reward, latency)",
        ],
        [
            [
                r.program,
                f"{r.seconds:g} s",
                f"{r.games:,}",
                f"{len(r.samples)} ({r.distinct_rewards})",
                f"{r.answer_speedup:.4f}",
                _shown(r.pearson),
            ]
            for r in rows
        ],
    )


def write_training_csv(rows: list[TrainingCorrelation], path: Path) -> None:
    """One line per sample: program, seed, game, elapsed_s, normalized_reward, latency_s, speedup."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(
        ["program", "seed", "game", "elapsed_s", "normalized_reward", "latency_s", "speedup"]
    )
    for row in rows:
        for s in row.samples:
            writer.writerow(
                [
                    s.program,
                    row.seed,
                    s.game,
                    f"{s.elapsed_s:.3f}",
                    f"{s.normalized_reward:.6f}",
                    f"{s.latency_s:.9g}",
                    f"{s.speedup:.6f}",
                ]
            )
    write_bytes_atomic(path, buffer.getvalue().encode())


def plot_training_correlation(rows: list[TrainingCorrelation], path: Path) -> None:
    """Figure 6: one panel per program, simulated latency against normalized reward,
    each sample coloured by when in the run it was played."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mallocgame.viz import literal_text

    cols = min(3, len(rows))
    nrows = -(-len(rows) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.4 * nrows), squeeze=False)
    for ax, row in zip(axes.flat, rows):
        rewards = [s.normalized_reward for s in row.samples]
        latencies_ms = [s.latency_s * 1e3 for s in row.samples]
        points = ax.scatter(
            rewards, latencies_ms, c=[s.elapsed_s for s in row.samples], cmap="viridis", s=28
        )
        pearson = _shown(row.pearson)
        ax.set_title(f"{literal_text(row.program.split('/')[-1])}\nPearson {pearson}", fontsize=9)
        ax.set_xlabel("normalized reward")
        ax.set_ylabel("simulated latency (ms)")
        fig.colorbar(points, ax=ax, label="seconds into training")
    for ax in list(axes.flat)[len(rows) :]:
        ax.axis("off")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    write_bytes_atomic(path, buffer.getvalue())
