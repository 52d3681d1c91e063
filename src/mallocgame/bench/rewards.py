"""Rewards against wall-clock time (the paper's Table 2 and Figure 5).

Each solver runs on each program with the same wall-clock budget; its callback's
reports (each new best by the solver's own objective,
:class:`~mallocgame.solvers.base.Improvement`) give a step curve of the normalized reward
of the answer it held against time. The curves go to a
CSV (one row per improvement, :func:`write_rewards_csv`) and a PNG (one panel per
program, :func:`mallocgame.curves.plot_curves`). The CSV is also the sweep's record:
:func:`run_reward_curves` reads it back (:func:`read_records`), so a run that stopped
goes on with the (program, solver, seed) cells it lacks; a run holds ``OUT.lock`` beside
it meanwhile, so that a second run on the same CSV is refused, not interleaved (each
rewrites the CSV it read, and would drop the other's new cells). Each row keeps what identifies
its cell's input: the program's ``instance_sha256`` and the solver's settings
(:meth:`~mallocgame.solvers.base.Solver.settings`, defaults filled in); a cell of another
instance (the program's file or the bundled workload changed since) or of other
settings (a default changed since) is refused, not reused
(:class:`~mallocgame.errors.StaleRecordError`), a setting it lacks counting as its
default, as in a sweep's records. A CSV written before rows kept them
(:data:`CSV_HEADER_V1`, 7 columns, as the published ones under ``docs/results/``) is
read and its cells reused as they stand, and written back, when a cell is added, with
the two cells empty.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mallocgame.bench.inputs import budget_seconds, finite
from mallocgame.bench.inputs import seed as checked_seed
from mallocgame.bench.sweep import (
    identity_cells,
    setting_differences,
    settings_with_defaults,
)
from mallocgame.check import check_solution
from mallocgame.curves import (
    CSV_HEADER,
    CurvePoint,
    csv_row,
    work_text,
)
from mallocgame.errors import FormatError, InputFileError, SolverError, StaleRecordError
from mallocgame.fileio import (
    check_writable,
    first_line,
    is_text,
    only_run,
    output_beside,
    read_csv_rows,
    write_csv_atomic,
)
from mallocgame.options import key_values
from mallocgame.solvers import Improvement, SolveRequest, get_solver
from mallocgame.workloads.registry import check_workload, load_workload

__all__ = [
    "CSV_HEADER_V1",
    "REWARDS_HEADER",
    "Identity",
    "solver_spec",
    "spec_settings",
    "stale_settings",
    "reward_curve",
    "read_csv",
    "read_records",
    "write_rewards_csv",
    "check_programs",
    "run_reward_curves",
    "final_table",
]

CSV_HEADER_V1 = list(CSV_HEADER)
"""The columns of a CSV written before rows kept their cell's input (still read), and of
:func:`mallocgame.curves.write_csv`'s."""

REWARDS_HEADER = [*CSV_HEADER_V1, "instance_sha256", "settings"]
"""The columns :func:`write_rewards_csv` writes."""

Cell = tuple[str, str, int]
"""A (program, solver spec, seed) cell of the study."""


@dataclass(frozen=True)
class Identity:
    """What a cell's rows keep of its input: the program's instance hash and the solver's
    settings as JSON with sorted keys."""

    instance_sha256: str
    settings: str


def solver_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``"NAME"`` or ``"NAME[KEY=VALUE;KEY=VALUE]"`` → the solver's name and its options
    (strings, typed by the solver's ``Config``), so that one solver can run in one sweep
    under several settings, each its own curve. A key given twice with the same text is
    one setting. Raises :class:`~mallocgame.errors.SolverError` for a malformed spec, a key
    given twice with two texts, an unknown solver or a bad setting."""
    name, bracket, rest = spec.partition("[")
    options: dict[str, str] = {}
    if bracket:
        if not rest.endswith("]") or not rest[:-1].strip():
            raise SolverError(f"solver spec {spec!r}: expected NAME[KEY=VALUE;KEY=VALUE]")
        try:
            options = key_values(rest[:-1].split(";"))
        except ValueError as exc:
            raise SolverError(f"solver spec {spec!r}: {exc}") from None
    get_solver(name).check_options(options)
    return name, options


def reward_curve(program: str, solver: str, seconds: float, seed: int = 0) -> list[CurvePoint]:
    """Every new best of ``solver`` by its own objective (a name or a spec with settings,
    :func:`solver_spec`; :class:`~mallocgame.solvers.base.Improvement`)
    on ``program`` within ``seconds``, plus the final answer, which must pass
    :func:`~mallocgame.check.check_solution` (:class:`SolverError` otherwise, no curve:
    a table's final reward is a checked answer's). The game's compiled kernels are
    loaded before the solver's clock starts (by :meth:`~mallocgame.solvers.base.Solver.solve`),
    so that the first cell a process runs is not charged for them. Before anything runs,
    :class:`~mallocgame.bench.inputs.StudyInputError` refuses a budget
    :func:`~mallocgame.bench.inputs.budget_seconds` refuses (0, negative, ``nan``,
    ``inf``, over 7 days) and a seed that is not a whole number >= 0."""
    seconds = budget_seconds(seconds)
    seed = checked_seed(seed)
    name, options = solver_spec(solver)
    inst = load_workload(program)
    points: list[CurvePoint] = []

    def record(imp: Improvement) -> None:
        points.append(
            CurvePoint(
                program,
                solver,
                seed,
                imp.elapsed_s,
                imp.solution.normalized_reward,
                work_text(imp.work),
                seconds,
            )
        )

    chosen = get_solver(name)
    final = chosen.solve(  # (the game's kernels loaded outside the budget: Solver.solve)
        inst, SolveRequest(seed=seed, seconds=seconds, callback=record, options=options)
    )
    report = check_solution(inst, final)
    if not report.ok:
        first = report.summary().splitlines()[0]
        raise SolverError(f"{solver} on {program}: its answer fails the check ({first})")
    points.append(
        CurvePoint(
            program,
            solver,
            seed,
            final.wall_s,
            final.normalized_reward,
            work_text(final.work),
            seconds,
        )
    )
    return points


def read_csv(path: Path) -> list[CurvePoint]:
    """The points of a reward-curve CSV (:func:`read_records` without the identities)."""
    return read_records(path)[0]


def read_records(path: Path) -> tuple[list[CurvePoint], dict[Cell, Identity | None]]:
    """The points :func:`write_rewards_csv` wrote to ``path`` (or, under
    :data:`CSV_HEADER_V1`, a run before rows kept their input, or
    :func:`mallocgame.curves.write_csv`), and each (program, solver, seed) cell's
    :class:`Identity` (``None``: a row without one). Raises
    :class:`~mallocgame.errors.InputFileError` for a file it cannot read and
    :class:`~mallocgame.errors.FormatError` for one in another format, or with a row no
    run writes (it names the file and line): a negative seed, a budget
    :func:`~mallocgame.bench.inputs.budget_seconds` refuses, a time that is not finite
    and >= 0, a reward that is not finite, a hash that is no sha256, settings that are
    not a JSON object, a cell whose rows state two identities."""
    header = CSV_HEADER_V1 if first_line(path) == ",".join(CSV_HEADER_V1) else REWARDS_HEADER
    points = []
    identities: dict[Cell, Identity | None] = {}
    rows = read_csv_rows(path, header, list, "reward-curve CSV")
    for line, cells in enumerate(rows, start=2):
        try:
            if len(cells) != len(header):
                raise ValueError(f"{len(cells)} cells, not {len(header)}")
            point = _parse_point(cells[: len(CSV_HEADER_V1)])
            found = identity_cells(cells[len(CSV_HEADER_V1) :])
            identity = None if found is None else Identity(*found)
        except (ValueError, IndexError) as exc:
            raise FormatError(
                f"{path}, line {line}: not a point of a reward curve ({exc})"
            ) from None
        cell = (point.program, point.solver, point.seed)
        if identities.setdefault(cell, identity) != identity:
            raise FormatError(
                f"{path}, line {line}: {point.program} {point.solver} s{point.seed} has rows "
                "of two instances or settings: a run writes one"
            )
        points.append(point)
    return points, identities


def write_rewards_csv(
    points: Sequence[CurvePoint], identities: dict[Cell, Identity | None], path: Path
) -> None:
    """Atomically write ``points`` under :data:`REWARDS_HEADER`, each row with its cell's
    identity (the last two cells empty for a cell of ``identities`` without one: a row of
    a CSV written before they were kept). The first seven cells are as
    :func:`mallocgame.curves.write_csv` writes them."""
    rows = []
    for p in points:
        identity = identities.get((p.program, p.solver, p.seed))
        rows.append(
            [
                *csv_row(p),
                "" if identity is None else identity.instance_sha256,
                "" if identity is None else identity.settings,
            ]
        )
    write_csv_atomic(path, REWARDS_HEADER, rows)


def spec_settings(spec: str) -> str:
    """A solver spec's settings as a study's row keeps them: its solver's
    :meth:`~mallocgame.solvers.base.Solver.settings` under the spec's options, as JSON
    with sorted keys."""
    name, options = solver_spec(spec)
    return json.dumps(get_solver(name).settings(options), sort_keys=True, default=str)


def check_programs(programs: Sequence[str]) -> None:
    """Refuse, before any cell runs, a program whose path is no UTF-8 text (the CSV names
    it: :class:`~mallocgame.errors.InputFileError`) or that names no workload or instance
    file (:func:`~mallocgame.workloads.registry.check_workload`)."""
    for program in programs:
        if not is_text(program):
            raise InputFileError(
                f"{program!a}: a program's path here must be UTF-8 text; rename the file"
            )
        check_workload(program)


def _budget_texts(budgets: set[float]) -> dict[float, str]:
    """Each of ``budgets`` in seconds as a message prints it: to 12 significant digits
    (``"1"``, ``"0.2"``), or, where two of them would print alike, each as its ``repr``
    (``"1.0"``, ``"1.0000000001"``), so different budgets never read the same."""
    short = {b: f"{b:.12g}" for b in budgets}
    if len(set(short.values())) == len(short):
        return short
    return {b: repr(b) for b in budgets}


def run_reward_curves(
    programs: Sequence[str],
    solvers: Sequence[str],
    seeds: Sequence[int],
    budget_s: float,
    csv_path: Path,
    progress: Callable[[str], None] | None = None,
) -> list[CurvePoint]:
    """Run every (program, solver, seed) cell that ``csv_path`` lacks
    (:func:`reward_curve`), rewriting it after each (:func:`write_rewards_csv`), and
    return every point it holds (other cells' too). Before any cell runs,
    :class:`~mallocgame.errors.StaleRecordError` refuses a CSV holding curves at another
    budget, and a cell asked (program, solver and seed) whose rows keep another
    instance than the program is now or other settings than its solver's now (a setting
    they lack counts as its default: :func:`~mallocgame.bench.sweep.settings_with_defaults`);
    a cell without them (a CSV from before they were kept) is reused as it stands;
    :class:`~mallocgame.errors.InputFileError` refuses a program whose path is no UTF-8
    text (:func:`check_programs`). The run holds the CSV's lock (``OUT.lock`` beside
    ``OUT.csv``: :func:`~mallocgame.fileio.output_beside`,
    :func:`~mallocgame.fileio.only_run`) from before it reads the CSV to its end: a second
    run on the same CSV is refused with :class:`~mallocgame.errors.StaleRecordError`
    before anything runs or is written (it would write back the CSV as it read it,
    without the cells the first adds meanwhile), and a lock that cannot be written with
    :class:`~mallocgame.errors.OutputFileError`."""
    check_programs(programs)
    say = progress or (lambda _msg: None)
    lock = output_beside(csv_path, ".lock")
    check_writable(lock)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with only_run(lock):
        return _run_missing_cells(programs, solvers, seeds, budget_s, csv_path, say)


def _run_missing_cells(
    programs: Sequence[str],
    solvers: Sequence[str],
    seeds: Sequence[int],
    budget_s: float,
    csv_path: Path,
    say: Callable[[str], None],
) -> list[CurvePoint]:
    """:func:`run_reward_curves` once its CSV's lock is held."""
    points, identities = read_records(csv_path) if csv_path.exists() else ([], {})
    other = {p.budget_s for p in points} - {budget_s}
    if other:
        text = _budget_texts({budget_s} | {b for b in other if b is not None})
        held = ", ".join(
            sorted("no wall-clock budget" if b is None else f"{text[b]} s" for b in other)
        )
        raise StaleRecordError(
            f"{csv_path} holds curves at {held}, not {text[budget_s]} s: give another --out"
        )
    instance_sha256 = functools.cache(lambda program: load_workload(program).sha256)
    settings = functools.cache(spec_settings)
    for (program, solver, seed), identity in identities.items():
        if identity is None or program not in programs or solver not in solvers:
            continue
        if seed not in seeds:  # (a cell not asked: not run, not tabulated)
            continue
        cell = f"{program} {solver} s{seed}"
        sha = instance_sha256(program)
        if identity.instance_sha256 != sha:
            raise StaleRecordError(
                f"{csv_path}: {cell} was run on another instance than this run's "
                f"(instance_sha256 {identity.instance_sha256[:12]} -> {sha[:12]}: the program "
                "changed since); remove its rows or give another --out"
            )
        changed = stale_settings(identity.settings, solver, settings)
        if changed:
            raise StaleRecordError(
                f"{csv_path}: {cell} was run with other settings than this run's "
                f"({'; '.join(changed[:3])}); remove its rows or give another --out"
            )
    points = list(points)
    for program in programs:
        for solver in solvers:
            for seed in seeds:
                if (program, solver, seed) in identities:
                    say(f"{program} {solver} s{seed}: in {csv_path} already")
                    continue
                identity = Identity(instance_sha256(program), settings(solver))
                curve = reward_curve(program, solver, budget_s, seed)
                say(
                    f"{program} {solver} s{seed}: {curve[-1].normalized_reward:.4f} after "
                    f"{curve[-1].elapsed_s:.1f} s ({curve[-1].work})"
                )
                points += curve
                identities[(program, solver, seed)] = identity
                write_rewards_csv(points, identities, csv_path)  # a stopped run goes on here
    return points


def stale_settings(
    stored: str, spec: str, settings: Callable[[str], str] = spec_settings
) -> list[str]:
    """``"key: old -> new"`` for each setting of ``stored`` (a study row's) that is not
    ``spec``'s now (``settings``: a spec's settings as JSON, :func:`spec_settings` or a
    cache of it), one ``stored`` lacks counting as its solver's default (added since, as
    in a sweep's records: :func:`mallocgame.bench.sweep.check_records`)."""
    if stored == settings(spec):
        return []
    current = json.loads(settings(spec))
    name, _ = solver_spec(spec)
    defaults = json.loads(settings(name))
    filled = settings_with_defaults(json.loads(stored), defaults, current)
    return [] if filled == current else setting_differences(filled, current)


def _parse_point(r: list[str]) -> CurvePoint:
    """One CSV row's first seven cells as :func:`write_rewards_csv` writes them;
    :class:`ValueError` names a bad cell."""
    if len(r) != len(CSV_HEADER):
        raise ValueError(f"{len(r)} cells, not {len(CSV_HEADER)}")
    if not r[0] or not r[1]:
        raise ValueError("no program" if not r[0] else "no solver")
    return CurvePoint(
        program=r[0],
        solver=r[1],
        seed=checked_seed(int(r[2])),
        elapsed_s=finite(float(r[4]), "elapsed_s", 0.0),
        normalized_reward=finite(float(r[5]), "normalized_reward"),
        work=r[6],
        budget_s=budget_seconds(float(r[3]), "budget_s") if r[3] else None,
    )


def final_table(points: list[CurvePoint]) -> str:
    """Markdown: the final normalized reward of each solver on each program (mean over seeds)."""
    programs = list(dict.fromkeys(p.program for p in points))
    solvers = list(dict.fromkeys(p.solver for p in points))
    finals: dict[tuple[str, str], list[float]] = {}
    last: dict[tuple[str, str, int], CurvePoint] = {}
    for p in points:
        last[(p.program, p.solver, p.seed)] = p
    for (program, solver, _), p in last.items():
        finals.setdefault((program, solver), []).append(p.normalized_reward)
    lines = ["| program | " + " | ".join(solvers) + " |", "| --- |" + " ---: |" * len(solvers)]
    for program in programs:
        cells = [
            f"{sum(v) / len(v):.4f}" if (v := finals.get((program, s))) else "—" for s in solvers
        ]
        lines.append(f"| {program} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
