"""The TPU steering benchmark: an unknown program or solver is refused before any compile
and nothing is written; --figure with no records is a usage error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.benchmarks import load_benchmark

tpu_steering = load_benchmark("tpu_steering")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--programs", "tpu-v1/nosuch-v4"], "--programs tpu-v1/nosuch-v4: not tpu-v1 programs"),
        (["--solver", "nosuch"], "unknown solver 'nosuch'"),
    ],
)
def test_an_unknown_program_or_solver_is_a_usage_error(
    argv, said, tmp_path: Path, monkeypatch, capsys
) -> None:
    out = tmp_path / "records" / "steering.jsonl"
    monkeypatch.setattr(sys, "argv", ["tpu_steering.py", *argv, "--out", str(out)])
    monkeypatch.setattr(tpu_steering, "_record", lambda *args: pytest.fail("compiled"))
    with pytest.raises(SystemExit) as stop:
        tpu_steering.main()
    assert stop.value.code == 2 and said in capsys.readouterr().err
    assert not out.parent.exists()


def test_a_figure_of_missing_records_is_a_usage_error(tmp_path: Path, monkeypatch, capsys) -> None:
    out, figure = tmp_path / "nosuch" / "steering.jsonl", tmp_path / "figure.png"
    argv = ["tpu_steering.py", "--out", str(out), "--figure", str(figure)]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as stop:
        tpu_steering.main()
    assert stop.value.code == 2
    assert f"--out {out}: No such file or directory" in capsys.readouterr().err
