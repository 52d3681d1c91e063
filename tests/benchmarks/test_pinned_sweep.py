"""The pinned sweep: a setting no job would take is refused before any job starts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.benchmarks import load_benchmark

pinned_sweep = load_benchmark("pinned_sweep")


@pytest.mark.parametrize(
    "option", ["workers=2", "ES:workers=2", "random:workers=2", "es:workers", "es"]
)
def test_an_option_for_no_solver_of_the_sweep_is_refused(
    option: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    argv = ["pinned_sweep.py", "--programs", "xla-v1/lstm_infer", "--solvers", "es"]
    argv += ["--budget", "1", "--out", str(tmp_path / "out"), "--option", option]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_info:
        pinned_sweep.main()
    assert exit_info.value.code == 2
    assert "is not SOLVER:KEY=VALUE for one of --solvers" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_a_program_that_is_no_workload_is_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    argv = ["pinned_sweep.py", "--programs", "xla-v1/lstm_infer", "xla-v1/lstm_infr"]
    argv += ["--solvers", "drop", "--budget", "1", "--out", str(tmp_path / "out")]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_info:
        pinned_sweep.main()
    assert exit_info.value.code == 2
    assert "did you mean xla-v1/lstm_infer" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
