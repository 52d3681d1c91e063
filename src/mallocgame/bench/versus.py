"""Two solvers head to head: per program and seed, whose answer is better.

The speedup table averages over programs and seeds; the question "is ``muzero``
ahead of ``es`` on most programs" needs the cells themselves. From sweep records
(one per program, solver and seed, as :func:`mallocgame.bench.sweep.load_records`
reads them), :func:`head_to_head` pairs solver A's and solver B's normalized
rewards cell by cell and counts, per program, A's wins, ties and losses over the
seeds both ran; a program is *ahead* when A wins more seeds than it loses, *behind*
the other way round, *level* when every seed is a tie and *split* otherwise.
Two rewards tie when they differ by at most ``TIE_TOLERANCE`` relative (the same
game scores the same float; two different games practically never do).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from mallocgame.errors import ComparisonError

__all__ = ["TIE_TOLERANCE", "VersusRow", "head_to_head", "format_versus", "summarize"]

TIE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class VersusRow:
    """One program's line: ``cells[seed] = (A's, B's)`` normalized rewards, ``None``
    where that solver has no valid record for the seed."""

    program: str
    buffers: int
    cells: dict[int, tuple[float | None, float | None]]

    def outcomes(self) -> list[int]:
        """Per seed where both have an answer, in seed order: +1 A ahead, 0 tie, -1 behind."""
        out = []
        for seed in sorted(self.cells):
            a, b = self.cells[seed]
            if a is not None and b is not None:
                out.append(_compare(a, b))
        return out

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
        """Mean over common seeds of ``A / B - 1`` (a fraction), ``None`` with none."""
        leads = [a / b - 1.0 for a, b in self.cells.values() if a is not None and b is not None and b > 0]
        return statistics.fmean(leads) if leads else None


def _compare(a: float, b: float) -> int:
    if abs(a - b) <= TIE_TOLERANCE * max(abs(a), abs(b)):
        return 0
    return 1 if a > b else -1


def head_to_head(records: list[dict[str, Any]], a: str, b: str) -> list[VersusRow]:
    """Rows for every program where A or B has a record, smallest program first.

    ``records`` must already be the comparison's (one budget, one setting per solver);
    invalid records count as no answer. Two records for the same (program, solver,
    seed) raise :class:`ComparisonError`: which one the table shows would be a guess.
    """
    if a == b:
        raise ComparisonError(f"compare two different solvers, not {a!r} with itself")
    values: dict[tuple[str, str, int], float | None] = {}
    buffers: dict[str, int] = {}
    for r in records:
        if r.get("solver") not in (a, b):
            continue
        key = (r["program"], r["solver"], int(r["seed"]))
        if key in values:
            raise ComparisonError(f"two records for {key[0]} {key[1]} seed {key[2]}: give one folder per setting")
        values[key] = float(r["normalized_reward"]) if r.get("valid") else None
        buffers[r["program"]] = int(r.get("buffers") or 0)
    rows = []
    for program in sorted(buffers, key=lambda p: (buffers[p], p)):
        seeds = sorted({seed for (p, _, seed) in values if p == program})
        cells = {seed: (values.get((program, a, seed)), values.get((program, b, seed))) for seed in seeds}
        rows.append(VersusRow(program, buffers[program], cells))
    return rows


def _pair(a: float | None, b: float | None) -> str:
    """``A / B`` with the better one bold, at 4 digits, or 6 where 4 would hide a difference."""
    if a is None or b is None:
        return " / ".join("—" if v is None else f"{v:.4f}" for v in (a, b))
    digits = 6 if f"{a:.4f}" == f"{b:.4f}" and _compare(a, b) != 0 else 4
    text = [f"{a:.{digits}f}", f"{b:.{digits}f}"]
    outcome = _compare(a, b)
    if outcome:
        text[0 if outcome > 0 else 1] = f"**{text[0 if outcome > 0 else 1]}**"
    return " / ".join(text)


def format_versus(rows: list[VersusRow], a: str, b: str) -> str:
    """A Markdown table: per program each seed's ``A / B`` (bold: the better), A's
    wins–ties–losses and mean lead."""
    seeds = sorted({seed for row in rows for seed in row.cells})
    lines = [
        "| program | buffers | " + " | ".join(f"seed {s}: {a} / {b}" for s in seeds) + " | W–T–L | mean lead |",
        "| --- | ---: |" + " ---: |" * (len(seeds) + 2),
    ]
    for row in rows:
        cells = [_pair(*row.cells[s]) if s in row.cells else "—" for s in seeds]
        results = row.outcomes()
        lead = row.mean_lead()
        lines.append(
            f"| {row.program} | {row.buffers:,} | " + " | ".join(cells)
            + f" | {results.count(1)}–{results.count(0)}–{results.count(-1)} | "
            + ("—" if lead is None else f"{lead:+.3%}") + " |"
        )
    return "\n".join(lines)


def summarize(rows: list[VersusRow], a: str, b: str) -> str:
    """Two lines: A against B over the (program, seed) cells, and over the programs."""
    results = [x for row in rows for x in row.outcomes()]
    verdicts = [row.verdict() for row in rows]
    return (
        f"cells: {a} ahead in {results.count(1)}, level in {results.count(0)}, "
        f"behind in {results.count(-1)} of {len(results)} against {b}\n"
        f"programs: ahead on {verdicts.count('ahead')}, level on {verdicts.count('level')}, "
        f"split on {verdicts.count('split')}, behind on {verdicts.count('behind')} of "
        f"{sum(v != '—' for v in verdicts)}"
    )
