"""Rewards against wall-clock time (the paper's Table 2 and Figure 5).

Each solver runs on each program with the same wall-clock budget; its best-so-far
callback gives a step curve of normalized reward against time. The curves go to a
CSV (one row per improvement) and a PNG (one panel per program), both written by
:mod:`mallocgame.curves`. The CSV is also the sweep's record: :func:`read_csv` reads it
back, so a run that stopped goes on with the (program, solver, seed) cells it lacks.
"""

from __future__ import annotations

from pathlib import Path

from mallocgame.bench.inputs import budget_seconds, finite
from mallocgame.bench.inputs import seed as checked_seed
from mallocgame.bench.sweep import warm_game_kernels
from mallocgame.check import check_solution
from mallocgame.curves import (
    CSV_HEADER,
    CurvePoint,
    work_text,
)
from mallocgame.errors import FormatError, SolverError
from mallocgame.fileio import read_csv_rows
from mallocgame.solvers import Improvement, SolveRequest, get_solver
from mallocgame.workloads.registry import load_workload

__all__ = ["solver_spec", "reward_curve", "read_csv", "final_table"]


def solver_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``"NAME"`` or ``"NAME[KEY=VALUE;KEY=VALUE]"`` → the solver's name and its options
    (strings, typed by the solver's ``Config``), so that one solver can run in one sweep
    under several settings, each its own curve. Raises
    :class:`~mallocgame.errors.SolverError` for a malformed spec, an unknown solver or a
    bad setting."""
    name, bracket, rest = spec.partition("[")
    options: dict[str, str] = {}
    if bracket:
        if not rest.endswith("]") or not rest[:-1].strip():
            raise SolverError(f"solver spec {spec!r}: expected NAME[KEY=VALUE;KEY=VALUE]")
        for item in rest[:-1].split(";"):
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise SolverError(f"solver spec {spec!r}: {item!r} is not KEY=VALUE")
            options[key.strip()] = value.strip()
    get_solver(name).check_options(options)
    return name, options


def reward_curve(program: str, solver: str, seconds: float, seed: int = 0) -> list[CurvePoint]:
    """Every new best of ``solver`` (a name or a spec with settings, :func:`solver_spec`)
    on ``program`` within ``seconds``, plus the final answer, which must pass
    :func:`~mallocgame.check.check_solution` (:class:`SolverError` otherwise, no curve:
    a table's final reward is a checked answer's). The game's compiled kernels are
    loaded before the solver's clock starts
    (:func:`~mallocgame.bench.sweep.warm_game_kernels`), so that the first cell a
    process runs is not charged for them. Before anything runs,
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
    warm_game_kernels(inst)  # outside the budget, as a sweep's job does
    final = chosen.solve(
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
    """The points :func:`write_csv` wrote to ``path``; raises
    :class:`~mallocgame.errors.InputFileError` for a file it cannot read and
    :class:`~mallocgame.errors.FormatError` for one in another format, or with a row no
    run writes (it names the file and line): a negative seed, a budget
    :func:`~mallocgame.bench.inputs.budget_seconds` refuses, a time that is not finite
    and >= 0, a reward that is not finite."""
    points = []
    rows = read_csv_rows(path, CSV_HEADER, list, "reward-curve CSV")
    for line, cells in enumerate(rows, start=2):
        try:
            points.append(_parse_point(cells))
        except (ValueError, IndexError) as exc:
            raise FormatError(
                f"{path}, line {line}: not a point of a reward curve ({exc})"
            ) from None
    return points


def _parse_point(r: list[str]) -> CurvePoint:
    """One CSV row as :func:`write_csv` writes it; :class:`ValueError` names a bad cell."""
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
