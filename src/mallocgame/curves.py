"""Reward curves: the normalized reward of a solver's answer against wall-clock time.

A solver's improvements (:class:`~mallocgame.solvers.base.Improvement`) become
:class:`CurvePoint` rows, each the reward of the answer the solver held from then on (its
new best by its own objective: a rising reward for most solvers, a falling simulated
latency for ``msa-search``, whose curve can dip); :func:`write_csv` writes them (one row
per improvement, the sweep's record), :func:`plot_curves` draws one panel per program.
Used by the main job (:mod:`mallocgame.optimize`) and by the experiments
(:mod:`mallocgame.bench.rewards`, which also reads the CSV back).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mallocgame.errors import ComparisonError
from mallocgame.fileio import write_bytes_atomic, write_csv_atomic
from mallocgame.instance import Instance

__all__ = [
    "CSV_HEADER",
    "CurvePoint",
    "work_text",
    "normalized_upper_bound",
    "csv_row",
    "write_csv",
    "plot_curves",
]

CSV_HEADER = ["program", "solver", "seed", "budget_s", "elapsed_s", "normalized_reward", "work"]


@dataclass(frozen=True)
class CurvePoint:
    program: str
    solver: str  # the solver's name, or a spec with settings (:func:`solver_spec`)
    seed: int
    elapsed_s: float
    normalized_reward: float
    work: str  # the solver's work counters at that point, "k=v;..."
    budget_s: float | None  # the run's wall-clock budget, seconds (None: a work budget only)


def work_text(work: Mapping[str, int | float]) -> str:
    """A solver's work counters as :attr:`CurvePoint.work` holds them: ``"k=v;..."``."""
    return ";".join(f"{k}={v}" for k, v in work.items())


def normalized_upper_bound(inst: Instance, bound_s: float | None = None) -> float | None:
    """The LP upper bound on ``inst``'s reward (:func:`mallocgame.solvers.bound.upper_bound`,
    or ``bound_s`` where the caller has it, seconds), normalized like a reward; ``None`` where
    the normalizer ``R`` is not positive: divided by a negative ``R`` the bound is a lower
    limit of the normalized reward, not an upper one, and with ``R = 0`` every normalized
    reward is 0 (SPEC section 7)."""
    from mallocgame.latency import reward_normalizer
    from mallocgame.solvers.bound import upper_bound

    normalizer = reward_normalizer(inst)
    if not normalizer > 0:
        return None
    return (upper_bound(inst) if bound_s is None else bound_s) / normalizer


def csv_row(p: CurvePoint) -> list[object]:
    """``p``'s cells under :data:`CSV_HEADER`."""
    return [
        p.program,
        p.solver,
        p.seed,
        "" if p.budget_s is None else repr(float(p.budget_s)),
        f"{p.elapsed_s:.4f}",
        repr(float(p.normalized_reward)),  # in full: a resumed table is the same
        p.work,
    ]


def write_csv(points: list[CurvePoint], path: Path) -> None:
    write_csv_atomic(path, CSV_HEADER, (csv_row(p) for p in points))


def _style(k: int) -> tuple[str, str, str]:
    """The ``k``-th solver's colour, line style and marker: ten colours, then again with
    the next style, so no two of forty solvers look alike."""
    lines, markers = ("-", "--", ":", "-."), ("o", "s", "^", "D")
    return f"C{k % 10}", lines[k // 10 % 4], markers[k // 10 % 4]


def plot_curves(
    points: list[CurvePoint], path: Path, bounds: dict[str, float] | None = None
) -> None:
    """One panel per program: the normalized reward of the answer held against seconds (a
    step at each improvement, :class:`CurvePoint`), per solver and seed.

    ``bounds``: a normalized upper bound per program, drawn as a dashed line. Solvers
    past matplotlib's ten colours take them again with another line style and marker.
    No points: a :class:`~mallocgame.errors.ComparisonError`.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from mallocgame.viz import literal_text

    if not points:
        raise ComparisonError(f"no reward curves to draw in {path}")
    programs = list(dict.fromkeys(p.program for p in points))
    # one legend for every panel, below them (it hides no curve), at most three entries a
    # panel to a row (none cut off); the figure grows by its rows, the panels keep 4 inches
    entries = len({p.solver for p in points}) + bool(bounds and set(bounds) & set(programs))
    columns = min(entries, 3 * len(programs))
    rows = -(-entries // max(columns, 1))
    legend_in = 0.3 + 0.25 * rows  # inches
    fig = Figure(figsize=(5 * len(programs), 4 + legend_in))  # its own canvas, not pyplot's
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(programs), squeeze=False)
    styles: dict[str, tuple[str, str, str]] = {}  # solver -> colour, line style, marker
    for ax, program in zip(axes[0], programs):
        curves: dict[tuple[str, int], list[CurvePoint]] = {}
        for p in points:
            if p.program == program:
                curves.setdefault((p.solver, p.seed), []).append(p)
        for (solver, seed), pts in curves.items():
            colour, line, marker = styles.setdefault(solver, _style(len(styles)))
            xs = [p.elapsed_s for p in pts]
            ys = [p.normalized_reward for p in pts]
            ax.step(
                xs,
                ys,
                where="post",
                color=colour,
                linestyle=line,
                alpha=0.8,
                marker=marker,
                markersize=4,
                label=literal_text(solver) if seed == pts[0].seed else None,
            )
        if bounds and program in bounds:
            ax.axhline(
                bounds[program], color="black", linestyle="--", linewidth=1, label="upper bound"
            )
        ax.set_title(literal_text(program))
        ax.set_xlabel("wall-clock seconds")
        ax.set_ylabel("normalized reward")
        ax.grid(alpha=0.3)
    legend: dict = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    fig.legend(legend.values(), legend.keys(), loc="lower center", ncol=columns, frameon=False)
    fig.tight_layout(rect=(0, legend_in / (4 + legend_in), 1, 1))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    write_bytes_atomic(path, buffer.getvalue())
