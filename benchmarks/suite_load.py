"""Suite loading: seconds to read each frozen program and derive its instance.

Usage: ``python benchmarks/suite_load.py``
"""

from __future__ import annotations

import time

from mallocgame.costmodel import derive_instance
from mallocgame.program import load_program
from mallocgame.workloads.suite import DEFAULT_PRESET, program_path, suite_names


def main() -> None:
    print(f"{'program':<32} {'buffers':>8} {'load (s)':>9} {'derive (s)':>11}")
    for name in suite_names():
        start = time.perf_counter()
        program = load_program(program_path(name))
        loaded = time.perf_counter() - start
        start = time.perf_counter()
        derive_instance(program, DEFAULT_PRESET, name=name)
        derived = time.perf_counter() - start
        print(f"{name:<32} {program.num_buffers:>8} {loaded:>9.3f} {derived:>11.3f}")


if __name__ == "__main__":
    main()
