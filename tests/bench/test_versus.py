"""Two solvers head to head from sweep records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mallocgame.bench.sweep import RECORD_FORMAT
from mallocgame.bench.versus import Entry, VersusRow, format_versus, head_to_head, read_entries, summarize
from mallocgame.cli import main
from mallocgame.errors import ComparisonError


def record(program: str, solver: str, seed: int, reward: float, *, valid: bool = True,
           buffers: int = 10, budget: float | None = 60.0, work: int | None = None,
           options: dict | None = None, settings: dict | None = None) -> dict:
    return {"format": RECORD_FORMAT, "program": program, "solver": solver, "seed": seed,
            "valid": valid, "failures": "" if valid else "overlap", "normalized_reward": reward,
            "buffers": buffers, "budget": {"seconds": budget, "work": work}, "options": options or {},
            "settings": settings or {}}


def entries(*records: dict) -> list[Entry]:
    """The records as :func:`read_entries` returns them."""
    return [Entry(f"r{i}.json", r["program"], r["solver"], r["seed"],
                  r["normalized_reward"] if r["valid"] else None, r["failures"] or "invalid",
                  r.get("buffers"), r.get("settings")) for i, r in enumerate(records)]


def test_cells_verdicts_and_leads() -> None:
    records = entries(
        record("big", "a", 0, 0.5, buffers=90), record("big", "b", 0, 0.4, buffers=90),
        record("big", "a", 1, 0.3, buffers=90), record("big", "b", 1, 0.6, buffers=90),
        record("small", "a", 0, 0.7), record("small", "b", 0, 0.7),
        record("small", "a", 1, 0.8), record("small", "b", 1, 0.8 * (1 + 1e-12)),  # same game, rounding
        record("mid", "a", 0, 0.9, buffers=50), record("mid", "b", 0, 0.6, buffers=50),
        record("mid", "a", 1, 0.9, buffers=50),  # b has no seed 1: not counted
        record("other", "c", 0, 1.0),  # neither solver
    )
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
    records = entries(record("p", "a", 0, 0.857176), record("p", "b", 0, 0.857178),
                      record("p", "a", 1, 0.5), record("p", "b", 1, 0.25),
                      record("p", "a", 2, 0.1, valid=False), record("p", "b", 2, 0.2),
                      record("p", "a", 3, 0.9853875), record("p", "b", 3, 0.985387),
                      record("p", "a", 4, 0.3), record("p", "b", 4, 0.3),
                      record("q", "a", 0, 0.3, buffers=None), record("q", "b", 1, 0.2, buffers=None))
    table = format_versus(head_to_head(records, "a", "b"), "a", "b").splitlines()
    assert table[0].startswith("| program | buffers | seed 0: a / b | seed 1: a / b | seed 2: a / b |")
    line = table[3]
    assert "0.857176 / **0.857178**" in line  # 4 digits would show a tie
    assert "**0.5000** / 0.2500" in line
    assert "— / 0.2000" in line  # an invalid answer is no answer
    assert "**0.9853875** / 0.9853870" in line  # as many digits as it takes
    assert "| 0.3000 / 0.3000 |" in line  # a tie: neither bold
    assert "2–1–1" in line
    # q has no seed both answered: no verdict, no lead, not counted among the programs
    assert table[2] == "| q | — | 0.3000 / — | — / 0.2000 | — | — | — | 0–0–0 | — |"
    assert summarize(head_to_head(records, "a", "b"), "a", "b").endswith("of 1")


def test_lead_needs_a_positive_b() -> None:
    assert VersusRow("p", 1, {0: (0.2, 0.0), 1: (0.5, 0.25)}).mean_lead() is None
    assert VersusRow("p", 1, {0: (0.2, None), 1: (0.5, 0.25)}).mean_lead() == pytest.approx(1.0)


def test_refuses_ambiguous_comparisons() -> None:
    with pytest.raises(ComparisonError, match="two records for p a seed 0: r0.json and r1.json"):
        head_to_head(entries(record("p", "a", 0, 0.5), record("p", "a", 0, 0.6)), "a", "b")
    with pytest.raises(ComparisonError, match="itself"):
        head_to_head([], "a", "a")
    # a default that changed between two sweeps
    with pytest.raises(ComparisonError, match="a records disagree on imitation: 0.5 in r0.json, 0.9 in r1.json"):
        head_to_head(entries(record("p", "a", 0, 0.5, settings={"imitation": 0.5}),
                             record("p", "a", 1, 0.6, settings={"imitation": 0.9})), "a", "b")
    # a setting older records lack is not a disagreement
    rows = head_to_head(entries(record("p", "a", 0, 0.5, settings={"imitation": 0.5}),
                                record("p", "a", 1, 0.6, settings={"imitation": 0.5, "restart_fraction": 0.0})),
                        "a", "b")
    assert rows[0].cells == {0: (0.5, None), 1: (0.6, None)}


def test_read_entries_checks_every_record(tmp_path: Path) -> None:
    good = record("p", "a", 0, 0.5)
    _write(tmp_path / "ok", [good])
    budget = {"seconds": 60.0, "work": None}
    assert [e.seed for e in read_entries([tmp_path / "ok"] * 2, ("a", "b"), budget=budget, options={})] == [0]
    for broken, message in [({"seed": "1"}, "seed '1' is not an integer"), ({"seed": True}, "is not an integer"),
                            ({"program": None}, "no program name"), ({"valid": None}, "no 'valid' flag"),
                            ({"normalized_reward": None}, "a valid record with normalized reward None")]:
        folder = tmp_path / f"bad{len(message)}{broken!r:.4}"
        _write(folder, [{**good, **broken}])
        with pytest.raises(ComparisonError, match=message):
            read_entries([folder], ("a", "b"), budget=budget, options={})
    with pytest.raises(ComparisonError, match="no records folder"):
        read_entries([tmp_path / "none"], ("a", "b"), budget=budget, options={})
    # an invalid record needs no reward, and other solvers' records are not read at all
    _write(tmp_path / "mixed", [{**good, "valid": False, "normalized_reward": None, "failures": "overlap"},
                                {**good, "solver": "c", "seed": "x"}])
    [entry] = read_entries([tmp_path / "mixed"], ("a", "b"), budget=budget, options={})
    assert entry.reward is None and entry.failures == "overlap"


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
    assert "no records of muzero or es with budget 60 s" in capsys.readouterr().err
    # without the es setting, es's other record meets muzero's
    assert main(argv[:-2]) == 0
    assert "0.6000 / **0.9000**" in capsys.readouterr().out


def test_cli_errors_and_invalid_answers(tmp_path: Path, capsys) -> None:
    assert main(["bench", "versus", "a", "b", "--out", str(tmp_path / "none"), "--budget", "60"]) == 2
    assert "no records folder" in capsys.readouterr().err
    _write(tmp_path, [record("p", "a", 0, 0.5), record("p", "a", 0, 0.6)])
    assert main(["bench", "versus", "a", "b", "--out", str(tmp_path), "--budget", "60"]) == 2
    assert "two records for p a seed 0" in capsys.readouterr().err
    assert main(["bench", "versus", "a", "a", "--out", str(tmp_path), "--budget", "60"]) == 2
    assert "itself" in capsys.readouterr().err
    assert main(["bench", "versus", "a", "b", "--out", str(tmp_path), "--budget", "60", "--option", "c:x=1"]) == 2
    assert "solver 'c' is not one of a, b" in capsys.readouterr().err
    # a cell spread over two folders of the same setting
    _write(tmp_path / "x", [record("p", "b", 0, 0.5)])
    _write(tmp_path / "y", [record("p", "b", 0, 0.6)])
    assert main(["bench", "versus", "a", "b", "--out", str(tmp_path / "x"), str(tmp_path / "y"), "--budget", "60"]) == 2
    assert "two records for p b seed 0" in capsys.readouterr().err
    # a work budget picks its own records
    _write(tmp_path / "w", [record("p", "a", 0, 0.5, budget=None, work=20), record("p", "b", 0, 0.4, budget=None, work=20),
                            record("p", "a", 1, 0.5)])
    assert main(["bench", "versus", "a", "b", "--out", str(tmp_path / "w"), "--work", "20"]) == 0
    out = capsys.readouterr().out
    assert "seed 1" not in out and "**0.5000** / 0.4000" in out
    assert main(["bench", "versus", "a", "b", "--out", str(tmp_path / "w")]) == 2
    assert "with budget none" in capsys.readouterr().err
    _write(tmp_path / "bad", [record("p", "a", 0, 0.5, valid=False), record("p", "b", 0, 0.6)])
    assert main(["bench", "versus", "a", "b", "--out", str(tmp_path / "bad"), "--budget", "60"]) == 1
    assert "INVALID: p a s0: overlap" in capsys.readouterr().err
    assert main(["bench", "versus", "a", "--out", str(tmp_path), "--budget", "60"]) == 2  # needs two solvers
