"""The pinned sweep: a setting no job would take is refused before any job starts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.benchmarks import load_benchmark

pinned_sweep = load_benchmark("pinned_sweep")


def _exit_code() -> int:
    """The exit status of the sweep's main() on this test's sys.argv (it always exits)."""
    with pytest.raises(SystemExit) as exit_info:
        pinned_sweep.main()
    return exit_info.value.code


@pytest.mark.parametrize(
    "option", ["workers=2", "ES:workers=2", "random:workers=2", "es:workers", "es"]
)
def test_an_option_for_no_solver_of_the_sweep_is_refused(
    option: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    argv = ["pinned_sweep.py", "--programs", "xla-v1/lstm_infer", "--solvers", "es"]
    argv += ["--budget", "1", "--out", str(tmp_path / "out"), "--option", option]
    monkeypatch.setattr(sys, "argv", argv)
    assert _exit_code() == 2
    assert "is not SOLVER:KEY=VALUE for one of --solvers" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_an_option_given_twice_with_two_values_is_refused(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """The last value was taken for the check, and every job's bench speedups got both."""
    argv = ["pinned_sweep.py", "--programs", "xla-v1/lstm_infer", "--solvers", "es"]
    argv += ["--budget", "1", "--out", str(tmp_path / "out")]
    argv += ["--option", "es:workers=1", "--option", "es:workers=2"]
    monkeypatch.setattr(sys, "argv", argv)
    assert _exit_code() == 2
    assert "--option es:workers given twice, as '1' and '2'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_program_that_is_no_workload_is_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    argv = ["pinned_sweep.py", "--programs", "xla-v1/lstm_infer", "xla-v1/lstm_infr"]
    argv += ["--solvers", "drop", "--budget", "1", "--out", str(tmp_path / "out")]
    monkeypatch.setattr(sys, "argv", argv)
    assert _exit_code() == 2
    assert "did you mean xla-v1/lstm_infer" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def _quiet_signals(monkeypatch) -> None:
    """main() takes SIGTERM and SIGINT for itself: not in the test process."""
    monkeypatch.setattr(pinned_sweep.signal, "signal", lambda *_args: None)


def _finished_jobs(monkeypatch) -> list[tuple[list[str], dict]]:
    """Jobs started by ``taskset`` (which is found) finish at once with exit 0; returns
    the list of their starts, each the command and Popen's keywords (its ``stdout``)."""
    started: list[tuple[list[str], dict]] = []

    class Finished:
        def __init__(self, cmd, **kwargs) -> None:
            started.append((cmd, kwargs))

        def wait(self) -> int:
            return 0

        def terminate(self) -> None:
            pass

    monkeypatch.setattr(pinned_sweep.shutil, "which", lambda _name: "/usr/bin/taskset")
    monkeypatch.setattr(pinned_sweep.subprocess, "Popen", Finished)
    return started


def _no_job_started(monkeypatch, argv: list[str]) -> list[object]:
    """Run main() on ``argv`` where taskset is there and a job's start is recorded, not made;
    returns the (empty, if none started) list of the jobs' starts after asserting exit 2."""
    started: list[object] = []
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(pinned_sweep.shutil, "which", lambda _name: "/usr/bin/taskset")
    monkeypatch.setattr(pinned_sweep.subprocess, "Popen", lambda *a, **k: started.append(a))
    _quiet_signals(monkeypatch)
    assert _exit_code() == 2
    return started


def test_a_machine_without_taskset_is_refused_before_any_job(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    argv = ["pinned_sweep.py", "--programs", "xla-v1/lstm_infer", "--solvers", "random"]
    argv += ["--budget", "1", "--out", str(tmp_path / "out")]
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setenv("PATH", str(tmp_path))  # no taskset on it
    _quiet_signals(monkeypatch)
    assert _exit_code() == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "taskset not found" in err[-1]
    assert not (tmp_path / "out").exists()


def test_a_job_that_cannot_start_gives_its_cores_back_and_fails_the_sweep(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """A job whose process could not start ended its thread: its cores never came back
    (the next job waited for them for ever) and the sweep said it succeeded."""

    def no_process(*_args, **_kwargs):
        raise FileNotFoundError("[Errno 2] No such file or directory: 'taskset'")

    argv = ["pinned_sweep.py", "--programs", "xla-v1/lstm_infer", "--solvers", "random"]
    argv += ["--seeds", "0", "1", "--budget", "1", "--out", str(tmp_path / "out")]
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(pinned_sweep.os, "sched_getaffinity", lambda _pid: {0})  # one core
    monkeypatch.setattr(pinned_sweep.subprocess, "Popen", no_process)
    _quiet_signals(monkeypatch)
    assert _exit_code() == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("could not start" in line for line in err)
    assert err[1].startswith("xla-v1/lstm_infer random seed 1:")


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--solvers", "nosuch"], "unknown solver"),
        (["--solvers", "es", "--option", "es:workers=two"], "es: option workers"),
        (["--solvers", "es", "--option", "es:nosuch=1"], "es: unknown option 'nosuch'"),
        (["--solvers", "random", "--seeds", "-1"], "a seed must be from 0"),
        (["--solvers", "random", "--budget", "-1"], "budget must be a finite number"),
        (["--solvers", "random", "--budget", "nan"], "budget must be a finite number"),
    ],
)
def test_a_sweep_no_job_could_run_is_refused_before_any_job(
    extra: list[str], needle: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    """Every job started and failed, one after the other."""
    argv = ["pinned_sweep.py", "--programs", "xla-v1/lstm_infer", "--out", str(tmp_path / "out")]
    argv += ["--budget", "1", *extra]  # a second --budget wins
    monkeypatch.setattr(sys, "argv", argv)
    _quiet_signals(monkeypatch)
    assert _exit_code() == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert needle in err[-1] and "Traceback" not in "".join(err)
    assert not (tmp_path / "out").exists()


def test_each_jobs_log_is_named_as_its_record(tmp_path: Path, monkeypatch) -> None:
    """Two programs whose names are alike once made file-safe (d/a.json, d-a.json) kept one
    log between them; a job's log is named as its record, which the sweep keeps unique."""
    from mallocgame.instance import save_instance
    from mallocgame.workloads.registry import load_workload

    for name in ("d/a.json", "d-a.json"):
        save_instance(load_workload("xla-v1/lstm_infer"), tmp_path / name)
    started = _finished_jobs(monkeypatch)
    monkeypatch.chdir(tmp_path)
    argv = ["pinned_sweep.py", "--programs", "d/a.json", "d-a.json", "--solvers", "drop"]
    monkeypatch.setattr(sys, "argv", [*argv, "--budget", "1", "--out", "out"])
    _quiet_signals(monkeypatch)
    assert _exit_code() == 0
    opened = [Path(kwargs["stdout"].name).name for _, kwargs in started]
    assert len(set(opened)) == 2 and all(name.endswith(".log") for name in opened)


@pytest.mark.parametrize("solver", ["random", "heuristic"])
def test_a_stale_record_of_a_job_or_of_its_baseline_is_refused_before_any_job(
    solver: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    """A stale record (here a file at a record's path that is another cell's) was found by
    each job's own bench speedups: the jobs failed one after the other, hours in. Each
    job's bench speedups runs the heuristic baseline too: its records are checked as well."""
    from mallocgame.bench.sweep import Job, job_path

    out = tmp_path / "out"
    out.mkdir()
    stale = Job("xla-v1/lstm_infer", solver, 0, 1.0)
    job_path(out, stale).write_text(json.dumps({"note": "another cell's"}))
    argv = ["pinned_sweep.py", "--programs", "xla-v1/lstm_infer", "--solvers", "random"]
    started = _no_job_started(monkeypatch, [*argv, "--budget", "1", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert f"is not the record of xla-v1/lstm_infer {solver} seed 0" in err[-1]
    assert not started and not (out / "logs").exists()


def test_a_stale_record_under_another_file_name_is_refused_before_any_job(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """A record of a job's cell under another name (renamed, or named as records were
    before) was not checked: each job's bench speedups found it, hours in."""
    from mallocgame.bench.sweep import Job, job_path, run_sweep

    out = tmp_path / "out"
    job = Job("xla-v1/lstm_infer", "random", 0, 1.0)
    run_sweep([job], out, workers=1)
    record = json.loads(job_path(out, job).read_text())
    job_path(out, job).unlink()
    (out / "renamed.json").write_text(json.dumps({**record, "instance_sha256": "0" * 64}))
    argv = ["pinned_sweep.py", "--programs", "xla-v1/lstm_infer", "--solvers", "random"]
    started = _no_job_started(monkeypatch, [*argv, "--budget", "1", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert "renamed.json was written for another instance of xla-v1/lstm_infer" in err[-1]
    assert not started and not (out / "logs").exists()


@pytest.mark.parametrize(
    "out, logs, needle",
    [
        ("afile", None, "--out afile: afile is a file"),
        ("afile/sub", "lg", "--out afile/sub: afile is a file"),
        ("out", "afile", "--logs afile: afile is a file"),
        ("out", "afile/sub", "--logs afile/sub: afile is a file"),
    ],
)
def test_a_file_given_as_the_records_or_logs_folder_is_refused_before_any_job(
    out: str, logs: str | None, needle: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    """A regular file as --out or --logs (or on their way) gave a traceback
    (NotADirectoryError, FileExistsError), or started jobs that each failed."""
    monkeypatch.chdir(tmp_path)
    Path("afile").write_text("x")
    argv = ["pinned_sweep.py", "--programs", "xla-v1/lstm_infer", "--solvers", "random"]
    argv += ["--budget", "1", "--out", out, *(["--logs", logs] if logs else [])]
    started = _no_job_started(monkeypatch, argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert needle in err[-1] and "not a folder" in err[-1]
    assert not started and sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_a_rerun_starts_no_finished_job_and_keeps_its_log(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """A rerun to go on reopened every job's log with 'w': a finished job's log (a muzero
    job's training progress) was wiped, and the job started again to find its record."""
    from mallocgame.bench.sweep import Job, job_path, run_sweep

    out = tmp_path / "out"
    run_sweep(
        [Job("xla-v1/lstm_infer", s, 0, 1.0) for s in ("random", "heuristic")], out, workers=1
    )
    run_sweep([Job("xla-v1/lstm_infer", "random", 1, 1.0)], out, workers=1)  # no baseline
    logs = out / "logs"
    logs.mkdir()
    finished = job_path(logs, Job("xla-v1/lstm_infer", "random", 0, 1.0)).with_suffix(".log")
    finished.write_text("the finished job's progress\n")
    started = _finished_jobs(monkeypatch)
    argv = ["pinned_sweep.py", "--programs", "xla-v1/lstm_infer", "--solvers", "random"]
    argv += ["--seeds", "0", "1", "2", "--budget", "1", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    _quiet_signals(monkeypatch)
    assert _exit_code() == 0
    # seed 0 is done; seed 1 has its record but not its baseline's; seed 2 has neither
    assert sorted(cmd[cmd.index("--seeds") + 1] for cmd, _ in started) == ["1", "2"]
    assert finished.read_text() == "the finished job's progress\n"
    assert "2 jobs on" in capsys.readouterr().out


def test_a_solver_option_that_is_a_list_runs_its_jobs(tmp_path: Path, monkeypatch) -> None:
    """best-of's solvers, a list, made the jobs unhashable: the sweep ended in a TypeError
    traceback where bench speedups runs the same jobs."""
    started = _finished_jobs(monkeypatch)
    argv = ["pinned_sweep.py", "--programs", "xla-v1/lstm_infer", "--solvers", "best-of"]
    argv += ["--budget", "1", "--out", str(tmp_path / "out")]
    argv += ["--option", "best-of:solvers=heuristic,random"]
    monkeypatch.setattr(sys, "argv", argv)
    _quiet_signals(monkeypatch)
    assert _exit_code() == 0
    assert len(started) == 1
    assert started[0][0][-2:] == ["--option", "best-of:solvers=heuristic,random"]
