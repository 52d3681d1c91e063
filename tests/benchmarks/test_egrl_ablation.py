"""The EGRL ablation figure: a CSV that cannot be read is a usage error, and nothing is
drawn."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.benchmarks import BENCHMARKS, load_benchmark

egrl_ablation = load_benchmark("egrl_ablation")


def test_a_missing_csv_is_a_usage_error(tmp_path: Path, monkeypatch, capsys) -> None:
    missing, figure = tmp_path / "nosuch.csv", tmp_path / "out" / "ablation.png"
    monkeypatch.setattr(sys, "argv", ["egrl_ablation.py", str(missing), "--out", str(figure)])
    with pytest.raises(SystemExit) as stop:
        egrl_ablation.main()
    assert stop.value.code == 2 and f"{missing}: cannot read it" in capsys.readouterr().err
    assert not figure.parent.exists()


CSV = BENCHMARKS.parent / "docs" / "results" / "egrl-ablation-120s.csv"


@pytest.mark.parametrize(
    "out, said",
    [
        ("figure", "give a name ending in .png"),
        ("figure.txt", "give a name ending in .png"),
        ("folder.png", "folder.png: a directory, not a file"),
        ("file/figure.png", "file is not a folder"),
    ],
)
def test_an_out_that_is_no_png_file_is_refused_before_any_drawing(
    out: str, said: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    """--out figure wrote figure.png but said figure, --out folder.png wrote folder.png.png
    beside it, and --out figure.txt or file/figure.png were tracebacks."""
    (tmp_path / "folder.png").mkdir()
    (tmp_path / "file").write_text("a file")
    monkeypatch.setattr(egrl_ablation, "plot", lambda *args: pytest.fail("drawn"))
    monkeypatch.setattr(sys, "argv", ["egrl_ablation.py", str(CSV), "--out", str(tmp_path / out)])
    with pytest.raises(SystemExit) as stop:
        egrl_ablation.main()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and said in err.splitlines()[-1] and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "folder.png"]
    assert list((tmp_path / "folder.png").iterdir()) == []


def test_the_figure_is_written_where_out_says(tmp_path: Path, monkeypatch, capsys) -> None:
    figure = tmp_path / "new" / "Ablation.PNG"
    monkeypatch.setattr(sys, "argv", ["egrl_ablation.py", str(CSV), "--out", str(figure)])
    egrl_ablation.main()
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in figure.parent.iterdir()] == ["Ablation.PNG"]
    assert capsys.readouterr().out.endswith(f"-> {figure}\n")
