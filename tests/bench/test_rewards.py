"""Reward-against-time curves."""

from __future__ import annotations

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
    import mallocgame.bench.rewards as rewards
    from mallocgame.solvers.heuristic import HeuristicSolver

    calls: list[str] = []
    solve = HeuristicSolver.solve
    monkeypatch.setattr(rewards, "warm_game_kernels", lambda inst: calls.append(inst.name))

    def solving(self, instance, request):
        calls.append("solve")
        return solve(self, instance, request)

    monkeypatch.setattr(HeuristicSolver, "solve", solving)
    reward_curve("xla-v1/lstm_infer", "heuristic", seconds=5.0, seed=0)
    assert calls == ["xla-v1/lstm_infer", "solve"]


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
    points = reward_curve("xla-v1/lstm_infer", "es[workers=1]", seconds=0.3, seed=0)
    assert {p.solver for p in points} == {"es[workers=1]"}  # its own curve, named by its spec


@pytest.mark.parametrize(
    "spec, message",
    [
        ("es[sigma=0.2", "expected NAME"),
        ("es[]", "expected NAME"),
        ("es[sigma]", "is not KEY=VALUE"),
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
