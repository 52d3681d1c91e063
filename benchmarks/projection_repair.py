"""How much of the heuristic's mapping a game trajectory keeps, before and after the repair.

For each program: the ``heuristic`` solver's mapping (seed 0), projected onto the game
plainly (``repairs=0``) and with the repair (``--repairs``, default the library's); one
CSV row each with the mapping's normalized reward, both kept fractions, the repair's
replays and kept changes, the back-ups left, and the projection's wall-clock seconds
(the machine's: quote them with it). Deterministic apart from the seconds.

Usage::

    python benchmarks/projection_repair.py --suite xla-v2 --out docs/results/projection-repair.csv
    python benchmarks/projection_repair.py --programs xla-v2/bert_base_train_b32 xla-v1/gru_infer
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from mallocgame.errors import MallocGameError
from mallocgame.fileio import check_writable, write_csv_atomic
from mallocgame.solvers.heuristic import HeuristicSolver
from mallocgame.solvers.projection import DEFAULT_REPAIRS, project
from mallocgame.workloads.registry import check_workload, load_workload, workload_names

FIELDS = (
    "program",
    "buffers",
    "heuristic_reward",
    "kept_plain",
    "kept_repaired",
    "repair_replays",
    "repairs_kept",
    "backups",
    "plain_s",
    "repaired_s",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--suite", nargs="+", help="every program of these suites (e.g. xla-v1 xla-v2)"
    )
    which.add_argument("--programs", nargs="+")
    parser.add_argument("--repairs", type=int, default=DEFAULT_REPAIRS)
    parser.add_argument("--out", type=Path, help="CSV file (default: print only)")
    args = parser.parse_args()
    if args.repairs < 0:
        parser.error("--repairs must be at least 0")
    try:  # every suite and program, and the CSV's place, checked before the first solve
        if args.suite:
            known = {n.split("/")[0] for n in workload_names()}
            unknown = [s for s in args.suite if s not in known]
            if unknown:
                raise ValueError(
                    f"no suite {' '.join(unknown)} (the suites: {' '.join(sorted(known))})"
                )
        for name in args.programs or []:
            check_workload(name)
        if args.out:
            check_writable(args.out)
    except (MallocGameError, ValueError) as exc:
        parser.error(str(exc))
    names = args.programs or [n for n in workload_names() if n.split("/")[0] in args.suite]
    rows = []
    for name in names:
        inst = load_workload(name)
        mapping = HeuristicSolver().solve(inst)
        t0 = time.perf_counter()
        _plain, kept_plain = project(inst, mapping, repairs=0)
        t1 = time.perf_counter()
        repaired, kept = project(inst, mapping, repairs=args.repairs)
        t2 = time.perf_counter()
        row = dict(
            program=name,
            buffers=inst.num_buffers,
            heuristic_reward=f"{mapping.normalized_reward:.6f}",
            kept_plain=f"{kept_plain:.4f}",
            kept_repaired=f"{kept:.4f}",
            repair_replays=repaired.info["repair_replays"],
            repairs_kept=repaired.info["repairs_kept"],
            backups=repaired.info["backups"],
            plain_s=f"{t1 - t0:.2f}",
            repaired_s=f"{t2 - t1:.2f}",
        )
        rows.append(row)
        print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    if args.out:
        write_csv_atomic(args.out, FIELDS, [[row[k] for k in FIELDS] for row in rows])
        print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
