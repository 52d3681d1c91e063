"""Reward-against-time pictures (mallocgame.curves): names drawn letter for letter, every
legend entry inside the figure, pyplot's backend left as it was."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pytest

from mallocgame.curves import CurvePoint, plot_curves


def _points(program: str, solvers: list[str]) -> list[CurvePoint]:
    return [
        CurvePoint(program, solver, 0, t, 0.1 * i + 0.01 * t, "games=1", 10.0)
        for i, solver in enumerate(solvers)
        for t in (0.0, 5.0)
    ]


def test_names_with_dollars_are_drawn_as_written(tmp_path: Path) -> None:
    points = _points(r"lstm $\alpha_$ cost", [r"my$\foo$solver", "es", "heuristic"])
    plot_curves(points, tmp_path / "c.png", {r"lstm $\alpha_$ cost": 0.9})
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_legend_fits_and_the_backend_stays(tmp_path: Path, monkeypatch) -> None:
    from matplotlib.figure import Figure

    backend = matplotlib.get_backend()
    legends: list = []
    saving = Figure.savefig

    def measured(fig, *args, **kwargs):
        saving(fig, *args, **kwargs)  # drawn: the legend's extent is known
        legends.append((fig.legends[0].get_window_extent(), fig.bbox))

    monkeypatch.setattr(Figure, "savefig", measured)
    solvers = ["heuristic", "muzero", "muzero-prod", "order search", "xla"]
    plot_curves(_points("p", solvers), tmp_path / "c.png", {"p": 0.9})
    ((legend, figure),) = legends
    assert figure.x0 <= legend.x0 and legend.x1 <= figure.x1  # no entry cut off
    assert matplotlib.get_backend() == backend
    assert np.isfinite(legend.width) and legend.width > 0


@pytest.mark.parametrize("solvers", [5, 40, 100])
def test_the_panel_keeps_its_height_whatever_the_legend(
    tmp_path: Path, monkeypatch, solvers: int
) -> None:
    """From about 40 solvers the legend's rows took the panel's whole height (its axes had
    none left), and from 45 tight_layout gave up and the legend covered the panel."""
    from matplotlib.figure import Figure

    drawn: list = []
    saving = Figure.savefig

    def measured(fig, *args, **kwargs):
        saving(fig, *args, **kwargs)
        drawn.append((fig.axes[0].get_window_extent(), fig.legends[0].get_window_extent(), fig))

    monkeypatch.setattr(Figure, "savefig", measured)
    plot_curves(_points("p", [f"solver{k}" for k in range(solvers)]), tmp_path / "c.png")
    ((panel, legend, fig),) = drawn
    assert panel.height >= 0.6 * 4 * fig.dpi  # most of its 4 inches
    assert legend.y1 <= panel.y0  # below the panel, covering none of it
    assert legend.y0 >= 0  # no entry cut off


@pytest.mark.parametrize("count", [1, 2])
def test_one_panel_a_program(tmp_path: Path, count: int) -> None:
    points = [p for i in range(count) for p in _points(f"p{i}", ["es"])]
    plot_curves(points, tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 0


def test_no_points_is_a_typed_error(tmp_path: Path) -> None:
    from mallocgame.errors import ComparisonError

    with pytest.raises(ComparisonError, match="no reward curves to draw"):
        plot_curves([], tmp_path / "c.png")
    assert not (tmp_path / "c.png").exists()


def test_forty_solvers_look_forty_ways(tmp_path: Path) -> None:
    from mallocgame.curves import _style

    assert len({_style(k) for k in range(40)}) == 40 and _style(0)[0] == _style(10)[0]
    plot_curves(_points("p", [f"es[sigma={k}]" for k in range(25)]), tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 0


def test_the_normalized_bound_is_none_where_it_bounds_nothing() -> None:
    """Divided by a negative normalizer the LP bound is a lower limit of the normalized
    reward (it was returned as the upper bound); with R = 0 every normalized reward is 0."""
    from mallocgame.curves import normalized_upper_bound
    from mallocgame.latency import reward_normalizer
    from mallocgame.solvers.bound import upper_bound
    from mallocgame.workloads.registry import load_workload
    from tests.builders import reversed_normalizer_instances

    reversed_r = reversed_normalizer_instances()
    assert reward_normalizer(reversed_r["negative"]) < 0 < upper_bound(reversed_r["negative"])
    assert normalized_upper_bound(reversed_r["negative"]) is None
    assert normalized_upper_bound(reversed_r["zero"]) is None
    inst = load_workload("xla-v1/gru_infer")
    bound = upper_bound(inst) / reward_normalizer(inst)
    assert normalized_upper_bound(inst) == normalized_upper_bound(inst, upper_bound(inst)) == bound
