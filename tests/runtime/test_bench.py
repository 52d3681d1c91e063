"""The device script's job on the CPU: statistics, solvers without OR-Tools, a dry run."""

from __future__ import annotations

import csv
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from mallocgame.hardware import GPU_HBM_HOST
from mallocgame.runtime.bench import load_solver, mean_relative_error, spearman
from mallocgame.runtime.calibrate import Figure, calibrate, calibrated_preset
from mallocgame.runtime.measure import compare_results, measure
from mallocgame.runtime.memory import CpuMemory
from mallocgame.runtime.plan import placement_plan
from mallocgame.solvers.base import SolveRequest

ROOT = Path(__file__).resolve().parents[2]


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(
        0.9486832980505138
    )  # scipy's, with ties
    assert math.isnan(spearman([1.0], [2.0])) and math.isnan(spearman([1, 1], [1, 2]))


def test_mean_relative_error():
    assert mean_relative_error([1.0, 3.0], [2.0, 2.0]) == pytest.approx(0.5)
    assert math.isnan(mean_relative_error([], []))


def test_measure_times_and_checks_a_placement(case):
    plan = placement_plan(
        case.instance, load_solver("heuristic").solve(case.instance, SolveRequest())
    )
    with torch.no_grad():
        reference = case.module(*case.inputs)
    m = measure(case.graph, plan, CpuMemory(), reference, warmup=1, steps=3)
    assert m.steps == 3 and 0 < m.p10_s <= m.median_s <= m.p90_s
    late = measure(case.graph, plan, CpuMemory(), reference, warmup=3, steps=5, deadline=0.0)
    assert late.steps == 1 and late.identical
    assert m.identical and m.max_abs_diff == 0.0 and m.staged == ()
    wrong = tuple(r + 1 for r in reference)
    identical, worst = compare_results(reference, wrong)
    assert not identical and worst == pytest.approx(1.0, rel=1e-6)


def test_calibration_on_the_cpu_gives_a_preset():
    figures = calibrate(CpuMemory(), size_bytes=2**14, matmul_n=32, repeats=1)
    names = {f.name for f in figures}
    assert {
        "fast_bandwidth",
        "copy_in_bandwidth",
        "copy_out_bandwidth",
        "slow_read_bandwidth",
        "slow_write_bandwidth",
        "peak_flops_fp32",
        "peak_flops_bf16",
        "fixed_s",
    } <= names
    preset = calibrated_preset(figures, fast_memory_bytes=2**30)
    by = {f.name: f.value for f in figures}
    assert preset.slow_bandwidth == by["slow_read_bandwidth"]
    assert preset.copy_bandwidth == min(by["copy_in_bandwidth"], by["copy_out_bandwidth"])
    assert (
        preset.fast_memory_bytes == 2**30
        and preset.peak_transcendentals == GPU_HBM_HOST.peak_transcendentals
    )


def test_calibrated_preset_needs_every_figure():
    with pytest.raises(KeyError):
        calibrated_preset([Figure("fast_bandwidth", 1e12, "B/s", "")])


_BLOCK_ORTOOLS = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] == 'ortools':
            raise ImportError('no ortools here')
sys.meta_path.insert(0, Block())
from mallocgame.runtime.bench import load_solver, solve_spec
from mallocgame.workloads.registry import load_workload
label, sol = solve_spec('es:1', load_workload('synthetic-v1/small'), 4)
print(type(load_solver('heuristic')).__name__, label, sol.solver)
"""


def test_solvers_load_without_ortools():
    env = dict(
        os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + str(ROOT), JAX_PLATFORMS="cpu"
    )
    done = subprocess.run(
        [sys.executable, "-c", _BLOCK_ORTOOLS], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["HeuristicSolver", "es:1", "es"]


def test_the_device_script_dry_run(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), JAX_PLATFORMS="cpu")
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "device_real.py"),
            "--dry-run",
            "--out",
            str(tmp_path),
            "--programs",
            "mlp",
            "--placements",
            "drop",
            "heuristic",
            "random:0",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    assert [r["placement"] for r in rows] == ["hbm-resident", "drop", "heuristic", "random:0"]
    assert all(
        r["identical"] == "True" and r["error"] == "" and float(r["measured_median_s"]) > 0
        for r in rows
    )
    assert all(r["check_ok"] == "True" for r in rows[1:])
    summary = list(csv.DictReader((tmp_path / "summary.csv").open()))
    assert [s["model"] for s in summary] == ["preset", "calibrated"] and summary[0][
        "placements"
    ] == "3"
    assert {r["name"] for r in csv.DictReader((tmp_path / "calibration.csv").open())} >= {
        "fast_bandwidth"
    }
    assert (tmp_path / "programs.json.gz").stat().st_size > 0
    assert "done in" in (tmp_path / "run.log").read_text()


def test_the_device_script_without_a_gpu_says_so(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), JAX_PLATFORMS="cpu")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "device_real.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "device_real: no CUDA device: running an answer on HBM and host memory needs a GPU"
    ]


@pytest.mark.parametrize(
    "spec, label, work, seconds",
    [
        ("es:3", "es:3", 64, None),
        ("heuristic", "heuristic", None, None),
        ("muzero-prod", "muzero-prod", None, 30.0),
    ],
)
def test_solve_spec_gives_each_solver_its_budget(monkeypatch, spec, label, work, seconds):
    # es and random count games, the agent gets AGENT_SECONDS of wall clock, others none.
    from mallocgame.runtime import bench
    from tests.builders import conformance_instance

    seen = []

    class Recorder:
        def solve(self, instance, request):
            seen.append(request)
            return "answer"

    monkeypatch.setattr(bench, "load_solver", lambda name: Recorder())
    got = bench.solve_spec(spec, conformance_instance("tiny_alias"), 64)
    assert got == (label, "answer")
    (request,) = seen
    assert (request.work, request.seconds, request.seed) == (
        work,
        seconds,
        int(spec.partition(":")[2] or 0),
    )
    assert load_solver("muzero-prod").name == "muzero-prod"
