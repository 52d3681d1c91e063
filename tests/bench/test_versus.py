"""Two solvers head to head from sweep records."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from mallocgame.bench.sweep import RECORD_FORMAT
from mallocgame.bench.versus import (
    Entry,
    VersusRow,
    format_versus,
    head_to_head,
    read_entries,
    summarize,
)
from mallocgame.cli import main
from mallocgame.errors import ComparisonError


def record(
    program: str,
    solver: str,
    seed: int,
    reward: float,
    *,
    valid: bool = True,
    buffers: int = 10,
    budget: float | None = 60.0,
    work: int | None = None,
    options: dict | None = None,
    settings: dict | None = None,
) -> dict:
    return {
        "format": RECORD_FORMAT,
        "version": 1,
        "program": program,
        "solver": solver,
        "seed": seed,
        "valid": valid,
        "failures": "" if valid else "overlap",
        "normalized_reward": reward,
        "buffers": buffers,
        "budget": {"seconds": budget, "work": work},
        "options": options or {},
        "settings": settings or {},
    }


P, Q = "xla-v1/lstm_infer", "xla-v1/resnet_infer"  # 106 and 268 buffers


@functools.cache
def _answer(program: str, solver: str) -> dict:
    """The solution document of ``solver`` on ``program`` (seed 0, work 2)."""
    from mallocgame.solvers import SolveRequest, get_solver
    from mallocgame.workloads.registry import load_workload

    return get_solver(solver).solve(load_workload(program), SolveRequest(seed=0, work=2)).to_dict()


def reward(program: str, solver: str) -> float:
    return _answer(program, solver)["normalized_reward"]


def kept(
    program: str, solver: str, seed: int, answer: str, *, broken: bool = False, **kwargs
) -> dict:
    """A record of ``solver`` keeping the solution ``answer`` (a solver's name) gives
    ``program``, named as the record's solver and seed, whose stored numbers claim more
    than it (0.99, 1 buffer): a table must read the solution. ``broken``: the solution's
    normalized reward edited to 7.5, so it fails the check though the record says it is
    valid."""
    solution = {**_answer(program, answer), "solver": solver, "seed": seed}
    if broken:
        solution["normalized_reward"] = 7.5
    return {**record(program, solver, seed, 0.99, buffers=1, **kwargs), "solution": solution}


def entries(*records: dict) -> list[Entry]:
    """The records as :func:`read_entries` returns them."""
    return [
        Entry(
            f"r{i}.json",
            r["program"],
            r["solver"],
            r["seed"],
            r["normalized_reward"] if r["valid"] else None,
            r["failures"] or "invalid",
            r.get("buffers"),
            r.get("settings"),
        )
        for i, r in enumerate(records)
    ]


def test_cells_verdicts_and_leads() -> None:
    records = entries(
        record("big", "a", 0, 0.5, buffers=90),
        record("big", "b", 0, 0.4, buffers=90),
        record("big", "a", 1, 0.3, buffers=90),
        record("big", "b", 1, 0.6, buffers=90),
        record("small", "a", 0, 0.7),
        record("small", "b", 0, 0.7),
        record("small", "a", 1, 0.8),
        record("small", "b", 1, 0.8 * (1 + 1e-12)),  # same game, rounding
        record("mid", "a", 0, 0.9, buffers=50),
        record("mid", "b", 0, 0.6, buffers=50),
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
    records = entries(
        record("p", "a", 0, 0.857176),
        record("p", "b", 0, 0.857178),
        record("p", "a", 1, 0.5),
        record("p", "b", 1, 0.25),
        record("p", "a", 2, 0.1, valid=False),
        record("p", "b", 2, 0.2),
        record("p", "a", 3, 0.9853875),
        record("p", "b", 3, 0.985387),
        record("p", "a", 4, 0.3),
        record("p", "b", 4, 0.3),
        record("q", "a", 0, 0.3, buffers=None),
        record("q", "b", 1, 0.2, buffers=None),
    )
    table = format_versus(head_to_head(records, "a", "b"), "a", "b").splitlines()
    assert table[0].startswith(
        "| program | buffers | seed 0: a / b | seed 1: a / b | seed 2: a / b |"
    )
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
    with pytest.raises(
        ComparisonError, match="a records disagree on imitation: 0.5 in r0.json, 0.9 in r1.json"
    ):
        head_to_head(
            entries(
                record("p", "a", 0, 0.5, settings={"imitation": 0.5}),
                record("p", "a", 1, 0.6, settings={"imitation": 0.9}),
            ),
            "a",
            "b",
        )
    # a setting older records lack is not a disagreement
    rows = head_to_head(
        entries(
            record("p", "a", 0, 0.5, settings={"imitation": 0.5}),
            record("p", "a", 1, 0.6, settings={"imitation": 0.5, "restart_fraction": 0.0}),
        ),
        "a",
        "b",
    )
    assert rows[0].cells == {0: (0.5, None), 1: (0.6, None)}
    # every pair is compared, not each with the first only: r0 states neither value
    with pytest.raises(
        ComparisonError, match="a records disagree on imitation: 0.5 in r1.json, 0.9 in r2.json"
    ):
        head_to_head(
            entries(
                record("p", "a", 0, 0.5, settings={"restart_fraction": 0.0}),
                record("p", "a", 1, 0.6, settings={"imitation": 0.5}),
                record("p", "a", 2, 0.7, settings={"imitation": 0.9}),
            ),
            "a",
            "b",
        )


def test_read_entries_checks_every_record(tmp_path: Path) -> None:
    good = kept(P, "a", 0, "greedy")
    _write(tmp_path / "ok", [good])
    budget = {"seconds": 60.0, "work": None}
    [entry] = read_entries([tmp_path / "ok"] * 2, ("a", "b"), budget=budget, options={})
    # the solution's reward and the program's size, not the record's 0.99 and 1
    assert (entry.seed, entry.reward, entry.buffers) == (0, reward(P, "greedy"), 106)
    for broken, message in [
        ({"seed": "1"}, "seed '1' is not an integer"),
        ({"seed": True}, "is not an integer"),
        ({"program": None}, "no program name"),
        ({"valid": None}, "no 'valid' flag"),
        ({"normalized_reward": None}, "a valid record with normalized reward None"),
    ]:
        folder = tmp_path / f"bad{len(message)}{broken!r:.4}"
        _write(folder, [{**good, **broken}])
        with pytest.raises(ComparisonError, match=message):
            read_entries([folder], ("a", "b"), budget=budget, options={})
    with pytest.raises(ComparisonError, match="no records folder"):
        read_entries([tmp_path / "none"], ("a", "b"), budget=budget, options={})
    # an invalid record needs no reward, and other solvers' records are not read at all
    _write(
        tmp_path / "mixed",
        [
            {**good, "valid": False, "normalized_reward": None, "failures": "overlap"},
            {**good, "solver": "c", "seed": "x"},
        ],
    )
    [entry] = read_entries([tmp_path / "mixed"], ("a", "b"), budget=budget, options={})
    assert entry.reward == reward(P, "greedy")  # its solution passes the check: valid
    # a record that says it is valid but whose solution fails the check is no answer
    _write(tmp_path / "broken", [kept(P, "a", 0, "greedy", broken=True)])
    [entry] = read_entries([tmp_path / "broken"], ("a", "b"), budget=budget, options={})
    assert entry.reward is None and "\n" not in entry.failures
    assert entry.failures.startswith(
        f"{tmp_path / 'broken' / 'r0.json'}: its solution fails check: reward_mismatch"
    )
    # as is one that keeps no solution to re-check, or names no program there is
    _write(tmp_path / "bare", [record(P, "a", 0, 0.5), {**good, "seed": 1, "program": "no/such"}])
    bare = read_entries([tmp_path / "bare"], ("a", "b"), budget=budget, options={})
    assert [e.reward for e in bare] == [None, None]
    assert "keeps no solution to re-check" in bare[0].failures
    assert "cannot load its program" in bare[1].failures


def test_read_entries_refuses_an_empty_list_of_programs_or_seeds(tmp_path: Path) -> None:
    """An empty list given meant every program (or seed), as if none had been given."""
    _write(tmp_path / "ok", [kept(P, "a", 0, "greedy")])
    budget = {"seconds": 60.0, "work": None}
    for given in ({"programs": []}, {"seeds": []}):
        with pytest.raises(ComparisonError, match="no (programs|seeds) given to compare"):
            read_entries([tmp_path / "ok"], ("a", "b"), budget=budget, options={}, **given)
    assert len(read_entries([tmp_path / "ok"], ("a", "b"), budget=budget, options={})) == 1


def test_a_malformed_record_is_refused_not_skipped(tmp_path: Path) -> None:
    """A record whose budget lacked seconds, or whose options were not an object, matched
    no budget or setting asked and was left out of the comparison without a word."""
    good = kept(P, "a", 0, "greedy")
    budget = {"seconds": 60.0, "work": None}
    for broken, message in [
        ({"budget": {"work": None}}, "budget {'work': None} is not"),
        ({"budget": {"seconds": 60.0, "work": None, "games": 1}}, "is not"),
        ({"budget": [60.0]}, r"budget \[60.0\] is not"),
        ({"budget": {"seconds": "60", "work": None}}, "budget seconds '60' is not a number"),
        ({"budget": {"seconds": 60.0, "work": True}}, "budget work True is not a number"),
        ({"options": ["workers=2"]}, r"options \['workers=2'\] are not a JSON object"),
        # a malformed field in a record of another budget: refused, not skipped as its budget
        ({"seed": "zero", "budget": {"seconds": None, "work": 3}}, "seed 'zero' is not an"),
    ]:
        folder = tmp_path / f"bad{len(message)}{sorted(broken)[0]}{len(str(broken))}"
        _write(folder, [{**good, **broken}])
        with pytest.raises(ComparisonError, match=message):
            read_entries([folder], ("a", "b"), budget=budget, options={})
    # another solver's record is not read at all, malformed or not
    _write(tmp_path / "other", [good, {**good, "solver": "c", "budget": None}])
    assert len(read_entries([tmp_path / "other"], ("a", "b"), budget=budget, options={})) == 1


def test_a_program_or_seed_asked_for_with_no_record_is_refused(tmp_path: Path, capsys) -> None:
    """--programs and --seeds that matched no record (a typo, a seed not swept) were
    silently left out of the table."""
    from mallocgame.errors import InputFileError

    _write(tmp_path / "one", [kept(P, "a", 0, "greedy"), kept(P, "b", 0, "random")])
    budget = {"seconds": 60.0, "work": None}
    read = functools.partial(
        read_entries, [tmp_path / "one"], ("a", "b"), budget=budget, options={}
    )
    assert len(read(programs=[P], seeds=[0])) == 2
    with pytest.raises(ComparisonError, match=f"no record of a or b for program {Q} with"):
        read(programs=[P, Q])
    with pytest.raises(ComparisonError, match="no record of a or b for seed 1, 2 with"):
        read(seeds=[0, 1, 2])
    with pytest.raises(InputFileError, match="did you mean xla-v1/lstm_infer"):
        read(programs=["xla-v1/lstm_infr"])
    argv = ["bench", "versus", "a", "b", "--out", str(tmp_path / "one"), "--budget", "60"]
    assert main([*argv, "--programs", P, Q]) == 2
    assert f"for program {Q} with this budget" in capsys.readouterr().err
    assert main([*argv, "--seeds", "0", "1"]) == 2
    assert "for seed 1 with this budget" in capsys.readouterr().err


def _write(folder: Path, records: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i, r in enumerate(records):
        (folder / f"r{i}.json").write_text(json.dumps(r))


def test_cli_selects_budget_settings_programs_and_seeds(tmp_path: Path, capsys) -> None:
    _write(
        tmp_path / "one",
        [
            kept(P, "muzero", 0, "greedy"),
            kept(P, "es", 0, "random", options={"workers": 2}),
            kept(P, "es", 0, "heuristic"),  # another setting of es: not this comparison
            kept(P, "muzero", 1, "greedy", budget=120.0),  # another budget
        ],
    )
    _write(
        tmp_path / "two",
        [kept(Q, "muzero", 0, "heuristic"), kept(Q, "es", 0, "greedy", options={"workers": 2})],
    )
    argv = [
        "bench",
        "versus",
        "muzero",
        "es",
        "--out",
        str(tmp_path / "one"),
        str(tmp_path / "two"),
        "--budget",
        "60",
        "--option",
        "es:workers=2",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    lead = reward(P, "greedy") / reward(P, "random") - 1
    # the solutions' rewards and the programs' sizes, not the records' 0.99 and 1
    assert (
        f"| {P} | 106 | **{reward(P, 'greedy'):.4f}** / {reward(P, 'random'):.4f} | 1–0–0 | "
        f"{lead:+.3%} |"
    ) in out
    assert (
        f"| {Q} | 268 | {reward(Q, 'heuristic'):.4f} / **{reward(Q, 'greedy'):.4f}** | 0–0–1 |"
    ) in out
    assert "0.9900" not in out
    assert "programs: ahead on 1, level on 0, split on 0, behind on 1 of 2" in out
    assert main([*argv, "--programs", Q]) == 0
    assert f"| {P} |" not in capsys.readouterr().out
    assert main([*argv, "--seeds", "3"]) == 2  # nothing left
    assert "no record of muzero or es for seed 3 with this budget" in capsys.readouterr().err
    # without the es setting, es's other record meets muzero's
    assert main(argv[:-2]) == 0
    out = capsys.readouterr().out
    assert f"{reward(P, 'greedy'):.4f} / **{reward(P, 'heuristic'):.4f}**" in out


def test_cli_errors_and_invalid_answers(tmp_path: Path, capsys) -> None:
    assert (
        main(["bench", "versus", "a", "b", "--out", str(tmp_path / "none"), "--budget", "60"]) == 2
    )
    assert "no records folder" in capsys.readouterr().err
    _write(tmp_path, [kept(P, "a", 0, "greedy"), kept(P, "a", 0, "random")])
    assert main(["bench", "versus", "a", "b", "--out", str(tmp_path), "--budget", "60"]) == 2
    assert f"two records for {P} a seed 0" in capsys.readouterr().err
    assert main(["bench", "versus", "a", "a", "--out", str(tmp_path), "--budget", "60"]) == 2
    assert "itself" in capsys.readouterr().err
    _write(tmp_path / "one", [kept(P, "a", 0, "greedy")])
    argv = ["bench", "versus", "a", "nosuch", "--out", str(tmp_path / "one"), "--budget", "60"]
    assert main(argv) == 2
    assert "no records of nosuch with budget 60 s" in capsys.readouterr().err  # not 0-0-0
    assert (
        main(
            [
                "bench",
                "versus",
                "a",
                "b",
                "--out",
                str(tmp_path),
                "--budget",
                "60",
                "--option",
                "c:x=1",
            ]
        )
        == 2
    )
    assert "solver 'c' is not one of a, b" in capsys.readouterr().err
    # a cell spread over two folders of the same setting
    _write(tmp_path / "x", [kept(P, "b", 0, "greedy")])
    _write(tmp_path / "y", [kept(P, "b", 0, "random")])
    assert (
        main(
            [
                "bench",
                "versus",
                "a",
                "b",
                "--out",
                str(tmp_path / "x"),
                str(tmp_path / "y"),
                "--budget",
                "60",
            ]
        )
        == 2
    )
    assert f"two records for {P} b seed 0" in capsys.readouterr().err
    # a work budget picks its own records
    _write(
        tmp_path / "w",
        [
            kept(P, "a", 0, "heuristic", budget=None, work=20),
            kept(P, "b", 0, "greedy", budget=None, work=20),
            kept(P, "a", 1, "random"),
        ],
    )
    assert main(["bench", "versus", "a", "b", "--out", str(tmp_path / "w"), "--work", "20"]) == 0
    out = capsys.readouterr().out
    assert "seed 1" not in out
    assert f"**{reward(P, 'heuristic'):.4f}** / {reward(P, 'greedy'):.4f}" in out
    assert main(["bench", "versus", "a", "b", "--out", str(tmp_path / "w")]) == 2
    assert "with budget none" in capsys.readouterr().err
    # a record whose solution fails the check, whatever it says: no answer, and one line
    # saying which record and why
    _write(tmp_path / "bad", [kept(P, "a", 0, "heuristic", broken=True), kept(P, "b", 0, "greedy")])
    assert (
        main(["bench", "versus", "a", "b", "--out", str(tmp_path / "bad"), "--budget", "60"]) == 1
    )
    captured = capsys.readouterr()
    [line] = captured.err.strip().splitlines()
    assert line.startswith(
        f"INVALID: {P} a s0: {tmp_path / 'bad' / 'r0.json'}: its solution "
        "fails check: reward_mismatch: normalized_reward 7.5"
    )
    assert f"| — / {reward(P, 'greedy'):.4f} | 0–0–0 |" in captured.out
    assert (
        main(["bench", "versus", "a", "--out", str(tmp_path), "--budget", "60"]) == 2
    )  # needs two solvers
