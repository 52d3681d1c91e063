"""The shared-agent table from sweep folders: its columns, its CSV, a missing record as a
dash, and an unknown column refused."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from mallocgame.bench.sweep import Job, job_path, run_sweep
from tests.benchmarks import load_benchmark

shared_agent = load_benchmark("shared_agent")

PROGRAM = "xla-v1/lstm_infer"


def _table(monkeypatch, capsys, *argv: str) -> str:
    monkeypatch.setattr(sys, "argv", ["shared_agent.py", "--programs", PROGRAM, *argv])
    shared_agent.main()
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep root with one record: the heuristic's 60-s job, where the table reads it."""
    folder = tmp_path_factory.mktemp("shared")
    job = Job(PROGRAM, "heuristic", 0, 60.0)
    run_sweep([job], folder / "scratch-60", workers=1)
    assert job_path(folder / "scratch-60", job).exists()
    return folder


def test_the_chosen_columns_and_their_csv(root: Path, monkeypatch, capsys) -> None:
    out = _table(
        monkeypatch, capsys, "--root", str(root), "--columns", "heuristic", "scratch 600 s",
        "--csv", str(root / "table.csv"),
    )  # fmt: skip
    header = next(line for line in out.splitlines() if line.startswith("| program"))
    assert header == "| program | scratch 600 s | heuristic |"  # in the table's own order
    row = next(line for line in out.splitlines() if line.startswith(f"| {PROGRAM}"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "—" and 0 < float(cells[2]) <= 1  # a missing record is a dash
    with (root / "table.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["program"], r["variant"], r["solver"]) for r in rows] == [
        (PROGRAM, "heuristic", "heuristic")
    ]
    assert float(rows[0]["normalized_reward"]) == pytest.approx(float(cells[2]), abs=1e-4)


def test_every_column_without_columns(root: Path, monkeypatch, capsys) -> None:
    out = _table(monkeypatch, capsys, "--root", str(root))
    header = next(line for line in out.splitlines() if line.startswith("| program"))
    assert header.count("|") == len(shared_agent.VARIANTS) + 2


def test_an_unknown_column_is_a_usage_error(root: Path, monkeypatch, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        _table(monkeypatch, capsys, "--root", str(root), "--columns", "heuristic", "nope")
    assert stop.value.code == 2
    assert "unknown columns ['nope']" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["missing", "empty"])
def test_a_root_without_records_is_a_usage_error_and_writes_nothing(
    where: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    root = tmp_path / where
    if where == "empty":
        (root / "scratch-60").mkdir(parents=True)
    table = tmp_path / "table.csv"
    table.write_text("kept\n")
    with pytest.raises(SystemExit) as stop:
        _table(monkeypatch, capsys, "--root", str(root), "--csv", str(table))
    assert stop.value.code == 2
    said = {"missing": f"--root {root}: not a directory", "empty": "no record of these programs"}
    assert said[where] in capsys.readouterr().err
    assert table.read_text() == "kept\n"  # the CSV asked for is not overwritten


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--programs", "xla-v1/nosuch"], "xla-v1/nosuch: neither a bundled workload"),
        (["--csv", "{tmp}"], "a directory, not a file"),
        (["--csv", "{tmp}/f/table.csv"], "f is not a folder"),
    ],
)
def test_a_program_or_csv_it_cannot_use_is_refused_before_any_record(
    root: Path, tmp_path: Path, monkeypatch, capsys, argv: list[str], needle: str
) -> None:
    """An unknown program was a row of dashes (exit 0), and a bad --csv a traceback after
    the table was printed."""
    (tmp_path / "f").write_text("a file")
    monkeypatch.setattr(shared_agent, "_record", lambda *a: pytest.fail("a record was read"))
    argv = [a.format(tmp=tmp_path) for a in argv]
    with pytest.raises(SystemExit) as stop:
        _table(monkeypatch, capsys, "--root", str(root), *argv)
    out, err = capsys.readouterr()
    assert stop.value.code == 2 and needle in err.splitlines()[-1] and out == ""
    assert "Traceback" not in err


@pytest.mark.parametrize("text, needle", [("{", "not valid JSON"), ("[]", "not a record")])
def test_a_record_that_is_no_json_object_is_one_line(
    text: str, needle: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    """A record that is not JSON (``{``) was a JSONDecodeError traceback."""
    (tmp_path / "scratch-60").mkdir()
    (tmp_path / "scratch-60" / "xla-v1-lstm_infer.heuristic.s0.t60.json").write_text(text)
    with pytest.raises(SystemExit) as stop:
        _table(monkeypatch, capsys, "--root", str(tmp_path), "--columns", "heuristic")
    err = capsys.readouterr().err
    assert stop.value.code == 2 and needle in err.splitlines()[-1] and "Traceback" not in err
