"""First-run cost: seconds numba takes to compile the game's and the heuristic's kernels.

A fresh install (or a CI clone) has no numba cache, so its first ``solve`` compiles every
kernel it calls. Each run here is a child process with an empty cache folder
(``NUMBA_CACHE_DIR``) that solves one small program with ``heuristic``, ``greedy`` and
``es`` (one game each): the kernels of the game, its Drop-backup and the heuristic. It
prints that solve's seconds and the kernels that took longest to compile (numba's
``numba:compile`` events, which nest: a kernel's time includes its callees' first
compilation).

Usage: ``python benchmarks/kernel_compile.py [--runs N] [--src SRC ...]``: with several
``--src`` folders (checkouts' ``src``), their runs alternate, so that a slower spell of a
shared machine falls on both. A line per run as it ends, then a summary per source.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from mallocgame.bench.inputs import at_least

PROGRAM = "xla-v1/lstm_infer"
SOLVERS = ("heuristic", "greedy", "es")

_CHILD = """
import json, os, sys, time
import mallocgame
from numba.core import event
recorder = event.RecordingListener()
event.register("numba:compile", recorder)
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads.registry import load_workload
inst = load_workload(sys.argv[1])
start = time.perf_counter()
for solver in sys.argv[2:]:
    get_solver(solver).solve(inst, SolveRequest(seed=0, work=1))
solve_s = time.perf_counter() - start
opened, kernels = {}, {}
for stamp, ev in recorder.buffer:
    key = id(ev.data["dispatcher"]), str(ev.data.get("args"))
    if ev.is_start:
        opened[key] = stamp
    else:
        name = ev.data["dispatcher"].py_func.__qualname__
        kernels[name] = max(kernels.get(name, 0.0), stamp - opened.pop(key, stamp))
src = os.path.dirname(os.path.dirname(mallocgame.__file__))
print(json.dumps({"src": src, "solve_s": solve_s, "kernels": kernels}))
"""


def run_cold(src: Path | None, program: str = PROGRAM, solvers: tuple[str, ...] = SOLVERS) -> dict:
    """One child process with an empty numba cache that solves ``program`` with each of
    ``solvers``: ``{"src": the folder it imported mallocgame from, "solve_s": seconds,
    "kernels": {name: compile seconds}}``. Exits with one line (the child's last error
    line) where the child fails, or where ``src`` is given and the child imported
    mallocgame from elsewhere."""
    with tempfile.TemporaryDirectory(prefix="numba-cold-") as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "JAX_PLATFORMS": "cpu"}
        if src is not None:
            env["PYTHONPATH"] = str(src)
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, program, *solvers],
            env=env,
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        said = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        raise SystemExit(f"{src or 'installed'}: the cold run failed: {said[-1]}")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    if src is not None and Path(got["src"]).resolve() != src.resolve():
        raise SystemExit(f"--src {src}: the child imported mallocgame from {got['src']}")
    return got


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=at_least(1), default=2, help="cold runs per source (default 2)"
    )
    parser.add_argument(
        "--src", type=Path, nargs="*", default=[], help="src folders to compare (default: this)"
    )
    parser.add_argument("--top", type=at_least(0), default=8, help="kernels listed per source")
    args = parser.parse_args(argv)
    for src in args.src:
        if not (src / "mallocgame").is_dir():
            parser.error(f"--src {src}: no mallocgame package there")
    sources: list[Path | None] = list(args.src) or [None]
    results: dict[str, list[dict]] = {str(s or "installed"): [] for s in sources}
    print(f"{PROGRAM}, {' + '.join(SOLVERS)}, empty numba cache, {args.runs} runs each")
    for run in range(1, args.runs + 1):
        for src in sources:
            got = run_cold(src)
            results[str(src or "installed")].append(got)
            print(
                f"run {run}/{args.runs}, {src or 'installed'}: {got['solve_s']:.1f} s", flush=True
            )
    for name, runs in results.items():
        seconds = [r["solve_s"] for r in runs]
        print(
            f"{name}: first solve {statistics.median(seconds):.1f} s (median; runs "
            + ", ".join(f"{s:.1f}" for s in seconds)
            + ")"
        )
        slowest = sorted(runs[-1]["kernels"].items(), key=lambda kv: -kv[1])[: args.top]
        for kernel, compile_s in slowest:
            print(f"    {compile_s:6.2f} s  {kernel}")


if __name__ == "__main__":
    main()
