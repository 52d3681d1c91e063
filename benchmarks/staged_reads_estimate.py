"""What staged matmul reads would save, estimated from measured per-op times.

From two `bench real` runs of one program on one machine: the per-op profile of `drop`
(every buffer in host memory, matmuls reading their operands in place; `--inplace RUN`)
and of `hbm-resident` (everything in HBM; `--hbm RUN`), each matmul (`mm`, `addmm`, `bmm`,
`baddbmm`) is estimated as it would run with `stage_dot_reads`: its operands copied to
HBM at the run's measured copy bandwidth, then the op at its all-in-HBM time, or the time
to write its outputs to host memory at the measured rate, whichever is longer. Prints
the matmuls' measured time in place, their estimate staged, and the `drop` step's
per-op total with the matmuls replaced by the estimate. An estimate, not a measurement:
`bench real --stage-dot-reads` measures it.

    python benchmarks/staged_reads_estimate.py --program bert-small-train \
        --inplace docs/results/gpu-real-h200-capped/call4-cap2.5 \
        --hbm docs/results/gpu-real-h200-capped/call6-fast0.33
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import sys
from pathlib import Path

DOTS = ("mm", "addmm", "bmm", "baddbmm")


def _profile(run: Path, program: str, placement: str) -> dict[int, dict[str, str]]:
    with (run / "ops.csv").open() as f:
        rows = {
            int(r["index"]): r
            for r in csv.DictReader(f)
            if r["program"] == program and r["placement"] == placement
        }
    if not rows:
        raise ValueError(f"{run}/ops.csv has no per-op profile of {placement} for {program}")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--program", required=True)
    parser.add_argument("--inplace", type=Path, required=True, help="a run profiling drop")
    parser.add_argument("--hbm", type=Path, required=True, help="a run profiling hbm-resident")
    args = parser.parse_args(argv)
    try:
        inplace = _profile(args.inplace, args.program, "drop")
        hbm = _profile(args.hbm, args.program, "hbm-resident")
        with gzip.open(args.inplace / "programs.json.gz", "rt") as f:
            instance = json.load(f)[args.program]["instance"]
        with (args.inplace / "calibration.csv").open() as f:
            figures = {r["name"]: float(r["value"]) for r in csv.DictReader(f)}
        copy_bw = min(figures["copy_in_bandwidth"], figures["copy_out_bandwidth"])
        write_bw = figures["slow_write_bandwidth"]
    except (OSError, ValueError, KeyError, EOFError) as exc:
        print(f"staged_reads_estimate: {exc}", file=sys.stderr)
        return 2
    buffers = {b["id"]: b for b in instance["buffers"]}
    measured = staged = 0.0
    matmuls = 0
    for t, row in inplace.items():
        if row["opcode"] not in DOTS:
            continue
        matmuls += 1
        own = [buffers[b] for b in instance["instructions"][t]["buffers"]]
        read = sum(b["size"] for b in own if not b["is_output"])
        written = sum(b["size"] for b in own if b["is_output"])
        measured += float(row["measured_s"])
        staged += read / copy_bw + max(float(hbm[t]["measured_s"]), written / write_bw)
    total = sum(float(r["measured_s"]) for r in inplace.values())
    print(
        f"{args.program}: {matmuls} matmuls, in place {measured * 1e3:.1f} ms measured, staged "
        f"{staged * 1e3:.1f} ms estimated (copies at {copy_bw / 1e9:.1f} GB/s); drop's step "
        f"{total * 1e3:.1f} ms measured per op, {(total - measured + staged) * 1e3:.1f} ms "
        "with staged matmuls (estimate)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
