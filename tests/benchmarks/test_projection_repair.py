"""The projection-repair benchmark: what it cannot run is refused before any solve."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from tests.benchmarks import load_benchmark

projection_repair = load_benchmark("projection_repair")


def _run(monkeypatch, *args: str) -> int:
    monkeypatch.setattr(sys, "argv", ["projection_repair.py", *args])
    return projection_repair.main()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--suite", "synthetic-v1", "synthetic-v9"], "no suite synthetic-v9"),
        (["--programs", "nope/x"], "nope/x: neither a bundled workload"),
        (["--programs", "synthetic-v1/small", "--out", "{tmp}"], "a directory, not a file"),
        (["--programs", "synthetic-v1/small", "--out", "{tmp}/f/x.csv"], "f is not a folder"),
    ],
)
def test_what_it_cannot_run_is_one_line_before_any_solve(
    tmp_path: Path, monkeypatch, capsys, args: list[str], needle: str
) -> None:
    """A misspelled suite among good ones was dropped silently, an unknown program was a
    traceback, and a bad --out failed after all the work (leaving DIR.tmp beside)."""
    (tmp_path / "f").write_text("a file")
    monkeypatch.setattr(projection_repair, "load_workload", lambda name: pytest.fail("solved"))
    with pytest.raises(SystemExit) as stop:
        _run(monkeypatch, *(a.format(tmp=tmp_path) for a in args))
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and needle in err[-1] and "Traceback" not in "".join(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_a_program_gives_its_row(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "new" / "r.csv"
    assert _run(monkeypatch, "--programs", "synthetic-v1/small", "--out", str(out)) == 0
    (row,) = list(csv.DictReader(out.open()))
    assert row["program"] == "synthetic-v1/small" and row["buffers"] == "60"
    assert list(row) == list(projection_repair.FIELDS)
