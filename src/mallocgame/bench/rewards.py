"""Rewards against wall-clock time (the paper's Table 2 and Figure 5).

Each solver runs on each program with the same wall-clock budget; its best-so-far
callback gives a step curve of normalized reward against time. The curves go to a
CSV (one row per improvement) and a PNG (one panel per program).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from mallocgame.fileio import write_bytes_atomic
from mallocgame.solvers import Improvement, SolveRequest, get_solver
from mallocgame.workloads.registry import load_workload

__all__ = ["CurvePoint", "reward_curve", "normalized_upper_bound", "write_csv", "plot_curves", "final_table"]


@dataclass(frozen=True)
class CurvePoint:
    program: str
    solver: str
    seed: int
    elapsed_s: float
    normalized_reward: float
    work: str  # the solver's work counters at that point, "k=v;..."


def reward_curve(program: str, solver: str, seconds: float, seed: int = 0) -> list[CurvePoint]:
    """Every new best of ``solver`` on ``program`` within ``seconds``, plus the final answer."""
    inst = load_workload(program)
    points: list[CurvePoint] = []

    def record(imp: Improvement) -> None:
        work = ";".join(f"{k}={v}" for k, v in imp.work.items())
        points.append(CurvePoint(program, solver, seed, imp.elapsed_s, imp.solution.normalized_reward, work))

    final = get_solver(solver).solve(inst, SolveRequest(seed=seed, seconds=seconds, callback=record))
    work = ";".join(f"{k}={v}" for k, v in dict(final.work).items())
    points.append(CurvePoint(program, solver, seed, final.wall_s, final.normalized_reward, work))
    return points


def normalized_upper_bound(program: str) -> float:
    """The LP upper bound on ``program``'s reward (:func:`mallocgame.solvers.bound.upper_bound`),
    normalized like a reward (0 where the normalizer is 0)."""
    from mallocgame.latency import reward_normalizer
    from mallocgame.solvers.bound import upper_bound

    inst = load_workload(program)
    normalizer = reward_normalizer(inst)
    return upper_bound(inst) / normalizer if normalizer else 0.0


def write_csv(points: list[CurvePoint], path: Path) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["program", "solver", "seed", "elapsed_s", "normalized_reward", "work"])
    for p in points:
        writer.writerow([p.program, p.solver, p.seed, f"{p.elapsed_s:.4f}", f"{p.normalized_reward:.6f}", p.work])
    write_bytes_atomic(path, buffer.getvalue().encode())


def final_table(points: list[CurvePoint]) -> str:
    """Markdown: the final normalized reward of each solver on each program (mean over seeds)."""
    programs = list(dict.fromkeys(p.program for p in points))
    solvers = list(dict.fromkeys(p.solver for p in points))
    finals: dict[tuple[str, str], list[float]] = {}
    last: dict[tuple[str, str, int], CurvePoint] = {}
    for p in points:
        last[(p.program, p.solver, p.seed)] = p
    for (program, solver, _), p in last.items():
        finals.setdefault((program, solver), []).append(p.normalized_reward)
    lines = ["| program | " + " | ".join(solvers) + " |", "| --- |" + " ---: |" * len(solvers)]
    for program in programs:
        cells = [f"{sum(v) / len(v):.4f}" if (v := finals.get((program, s))) else "—" for s in solvers]
        lines.append(f"| {program} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_curves(points: list[CurvePoint], path: Path, bounds: dict[str, float] | None = None) -> None:
    """One panel per program: best-so-far normalized reward against seconds, per solver and seed.

    ``bounds``: a normalized upper bound per program, drawn as a dashed line.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    programs = list(dict.fromkeys(p.program for p in points))
    fig, axes = plt.subplots(1, len(programs), figsize=(5 * len(programs), 4), squeeze=False)
    colours = {}
    for ax, program in zip(axes[0], programs):
        curves: dict[tuple[str, int], list[CurvePoint]] = {}
        for p in points:
            if p.program == program:
                curves.setdefault((p.solver, p.seed), []).append(p)
        for (solver, seed), pts in curves.items():
            colour = colours.setdefault(solver, f"C{len(colours)}")
            xs = [p.elapsed_s for p in pts]
            ys = [p.normalized_reward for p in pts]
            ax.step(xs, ys, where="post", color=colour, alpha=0.8, marker="o", markersize=4,
                    label=solver if seed == pts[0].seed else None)
        if bounds and program in bounds:
            ax.axhline(bounds[program], color="black", linestyle="--", linewidth=1, label="upper bound")
        ax.set_title(program)
        ax.set_xlabel("wall-clock seconds")
        ax.set_ylabel("best normalized reward")
        ax.grid(alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        ax.legend(unique.values(), unique.keys(), loc="best")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    write_bytes_atomic(path, buffer.getvalue())
