"""The multi-task study: records that resume, the references, the tables and the figure."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import pytest

from mallocgame.bench.inputs import StudyInputError
from mallocgame.bench.tasks import (
    REFERENCES,
    TaskLatency,
    fit_counts,
    fit_table,
    latency_table,
    limit_table,
    max_tasks,
    plot_tasks,
    read_csv,
    rows_asked,
    run_tasks_study,
    tasks_under_limit,
    write_csv,
)
from mallocgame.costmodel import derive_instance
from mallocgame.errors import (
    FormatError,
    InputFileError,
    OutputFileError,
    SolverError,
    StaleRecordError,
)
from mallocgame.program import save_program
from mallocgame.sharing import MARL_SOCKET, dram_only_latency, task_preset
from mallocgame.simulate import baseline_latency, simulate
from mallocgame.solution import load_solution
from tests.builders import tiny_program


def _study(
    out: Path, placements=(*REFERENCES, "first-touch", "agnostic"), seeds=(0, 1)
) -> list[TaskLatency]:
    return run_tasks_study(
        tiny_program(), MARL_SOCKET, [1, 4], list(placements), list(seeds), 5.0, out
    )


def test_every_cell_once_references_at_one_seed(tmp_path: Path) -> None:
    rows = _study(tmp_path / "t")
    cells = [(r.tasks, r.placement, r.seed) for r in rows]
    assert len(cells) == len(set(cells)) == 2 * (3 + 2 * 2)
    assert {r.seed for r in rows if r.placement in REFERENCES} == {0}
    assert read_csv(tmp_path / "t.csv") == rows


def test_a_cell_named_twice_runs_once_and_a_reference_once_a_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = run_tasks_study(
        tiny_program(),
        MARL_SOCKET,
        [1, 4, 4],
        ["all-slow", "first-touch", "first-touch"],
        [0, 0],
        5.0,
        tmp_path / "t",
    )
    assert sorted((r.tasks, r.placement, r.seed) for r in rows) == [
        (1, "all-slow", 0),
        (1, "first-touch", 0),
        (4, "all-slow", 0),
        (4, "first-touch", 0),
    ]
    import mallocgame.bench.tasks as tasks

    def refuse(*_args, **_kwargs):
        raise AssertionError("a reference was measured again")

    monkeypatch.setattr(tasks, "_reference_latency", refuse)
    again = run_tasks_study(
        tiny_program(), MARL_SOCKET, [1], ["all-slow", "first-touch"], [1], 5.0, tmp_path / "t"
    )
    assert (1, "first-touch", 1) in {(r.tasks, r.placement, r.seed) for r in again}


def test_the_game_kernels_are_loaded_before_each_solvers_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first solver cell was charged for loading the game's compiled kernels: the
    same cell's wall time (and answer, under a wall-clock budget) hung on its order."""
    import mallocgame.game.state as state
    import mallocgame.solvers.base as base

    calls: list[str] = []
    stopwatch = base.Stopwatch
    monkeypatch.setattr(state, "warm_game_kernels", lambda inst: calls.append("warm"))
    monkeypatch.setattr(base, "Stopwatch", lambda s: calls.append("clock") or stopwatch(s))
    _study(tmp_path / "t", placements=("all-slow", "first-touch"), seeds=(0,))
    assert calls == ["warm", "clock"] * 2  # at 1 and at 4 tasks; a reference solves nothing


def test_reference_latencies_are_the_per_task_machines(tmp_path: Path) -> None:
    rows = {(r.tasks, r.placement): r for r in _study(tmp_path / "t")}
    for n in (1, 4):
        inst = derive_instance(tiny_program(), task_preset(MARL_SOCKET, n), capacity_fraction=None)
        assert rows[(n, "all-slow")].latency_s == pytest.approx(baseline_latency(inst), rel=1e-6)
        assert rows[(n, "fast-only")].latency_s == pytest.approx(dram_only_latency(inst), rel=1e-6)
        assert rows[(n, "all-slow")].normalized_reward is None


def test_a_solver_row_replays_from_its_kept_solution(tmp_path: Path) -> None:
    rows = _study(tmp_path / "t", placements=["first-touch"], seeds=[0])
    inst = derive_instance(tiny_program(), task_preset(MARL_SOCKET, 4), capacity_fraction=None)
    answer = load_solution(tmp_path / "t.solutions" / "4-first-touch-s0.solution.json")
    row = next(r for r in rows if r.tasks == 4)
    assert simulate(inst, answer).latency_s == pytest.approx(row.latency_s, rel=1e-6)
    assert answer.instance_sha256 == inst.sha256


def test_a_kept_answer_is_checked_against_the_instance_kept_beside_it(
    tmp_path: Path, capsys
) -> None:
    from mallocgame.cli import main
    from mallocgame.instance import load_instance

    _study(tmp_path / "t", placements=["first-touch", "agnostic"], seeds=[0])
    kept = tmp_path / "t.solutions"
    for n in (1, 4):
        inst = load_instance(kept / f"{n}.instance.json.gz")
        assert inst.hardware.name == f"{MARL_SOCKET.preset.name}/{n}tasks"
        for spec in ("first-touch", "agnostic"):
            answer = kept / f"{n}-{spec}-s0.solution.json"
            assert main(["check", str(kept / f"{n}.instance.json.gz"), str(answer)]) == 0
            assert capsys.readouterr().out.startswith("valid: ")


def test_an_out_ending_in_csv_keeps_its_answers_beside_the_csv(tmp_path: Path) -> None:
    _study(tmp_path / "x.csv", placements=["first-touch"], seeds=[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.csv", "x.solutions"]
    assert (tmp_path / "x.solutions" / "4-first-touch-s0.solution.json").exists()


def test_a_rerun_skips_what_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _study(tmp_path / "t")
    import mallocgame.bench.tasks as tasks

    def refuse(*_args, **_kwargs):
        raise AssertionError("a cell was run again")

    monkeypatch.setattr(tasks, "_run_cell", refuse)
    assert _study(tmp_path / "t") == first


def test_another_budget_or_program_in_the_csv_is_refused(tmp_path: Path) -> None:
    _study(tmp_path / "t", placements=["all-slow"])
    with pytest.raises(StaleRecordError, match="at 5 s"):
        run_tasks_study(tiny_program(), MARL_SOCKET, [1], ["all-slow"], [0], 9.0, tmp_path / "t")


def test_a_row_of_a_changed_program_is_refused_not_reused(tmp_path: Path, capsys) -> None:
    import dataclasses

    from mallocgame.cli import main

    _study(tmp_path / "t", placements=["all-slow", "first-touch"], seeds=[0])
    program = tiny_program()
    grown = dataclasses.replace(program.tensors[0], size=program.tensors[0].size + 8)
    changed = dataclasses.replace(program, tensors=(grown, *program.tensors[1:]))
    for placements in (["all-slow"], ["first-touch"]):  # a reference's row, a solver's
        with pytest.raises(StaleRecordError, match="run on another instance than this run's"):
            run_tasks_study(changed, MARL_SOCKET, [1, 4], placements, [0], 5.0, tmp_path / "t")
    save_program(changed, tmp_path / "tiny.json")
    argv = ["bench", "tasks", "--program", str(tmp_path / "tiny.json"), "--tasks", "4"]
    argv += ["--placements", "first-touch", "--budget", "5", "--out", str(tmp_path / "t")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "4 tasks, first-touch s0 was run on another instance" in err


def test_a_row_of_other_solver_settings_is_refused_a_setting_it_lacks_is_its_default(
    tmp_path: Path,
) -> None:
    import dataclasses
    import json

    rows = _study(tmp_path / "t", placements=["agnostic"], seeds=[0])
    assert json.loads(rows[0].settings or "") == {"fast_share": 0.5}

    def rewrite(settings: str) -> None:
        write_csv([dataclasses.replace(r, settings=settings) for r in rows], tmp_path / "t.csv")

    rewrite('{"fast_share": 0.25}')  # a default changed since
    with pytest.raises(StaleRecordError, match=r"agnostic s0 was run with other settings .*0.25"):
        _study(tmp_path / "t", placements=["agnostic"], seeds=[0])
    rewrite("{}")  # written before fast_share was a setting: its default then as now
    assert _study(tmp_path / "t", placements=["agnostic"], seeds=[0]) == read_csv(
        tmp_path / "t.csv"
    )


def test_a_csv_written_before_rows_kept_their_input_is_read_and_resumed(tmp_path: Path) -> None:
    """The published CSV's 8 columns: its rows are reused as they stand, and written back
    with the identity cells empty beside the new rows, which have them."""
    published = Path(__file__).parents[2] / "docs/results/tasks-wrn101-b128-60s.csv"
    rows = read_csv(published)
    assert len(rows) == 117 and all(r.instance_sha256 is r.settings is None for r in rows)
    first = _study(tmp_path / "t", placements=["all-slow", "first-touch"], seeds=[0])
    lines = (tmp_path / "t.csv").read_text().splitlines()
    old = [",".join(next(csv.reader([line]))[:8]) for line in lines]
    (tmp_path / "t.csv").write_text("\n".join(old) + "\n")
    assert lines[0].endswith(",instance_sha256,settings") and old[0].endswith(",wall_s")
    again = _study(tmp_path / "t", placements=["all-slow", "first-touch"], seeds=[0, 1])
    assert [dataclasses.replace(r, instance_sha256=None, settings=None) for r in first] == [
        r for r in again if r.seed == 0 or r.placement == "all-slow"
    ]
    added = [r for r in again if r.seed == 1]
    assert len(added) == 2 and all(r.instance_sha256 and r.settings == "{}" for r in added)
    assert read_csv(tmp_path / "t.csv") == again


@pytest.mark.parametrize(
    "cells, message",
    [
        (["abc", "{}"], "instance_sha256 'abc' is not a sha256"),
        (["0" * 64, "[1]"], "settings '\\[1\\]' are not a JSON object"),
        (["0" * 64, "{"], "are not a JSON object"),
        (["", "{}"], "instance_sha256 '' is not a sha256"),
    ],
)
def test_a_row_with_a_bad_identity_is_refused(tmp_path: Path, cells: list[str], message) -> None:
    _study(tmp_path / "t", placements=["all-slow"], seeds=[0])
    with open(tmp_path / "t.csv", newline="") as handle:
        table = list(csv.reader(handle))
    table[1][8:] = cells
    with open(tmp_path / "t.csv", "w", newline="") as handle:
        csv.writer(handle).writerows(table)
    with pytest.raises(FormatError, match=f"t.csv, line 2: .*{message}"):
        read_csv(tmp_path / "t.csv")


def test_a_second_run_on_the_same_records_is_refused_while_one_runs(tmp_path: Path) -> None:
    import fcntl

    tmp_path.joinpath("t.lock").touch()
    with open(tmp_path / "t.lock") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(StaleRecordError, match="another run of this study"):
            _study(tmp_path / "t", placements=["all-slow"])
    _study(tmp_path / "t", placements=["all-slow"])  # once it ends, the study runs
    assert not (tmp_path / "t.lock").exists()


def test_a_lock_removed_after_it_was_opened_is_not_taken(tmp_path: Path, monkeypatch) -> None:
    """Three runs: one ends and removes its lock, which a second had opened meanwhile, and a
    third makes a new one: the second must not take the removed file for the lock."""
    from mallocgame import fileio

    # the file it opened is not the one at the path any more
    monkeypatch.setattr(fileio, "_still_at", lambda path, fd: False)
    with pytest.raises(StaleRecordError, match="another run of this study"):
        _study(tmp_path / "t", placements=["all-slow"])


def test_a_bad_spec_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(SolverError):
        _study(tmp_path / "t", placements=["all-slow", "no-such-solver"])
    assert not (tmp_path / "t.csv").exists()


def test_a_file_that_is_not_a_study_csv(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("program,solver\nx,y\n")
    with pytest.raises(FormatError, match="not a tasks-study CSV"):
        read_csv(bad)
    with pytest.raises(InputFileError):
        read_csv(tmp_path / "missing.csv")


@pytest.mark.parametrize(
    "row, again",
    [
        ("p,2,heuristic,0,30.0,1.5,0.5,0.1", "p,2,heuristic,0,30.0,9.0,0.5,0.1"),
        ("p,2,all-slow,0,30.0,1.5,,0.0", "p,2,all-slow,3,30.0,1.5,,0.0"),
    ],
)
def test_a_second_row_of_one_cell_is_refused_not_averaged(
    tmp_path: Path, row: str, again: str
) -> None:
    path = tmp_path / "t.csv"
    header = "program,tasks,placement,seed,budget_s,latency_s,normalized_reward,wall_s"
    other = "p,2,heuristic,1,30.0,2.5,0.5,0.1"  # another seed: a row of its own
    path.write_text("\n".join([header, row, other, again]) + "\n")
    with pytest.raises(FormatError, match=r"t.csv, line 4: a second row of 2 tasks, .*line 2"):
        read_csv(path)
    path.write_text("\n".join([header, row, other]) + "\n")
    assert len(read_csv(path)) == 2


@pytest.mark.parametrize(
    "column, value, message",
    [
        (5, "nan", "latency_s nan is not a finite number above 0"),
        (5, "inf", "latency_s inf is not a finite number above 0"),
        (5, "-0.5", "latency_s -0.5 is not a finite number above 0"),
        (5, "0", "latency_s 0.0 is not a finite number above 0"),
        (6, "7.5", "normalized_reward 7.5 is not a finite number from"),
        (6, "nan", "normalized_reward nan"),
        (4, "inf", "budget_s must be a finite number of seconds"),
        (1, "0", "tasks must be at least 1"),
        (3, "-1", "seed must be from 0 to 9,223,372,036,854,775,807, not -1"),
        (7, "-2", "wall_s -2.0 is not a finite number at least 0"),
    ],
)
def test_a_resumed_row_no_study_writes_is_refused(
    tmp_path: Path, capsys, column: int, value: str, message: str
) -> None:
    from mallocgame.cli import main

    _study(tmp_path / "t", placements=["all-slow", "first-touch"], seeds=[0])
    lines = (tmp_path / "t.csv").read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if ",first-touch," in line)
    cells = lines[row].split(",")
    cells[column] = value
    lines[row] = ",".join(cells)
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError, match=f"t.csv, line {row + 1}: .*{message}"):
        read_csv(tmp_path / "t.csv")
    with pytest.raises(FormatError, match=message):  # the study goes on from no such row
        _study(tmp_path / "t", placements=["all-slow", "first-touch"], seeds=[0])
    program = tmp_path / "tiny.program.json"
    save_program(tiny_program(), program)
    assert (
        main(
            [
                "bench",
                "tasks",
                "--program",
                str(program),
                "--tasks",
                "1",
                "4",
                "--placements",
                "all-slow",
                "first-touch",
                "--budget",
                "5",
                "--out",
                str(tmp_path / "t"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert f"t.csv, line {row + 1}" in err and message.split()[0] in err


@pytest.mark.parametrize(
    "tasks, seeds, budget, message",
    [
        (
            [99999999999999999999],
            [0],
            5.0,
            "the count of tasks must be from 1 to 8,388,608, not 9999",
        ),
        ([0], [0], 5.0, "the count of tasks must be from 1"),
        ([1.5], [0], 5.0, "the count of tasks must be a whole number"),
        ([], [0], 5.0, "no count of tasks"),
        ([1], [-3], 5.0, "a seed must be from 0 to 9,223,372,036,854,775,807, not -3"),
        ([1], [], 5.0, "no seed"),
        ([1], [0], 5.0, "no placement"),
        ([1], [0], 0.0, "budget must be a finite number of seconds above 0"),
        ([1], [0], float("nan"), "budget must be a finite number of seconds above 0"),
        ([1], [0], 1e9, "at most 604800"),
    ],
)
def test_a_study_it_cannot_run_is_refused_before_anything_is_written(
    tmp_path: Path, tasks, seeds, budget, message
) -> None:
    placements = [] if message == "no placement" else ["all-slow"]
    with pytest.raises(StudyInputError, match=message):
        run_tasks_study(
            tiny_program(), MARL_SOCKET, tasks, placements, seeds, budget, tmp_path / "t"
        )
    assert not any(tmp_path.iterdir())


def test_a_program_of_no_bytes_is_refused_before_any_work(tmp_path: Path, capsys) -> None:
    from mallocgame.cli import main
    from mallocgame.program import Program, ProgramInstruction, ProgramTensor

    tensors = (ProgramTensor(0, "w", 0, -1, 0), ProgramTensor(1, "a", 0, 0, 0, live_out=True))
    empty = Program("empty", (ProgramInstruction("i0", "add", (0,), (1,), (0,), (0,)),), tensors)
    with pytest.raises(StudyInputError, match="empty has no live bytes at its peak"):
        run_tasks_study(empty, MARL_SOCKET, [1], ["fast-only"], [0], 5.0, tmp_path / "t")
    assert not any(tmp_path.iterdir())
    save_program(empty, tmp_path / "empty.json")
    argv = ["bench", "tasks", "--program", str(tmp_path / "empty.json"), "--tasks", "1"]
    assert main([*argv, "--placements", "fast-only", "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "empty has no live bytes" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.json"]


@pytest.mark.parametrize("blocked", ["t.png", "t.solutions", "t.csv"])
def test_cli_refuses_a_place_it_cannot_write_before_any_cell_runs(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch, blocked: str
) -> None:
    """The figure's place a folder, the answers' folder a file, the CSV's a folder: one
    line and exit 2 before anything runs, not a traceback after the whole study."""
    import mallocgame.bench.tasks as tasks
    from mallocgame.cli import main

    def refuse(*_args, **_kwargs):
        raise AssertionError("a cell ran")

    monkeypatch.setattr(tasks, "_run_cell", refuse)
    save_program(tiny_program(), tmp_path / "tiny.json")
    if blocked == "t.solutions":
        (tmp_path / blocked).write_text("not a folder")
    else:
        (tmp_path / blocked).mkdir()
    argv = ["bench", "tasks", "--program", str(tmp_path / "tiny.json"), "--tasks", "1"]
    argv += ["--placements", "fast-only", "first-touch", "--out", str(tmp_path / "t")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and blocked in err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([blocked, "tiny.json"])
    if blocked == "t.solutions":  # the library finds it before any cell runs too
        with pytest.raises(OutputFileError, match="t.solutions is not a folder"):
            _study(tmp_path / "t")
        assert not (tmp_path / "t.csv").exists()


def test_cli_blames_the_count_of_tasks(tmp_path: Path, capsys) -> None:
    from mallocgame.cli import main

    program = tmp_path / "tiny.program.json"
    save_program(tiny_program(), program)
    argv = [
        "bench",
        "tasks",
        "--program",
        str(program),
        "--tasks",
        "99999999999999999999",
        "--out",
        str(tmp_path / "t"),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "the count of tasks must be from 1 to 8,388,608" in err and "bandwidth" not in err
    hw = MARL_SOCKET.preset
    assert max_tasks(MARL_SOCKET) == hw.fast_memory_bytes // hw.alignment_bytes
    run_tasks_study(
        tiny_program(),
        MARL_SOCKET,
        [max_tasks(MARL_SOCKET)],
        ["all-slow"],
        [0],
        5.0,
        tmp_path / "most",
    )  # the most tasks still make a machine


def test_the_rows_a_run_tables_are_those_it_asked_for_at_every_seed(tmp_path: Path) -> None:
    rows = _study(tmp_path / "t", seeds=(0, 1, 2))
    asked = rows_asked(rows, [4], ["all-slow", "first-touch"])
    # the reference at its one stored seed, the solver at every seed the records hold
    assert {(r.tasks, r.placement, r.seed) for r in asked} == {
        (4, "all-slow", 0),
        (4, "first-touch", 0),
        (4, "first-touch", 1),
        (4, "first-touch", 2),
    }


def test_cli_tables_the_mean_of_every_seed_held_not_only_those_asked(
    tmp_path: Path, capsys
) -> None:
    """The published study: every placement at seed 0, then agnostic's seeds 1-4 added by
    a second run; the first command, run again, tables agnostic's mean over all five."""
    from mallocgame.cli import main

    save_program(tiny_program(), tmp_path / "tiny.json")
    argv = ["bench", "tasks", "--program", str(tmp_path / "tiny.json"), "--tasks", "1", "4"]
    argv += ["--budget", "1", "--out", str(tmp_path / "t")]
    first = [*argv, "--placements", "fast-only", "agnostic", "--seeds", "0"]
    assert main(first) == 0
    assert main([*argv, "--placements", "agnostic", "--seeds", "1", "2", "3", "4"]) == 0
    capsys.readouterr()
    import dataclasses

    # seeds of distinct latencies (this tiny program's draws may all come out the same)
    rows = read_csv(tmp_path / "t.csv")
    spread = [
        dataclasses.replace(r, latency_s=r.latency_s * (1 + r.seed / 10))
        if r.placement == "agnostic"
        else r
        for r in rows
    ]
    write_csv(spread, tmp_path / "t.csv")
    assert main(first) == 0  # every cell held: nothing runs
    printed = capsys.readouterr()
    assert "agnostic s" not in printed.err
    rows = read_csv(tmp_path / "t.csv")
    for n in (1, 4):
        seeds = [r.latency_s for r in rows if r.tasks == n and r.placement == "agnostic"]
        ideal = next(r.latency_s for r in rows if r.tasks == n and r.placement == "fast-only")
        mean = sum(seeds) / len(seeds)
        assert len(seeds) == 5
        assert f"| {n} | {ideal:.4g} (1.00×) | {mean:.4g} ({mean / ideal:.2f}×) |" in printed.out


def test_cli_keeps_dotted_outs_apart_and_refuses_a_nameless_one(tmp_path: Path, capsys) -> None:
    from mallocgame.cli import main

    program = tmp_path / "tiny.program.json"
    save_program(tiny_program(), program)
    argv = ["bench", "tasks", "--program", str(program), "--tasks", "1", "4"]
    argv += ["--placements", "fast-only", "random", "--budget", "1"]
    assert main([*argv, "--seeds", "0", "--out", str(tmp_path / "study.v1")]) == 0
    # another dotted name is another study: its own CSV and lock, not study.csv
    assert main([*argv, "--seeds", "0", "--out", str(tmp_path / "study.v2")]) == 0
    assert {p.name for p in tmp_path.glob("study*.csv")} == {"study.v1.csv", "study.v2.csv"}
    for nameless in ("", "."):
        assert main([*argv, "--seeds", "0", "--out", nameless]) == 2
        assert "--out must name a file" in capsys.readouterr().err


def test_cli_refuses_a_limit_without_its_unit_and_tables_one_with_it(
    tmp_path: Path, capsys
) -> None:
    from mallocgame.cli import main

    program = tmp_path / "tiny.program.json"
    save_program(tiny_program(), program)
    argv = ["bench", "tasks", "--program", str(program), "--budget", "1", "--seeds", "0"]
    for tasks, placements in (["4"], ["fast-only"]), (["1", "4"], ["all-slow"]):
        run = [*argv, "--tasks", *tasks, "--placements", *placements, "--limit", "2"]
        assert main([*run, "--out", str(tmp_path / "none")]) == 2
        assert "--limit is a multiple of one task alone" in capsys.readouterr().err
    assert not (tmp_path / "none.csv").exists()
    run = [*argv, "--tasks", "4", "--placements", "fast-only", "--out", str(tmp_path / "t")]
    assert main(run) == 0  # no --limit: no limit table, and nothing refused
    assert "latency limit" not in capsys.readouterr().out
    run = [*argv, "--tasks", "1", "4", "--placements", "fast-only", "--limit", "2"]
    assert main([*run, "--out", str(tmp_path / "t")]) == 0
    assert "latency limit: 2 x one task alone" in capsys.readouterr().out


def _rows(latencies: dict[tuple[int, str], float]) -> list[TaskLatency]:
    return [TaskLatency("p", n, p, 0, 1.0, v, None, 0.0) for (n, p), v in latencies.items()]


def test_tables_and_the_tasks_under_a_limit() -> None:
    rows = _rows(
        {
            (1, "fast-only"): 10.0,
            (2, "fast-only"): 10.0,
            (4, "fast-only"): 12.0,
            (1, "heuristic"): 10.0,
            (2, "heuristic"): 13.0,
            (4, "heuristic"): 11.0,
        }
    )
    assert tasks_under_limit(rows, 12.5) == {
        "fast-only": 4,
        "heuristic": 1,
    }  # every smaller count under it too
    assert "| 2 | 10.00 (1.00×) | 13.00 (1.30×) |" in latency_table(rows)
    small = _rows({(1, "fast-only"): 0.0021, (1, "heuristic"): 0.0038})
    assert "| 1 | 0.0021 (1.00×) | 0.0038 (1.81×) |" in latency_table(small)  # not 0.00
    table = limit_table(rows, 12.5, {"fast-only": 3, "both": 80})
    assert "| fast-only | 3 | 3 |" in table and "| heuristic | 1 | 80 |" in table


def test_the_published_latency_table_prints_from_the_published_csv() -> None:
    """Latencies of 100 s and more were printed to four digits (105.5, 253.7) where the
    published table, as docs/results.md shows it, has two decimals (105.50, 253.71)."""
    docs = Path(__file__).parents[2] / "docs" / "results"
    rows = read_csv(docs / "tasks-wrn101-b128-60s.csv")
    published = (docs / "tasks-wrn101-b128-60s.md").read_text().split("\n\n")[0]
    placements = published.splitlines()[0].strip("| ").split(" | ")[1:]
    tasks = [int(line.split(" | ")[0].strip("| ")) for line in published.splitlines()[2:]]
    assert latency_table(rows_asked(rows, tasks, placements)) == published.strip()


def test_fit_counts_use_the_programs_peak() -> None:
    fit = fit_counts(MARL_SOCKET, tiny_program())
    assert fit["both"] > fit["memory-mode"] == fit["fast-only"] > fit["app-direct"] > 0


def test_the_fit_table_gives_a_small_programs_peak_in_its_own_unit() -> None:
    """A task of 2,200 bytes was '0.00 GiB a task', as if it held nothing."""
    header = fit_table(MARL_SOCKET, tiny_program()).splitlines()[0]
    assert header == "| mode (2.1 KiB a task) | tasks that fit |"


def test_the_figure_is_written(tmp_path: Path) -> None:
    rows = _rows(
        {
            (1, "fast-only"): 10.0,
            (2, "fast-only"): 11.0,
            (1, "all-slow"): 20.0,
            (2, "all-slow"): 30.0,
        }
    )
    plot_tasks(rows, tmp_path / "f.png", 12.0)
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    write_csv(rows, tmp_path / "r.csv")
    assert read_csv(tmp_path / "r.csv") == rows


@pytest.mark.parametrize(
    ("program", "placement"), [("gru$x^$", "heuristic"), ("p", r"my$\foo$solver")]
)
def test_names_with_dollars_are_drawn_as_written(
    tmp_path: Path, program: str, placement: str
) -> None:
    """A program's name (the title) or a placement (a legend entry) holding ``$...$`` is
    drawn letter for letter, not read as mathematics (an error where it is not TeX)."""
    rows = [
        TaskLatency(program, n, p, 0, 1.0, v, None, 0.0)
        for (n, p), v in {(1, "fast-only"): 10.0, (1, placement): 20.0}.items()
    ]
    plot_tasks(rows, tmp_path / "f.png", 12.0)
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_two_placements_made_alike_in_a_file_name_keep_two_answers(tmp_path: Path) -> None:
    """``es[population=4;sigma=0.2]`` and ``es[population=4; sigma=0.2]`` were both kept as
    ``1-es_population=4_sigma=0.2_-s0.solution.json``: the second answer replaced the first."""
    from mallocgame.bench.tasks import _solution_path

    one = _solution_path(tmp_path / "t", 1, "es[population=4;sigma=0.2]", 0)
    other = _solution_path(tmp_path / "t", 1, "es[population=4; sigma=0.2]", 0)
    assert one != other and one.parent == other.parent
    assert (
        _solution_path(tmp_path / "t", 4, "first-touch", 0).name == "4-first-touch-s0.solution.json"
    )
