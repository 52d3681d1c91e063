"""Wall-clock budgets kept: a solver's wall time against the budget it was given.

Each run is a child process that first solves ``synthetic-v1/small`` for 2 s (so that
numba and JAX have compiled what they compile once), then solves ``PROGRAM`` with the
wall-clock budget of ``PROGRAM@SECONDS`` and the seed 0, and reports the seconds the solve
took, the candidate chosen and those left out (``muzero-prod``'s ``info``). With several
``--src`` folders (checkouts' ``src``), the sources alternate for each program, so that a
slower spell of a shared machine falls on both.

Usage: ``python benchmarks/budget_keeping.py [--solver NAME] [--src SRC] ...
PROGRAM@SECONDS ...``; pin it (``taskset -c 0``) to measure on one core.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from mallocgame.bench.inputs import seconds_arg
from mallocgame.errors import MallocGameError
from mallocgame.solvers import get_solver
from mallocgame.workloads.registry import check_workload

WARM_UP = "synthetic-v1/small"

_CHILD = """
import json, os, sys, time
import mallocgame
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads.registry import load_workload
if __name__ == "__main__":
    solver, program, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    get_solver(solver).solve(load_workload(sys.argv[4]), SolveRequest(seed=0, seconds=2.0))
    inst = load_workload(program)
    start = time.perf_counter()
    answer = get_solver(solver).solve(inst, SolveRequest(seed=0, seconds=seconds))
    wall_s = time.perf_counter() - start
    print(json.dumps({
        "src": os.path.dirname(os.path.dirname(mallocgame.__file__)),
        "buffers": inst.num_buffers,
        "wall_s": wall_s,
        "chosen": answer.info.get("chosen", solver),
        "left_out": answer.info.get("left_out", []),
        "games": answer.work.get("games"),
    }))
"""


def run_child(src: Path | None, solver: str, program: str, seconds: float) -> dict:
    """One child process that solves ``program`` with ``solver`` in ``seconds`` (after the
    warm-up): ``{"src", "buffers", "wall_s", "chosen", "left_out", "games"}``, ``src`` the
    folder it imported mallocgame from. Exits with one line (the child's last error line)
    where the child fails, or where ``src`` is given and the child imported mallocgame from
    elsewhere."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, solver, program, repr(seconds), WARM_UP],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        said = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        raise SystemExit(f"{src or 'installed'}: {solver} on {program} failed: {said[-1]}")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    if src is not None and Path(got["src"]).resolve() != src.resolve():
        raise SystemExit(f"--src {src}: the child imported mallocgame from {got['src']}")
    return got


def parse_job(text: str) -> tuple[str, float]:
    """``PROGRAM@SECONDS`` as ``(program, seconds)``."""
    program, _, seconds = text.rpartition("@")
    if not program or not seconds:
        raise argparse.ArgumentTypeError(f"expected PROGRAM@SECONDS, not {text!r}")
    try:
        return program, seconds_arg(seconds)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{text}: SECONDS: {exc}") from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", nargs="+", type=parse_job, metavar="PROGRAM@SECONDS")
    parser.add_argument("--solver", default="muzero-prod", help="default muzero-prod")
    parser.add_argument(
        "--src",
        type=Path,
        action="append",
        default=[],
        help="a src folder to compare (repeat; default: the installed package)",
    )
    args = parser.parse_intermixed_args(argv)
    for src in args.src:
        if not (src / "mallocgame").is_dir():
            parser.error(f"--src {src}: no mallocgame package there")
    try:  # what the children would refuse after their warm-up
        get_solver(args.solver)
        for program, _ in args.jobs:
            check_workload(program)
    except MallocGameError as exc:
        parser.error(str(exc))
    sources: list[Path | None] = list(args.src) or [None]
    print(f"{args.solver}, seed 0; wall-clock seconds of the solve against its budget")
    print(f"{'program':<40} {'buffers':>7} {'budget':>7} {'wall':>7} {'over':>6}  source: chosen")
    for program, seconds in args.jobs:
        for src in sources:
            got = run_child(src, args.solver, program, seconds)
            left_out = f" (left out: {', '.join(got['left_out'])})" if got["left_out"] else ""
            print(
                f"{program:<40} {got['buffers']:>7} {seconds:>7g} {got['wall_s']:>7.1f} "
                f"{got['wall_s'] / seconds:>6.2f}  {src or 'installed'}: {got['chosen']}"
                f"{left_out}",
                flush=True,
            )


if __name__ == "__main__":
    main()
