"""EGRL's ablation (evolution alone, policy gradient alone, both) from `bench rewards` CSVs.

Usage::

    mallocgame bench rewards --programs xla-v1/dlrm_train xla-v1/lstm_lm_train \\
        --solvers "egrl[mode=evolution]" "egrl[mode=pg]" egrl --seeds 0 1 2 --budget 600 --out runs/egrl
    python benchmarks/egrl_ablation.py runs/egrl.csv --out runs/egrl_ablation.png

Reads the CSVs (columns ``program, solver, seed, budget_s, elapsed_s,
normalized_reward, work``; ``work`` holds ``egrl``'s counters, ``proposals=N;...``),
keeps the rows of ``egrl`` specs (``egrl``, ``egrl[mode=...]``, any other settings),
and draws per program two panels: the best normalized reward so far against the
proposals evaluated, and against wall-clock seconds; one step curve per spec and seed,
colored by spec. Prints a markdown table of each spec's final best reward (mean over
seeds, with the range) and proposals evaluated.
"""

from __future__ import annotations

import argparse
import io
from collections import defaultdict
from pathlib import Path

from mallocgame.bench.rewards import read_csv
from mallocgame.curves import CurvePoint
from mallocgame.errors import MallocGameError
from mallocgame.fileio import check_writable, write_bytes_atomic

Curve = list[tuple[float, float, float]]  # (proposals, seconds, best normalized reward so far)


def _proposals(point: CurvePoint) -> float:
    for item in point.work.split(";"):
        key, _, value = item.partition("=")
        if key == "proposals":
            return float(value)
    raise ValueError(
        f"{point.program} {point.solver} seed {point.seed}: no 'proposals' in work {point.work!r}"
    )


def curves(points: list[CurvePoint]) -> dict[str, dict[str, dict[int, Curve]]]:
    """``program → spec → seed →`` the best-so-far curve of the ``egrl`` rows, in time order."""
    out: dict[str, dict[str, dict[int, Curve]]] = defaultdict(lambda: defaultdict(dict))
    for p in sorted(points, key=lambda p: (p.program, p.solver, p.seed, p.elapsed_s)):
        if p.solver != "egrl" and not p.solver.startswith("egrl["):
            continue
        curve = out[p.program][p.solver].setdefault(p.seed, [])
        best = max(p.normalized_reward, curve[-1][2] if curve else float("-inf"))
        curve.append((_proposals(p), p.elapsed_s, best))
    return out


def table(data: dict[str, dict[str, dict[int, Curve]]]) -> str:
    """Markdown: per program and spec, the final best reward (mean, min-max over seeds)
    and the proposals evaluated (mean)."""
    specs = list(dict.fromkeys(spec for by_spec in data.values() for spec in by_spec))
    lines = ["| program | " + " | ".join(specs) + " |", "| --- |" + " ---: |" * len(specs)]
    for program, by_spec in data.items():
        cells = []
        for spec in specs:
            runs = by_spec.get(spec, {})
            if not runs:
                cells.append("—")
                continue
            finals = [c[-1][2] for c in runs.values()]
            count = sum(c[-1][0] for c in runs.values()) / len(runs)
            spread = f" ({min(finals):.4f}–{max(finals):.4f})" if len(finals) > 1 else ""
            cells.append(f"{sum(finals) / len(finals):.4f}{spread}, {count:.0f} proposals")
        lines.append(f"| {program} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(data: dict[str, dict[str, dict[int, Curve]]], path: Path) -> None:
    """Two panels per program (a row each): reward against proposals, against seconds; a
    PNG written atomically to ``path`` as it is named."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    programs = list(data)
    specs = list(dict.fromkeys(spec for by_spec in data.values() for spec in by_spec))
    colors = {spec: f"C{i % 10}" for i, spec in enumerate(specs)}
    fig, axes = plt.subplots(len(programs), 2, figsize=(11, 3.2 * len(programs)), squeeze=False)
    for row, program in enumerate(programs):
        for col, (index, label) in enumerate(
            ((0, "proposals evaluated"), (1, "wall-clock seconds"))
        ):
            ax = axes[row][col]
            for spec, runs in data[program].items():
                for n, (_seed, curve) in enumerate(sorted(runs.items())):
                    xs = [point[index] for point in curve]
                    ys = [point[2] for point in curve]
                    ax.step(
                        xs,
                        ys,
                        where="post",
                        color=colors[spec],
                        alpha=0.8,
                        linewidth=1.2,
                        label=spec if n == 0 else None,
                    )
            ax.set_xlabel(label)
            ax.set_ylabel("best normalized reward")
            ax.set_title(program, fontsize=9)
            ax.grid(alpha=0.3)
            if row == 0 and col == 0:
                ax.legend(fontsize=8)
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, dpi=110, format="png")
    plt.close(fig)
    write_bytes_atomic(path, image.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "csv", nargs="+", type=Path, help="CSVs written by `mallocgame bench rewards`"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("egrl_ablation.png"), help="the PNG to write"
    )
    args = parser.parse_args()
    try:  # the figure's place checked before any CSV is read
        if args.out.suffix.lower() != ".png":
            raise ValueError(f"--out {args.out}: the figure is a PNG: give a name ending in .png")
        check_writable(args.out)
        points = [p for path in args.csv for p in read_csv(path)]
    except (MallocGameError, ValueError) as exc:  # a CSV missing or not `bench rewards`'s
        parser.error(str(exc))
    data = curves(points)
    if not data:
        raise SystemExit("no egrl rows in the CSVs")
    plot(data, args.out)
    print(table(data))
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
