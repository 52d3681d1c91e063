"""The GPU study's figure, drawn from its ``results.csv`` (:mod:`mallocgame.runtime.bench`).

:func:`plot_real_results` draws two panels: left, each answer's simulated step time
against its measured one (log-log, one colour per program, the diagonal where the
simulator is right); right, each program's placements as measured step time against
peak HBM, relative to the program's framework default (``hbm-resident``; ``eager``
where that did not run, out of memory under an HBM cap, said in the panel's title), with
PyTorch's own baselines (``eager``, ``eager-save-on-cpu``) marked apart: what each way of
running the program costs in time for the HBM it saves. An answer run with staged matmul reads
(a ``+staged-dots`` row) is a hollow marker in both panels. Rows with an error or no
measurement are left out, a row without a measured peak HBM is left out of the right
panel (named in its title), and a reference row whose step time is not above 0 is no
reference. Reads no GPU and runs no model.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from mallocgame.errors import MallocGameError
from mallocgame.fileio import write_bytes_atomic

__all__ = ["plot_real_results"]

_FRAMEWORK_MARKERS = {"eager": "s", "eager-save-on-cpu": "D", "hbm-resident": "*"}


def _rows(results_csv: Path) -> list[dict[str, Any]]:
    """The measured rows without an error (:func:`~mallocgame.runtime.bench.read_results_csv`:
    numbers parsed, a bad one a :class:`MallocGameError`)."""
    from mallocgame.runtime.bench import read_results_csv

    rows = read_results_csv(results_csv)
    return [r for r in rows if not r.get("error") and r.get("measured_median_s") is not None]


def _relative_points(
    rows: list[dict[str, Any]], programs: list[str]
) -> tuple[list[tuple[dict[str, Any], float, float]], list[str], list[str], list[str]]:
    """The right panel's points: each measured row (numbers as
    :func:`~mallocgame.runtime.bench.read_results_csv` gives them) with its peak HBM and
    step time over its program's reference row's (``hbm-resident``, else ``eager``: the
    first row of that placement with a peak and a step time above 0); the programs
    measured against ``eager``; the programs with neither (left out); the rows of the
    other programs without a measured peak HBM (left out, as ``"program placement"``)."""
    points: list[tuple[dict[str, Any], float, float]] = []
    against_eager: list[str] = []
    left_out: list[str] = []
    no_peak: list[str] = []
    for program in programs:
        mine = [r for r in rows if r["program"] == program]
        # the first row of each placement that can be a reference (reversed: the first wins)
        usable = {
            r["placement"]: r
            for r in reversed(mine)
            if (r.get("peak_hbm_bytes") or 0) > 0 and r["measured_median_s"] > 0
        }
        base = usable.get("hbm-resident") or usable.get("eager")
        if base is None:
            left_out.append(program)
            continue
        if base["placement"] == "eager":
            against_eager.append(program)
        t0, m0 = base["measured_median_s"], base["peak_hbm_bytes"]
        for r in mine:
            if r.get("peak_hbm_bytes") is None:
                no_peak.append(f"{program} {r['placement']}")
                continue
            points.append((r, r["peak_hbm_bytes"] / m0, r["measured_median_s"] / t0))
    return points, against_eager, left_out, no_peak


def _fill(row: dict[str, Any], colour: object) -> dict[str, object]:
    """A scatter point's colours: hollow for a row run with staged matmul reads."""
    from mallocgame.runtime.bench import STAGED_DOTS

    if row["placement"].endswith(STAGED_DOTS):
        return {"facecolors": "none", "edgecolors": [colour]}
    return {"color": colour}


def plot_real_results(results_csv: Path, path: Path, *, model: str = "sim_latency_s") -> None:
    """Write the figure of the module docstring for ``results_csv`` to ``path`` (PNG);
    ``model``: the column of simulated times (``sim_latency_s``: the preset,
    ``sim_calibrated_s``: the calibrated preset)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from mallocgame.viz import literal_text

    rows = _rows(Path(results_csv))
    if not rows:
        raise MallocGameError(f"{results_csv}: no measured row to draw")
    programs = list(dict.fromkeys(r["program"] for r in rows))
    colours = {p: plt.get_cmap("tab10")(i % 10) for i, p in enumerate(programs)}
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5))

    lo, hi = float("inf"), 0.0
    for r in rows:
        if r.get(model) is None or r["placement"] in _FRAMEWORK_MARKERS:
            continue
        sim, meas = r[model] * 1e3, r["measured_median_s"] * 1e3
        lo, hi = min(lo, sim, meas), max(hi, sim, meas)
        left.scatter(meas, sim, s=26, **_fill(r, colours[r["program"]]))
    if hi > 0:
        left.plot([lo, hi], [lo, hi], color="grey", lw=0.8, ls="--")
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("measured step time (ms)")
    left.set_ylabel("simulated step time (ms)")
    left.set_title("the game's answers: simulated against measured", fontsize=10)

    points, against_eager, left_out, no_peak = _relative_points(rows, programs)
    for r, x, y in points:
        marker = _FRAMEWORK_MARKERS.get(r["placement"], "o")
        right.scatter(x, y, marker=marker, s=36, **_fill(r, colours[r["program"]]))
        if r["placement"] not in ("hbm-resident",) and (
            r["placement"] in _FRAMEWORK_MARKERS or r["placement"].startswith("given:")
        ):
            right.annotate(
                literal_text(r["placement"].replace("given:", "")),
                (x, y),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
    right.set_yscale("log")
    right.set_xlabel("peak HBM / framework default's")
    right.set_ylabel("measured step time / framework default's")
    notes = [f"relative to eager: {', '.join(against_eager)}"] if against_eager else []
    notes += [f"no reference row, left out: {', '.join(left_out)}"] if left_out else []
    notes += [f"no peak HBM measured, left out: {', '.join(no_peak)}"] if no_peak else []
    notes = [literal_text(n) for n in notes]
    right.set_title(
        "time paid for HBM saved\n(square: eager, diamond: save_on_cpu, hollow: staged matmul "
        "reads)" + "".join(f"\n{n}" for n in notes),
        fontsize=9,
    )
    handles = [
        Line2D([], [], color=colours[p], marker="o", ls="", label=literal_text(p)) for p in programs
    ]
    right.legend(handles=handles, fontsize=8, loc="upper right")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    write_bytes_atomic(path, buffer.getvalue())
