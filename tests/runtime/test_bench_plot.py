"""The GPU study's figure from a results.csv: drawn, or one typed error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mallocgame.errors import MallocGameError
from mallocgame.runtime.bench_plot import plot_real_results
from tests.runtime.conftest import write_results_csv


def test_a_figure_from_measured_rows(tmp_path):
    rows = [
        {
            "program": "p",
            "placement": "hbm-resident",
            "measured_median_s": 0.01,
            "sim_latency_s": 0.01,
            "peak_hbm_bytes": 100,
        },
        {"program": "p", "placement": "eager", "measured_median_s": 0.009, "peak_hbm_bytes": 100},
        {
            "program": "p",
            "placement": "eager-save-on-cpu",
            "measured_median_s": 0.02,
            "peak_hbm_bytes": 40,
        },
        {
            "program": "p",
            "placement": "heuristic",
            "measured_median_s": 0.03,
            "sim_latency_s": 0.02,
            "peak_hbm_bytes": 25,
        },
        {
            "program": "p",
            "placement": "given:muzero-prod",
            "measured_median_s": 0.025,
            "sim_latency_s": 0.018,
            "peak_hbm_bytes": 25,
        },
        {
            "program": "p",
            "placement": "given:muzero-prod+staged-dots",
            "measured_median_s": 0.015,
            "sim_latency_s": 0.012,
            "peak_hbm_bytes": 30,
        },
        {"program": "p", "placement": "drop", "error": "RuntimeError: out of memory"},
    ]
    write_results_csv(tmp_path / "results.csv", rows)
    plot_real_results(tmp_path / "results.csv", tmp_path / "real.png")
    assert (tmp_path / "real.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("program", "solver", "reference"),
    [
        ("gru$x^$", "muzero", "hbm-resident"),  # a legend entry
        ("gru$x^$", "muzero", "eager"),  # and the title's note, relative to eager
        ("p", r"my$\foo$solver", "hbm-resident"),  # an annotation
    ],
)
def test_names_with_dollars_are_drawn_as_written(tmp_path, program, solver, reference):
    """A program's name or a given answer's solver holding ``$...$`` is drawn letter for
    letter, not read as mathematics (an error where it is not TeX)."""
    rows = [
        {
            "program": program,
            "placement": reference,
            "measured_median_s": 0.01,
            "peak_hbm_bytes": 100,
        },
        {
            "program": program,
            "placement": f"given:{solver}",
            "measured_median_s": 0.02,
            "sim_latency_s": 0.02,
            "peak_hbm_bytes": 25,
        },
    ]
    write_results_csv(tmp_path / "results.csv", rows)
    plot_real_results(tmp_path / "results.csv", tmp_path / "real.png")
    assert (tmp_path / "real.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_staged_row_is_a_hollow_marker():
    from mallocgame.runtime.bench_plot import _fill

    assert _fill({"placement": "heuristic+staged-dots"}, "red") == {
        "facecolors": "none",
        "edgecolors": ["red"],
    }
    assert _fill({"placement": "heuristic"}, "red") == {"color": "red"}


def test_bad_inputs_are_typed_errors(tmp_path):
    with pytest.raises(MallocGameError, match="cannot read"):
        plot_real_results(tmp_path / "missing.csv", tmp_path / "real.png")
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(MallocGameError, match="not a bench real results.csv"):
        plot_real_results(tmp_path / "other.csv", tmp_path / "real.png")
    write_results_csv(
        tmp_path / "failed.csv", [{"program": "p", "placement": "drop", "error": "x"}]
    )
    with pytest.raises(MallocGameError, match="no measured row"):
        plot_real_results(tmp_path / "failed.csv", tmp_path / "real.png")
    assert not (tmp_path / "real.png").exists()


def _plot_only(out: Path) -> subprocess.CompletedProcess:
    """``benchmarks/device_real.py --plot-only --out OUT``, run as a user runs it."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root / "src"), JAX_PLATFORMS="cpu")
    script = [sys.executable, str(root / "benchmarks" / "device_real.py"), "--plot-only"]
    return subprocess.run(
        [*script, "--out", str(out)], capture_output=True, text=True, env=env, timeout=120
    )


def test_a_file_without_the_columns_the_figure_reads_is_a_typed_error(tmp_path):
    """A header of measured_median_s alone passed the check and was a KeyError traceback."""
    (tmp_path / "results.csv").write_text("measured_median_s,placement\n0.5,drop\n")
    with pytest.raises(MallocGameError, match=r"not a bench real .*\(no column program\)"):
        plot_real_results(tmp_path / "results.csv", tmp_path / "real.png")
    done = _plot_only(tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "(no column program)" in done.stderr
    assert not (tmp_path / "real.png").exists()


def test_a_program_whose_framework_default_ran_out_of_memory_is_drawn_against_eager():
    """Under an HBM cap ``hbm-resident`` runs out of memory: its program's answers are drawn
    relative to ``eager``, and a program with neither is named as left out."""
    from mallocgame.runtime.bench_plot import _relative_points

    rows = [
        {"program": "p", "placement": "eager", "measured_median_s": 0.01, "peak_hbm_bytes": 100.0},
        {
            "program": "p",
            "placement": "heuristic",
            "measured_median_s": 0.02,
            "peak_hbm_bytes": 25.0,
        },
        {
            "program": "q",
            "placement": "heuristic",
            "measured_median_s": 0.02,
            "peak_hbm_bytes": 25.0,
        },
    ]
    points, against_eager, left_out, _ = _relative_points(rows, ["p", "q"])
    assert [(r["placement"], x, y) for r, x, y in points] == [
        ("eager", 1.0, 1.0),
        ("heuristic", 0.25, 2.0),
    ]
    assert against_eager == ["p"] and left_out == ["q"]


def test_a_reference_measured_at_zero_seconds_is_no_reference(tmp_path):
    """A step time of 0 (or less) cannot be divided by: such an ``hbm-resident`` row is
    passed over for ``eager``, and a program with no other reference is left out."""
    from mallocgame.runtime.bench_plot import _relative_points

    def row(program, placement, seconds, peak=100.0):
        return {
            "program": program,
            "placement": placement,
            "measured_median_s": seconds,
            "peak_hbm_bytes": peak,
        }

    rows = [
        row("p", "hbm-resident", 0.0),
        row("p", "eager", 0.01),
        row("p", "heuristic", 0.02, 25.0),
        row("q", "hbm-resident", -1.0),
        row("q", "heuristic", 0.02, 25.0),
    ]
    points, against_eager, left_out, _ = _relative_points(rows, ["p", "q"])
    assert [(r["placement"], x, y) for r, x, y in points] == [
        ("hbm-resident", 1.0, 0.0),
        ("eager", 1.0, 1.0),
        ("heuristic", 0.25, 2.0),
    ]
    assert against_eager == ["p"] and left_out == ["q"]
    write_results_csv(tmp_path / "results.csv", rows)
    plot_real_results(tmp_path / "results.csv", tmp_path / "real.png")
    assert (tmp_path / "real.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_row_without_a_measured_peak_is_left_out_of_the_hbm_panel_and_named(
    tmp_path, monkeypatch
):
    """An empty peak_hbm_bytes cell is not a peak of 0: the row is not drawn at x = 0 as if
    it held no HBM (the table shows it as unmeasured) but left out and named in the title."""
    import matplotlib.figure

    from mallocgame.runtime.bench_plot import _relative_points, _rows

    rows = [
        {
            "program": "p",
            "placement": "hbm-resident",
            "measured_median_s": 0.01,
            "peak_hbm_bytes": 100,
        },
        {"program": "p", "placement": "heuristic", "measured_median_s": 0.02},
        {"program": "p", "placement": "drop", "measured_median_s": 0.03, "peak_hbm_bytes": 20},
    ]
    write_results_csv(tmp_path / "results.csv", rows)
    points, _, left_out, no_peak = _relative_points(_rows(tmp_path / "results.csv"), ["p"])
    assert [(r["placement"], x, y) for r, x, y in points] == [
        ("hbm-resident", 1.0, 1.0),
        ("drop", 0.2, 3.0),
    ]
    assert left_out == [] and no_peak == ["p heuristic"]
    titles: list[str] = []
    savefig = matplotlib.figure.Figure.savefig

    def saving(fig, *args, **kwargs):
        titles.extend(ax.get_title() for ax in fig.axes)
        return savefig(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", saving)
    plot_real_results(tmp_path / "results.csv", tmp_path / "real.png")
    assert titles[1].endswith("\nno peak HBM measured, left out: p heuristic")


def test_a_cell_that_is_not_a_number_is_a_typed_error(tmp_path):
    rows = [{"program": "p", "placement": "drop", "measured_median_s": 0.01, "sim_latency_s": "x"}]
    write_results_csv(tmp_path / "results.csv", rows)
    with pytest.raises(MallocGameError, match="line 2, column sim_latency_s: 'x' is not a"):
        plot_real_results(tmp_path / "results.csv", tmp_path / "real.png")
    done = _plot_only(tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "column sim_latency_s: 'x'" in done.stderr
    assert not (tmp_path / "real.png").exists()
