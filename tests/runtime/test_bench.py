"""The device script's job on the CPU: statistics, solvers without OR-Tools, a dry run."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from mallocgame.costmodel import derive_instance
from mallocgame.hardware import GPU_HBM_HOST, staged_variant
from mallocgame.instance import instance_from_dict
from mallocgame.program import program_from_dict
from mallocgame.runtime.bench import load_solver, mean_relative_error, spearman
from mallocgame.runtime.calibrate import Figure, calibrate, calibrated_preset
from mallocgame.runtime.measure import compare_results, measure
from mallocgame.runtime.memory import CpuMemory
from mallocgame.runtime.plan import placement_plan
from mallocgame.simulate import simulate
from mallocgame.solution import solution_from_dict
from mallocgame.solvers.base import SolveRequest
from tests.runtime.conftest import ReleaseCounting

ROOT = Path(__file__).resolve().parents[2]


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(
        0.9486832980505138
    )  # scipy's, with ties
    assert math.isnan(spearman([1.0], [2.0])) and math.isnan(spearman([1, 1], [1, 2]))
    assert math.isnan(spearman([1, float("nan"), 3, 2], [1, 2, 3, 4]))  # NaN has no rank
    with pytest.raises(ValueError, match="3 values against 2"):
        spearman([1, 2, 3], [1, 2])


def test_mean_relative_error():
    assert mean_relative_error([1.0, 3.0], [2.0, 2.0]) == pytest.approx(0.5)
    assert math.isnan(mean_relative_error([], []))
    with pytest.raises(ValueError, match="3 values against 2"):
        mean_relative_error([1, 2, 3], [1, 2])


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


def test_a_peak_the_backend_cannot_count_is_none_not_0(case):
    """The CPU stand-in counts no fast memory: its peak is None (no measured 0 bytes); a
    backend that counts gives its peak above what was allocated before."""

    class Counting(CpuMemory):
        def allocated(self) -> int:
            return 1000

        def peak(self) -> int:
            return 1000 + 3 * 2**20

    plan = placement_plan(case.instance, load_solver("drop").solve(case.instance, SolveRequest()))
    with torch.no_grad():
        reference = case.module(*case.inputs)
    cpu = measure(case.graph, plan, CpuMemory(), reference, warmup=1, steps=1)
    assert cpu.peak_hbm_bytes is None and cpu.peak_hbm_text() == "n/a"
    counted = measure(case.graph, plan, Counting(), reference, warmup=1, steps=1)
    assert counted.peak_hbm_bytes == 3 * 2**20 and counted.peak_hbm_text() == "3.0 MiB"


def test_measure_takes_at_least_one_warmup_run(case):
    """The first untimed run is the checked one, so it always happens: ``warmup=0`` would
    run as ``warmup=1`` does, and is refused."""
    plan = placement_plan(case.instance, load_solver("drop").solve(case.instance, SolveRequest()))
    with torch.no_grad():
        reference = case.module(*case.inputs)
    with pytest.raises(ValueError, match="warmup must be a whole number of at least 1"):
        measure(case.graph, plan, CpuMemory(), reference, warmup=0, steps=1)


def test_results_with_nan_where_the_reference_has_it_are_identical() -> None:
    nan, inf = float("nan"), float("inf")
    reference = (torch.tensor([nan, 1.0, inf, -0.0]), torch.tensor([3, 4]))
    assert compare_results(tuple(r.clone() for r in reference), reference) == (True, 0.0)
    assert compare_results((torch.tensor([nan, 1.0, inf, 0.0]), reference[1]), reference)[0]
    # a difference beside a NaN still counts; a NaN on one side only is infinitely far
    off = (torch.tensor([nan, 5.0, inf, 0.0]), reference[1])
    assert compare_results(off, reference) == (False, 4.0)
    one_sided = (torch.tensor([1.0, 1.0, inf, 0.0]), reference[1])
    assert compare_results(one_sided, reference) == (False, inf)
    other_inf = (torch.tensor([nan, 1.0, -inf, 0.0]), reference[1])
    assert compare_results(other_inf, reference) == (False, inf)
    assert compare_results((reference[0], torch.tensor([3, 6])), reference) == (False, 2.0)


def test_measure_releases_the_dead_only_where_allocation_is_read(case, monkeypatch):
    """A backend that counts its fast memory is asked to free what dead objects hold
    before the count; the CPU stand-in counts nothing, so no full collection (seconds in a
    process with a large heap) runs for it."""
    import gc

    plan = placement_plan(case.instance, load_solver("drop").solve(case.instance, SolveRequest()))
    with torch.no_grad():
        reference = case.module(*case.inputs)
    collections: list[int] = []
    monkeypatch.setattr(gc, "collect", lambda *args: collections.append(1) or 0)

    counting = ReleaseCounting()
    measure(case.graph, plan, counting, reference, warmup=1, steps=1)
    assert counting.released == 1
    measure(case.graph, plan, CpuMemory(), reference, warmup=1, steps=1)
    assert collections == []


class StepPeaks(CpuMemory):
    """A stand-in that counts fast memory: ``allocated`` is ``base``; each step's peak is
    the next of ``peaks`` (the runner asks once a step, after starting a new peak)."""

    def __init__(self, base: int, peaks: list[int]) -> None:
        super().__init__()
        self.base, self.peaks, self.resets = base, list(peaks), 0

    def allocated(self) -> int:
        return self.base

    def reset_peak(self) -> None:
        self.resets += 1

    def peak(self) -> int:
        return self.peaks.pop(0)


def test_hbm_over_plan_is_each_steps_peak_beyond_the_plans_bytes(case):
    from mallocgame.runtime.measure import hbm_over_plan

    plan = placement_plan(
        case.instance, load_solver("heuristic").solve(case.instance, SolveRequest())
    )
    planned = plan.hbm_bytes()
    memory = StepPeaks(1000, [1000 + b + 7 * t for t, b in enumerate(planned)])
    assert hbm_over_plan(case.graph, plan, memory) == [7 * t for t in range(len(planned))]
    assert memory.resets == len(planned) and memory.peaks == []
    assert hbm_over_plan(case.graph, plan, CpuMemory()) == []  # cannot count: nothing said


def test_calibration_needs_a_timed_run():
    with pytest.raises(ValueError, match="repeats must be at least 1"):
        calibrate(CpuMemory(), size_bytes=2**14, matmul_n=32, repeats=0)
    for size in (0, 2, -8):  # no float32 moved: no bandwidth to measure
        with pytest.raises(ValueError, match="size_bytes must be at least 4"):
            calibrate(CpuMemory(), size_bytes=size, matmul_n=32, repeats=1)


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
            "mlp-train",
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
    game = ["hbm-resident", "drop", "heuristic", "random:0"]
    assert [(r["program"], r["placement"]) for r in rows] == [
        ("mlp", "eager"),
        *(("mlp", p) for p in game),
        ("mlp-train", "eager"),
        ("mlp-train", "eager-save-on-cpu"),
        *(("mlp-train", p) for p in game),
    ]
    assert all(r["error"] == "" and float(r["measured_median_s"]) > 0 for r in rows)
    placed = [r for r in rows if r["solver"] != "framework"]
    assert all(r["identical"] == "True" for r in placed)
    assert all(r["check_ok"] == "True" for r in placed if r["placement"] != "hbm-resident")
    framework = [r for r in rows if r["solver"] == "framework"]
    assert all(r["sim_latency_s"] == "" and float(r["max_abs_diff"]) < 1e-5 for r in framework)
    assert int(framework[-1]["host_bytes"]) > 0  # save_on_cpu moved the saved tensors
    summary = list(csv.DictReader((tmp_path / "summary.csv").open()))
    assert [(s["program"], s["model"]) for s in summary] == [
        ("mlp", "preset"),
        ("mlp", "calibrated"),
        ("mlp-train", "preset"),
        ("mlp-train", "calibrated"),
    ]
    assert {s["placements"] for s in summary} == {"3"}
    ops = list(csv.DictReader((tmp_path / "ops.csv").open()))
    by = {(o["program"], o["placement"]) for o in ops}
    assert by == {(p, q) for p in ("mlp", "mlp-train") for q in ("hbm-resident", "drop")}
    assert all(float(o["measured_s"]) >= 0 and float(o["sim_latency_s"]) > 0 for o in ops)
    # each matmul's operand layout: the training step's forward, input and weight gradients
    layouts = {(o["program"], o["opcode"], o["layout"]) for o in ops if o["layout"]}
    assert {o for o in layouts if o[0] == "mlp"} == {("mlp", "addmm", "NT")}
    assert {o[2] for o in layouts if o[0] == "mlp-train"} == {"NT", "NN", "TN"}
    assert all(o["layout"] == "" for o in ops if o["opcode"] not in ("mm", "addmm"))
    op_summary = list(csv.DictReader((tmp_path / "op_summary.csv").open()))
    assert len(op_summary) == 2 * 2 * 2  # programs x profiled placements x models
    assert {r["name"] for r in csv.DictReader((tmp_path / "calibration.csv").open())} >= {
        "fast_bandwidth"
    }
    assert (tmp_path / "programs.json.gz").stat().st_size > 0
    # the CPU stand-in counts no HBM: a header and no rows, no column filled
    assert (tmp_path / "hbm_steps.csv").read_text().strip() == (
        "program,placement,index,name,planned_bytes,over_plan_bytes"
    )
    assert all(r["hbm_over_plan_bytes"] == "" and r["peak_hbm_bytes"] == "" for r in rows)
    table = (tmp_path / "real.md").read_text().splitlines()
    assert len(table) == 2 + len(rows) and table[2].startswith("| mlp | `eager` |")
    assert all(line.split(" | ")[5].startswith("—") for line in table[2:])  # peak HBM (plan)
    assert "done in" in (tmp_path / "run.log").read_text()
    assert (tmp_path / "real.png").stat().st_size > 0


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


def test_the_device_script_takes_at_least_one_warmup_run(tmp_path):
    """Its first untimed run is the checked one: ``--warmup 0`` is refused by the parser,
    not met by a ValueError in every measurement."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), JAX_PLATFORMS="cpu")
    script = [sys.executable, str(ROOT / "benchmarks" / "device_real.py"), "--dry-run"]
    done = subprocess.run(
        [*script, "--warmup", "0", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2 and "argument --warmup: must be at least 1, not 0" in done.stderr
    assert not (tmp_path / "out").exists()


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


def test_the_device_script_plots_an_earlier_run_or_says_why_not(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), JAX_PLATFORMS="cpu")
    script = [sys.executable, str(ROOT / "benchmarks" / "device_real.py"), "--plot-only"]
    done = subprocess.run(
        [*script, "--out", str(tmp_path)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"device_real: {tmp_path / 'results.csv'}: cannot read (No such file or directory)"
    ]
    earlier = ROOT / "docs" / "results" / "gpu-real-h100-heldout"
    (tmp_path / "results.csv").write_bytes((earlier / "results.csv").read_bytes())
    done = subprocess.run(
        [*script, "--out", str(tmp_path)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "real.png").stat().st_size > 0


def _dry(out, programs, **kwargs):
    from mallocgame.runtime.bench import BenchConfig, run_real_bench

    settings = {
        "device": "cpu",
        "tiny": True,
        "placements": ("drop", "heuristic"),
        "work": 4,
        "warmup": 1,
        "steps": 2,
        "plot": False,
        "profile_repeats": 1,
        "profile": ("hbm-resident",),
    } | kwargs
    return run_real_bench(BenchConfig(out=out, programs=tuple(programs), **settings))


def _table(path):
    return list(csv.DictReader(path.open()))


def test_resume_keeps_finished_programs_and_reruns_the_rest(tmp_path):
    _dry(tmp_path, ["mlp", "ffn"])
    first = {name: _table(tmp_path / name) for name in ("results.csv", "ops.csv")}
    calibration = (tmp_path / "calibration.csv").read_text()
    # ffn cut short: its summary (a program's last rows) never written
    summary = [r for r in _table(tmp_path / "summary.csv") if r["program"] == "mlp"]
    with (tmp_path / "summary.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(summary[0]))
        writer.writeheader()
        writer.writerows(summary)
    got = _dry(tmp_path, ["mlp", "ffn"], resume=True)
    log = (tmp_path / "run.log").read_text()
    assert "mlp: finished by the earlier run, kept" in log
    assert "ffn: finished" not in log and "from the earlier run" in log
    assert (tmp_path / "calibration.csv").read_text() == calibration
    results = _table(tmp_path / "results.csv")
    old_mlp = [r for r in first["results.csv"] if r["program"] == "mlp"]
    assert results[: len(old_mlp)] == old_mlp  # kept as they were
    assert [r["placement"] for r in results[len(old_mlp) :]] == [
        r["placement"] for r in first["results.csv"] if r["program"] == "ffn"
    ]  # run again, once
    assert [(s["program"], s["model"]) for s in _table(tmp_path / "summary.csv")] == [
        (p, m) for p in ("mlp", "ffn") for m in ("preset", "calibrated")
    ]
    assert len(_table(tmp_path / "ops.csv")) == len(first["ops.csv"])
    assert len(got["rows"]) == len(results)
    docs = json.loads(__import__("gzip").open(tmp_path / "programs.json.gz").read())
    assert set(docs) == {"mlp", "ffn"}


def test_staged_dot_reads_measure_each_answer_again_summarized_as_their_own_model(tmp_path):
    profile = ("drop", "drop+staged-dots", "hbm-resident+staged-dots")
    _dry(tmp_path, ["mlp"], stage_dot_reads=True, framework=False, profile=profile)
    rows = {r["placement"]: r for r in _table(tmp_path / "results.csv")}
    assert list(rows) == [
        "hbm-resident",
        "drop",
        "drop+staged-dots",
        "heuristic",
        "heuristic+staged-dots",
    ]
    assert int(rows["drop+staged-dots"]["dot_staged_bytes"]) > 0  # every matmul operand
    assert rows["drop"]["dot_staged_bytes"] == "0"
    assert rows["drop+staged-dots"]["identical"] == "True"
    assert not rows["drop+staged-dots"]["sim_calibrated_s"]
    summary = {s["model"]: s["placements"] for s in _table(tmp_path / "summary.csv")}
    assert summary == {"preset": "2", "calibrated": "2", "staged": "2"}
    docs = json.loads(__import__("gzip").open(tmp_path / "programs.json.gz").read())
    assert set(docs["mlp"]["answers"]) == {"drop", "heuristic"}
    program = program_from_dict(docs["mlp"]["program"])  # instances on any preset, later
    derived = derive_instance(program, "gpu_hbm_host", capacity_fraction=0.25)
    assert derived.sha256 == instance_from_dict(docs["mlp"]["instance"]).sha256
    # a staged row is simulated on the preset's staged variant
    staged = derive_instance(program, staged_variant(GPU_HBM_HOST), capacity_fraction=0.25)
    drop = solution_from_dict(docs["mlp"]["answers"]["drop"])
    assert float(rows["drop+staged-dots"]["sim_latency_s"]) == pytest.approx(
        simulate(staged, drop.allocations).latency_s, rel=1e-12
    )
    assert rows["drop+staged-dots"]["sim_latency_s"] != rows["drop"]["sim_latency_s"]
    # per op: drop as it is and staged (simulated on the staged instance, no calibrated
    # column); the framework default has no host operand to stage and is not profiled so
    ops = _table(tmp_path / "ops.csv")
    assert [p for p in dict.fromkeys(r["placement"] for r in ops)] == ["drop", "drop+staged-dots"]
    per_op = [
        sum(float(r["sim_latency_s"]) for r in ops if r["placement"] == p) for p in profile[:2]
    ]
    assert per_op[1] == pytest.approx(simulate(staged, drop.allocations).latency_s, rel=1e-4)
    assert per_op[0] != per_op[1]
    assert not any(r["sim_calibrated_s"] for r in ops if r["placement"] == "drop+staged-dots")
    log = (tmp_path / "run.log").read_text()
    assert "mlp: drop+staged-dots: measured" in log and "matmul operands staged" in log


def test_resume_refuses_an_earlier_run_on_other_settings(tmp_path):
    from mallocgame.errors import MallocGameError

    _dry(tmp_path, ["mlp"])
    with pytest.raises(MallocGameError, match="preset gpu_hbm_host at fast memory 0.25"):
        _dry(tmp_path, ["mlp"], resume=True, capacity_fraction=0.5)
    with pytest.raises(MallocGameError, match=r"mlp with other settings \(tiny\)"):
        _dry(tmp_path, ["mlp"], resume=True, tiny=False)  # the toy's rows under the real one
    with pytest.raises(MallocGameError, match=r"other settings \(placements, work\)"):
        _dry(tmp_path, ["mlp"], resume=True, placements=("greedy",), work=8)
    (tmp_path / "programs.json.gz").write_bytes(b"not gzip")
    with pytest.raises(MallocGameError, match="cannot resume"):
        _dry(tmp_path, ["mlp"], resume=True)


def test_resume_refuses_kept_rows_of_another_column_and_leaves_the_files_as_they_were(tmp_path):
    """A kept row with a column this job does not write was a ValueError once results.csv
    was opened, which left it a header alone (and the next resume kept the loss)."""
    from mallocgame.errors import MallocGameError
    from mallocgame.runtime.bench import _Csv

    quick = {"placements": ("drop",), "calibrate": False, "framework": False, "profile": ()}
    _dry(tmp_path, ["mlp"], **quick)
    rows = _table(tmp_path / "results.csv")
    with (tmp_path / "results.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=[*rows[0], "old_column"])
        writer.writeheader()
        writer.writerows(r | {"old_column": "x"} for r in rows)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(MallocGameError, match=r"results.csv has columns .*: old_column\)"):
        _dry(tmp_path, ["mlp"], resume=True, **quick)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    # the file is replaced once its first rows are written, not before
    path = tmp_path / "summary.csv"
    with pytest.raises(ValueError, match="not in fieldnames"):
        _Csv(path, ("program",), [{"program": "mlp"}, {"other": 1}])
    assert path.read_bytes() == before["summary.csv"]


def test_resume_refuses_a_program_of_yours_defined_otherwise(tmp_path):
    from mallocgame.errors import MallocGameError
    from mallocgame.runtime.bench import factory_program

    def mine(*args, **kwargs):
        return factory_program("tests.runtime.factory_module:block", *args, **kwargs)

    _dry(tmp_path, [], extra=(mine(["f32[16,32]"]),), framework=False, calibrate=False)
    for other in (mine(["f32[8,32]"]), mine(["f32[16,32]"], training=True)):
        with pytest.raises(MallocGameError, match=r"block with other settings \(program\)"):
            _dry(tmp_path, [], extra=(other,), framework=False, calibrate=False, resume=True)
    again = _dry(tmp_path, [], extra=(mine(["f32[16,32]"]),), framework=False, resume=True)
    assert again["rows"] == [] or all(r["program"] == "block" for r in again["rows"])


def test_resume_refuses_a_finished_program_measured_with_other_given_answers(tmp_path):
    """--resume kept a program finished with other --answers (or none) than the run's: its
    rows of the earlier answers stood for this run's, and the new answers were never run."""
    from mallocgame.errors import MallocGameError

    quick = {"placements": ("drop",), "calibrate": False, "framework": False, "profile": ()}
    _dry(tmp_path / "first", ["mlp"], **quick)
    docs = json.loads(gzip.decompress((tmp_path / "first" / "programs.json.gz").read_bytes()))
    mlp = instance_from_dict(docs["mlp"]["instance"])
    folders = {}
    for solver in ("greedy", "heuristic"):
        folders[solver] = tmp_path / solver
        folders[solver].mkdir()
        answer = load_solver(solver).solve(mlp, SolveRequest())
        (folders[solver] / "answer.json").write_text(json.dumps(answer.to_dict()))
    out = tmp_path / "out"
    _dry(out, ["mlp"], answers=folders["greedy"], **quick)
    kept = _dry(out, ["mlp"], answers=folders["greedy"], resume=True, **quick)
    assert "mlp: finished by the earlier run, kept" in (out / "run.log").read_text()
    assert "given:greedy" in {r["placement"] for r in kept["rows"]}
    for answers in (folders["heuristic"], None):
        with pytest.raises(MallocGameError, match=r"mlp with other settings \(answers\)"):
            _dry(out, ["mlp"], answers=answers, resume=True, **quick)
    # an earlier run without answers, resumed with some that are the program's
    _dry(tmp_path / "none", ["mlp"], **quick)
    with pytest.raises(MallocGameError, match=r"mlp with other settings \(answers\)"):
        _dry(tmp_path / "none", ["mlp"], answers=folders["greedy"], resume=True, **quick)


def test_a_program_named_twice_is_run_once(tmp_path, monkeypatch):
    """bench real --programs mlp mlp built, measured and tabled mlp twice."""
    from mallocgame.runtime import bench

    prepared: list[str] = []

    def prepare(self, name):
        prepared.append(name)
        return None  # as a program whose build failed: nothing measured

    monkeypatch.setattr(bench._BenchRun, "_prepare_program", prepare)
    _dry(tmp_path, ["mlp", "ffn", "mlp"], calibrate=False, framework=False)
    assert prepared == ["mlp", "ffn"]


def test_a_program_cut_short_has_no_summary_and_is_run_again(tmp_path, monkeypatch):
    from mallocgame.runtime import bench

    solve = bench._BenchRun._solve_placements

    def then_time_is_up(self, program):
        placements = solve(self, program)
        self.deadline = 0.0  # passes after the answers are solved, before any is measured
        return placements

    monkeypatch.setattr(bench._BenchRun, "_solve_placements", then_time_is_up)
    _dry(tmp_path, ["mlp"])
    assert _table(tmp_path / "summary.csv") == []
    assert "mlp: cut short, no summary" in (tmp_path / "run.log").read_text()
    monkeypatch.setattr(bench._BenchRun, "_solve_placements", solve)
    _dry(tmp_path, ["mlp"], resume=True)
    assert "finished by the earlier run" not in (tmp_path / "run.log").read_text()
    assert [s["program"] for s in _table(tmp_path / "summary.csv")] == ["mlp", "mlp"]
    assert [r["placement"] for r in _table(tmp_path / "results.csv")] == [
        "eager",
        "hbm-resident",
        "drop",
        "heuristic",
    ]


def test_the_hbm_limit_fraction():
    from mallocgame.errors import MallocGameError
    from mallocgame.runtime.bench import hbm_limit_fraction

    assert hbm_limit_fraction(100, 50, 2.0, 1000) == pytest.approx(0.2)
    assert hbm_limit_fraction(900, 500, 1.0, 1000) == 1.0  # never above the whole GPU
    with pytest.raises(MallocGameError, match="positive"):
        hbm_limit_fraction(0, 50, 0.0, 1000)


def test_each_row_starts_from_the_programs_own_hbm(monkeypatch):
    """Before a row the module's gradients are dropped (a step that ran out of memory
    mid-backward leaves some, which the next rows would pay for under a cap), dead objects
    are freed, and under a cap the cached blocks too, with what an earlier row still holds
    logged."""
    from types import SimpleNamespace

    from mallocgame.runtime.bench import _BenchRun

    module = torch.nn.Linear(4, 4)
    module(torch.ones(1, 4)).sum().backward()
    run = object.__new__(_BenchRun)
    logged: list[str] = []
    emptied: list[int] = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(1))
    run.torch, run.memory, run.log, run.limit_bytes, run.held_bytes = (
        torch,
        ReleaseCounting(),
        logged.append,
        None,
        0,
    )
    program = SimpleNamespace(name="p", module=module)
    run._settle(program, "drop")
    assert all(p.grad is None for p in module.parameters())
    assert run.memory.released == 1 and emptied == [] and logged == []
    run.limit_bytes, run.held_bytes = 10 * 2**20, -3 * 2**20  # 3 MiB above the program's
    run._settle(program, "drop")
    assert emptied == [1] and logged == ["p: 3.0 MiB of HBM still held before drop"]


def test_the_hbm_cap_counts_the_segments_a_program_holds():
    """PyTorch's cap counts the segments the allocator reserved, not the tensors in them: a
    cap on the tensors' bytes left no room where a program's tensors share segments with
    free blocks (bert-small on the H200: 333 MiB of tensors in 610 MiB of segments)."""
    from types import SimpleNamespace

    from mallocgame.runtime.bench import BenchConfig, _BenchRun

    MiB = 2**20
    fractions: list[float] = []
    emptied: list[int] = []
    cuda = SimpleNamespace(
        empty_cache=lambda: emptied.append(1),
        memory_allocated=lambda: 333 * MiB,
        memory_reserved=lambda: 610 * MiB,
        get_device_properties=lambda index: SimpleNamespace(total_memory=1000 * MiB),
        set_per_process_memory_fraction=fractions.append,
    )
    run = object.__new__(_BenchRun)
    logged: list[str] = []
    run.config = BenchConfig(out=Path("unused"), hbm_limit=2.0)
    run.torch, run.memory, run.log, run.limit_bytes = (
        SimpleNamespace(cuda=cuda),
        ReleaseCounting(),
        logged.append,
        None,
    )
    program = SimpleNamespace(
        name="p",
        module=torch.nn.Linear(2, 2),
        instance=SimpleNamespace(hardware=SimpleNamespace(fast_memory_bytes=50 * MiB)),
    )
    assert run._limit_hbm(program) == 710 * MiB
    assert fractions == [pytest.approx(0.71)] and run.held_bytes == 333 * MiB
    assert emptied  # the cached blocks go before the segments are counted
    assert logged == [
        "p: HBM capped at 710.0 MiB (610.0 MiB held in segments, 333.0 MiB of it by tensors, "
        "+ 2 x the fast memory's 50.0 MiB)"
    ]


def test_an_hbm_limit_needs_a_gpu(tmp_path):
    from mallocgame.errors import MallocGameError

    with pytest.raises(MallocGameError, match="needs a GPU"):
        _dry(tmp_path, ["mlp"], hbm_limit=1.5)
    assert not (tmp_path / "results.csv").exists()


def test_your_program_may_not_take_a_bundled_programs_name(tmp_path):
    from mallocgame.errors import MallocGameError
    from mallocgame.runtime.bench import factory_program

    mine = factory_program("tests.runtime.factory_module:block", ["f32[16,32]"])
    renamed = dataclasses.replace(mine, name="mlp")
    with pytest.raises(MallocGameError, match="two programs named 'mlp'"):
        _dry(tmp_path, ["mlp"], extra=(renamed,))


@pytest.mark.parametrize(
    "kwargs", [{"optimizer": "adamw"}, {"optimizer": "lion", "training": True}]
)
def test_your_program_takes_an_optimizer_only_for_its_training_step(kwargs):
    from mallocgame.runtime.bench import factory_program
    from mallocgame.runtime.errors import ApplyError

    with pytest.raises(ApplyError, match="only for a training step"):
        factory_program("tests.runtime.factory_module:block", ["f32[16,32]"], **kwargs)
    step = factory_program(
        "tests.runtime.factory_module:block", ["f32[16,32]"], training=True, optimizer="sgd"
    ).training_step
    assert (step.loss, step.optimizer) == ("mean", "sgd")


def test_given_answers_come_from_files_or_an_earlier_runs_programs(tmp_path):
    from mallocgame.errors import MallocGameError
    from mallocgame.instance import instance_from_dict
    from mallocgame.runtime.bench import BenchConfig, _given_answers, run_real_bench

    def run(out, answers):
        config = BenchConfig(
            out=out,
            device="cpu",
            tiny=True,
            programs=("mlp",),
            placements=("drop",),
            warmup=1,
            steps=2,
            calibrate=False,
            plot=False,
            profile=(),
            framework=False,
            answers=answers,
        )
        run_real_bench(config)
        return json.loads(gzip.decompress((out / "programs.json.gz").read_bytes()))

    first = run(tmp_path / "first", None)
    greedy = load_solver("greedy").solve(
        instance_from_dict(first["mlp"]["instance"]), SolveRequest()
    )
    files = tmp_path / "answers"
    files.mkdir()
    (files / "mine.json").write_text(json.dumps(greedy.to_dict()))
    (files / "broken.json").write_text("{")
    skipped: list[str] = []
    assert [s.to_dict() for s in _given_answers(files, skipped.append)] == [greedy.to_dict()]
    assert len(skipped) == 1 and "broken.json skipped" in skipped[0]
    # one solution file is that answer; a file of another kind is refused, not ignored
    assert [s.to_dict() for s in _given_answers(files / "mine.json", skipped.append)] == [
        greedy.to_dict()
    ]
    with pytest.raises(MallocGameError, match="broken.json: not a solution file"):
        _given_answers(files / "broken.json", skipped.append)
    (tmp_path / "notes.txt").write_text("answers")
    with pytest.raises(MallocGameError, match="neither a folder of solution files"):
        _given_answers(tmp_path / "notes.txt", skipped.append)
    # an earlier run's programs.json.gz gives the answers that run was given
    first["mlp"]["answers"]["given:greedy"] = greedy.to_dict()
    earlier = tmp_path / "earlier.json.gz"
    earlier.write_bytes(gzip.compress(json.dumps(first).encode()))
    second = run(tmp_path / "second", earlier)
    assert set(second["mlp"]["answers"]) == {"drop", "given:greedy"}  # the run's own drop
    rows = _table(tmp_path / "second" / "results.csv")
    given = [r for r in rows if r["placement"] == "given:greedy"]
    assert len(given) == 1 and given[0]["identical"] == "True" and given[0]["check_ok"] == "True"
    with pytest.raises(MallocGameError, match="no such file"):
        run(tmp_path / "third", tmp_path / "nowhere")
    assert not (tmp_path / "third").exists()  # refused before anything is written
    (tmp_path / "bad.json.gz").write_bytes(gzip.compress(b"[1]"))
    with pytest.raises(MallocGameError, match="not an earlier run's programs.json.gz"):
        _given_answers(tmp_path / "bad.json.gz", skipped.append)
    # two answers of one solver (seeds 0 and 1): each its own placement, neither lost
    mlp = instance_from_dict(first["mlp"]["instance"])
    for seed in (0, 1):
        answer = load_solver("random").solve(mlp, SolveRequest(seed=seed, work=2))
        (files / f"random{seed}.json").write_text(json.dumps(answer.to_dict()))
    (files / "broken.json").unlink()
    both = run(tmp_path / "fourth", files)
    assert {"given:random", "given:random:s1"} <= set(both["mlp"]["answers"])


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"placements": ("drop", "bogus")}, "unknown solver 'bogus'"),
        ({"placements": ("random:x",)}, "the seed after ':' must be a whole number"),
        ({"placements": ("drop", "drop")}, "'drop' and 'drop' are one answer"),
        ({"placements": ("random:1", "random:01")}, r"one answer \(random with seed 1\)"),
        ({"placements": ("drop", "heuristic", "drop:0")}, "'drop' and 'drop:0' are one answer"),
        ({"profile": ("drop+staged-dots",)}, "staged reads are measured only with"),
        ({"profile": ("hbm-resident", "dorp")}, "profile 'dorp': no placement of this run"),
        (
            {"placements": ("random:01",), "profile": ("random:1",)},
            r"'random:1': no placement .*\(have: hbm-resident, random:01\)",
        ),
        (
            {"placements": ("drop",), "profile": ("greedy+staged-dots",), "stage_dot_reads": True},
            r"'greedy\+staged-dots': no placement .*drop; each also LABEL\+staged-dots\)",
        ),
    ],
)
def test_a_placement_or_profile_it_cannot_run_is_refused_before_anything(tmp_path, change, needle):
    from mallocgame.errors import MallocGameError
    from mallocgame.runtime.bench import BenchConfig, run_real_bench

    config = BenchConfig(out=tmp_path / "out", device="cpu", tiny=True, programs=("mlp",), **change)
    with pytest.raises(MallocGameError, match=needle):
        run_real_bench(config)
    assert not (tmp_path / "out").exists()


def test_your_module_on_the_meta_device_is_logged_as_such(tmp_path):
    from mallocgame.runtime.bench import factory_program

    meta = factory_program("tests.runtime.factory_module:on_meta", ["f32[16,32]"])
    done = _dry(tmp_path, [], extra=(meta,), framework=False, calibrate=False)
    assert done["unbuilt"] == ["on_meta"]
    assert (
        "ApplyError: tests.runtime.factory_module:on_meta: a module or input on the meta "
        in (tmp_path / "run.log").read_text()
    )


def test_the_log_gives_a_small_programs_bytes_in_their_own_unit(tmp_path):
    """ffn's fast memory of 17,920 bytes was logged as '0.0 MiB', as if it had none."""
    from mallocgame.units import format_bytes

    _dry(tmp_path, ["ffn"], placements=("heuristic",), framework=False, calibrate=False)
    line = next(
        line for line in (tmp_path / "run.log").read_text().splitlines() if "fast memory" in line
    )
    assert line.endswith(f"fast memory {format_bytes(17920)}") and "0.0 MiB" not in line


def test_a_run_that_measures_nothing_leaves_no_table_figure_or_programs_of_another(tmp_path):
    """An earlier run's real.md, real.png and programs.json.gz stood beside this run's
    files when this one measured nothing (here: its one program cannot be built)."""
    from mallocgame.runtime.bench import factory_program

    earlier = {
        "real.md": b"| earlier |",
        "real.png": b"png",
        "programs.json.gz": gzip.compress(b"{}"),
    }
    for name, data in earlier.items():
        (tmp_path / name).write_bytes(data)
    meta = factory_program("tests.runtime.factory_module:on_meta", ["f32[16,32]"])
    quick = {"framework": False, "calibrate": False, "plot": True}
    _dry(tmp_path, [], extra=(meta,), resume=True, **quick)  # resumed: the earlier run's
    assert {name: (tmp_path / name).read_bytes() for name in earlier} == earlier
    assert _dry(tmp_path, [], extra=(meta,), **quick)["unbuilt"] == ["on_meta"]
    assert not any((tmp_path / name).exists() for name in earlier)


def test_placements_whose_results_differ_are_said_and_left_out_of_the_models(tmp_path):
    from mallocgame.runtime.bench import factory_program

    noisy = factory_program("tests.runtime.factory_module:noisy", ["f32[16,32]"])
    done = _dry(tmp_path, [], extra=(noisy,), framework=False, calibrate=False)
    game = [r for r in _table(tmp_path / "results.csv") if r["placement"] != "hbm-resident"]
    assert game and all(r["identical"] == "False" for r in game)
    assert all(s["placements"] == 0 for s in done["summary"])  # no time of other results
    assert "results differ" in (tmp_path / "real.md").read_text()


def test_a_profile_of_a_given_answer_by_its_seed_profiles_its_row(tmp_path):
    """given:SOLVER:sSEED was accepted and profiled nothing where the answer's row is
    given:SOLVER (the program's only answer of that solver)."""
    quick = {"placements": ("drop",), "calibrate": False, "framework": False, "profile": ()}
    _dry(tmp_path / "first", ["mlp"], **quick)
    docs = json.loads(gzip.decompress((tmp_path / "first" / "programs.json.gz").read_bytes()))
    answer = load_solver("random").solve(
        instance_from_dict(docs["mlp"]["instance"]), SolveRequest(seed=1, work=2)
    )
    answers = tmp_path / "answers"
    answers.mkdir()
    (answers / "random1.json").write_text(json.dumps(answer.to_dict()))
    for profile in (("given:random:s1",), ("given:random", "given:random:s1")):
        out = tmp_path / str(len(profile))
        _dry(out, ["mlp"], answers=answers, **(quick | {"profile": profile}))
        assert "given:random" in {r["placement"] for r in _table(out / "results.csv")}
        ops = _table(out / "ops.csv")
        assert ops and {o["placement"] for o in ops} == {"given:random"}
        assert [r["placement"] for r in _table(out / "op_summary.csv")] == ["given:random"]


def test_a_profile_names_a_placement_of_the_run_or_a_given_answer(tmp_path):
    """A label is checked against what the run can have: the framework default, the
    placements as written and the labels of the given answers (a typo would profile
    nothing, silently); by default ``drop`` only where the run solves it."""
    from mallocgame.errors import MallocGameError
    from mallocgame.runtime.bench import BenchConfig, _profiled, check_profile
    from tests.builders import conformance_instance

    greedy = load_solver("greedy").solve(conformance_instance("tiny_alias"), SolveRequest(seed=3))
    config = BenchConfig(
        out=tmp_path,
        placements=("drop",),
        profile=("hbm-resident", "drop", "given:greedy", "given:greedy:s3"),
    )
    check_profile(config, [greedy])
    with pytest.raises(MallocGameError, match="'given:greedy': no placement"):
        check_profile(config)  # no such answer given
    default = BenchConfig(out=tmp_path, placements=("heuristic",))
    check_profile(default)
    assert _profiled(default) == ("hbm-resident",)
    assert _profiled(BenchConfig(out=tmp_path)) == ("hbm-resident", "drop")
