"""Reward-against-time curves."""

from __future__ import annotations

import csv
import functools
from pathlib import Path

import pytest

from mallocgame.bench.rewards import final_table, read_csv, reward_curve, solver_spec
from mallocgame.cli import main
from mallocgame.curves import plot_curves, write_csv
from mallocgame.errors import FormatError, InputFileError, MallocGameError


def test_curve_is_monotone_and_files_are_written(tmp_path: Path) -> None:
    points = reward_curve("xla-v1/lstm_infer", "random", seconds=0.5, seed=0)
    rewards = [p.normalized_reward for p in points]
    assert rewards == sorted(rewards) and points[-1].elapsed_s >= points[0].elapsed_s
    assert "games=" in points[-1].work
    write_csv(points, tmp_path / "r.csv")
    plot_curves(points, tmp_path / "r.png", bounds={"xla-v1/lstm_infer": 0.95})
    assert (tmp_path / "r.csv").read_text().startswith("program,solver,seed")
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    assert f"{rewards[-1]:.4f}" in final_table(points)


def test_an_answer_that_fails_the_check_gives_no_curve(monkeypatch) -> None:
    from dataclasses import replace

    from mallocgame.errors import SolverError
    from mallocgame.solvers.heuristic import HeuristicSolver

    solve = HeuristicSolver.solve

    def claims_more(self, instance, request):  # an answer whose reward is not its mapping's
        answer = solve(self, instance, request)
        return replace(answer, reward_s=answer.reward_s * 2 + 1.0)

    monkeypatch.setattr(HeuristicSolver, "solve", claims_more)
    with pytest.raises(SolverError, match="heuristic on xla-v1/lstm_infer: its answer fails"):
        reward_curve("xla-v1/lstm_infer", "heuristic", seconds=5.0, seed=0)


def test_the_game_kernels_are_loaded_before_the_solvers_clock(monkeypatch) -> None:
    """The first cell of a process was charged for loading the game's compiled kernels
    (about a second): the same cell gave another curve when it ran first."""
    import mallocgame.game.state as state
    import mallocgame.solvers.base as base

    calls: list[str] = []
    stopwatch = base.Stopwatch
    monkeypatch.setattr(state, "warm_game_kernels", lambda inst: calls.append(inst.name))
    monkeypatch.setattr(base, "Stopwatch", lambda s: calls.append("clock") or stopwatch(s))
    reward_curve("xla-v1/lstm_infer", "heuristic", seconds=5.0, seed=0)
    assert calls == ["xla-v1/lstm_infer", "clock"]


def test_cli_bench_rewards(tmp_path: Path, capsys) -> None:
    out = tmp_path / "rw"
    assert (
        main(
            [
                "bench",
                "rewards",
                "--programs",
                "xla-v1/lstm_infer",
                "--solvers",
                "random",
                "greedy",
                "--budget",
                "0.3",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert "| xla-v1/lstm_infer |" in capsys.readouterr().out
    assert out.with_suffix(".csv").exists() and out.with_suffix(".png").exists()


def test_a_curve_named_twice_runs_once_and_reads_back_as_printed(tmp_path: Path, capsys) -> None:
    from mallocgame.bench.rewards import final_table, read_csv
    from mallocgame.curves import CurvePoint, write_csv

    out = tmp_path / "rw"
    argv = ["bench", "rewards", "--programs", "xla-v1/lstm_infer", "xla-v1/lstm_infer"]
    argv += ["--solvers", "greedy", "greedy", "--seeds", "0", "0", "--budget", "0.3"]
    assert main([*argv, "--out", str(out)]) == 0
    assert capsys.readouterr().err.count("greedy s0:") == 1
    points = [CurvePoint("p", "greedy", 0, 1.0, 0.12344951, "games=1", 1.0)]
    write_csv(points, tmp_path / "c.csv")  # a resumed table prints what the fresh one did
    assert final_table(read_csv(tmp_path / "c.csv")) == final_table(points)


def test_cli_bench_rewards_goes_on_with_the_cells_it_lacks(tmp_path: Path, capsys) -> None:
    out = tmp_path / "rw"
    argv = [
        "bench",
        "rewards",
        "--programs",
        "xla-v1/lstm_infer",
        "--budget",
        "0.2",
        "--out",
        str(out),
    ]
    assert main([*argv, "--solvers", "greedy"]) == 0
    first = read_csv(out.with_suffix(".csv"))
    capsys.readouterr()
    assert main([*argv, "--solvers", "greedy", "random"]) == 0
    err = capsys.readouterr().err
    assert "greedy s0: in " in err and "random s0: " in err
    both = read_csv(out.with_suffix(".csv"))
    assert both[: len(first)] == first  # the greedy cell kept as it was, random added
    assert {p.solver for p in both} == {"greedy", "random"} and {p.budget_s for p in both} == {0.2}
    assert main([*argv[:-4], "--budget", "0.5", "--out", str(out), "--solvers", "greedy"]) == 2
    assert "holds curves at 0.2 s, not 0.5 s: give another --out" in capsys.readouterr().err


def test_a_second_run_on_the_same_csv_is_refused_while_one_runs(tmp_path: Path, capsys) -> None:
    """Two runs on one --out each read the CSV at their start and rewrote it whole after
    each cell: the last to write dropped the other's cells without a word."""
    import fcntl

    argv = ["bench", "rewards", "--programs", "xla-v1/lstm_infer", "--solvers", "greedy"]
    argv += ["--budget", "0.2", "--out", str(tmp_path / "r")]
    tmp_path.joinpath("r.lock").touch()
    with open(tmp_path / "r.lock") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err == (
            f"mallocgame: error: {tmp_path / 'r.lock'}: another run of this study holds it; "
            "wait for it or give another --out\n"
        )
        assert sorted(p.name for p in tmp_path.iterdir()) == ["r.lock"]  # nothing written
    assert main(argv) == 0  # once it ends, the study runs
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv", "r.png"]


def test_a_run_started_while_another_adds_a_cell_is_refused(tmp_path: Path) -> None:
    """The library holds the lock, not only the command: a second run (here started by the
    first's report of its cell, before the first writes it) would have written its own
    cell alone, and the first then its own alone, over it."""
    from mallocgame.bench.rewards import read_records, run_reward_curves
    from mallocgame.errors import StaleRecordError

    csv_path = tmp_path / "r.csv"

    def second_run(message: str) -> None:
        with pytest.raises(StaleRecordError, match="r.lock: another run of this study holds it"):
            run_reward_curves(["xla-v1/lstm_infer"], ["greedy"], [1], 0.2, csv_path)
        assert not csv_path.exists()

    run_reward_curves(["xla-v1/lstm_infer"], ["greedy"], [0], 0.2, csv_path, progress=second_run)
    assert list(read_records(csv_path)[1]) == [("xla-v1/lstm_infer", "greedy", 0)]
    assert not (tmp_path / "r.lock").exists()


@pytest.mark.parametrize(
    "text, error",
    [
        ("program,solver\nx,y\n", FormatError),
        (
            "program,solver,seed,budget_s,elapsed_s,normalized_reward,work\nx,y,zero,1,1,1,\n",
            FormatError,
        ),
        (None, InputFileError),
    ],
)
def test_read_csv_refuses_what_it_did_not_write(tmp_path: Path, text, error) -> None:
    path = tmp_path / "r.csv"
    if text is not None:
        path.write_text(text)
    with pytest.raises(error):
        read_csv(path)


@pytest.mark.parametrize(
    "column, value, message",
    [
        (4, "nan", "elapsed_s nan is not a finite number at least 0"),
        (4, "-1", "elapsed_s -1.0 is not a finite number at least 0"),
        (5, "inf", "normalized_reward inf is not a finite number"),
        (3, "0", "budget_s must be a finite number of seconds above 0"),
        (2, "-3", "seed must be from 0 to 9,223,372,036,854,775,807, not -3"),
    ],
)
def test_read_csv_names_the_line_no_run_writes(
    tmp_path: Path, column: int, value: str, message: str
) -> None:
    path = tmp_path / "r.csv"
    cells = ["xla-v1/lstm_infer", "random", "0", "60.0", "1.5", "0.25", "games=3"]
    cells[column] = value
    header = "program,solver,seed,budget_s,elapsed_s,normalized_reward,work"
    path.write_text(f"{header}\n{','.join(cells)}\n")
    with pytest.raises(FormatError, match=f"r.csv, line 2: .*{message}"):
        read_csv(path)


@pytest.mark.parametrize(
    "budget, seed, message",
    [
        (0, 0, "budget must be a finite number of seconds above 0"),
        (-1, 0, "budget must be a finite number of seconds above 0"),
        (float("nan"), 0, "budget must be a finite number of seconds above 0"),
        (float("inf"), 0, "budget must be a finite number of seconds above 0"),
        (8 * 24 * 3600, 0, "at most 604800"),
        (0.1, -3, "seed must be from 0 to 9,223,372,036,854,775,807, not -3"),
    ],
)
def test_a_budget_or_seed_no_run_can_have_is_refused(
    tmp_path: Path, capsys, budget, seed, message
) -> None:
    from mallocgame.bench.inputs import StudyInputError

    with pytest.raises(StudyInputError, match=message):
        reward_curve("xla-v1/lstm_infer", "random", budget, seed)
    out = tmp_path / "rw"
    assert (
        main(
            [
                "bench",
                "rewards",
                "--programs",
                "xla-v1/lstm_infer",
                "--solvers",
                "random",
                "--budget",
                str(budget),
                "--seeds",
                str(seed),
                "--out",
                str(out),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err  # the command line's own check or the library's: one line
    assert len(err.strip().splitlines()) == 1 and ("seed" if seed < 0 else "budget") in err
    assert not out.with_suffix(".csv").exists()


def test_a_solver_spec_runs_one_solver_under_other_settings(tmp_path: Path) -> None:
    assert solver_spec("es") == ("es", {})
    assert solver_spec("es[sigma=0.2;workers=1]") == ("es", {"sigma": "0.2", "workers": "1"})
    assert solver_spec("es[sigma=0.2; sigma=0.2]") == ("es", {"sigma": "0.2"})  # one setting
    points = reward_curve("xla-v1/lstm_infer", "es[workers=1]", seconds=0.3, seed=0)
    assert {p.solver for p in points} == {"es[workers=1]"}  # its own curve, named by its spec


@pytest.mark.parametrize(
    "spec, message",
    [
        ("es[sigma=0.2", "expected NAME"),
        ("es[]", "expected NAME"),
        ("es[sigma]", "is not KEY=VALUE"),
        ("es[sigma=0.2;sigma=0.3]", "sigma given twice, as '0.2' and '0.3'"),
        ("es[nonsense=1]", "nonsense"),
        ("nosuch", "nosuch"),
    ],
)
def test_bad_solver_specs_are_refused(spec, message, capsys) -> None:
    with pytest.raises(MallocGameError, match=message):
        solver_spec(spec)
    assert (
        main(
            [
                "bench",
                "rewards",
                "--programs",
                "xla-v1/lstm_infer",
                "--solvers",
                spec,
                "--budget",
                "0.1",
                "--out",
                "unused",
            ]
        )
        == 2
    )
    assert "Traceback" not in capsys.readouterr().err


def test_cli_bench_rewards_checks_its_picture_before_any_cell(tmp_path: Path, capsys) -> None:
    (tmp_path / "r.png").mkdir()  # a folder where the picture goes
    argv = ["bench", "rewards", "--programs", "synthetic-v1/small", "--solvers", "greedy"]
    assert main([*argv, "--budget", "1", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "r.png: a directory, not a file" in err and "greedy s0" not in err  # no cell ran
    assert not (tmp_path / "r.csv").exists()


def _published_curves() -> list[Path]:
    """Every reward-curve CSV under docs/ (bench rewards', optimize's), each written
    before rows kept their cell's input (docs/figures' have no budget_s column: no run of
    bench rewards ever read them)."""
    from mallocgame.bench.rewards import CSV_HEADER_V1

    docs = Path(__file__).parents[2] / "docs"
    found = []
    for path in sorted(docs.rglob("*.csv")):
        with path.open(newline="") as handle:
            if handle.readline().rstrip("\r\n") == ",".join(CSV_HEADER_V1):
                found.append(path)
    return found


def _no_cell_runs(monkeypatch) -> None:
    import mallocgame.bench.rewards as rewards

    def refuse(*_args, **_kwargs):
        raise AssertionError("a cell the CSV holds was run again")

    monkeypatch.setattr(rewards, "reward_curve", refuse)


def test_every_published_curve_csv_is_read_and_resumes_with_nothing_run(
    tmp_path: Path, monkeypatch
) -> None:
    import shutil

    from mallocgame.bench.rewards import read_records, run_reward_curves

    published = _published_curves()
    assert len(published) >= 13 and any(p.name == "egrl-ablation-120s.csv" for p in published)
    _no_cell_runs(monkeypatch)
    for path in published:
        points, identities = read_records(path)
        assert points == read_csv(path) and set(identities.values()) == {None}
        copy = tmp_path / path.name
        shutil.copyfile(path, copy)
        cells = list(identities)
        again = run_reward_curves(
            list(dict.fromkeys(c[0] for c in cells)),
            list(dict.fromkeys(c[1] for c in cells)),
            sorted({c[2] for c in cells}),
            points[0].budget_s,
            copy,
        )
        assert again == points and copy.read_bytes() == path.read_bytes()  # not rewritten


def test_cli_resumes_the_published_egrl_ablation_with_nothing_run(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    import shutil

    import mallocgame.curves as curves

    docs = Path(__file__).parents[2] / "docs" / "results"
    shutil.copyfile(docs / "egrl-ablation-120s.csv", tmp_path / "e.csv")
    _no_cell_runs(monkeypatch)
    monkeypatch.setattr(curves, "normalized_upper_bound", lambda inst: 1.0)  # no LP: quick
    monkeypatch.setattr(curves, "plot_curves", lambda points, path, bounds: None)
    argv = ["bench", "rewards", "--programs", "torch-v1/bert_base_infer_b128_s512"]
    argv += ["xla-v2/alphatensor_matmul_4096", "--solvers", "egrl", "egrl[mode=evolution]"]
    argv += ["egrl[mode=pg]", "--seeds", "0", "1", "--budget", "120", "--out", str(tmp_path / "e")]
    assert main(argv) == 0
    assert capsys.readouterr().err.count("already") == 12
    assert (tmp_path / "e.csv").read_bytes() == (docs / "egrl-ablation-120s.csv").read_bytes()


def test_a_cell_of_a_changed_program_is_refused_not_reused(tmp_path: Path, capsys) -> None:
    """The CSV kept no instance hash: a program file changed since its curves were run had
    them reused as the new program's."""
    from mallocgame.bench.rewards import REWARDS_HEADER, read_records
    from mallocgame.instance import save_instance
    from mallocgame.workloads.registry import load_workload

    program = tmp_path / "p.json"
    save_instance(load_workload("synthetic-v1/small"), program)
    argv = ["bench", "rewards", "--programs", str(program), "--solvers", "greedy"]
    argv += ["--budget", "0.2", "--out", str(tmp_path / "r")]
    assert main(argv) == 0
    lines = (tmp_path / "r.csv").read_text().splitlines()
    assert lines[0] == ",".join(REWARDS_HEADER)
    [identity] = read_records(tmp_path / "r.csv")[1].values()
    assert identity is not None and identity.instance_sha256 == load_workload(str(program)).sha256
    before = (tmp_path / "r.csv").read_bytes()
    save_instance(load_workload("xla-v1/lstm_infer"), program)  # the program changed
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "greedy s0 was run on another instance" in err
    assert (tmp_path / "r.csv").read_bytes() == before  # nothing run, nothing written
    # a path of bytes no UTF-8 holds: the cell ran, then the CSV's write was a traceback
    assert main([*argv[:3], str(tmp_path / "p\udcff.json"), *argv[4:]]) == 2
    assert "must be UTF-8 text" in capsys.readouterr().err
    # a stale cell of a seed not asked is neither run nor tabulated: not refused
    assert main([*argv, "--seeds", "1"]) == 0
    assert "greedy s1" in capsys.readouterr().err


def test_a_cell_of_other_settings_is_refused_a_setting_it_lacks_is_its_default(
    tmp_path: Path, monkeypatch
) -> None:
    import json

    from mallocgame.bench.rewards import Identity, run_reward_curves, write_rewards_csv
    from mallocgame.curves import CurvePoint
    from mallocgame.errors import StaleRecordError
    from mallocgame.solvers import get_solver
    from mallocgame.workloads.registry import load_workload

    sha = load_workload("synthetic-v1/small").sha256
    now = get_solver("es").settings({"sigma": "0.2"})
    cell = ("synthetic-v1/small", "es[sigma=0.2]", 0)
    point = CurvePoint(*cell, 0.5, 0.25, "games=3", 1.0)
    _no_cell_runs(monkeypatch)
    path = tmp_path / "r.csv"
    older = {k: v for k, v in now.items() if k != "workers"}  # written before workers was
    for settings, stale in ((now, False), (older, False), ({**now, "sigma": 0.1}, True)):
        write_rewards_csv([point], {cell: Identity(sha, json.dumps(settings))}, path)
        run = functools.partial(run_reward_curves, [cell[0]], [cell[1]], [0], 1.0, path)
        if stale:
            with pytest.raises(StaleRecordError, match=r"other settings than this run's \(sigma"):
                run()
        else:
            assert run() == [point]
    # another solver's cell is not this run's to judge: kept as it is
    assert run_reward_curves([cell[0]], ["es"], [], 1.0, path) == [point]


@pytest.mark.parametrize(
    ("held", "asked", "message"),
    [
        (1.0, 2.0, "holds curves at 1 s, not 2 s"),
        (1.0, 1.0000000001, "holds curves at 1 s, not 1.0000000001 s"),
        (1.0000000000001, 1.0, "holds curves at 1.0000000000001 s, not 1.0 s"),
        (1.0, 1.0 + 2**-52, "holds curves at 1.0 s, not 1.0000000000000002 s"),
        (None, 0.2, "holds curves at no wall-clock budget, not 0.2 s"),
    ],
)
def test_a_csv_at_another_budget_names_both_budgets_apart(
    tmp_path: Path, held, asked, message
) -> None:
    """A budget that differs only past the sixth digit was 'holds curves at 1 s, not 1 s'."""
    from mallocgame.bench.rewards import run_reward_curves
    from mallocgame.curves import CurvePoint
    from mallocgame.errors import StaleRecordError

    point = CurvePoint("synthetic-v1/small", "random", 0, 0.1, 0.2, "games=1", held)
    write_csv([point], tmp_path / "r.csv")
    with pytest.raises(StaleRecordError) as refused:
        run_reward_curves(["synthetic-v1/small"], ["random"], [0], asked, tmp_path / "r.csv")
    assert f"{tmp_path / 'r.csv'} {message}: give another --out" == str(refused.value)


def test_an_old_csv_goes_on_in_the_new_format_its_rows_as_they_stand(tmp_path: Path) -> None:
    from mallocgame.bench.rewards import read_records, run_reward_curves
    from mallocgame.curves import CurvePoint

    old = [CurvePoint("synthetic-v1/small", "random", 0, 0.1, 0.2, "games=1", 0.2)]
    write_csv(old, tmp_path / "r.csv")  # 7 columns, as the published ones
    points = run_reward_curves(
        ["synthetic-v1/small"], ["random", "greedy"], [0], 0.2, tmp_path / "r.csv"
    )
    assert points[:1] == old
    _, identities = read_records(tmp_path / "r.csv")
    assert identities[("synthetic-v1/small", "random", 0)] is None
    assert identities[("synthetic-v1/small", "greedy", 0)] is not None


@pytest.mark.parametrize(
    "cells, message",
    [
        (["abc", "{}"], "instance_sha256 'abc' is not a sha256"),
        (["a" * 64, "[1]"], r"settings '\[1\]' are not a JSON object"),
        (["a" * 64, ""], "settings '' are not a JSON object"),
    ],
)
def test_a_row_with_a_bad_identity_is_refused(tmp_path: Path, cells, message) -> None:
    from mallocgame.bench.rewards import REWARDS_HEADER

    row = ["synthetic-v1/small", "random", "0", "1.0", "0.5", "0.25", "games=1", *cells]
    with (tmp_path / "r.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows([REWARDS_HEADER, row])
    with pytest.raises(FormatError, match=f"line 2: .*{message}"):
        read_csv(tmp_path / "r.csv")


def test_a_cell_whose_rows_state_two_identities_is_refused(tmp_path: Path) -> None:
    from mallocgame.bench.rewards import REWARDS_HEADER

    rows = [
        ["synthetic-v1/small", "random", "0", "1.0", f"0.{i}", "0.25", "games=1", "a" * 64, s]
        for i, s in enumerate(['{"x": 1}', '{"x": 2}'])
    ]
    with (tmp_path / "r.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows([REWARDS_HEADER, *rows])
    with pytest.raises(FormatError, match="line 3: synthetic-v1/small random s0 has rows of two"):
        read_csv(tmp_path / "r.csv")


def test_a_library_run_refuses_a_program_path_that_is_no_utf8_before_any_cell(
    tmp_path: Path,
) -> None:
    """run_reward_curves, called from code, refuses the path the CSV could not name (it
    ran the cell, then met a UnicodeEncodeError writing the CSV)."""
    from mallocgame.bench.rewards import run_reward_curves
    from mallocgame.instance import save_instance
    from mallocgame.workloads.registry import load_workload

    program = tmp_path / "p\udcff.json"
    save_instance(load_workload("synthetic-v1/small"), program)
    csv_path = tmp_path / "r.csv"
    with pytest.raises(InputFileError, match="must be UTF-8 text"):
        run_reward_curves([str(program)], ["greedy"], [0], 0.2, csv_path)
    assert not csv_path.exists()
