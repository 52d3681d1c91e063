"""The TPU steering benchmark: an unknown program or solver is refused before any compile
and nothing is written; --figure with no records is a usage error."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.benchmarks import BENCHMARKS, load_benchmark

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


@pytest.mark.parametrize("seconds", ["-1", "nan", "inf", "abc"])
def test_a_budget_that_is_no_budget_is_a_usage_error(
    seconds: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    """--seconds -1 or nan was a traceback from the solver, after the program loaded."""
    argv = ["tpu_steering.py", "--seconds", seconds, "--out", str(tmp_path / "s.jsonl")]
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(tpu_steering, "_record", lambda *args: pytest.fail("compiled"))
    with pytest.raises(SystemExit) as stop:
        tpu_steering.main()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "argument --seconds" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "text, said",
    [
        ("{\n", "line 1 is not JSON"),
        ('{"model": "alexnet", "target": "tpu-v4"}\n', "line 1 is not a steering record"),
        ("", "no record of mode diff to draw"),
    ],
)
def test_a_figure_of_what_is_no_steering_record_is_a_usage_error(
    text: str, said: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    """A file of other records (tpu_generations') was a KeyError traceback."""
    out, figure = tmp_path / "steering.jsonl", tmp_path / "figure.png"
    out.write_text(text)
    monkeypatch.setattr(
        sys, "argv", ["tpu_steering.py", "--out", str(out), "--figure", str(figure)]
    )
    with pytest.raises(SystemExit) as stop:
        tpu_steering.main()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and said in err.splitlines()[-1] and not figure.exists()


def test_the_committed_records_still_draw(tmp_path: Path, monkeypatch) -> None:
    out = BENCHMARKS.parent / "docs" / "results" / "tpu-v1" / "steering-v4.jsonl"
    figure = tmp_path / "figure.png"
    monkeypatch.setattr(
        sys, "argv", ["tpu_steering.py", "--out", str(out), "--figure", str(figure)]
    )
    tpu_steering.main()
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_record_of_another_budget_is_not_taken_for_this_one(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """The skip key was (program, mode, solver): a rerun with another --seconds reused the
    record of the first budget and ran nothing."""
    out = tmp_path / "steering.jsonl"
    program = "tpu-v1/gru_infer_b512-v4"
    ran = []

    def record(name, mode, solver, seconds):
        ran.append((name, mode, seconds))
        return {"seconds": 1.0}

    monkeypatch.setattr(tpu_steering, "_record", record)

    def run(*argv: str) -> None:
        base = ["tpu_steering.py", "--programs", program, "--modes", "diff", "--solver", "es"]
        monkeypatch.setattr(sys, "argv", [*base, *argv, "--out", str(out)])
        tpu_steering.main()

    run("--seconds", "5")
    run("--seconds", "5")  # the same budget: skipped
    run("--seconds", "30")
    assert ran == [(program, "diff", 5.0), (program, "diff", 30.0)]
    budgets = [json.loads(line)["budget_s"] for line in out.read_text().splitlines()]
    assert budgets == [5.0, 30.0]
    out.write_text(json.dumps({"program": program, "mode": "diff", "solver": "es"}) + "\n")
    capsys.readouterr()
    run("--seconds", "5")  # a record from before budgets were kept matches none
    assert ran[-1] == (program, "diff", 5.0)
    assert "1 records keep no budget_s" in capsys.readouterr().err
