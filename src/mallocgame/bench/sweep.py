"""Resumable sweeps: one result file per (program, solver, seed, budget[, options]).

A job solves one program with one solver, checks the answer, simulates its latency
and writes a small JSON record atomically. A job whose cell has a record is skipped
(the record under any file name: the job's, or one renamed, or named as records were
before), so a killed sweep resumes where it stopped; each record keeps its solver's full
settings (:meth:`~mallocgame.solvers.base.Solver.settings`, defaults filled in), and
a record whose settings differ from the job's (a default changed since it was
written) stops the sweep with :class:`~mallocgame.errors.StaleRecordError` before
anything runs, rather than being taken for the job's (a record without settings,
from before they were kept, counts as done); so does a file at a job's record path that
is not that job's record (another cell's, or not a record at all), and so do two
records of one job's cell, as the tables refuse them. Jobs run in local processes by
default, on a Ray cluster when asked (``ray_address``; needs ``pip install ray``). Every job's
solver name and options, and its program, are checked (:func:`check_jobs`) before any
job runs, so a typo ends the sweep with one :class:`~mallocgame.errors.SolverError` (or
:class:`~mallocgame.errors.InputFileError`, a program's) and no work done.

A record is replayable: it keeps the instance's sha256 and the solution itself, so
``mallocgame check PROGRAM RECORD.json`` re-checks any row of a table made from it;
:func:`job_records`, which the tables read, re-checks every record it returns and
recomputes its numbers from its solution (:mod:`mallocgame.bench.recheck`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mallocgame.errors import (
    FormatError,
    InputFileError,
    MallocGameError,
    StaleRecordError,
    WorkerError,
    one_line,
)
from mallocgame.fileio import is_finite_number, is_text, read_json, write_json
from mallocgame.solution import RECORD_FORMAT, RECORD_VERSION, check_record_version
from mallocgame.workers import check_ray_address, process_pool, start_local_ray

if TYPE_CHECKING:
    from mallocgame.instance import Instance

__all__ = [
    "Job",
    "job_options",
    "sweep_jobs",
    "job_path",
    "job_cell",
    "check_jobs",
    "check_records",
    "run_sweep",
    "record_files",
    "load_records",
    "job_records",
    "settings_with_defaults",
    "setting_differences",
    "identity_cells",
]

_BOUNDS: dict[str, float] = {}  # LP upper bound by instance hash: once per program per process


@dataclass(frozen=True)
class Job:
    """One (program, solver, seed, budget) cell of a sweep."""

    program: str  # a bundled workload name or an instance file
    solver: str
    seed: int = 0
    seconds: float | None = None  # wall-clock budget
    work: int | None = None  # work budget
    options: tuple[tuple[str, Any], ...] = ()  # solver settings, (key, value) pairs sorted by key

    @property
    def budget_tag(self) -> str:
        """The budget in a record's file name: ``t60``, ``w40``, ``t60-w40`` (``default``:
        none). Seconds are written as ``{:g}`` gives them where that is exact (every kept
        sweep's), else in full (``t0.1000001``, not ``t0.1``): two budgets, two names."""
        parts = []
        if self.seconds is not None:
            short = f"{self.seconds:g}"
            if float(short) != self.seconds:  # the shortest text of the float itself
                short = repr(float(self.seconds)).removesuffix(".0")
            parts.append(f"t{short}")
        if self.work is not None:
            parts.append(f"w{self.work}")
        return "-".join(parts) or "default"

    @property
    def options_dict(self) -> dict[str, Any]:
        return dict(self.options)


def job_options(solver: str, options: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """``options`` of ``solver`` checked and typed (``{"workers": "2"}`` as from the
    command line gives ``(("workers", 2),)``), as a job keeps them: sorted pairs."""
    from mallocgame.options import typed_options
    from mallocgame.solvers import get_solver

    config = get_solver(solver).config(options)
    return tuple(sorted(typed_options(config, options).items()))


def sweep_jobs(
    programs: Sequence[str],
    solvers: Sequence[str],
    seeds: Sequence[int],
    *,
    seconds: float | None = None,
    work: int | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Job]:
    """Every (program, solver, seed) job with one budget; ``options`` by solver name.
    Jobs are ordered by seed, then program, then solver, so a sweep cut short leaves
    whole (program, seed) cells; a program, solver or seed named twice makes its jobs once. A bad
    solver name or option raises
    :class:`~mallocgame.errors.SolverError` before any job exists, and a seed that is not
    a whole number >= 0, a work budget below 1 or a wall-clock budget
    :func:`~mallocgame.bench.inputs.budget_seconds` refuses raises
    :class:`~mallocgame.bench.inputs.StudyInputError`."""
    from mallocgame.bench.inputs import budget_seconds, work_budget
    from mallocgame.bench.inputs import seeds as checked_seeds

    seeds = list(dict.fromkeys(checked_seeds(seeds)))  # a cell named twice runs once
    programs, solvers = list(dict.fromkeys(programs)), list(dict.fromkeys(solvers))
    if seconds is not None:
        seconds = budget_seconds(seconds)
    if work is not None:
        work = work_budget(work)
    typed = {solver: job_options(solver, (options or {}).get(solver, {})) for solver in solvers}
    return [
        Job(program, solver, seed, seconds, work, typed[solver])
        for seed in seeds
        for program in programs
        for solver in solvers
    ]


NAME_MAX = 255
"""The longest file name, in bytes, that Linux and macOS file systems take."""


def _program_stem(program: str, room: int = NAME_MAX) -> str:
    """A program's part of its records' file names: the program made file-safe (each run
    of characters other than letters, digits, ``_``, ``.`` and ``-`` made one ``-``, none
    at either end), as every record has been named, for a bundled workload
    (``xla-v1/gru_infer``: ``xla-v1-gru_infer``) or a path that is file-safe already. Any
    other path gets ``-`` and 8 hex digits of its sha256 too: two of them can be made the
    same (``d/a.json`` and ``d-a.json``). A stem longer than ``room`` (what is left of
    :data:`NAME_MAX` beside the rest of the name: a file system refuses it) is cut to
    its first ``room - 9`` characters, then ``-`` and that hash."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", program).strip("-")  # ASCII: a byte a character
    digest = hashlib.sha256(program.encode()).hexdigest()[:8]
    if stem != program and program not in _bundled_names():
        stem = f"{stem}-{digest}"
    if len(stem) > room:
        stem = f"{stem[: max(room - 9, 0)]}-{digest}"
    return stem


@functools.cache
def _bundled_names() -> frozenset[str]:
    from mallocgame.workloads.registry import workload_names

    return frozenset(workload_names())


def job_path(out_dir: Path, job: Job) -> Path:
    """``out_dir/PROGRAM.SOLVER.sSEED.BUDGET.json``, PROGRAM the program made file-safe
    (:func:`_program_stem`: a path that is not file-safe as it is, and is no bundled name,
    with a hash of it as well; one that would make the name longer than :data:`NAME_MAX`
    cut short, with that hash); a job with solver options gets ``.oHASH`` before
    ``.json`` (8 hex digits of their JSON), so runs with other settings never skip it."""
    tag = ""
    if job.options:
        digest = hashlib.sha256(json.dumps(job.options_dict, sort_keys=True).encode()).hexdigest()
        tag = f".o{digest[:8]}"
    rest = f".{job.solver}.s{job.seed}.{job.budget_tag}{tag}.json"
    return out_dir / f"{_program_stem(job.program, NAME_MAX - len(rest.encode()))}{rest}"


def check_jobs(jobs: Iterable[Job]) -> None:
    """Raise :class:`~mallocgame.errors.SolverError` for any job whose solver is
    unknown or does not take its options (under the job's budget: ``check_options``),
    :class:`~mallocgame.errors.InputFileError` for one whose program is neither a bundled
    name nor an existing path, and :class:`~mallocgame.bench.inputs.StudyInputError` for
    two jobs whose records would share a file name (:func:`job_path`); each (solver,
    options, budget) and each program is checked once."""
    from mallocgame.bench.inputs import StudyInputError
    from mallocgame.solvers import get_solver
    from mallocgame.workloads.registry import check_workload

    jobs = list(jobs)
    for program in dict.fromkeys(job.program for job in jobs):
        if not is_text(program):  # (its record names it, in JSON: UTF-8 text)
            raise InputFileError(
                f"{program!a}: a program's path in a sweep must be UTF-8 text; rename the file"
            )
        check_workload(program)
    names: dict[str, Job] = {}
    for job in jobs:
        name = job_path(Path(), job).name
        other = names.setdefault(name, job)
        if other != job:
            raise StudyInputError(
                f"{other.program} {other.solver} and {job.program} {job.solver} (seed "
                f"{job.seed}, {job.budget_tag}) would share the record file {name}; "
                "sweep them apart or rename one program"
            )
    checked: list[tuple[Any, ...]] = []  # (option values need not hash)
    for job in jobs:
        if (job.solver, job.options, job.seconds, job.work) not in checked:
            solver = get_solver(job.solver)
            solver.check_options(job.options_dict, seconds=job.seconds, work=job.work)
            checked.append((job.solver, job.options, job.seconds, job.work))


def job_cell(job: Job) -> tuple[Any, ...]:
    """What a record of ``job`` states about itself: program, solver, seed, budget, options."""
    options = json.dumps(job.options_dict, sort_keys=True, default=str)
    return (job.program, job.solver, job.seed, job.seconds, job.work, options)


def _record_cell(doc: Any) -> tuple[Any, ...] | None:
    """:func:`job_cell` as a record document states it (``None``: not a record)."""
    if not isinstance(doc, dict) or doc.get("format") != RECORD_FORMAT:
        return None
    budget = doc.get("budget")
    options = doc.get("options", {})
    if not isinstance(budget, dict) or not isinstance(options, dict):
        return None
    program, solver, seed = doc.get("program"), doc.get("solver"), doc.get("seed")
    seconds, work = budget.get("seconds"), budget.get("work")
    if not (isinstance(program, str) and isinstance(solver, str) and isinstance(seed, int)):
        return None  # an edited or foreign document states no cell (and could not hash)
    if not all(v is None or isinstance(v, (int, float)) for v in (seconds, work)):
        return None
    options_json = json.dumps(options, sort_keys=True, default=str)
    return (program, solver, seed, seconds, work, options_json)


def _not_its_record(path: Path, job: Job) -> StaleRecordError:
    return StaleRecordError(
        f"{path} is not the record of {job.program} {job.solver} seed {job.seed} "
        f"{job.budget_tag} (another cell's, or not a record); remove it or use another --out"
    )


def check_records(
    jobs: Iterable[Job], out_dir: Path
) -> dict[tuple[Any, ...], tuple[Path, dict[str, Any]]]:
    """Raise :class:`~mallocgame.errors.StaleRecordError` if a file stands at a job's
    record path in ``out_dir`` that is not a record of that job (program, solver, seed,
    budget and options), if two records in ``out_dir`` state one job's cell, or if a
    job's record (the one at its path, else one of its cell under another file name: a
    record renamed, or named as records were before) was written for another instance
    than the program is now (its ``instance_sha256``: the program's file or the bundled
    workload changed since; each program with a record is loaded once), or with other
    settings than the job's solver uses now. A setting the record lacks (one added to the
    solver after it was written) counts as the setting's default: a new setting's default
    keeps the solver's old behaviour (:func:`settings_with_defaults`; a ``best-of``
    candidate the record lacks is no setting, and its record is refused). Every
    ``*.json`` in ``out_dir`` is read as :func:`record_files` reads it (one that is not
    JSON raises ``InputFileError``, a record of another version or with a malformed
    ``wall_s`` ``FormatError``).
    Returns each job's record with its file, by the job's :func:`job_cell` (a job with
    none is not there)."""
    return _checked_records(list(jobs), out_dir)


def _checked_records(
    jobs: Sequence[Job], out_dir: Path
) -> dict[tuple[Any, ...], tuple[Path, dict[str, Any]]]:
    """:func:`check_records`; returns each job's record with its file by the job's
    :func:`job_cell` (a job with none is not there)."""
    from mallocgame.solvers import get_solver
    from mallocgame.workloads.registry import load_workload

    current: dict[tuple[str, str], dict[str, Any]] = {}
    defaults: dict[str, dict[str, Any]] = {}
    instances: dict[str, str] = {}  # program -> its instance's sha256 now
    by_cell: dict[tuple[Any, ...], list[tuple[Path, dict[str, Any]]]] = {}
    files = dict(record_files(out_dir)) if out_dir.is_dir() else {}
    for path, doc in files.items():
        if (stated := _record_cell(doc)) is not None:  # (a document of no cell: no job's)
            by_cell.setdefault(stated, []).append((path, doc))
    at_path: dict[tuple[Any, ...], tuple[Path, dict[str, Any]]] = {}
    for job in jobs:
        path = job_path(out_dir, job)
        if path in files:
            doc = files[path]
        elif path.exists():  # a file that is no record (record_files passed it over)
            doc = read_json(path)
        else:
            continue
        if _record_cell(doc) != job_cell(job):
            raise _not_its_record(path, job)
        at_path[job_cell(job)] = (path, doc)
    found: dict[tuple[Any, ...], tuple[Path, dict[str, Any]]] = {}
    for job in jobs:
        cell = job_cell(job)
        records = by_cell.get(cell, [])
        if len(records) > 1:
            raise StaleRecordError(
                f"{records[0][0]} and {records[1][0]} are records of the same cell; remove one"
            )
        if cell not in at_path and not records:
            continue
        path, doc = found[cell] = at_path.get(cell) or records[0]  # renamed, or an old name
        if job.program not in instances:
            instances[job.program] = load_workload(job.program).sha256
        if doc.get("instance_sha256") != instances[job.program]:
            raise StaleRecordError(
                f"{path} was written for another instance of {job.program} than this run's "
                f"(instance_sha256 {str(doc.get('instance_sha256'))[:12]} -> "
                f"{instances[job.program][:12]}); remove it or use another --out"
            )
        stored = doc.get("settings")
        if stored is None:
            continue
        key = (job.solver, json.dumps(job.options_dict, sort_keys=True, default=str))
        if key not in current:
            current[key] = get_solver(job.solver).settings(job.options_dict)
        if job.solver not in defaults:
            defaults[job.solver] = get_solver(job.solver).settings({})
        stored = settings_with_defaults(stored, defaults[job.solver], current[key])
        if stored != current[key]:
            changed = setting_differences(stored, current[key])
            raise StaleRecordError(
                f"{path} was written with other {job.solver} settings than this run's "
                f"({'; '.join(changed[:3])}); remove it or use another --out"
            )
    return found


def settings_with_defaults(stored: Any, defaults: Any, current: Any = None) -> Any:
    """``stored`` settings (a JSON object) with every setting it lacks filled in, nested
    objects included: each key of ``defaults`` (the solver's settings with no options)
    that ``stored`` lacks, with its value in ``current`` (this run's settings; the
    ``defaults`` when not given). A key of ``current`` alone is never made up: under
    ``best-of``'s ``solvers`` the keys are the candidates' names, and a candidate the
    record does not have is another candidate list, not a new setting; below a key that
    ``defaults`` lacks (a candidate other than the default ones) ``current``'s keys are
    the settings."""
    if current is None:
        current = defaults
    if not all(isinstance(x, dict) for x in (stored, defaults, current)):
        return stored
    filled = {key: current[key] for key in defaults if key not in stored and key in current}
    for key, value in stored.items():
        below = defaults[key] if key in defaults else current.get(key)
        filled[key] = settings_with_defaults(value, below, current.get(key))
    return filled


def identity_cells(cells: Sequence[str]) -> tuple[str, str] | None:
    """A CSV row's ``instance_sha256`` and ``settings`` cells (a study's record of what
    its cell ran on): ``None`` for none, or both empty (a row written before they were
    kept); :class:`ValueError` for a hash that is no sha256 in hex or settings that are
    not a JSON object."""
    if not cells or list(cells) == ["", ""]:
        return None
    sha, settings = cells
    if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        raise ValueError(f"instance_sha256 {sha[:80]!r} is not a sha256 in hex")
    try:
        parsed = json.loads(settings)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ValueError(f"settings {settings[:80]!r} are not a JSON object")
    return sha, settings


def setting_differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """``"key: old -> new"`` for every leaf that differs between two JSON objects."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new)):
            out += setting_differences(
                old.get(key, "(unset)"), new.get(key, "(unset)"), f"{prefix}{key}."
            )
        return out
    return [] if old == new else [f"{prefix.rstrip('.')}: {old!r} -> {new!r}"]


def warm_game_kernels(inst: Instance) -> None:
    """:func:`mallocgame.game.state.warm_game_kernels`: the game's compiled kernels loaded
    in this process, once (the game is imported only when called). :func:`run_job` calls
    this before its solver's clock starts, so that a job's result does not depend on which
    process runs it first."""
    from mallocgame.game.state import warm_game_kernels as warm

    warm(inst)


def run_job(job: Job, out_dir: str) -> dict[str, Any]:
    """Solve, check, simulate one job and write its record; returns the record. The
    game's kernels are loaded first (:func:`warm_game_kernels`), outside the budget."""
    from mallocgame.check import check_solution
    from mallocgame.simulate import baseline_latency, simulate
    from mallocgame.solvers import SolveRequest, get_solver
    from mallocgame.solvers.bound import upper_bound
    from mallocgame.workloads.registry import load_workload

    inst = load_workload(job.program)
    solver = get_solver(job.solver)
    warm_game_kernels(inst)
    start = time.perf_counter()
    solution = solver.solve(
        inst,
        SolveRequest(seed=job.seed, seconds=job.seconds, work=job.work, options=job.options_dict),
    )
    wall = time.perf_counter() - start
    report = check_solution(inst, solution)
    if inst.sha256 not in _BOUNDS:
        _BOUNDS[inst.sha256] = upper_bound(inst)
    record: dict[str, Any] = {
        "format": RECORD_FORMAT,
        "version": RECORD_VERSION,
        "program": job.program,
        "instance_sha256": inst.sha256,
        "solver": job.solver,
        "seed": job.seed,
        "budget": {"seconds": job.seconds, "work": job.work},
        "options": job.options_dict,
        "settings": solver.settings(job.options_dict),
        "valid": report.ok,
        "failures": report.summary(),
        "reward_s": solution.reward_s,
        "normalized_reward": solution.normalized_reward,
        "bound_s": solution.bound_s,
        "upper_bound_s": _BOUNDS[inst.sha256],
        "work": dict(solution.work),
        "recent_mean": solution.info.get("recent_mean"),  # learning agents: their last games' mean
        "demonstrations": solution.info.get(
            "demonstrations"
        ),  # muzero: its demonstrations' rewards
        "wall_s": wall,
        "baseline_latency_s": baseline_latency(inst),
        "latency_s": simulate(inst, solution).latency_s if report.ok else None,
        "buffers": inst.num_buffers,
        "solution": solution.to_dict(),
    }
    write_json(job_path(Path(out_dir), job), record, indent=1)
    return record


def _check_ray(address: str) -> None:
    """Refuse, before any work, a Ray address the sweep cannot use: Ray not installed, or
    a ``HOST:PORT`` that is malformed or where nothing answers (``local`` and ``auto``
    are taken as they are)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise MallocGameError("--ray needs Ray: pip install ray") from None
    if address not in ("local", "auto"):  # one line now, not minutes of waiting
        check_ray_address(address)


def _ray_map(
    jobs: list[Job], out_dir: Path, address: str, workers: int
) -> Iterable[dict[str, Any]]:
    """Each job's record as it is done, the jobs run on the Ray cluster ``address``
    (``local``: one started in this process by :func:`start_local_ray`, with ``workers``
    CPUs, and shut down after the jobs, as muzero's ``--ray local`` starts one)."""
    import ray

    started = False
    try:
        if address == "local":
            if not ray.is_initialized():
                start_local_ray(workers)
                started = True
        else:
            ray.init(address=address, ignore_reinit_error=True)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise WorkerError(f"ray {address}: cannot join the cluster ({one_line(exc)})") from None
    try:
        remote = ray.remote(run_job)
        pending = [remote.remote(job, str(out_dir)) for job in jobs]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            try:
                yield ray.get(done[0])
            except ray.exceptions.RayTaskError as exc:  # the job's error, not the worker's trace
                cause = exc.cause if isinstance(exc.cause, BaseException) else exc
                if isinstance(cause, MallocGameError):
                    raise cause.with_traceback(None) from None
                raise WorkerError(f"a sweep job failed on Ray: {one_line(cause)}") from None
    finally:
        if started:
            ray.shutdown()


def run_sweep(
    jobs: Iterable[Job],
    out_dir: Path,
    *,
    workers: int | None = None,
    ray_address: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[int, int]:
    """Run every job whose cell has no record in ``out_dir`` (under any file name: one at
    its :func:`job_path`, or one renamed, or named as records were before); returns (run,
    skipped).

    ``workers`` local processes (default: the number of cores; 1 runs in-process), or
    the Ray cluster at ``ray_address``: ``HOST:PORT``, ``auto`` (the running cluster) or
    ``local`` (one started here with ``workers`` CPUs, shut down after the jobs); an
    address the sweep cannot use raises before anything is written.
    Every job is checked with :func:`check_jobs` first (a bad solver name or option
    raises before anything is run or written), then its record, if there is one, with
    :func:`check_records` (a record written under other settings raises, and so do two
    records of one cell), which reads every ``*.json`` in ``out_dir`` as
    :func:`record_files` reads them for the table (one that is not JSON raises
    ``InputFileError``, a record of another version or with a malformed ``wall_s``
    ``FormatError``); and the program of
    every job to run is read (a file that is no instance raises as
    :func:`~mallocgame.workloads.registry.load_workload` does) before ``out_dir`` is made.
    """
    from mallocgame.workloads.registry import load_workload

    jobs = list(jobs)
    check_jobs(jobs)
    done_cells = _checked_records(jobs, out_dir)  # reads what the table reads after the jobs
    if ray_address:
        _check_ray(ray_address)
    todo = [job for job in jobs if job_cell(job) not in done_cells]
    for program in dict.fromkeys(job.program for job in todo):
        load_workload(program)  # a malformed file: refused before the folder is made
    out_dir.mkdir(parents=True, exist_ok=True)
    skipped = len(jobs) - len(todo)
    say = progress or (lambda _msg: None)
    say(f"{len(todo)} jobs to run, {skipped} already done, results in {out_dir}")
    workers = workers or os.cpu_count() or 1
    done = 0

    def note(record: dict[str, Any]) -> None:
        nonlocal done
        done += 1
        latency = record["latency_s"]
        say(
            f"[{done}/{len(todo)}] {record['program']} {record['solver']} s{record['seed']}: "
            f"normalized reward {record['normalized_reward']:.4f}"
            + (f", latency {latency * 1e3:.4f} ms" if latency else ", INVALID")
        )

    if ray_address and todo:  # (nothing to run: no cluster to join or start)
        for record in _ray_map(todo, out_dir, ray_address, workers):
            note(record)
    elif ray_address or workers == 1 or len(todo) <= 1:
        for job in todo:
            note(run_job(job, str(out_dir)))
    else:
        # forkserver/spawn, never fork; the workers end if this process is killed.
        pool = process_pool(min(workers, len(todo)))  # each worker starts at once
        futures = [pool.submit(run_job, job, str(out_dir)) for job in todo]
        try:
            for future in as_completed(futures):
                note(future.result())
        except BrokenProcessPool as exc:
            pool.terminate()
            raise WorkerError("a sweep worker process ended before finishing its job") from exc
        except BaseException:
            pool.terminate()  # Ctrl-C or an error: the jobs in flight are rerun by the next sweep
            raise
        pool.shutdown(wait=True)
    return len(todo), skipped


def record_files(out_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every result record in ``out_dir`` with its file, in file-name order (other
    JSON files are skipped; a file that is not JSON raises ``InputFileError``; a record of
    another version, or whose ``wall_s``, which no re-check recomputes, is neither null nor
    a finite number of seconds at least 0, ``FormatError`` naming the file)."""
    records = []
    for path in sorted(out_dir.glob("*.json")):
        doc = read_json(path)
        if isinstance(doc, dict) and doc.get("format") == RECORD_FORMAT:
            try:
                check_record_version(doc)
            except FormatError as exc:
                raise FormatError(f"{path}: {exc}") from None
            wall = doc.get("wall_s")
            if wall is not None and not (is_finite_number(wall) and wall >= 0):
                raise FormatError(
                    f"{path}: a sweep record whose wall_s {repr(wall)[:80]} is not a number "
                    "of seconds at least 0"
                )
            records.append((path, doc))
    return records


def load_records(out_dir: Path) -> list[dict[str, Any]]:
    """Every result record in ``out_dir``."""
    return [doc for _, doc in record_files(out_dir)]


def job_records(out_dir: Path, jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """The records in ``out_dir`` of exactly these jobs (program, solver, seed, budget
    and options alike), in file-name order, each re-checked: its numbers recomputed
    from its solution, and invalid (one line in ``failures`` naming its file and why)
    where that solution fails the check (:class:`~mallocgame.bench.recheck.Rechecker`).
    Raises :class:`~mallocgame.errors.StaleRecordError` where two records state the same
    cell, or where a job's record path holds a file that is not its record (a table is
    never made over fewer cells than the records present say)."""
    from mallocgame.bench.recheck import Rechecker

    wanted = {job_cell(job): job for job in jobs}
    found: dict[tuple[Any, ...], tuple[Path, dict[str, Any]]] = {}
    for path, doc in record_files(out_dir):
        cell = _record_cell(doc)
        if cell not in wanted:
            continue
        if cell in found:
            raise StaleRecordError(
                f"{found[cell][0]} and {path} are records of the same cell; remove one"
            )
        found[cell] = (path, doc)
    for cell, job in wanted.items():
        path = job_path(out_dir, job)
        if cell in found or not path.exists():
            continue
        doc = read_json(path)  # written since the folder was read (a sweep beside this one)
        if _record_cell(doc) != cell:
            raise _not_its_record(path, job)
        found[cell] = (path, doc)
    rechecker = Rechecker()
    return [rechecker.record(path, doc) for path, doc in sorted(found.values(), key=_by_path)]


def _by_path(item: tuple[Path, dict[str, Any]]) -> Path:
    return item[0]
