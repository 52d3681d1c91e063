"""An equal-wall-clock comparison on a many-core machine: each sweep job pinned to its own cores.

``mallocgame bench speedups --workers N`` runs N jobs in one process pool with no
say over which cores each job uses, so a multi-threaded solver (``muzero``'s XLA,
``es`` with two workers) competes with its neighbours. This script runs every
(program, solver) cell as its own ``mallocgame bench speedups`` process under
``taskset``, on a fixed set of cores no other job uses: ``--cores`` per job (2: the
2-core machine the agent is sized for), and one core for single-threaded solvers
(``random``, ``heuristic``), which cannot use a second. Jobs start as cores free up.
Each job's ``bench speedups`` also runs its baseline, ``heuristic`` at the job's program,
seed and budget (a record of it is skipped as any other; a job of ``heuristic`` itself is
its own baseline). Before the first job starts, every job's and every baseline's record
already in ``--out`` (under the job's file name or another) is checked as ``bench
speedups`` checks it (``check_records``: another cell's, another instance's or other
settings' record is refused, and so are two records of one cell), and every ``*.json``
there read as its table reads them, so that a stale record stops the sweep at once rather
than failing jobs hours into it.
Records go to ``--out`` as in any sweep: a job whose record (and its baseline's) is
there already is not started, and its log is left as it is, so the table is
then ``mallocgame bench speedups --solvers ... --budget B --out OUT --per-program``
with the same ``--option`` values. ``SIGTERM`` or ``SIGINT`` (Ctrl-C) stops the sweep:
the running jobs are terminated (their records are not written) and no new one starts;
run the same command again to go on. While it runs, ``mallocgame bench speedups ...
--existing`` tabulates the programs it has finished without running anything.

Usage::

    python benchmarks/pinned_sweep.py --programs xla-v1/gru_infer xla-v1/lstm_infer \\
        --solvers muzero es random --budget 120 --out results/muzero-120s --option es:workers=2

Linux only (``taskset``, ``os.sched_getaffinity``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

from mallocgame.bench.sweep import check_jobs, check_records, job_cell, job_path, sweep_jobs
from mallocgame.errors import MallocGameError

SINGLE_THREADED = ("random", "heuristic", "drop", "greedy")
BASELINE = "heuristic"
"""The baseline each job's ``bench speedups`` runs beside its solver (its default)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", nargs="+", required=True)
    parser.add_argument("--solvers", nargs="+", required=True)
    parser.add_argument("--budget", type=float, required=True, help="wall-clock seconds per job")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one job per seed")
    parser.add_argument("--out", required=True)
    parser.add_argument("--cores", type=int, default=2, help="cores per multi-threaded job")
    parser.add_argument("--option", action="append", default=[], metavar="SOLVER:KEY=VALUE")
    parser.add_argument("--logs", default=None, help="one log per job here (default: OUT/logs)")
    args = parser.parse_args()

    free = sorted(os.sched_getaffinity(0))
    if args.cores < 1:
        parser.error("--cores must be at least 1")
    logs = Path(args.logs or Path(args.out) / "logs")
    for flag, folder in (("--out", Path(args.out)), ("--logs", logs)):
        # a file where a folder goes: refused here, not a traceback or every job failing
        for path in (folder, *folder.parents):
            if path.exists():
                if not path.is_dir():
                    parser.error(f"{flag} {folder}: {path} is a file, not a folder")
                break
    for item in args.option:  # a setting no job would take is refused, not dropped
        solver, colon, setting = item.partition(":")
        if not colon or solver not in args.solvers or "=" not in setting:
            parser.error(f"--option {item!r} is not SOLVER:KEY=VALUE for one of --solvers")
    options: dict[str, dict[str, str]] = {}
    for item in args.option:
        solver, _, setting = item.partition(":")
        key, _, value = setting.partition("=")
        key, value = key.strip(), value.strip()
        given = options.setdefault(solver, {})
        if given.get(key, value) != value:  # each job's bench speedups would refuse it
            parser.error(f"--option {solver}:{key} given twice, as {given[key]!r} and {value!r}")
        given[key] = value
    # A program, solver, option, seed or budget that no job could run with is refused here,
    # as bench speedups refuses it, before the first job, not once per job after hours.
    # Seed, then program, then solver (sweep_jobs' order): a (program, seed) cell's solvers
    # start side by side, so a sweep cut short leaves whole cells to compare rather than
    # one solver's column; a job named twice runs once.
    try:
        checked = sweep_jobs(
            args.programs, args.solvers, args.seeds, seconds=args.budget, options=options
        )
        check_jobs(checked)
        # each job's bench speedups runs its baseline too, at its defaults: the options
        # passed to a job are its own solver's only
        others = [s for s in dict.fromkeys(args.solvers) if s != BASELINE]
        baselines = (
            sweep_jobs(args.programs, [BASELINE], args.seeds, seconds=args.budget) if others else []
        )
        # a job's options need not hash (best-of's solvers: a list): one job a cell
        every = list({job_cell(job): job for job in [*checked, *baselines]}.values())
        check_jobs(every)
        # a stale record fails here, not a job hours in; so does a file that each job's
        # bench speedups cannot read (check_records, which reads the folder as it does;
        # this returns the jobs' records found)
        recorded = check_records(every, Path(args.out))
    except MallocGameError as exc:
        parser.error(str(exc))
    if shutil.which("taskset") is None:  # every job would fail to start
        parser.error("taskset not found: install util-linux (Linux only)")
    cores_per_job = min(args.cores, len(free))  # never wait for more cores than there are
    try:
        logs.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # (not writable, say)
        parser.error(f"--logs {logs}: cannot make the folder ({exc.strerror or exc})")
    # a job whose record, and its baseline's, are there has nothing to run: not started,
    # and its log (a finished job's progress) not opened again
    baseline_of = {(job.program, job.seed): job for job in baselines}
    pending = [
        job
        for job in checked
        if job_cell(job) not in recorded
        or (
            (job.program, job.seed) in baseline_of
            and job_cell(baseline_of[job.program, job.seed]) not in recorded
        )
    ]
    jobs = [(job.program, job.solver, job.seed) for job in pending]
    # each job's log is named as its record (unique, within the file-name limit)
    log_names = {
        (job.program, job.solver, job.seed): job_path(logs, job).with_suffix(".log").name
        for job in checked
    }
    lock = threading.Condition()
    failures: list[str] = []
    running: set[subprocess.Popen] = set()
    stopped: list[int] = []  # the signal that stopped the sweep

    def stop(signum: int, _frame: object) -> None:
        with lock:
            stopped.append(signum)
            for proc in running:
                proc.terminate()
            lock.notify_all()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(
        f"{len(jobs)} jobs on {len(free)} cores, {cores_per_job} per multi-threaded job"
        f" ({len(checked) - len(jobs)} done already)",
        flush=True,
    )

    def run(program: str, solver: str, seed: int, cores: list[int]) -> None:
        options = [
            arg
            for item in args.option
            if item.startswith(f"{solver}:")
            for arg in ("--option", item)
        ]
        cmd = [
            "taskset",
            "-c",
            ",".join(map(str, cores)),
            sys.executable,
            "-m",
            "mallocgame.cli",
            "bench",
            "speedups",
            "--programs",
            program,
            "--solvers",
            solver,
            "--budget",
            repr(args.budget),  # exactly the sweep's: the records' cells are the table's
            "--seeds",
            str(seed),
            "--workers",
            "1",
            "--out",
            args.out,
            *options,
        ]
        name = log_names[(program, solver, seed)]
        proc: subprocess.Popen | None = None
        with lock:
            if stopped:
                return
            try:
                with open(logs / name, "w") as log:
                    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            except Exception as exc:  # the job's cores go back and the sweep says it failed
                status, failed = f"could not start: {exc}", True
            else:
                running.add(proc)
        if proc is not None:
            rc = proc.wait()
            status, failed = f"exit {rc}", rc != 0
            if failed:
                status += f", see {logs / name}"
        with lock:
            running.discard(proc)
            free.extend(cores)
            free.sort()
            if failed:
                failures.append(f"{program} {solver} seed {seed}: {status}")
            print(f"done {program} {solver} seed {seed} ({status})", flush=True)
            lock.notify_all()

    threads = []
    for program, solver, seed in jobs:
        need = 1 if solver in SINGLE_THREADED else cores_per_job
        with lock:
            lock.wait_for(lambda n=need: len(free) >= n or bool(stopped))
            if stopped:
                break
            cores, free[:] = free[:need], free[need:]
        thread = threading.Thread(target=run, args=(program, solver, seed, cores))
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    if stopped:
        print(
            f"stopped by signal {stopped[0]}: running jobs terminated, the rest not started",
            file=sys.stderr,
        )
        sys.exit(128 + stopped[0])
    for line in failures:
        print(line, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
