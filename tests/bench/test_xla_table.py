"""bench xla: XLA's own placement against the heuristic's, on a program compiled for a TPU."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from mallocgame.bench.xla_table import format_xla_table, write_xla_csv, xla_row
from mallocgame.check import check_solution
from mallocgame.cli import main
from mallocgame.errors import MallocGameError, SolverError
from mallocgame.residency import compare_residency
from mallocgame.simulate import simulate
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads.registry import load_workload

PROGRAM = "tpu-v1/gru_infer_b512-v5e"  # 81 buffers; XLA's copies break the game's rules


def test_a_row_is_made_of_rechecked_answers() -> None:
    row = xla_row(PROGRAM, bound_seconds=10)
    inst = load_workload(PROGRAM)
    xla = get_solver("xla").solve(inst, SolveRequest(seed=0))
    heuristic = get_solver("heuristic").solve(inst, SolveRequest(seed=0))
    assert check_solution(inst, xla).ok and check_solution(inst, heuristic).ok
    assert row.target == "tpu-v5e" and row.buffers == inst.num_buffers
    assert (row.xla, row.heuristic) == (xla.normalized_reward, heuristic.normalized_reward)
    assert row.xla <= row.xla_raw and 0 < row.kept_fraction <= 1
    assert "copy_overlap x" in row.raw_failures
    assert row.speedup == pytest.approx(
        simulate(inst, xla).latency_s / simulate(inst, heuristic).latency_s
    )
    assert row.agreement == compare_residency(inst, heuristic, xla).agreement
    assert max(row.xla, row.heuristic) <= row.bound + 1e-9


def test_table_and_csv(tmp_path: Path) -> None:
    row = xla_row(PROGRAM, bound_seconds=10)
    table = format_xla_table([row])
    assert f"`{PROGRAM}`" in table and "heuristic / xla speedup" in table
    write_xla_csv([row], tmp_path / "x.csv")
    (line,) = list(csv.DictReader((tmp_path / "x.csv").open()))
    assert line["name"] == PROGRAM and float(line["speedup"]) == pytest.approx(row.speedup)


def test_cli(tmp_path: Path, capsys) -> None:
    out = tmp_path / "x.csv"
    argv = ["bench", "xla", "--programs", PROGRAM, "--bound-seconds", "5", "--csv", str(out)]
    assert main(argv) == 0
    assert f"`{PROGRAM}`" in capsys.readouterr().out and out.exists()


def test_a_program_without_xlas_placement_is_refused(capsys) -> None:
    with pytest.raises(SolverError, match="has no XLA placement"):
        xla_row("xla-v2/gru_infer_b512")
    assert main(["bench", "xla", "--programs", "xla-v2/gru_infer_b512"]) == 2
    assert "has no XLA placement" in capsys.readouterr().err


def test_names_and_the_csv_are_checked_before_any_program(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    import mallocgame.bench.xla_table as xla_table

    measured: list[str] = []
    monkeypatch.setattr(xla_table, "xla_row", lambda name, **_: measured.append(name))
    (tmp_path / "folder.csv").mkdir()
    for argv, needle in [
        (["--programs", PROGRAM, PROGRAM[:-1]], "neither a bundled workload"),
        (["--programs", PROGRAM, "--csv", str(tmp_path / "folder.csv")], "a directory, not a file"),
        (["--programs", PROGRAM, "--csv", ""], "--csv must name a file"),
        (["--programs", PROGRAM, "xla-v1/alexnet_train_b32"], "has no XLA placement: bench xla"),
        (["--programs", PROGRAM, str(_instance_file(tmp_path))], "has no XLA placement: bench xla"),
    ]:
        assert main(["bench", "xla", *argv]) == 2
        out, err = capsys.readouterr()
        assert needle in err and "Traceback" not in err
        assert out == "" and measured == []  # no program measured


def _instance_file(folder: Path) -> Path:
    """A program without XLA's placement, as an instance file."""
    from mallocgame.instance import save_instance
    from mallocgame.workloads.registry import load_workload

    save_instance(load_workload("xla-v1/lstm_infer"), folder / "lstm.json")
    return folder / "lstm.json"


@pytest.mark.parametrize("seconds", [float("nan"), -1.0, 0.0])
def test_a_bound_budget_that_is_not_a_time_is_refused(seconds: float) -> None:
    with pytest.raises(MallocGameError, match="bound_seconds must be a finite number"):
        xla_row(PROGRAM, bound_seconds=seconds)


def test_the_csv_goes_into_a_folder_made_for_it(tmp_path: Path, capsys) -> None:
    out = tmp_path / "new" / "x.csv"
    argv = ["bench", "xla", "--programs", PROGRAM, "--bound-seconds", "1", "--csv", str(out)]
    assert main(argv) == 0 and out.exists()
