"""Resumable sweeps and the speedup table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mallocgame.bench.speedups import format_table, speedup_table
from mallocgame.bench.sweep import Job, job_path, load_records, run_sweep, settings_with_defaults
from mallocgame.cli import main

PROGRAMS = ["xla-v1/lstm_infer", "xla-v1/resnet_infer"]


def test_one_file_per_job_and_resume(tmp_path: Path) -> None:
    jobs = [
        Job(p, s, seed, None, 2) for p in PROGRAMS for s in ("drop", "random") for seed in (0, 1)
    ]
    assert run_sweep(jobs, tmp_path, workers=1) == (8, 0)
    files = sorted(tmp_path.glob("*.json"))
    assert (
        len(files) == 8 and job_path(tmp_path, jobs[0]).name == "xla-v1-lstm_infer.drop.s0.w2.json"
    )
    stamp = {p: p.stat().st_mtime_ns for p in files}
    assert run_sweep(jobs, tmp_path, workers=1) == (0, 8)  # everything skipped
    assert {p: p.stat().st_mtime_ns for p in files} == stamp
    records = load_records(tmp_path)
    assert all(r["valid"] and r["latency_s"] > 0 for r in records)
    assert all(r["reward_s"] <= r["upper_bound_s"] for r in records)
    # same seed and work budget: the same answer as a direct run
    rerun = tmp_path / "again"
    run_sweep(jobs[2:3], rerun, workers=1)
    assert (
        json.loads(next(rerun.glob("*.json")).read_text())["reward_s"]
        == json.loads(job_path(tmp_path, jobs[2]).read_text())["reward_s"]
    )


def test_two_budgets_are_two_file_names() -> None:
    tag = lambda seconds, work=None: Job("p", "drop", 0, seconds, work).budget_tag  # noqa: E731
    assert [tag(60.0), tag(600), tag(0.5, 8), tag(None, 8), tag(None)] == [
        "t60",
        "t600",
        "t0.5-w8",
        "w8",
        "default",
    ]  # the names of the kept sweeps' records, as they were
    assert tag(0.1) == "t0.1" and tag(0.1000001) == "t0.1000001"  # not both t0.1
    assert tag(123456789.0) == "t123456789"  # where {:g} would round it: t1.23457e+08


def test_a_record_replays_its_answer(tmp_path: Path, capsys) -> None:
    from mallocgame.solution import load_solution
    from mallocgame.workloads.registry import load_workload

    job = Job(PROGRAMS[0], "random", 1, None, 3)
    run_sweep([job], tmp_path, workers=1)
    record = json.loads(job_path(tmp_path, job).read_text())
    assert record["instance_sha256"] == load_workload(PROGRAMS[0]).sha256
    solution = load_solution(job_path(tmp_path, job))
    assert solution.reward_s == record["reward_s"] and solution.work == record["work"]
    assert main(["check", PROGRAMS[0], str(job_path(tmp_path, job))]) == 0
    assert "valid" in capsys.readouterr().out
    assert (
        main(["check", PROGRAMS[1], str(job_path(tmp_path, job))]) == 1
    )  # another program: refused


def test_a_cell_named_twice_is_one_job() -> None:
    from mallocgame.bench.sweep import sweep_jobs

    jobs = sweep_jobs([*PROGRAMS, PROGRAMS[0]], ["random", "random"], [0, 0, 1], work=2)
    assert len(jobs) == len(set(jobs)) == 2 * len(PROGRAMS)
    assert [j.program for j in jobs[: len(PROGRAMS)]] == PROGRAMS  # the first order kept


def test_sweep_jobs_type_the_options_given_as_text() -> None:
    from mallocgame.bench.sweep import sweep_jobs
    from mallocgame.errors import SolverError

    jobs = sweep_jobs(
        PROGRAMS, ["es", "random"], [0, 1], work=4, options={"es": {"workers": "2", "sigma": "0.2"}}
    )
    assert [(j.seed, j.program, j.solver) for j in jobs[:3]] == [
        (0, PROGRAMS[0], "es"),
        (0, PROGRAMS[0], "random"),
        (0, PROGRAMS[1], "es"),
    ]
    assert jobs[0].options == (("sigma", 0.2), ("workers", 2)) and jobs[1].options == ()
    with pytest.raises(SolverError, match="es: option workers must be a whole number"):
        sweep_jobs(PROGRAMS, ["es"], [0], options={"es": {"workers": "two"}})


@pytest.mark.parametrize(
    "seeds, seconds, work, message",
    [
        ([-3], None, 2, "a seed must be from 0 to 9,223,372,036,854,775,807, not -3"),
        ([0], float("nan"), None, "budget must be a finite number of seconds above 0"),
        ([0], float("inf"), None, "budget must be a finite number of seconds above 0"),
        ([0], 0.0, None, "budget must be a finite number of seconds above 0"),
        ([0], None, 0, "the work budget must be from 1 to 9,007,199,254,740,992, not 0"),
    ],
)
def test_a_sweep_it_cannot_run_is_refused(
    tmp_path: Path, capsys, seeds, seconds, work, message: str
) -> None:
    from mallocgame.bench.inputs import StudyInputError
    from mallocgame.bench.sweep import sweep_jobs

    with pytest.raises(StudyInputError, match=message):
        sweep_jobs(PROGRAMS, ["random"], seeds, seconds=seconds, work=work)
    budget = ["--budget", str(seconds)] if seconds is not None else ["--work", str(work)]
    argv = [
        "bench",
        "speedups",
        "--programs",
        PROGRAMS[0],
        "--solvers",
        "random",
        "--seeds",
        *map(str, seeds),
        *budget,
        "--out",
        str(tmp_path / "out"),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err  # the command line's own check or the library's: one line
    assert len(err.strip().splitlines()) == 1
    assert ("seed" if seeds[0] < 0 else "work" if work == 0 else "budget") in err
    assert not (tmp_path / "out").exists()


def test_speedup_table_arithmetic() -> None:
    records = [
        {
            "program": "a",
            "solver": "base",
            "seed": 0,
            "valid": True,
            "latency_s": 2.0,
            "normalized_reward": 0.1,
            "reward_s": 1.0,
            "upper_bound_s": 4.0,
        },
        {
            "program": "b",
            "solver": "base",
            "seed": 0,
            "valid": True,
            "latency_s": 1.0,
            "normalized_reward": 0.1,
            "reward_s": 1.0,
        },
        {
            "program": "a",
            "solver": "x",
            "seed": 0,
            "valid": True,
            "latency_s": 1.0,
            "normalized_reward": 0.5,
            "reward_s": 1.0,
            "bound_s": 2.0,
        },
        {
            "program": "a",
            "solver": "x",
            "seed": 1,
            "valid": True,
            "latency_s": 1.0,
            "normalized_reward": 0.5,
            "reward_s": 1.0,
        },
        {
            "program": "b",
            "solver": "x",
            "seed": 0,
            "valid": True,
            "latency_s": 2.0,
            "normalized_reward": 0.3,
            "reward_s": 1.0,
        },
        {
            "program": "b",
            "solver": "x",
            "seed": 1,
            "valid": False,
            "latency_s": None,
            "normalized_reward": 0.9,
            "reward_s": 1.0,
        },
    ]
    rows = {r.solver: r for r in speedup_table(records, baseline="base")}
    x = rows["x"]
    assert (x.programs, x.max, x.min, x.improved) == (2, 2.0, 0.5, 1)
    assert x.mean == pytest.approx(1.25) and x.mean_normalized_reward == pytest.approx(0.4)
    # program a's tightest bound (2.0, from x's record) applies to all its records;
    # program b has none
    assert x.bound_gap == pytest.approx(0.5) and rows["base"].bound_gap == pytest.approx(0.5)
    assert rows["base"].mean == 1.0 and "| x | 2 | 1.2500" in format_table(
        list(rows.values()), "base"
    )
    # the gap covers the row's programs only: a program the baseline has no valid answer
    # of counts in no column of the row
    records.append({**records[2], "program": "c", "seed": 0, "reward_s": 0.0, "bound_s": 1.0})
    records.append({**records[0], "program": "c", "valid": False, "latency_s": None})
    x = {r.solver: r for r in speedup_table(records, baseline="base")}["x"]
    assert x.programs == 2 and x.bound_gap == pytest.approx(0.5)


def test_cli_bench_speedups(tmp_path: Path, capsys) -> None:
    argv = [
        "bench",
        "speedups",
        "--programs",
        PROGRAMS[0],
        "--baseline",
        "drop",
        "--solvers",
        "random",
        "--work",
        "2",
        "--out",
        str(tmp_path),
        "--workers",
        "1",
    ]
    assert main(argv) == 0
    assert "| random | 1 |" in capsys.readouterr().out
    assert main([*argv[:-6], "--solvers", "nope", "--out", str(tmp_path)]) == 2


def test_existing_tabulates_the_complete_programs_and_runs_nothing(tmp_path: Path, capsys) -> None:
    done = [
        Job(PROGRAMS[0], "drop", 0, None, 2),
        Job(PROGRAMS[0], "random", 0, None, 2),
        Job(PROGRAMS[1], "drop", 0, None, 2),
    ]  # the second program's random job not yet run
    run_sweep(done, tmp_path, workers=1)
    argv = [
        "bench",
        "speedups",
        "--programs",
        *PROGRAMS,
        "--baseline",
        "drop",
        "--solvers",
        "random",
        "--work",
        "2",
        "--out",
        str(tmp_path),
        "--existing",
        "--csv",
        str(tmp_path / "t.csv"),
    ]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "1 of 2 programs have a record of every solver" in captured.err
    assert (
        "| random | 1 |" in captured.out and "| drop | 1 |" in captured.out
    )  # only the complete program
    assert not job_path(tmp_path, Job(PROGRAMS[1], "random", 0, None, 2)).exists()  # nothing ran
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert (
        lines[0]
        == "program,buffers,solver,seeds,normalized_reward,latency_s,speedup_over_drop,chosen,games,wall_s"
    )
    assert [line.split(",")[2] for line in lines[1:]] == ["drop", "random"]
    latency = {
        r["solver"]: r["latency_s"] for r in load_records(tmp_path) if r["program"] == PROGRAMS[0]
    }
    random_row = lines[2].split(",")
    assert float(random_row[6]) == pytest.approx(latency["drop"] / latency["random"], abs=1e-6)
    assert random_row[8] == "2"  # random's games


def test_existing_refuses_what_it_cannot_tabulate(tmp_path: Path, capsys) -> None:
    argv = [
        "bench",
        "speedups",
        "--programs",
        PROGRAMS[0],
        "--baseline",
        "drop",
        "--solvers",
        "random",
        "--work",
        "2",
        "--existing",
    ]
    assert main([*argv, "--out", str(tmp_path / "nothing")]) == 2  # no records directory
    assert "no records directory" in capsys.readouterr().err
    run_sweep([Job(PROGRAMS[0], "drop", 0, None, 2)], tmp_path, workers=1)
    assert main([*argv, "--out", str(tmp_path)]) == 2  # random not run: no complete program
    assert "no program" in capsys.readouterr().err
    assert main([*argv, "--out", str(tmp_path), "--csv", str(tmp_path)]) == 2  # a directory
    assert main([*argv, "--out", str(tmp_path), "--csv", ""]) == 2
    assert "--csv must name a file" in capsys.readouterr().err


def test_the_csv_is_neither_a_program_read_nor_the_records_folder(tmp_path: Path, capsys) -> None:
    """--csv over an instance file of --programs overwrote it after the sweep (the records
    then named a program file no longer there); over a records folder still to make, the
    whole sweep ran, then the CSV failed."""
    from mallocgame.instance import save_instance
    from mallocgame.workloads.registry import load_workload

    program = tmp_path / "gru.json"
    save_instance(load_workload(PROGRAMS[0]), program)
    before = program.read_bytes()
    argv = ["bench", "speedups", "--programs", str(program), "--baseline", "drop"]
    argv += ["--solvers", "random", "--work", "2"]
    assert main([*argv, "--out", str(tmp_path / "recs"), "--csv", str(program)]) == 2
    assert "is the file this command reads" in capsys.readouterr().err
    assert program.read_bytes() == before
    assert main([*argv, "--out", str(tmp_path / "recs2"), "--csv", str(tmp_path / "recs2")]) == 2
    assert "is the records' folder" in capsys.readouterr().err
    assert not (tmp_path / "recs").exists() and not (tmp_path / "recs2").exists()  # no job ran
    # a file where the records' folder goes: one line in words (it was a raw [Errno 17])
    assert main([*argv, "--out", str(program)]) == 2
    assert "a file, not the records' folder" in capsys.readouterr().err
    record = str(tmp_path / "recs" / "gru.random.s0.w2.json")  # (a record's name or not)
    assert main([*argv, "--out", str(tmp_path / "recs"), "--csv", record]) == 2
    assert "or a record in it" in capsys.readouterr().err


def test_complete_programs_need_every_solver_at_every_seed() -> None:
    from mallocgame.bench.speedups import complete_programs

    jobs = [
        Job(program, solver, seed, None, 2)
        for program in "pq"
        for solver in ("a", "b")
        for seed in (0, 1)
    ]
    records = [
        {"program": program, "solver": solver, "seed": seed}
        for program, solver, seed in [
            ("p", "a", 0),
            ("p", "b", 0),
            ("p", "a", 1),
            ("p", "b", 1),
            ("q", "a", 0),
            ("q", "b", 0),
            ("q", "a", 1),
        ]
    ]  # q's b at seed 1 missing
    assert {r["program"] for r in complete_programs(records, jobs)} == {"p"}
    assert len(complete_programs(records, jobs)) == 4


def test_program_results_per_program_and_solver(tmp_path: Path) -> None:
    from mallocgame.bench.speedups import candidate_records, program_results, write_program_csv

    candidates = {
        "heuristic": {"valid": True, "latency_s": 2.0, "reward_s": 1.0, "normalized_reward": 0.1},
        "muzero": {"valid": True, "latency_s": 1.0, "reward_s": 1.5, "normalized_reward": 0.2},
    }
    records = [
        {
            "program": "p",
            "solver": "heuristic",
            "seed": 0,
            "valid": True,
            "latency_s": 2.0,
            "normalized_reward": 0.1,
            "buffers": 30,
            "wall_s": 1.0,
        },
        *[
            {
                "program": "p",
                "solver": "muzero-prod",
                "seed": seed,
                "valid": True,
                "latency_s": latency,
                "normalized_reward": 0.2,
                "buffers": 30,
                "wall_s": 60.0,
                "work": {"games": games},
                "solution": {"info": {"chosen": chosen, "candidates": candidates}},
            }
            for seed, latency, games, chosen in ((1, 2.0, 10, "heuristic"), (0, 1.0, 20, "muzero"))
        ],
        {
            "program": "q",
            "solver": "muzero-prod",
            "seed": 0,
            "valid": False,
            "latency_s": None,
            "buffers": 5,
        },
    ]
    rows = {r.solver: r for r in program_results(records + candidate_records(records))}
    assert set(rows) == {
        "heuristic",
        "muzero-prod",
        "muzero-prod:heuristic",
        "muzero-prod:muzero",
    }  # q: invalid
    prod = rows["muzero-prod"]
    assert (prod.seeds, prod.latency_s, prod.speedup, prod.games, prod.chosen) == (
        2,
        1.5,
        2.0 / 1.5,
        15,
        "muzero;heuristic",
    )
    assert rows["muzero-prod:muzero"].speedup == 2.0 and rows["muzero-prod:muzero"].games is None
    assert rows["heuristic"].chosen == "" and rows["heuristic"].speedup == 1.0
    write_program_csv(tmp_path / "p.csv", list(rows.values()))
    assert (
        "p,30,muzero-prod,2,0.200000,1.5,1.333333,muzero;heuristic,15,60.0"
        in (tmp_path / "p.csv").read_text()
    )


def test_program_table_rewards_and_bound() -> None:
    from mallocgame.bench.speedups import format_program_table

    records = [
        {
            "program": "p",
            "solver": "a",
            "seed": 0,
            "valid": True,
            "normalized_reward": 0.5,
            "reward_s": 2.0,
            "upper_bound_s": 3.0,
            "buffers": 1200,
        },
        {
            "program": "p",
            "solver": "b",
            "seed": 0,
            "valid": True,
            "normalized_reward": 0.25,
            "reward_s": 1.0,
            "bound_s": 2.4,
            "buffers": 1200,
        },
        {
            "program": "q",
            "solver": "a",
            "seed": 0,
            "valid": False,
            "normalized_reward": 0.9,
            "reward_s": 1.0,
            "buffers": 7,
        },
    ]
    table = format_program_table(records, ["a", "b"]).splitlines()
    assert table[0] == "| program | buffers | a | b | bound / R |"
    # Smaller programs first; q's answer by a is invalid, b gave none.
    assert table[2] == "| q | 7 | invalid | — | — |"
    assert table[3] == "| p | 1,200 | 0.5000 | 0.2500 | 0.6000 |"  # R = 4 s, tightest bound 2.4 s


def test_a_bound_of_one_solvers_model_is_raised_to_the_best_valid_answer() -> None:
    from mallocgame.bench.speedups import speedup_table, tightest_bounds

    def record(solver: str, reward: float, **bound: float) -> dict:
        return {
            "program": "p",
            "solver": solver,
            "seed": 0,
            "valid": True,
            "normalized_reward": reward / 4,
            "reward_s": reward,
            "latency_s": 10.0 - reward,
            **bound,
        }

    # exhaustive's bound is the game's optimum (2.0 s); exact's valid mapping beats it
    records = [
        record("heuristic", 1.5, upper_bound_s=3.0),
        record("exhaustive", 2.0, bound_s=2.0, upper_bound_s=3.0),
        record("exact", 2.2, bound_s=2.5, upper_bound_s=3.0),
    ]
    assert tightest_bounds(records) == {"p": 2.2}
    gaps = {row.solver: row.bound_gap for row in speedup_table(records, "heuristic")}
    assert gaps["exact"] == 0.0 and all(g is not None and g >= 0 for g in gaps.values())


def test_a_hybrids_candidates_become_records_of_their_own() -> None:
    from mallocgame.bench.speedups import candidate_records, format_extremes, program_speedups

    def prod(program: str, agent_latency: float) -> dict:
        candidates = {
            "heuristic": {
                "valid": True,
                "latency_s": 2.0,
                "reward_s": 1.0,
                "normalized_reward": 0.1,
            },
            "muzero": {
                "valid": True,
                "latency_s": agent_latency,
                "reward_s": 1.5,
                "normalized_reward": 0.2,
            },
        }
        return {
            "program": program,
            "solver": "muzero-prod",
            "seed": 0,
            "valid": True,
            "buffers": 9,
            "latency_s": min(2.0, agent_latency),
            "upper_bound_s": 5.0,
            "solution": {
                "info": {
                    "chosen": "muzero" if agent_latency < 2.0 else "heuristic",
                    "candidates": candidates,
                }
            },
        }

    records = [prod(p, latency) for p, latency in (("p", 1.0), ("q", 4.0), ("r", 1.6))]
    records += [
        {"program": p, "solver": "heuristic", "seed": 0, "valid": True, "latency_s": 2.0}
        for p in "pqr"
    ]
    derived = candidate_records(records)
    assert {d["solver"] for d in derived} == {"muzero-prod:heuristic", "muzero-prod:muzero"}
    agent = [d for d in derived if d["solver"] == "muzero-prod:muzero"]
    assert [(d["program"], d["latency_s"], d["upper_bound_s"]) for d in agent] == [
        ("p", 1.0, 5.0),
        ("q", 4.0, 5.0),
        ("r", 1.6, 5.0),
    ]
    assert program_speedups(records + derived, "muzero-prod:muzero") == [
        ("p", 2.0),
        ("r", 1.25),
        ("q", 0.5),
    ]
    assert program_speedups(records, "muzero-prod") == [
        ("p", 2.0),
        ("r", 1.25),
        ("q", 1.0),
    ]  # never below 1
    table = format_extremes(records + derived, "muzero-prod:muzero", n=2).splitlines()
    assert table[2] == "| p | 2.0000 | q | 0.5000 |" and table[3] == "| r | 1.2500 | r | 1.2500 |"


def test_a_candidate_is_left_out_only_where_it_is_the_baselines_own_answer(
    tmp_path: Path, capsys
) -> None:
    """Every candidate of the baseline's name was left out: under ``--baseline muzero``
    the row of ``muzero-prod:muzero`` (another run than the baseline's) was lost. Only
    a one-pass solver's candidate (heuristic, xla) is the baseline's own answer."""
    from mallocgame.bench.speedups import candidate_records

    record = {
        "program": "p",
        "solver": "muzero-prod",
        "seed": 0,
        "valid": True,
        "latency_s": 1.0,
        "solution": {"info": {"chosen": "muzero", "candidates": {}}},
    }
    for name in ("heuristic", "muzero", "xla"):
        record["solution"]["info"]["candidates"][name] = {
            "valid": True,
            "latency_s": 1.0,
            "reward_s": 1.0,
            "normalized_reward": 0.5,
        }
    every = {"muzero-prod:heuristic", "muzero-prod:muzero", "muzero-prod:xla"}
    for baseline, dropped in (("muzero", None), ("heuristic", "muzero-prod:heuristic")):
        kept = {r["solver"] for r in candidate_records([record], baseline)}
        assert kept == every - {dropped}
    assert {r["solver"] for r in candidate_records([record], "xla")} == every - {"muzero-prod:xla"}
    argv = ["bench", "speedups", "--programs", PROGRAMS[0], "--solvers", "best-of"]
    argv += ["--work", "1", "--workers", "1", "--out", str(tmp_path)]
    assert main([*argv, "--baseline", "random"]) == 0  # best-of's random: another run
    out = capsys.readouterr().out
    assert "| best-of:random | 1 |" in out and "| best-of:heuristic | 1 |" in out
    assert main([*argv, "--baseline", "heuristic"]) == 0  # best-of's heuristic: the baseline's
    out = capsys.readouterr().out
    assert "| best-of:random | 1 |" in out and "| best-of:heuristic |" not in out


def test_local_pool_gives_the_same_records(tmp_path: Path, monkeypatch) -> None:
    import mallocgame.bench.sweep as sweep_module

    started: list[int] = []
    real_pool = sweep_module.process_pool
    monkeypatch.setattr(
        sweep_module, "process_pool", lambda n, **kw: started.append(n) or real_pool(n, **kw)
    )
    jobs = [Job(p, "random", 0, None, 2) for p in PROGRAMS]
    assert run_sweep(jobs, tmp_path / "pool", workers=8) == (2, 0)
    assert started == [2]  # a worker a job at most: each starts with the pool
    run_sweep(jobs, tmp_path / "one", workers=1)
    pooled = {r["program"]: r["reward_s"] for r in load_records(tmp_path / "pool")}
    assert pooled == {r["program"]: r["reward_s"] for r in load_records(tmp_path / "one")}


def test_solver_options_reach_the_solver_and_get_their_own_files(tmp_path: Path, capsys) -> None:
    plain = Job(PROGRAMS[0], "es", 0, None, 1)
    small = Job(PROGRAMS[0], "es", 0, None, 1, (("population", 4),))
    assert job_path(tmp_path, plain).name == "xla-v1-lstm_infer.es.s0.w1.json"
    assert job_path(tmp_path, small).name.startswith("xla-v1-lstm_infer.es.s0.w1.o")
    other = Job(PROGRAMS[0], "es", 0, None, 1, (("population", 6),))
    assert job_path(tmp_path, small) != job_path(tmp_path, other)
    argv = [
        "bench",
        "speedups",
        "--programs",
        PROGRAMS[0],
        "--baseline",
        "drop",
        "--solvers",
        "es",
        "--work",
        "1",
        "--out",
        str(tmp_path),
        "--workers",
        "1",
    ]
    assert main([*argv, "--option", "es:population=4"]) == 0
    record = json.loads(job_path(tmp_path, small).read_text())
    assert record["options"] == {"population": 4} and record["work"]["games"] < 16
    assert record["recent_mean"] is None  # only learning agents report one
    assert not job_path(tmp_path, plain).exists()  # the settings are part of the job
    assert "| es | 1 |" in capsys.readouterr().out
    # a table for other settings does not pick that record up
    assert main([*argv, "--option", "es:population=6"]) == 0
    assert len(list(tmp_path.glob("xla-v1-lstm_infer.es.*.json"))) == 2
    for bad in ("population=4", "es:population", "mcts:simulations=2"):
        assert main([*argv, "--option", bad]) == 2


def test_run_sweep_checks_every_job_before_running_one(tmp_path: Path) -> None:
    from mallocgame.bench.sweep import check_jobs
    from mallocgame.errors import InputFileError, SolverError

    good = [
        Job(PROGRAMS[0], "drop", 0, None, 1),
        Job(PROGRAMS[0], "es", 0, None, 1, (("population", 4),)),
    ]
    check_jobs(good)
    out = tmp_path / "out"
    for bad, needle in [
        (Job(PROGRAMS[0], "random", 0, None, 1, (("foo", 1),)), "random: unknown option 'foo'"),
        (Job(PROGRAMS[0], "exact", 0, None, 1, (("worker", 2),)), "exact: unknown option 'worker'"),
        # refused by the solver only as its job started, after the jobs before it
        (Job(PROGRAMS[0], "exact", 0, None, 1, (("workers", 2),)), "workers=2 with a work budget"),
        (Job(PROGRAMS[0], "nope", 0, None, 1), "unknown solver"),
    ]:
        with pytest.raises(SolverError, match=needle):
            run_sweep([*good, bad], out, workers=1)
        assert not out.exists()  # the good jobs did not run either
    typo = PROGRAMS[0][:-1]
    with pytest.raises(InputFileError, match=f"{typo}: neither a bundled workload"):
        run_sweep([*good, Job(typo, "drop", 0, None, 1)], out, workers=1)
    assert not out.exists()
    # a path of bytes no UTF-8 holds (os.fsdecode's surrogates): was a UnicodeEncodeError
    undecodable = str(tmp_path / "gru\udcff.json")
    with pytest.raises(InputFileError, match="must be UTF-8 text"):
        run_sweep([*good, Job(undecodable, "drop", 0, None, 1)], out, workers=1)
    assert not out.exists()
    # a program file that is no instance: read as its job started, after out was made
    malformed = tmp_path / "malformed.json"
    malformed.write_bytes(b"\xff\xfe garbage")
    with pytest.raises(InputFileError, match="not valid JSON"):
        run_sweep([*good, Job(str(malformed), "drop", 0, None, 1)], out, workers=1)
    assert not out.exists()


def test_settings_a_record_lacks_are_filled_from_the_defaults_nested_ones_too() -> None:
    defaults = {"a": 1, "b": 2, "observation": {"x": 3, "y": 4}}
    assert settings_with_defaults({"b": 5, "observation": {"y": 6}}, defaults) == {
        "a": 1,
        "b": 5,
        "observation": {"x": 3, "y": 6},
    }
    assert settings_with_defaults({"c": 7}, defaults) == {
        "a": 1,
        "b": 2,
        "observation": {"x": 3, "y": 4},
        "c": 7,
    }
    # keyed by name (best-of's candidates): a name is never made up, a name's settings are
    named = {"solvers": {"heuristic": {"h": 1}, "random": {}}}
    run = {"solvers": {"greedy": {}, "es": {"lr": 0.1, "sigma": 0.1}}}
    assert (
        settings_with_defaults({"solvers": {"greedy": {}, "es": {"sigma": 0.1}}}, named, run) == run
    )
    assert settings_with_defaults({"solvers": {"es": {}}}, named, run) == {
        "solvers": {"es": {"lr": 0.1, "sigma": 0.1}}
    }


def test_a_record_keeps_the_full_settings_and_a_stale_one_stops_the_sweep(
    tmp_path: Path, capsys
) -> None:
    from mallocgame.errors import StaleRecordError

    job = Job(PROGRAMS[0], "es", 0, None, 1, (("population", 4),))
    other = Job(PROGRAMS[1], "es", 0, None, 1, (("population", 4),))
    assert run_sweep([job], tmp_path, workers=1) == (1, 0)
    path = job_path(tmp_path, job)
    record = json.loads(path.read_text())
    assert (
        record["settings"]["population"] == 4 and record["settings"]["sigma"] == 0.1
    )  # defaults filled in
    assert run_sweep([job], tmp_path, workers=1) == (0, 1)  # the same settings: done
    # the record was written when a default differed: it is not this job's
    record["settings"]["sigma"] = 0.2
    path.write_text(json.dumps(record))
    with pytest.raises(StaleRecordError, match=r"sigma: 0\.2 -> 0\.1"):
        run_sweep([other, job], tmp_path, workers=1)
    assert not job_path(tmp_path, other).exists()  # nothing ran
    argv = [
        "bench",
        "speedups",
        "--programs",
        PROGRAMS[0],
        "--baseline",
        "drop",
        "--solvers",
        "es",
        "--work",
        "1",
        "--out",
        str(tmp_path),
        "--workers",
        "1",
        "--option",
        "es:population=4",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "other es settings" in err[0]
    # a setting the record lacks (added to the solver later) ran as its default: done
    record["settings"]["sigma"] = 0.1
    del record["settings"]["lr"]
    path.write_text(json.dumps(record))
    assert run_sweep([job], tmp_path, workers=1) == (0, 1)
    record["settings"]["sigma"] = 0.2  # but a setting it has must still match
    path.write_text(json.dumps(record))
    with pytest.raises(StaleRecordError, match=r"sigma: 0\.2 -> 0\.1"):
        run_sweep([job], tmp_path, workers=1)
    # a record from before settings were kept counts as done
    del record["settings"]
    path.write_text(json.dumps(record))
    assert run_sweep([job], tmp_path, workers=1) == (0, 1)


def test_a_table_reads_each_records_solution_not_its_numbers(tmp_path: Path, capsys) -> None:
    jobs = [Job(PROGRAMS[0], "drop", 0, None, 2), Job(PROGRAMS[0], "random", 0, None, 2)]
    run_sweep(jobs, tmp_path, workers=1)
    honest = {r["solver"]: r for r in load_records(tmp_path)}
    speedup = honest["drop"]["latency_s"] / honest["random"]["latency_s"]
    path = job_path(tmp_path, jobs[1])
    edited = {
        **honest["random"],
        "latency_s": 1e-9,
        "normalized_reward": 0.99,
        "reward_s": 1e3,
    }  # by hand
    path.write_text(json.dumps(edited))
    argv = [
        "bench",
        "speedups",
        "--programs",
        PROGRAMS[0],
        "--baseline",
        "drop",
        "--solvers",
        "random",
        "--work",
        "2",
        "--out",
        str(tmp_path),
        "--per-program",
    ]
    # a sweep under way, and one run (with nothing left to run)
    for extra in (["--existing"], ["--workers", "1"]):
        assert main([*argv, *extra]) == 0
        out = capsys.readouterr().out
        assert f"| random | 1 | {speedup:.4f} |" in out and "0.9900" not in out
        assert f"{honest['random']['normalized_reward']:.4f}" in out
    # its solution edited so that it fails the check: left out of the table, one line
    # saying which record and why
    edited["solution"] = {**edited["solution"], "normalized_reward": 7.5}
    path.write_text(json.dumps(edited))
    for extra in (["--existing"], ["--workers", "1"]):
        assert main([*argv, *extra]) == 1
        captured = capsys.readouterr()
        [line] = [x for x in captured.err.splitlines() if x.startswith("INVALID")]
        assert line.startswith(
            f"INVALID: {PROGRAMS[0]} random s0: {path}: its solution fails "
            "check: reward_mismatch: normalized_reward 7.5"
        )
        assert "| random | 1 |" not in captured.out and "| drop | 1 | 1.0000 |" in captured.out
        # and R (bound / R) is not taken from it
        assert f"| {PROGRAMS[0]} | 106 | 0.0000 | invalid | — |" in captured.out


def test_a_file_at_a_records_path_that_is_not_its_record_stops_the_sweep_and_the_table(
    tmp_path: Path, capsys
) -> None:
    from mallocgame.bench.sweep import job_records
    from mallocgame.errors import StaleRecordError

    jobs = [Job(p, "random", 0, None, 2) for p in PROGRAMS]
    assert run_sweep(jobs, tmp_path, workers=1) == (2, 0)
    first, second = (job_path(tmp_path, job) for job in jobs)
    kept = second.read_text()
    for stand_in in ("[]", "{}", first.read_text(), kept.replace('"budget"', '"budget": 1, "x"')):
        second.write_text(stand_in)  # not a record, another cell's, a malformed budget
        with pytest.raises(StaleRecordError, match="is not the record of xla-v1/resnet_infer"):
            run_sweep(jobs, tmp_path, workers=1)
        with pytest.raises(StaleRecordError, match="is not the record of|records of the same"):
            job_records(tmp_path, jobs)
    second.write_text(kept)
    assert len(job_records(tmp_path, jobs)) == 2
    # a document under another name that looks like a record but states no cell (a list
    # where a name goes, text where a number goes) is no record of any job
    doc = json.loads(kept)
    for field, value in (("program", ["x"]), ("seed", [0]), ("budget", {"work": "2"})):
        (tmp_path / "edited.json").write_text(json.dumps({**doc, field: value}))
        assert len(job_records(tmp_path, jobs)) == 2
    (tmp_path / "edited.json").unlink()
    # a copy of a record under a name no job has: two records of one cell
    (tmp_path / "copy.json").write_text(first.read_text())
    with pytest.raises(StaleRecordError, match="records of the same cell"):
        job_records(tmp_path, jobs)
    argv = ["bench", "speedups", "--programs", *PROGRAMS, "--baseline", "drop"]
    argv += ["--solvers", "random", "--work", "2", "--out", str(tmp_path), "--workers", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err  # refused before the baseline's jobs run: one line
    assert "records of the same cell" in err.strip().splitlines()[-1]
    assert "Traceback" not in err


def test_a_record_written_after_the_folder_was_read_is_taken(tmp_path: Path, monkeypatch) -> None:
    """A sweep beside the table's (another job of the same folder) can write a record
    between the folder's listing and the look at each job's path."""
    import mallocgame.bench.sweep as sweep

    jobs = [Job(p, "random", 0, None, 2) for p in PROGRAMS]
    run_sweep(jobs, tmp_path, workers=1)
    everything = sweep.job_records(tmp_path, jobs)
    listed = sweep.record_files(tmp_path)
    monkeypatch.setattr(sweep, "record_files", lambda _: listed[:1])  # the second not yet
    assert sweep.job_records(tmp_path, jobs) == everything and len(everything) == 2


# A fresh process runs one job; the solver notes, as it starts, which of the game's
# kernels are loaded (numba keeps a signature per loaded kernel).
FRESH_JOB = textwrap.dedent(
    """
    import json, sys
    from mallocgame.bench.sweep import Job, run_job
    from mallocgame.game import kernels as K
    from mallocgame.solvers.random import RandomSolver

    KERNELS = ("analyze", "apply", "apply_forced", "undo_to")
    loaded = {}
    search = RandomSolver.search

    def noting(self, instance, config, run):
        loaded.update({name: len(getattr(K, name).signatures) for name in KERNELS})
        return search(self, instance, config, run)

    RandomSolver.search = noting
    run_job(Job("xla-v1/lstm_infer", "random", 0, 0.5), sys.argv[1])
    print(json.dumps(loaded))
    """
)


def test_a_job_in_a_fresh_process_loads_the_game_kernels_before_its_clock_starts(
    tmp_path: Path,
) -> None:
    """A pool worker's first job had its wall-clock budget spent loading the kernels
    (about a second): with --workers 2 its seed played one game where the others played
    hundreds. They are loaded before the solver starts."""
    script = tmp_path / "job.py"
    script.write_text(FRESH_JOB)
    src = str(Path(__file__).parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert [name for name, signatures in loaded.items() if not signatures] == []


def test_two_programs_never_share_a_record_file(tmp_path: Path, monkeypatch) -> None:
    """``d/a.json`` and ``d-a.json`` were both made ``d-a.json``: the sweep ran both,
    the second overwrote the first, and every later run refused the survivor."""
    from mallocgame.bench.inputs import StudyInputError
    from mallocgame.bench.sweep import check_jobs
    from mallocgame.instance import save_instance
    from mallocgame.workloads.registry import load_workload

    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    save_instance(load_workload(PROGRAMS[0]), "d/a.json")
    save_instance(load_workload(PROGRAMS[1]), "d-a.json")
    jobs = [Job(p, "random", 0, None, 2) for p in ("d/a.json", "d-a.json", PROGRAMS[0])]
    names = [job_path(tmp_path, job).name for job in jobs]
    assert names[1:] == ["d-a.json.random.s0.w2.json", "xla-v1-lstm_infer.random.s0.w2.json"]
    assert names[0].startswith("d-a.json-") and len(set(names)) == 3  # a hash of d/a.json
    out = tmp_path / "out"
    assert run_sweep(jobs, out, workers=1) == (3, 0)
    assert {r["program"] for r in load_records(out)} == {j.program for j in jobs}
    assert run_sweep(jobs, out, workers=1) == (0, 3)
    # a file named as a bundled program's records are: refused before any job runs
    save_instance(load_workload(PROGRAMS[1]), "xla-v1-lstm_infer")
    clash = [*jobs, Job("xla-v1-lstm_infer", "random", 0, None, 2)]
    with pytest.raises(StudyInputError, match="would share the record file xla-v1-lstm_infer"):
        check_jobs(clash)
    with pytest.raises(StudyInputError, match="would share the record file"):
        run_sweep(clash, tmp_path / "other", workers=1)
    assert not (tmp_path / "other").exists()


def test_a_record_of_a_cell_under_another_file_name_is_the_jobs_record(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """A record kept under another name (one of a program in a folder, named before such
    programs' names got a hash, or renamed) was not seen: the sweep ran the job again,
    and its table then refused the two records of the cell."""
    from mallocgame.bench.sweep import job_records
    from mallocgame.errors import StaleRecordError
    from mallocgame.instance import save_instance
    from mallocgame.workloads.registry import load_workload

    monkeypatch.chdir(tmp_path)
    (tmp_path / "progs").mkdir()
    save_instance(load_workload(PROGRAMS[0]), "progs/small.json")
    jobs = [Job("progs/small.json", s, 0, None, 2) for s in ("drop", "random")]
    out = tmp_path / "out"
    assert run_sweep(jobs, out, workers=1) == (2, 0)
    for job in jobs:  # the names these records had before
        path = job_path(out, job)
        path.rename(out / f"progs-small.json.{job.solver}.s0.w2.json")
    stamp = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert run_sweep(jobs, out, workers=1) == (0, 2)
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == stamp  # nothing ran
    assert len(job_records(out, jobs)) == 2
    argv = ["bench", "speedups", "--programs", "progs/small.json", "--baseline", "drop"]
    argv += ["--solvers", "random", "--work", "2", "--out", "out", "--workers", "1"]
    assert main(argv) == 0
    assert "0 jobs to run, 2 already done" in capsys.readouterr().err
    # such a record is checked as one at the job's path: another instance's is refused
    old = out / "progs-small.json.random.s0.w2.json"
    record = json.loads(old.read_text())
    old.write_text(json.dumps({**record, "instance_sha256": "0" * 64}))
    with pytest.raises(StaleRecordError, match="progs-small.json.random.s0.w2.json was written"):
        run_sweep(jobs, out, workers=1)
    old.write_text(json.dumps(record))
    # and two records of one job's cell are refused before any job runs
    (out / "copy.json").write_text(old.read_text())
    more = [*jobs, Job("progs/small.json", "random", 1, None, 2)]
    with pytest.raises(StaleRecordError, match="records of the same cell"):
        run_sweep(more, out, workers=1)
    assert not job_path(out, more[2]).exists()


def test_a_record_of_a_program_that_changed_since_stops_the_sweep(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """A record of the program as it was was skipped as done, and the table of the new
    program was then all INVALID, for good."""
    from mallocgame.errors import StaleRecordError
    from mallocgame.instance import save_instance
    from mallocgame.workloads.registry import load_workload

    monkeypatch.chdir(tmp_path)
    save_instance(load_workload(PROGRAMS[0]), "p.json")
    jobs = [Job("p.json", "random", 0, None, 2), Job(PROGRAMS[1], "random", 0, None, 2)]
    assert run_sweep(jobs[:1], tmp_path / "out", workers=1) == (1, 0)
    assert run_sweep(jobs[:1], tmp_path / "out", workers=1) == (0, 1)  # the same program: done
    save_instance(load_workload(PROGRAMS[1]), "p.json")  # the program changed
    with pytest.raises(StaleRecordError, match="was written for another instance of p.json"):
        run_sweep(jobs, tmp_path / "out", workers=1)
    assert not job_path(tmp_path / "out", jobs[1]).exists()  # nothing ran
    argv = ["bench", "speedups", "--programs", "p.json", "--baseline", "random"]
    argv += ["--work", "2", "--out", "out", "--workers", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "another instance of p.json" in err[0] and "remove it" in err[0]


@pytest.mark.parametrize(
    "stray, needle",
    [("garbage", "zz.json"), (None, "zz.json: .*version")],
)
def test_a_file_the_table_cannot_read_stops_the_sweep_before_any_job(
    tmp_path: Path, capsys, stray: str | None, needle: str
) -> None:
    """A ``*.json`` in --out that is not JSON (or a record of another version) was found
    by the table, after every job had run."""
    from mallocgame.errors import MallocGameError

    jobs = [Job(PROGRAMS[0], "random", 0, None, 2)]
    run_sweep(jobs, tmp_path / "made", workers=1)
    record = json.loads(job_path(tmp_path / "made", jobs[0]).read_text())
    out = tmp_path / "out"
    out.mkdir()
    text = stray if stray is not None else json.dumps({**record, "version": 999})
    (out / "zz.json").write_text(text)
    with pytest.raises(MallocGameError, match=needle):
        run_sweep(jobs, out, workers=1)
    assert [p.name for p in out.iterdir()] == ["zz.json"]  # no job ran
    argv = ["bench", "speedups", "--programs", PROGRAMS[0], "--baseline", "random"]
    argv += ["--work", "2", "--out", str(out), "--workers", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "zz.json" in err[0]
    assert [p.name for p in out.iterdir()] == ["zz.json"]


def test_a_record_whose_wall_s_is_no_number_of_seconds_is_refused(tmp_path: Path, capsys) -> None:
    """A record's wall_s, which no re-check recomputes, that was text, a list or an object
    ended bench speedups --csv in a TypeError traceback after the table, the CSV unwritten;
    true was taken for 1 s."""
    from mallocgame.bench.sweep import job_records
    from mallocgame.errors import FormatError

    jobs = [Job(PROGRAMS[0], s, 0, None, 2) for s in ("drop", "random")]
    run_sweep(jobs, tmp_path, workers=1)
    path = job_path(tmp_path, jobs[1])
    record = json.loads(path.read_text())
    csv = tmp_path.parent / f"{tmp_path.name}.csv"
    argv = ["bench", "speedups", "--programs", PROGRAMS[0], "--baseline", "drop"]
    argv += ["--solvers", "random", "--work", "2", "--out", str(tmp_path), "--workers", "1"]
    argv += ["--csv", str(csv)]
    for wall in ("x", [1.0], {"s": 1.0}, True, -1.0, 10**400):
        path.write_text(json.dumps({**record, "wall_s": wall}))
        with pytest.raises(FormatError, match=f"{path}: a sweep record whose wall_s"):
            job_records(tmp_path, jobs)
        assert main(argv) == 2
        captured = capsys.readouterr()
        [line] = captured.err.strip().splitlines()
        assert str(path) in line and "is not a number of seconds" in line
        assert not csv.exists() and not captured.out
    for wall in (None, 2):  # (null: no time kept)
        path.write_text(json.dumps({**record, "wall_s": wall}))
        assert main(argv) == 0
        rows = csv.read_text().splitlines()
        assert rows[-1].split(",")[2] == "random"
        assert rows[-1].split(",")[-1] == ("" if wall is None else "2.0")
        capsys.readouterr()


def test_a_best_of_record_with_its_own_candidates_is_done_and_another_list_is_not(
    tmp_path: Path, capsys
) -> None:
    """The record of ``best-of:solvers=greedy,es`` was filled with the default candidates'
    settings (heuristic, random) before it was compared, so the sweep refused its own
    record on every rerun."""
    from mallocgame.bench.sweep import job_options
    from mallocgame.errors import StaleRecordError

    options = job_options("best-of", {"solvers": "greedy,es"})
    job = Job(PROGRAMS[0], "best-of", 0, None, 1, options)
    assert run_sweep([job], tmp_path, workers=1) == (1, 0)
    assert run_sweep([job], tmp_path, workers=1) == (0, 1)
    path = job_path(tmp_path, job)
    record = json.loads(path.read_text())
    kept = record["settings"]
    assert set(kept["solvers"]) == {"greedy", "es"}
    # a setting a candidate gained since (es's lr, say) ran as its default: done
    del record["settings"]["solvers"]["es"]["lr"]
    path.write_text(json.dumps(record))
    assert run_sweep([job], tmp_path, workers=1) == (0, 1)
    # but a record of other candidates is not this job's
    for candidates in ({"greedy": {}}, {**kept["solvers"], "random": {}}):
        path.write_text(json.dumps({**record, "settings": {"solvers": candidates}}))
        with pytest.raises(StaleRecordError, match="other best-of settings"):
            run_sweep([job], tmp_path, workers=1)
    path.write_text(json.dumps({**record, "settings": kept}))
    argv = ["bench", "speedups", "--programs", PROGRAMS[0], "--solvers", "best-of"]
    argv += ["--baseline", "drop", "--work", "1", "--workers", "1", "--out", str(tmp_path)]
    argv += ["--option", "best-of:solvers=greedy,es"]
    for _ in range(2):  # the first runs the baseline, the second runs nothing
        assert main(argv) == 0
    assert "other best-of settings" not in capsys.readouterr().err


def test_a_program_whose_record_name_would_be_too_long_gets_a_short_one(tmp_path: Path) -> None:
    """The record of a program at a long path was named longer than a file system takes
    (255 bytes): the sweep ended with [Errno 36] File name too long, every time."""
    from mallocgame.instance import save_instance
    from mallocgame.workloads.registry import load_workload

    folder = tmp_path / ("d" * 120) / ("e" * 120)
    folder.mkdir(parents=True)
    programs = [str(folder / "prog.json"), str(folder / "prog2.json")]
    for program in programs:
        save_instance(load_workload(PROGRAMS[0]), program)
    jobs = [Job(p, "random", 0, None, 2) for p in programs]
    names = [job_path(tmp_path, job).name for job in jobs]
    assert all(len(name) == 255 and name.endswith(".random.s0.w2.json") for name in names)
    assert names[0] != names[1]  # the same first characters, two hashes
    out = tmp_path / "out"
    assert run_sweep(jobs, out, workers=1) == (2, 0)
    assert run_sweep(jobs, out, workers=1) == (0, 2)
    # a name that fits is kept as it was
    assert (
        job_path(out, Job("d" * 200, "random", 0, None, 2)).name == "d" * 200 + ".random.s0.w2.json"
    )
