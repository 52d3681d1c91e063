"""Frozen programs against the frontend of today: each named suite program extracted again
(its model lowered by JAX for the CPU, or compiled by libtpu for a ``tpu-v1`` program) and
compared with its frozen file: the same instructions (names, in order), and its total
flops (each instruction's times its count) frozen and now, with how many instructions'
flops differ. Made to measure what the convolution count of the XLA frontend (valid
positions only) changes in the frozen suites: docs/suite.md, and
``docs/results/conv-flops-recount.csv``.

Usage: ``python benchmarks/conv_flops_recount.py --programs xla-v1/vae_train
tpu-v1/bert_base_train_b32-v5e ... [--out FILE.csv]``: a line a program as it is done,
then the CSV (written atomically).
"""

from __future__ import annotations

import argparse
import sys

from mallocgame.errors import MallocGameError
from mallocgame.fileio import check_writable, write_csv_atomic
from mallocgame.program import Program
from mallocgame.workloads.registry import check_workload
from mallocgame.workloads.suite import extract_model, model_programs, suite_of, suite_program

HEADER = [
    "program",
    "same_instructions",
    "instructions",
    "flops_frozen",
    "flops_reextracted",
    "ratio",
    "instructions_changed",
]


def extracted_again(name: str) -> Program:
    """The program of suite program ``name`` (``SUITE/NAME``, for ``tpu-v1``
    ``SUITE/MODEL-GEN``) as its suite's frontend extracts it today."""
    suite = suite_of(name)
    if suite is None or suite.frontend not in ("xla", "tpu"):
        raise ValueError(f"{name}: not a program of a suite extracted from JAX (xla, tpu)")
    rest = name.split("/", 1)[1]
    if suite.frontend == "tpu":
        model, gen = rest.rsplit("-", 1)
        return extract_model("tpu", model_programs(suite.name)[model], rest, f"tpu-{gen}")[0]
    return extract_model("xla", model_programs(suite.name)[rest], rest)[0]


def recount(name: str) -> list[object]:
    """``name``'s CSV row (:data:`HEADER`)."""
    frozen, now = suite_program(name), extracted_again(name)
    same = [i.name for i in frozen.instructions] == [i.name for i in now.instructions]
    total_frozen = sum(i.flops * i.count for i in frozen.instructions)
    total_now = sum(i.flops * i.count for i in now.instructions)
    changed = (
        sum(a.flops != b.flops for a, b in zip(frozen.instructions, now.instructions))
        if same
        else ""
    )
    ratio = f"{total_now / total_frozen:.4f}" if total_frozen else ""
    return [
        name,
        same,
        len(now.instructions),
        f"{total_frozen:.4g}",
        f"{total_now:.4g}",
        ratio,
        changed,
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", nargs="+", required=True, help="SUITE/NAME ...")
    parser.add_argument("--out", help="the CSV to write (default: none)")
    args = parser.parse_args(argv)
    try:  # every name and the CSV's place checked before the first compile
        for name in args.programs:
            check_workload(name)
            suite = suite_of(name)
            if suite is None or suite.frontend not in ("xla", "tpu"):
                raise ValueError(f"{name}: not a program of a suite extracted from JAX")
        if args.out:
            check_writable(args.out)
    except (MallocGameError, ValueError) as exc:
        parser.error(str(exc))
    rows = []
    for name in dict.fromkeys(args.programs):
        rows.append(recount(name))
        print(",".join(map(str, rows[-1])), file=sys.stderr)
    if args.out:
        write_csv_atomic(args.out, HEADER, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
