"""The EGRL ablation figure: a CSV that cannot be read is a usage error, and nothing is
drawn."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.benchmarks import load_benchmark

egrl_ablation = load_benchmark("egrl_ablation")


def test_a_missing_csv_is_a_usage_error(tmp_path: Path, monkeypatch, capsys) -> None:
    missing, figure = tmp_path / "nosuch.csv", tmp_path / "out" / "ablation.png"
    monkeypatch.setattr(sys, "argv", ["egrl_ablation.py", str(missing), "--out", str(figure)])
    with pytest.raises(SystemExit) as stop:
        egrl_ablation.main()
    assert stop.value.code == 2 and f"{missing}: cannot read it" in capsys.readouterr().err
    assert not figure.parent.exists()
