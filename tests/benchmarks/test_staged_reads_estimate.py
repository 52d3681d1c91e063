"""The staged-reads estimate from two runs' per-op profiles: by hand, and its bad input."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

from tests.benchmarks import load_benchmark

estimate = load_benchmark("staged_reads_estimate")

OPS = ("program", "placement", "index", "name", "opcode", "measured_s")


def _run(path: Path) -> Path:
    """A run of program p: an addmm (operands 2 GB and 1 GB, output 0.5 GB) and a gelu."""
    path.mkdir()
    rows = [
        ("p", "drop", 0, "addmm", "addmm", 0.5),
        ("p", "drop", 1, "gelu", "gelu", 0.1),
        ("p", "hbm-resident", 0, "addmm", "addmm", 0.001),
        ("p", "hbm-resident", 1, "gelu", "gelu", 0.0005),
    ]
    with (path / "ops.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(OPS)
        writer.writerows(rows)
    with (path / "calibration.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(("name", "value", "unit", "method"))
        writer.writerows(
            [
                ("copy_in_bandwidth", 5e10, "B/s", "-"),
                ("copy_out_bandwidth", 4e10, "B/s", "-"),
                ("slow_write_bandwidth", 1e9, "B/s", "-"),
            ]
        )
    instance = {
        "instructions": [{"buffers": [0, 1, 2]}, {"buffers": [3, 4]}],
        "buffers": [
            {"id": 0, "size": 2 * 10**9, "is_output": False},
            {"id": 1, "size": 10**9, "is_output": False},
            {"id": 2, "size": 5 * 10**8, "is_output": True},
            {"id": 3, "size": 5 * 10**8, "is_output": False},
            {"id": 4, "size": 5 * 10**8, "is_output": True},
        ],
    }
    with gzip.open(path / "programs.json.gz", "wt") as f:
        json.dump({"p": {"instance": instance, "answers": {}}}, f)
    return path


def test_the_estimate_by_hand(tmp_path, capsys):
    run = _run(tmp_path / "run")
    assert estimate.main(["--program", "p", "--inplace", str(run), "--hbm", str(run)]) == 0
    out = capsys.readouterr().out
    # addmm staged: 3 GB copied at the slower copy rate (40 GB/s) = 75 ms, then the longer
    # of its HBM time (1 ms) and writing 0.5 GB at 1 GB/s (500 ms)
    assert "1 matmuls, in place 500.0 ms measured, staged 575.0 ms estimated" in out
    assert "drop's step 600.0 ms measured per op, 675.0 ms with staged matmuls" in out


def test_a_run_without_the_profile_is_one_line(tmp_path, capsys):
    run = _run(tmp_path / "run")
    assert estimate.main(["--program", "q", "--inplace", str(run), "--hbm", str(run)]) == 2
    assert "no per-op profile of drop for q" in capsys.readouterr().err
    missing = str(tmp_path / "missing")
    assert estimate.main(["--program", "p", "--inplace", missing, "--hbm", str(run)]) == 2
