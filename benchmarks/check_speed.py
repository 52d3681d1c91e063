"""Checker speed: `check_solution` (replay + physical check) on synthetic programs.

Usage: ``python benchmarks/check_speed.py [--sizes 1000 4000 16000]``
"""

from __future__ import annotations

import argparse
import time

from mallocgame.bench.inputs import at_least
from mallocgame.check import check_solution, physical_check
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.workloads.synthetic import generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=at_least(1), nargs="+", default=[1000, 4000, 16000])
    args = parser.parse_args()
    print(f"{'buffers':>8} {'allocations':>12} {'physical (s)':>13} {'full check (s)':>15}")
    for n in args.sizes:
        inst = generate(n, seed=0, version=1)  # the instances of docs/results.md's speeds
        solution = get_solver("random").solve(inst, SolveRequest(seed=0))
        start = time.perf_counter()
        assert not physical_check(inst, solution.allocations)
        physical_s = time.perf_counter() - start
        start = time.perf_counter()
        assert check_solution(inst, solution).ok
        full_s = time.perf_counter() - start
        print(f"{n:>8} {len(solution.allocations):>12} {physical_s:>13.3f} {full_s:>15.3f}")


if __name__ == "__main__":
    main()
