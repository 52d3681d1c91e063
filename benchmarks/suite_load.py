"""Suite loading: seconds to read each frozen program and derive its instance.

Usage: ``python benchmarks/suite_load.py [SUITE]`` (every suite by default). Each
program is derived as its bundled name is (its suite's preset and capacity rule).
"""

from __future__ import annotations

import argparse
import time

from mallocgame.costmodel import derive_instance
from mallocgame.program import load_program
from mallocgame.workloads.suite import SUITES, program_path, suite_names, suite_of, suite_preset


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", nargs="?", choices=list(SUITES), help="default: every suite")
    suite = parser.parse_args(argv).suite
    print(f"{'program':<40} {'buffers':>8} {'load (s)':>9} {'derive (s)':>11} {'total (s)':>10}")
    worst = total = 0.0
    for name in suite_names(suite):
        start = time.perf_counter()
        program = load_program(program_path(name))
        loaded = time.perf_counter() - start
        spec, preset = suite_of(name), suite_preset(name)
        start = time.perf_counter()
        derive_instance(program, preset, capacity_fraction=spec.capacity_fraction, name=name)
        derived = time.perf_counter() - start
        worst = max(worst, loaded + derived)
        total += loaded + derived
        print(
            f"{name:<40} {program.num_buffers:>8} {loaded:>9.3f} {derived:>11.3f} {loaded + derived:>10.3f}"
        )
    print(f"slowest: {worst:.3f} s; all {len(suite_names(suite))} programs: {total:.2f} s")


if __name__ == "__main__":
    main()
