"""The shared agent on programs it never saw: one table from the sweeps that measure it.

Each variant is a sweep directory of ``mallocgame bench speedups`` records (run with
``benchmarks/pinned_sweep.py``; docs/results.md gives the commands): the shared agent
zero-shot (``muzero`` with ``init=AGENT learning=false``, no demonstrations, 10 s of search),
fine-tuned for 60 s (``init=AGENT``), ``muzero`` from scratch for 60 s and 600 s,
``es`` and the heuristic at 60 s, and ``muzero-prod`` with and without the agent at
60 s; and the fine-tuned and fresh 60-s agents without the ``es`` demonstration
(``demonstrations=heuristic,greedy``); and the agent fine-tuned for 60 s with restarts
inside the best game (``restart_fraction=0.5``, ``muzero-prod``'s default), and a fresh
agent with the same restarts; and the agent fine-tuned with restarts and windows
(``restart_window=128``: a restarted game is searched for 128 moves, then played out along
the best game) or with restarts and without the ``es`` demonstration; and ``muzero-prod``
with the agent and windows (``restart_window=128``) beside today's ``muzero-prod`` run
again at the same time; and search alone (``learning=false`` with restarts and windows and
the demonstrations: the network is never trained, every second goes to search) with the
agent's network and with a fresh one. Every number is
recomputed from the record's solution (:class:`mallocgame.bench.recheck.Rechecker`); a
missing record is a dash.

Usage::

    python benchmarks/shared_agent.py --programs $HOLD --root results/shared \\
        --csv docs/results/shared-agent/holdout-v1.csv > docs/results/shared-agent/holdout-v1.md
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from mallocgame.bench.recheck import Rechecker
from mallocgame.errors import MallocGameError
from mallocgame.fileio import check_writable, read_json, write_csv_atomic
from mallocgame.workloads.registry import check_workload


@dataclass(frozen=True)
class Variant:
    """One column: the sweep directory under ``--root``, its solver and budget tag."""

    column: str
    folder: str
    solver: str
    budget: str  # the record file's budget tag: t60 (seconds)


VARIANTS = (
    Variant("zero-shot", "zeroshot", "muzero", "t10"),
    Variant("shared 60 s", "finetune-60", "muzero", "t60"),
    Variant("scratch 60 s", "scratch-60", "muzero", "t60"),
    Variant("scratch 600 s", "scratch-600", "muzero", "t600"),
    Variant("es 60 s", "scratch-60", "es", "t60"),
    Variant("heuristic", "scratch-60", "heuristic", "t60"),
    Variant("prod+shared 60 s", "prod-shared-60", "muzero-prod", "t60"),
    Variant("prod 60 s", "prod-60", "muzero-prod", "t60"),
    Variant("shared 60 s, no es", "finetune-60-noes", "muzero", "t60"),
    Variant("scratch 60 s, no es", "scratch-60-noes", "muzero", "t60"),
    Variant("shared 60 s, restarts", "finetune-60-restart", "muzero", "t60"),
    Variant("scratch 60 s, restarts", "scratch-60-restart", "muzero", "t60"),
    Variant("shared 60 s, restarts, windows", "finetune-60-restart-window", "muzero", "t60"),
    Variant("shared 60 s, restarts, no es", "finetune-60-restart-noes", "muzero", "t60"),
    Variant("prod+shared 60 s, windows", "prod-shared-60-window", "muzero-prod", "t60"),
    Variant("prod 60 s, again", "prod-60-again", "muzero-prod", "t60"),
    Variant("shared 60 s, search only", "finetune-60-search-only", "muzero", "t60"),
    Variant("fresh 60 s, search only", "fresh-60-search-only", "muzero", "t60"),
)


def _record(root: Path, variant: Variant, program: str, seed: int) -> Path | None:
    stem = f"{program.replace('/', '-')}.{variant.solver}.s{seed}.{variant.budget}"
    found = sorted((root / variant.folder).glob(f"{stem}*.json"))
    return found[0] if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", nargs="+", required=True)
    parser.add_argument("--root", default="results/shared")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", default=None, help="also one row per program and variant")
    parser.add_argument(
        "--columns", nargs="+", default=None, help="only these columns, by name (default: all)"
    )
    args = parser.parse_args()
    root = Path(args.root)
    if not root.is_dir():
        parser.error(f"--root {root}: not a directory")
    variants = VARIANTS
    if args.columns:
        unknown = sorted(set(args.columns) - {v.column for v in VARIANTS})
        if unknown:
            parser.error(f"unknown columns {unknown}; known: {[v.column for v in VARIANTS]}")
        variants = tuple(v for v in VARIANTS if v.column in args.columns)
    try:  # every program and the CSV's place checked before the first record is read
        for program in args.programs:
            check_workload(program)
        if args.csv:
            check_writable(args.csv)
    except MallocGameError as exc:
        parser.error(str(exc))
    checker = Rechecker()
    rows: list[dict[str, object]] = []
    table: dict[str, dict[str, tuple[float, float] | None]] = {}
    for program in args.programs:
        table[program] = {}
        for variant in variants:
            path = _record(root, variant, program, args.seed)
            if path is None:
                table[program][variant.column] = None
                continue
            try:
                doc = read_json(path)
            except MallocGameError as exc:
                parser.error(str(exc))
            if not isinstance(doc, dict):
                parser.error(f"{path}: not a record (a JSON object)")
            record = checker.record(path, doc)
            if not record["valid"]:
                sys.exit(f"{path}: {record['failures']}")
            numbers = (float(record["normalized_reward"]), float(record["latency_s"]))
            table[program][variant.column] = numbers
            rows.append(
                {
                    "program": program,
                    "variant": variant.column,
                    "solver": variant.solver,
                    "normalized_reward": round(numbers[0], 6),
                    "latency_s": numbers[1],
                    "record": str(path),
                }
            )
    if not rows:
        parser.error(f"no record of these programs and columns under --root {root}")
    columns = [v.column for v in variants]
    print("normalized reward (higher is better); `muzero-prod`: speedup over the heuristic\n")
    print("| program | " + " | ".join(columns) + " |")
    print("| --- |" + " ---: |" * len(columns))
    for program, cells in table.items():
        base = cells.get("heuristic")
        shown = []
        for column in columns:
            cell = cells[column]
            if cell is None:
                shown.append("—")
            elif column.startswith("prod") and base is not None:
                shown.append(f"{base[1] / cell[1]:.4f}×")
            else:
                shown.append(f"{cell[0]:.4f}")
        print(f"| {program} | " + " | ".join(shown) + " |")
    print()
    _summary(table)
    if args.csv:
        write_csv_atomic(args.csv, list(rows[0]), [list(row.values()) for row in rows])


def _reward(cells: dict[str, tuple[float, float] | None], column: str) -> float:
    cell = cells.get(column)
    return cell[0] if cell is not None else math.nan


def _summary(table: dict[str, dict[str, tuple[float, float] | None]]) -> None:
    """The issue's two aims, counted over the programs with both numbers."""
    pairs = [
        ("shared 60 s", "scratch 600 s"),
        ("shared 60 s", "scratch 60 s"),
        ("zero-shot", "scratch 60 s"),
        ("shared 60 s", "es 60 s"),
        ("shared 60 s", "heuristic"),
        ("shared 60 s, no es", "scratch 60 s, no es"),
        ("shared 60 s, no es", "scratch 600 s"),
        ("shared 60 s, restarts", "scratch 600 s"),
        ("shared 60 s, restarts", "shared 60 s"),
        ("shared 60 s, restarts", "scratch 60 s, restarts"),
        ("shared 60 s, restarts", "es 60 s"),
        ("shared 60 s, restarts", "heuristic"),
        ("shared 60 s, restarts, windows", "scratch 600 s"),
        ("shared 60 s, search only", "scratch 600 s"),
        ("shared 60 s, search only", "shared 60 s, restarts, windows"),
        ("shared 60 s, search only", "fresh 60 s, search only"),
        ("fresh 60 s, search only", "scratch 600 s"),
    ]
    for a, b in pairs:
        both = [(_reward(c, a), _reward(c, b)) for c in table.values()]
        both = [(x, y) for x, y in both if not (math.isnan(x) or math.isnan(y))]
        if both:
            wins = sum(x >= y for x, y in both)
            print(f"- {a} at least as good as {b}: {wins}/{len(both)} programs")
    speedups = []
    for cells in table.values():
        base, shared, plain = (
            cells.get("heuristic"),
            cells.get("prod+shared 60 s"),
            cells.get("prod 60 s"),
        )
        if base is not None and shared is not None and plain is not None:
            speedups.append((base[1] / shared[1], base[1] / plain[1]))
    if speedups:
        n = len(speedups)
        mean_shared = sum(s for s, _ in speedups) / n
        mean_plain = sum(p for _, p in speedups) / n
        ahead = sum(s > p for s, p in speedups)
        print(
            f"- muzero-prod over the heuristic, mean speedup: with the shared agent "
            f"{mean_shared:.4f}, without {mean_plain:.4f} (with ahead on {ahead}/{n})"
        )


if __name__ == "__main__":
    main()
