"""The first-run benchmark: a child process with an empty numba cache reports its solve
time and each kernel it compiled; the table names every source compared."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import mallocgame
from tests.benchmarks import load_benchmark

kernel_compile = load_benchmark("kernel_compile")

SRC = Path(mallocgame.__file__).parents[1]  # the src folder these tests import


def test_a_cold_child_reports_the_kernels_it_compiled() -> None:
    # random on the smallest program: the game's kernels, in a few seconds
    got = kernel_compile.run_cold(SRC, "synthetic-v1/small", ("random",))
    assert Path(got["src"]) == SRC  # the source asked for, checked
    assert got["solve_s"] > 0
    assert {"analyze", "apply"} <= set(got["kernels"])  # compiled: the cache was empty
    assert all(seconds >= 0 for seconds in got["kernels"].values())


def test_the_table_has_a_line_per_source_and_its_slowest_kernels(
    tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    for src in ("a/src", "b/src"):
        (tmp_path / src / "mallocgame").mkdir(parents=True)
    runs = iter([{"solve_s": 3.0, "kernels": {"apply": 2.0, "analyze": 1.0}}] * 4)
    seen: list = []
    printed: list[str] = []

    def fake(src):
        seen.append(src)
        printed.extend(capsys.readouterr().out.splitlines())
        return next(runs)

    monkeypatch.setattr(kernel_compile, "run_cold", fake)
    kernel_compile.main(["--runs", "2", "--src", "a/src", "b/src", "--top", "1"])
    out = printed + capsys.readouterr().out.splitlines()
    assert [str(s) for s in seen] == ["a/src", "b/src", "a/src", "b/src"]  # alternating
    assert len(printed) == 4 and printed[3] == "run 2/2, a/src: 3.0 s"  # each as it ended
    assert out[5] == "a/src: first solve 3.0 s (median; runs 3.0, 3.0)"
    assert out[6].split() == ["2.00", "s", "apply"] and out[7].startswith("b/src")


def test_a_src_without_mallocgame_is_a_usage_error(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        kernel_compile.main(["--src", str(tmp_path)])
    assert stop.value.code == 2
    assert f"--src {tmp_path}: no mallocgame package there" in capsys.readouterr().err


def test_a_child_that_imported_another_mallocgame_stops_the_run(tmp_path, monkeypatch) -> None:
    report = {"src": str(SRC), "solve_s": 1.0, "kernels": {}}
    done = subprocess.CompletedProcess([], 0, json.dumps(report) + "\n", "")
    monkeypatch.setattr(kernel_compile.subprocess, "run", lambda *a, **k: done)
    with pytest.raises(SystemExit, match=f"imported mallocgame from {SRC}"):
        kernel_compile.run_cold(tmp_path)


def test_a_failing_child_stops_the_run_with_its_error() -> None:
    with pytest.raises(SystemExit, match=r"^installed: the cold run failed: .*a/x: neither"):
        kernel_compile.run_cold(None, "a/x", ("random",))


def test_runs_below_one_is_a_usage_error(monkeypatch, capsys) -> None:
    monkeypatch.setattr(kernel_compile, "run_cold", lambda src: pytest.fail("ran"))
    with pytest.raises(SystemExit) as stop:
        kernel_compile.main(["--runs", "0"])
    assert (
        stop.value.code == 2
        and "argument --runs: must be at least 1, not 0" in capsys.readouterr().err
    )


def test_a_negative_top_is_a_usage_error(monkeypatch, capsys) -> None:
    monkeypatch.setattr(kernel_compile, "run_cold", lambda src: pytest.fail("ran"))
    with pytest.raises(SystemExit) as stop:
        kernel_compile.main(["--top", "-1"])
    assert stop.value.code == 2 and "argument --top: must be at least 0, not -1" in (
        capsys.readouterr().err
    )
