"""Resumable sweeps and the speedup table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mallocgame.bench.speedups import format_table, speedup_table
from mallocgame.bench.sweep import Job, job_path, load_records, run_sweep
from mallocgame.cli import main

PROGRAMS = ["xla-v1/lstm_infer", "xla-v1/resnet_infer"]


def test_one_file_per_job_and_resume(tmp_path: Path) -> None:
    jobs = [Job(p, s, seed, None, 2) for p in PROGRAMS for s in ("drop", "random") for seed in (0, 1)]
    assert run_sweep(jobs, tmp_path, workers=1) == (8, 0)
    files = sorted(tmp_path.glob("*.json"))
    assert len(files) == 8 and job_path(tmp_path, jobs[0]).name == "xla-v1-lstm_infer.drop.s0.w2.json"
    stamp = {p: p.stat().st_mtime_ns for p in files}
    assert run_sweep(jobs, tmp_path, workers=1) == (0, 8)  # everything skipped
    assert {p: p.stat().st_mtime_ns for p in files} == stamp
    records = load_records(tmp_path)
    assert all(r["valid"] and r["latency_s"] > 0 for r in records)
    # same seed and work budget: the same answer as a direct run
    rerun = tmp_path / "again"
    run_sweep(jobs[2:3], rerun, workers=1)
    assert json.loads(next(rerun.glob("*.json")).read_text())["reward_s"] == \
        json.loads(job_path(tmp_path, jobs[2]).read_text())["reward_s"]


def test_speedup_table_arithmetic() -> None:
    records = [
        {"program": "a", "solver": "base", "seed": 0, "valid": True, "latency_s": 2.0,
         "normalized_reward": 0.1, "reward_s": 1.0},
        {"program": "b", "solver": "base", "seed": 0, "valid": True, "latency_s": 1.0,
         "normalized_reward": 0.1, "reward_s": 1.0},
        {"program": "a", "solver": "x", "seed": 0, "valid": True, "latency_s": 1.0,
         "normalized_reward": 0.5, "reward_s": 1.0, "bound_s": 2.0},
        {"program": "a", "solver": "x", "seed": 1, "valid": True, "latency_s": 1.0,
         "normalized_reward": 0.5, "reward_s": 1.0},
        {"program": "b", "solver": "x", "seed": 0, "valid": True, "latency_s": 2.0,
         "normalized_reward": 0.3, "reward_s": 1.0},
        {"program": "b", "solver": "x", "seed": 1, "valid": False, "latency_s": None,
         "normalized_reward": 0.9, "reward_s": 1.0},
    ]
    rows = {r.solver: r for r in speedup_table(records, baseline="base")}
    x = rows["x"]
    assert (x.programs, x.max, x.min, x.improved) == (2, 2.0, 0.5, 1)
    assert x.mean == pytest.approx(1.25) and x.mean_normalized_reward == pytest.approx(0.4)
    assert x.bound_gap == pytest.approx(0.5)
    assert rows["base"].mean == 1.0 and "| x | 2 | 1.2500" in format_table(list(rows.values()), "base")


def test_cli_bench_speedups(tmp_path: Path, capsys) -> None:
    argv = ["bench", "speedups", "--programs", PROGRAMS[0], "--baseline", "drop", "--solvers", "random",
            "--work", "2", "--out", str(tmp_path), "--workers", "1"]
    assert main(argv) == 0
    assert "| random | 1 |" in capsys.readouterr().out
    assert main([*argv[:-6], "--solvers", "nope", "--out", str(tmp_path)]) == 2
