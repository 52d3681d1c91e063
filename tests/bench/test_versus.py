"""Two solvers head to head from sweep records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mallocgame.bench.sweep import RECORD_FORMAT
from mallocgame.bench.versus import VersusRow, format_versus, head_to_head, summarize
from mallocgame.cli import main
from mallocgame.errors import ComparisonError


def record(program: str, solver: str, seed: int, reward: float, *, valid: bool = True,
           buffers: int = 10, budget: float = 60.0, options: dict | None = None) -> dict:
    return {"format": RECORD_FORMAT, "program": program, "solver": solver, "seed": seed,
            "valid": valid, "failures": "" if valid else "overlap", "normalized_reward": reward,
            "buffers": buffers, "budget": {"seconds": budget, "work": None}, "options": options or {}}


def test_cells_verdicts_and_leads() -> None:
    records = [
        record("big", "a", 0, 0.5, buffers=90), record("big", "b", 0, 0.4, buffers=90),
        record("big", "a", 1, 0.3, buffers=90), record("big", "b", 1, 0.6, buffers=90),
        record("small", "a", 0, 0.7), record("small", "b", 0, 0.7),
        record("small", "a", 1, 0.8), record("small", "b", 1, 0.8 * (1 + 1e-12)),  # same game, rounding
        record("mid", "a", 0, 0.9, buffers=50), record("mid", "b", 0, 0.6, buffers=50),
        record("mid", "a", 1, 0.9, buffers=50),  # b has no seed 1: not counted
        record("other", "c", 0, 1.0),  # neither solver
    ]
    rows = head_to_head(records, "a", "b")
    assert [r.program for r in rows] == ["small", "mid", "big"]  # smallest program first
    small, mid, big = rows
    assert small.outcomes() == [0, 0] and small.verdict() == "level"
    assert mid.outcomes() == [1] and mid.verdict() == "ahead" and mid.cells[1] == (0.9, None)
    assert big.outcomes() == [1, -1] and big.verdict() == "split"
    assert mid.mean_lead() == pytest.approx(0.5)
    assert big.mean_lead() == pytest.approx((0.5 / 0.4 - 1 + 0.3 / 0.6 - 1) / 2)
    assert VersusRow("x", 1, {0: (None, 0.2)}).verdict() == "—"
    assert summarize(rows, "a", "b").splitlines() == [
        "cells: a ahead in 2, level in 2, behind in 1 of 5 against b",
        "programs: ahead on 1, level on 1, split on 1, behind on 0 of 3",
    ]


def test_table_bolds_the_better_and_shows_digits_that_differ() -> None:
    records = [record("p", "a", 0, 0.857176), record("p", "b", 0, 0.857178),
               record("p", "a", 1, 0.5), record("p", "b", 1, 0.25),
               record("p", "a", 2, 0.1, valid=False), record("p", "b", 2, 0.2)]
    table = format_versus(head_to_head(records, "a", "b"), "a", "b")
    line = table.splitlines()[2]
    assert "0.857176 / **0.857178**" in line  # 4 digits would show a tie
    assert "**0.5000** / 0.2500" in line
    assert "— / 0.2000" in line  # an invalid answer is no answer
    assert "1–0–1" in line
    assert table.splitlines()[0].startswith("| program | buffers | seed 0: a / b | seed 1: a / b | seed 2: a / b |")


def test_refuses_ambiguous_comparisons() -> None:
    with pytest.raises(ComparisonError, match="two records for p a seed 0"):
        head_to_head([record("p", "a", 0, 0.5), record("p", "a", 0, 0.6)], "a", "b")
    with pytest.raises(ComparisonError, match="itself"):
        head_to_head([], "a", "a")


def _write(folder: Path, records: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i, r in enumerate(records):
        (folder / f"r{i}.json").write_text(json.dumps(r))


def test_cli_selects_budget_settings_programs_and_seeds(tmp_path: Path, capsys) -> None:
    _write(tmp_path / "one", [
        record("p", "muzero", 0, 0.6), record("p", "es", 0, 0.5, options={"workers": 2}),
        record("p", "es", 0, 0.9),  # another setting of es: not this comparison
        record("p", "muzero", 1, 0.6, budget=120.0),  # another budget
    ])
    _write(tmp_path / "two", [record("q", "muzero", 0, 0.2), record("q", "es", 0, 0.3, options={"workers": 2})])
    argv = ["bench", "versus", "muzero", "es", "--out", str(tmp_path / "one"), str(tmp_path / "two"),
            "--budget", "60", "--option", "es:workers=2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "| p | 10 | **0.6000** / 0.5000 | 1–0–0 | +20.000% |" in out
    assert "| q | 10 | 0.2000 / **0.3000** | 0–0–1 |" in out
    assert "programs: ahead on 1, level on 0, split on 0, behind on 1 of 2" in out
    assert main([*argv, "--programs", "q"]) == 0
    assert "| p |" not in capsys.readouterr().out
    assert main([*argv, "--seeds", "3"]) == 2  # nothing left
    assert "no records of muzero or es" in capsys.readouterr().err
    # without the es setting, es's other record meets muzero's
    assert main(argv[:-2]) == 0
    assert "0.6000 / **0.9000**" in capsys.readouterr().out


def test_cli_errors_and_invalid_answers(tmp_path: Path, capsys) -> None:
    assert main(["bench", "versus", "a", "b", "--out", str(tmp_path / "none"), "--budget", "60"]) == 2
    assert "no records folder" in capsys.readouterr().err
    _write(tmp_path, [record("p", "a", 0, 0.5), record("p", "a", 0, 0.6)])
    assert main(["bench", "versus", "a", "b", "--out", str(tmp_path), "--budget", "60"]) == 2
    assert "two records for p a seed 0" in capsys.readouterr().err
    _write(tmp_path / "bad", [record("p", "a", 0, 0.5, valid=False), record("p", "b", 0, 0.6)])
    assert main(["bench", "versus", "a", "b", "--out", str(tmp_path / "bad"), "--budget", "60"]) == 1
    assert "INVALID: p a s0: overlap" in capsys.readouterr().err
    assert main(["bench", "versus", "a", "--out", str(tmp_path), "--budget", "60"]) == 2  # needs two solvers
