"""The GPU study's table from a results.csv: every row, failures said, or one typed error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mallocgame.errors import MallocGameError
from mallocgame.runtime.bench_table import real_results_table
from tests.runtime.conftest import write_results_csv

ROOT = Path(__file__).resolve().parents[2]
MiB = 2**20


ROWS = [
    {
        "program": "p",
        "placement": "eager",
        "solver": "framework",
        "hbm_limit_bytes": 1553 * MiB,
        "error": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 32.00 MiB.",
    },
    {
        "program": "p",
        "placement": "heuristic",
        "normalized_reward": "0.80104",
        "sim_latency_s": 0.2278,
        "measured_median_s": 0.2106,
        "measured_p10_s": 0.2079,
        "measured_p90_s": 0.2173,
        "peak_hbm_bytes": 368 * MiB,
        "planned_hbm_peak_bytes": 192 * MiB,
        "hbm_over_plan_bytes": 176 * MiB,
        "hbm_limit_bytes": 1553 * MiB,
    },
    {
        "program": "p",
        "placement": "es:0",
        "normalized_reward": "0.65",
        "sim_latency_s": 0.00378,
        "planned_hbm_peak_bytes": 192 * MiB,
        "error": "RuntimeError: something else went wrong",
    },
]


def test_a_row_whose_results_differ_says_so(tmp_path):
    differing = {
        **ROWS[1],
        "placement": "drop",
        "identical": False,
        "max_abs_diff": 0.25,
        "hbm_over_plan_bytes": "",
        "hbm_limit_bytes": "",
    }
    write_results_csv(tmp_path / "results.csv", [differing, {**differing, "identical": True}])
    lines = real_results_table(tmp_path / "results.csv").splitlines()
    assert "210.6 ms (207.9–217.3), results differ (max \\|diff\\| 0.25) |" in lines[2]
    assert "results differ" not in lines[3]


def test_every_row_is_in_the_table_failures_said(tmp_path):
    write_results_csv(tmp_path / "results.csv", ROWS)
    lines = real_results_table(tmp_path / "results.csv").splitlines()
    assert len(lines) == 2 + len(ROWS)
    assert lines[2] == "| p | `eager` | — | — | out of memory | — | — | 1,553 MiB |"
    assert lines[3] == (
        "| p | `heuristic` | 0.8010 | 227.8 ms | 210.6 ms (207.9–217.3) | 368 MiB (192 MiB) "
        "| 176 MiB | 1,553 MiB |"
    )
    assert lines[4] == (
        "| p | `es:0` | 0.6500 | 3.78 ms | failed: RuntimeError: something else went wrong "
        "| — (192 MiB) | — | — |"
    )


def test_a_file_that_is_not_a_results_csv_is_a_typed_error(tmp_path):
    with pytest.raises(MallocGameError, match="cannot read"):
        real_results_table(tmp_path / "missing.csv")
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(MallocGameError, match="not a bench real results.csv"):
        real_results_table(tmp_path / "other.csv")
    (tmp_path / "binary.csv").write_bytes(b"\xff\xfe\x00program")
    with pytest.raises(MallocGameError, match="cannot read"):
        real_results_table(tmp_path / "binary.csv")
    write_results_csv(tmp_path / "empty.csv", [])
    with pytest.raises(MallocGameError, match="no row to tabulate"):
        real_results_table(tmp_path / "empty.csv")


def test_a_file_without_the_columns_the_table_reads_is_a_typed_error(tmp_path):
    """A header of measured_median_s alone passed the check and was a KeyError traceback."""
    (tmp_path / "results.csv").write_text("measured_median_s\n0.5\n")
    with pytest.raises(MallocGameError, match=r"not a bench real .*no column program, placement"):
        real_results_table(tmp_path / "results.csv")
    done = _table_only(tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "no column program, placement" in done.stderr
    (tmp_path / "short.csv").write_text("program,measured_median_s,placement\nmlp,0.5\n")
    with pytest.raises(MallocGameError, match="line 2: no cell of column placement"):
        real_results_table(tmp_path / "short.csv")


def _table_only(out: Path) -> subprocess.CompletedProcess:
    """``benchmarks/device_real.py --table-only --out OUT``, run as a user runs it."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), JAX_PLATFORMS="cpu")
    script = [sys.executable, str(ROOT / "benchmarks" / "device_real.py"), "--table-only"]
    return subprocess.run(
        [*script, "--out", str(out)], capture_output=True, text=True, env=env, timeout=120
    )


def test_the_device_script_prints_an_earlier_runs_table_or_says_why_not(tmp_path):
    missing = _table_only(tmp_path)
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.count("\n") == 1 and "cannot read" in missing.stderr
    write_results_csv(tmp_path / "results.csv", ROWS)
    done = _table_only(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == real_results_table(tmp_path / "results.csv")


def test_a_cell_that_is_not_a_number_is_a_typed_error_naming_its_line_and_column(tmp_path):
    write_results_csv(tmp_path / "results.csv", [ROWS[1], {**ROWS[1], "measured_p10_s": "fast"}])
    with pytest.raises(MallocGameError, match="line 3, column measured_p10_s: 'fast' is not a"):
        real_results_table(tmp_path / "results.csv")
    done = _table_only(tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "column measured_p10_s" in done.stderr


def test_the_numbers_are_read_once_as_floats(tmp_path):
    from mallocgame.runtime.bench import read_results_csv

    write_results_csv(tmp_path / "results.csv", ROWS[:2])
    eager, heuristic = read_results_csv(tmp_path / "results.csv")
    assert eager["measured_median_s"] is None and eager["hbm_limit_bytes"] == 1553 * MiB
    assert heuristic["normalized_reward"] == 0.80104 and heuristic["placement"] == "heuristic"
