"""Two solvers head to head: per program and seed, whose answer is better.

The speedup table averages over programs and seeds; the question "is ``muzero``
ahead of ``es`` on most programs" needs the cells themselves. :func:`read_entries`
reads the sweep records of both solvers (one per program, solver and seed, written
by :mod:`mallocgame.bench.sweep`) from one or more folders; :func:`head_to_head`
pairs solver A's and solver B's normalized rewards cell by cell and counts, per
program, A's wins, ties and losses over the seeds both ran. A program is *ahead*
when A wins more seeds than it loses, *behind* the other way round, *level* when
every seed is a tie and *split* otherwise. Two rewards tie when they differ by at
most ``TIE_TOLERANCE`` relative (the same game scores the same float; two different
games practically never do).

The rewards compared are recomputed from the solutions the records keep, each
re-checked (:mod:`mallocgame.bench.recheck`); a record whose solution fails the check
counts as no answer, and the command says which record and why.

A comparison is refused (:class:`~mallocgame.errors.ComparisonError`) rather than
guessed when two records fill one cell, when two records of one solver disagree
on a setting both record (a default changed between the sweeps), when a record of
either solver is malformed (never skipped as another budget's or setting's), or when a
program or seed asked for has no record. A setting only one
of them records is not a disagreement: options are added with the old behaviour as
their default, so a record older than an option simply lacks it.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from numbers import Real
from pathlib import Path
from typing import Any

from mallocgame.bench.recheck import Rechecker
from mallocgame.bench.sweep import record_files
from mallocgame.errors import ComparisonError

__all__ = [
    "Entry",
    "VersusRow",
    "read_entries",
    "head_to_head",
    "format_versus",
    "summarize",
]

TIE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Entry:
    """What the comparison reads of one record. ``reward`` is the normalized reward
    (SPEC §5), ``None`` for an invalid answer; ``buffers`` is ``None`` if unrecorded."""

    source: str
    program: str
    solver: str
    seed: int
    reward: float | None
    failures: str
    buffers: int | None
    settings: dict[str, Any] | None


def _entry(source: str, doc: dict[str, Any]) -> Entry:
    """Check the fields of one record; :class:`ComparisonError` names the first bad one."""

    def bad(what: str) -> ComparisonError:
        return ComparisonError(f"{source}: {what}")

    for key in ("program", "solver"):
        if not isinstance(doc.get(key), str):
            raise bad(f"no {key} name")
    seed = doc.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise bad(f"seed {seed!r} is not an integer")
    valid = doc.get("valid")
    if not isinstance(valid, bool):
        raise bad("no 'valid' flag")
    reward = doc.get("normalized_reward")
    value = None  # an invalid record's reward is not read
    if valid:
        if isinstance(reward, bool) or not isinstance(reward, Real):
            raise bad(f"a valid record with normalized reward {reward!r}")
        value = float(reward)
    buffers = doc.get("buffers")
    settings = doc.get("settings")
    return Entry(
        source=source,
        program=doc["program"],
        solver=doc["solver"],
        seed=seed,
        reward=value,
        failures=str(doc.get("failures") or "invalid"),
        buffers=buffers if isinstance(buffers, int) and not isinstance(buffers, bool) else None,
        settings=settings if isinstance(settings, dict) else None,
    )


def read_entries(
    folders: Iterable[Path],
    solvers: tuple[str, str],
    *,
    budget: dict[str, Any],
    options: dict[str, dict[str, Any]],
    programs: Iterable[str] | None = None,
    seeds: Iterable[int] | None = None,
) -> list[Entry]:
    """The records of ``solvers`` in ``folders`` made with ``budget`` (a record's
    ``{"seconds": S, "work": N}``) and each solver's ``options`` (``{}``: the
    defaults), for ``programs`` and ``seeds`` if given (``None``: all; an empty list
    given raises :class:`ComparisonError`, as no record could be of it). Each of
    ``programs`` is checked as a workload first
    (:func:`~mallocgame.workloads.registry.check_workload`: a misspelt name raises
    :class:`~mallocgame.errors.InputFileError`, with a suggestion), and one of
    ``programs`` or ``seeds`` that no record read has raises :class:`ComparisonError`
    rather than leaving it out of the table unsaid. A folder given twice is read once; a
    missing folder raises :class:`ComparisonError`, and so does a malformed record of
    either solver: one whose ``budget`` is not ``{"seconds": S, "work": N}`` (each a
    number or null), whose ``options`` are not a JSON object, or whose fields
    :func:`_entry` refuses (it is never skipped as another budget's or setting's). Each
    record is re-checked
    (:class:`~mallocgame.bench.recheck.Rechecker`): its entry's reward and size are its
    solution's, and a record whose solution fails the check is an invalid entry whose
    ``failures`` is one line naming the record's file and why."""
    from mallocgame.workloads.registry import check_workload

    wanted_programs = None if programs is None else list(dict.fromkeys(programs))
    wanted_seeds = None if seeds is None else list(dict.fromkeys(seeds))
    for what, wanted in (("programs", wanted_programs), ("seeds", wanted_seeds)):
        if wanted is not None and not wanted:  # not "every one": the caller named none
            raise ComparisonError(f"no {what} given to compare (None: every one)")
    for program in wanted_programs or ():
        check_workload(program)
    rechecker = Rechecker()
    entries, seen = [], set()
    folders = list(folders)
    for folder in folders:
        if not folder.is_dir():
            raise ComparisonError(f"no records folder {folder}")
        if folder.resolve() in seen:
            continue
        seen.add(folder.resolve())
        for path, doc in record_files(folder):
            if doc.get("solver") not in solvers:
                continue
            _check_shape(str(path), doc)
            entry = _entry(str(path), doc)  # (a malformed record: refused, not skipped)
            if doc["budget"] != budget:
                continue
            if doc.get("options", {}) != options.get(doc["solver"], {}):
                continue
            if wanted_programs is not None and entry.program not in wanted_programs:
                continue
            if wanted_seeds is not None and entry.seed not in wanted_seeds:
                continue
            entries.append(_entry(str(path), rechecker.record(path, doc)))
    where = " ".join(str(folder) for folder in folders)
    for what, wanted, held in (
        ("program", wanted_programs, {e.program for e in entries}),
        ("seed", wanted_seeds, {e.seed for e in entries}),
    ):
        missing = [x for x in wanted or () if x not in held]
        if missing:
            raise ComparisonError(
                f"no record of {' or '.join(solvers)} for {what} "
                f"{', '.join(map(str, missing))} with this budget and these settings in {where}"
            )
    return entries


def _check_shape(source: str, doc: dict[str, Any]) -> None:
    """:class:`ComparisonError` for a record whose ``budget`` is not ``{"seconds": S,
    "work": N}`` (each a number or null: what a sweep writes) or whose ``options`` are not
    a JSON object: compared with the budget and settings asked, such a record matched
    none, and was left out unsaid."""
    budget = doc.get("budget")
    if not isinstance(budget, dict) or set(budget) != {"seconds", "work"}:
        raise ComparisonError(f'{source}: budget {budget!r} is not {{"seconds": S, "work": N}}')
    for key in ("seconds", "work"):
        value = budget[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, Real)):
            raise ComparisonError(f"{source}: budget {key} {value!r} is not a number or null")
    if not isinstance(doc.get("options", {}), dict):
        raise ComparisonError(f"{source}: options {doc['options']!r} are not a JSON object")


@dataclass(frozen=True)
class VersusRow:
    """One program's line: ``cells[seed] = (A's, B's)`` normalized rewards, ``None``
    where that solver has no valid record for the seed."""

    program: str
    buffers: int | None
    cells: dict[int, tuple[float | None, float | None]]

    def outcomes(self) -> list[int]:
        """Per seed where both have an answer, in seed order: +1 A ahead, 0 tie, -1 behind."""
        return [_compare(a, b) for a, b in self._common()]

    def verdict(self) -> str:
        """``ahead``, ``behind``, ``level``, ``split``, or ``—`` with no common seed."""
        results = self.outcomes()
        wins, losses = results.count(1), results.count(-1)
        if not results:
            return "—"
        if wins > losses:
            return "ahead"
        if losses > wins:
            return "behind"
        return "level" if wins == 0 else "split"

    def mean_lead(self) -> float | None:
        """Mean of ``A / B - 1`` (a fraction) over the seeds both answered; ``None``
        with none, or if B scored 0 on any of them (no relative lead exists)."""
        pairs = self._common()
        if not pairs or any(b <= 0 for _, b in pairs):
            return None
        return statistics.fmean(a / b - 1.0 for a, b in pairs)

    def _common(self) -> list[tuple[float, float]]:
        return [
            (a, b) for _, (a, b) in sorted(self.cells.items()) if a is not None and b is not None
        ]


def _compare(a: float, b: float) -> int:
    if abs(a - b) <= TIE_TOLERANCE * max(abs(a), abs(b)):
        return 0
    return 1 if a > b else -1


def _check_settings(entries: list[Entry]) -> None:
    """:class:`ComparisonError` if two entries of one solver give one setting two values
    (each setting's first value is kept, with its source, so that every pair is compared:
    records that state different settings each still agree with one another)."""
    seen: dict[str, dict[str, tuple[Any, str]]] = {}
    for entry in entries:
        if entry.settings is None:
            continue
        known = seen.setdefault(entry.solver, {})
        for key in sorted(entry.settings):
            value = entry.settings[key]
            if key not in known:
                known[key] = (value, entry.source)
            elif known[key][0] != value:
                raise ComparisonError(
                    f"{entry.solver} records disagree on {key}: {known[key][0]!r} in "
                    f"{known[key][1]}, {value!r} in {entry.source}"
                )


def head_to_head(entries: list[Entry], a: str, b: str) -> list[VersusRow]:
    """Rows for every program where A or B has an entry, smallest program first.

    Entries of other solvers are ignored; an invalid answer counts as no answer.
    Raises :class:`ComparisonError` if A is B, if two entries fill one (program,
    solver, seed) cell, or if two entries of one solver disagree on a setting.
    """
    if a == b:
        raise ComparisonError(f"compare two different solvers, not {a!r} with itself")
    entries = [e for e in entries if e.solver in (a, b)]
    _check_settings(entries)
    cell: dict[tuple[str, str, int], Entry] = {}
    buffers: dict[str, int | None] = {}
    for entry in entries:
        key = (entry.program, entry.solver, entry.seed)
        if key in cell:
            raise ComparisonError(
                f"two records for {entry.program} {entry.solver} seed {entry.seed}: "
                f"{cell[key].source} and {entry.source}"
            )
        cell[key] = entry
        if buffers.get(entry.program) is None:
            buffers[entry.program] = entry.buffers
    rows = []
    for program in sorted(buffers, key=lambda p: (buffers[p] or 0, p)):
        seeds = sorted({seed for (p, _, seed) in cell if p == program})
        cells = {}
        for seed in seeds:
            first, second = (cell.get((program, solver, seed)) for solver in (a, b))
            cells[seed] = (
                first.reward if first is not None else None,
                second.reward if second is not None else None,
            )
        rows.append(VersusRow(program, buffers[program], cells))
    return rows


def _digits(a: float, b: float) -> int:
    """4, or the fewest digits up to 10 that show two different rewards as different."""
    digits = 4
    while digits < 10 and f"{a:.{digits}f}" == f"{b:.{digits}f}":
        digits += 1
    return digits


def _pair(a: float | None, b: float | None) -> str:
    """``A / B`` with the better one bold."""
    if a is None or b is None:
        return " / ".join("—" if v is None else f"{v:.4f}" for v in (a, b))
    outcome = _compare(a, b)
    digits = 4 if outcome == 0 else _digits(a, b)
    text = [f"{a:.{digits}f}", f"{b:.{digits}f}"]
    if outcome:
        winner = 0 if outcome > 0 else 1
        text[winner] = f"**{text[winner]}**"
    return " / ".join(text)


def format_versus(rows: list[VersusRow], a: str, b: str) -> str:
    """A Markdown table: per program each seed's ``A / B`` (bold: the better; — : no
    answer), A's wins–ties–losses and mean lead."""
    seeds = sorted({seed for row in rows for seed in row.cells})
    lines = [
        "| program | buffers | "
        + " | ".join(f"seed {s}: {a} / {b}" for s in seeds)
        + " | W–T–L | mean lead |",
        "| --- | ---: |" + " ---: |" * (len(seeds) + 2),
    ]
    for row in rows:
        cells = [_pair(*row.cells[s]) if s in row.cells else "—" for s in seeds]
        results = row.outcomes()
        lead = row.mean_lead()
        size = "—" if row.buffers is None else f"{row.buffers:,}"
        lines.append(
            f"| {row.program} | {size} | "
            + " | ".join(cells)
            + f" | {results.count(1)}–{results.count(0)}–{results.count(-1)} | "
            + ("—" if lead is None else f"{lead:+.3%}")
            + " |"
        )
    return "\n".join(lines)


def summarize(rows: list[VersusRow], a: str, b: str) -> str:
    """Two lines: A against B over the (program, seed) cells both answered, and over
    the programs with at least one such cell."""
    results = [x for row in rows for x in row.outcomes()]
    verdicts = [row.verdict() for row in rows]
    return (
        f"cells: {a} ahead in {results.count(1)}, level in {results.count(0)}, "
        f"behind in {results.count(-1)} of {len(results)} against {b}\n"
        f"programs: ahead on {verdicts.count('ahead')}, level on {verdicts.count('level')}, "
        f"split on {verdicts.count('split')}, behind on {verdicts.count('behind')} of "
        f"{sum(v != '—' for v in verdicts)}"
    )
