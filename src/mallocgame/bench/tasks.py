"""Per-task latency against the number of tasks sharing one machine (MARL's Figures 10-11).

For each number of tasks ``N``, the program is derived on the machine one of ``N``
identical tasks sees (:func:`mallocgame.sharing.task_preset`: a core's compute, its
share of each memory's bandwidth, ``1/N`` of the DRAM left to the tasks) and placed:

- the references, which need no solver (:data:`REFERENCES`): ``all-slow`` (every
  buffer in slow memory: the baseline), ``fast-only`` (every buffer in fast memory, no
  copies: MARL's 128 GB DRAM machine, the ideal) and ``memory-mode`` (the DRAM a
  cache of the slow memory shared by all tasks:
  :func:`mallocgame.sharing.memory_mode_latency`);
- every solver spec (``NAME`` or ``NAME[KEY=VALUE;...]``,
  :func:`mallocgame.bench.rewards.solver_spec`) with a wall-clock budget and a seed:
  its answer must pass :func:`mallocgame.check.check_solution`, and its latency is
  the simulator's (:func:`mallocgame.simulate.simulate`).

Records: one CSV row per (tasks, placement, seed) (references at the first seed
only), written after each, so a stopped run goes on with the cells it lacks; a CSV of
another program or budget is refused. Each row keeps what identifies its input: the
``instance_sha256`` of the program on one of ``N`` tasks' machine, and the solver's
settings (:meth:`~mallocgame.solvers.base.Solver.settings`, defaults filled in; ``{}``
for a reference); a row of another instance (the program or the machine model changed
since) or of other settings (a default changed since) is refused, not reused
(:class:`~mallocgame.errors.StaleRecordError`). A row without them, written before they
were kept (the CSV's first 8 columns only, as ``docs/results/tasks-wrn101-b128-60s.csv``),
is read and reused as it stands, and written back with the two cells empty. Solvers'
answers are kept beside it (``OUT.solutions/N-SPEC-sSEED.solution.json``), with the
instance each answers, the program on one of ``N`` tasks' machine
(``OUT.solutions/N.instance.json.gz``, :func:`instance_path`), so that ``mallocgame
check`` takes the two files and replays it.
:func:`latency_table`, :func:`limit_table` and :func:`plot_tasks` turn the rows into the
study's tables and figure. Units: seconds, bytes.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from mallocgame.bench.inputs import (
    StudyInputError,
    budget_seconds,
    finite,
    whole_number,
    within,
)
from mallocgame.bench.inputs import (
    seed as checked_seed,
)
from mallocgame.bench.inputs import (
    seeds as checked_seeds,
)
from mallocgame.bench.rewards import solver_spec, spec_settings, stale_settings
from mallocgame.bench.sweep import identity_cells
from mallocgame.check import check_solution
from mallocgame.costmodel import derive_instance, peak_live_bytes
from mallocgame.errors import FormatError, SolverError, StaleRecordError
from mallocgame.fileio import (
    check_writable,
    first_line,
    only_run,
    output_beside,
    read_csv_rows,
    write_bytes_atomic,
    write_csv_atomic,
)
from mallocgame.instance import Instance, save_instance
from mallocgame.program import Program
from mallocgame.sharing import (
    SharedMachine,
    dram_only_latency,
    memory_mode_latency,
    task_preset,
    tasks_that_fit,
)
from mallocgame.simulate import baseline_latency, simulate
from mallocgame.solution import save_solution
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.units import format_bytes

__all__ = [
    "REFERENCES",
    "rows_asked",
    "TaskLatency",
    "max_tasks",
    "run_tasks_study",
    "solutions_folder",
    "instance_path",
    "write_csv",
    "read_csv",
    "latency_table",
    "tasks_under_limit",
    "limit_table",
    "fit_counts",
    "fit_table",
    "plot_tasks",
]

REFERENCES = ("all-slow", "fast-only", "memory-mode")
"""The placements that need no solver (module docstring)."""

CSV_HEADER_V1 = [
    "program",
    "tasks",
    "placement",
    "seed",
    "budget_s",
    "latency_s",
    "normalized_reward",
    "wall_s",
]
"""The columns of a CSV written before rows kept their input's identity (still read)."""

CSV_HEADER = [*CSV_HEADER_V1, "instance_sha256", "settings"]


@dataclass(frozen=True)
class TaskLatency:
    """One task's simulated latency when ``tasks`` copies of ``program`` share the machine."""

    program: str
    tasks: int
    placement: str  # a reference (REFERENCES) or a solver spec
    seed: int
    budget_s: float  # the solvers' wall-clock budget of the study, seconds
    latency_s: float  # one task's latency, seconds
    normalized_reward: float | None  # the solver's answer's (None for a reference)
    wall_s: float  # seconds the placement took
    # what identifies the cell's input; None in a row written before they were kept:
    instance_sha256: str | None = None  # the program on one of ``tasks`` tasks' machine
    settings: str | None = None  # the solver's settings as JSON (sorted keys); "{}": a reference


def _reference_latency(placement: str, inst: Instance, machine: SharedMachine, tasks: int) -> float:
    """One task's latency under a reference placement (``inst``: the program on one task's machine)."""
    if placement == "all-slow":
        return baseline_latency(inst)
    if placement == "fast-only":
        return dram_only_latency(inst)
    return memory_mode_latency(inst, tasks, machine.fast_total_bytes)


def solutions_folder(out: str | os.PathLike[str]) -> Path:
    """The folder of a study's kept answers: ``OUT.solutions`` beside ``OUT.csv``
    (:func:`~mallocgame.fileio.output_beside`: ``--out x.csv`` keeps them in
    ``x.solutions``, not ``x.csv.solutions``)."""
    return output_beside(out, ".solutions")


def instance_path(out: str | os.PathLike[str], tasks: int) -> Path:
    """Where a study keeps the instance its answers at ``tasks`` tasks are of (the
    program derived on the machine one of ``tasks`` tasks sees), written atomically
    beside them: ``mallocgame check OUT.solutions/N.instance.json.gz ANSWER`` checks one."""
    return solutions_folder(out) / f"{tasks}.instance.json.gz"


def _solution_path(out: Path, tasks: int, spec: str, seed: int) -> Path:
    """Where a study keeps the answer of placement ``spec`` at ``tasks`` tasks and
    ``seed``: each run of the spec's characters a file name cannot hold made one ``_``,
    and then a short hash of the spec itself, so that two specs made alike never share a
    file."""
    safe = re.sub(r"[^A-Za-z0-9_.=-]+", "_", spec)
    if safe != spec:
        safe += "-" + hashlib.sha256(spec.encode()).hexdigest()[:8]
    return solutions_folder(out) / f"{tasks}-{safe}-s{seed}.solution.json"


def run_tasks_study(
    program: Program,
    machine: SharedMachine,
    tasks: Sequence[int],
    placements: Sequence[str],
    seeds: Sequence[int],
    budget_s: float,
    out: Path,
    progress: Callable[[str], None] | None = None,
) -> list[TaskLatency]:
    """Run every missing (tasks, placement, seed) cell; every row of ``out.csv`` for this study.

    ``placements``: references and solver specs. Raises, before anything runs or is
    written, :class:`~mallocgame.bench.inputs.StudyInputError` for no count of tasks, no
    placement or no seed, a count of tasks that is not a whole number from 1 to
    :func:`max_tasks`, a seed that is not a whole number >= 0, or a budget
    :func:`~mallocgame.bench.inputs.budget_seconds` refuses, or a program with no live
    bytes at its peak (:func:`~mallocgame.costmodel.peak_live_bytes`: how many of its
    tasks fit has no answer), and
    :class:`~mallocgame.errors.SolverError` for a bad spec, and
    :class:`~mallocgame.errors.OutputFileError` where ``OUT.csv``, ``OUT.lock`` or the
    answers' folder (:func:`solutions_folder`) cannot be written (a file where a folder
    goes, a read-only folder); then
    :class:`~mallocgame.errors.StaleRecordError` when ``out.csv`` holds another program's
    or budget's rows, a row of the counts and placements asked written for another
    instance or under other solver settings (module docstring), or another run of the
    study is writing them (it holds ``OUT.lock``); :class:`~mallocgame.errors.FormatError`
    for a row of ``out.csv`` no study writes (:func:`read_csv`);
    :class:`~mallocgame.errors.SolverError` if an answer fails the check.
    """
    most = max_tasks(machine)
    if not tasks:
        raise StudyInputError("no count of tasks given")
    if not placements:
        raise StudyInputError("no placement given")
    # a count, placement or seed named twice is one cell, run once
    tasks = list(dict.fromkeys(whole_number(n, "the count of tasks", 1, most) for n in tasks))
    placements = list(dict.fromkeys(placements))
    seeds = list(dict.fromkeys(checked_seeds(seeds)))
    budget_s = budget_seconds(budget_s)
    specs = [p for p in placements if p not in REFERENCES]
    for spec in specs:
        solver_spec(spec)
    if peak_live_bytes(program) <= 0:  # the tables count the tasks of its bytes that fit
        raise StudyInputError(
            f"{program.name} has no live bytes at its peak (0 B): a study of how many of its "
            "tasks share a machine needs a program that holds memory"
        )
    csv_path = output_beside(out, ".csv")
    lock = output_beside(out, ".lock")
    # a file where a folder goes, or a folder that takes no file: found before any cell runs
    for path in (csv_path, lock, solutions_folder(out) / "answer.solution.json"):
        check_writable(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with only_run(lock):
        rows = read_csv(csv_path) if csv_path.exists() else []
        other = {(r.program, r.budget_s) for r in rows} - {(program.name, budget_s)}
        if other:
            held = ", ".join(f"{p} at {b:g} s" for p, b in sorted(other))
            raise StaleRecordError(
                f"{csv_path} holds rows of {held}, not {program.name} at {budget_s:g} s: give another --out"
            )
        instances = {
            n: derive_instance(program, task_preset(machine, n), capacity_fraction=None)
            for n in tasks
        }
        settings = {p: _settings(p) for p in placements}
        _refuse_stale(rows, instances, settings, csv_path)
        done = {(r.tasks, r.placement, r.seed) for r in rows}
        # a reference is measured once a count of tasks, at whatever seed it was
        references = {(r.tasks, r.placement) for r in rows if r.placement in REFERENCES}
        for n in tasks:
            inst = instances[n]
            cells = [
                (p, seed) for p in placements for seed in (seeds[:1] if p in REFERENCES else seeds)
            ]
            for placement, seed in cells:
                if (n, placement, seed) in done or (n, placement) in references:
                    continue
                row = _run_cell(program, machine, inst, n, placement, seed, budget_s, out)
                rows.append(replace(row, settings=settings[placement]))
                write_csv(rows, csv_path)
                if progress is not None:
                    progress(f"{n} tasks, {placement} s{seed}: {rows[-1].latency_s:.3f} s a task")
        return rows


def _settings(placement: str) -> str:
    """A placement's settings as stored in a row: a solver's
    (:meth:`~mallocgame.solvers.base.Solver.settings` of its spec's options) as JSON with
    sorted keys, ``"{}"`` for a reference."""
    return "{}" if placement in REFERENCES else spec_settings(placement)


def _refuse_stale(
    rows: Sequence[TaskLatency],
    instances: dict[int, Instance],
    settings: dict[str, str],
    csv_path: Path,
) -> None:
    """:class:`~mallocgame.errors.StaleRecordError` for a row of the counts and placements
    asked (one a run would skip or table) whose input is not this run's: another
    instance, or other settings. A setting a row lacks (added to the solver after it was
    written) counts as its default, as in a sweep's records
    (:func:`mallocgame.bench.sweep.check_records`); a row without them is taken as it is."""
    spec_settings_now = functools.cache(spec_settings)
    for r in rows:
        if r.tasks not in instances or r.placement not in settings:
            continue
        cell = f"{r.tasks} tasks, {r.placement} s{r.seed}"
        sha = instances[r.tasks].sha256
        if r.instance_sha256 is not None and r.instance_sha256 != sha:
            raise StaleRecordError(
                f"{csv_path}: {cell} was run on another instance than this run's "
                f"(instance_sha256 {r.instance_sha256[:12]} -> {sha[:12]}: the program or the "
                "machine model changed since); remove its rows or give another --out"
            )
        if r.settings is None or r.settings == settings[r.placement]:
            continue
        changed = "; ".join(stale_settings(r.settings, r.placement, spec_settings_now)[:3])
        if changed:
            raise StaleRecordError(
                f"{csv_path}: {cell} was run with other settings than this run's ({changed}); "
                "remove its rows or give another --out"
            )


def max_tasks(machine: SharedMachine) -> int:
    """The most tasks a study shares ``machine`` between: as many as its fast memory
    holds alignment units, each task's least share
    (:func:`mallocgame.sharing.task_preset`; beyond it a task's share stops shrinking)."""
    return max(1, machine.preset.fast_memory_bytes // machine.preset.alignment_bytes)


def _run_cell(
    program: Program,
    machine: SharedMachine,
    inst: Instance,
    tasks: int,
    placement: str,
    seed: int,
    budget_s: float,
    out: Path,
) -> TaskLatency:
    """One task's latency under ``placement`` when ``tasks`` tasks share ``machine``
    (``inst``: the program on one task's machine); a solver's answer is checked and kept,
    with ``inst`` (:func:`instance_path`). The game's compiled kernels are loaded before
    the solver's clock starts (by :meth:`~mallocgame.solvers.base.Solver.solve`): the
    first cell is not charged for them."""
    if placement in REFERENCES:
        latency = _reference_latency(placement, inst, machine, tasks)
        return TaskLatency(
            program.name, tasks, placement, seed, budget_s, latency, None, 0.0, inst.sha256
        )
    name, options = solver_spec(placement)
    solver = get_solver(name)  # (it loads the game's kernels outside the budget)
    answer = solver.solve(inst, SolveRequest(seed=seed, seconds=budget_s, options=options))
    report = check_solution(inst, answer)
    if not report.ok:
        raise SolverError(
            f"{placement} on {tasks} tasks: its answer fails the check: {report.summary()}"
        )
    save_instance(inst, instance_path(out, tasks))  # what the answer is of, to check it
    save_solution(answer, _solution_path(out, tasks, placement, seed))
    latency = simulate(inst, answer).latency_s
    return TaskLatency(
        program.name,
        tasks,
        placement,
        seed,
        budget_s,
        latency,
        answer.normalized_reward,
        answer.wall_s,
        inst.sha256,
    )


def write_csv(rows: list[TaskLatency], path: Path) -> None:
    """Atomically write ``rows`` under :data:`CSV_HEADER` (a row without its input's
    identity: the last two cells empty)."""
    write_csv_atomic(
        path,
        CSV_HEADER,
        (
            [
                r.program,
                r.tasks,
                r.placement,
                r.seed,
                repr(float(r.budget_s)),
                repr(float(r.latency_s)),
                "" if r.normalized_reward is None else repr(float(r.normalized_reward)),
                repr(float(r.wall_s)),
                r.instance_sha256 or "",
                "" if r.settings is None else r.settings,
            ]
            for r in rows
        ),
    )


def read_csv(path: Path) -> list[TaskLatency]:
    """The rows :func:`write_csv` wrote (or, under :data:`CSV_HEADER_V1`, a study wrote
    before rows kept their input's identity: read without it);
    :class:`~mallocgame.errors.InputFileError` for a
    file it cannot read, :class:`~mallocgame.errors.FormatError` for another format or a
    row no study writes (it names the file and line): a count of tasks below 1, a
    negative seed, a budget :func:`~mallocgame.bench.inputs.budget_seconds` refuses, a
    latency that is not finite and above 0, a normalized reward outside ``[0, 1]``
    (the roofline's bound, give or take ``REWARD_SLACK``) or a wall time below 0; and a
    second row of one cell (tasks, placement, seed), or of one reference at one count
    of tasks at another seed: a study writes each once, and the tables would average
    them."""
    header = CSV_HEADER_V1 if first_line(path) == ",".join(CSV_HEADER_V1) else CSV_HEADER
    rows = []
    seen: dict[tuple[int, str, int], int] = {}  # a cell -> the line of its row
    for line, cells in enumerate(read_csv_rows(path, header, list, "tasks-study CSV"), start=2):
        try:
            row = _parse_row(cells, len(header))
        except (ValueError, IndexError) as exc:
            raise FormatError(f"{path}, line {line}: not a row of a tasks study ({exc})") from None
        # a reference is measured once a count of tasks, at one seed
        cell = (row.tasks, row.placement, -1 if row.placement in REFERENCES else row.seed)
        if cell in seen:
            raise FormatError(
                f"{path}, line {line}: a second row of {row.tasks} tasks, {row.placement}"
                + ("" if row.placement in REFERENCES else f" s{row.seed}")
                + f" (the first is line {seen[cell]}): remove one"
            )
        seen[cell] = line
        rows.append(row)
    return rows


REWARD_SLACK = 1e-9
"""How far past ``[0, 1]`` a normalized reward read back may be: the rounding of sums."""


def _parse_row(r: list[str], columns: int = len(CSV_HEADER)) -> TaskLatency:
    """One CSV row as :func:`write_csv` writes it (``columns``: 8 in a CSV written before
    rows kept their input's identity); :class:`ValueError` names a bad cell."""
    if len(r) != columns:
        raise ValueError(f"{len(r)} cells, not {columns}")
    if not r[0] or not r[2]:
        raise ValueError("no program" if not r[0] else "no placement")
    reward = None
    if r[6]:
        reward = within(float(r[6]), "normalized_reward", -REWARD_SLACK, 1.0 + REWARD_SLACK)
    sha, settings = identity_cells(r[8:]) or (None, None)
    return TaskLatency(
        program=r[0],
        tasks=whole_number(int(r[1]), "tasks", 1),
        placement=r[2],
        seed=checked_seed(int(r[3])),
        budget_s=budget_seconds(float(r[4]), "budget_s"),
        latency_s=finite(float(r[5]), "latency_s", 0.0, above=True),
        normalized_reward=reward,
        wall_s=finite(float(r[7]), "wall_s", 0.0),
        instance_sha256=sha,
        settings=settings,
    )


def _mean_latency(rows: Sequence[TaskLatency]) -> dict[tuple[int, str], float]:
    """Mean latency over seeds per (tasks, placement)."""
    cells: dict[tuple[int, str], list[float]] = {}
    for r in rows:
        cells.setdefault((r.tasks, r.placement), []).append(r.latency_s)
    return {key: sum(v) / len(v) for key, v in cells.items()}


def _order(rows: Sequence[TaskLatency]) -> tuple[list[int], list[str]]:
    tasks = sorted({r.tasks for r in rows})
    placements = list(dict.fromkeys(r.placement for r in rows))
    return tasks, placements


def rows_asked(
    rows: Sequence[TaskLatency], tasks: Sequence[int], placements: Sequence[str]
) -> list[TaskLatency]:
    """The rows of a study's CSV (which may hold other runs' counts and placements) that
    a run asking for ``tasks`` and ``placements`` tables: every seed the records hold for
    them, not only the seeds the run asked for (a run adding seeds 1-4 of one placement
    and a run of every placement at seed 0 table the same means)."""
    return [r for r in rows if r.tasks in tasks and r.placement in placements]


def latency_table(rows: Sequence[TaskLatency]) -> str:
    """Markdown: one task's latency (seconds, mean over seeds) per number of tasks and
    placement, and below each the ratio to ``fast-only`` where it was run. Seconds are
    given to two decimals from 1 s up (as ``docs/results.md`` shows them), below that to
    four significant digits (a program of milliseconds is not all 0.00)."""
    mean = _mean_latency(rows)
    tasks, placements = _order(rows)
    lines = ["| tasks | " + " | ".join(placements) + " |", "| ---: |" + " ---: |" * len(placements)]
    for n in tasks:
        ideal = mean.get((n, "fast-only"))
        cells = []
        for p in placements:
            value = mean.get((n, p))
            if value is None:
                cells.append("—")
            elif ideal:
                cells.append(f"{_seconds(value)} ({value / ideal:.2f}×)")
            else:
                cells.append(_seconds(value))
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _seconds(value: float) -> str:
    """A latency in a table: two decimals from 1 s up, else four significant digits."""
    return f"{value:.2f}" if value >= 1 else f"{value:.4g}"


def tasks_under_limit(rows: Sequence[TaskLatency], limit_s: float) -> dict[str, int]:
    """Per placement, the most tasks of the study's grid at which one task's latency
    (mean over seeds) is at most ``limit_s``, with every smaller count also under it
    (0 if even the fewest exceed it)."""
    mean = _mean_latency(rows)
    tasks, placements = _order(rows)
    result: dict[str, int] = {}
    for p in placements:
        best = 0
        for n in tasks:
            value = mean.get((n, p))
            if value is None or value > limit_s:
                break
            best = n
        result[p] = best
    return result


def limit_table(
    rows: Sequence[TaskLatency], limit_s: float, fit: dict[str, int] | None = None
) -> str:
    """Markdown: per placement, the tasks under ``limit_s`` (:func:`tasks_under_limit`),
    capped by what fits in main memory (``fit``: :func:`fit_counts`) where given."""
    under = tasks_under_limit(rows, limit_s)
    lines = ["| placement | tasks under the limit | fit in main memory |", "| --- | ---: | ---: |"]
    for p, n in under.items():
        cap = None if fit is None else fit.get(_mode_of(p))
        lines.append(
            f"| {p} | {n if cap is None else min(n, cap)} | {'—' if cap is None else cap} |"
        )
    return "\n".join(lines)


def _mode_of(placement: str) -> str:
    """The main-memory mode a placement runs in (:func:`mallocgame.sharing.tasks_that_fit`)."""
    return {"memory-mode": "memory-mode", "fast-only": "fast-only"}.get(placement, "both")


def fit_counts(machine: SharedMachine, program: Program) -> dict[str, int]:
    """How many tasks of ``program``'s peak live bytes fit each mode's main memory; the
    ``fast-only`` machine has the slow memory's size in DRAM (MARL's 128 GB)."""
    fit = dict(tasks_that_fit(machine, peak_live_bytes(program)))
    fit["fast-only"] = fit["memory-mode"]
    return fit


def fit_table(machine: SharedMachine, program: Program) -> str:
    """Markdown: MARL's Figure 10 for ``program``: tasks that fit in each mode's main memory."""
    peak = peak_live_bytes(program)
    fit = tasks_that_fit(machine, peak)
    lines = [f"| mode ({format_bytes(peak)} a task) | tasks that fit |", "| --- | ---: |"]
    names = {
        "app-direct": "App Direct, DRAM only (what the system leaves)",
        "memory-mode": "Memory Mode (persistent memory as main memory)",
        "both": "DRAM and persistent memory both main memory (placements)",
    }
    for mode, count in fit.items():
        lines.append(f"| {names[mode]} | {count} |")
    return "\n".join(lines)


def plot_tasks(rows: Sequence[TaskLatency], path: Path, limit_s: float | None = None) -> None:
    """Two panels: one task's latency against the number of tasks (log-log), and the
    same relative to ``fast-only``; a dashed line at ``limit_s``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mallocgame.viz import literal_text

    mean = _mean_latency(rows)
    tasks, placements = _order(rows)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for i, p in enumerate(placements):
        xs = [n for n in tasks if (n, p) in mean]
        style = "--" if p in REFERENCES else "-"
        left.plot(
            xs, [mean[(n, p)] for n in xs], style, marker="o", color=f"C{i}", label=literal_text(p)
        )
        ratio = [n for n in xs if (n, "fast-only") in mean]
        right.plot(
            ratio,
            [mean[(n, p)] / mean[(n, "fast-only")] for n in ratio],
            style,
            marker="o",
            color=f"C{i}",
        )
    if limit_s is not None:
        left.axhline(limit_s, color="black", linestyle=":", linewidth=1, label="latency limit")
    program = rows[0].program if rows else ""
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tasks running at once")
        ax.grid(alpha=0.3)
    left.set_yscale("log")
    left.set_ylabel("one task's latency, s")
    left.set_title(literal_text(program))
    right.set_ylabel("latency / fast-only latency")
    right.set_title("relative to every buffer in fast memory")
    handles, labels = left.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    write_bytes_atomic(path, buffer.getvalue())
