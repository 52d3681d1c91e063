"""The frozen-against-today recount of a suite program's flops."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.benchmarks import load_benchmark

recount = load_benchmark("conv_flops_recount")


def test_a_program_without_convolutions_is_the_same_today(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    assert recount.main(["--programs", "xla-v1/gru_infer", "--out", str(out)]) == 0
    (row,) = list(csv.DictReader(out.open()))
    assert row == {
        "program": "xla-v1/gru_infer",
        "same_instructions": "True",
        "instructions": "22",
        "flops_frozen": "2.541e+08",
        "flops_reextracted": "2.541e+08",
        "ratio": "1.0000",
        "instructions_changed": "0",
    }  # as docs/results/conv-flops-recount.csv has it


@pytest.mark.parametrize(
    "program, needle",
    [("xla-v1/nosuch", "nosuch"), ("torch-v1/wrn101_2_infer_b128", "not a program of a suite")],
)
def test_a_program_it_cannot_recount_is_a_usage_error(program: str, needle: str, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        recount.main(["--programs", program])
    assert stop.value.code == 2 and needle in capsys.readouterr().err


def test_a_folder_as_out_is_refused_before_any_compile(tmp_path: Path, monkeypatch, capsys) -> None:
    """A folder passed the check of --out, and the write failed after every compile."""
    monkeypatch.setattr(recount, "recount", lambda name: pytest.fail("compiled"))
    with pytest.raises(SystemExit) as stop:
        recount.main(["--programs", "xla-v1/gru_infer", "--out", str(tmp_path)])
    assert stop.value.code == 2
    assert f"{tmp_path}: a directory, not a file" in capsys.readouterr().err
