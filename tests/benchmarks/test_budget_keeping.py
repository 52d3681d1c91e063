"""The budget benchmark: a child process reports a solve's wall time against its budget,
and the table has a line per program and source, the sources alternating."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest

import mallocgame
from tests.benchmarks import load_benchmark

budget_keeping = load_benchmark("budget_keeping")


SRC = Path(mallocgame.__file__).parents[1]  # the src folder these tests import


def test_a_child_reports_its_solve() -> None:
    got = budget_keeping.run_child(SRC, "greedy", "xla-v1/lstm_infer", 0.5)
    assert Path(got["src"]) == SRC  # the source asked for, checked
    assert got["buffers"] == 106 and got["chosen"] == "greedy" and got["left_out"] == []
    assert got["wall_s"] > 0 and got["games"] == 1


def test_the_table_alternates_the_sources_for_each_program(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    for src in ("s1", "s2"):
        (tmp_path / src / "mallocgame").mkdir(parents=True)
    seen: list = []

    def fake(src, solver, program, seconds):
        seen.append((str(src), program, seconds))
        return {"buffers": 7, "wall_s": 2.5, "chosen": "heuristic", "left_out": ["muzero"]}

    monkeypatch.setattr(budget_keeping, "run_child", fake)
    a, b = "xla-v1/lstm_infer", "xla-v1/gru_infer"
    budget_keeping.main(["--src", "s1", f"{a}@2", "--src", "s2", f"{b}@5"])
    assert seen == [("s1", a, 2.0), ("s2", a, 2.0), ("s1", b, 5.0), ("s2", b, 5.0)]
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6 and lines[2].split() == [
        a, "7", "2", "2.5", "1.25", "s1:", "heuristic", "(left", "out:", "muzero)"
    ]  # fmt: skip


def test_a_job_is_program_at_seconds() -> None:
    assert budget_keeping.parse_job("xla-v2/a@b@60") == ("xla-v2/a@b", 60.0)
    with pytest.raises(argparse.ArgumentTypeError, match="PROGRAM@SECONDS"):
        budget_keeping.parse_job("xla-v2/a")
    for seconds in ("0", "-1", "x", "nan", "inf"):
        with pytest.raises(
            argparse.ArgumentTypeError,
            match="SECONDS: (not a number of seconds|seconds must be a finite number)",
        ):
            budget_keeping.parse_job(f"xla-v2/a@{seconds}")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--solver", "nosuch", "xla-v1/lstm_infer@2"], "unknown solver 'nosuch'"),
        (["xla-v1/lstm_infer@2", "xla-v1/nosuch@2"], "xla-v1/nosuch: neither a bundled"),
        (["xla-v1/lstm_infer@0"], "xla-v1/lstm_infer@0: SECONDS: seconds must be a finite number"),
    ],
)
def test_what_a_child_would_refuse_is_a_usage_error(argv, said, monkeypatch, capsys) -> None:
    monkeypatch.setattr(budget_keeping, "run_child", lambda *args: pytest.fail("ran"))
    with pytest.raises(SystemExit) as stop:
        budget_keeping.main(argv)
    assert stop.value.code == 2 and said in capsys.readouterr().err


def test_a_failing_child_stops_the_run_with_its_error() -> None:
    with pytest.raises(SystemExit, match=r"^installed: nosuch on a/x failed: .*unknown solver"):
        budget_keeping.run_child(None, "nosuch", "a/x", 1.0)


def test_a_src_without_mallocgame_is_a_usage_error(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        budget_keeping.main(["--src", str(tmp_path), "a/x@2"])
    assert stop.value.code == 2
    assert f"--src {tmp_path}: no mallocgame package there" in capsys.readouterr().err


def test_a_child_that_imported_another_mallocgame_stops_the_run(tmp_path, monkeypatch) -> None:
    report = {"src": str(SRC), "buffers": 7, "wall_s": 1.0, "chosen": "greedy", "left_out": []}
    done = subprocess.CompletedProcess([], 0, json.dumps(report) + "\n", "")
    monkeypatch.setattr(budget_keeping.subprocess, "run", lambda *a, **k: done)
    with pytest.raises(SystemExit, match=f"imported mallocgame from {SRC}"):
        budget_keeping.run_child(tmp_path, "greedy", "a/x", 1.0)
