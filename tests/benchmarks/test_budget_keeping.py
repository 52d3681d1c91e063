"""The budget benchmark: a child process reports a solve's wall time against its budget,
and the table has a line per program and source, the sources alternating."""

from __future__ import annotations

import argparse

import pytest

from tests.benchmarks import load_benchmark

budget_keeping = load_benchmark("budget_keeping")


def test_a_child_reports_its_solve() -> None:
    got = budget_keeping.run_child(None, "greedy", "xla-v1/lstm_infer", 0.5)
    assert got["buffers"] == 106 and got["chosen"] == "greedy" and got["left_out"] == []
    assert got["wall_s"] > 0 and got["games"] == 1


def test_the_table_alternates_the_sources_for_each_program(monkeypatch, capsys) -> None:
    seen: list = []

    def fake(src, solver, program, seconds):
        seen.append((str(src), program, seconds))
        return {"buffers": 7, "wall_s": 2.5, "chosen": "heuristic", "left_out": ["muzero"]}

    monkeypatch.setattr(budget_keeping, "run_child", fake)
    budget_keeping.main(["--src", "s1", "a/x@2", "--src", "s2", "b/y@5"])
    assert seen == [("s1", "a/x", 2.0), ("s2", "a/x", 2.0), ("s1", "b/y", 5.0), ("s2", "b/y", 5.0)]
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6 and lines[2].split() == [
        "a/x", "7", "2", "2.5", "1.25", "s1:", "heuristic", "(left", "out:", "muzero)"
    ]  # fmt: skip


def test_a_job_is_program_at_seconds() -> None:
    assert budget_keeping.parse_job("xla-v2/a@b@60") == ("xla-v2/a@b", 60.0)
    with pytest.raises(argparse.ArgumentTypeError, match="PROGRAM@SECONDS"):
        budget_keeping.parse_job("xla-v2/a")
