"""Issue #43 on a real GPU: run answers of a few programs for real and compare with the simulator.

Measures the machine (HBM copy, pinned host <-> HBM copies, a kernel reading and one
writing host-mapped memory, fp32 / TF32 / bf16 matmul, per-op overhead), then for each
program (an MLP, a BERT encoder, ResNet-50, training steps of an MLP and a BERT;
:data:`mallocgame.runtime.bench.PROGRAMS`)
derives its ``gpu_hbm_host`` instance with the fast memory a quarter of its peak live
bytes, computes the placements (framework default, drop, heuristic, greedy, first-touch,
random x3, es), checks and simulates each, and runs each for real with its tensors in
HBM or host-mapped memory as the answer says (median of 15 steps after 3 warm-up runs);
then the Spearman rank correlation and mean relative error per program. Everything the
job does: :mod:`mallocgame.runtime.bench`; the apply path: docs/runtime.md.

Usage (on the device, from the repository root)::

    PYTHONPATH=src python3 benchmarks/device_real.py --out "$OUT"
    PYTHONPATH=src python3 benchmarks/device_real.py --dry-run --out /tmp/dry   # CPU, tiny sizes

Also PyTorch's own steps (eager; for the training programs, eager with ``save_on_cpu``)
and per-op times of the framework default and ``drop`` against the cost model's.

Writes under ``--out``: calibration.csv, results.csv, summary.csv, ops.csv,
op_summary.csv, hbm_steps.csv, programs.json.gz, run.log (each flushed as it grows), and
real.md (the rows as a Markdown table; ``--table-only``: print it from an earlier run's
results.csv, on any machine) and real.png at the end (``--no-plot``: not;
``--plot-only``: only it, from an earlier run's results.csv, on any machine).
``--resume`` keeps what an earlier run in ``--out`` finished (whole programs) and runs
the rest. Stops measuring
after ``--seconds`` (330) and always exits 0 after writing what it has, unless the
arguments are bad (exit 2).
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # solvers must not take the GPU (nor preallocate it)
os.environ.setdefault("PYTHONUNBUFFERED", "1")

import argparse
import sys
import time
from pathlib import Path

from mallocgame.bench.inputs import at_least
from mallocgame.limits import MAX_SECONDS
from mallocgame.runtime.cli import _number  # bench real's ranges, the same here


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", required=True, type=Path, help="directory for the CSVs and the log"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="on the CPU with tiny programs (a test)"
    )
    parser.add_argument(
        "--device", choices=("cuda", "cpu"), default=None, help="default: cuda (cpu with --dry-run)"
    )
    parser.add_argument("--programs", nargs="+", default=None, help="default: mlp bert resnet50")
    parser.add_argument(
        "--placements", nargs="+", default=None, help="solver specs NAME or NAME:SEED"
    )
    parser.add_argument(
        "--seconds",
        type=_number(1.0, MAX_SECONDS),
        default=330.0,
        help="stop measuring after this (s)",
    )
    parser.add_argument("--steps", type=at_least(1), default=15, help="timed runs per placement")
    parser.add_argument(
        "--warmup",
        type=at_least(1),
        default=3,
        help="untimed runs per placement (the first, whose results are checked, included)",
    )
    parser.add_argument("--work", type=at_least(1), default=64, help="games for es and random")
    parser.add_argument(
        "--capacity-fraction",
        type=_number(1e-6, 1.0),
        default=0.25,
        help="fast memory / peak live bytes",
    )
    parser.add_argument(
        "--answers",
        type=Path,
        default=None,
        help="directory of extra solution files (*.json), or an earlier run's programs.json.gz "
        "(the answers it was given)",
    )
    parser.add_argument("--host-alloc", choices=("auto", "cupy", "torch-pinned"), default="auto")
    parser.add_argument(
        "--preset", default="gpu_hbm_host", help="the preset instances are derived on"
    )
    parser.add_argument("--no-calibrate", action="store_true", help="skip the machine's figures")
    parser.add_argument(
        "--no-framework", action="store_true", help="skip PyTorch's eager and save_on_cpu steps"
    )
    parser.add_argument(
        "--profile",
        nargs="*",
        default=None,
        help="placements profiled per op, by their labels (default: hbm-resident, and drop "
        "where --placements has it; --profile alone: none)",
    )
    parser.add_argument(
        "--profile-repeats", type=at_least(1), default=3, help="marked runs per profile"
    )
    parser.add_argument("--no-plot", action="store_true", help="draw no real.png at the end")
    parser.add_argument(
        "--hbm-limit",
        type=_number(1e-3, 1e3),
        default=None,
        metavar="MULTIPLE",
        help="cap the allocator per program at what it holds plus MULTIPLE x the fast memory",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the programs an earlier run in --out finished (and its machine figures)",
    )
    parser.add_argument(
        "--stage-dot-reads",
        action="store_true",
        help="measure each answer again with its matmuls reading their host operands through "
        "an HBM scratch copy (rows LABEL+staged-dots, simulated on the staged preset)",
    )
    parser.add_argument(
        "--plot-only",
        action="store_true",
        help="draw OUT/real.png from OUT/results.csv of an earlier run and stop (no GPU)",
    )
    parser.add_argument(
        "--table-only",
        action="store_true",
        help="print OUT/results.csv of an earlier run as a Markdown table and stop (no GPU)",
    )
    args = parser.parse_args(argv)

    if args.table_only:
        from mallocgame.errors import MallocGameError
        from mallocgame.runtime.bench_table import real_results_table

        try:
            print(real_results_table(args.out / "results.csv"), end="")
        except MallocGameError as exc:
            print(f"device_real: {exc}", file=sys.stderr)
            return 2
        return 0

    if args.plot_only:
        from mallocgame.errors import MallocGameError
        from mallocgame.runtime.bench_plot import plot_real_results

        try:
            plot_real_results(args.out / "results.csv", args.out / "real.png")
        except MallocGameError as exc:
            print(f"device_real: {exc}", file=sys.stderr)
            return 2
        return 0

    from mallocgame.errors import MallocGameError
    from mallocgame.runtime.bench import PROGRAMS, BenchConfig, run_real_bench

    programs = tuple(args.programs or ("mlp", "bert", "resnet50"))
    unknown = [p for p in programs if p not in PROGRAMS]
    if unknown:
        print(
            f"device_real: unknown program {unknown[0]!r} (have: {', '.join(PROGRAMS)})",
            file=sys.stderr,
        )
        return 2
    config = BenchConfig(
        out=args.out,
        device=args.device or ("cpu" if args.dry_run else "cuda"),
        tiny=args.dry_run,
        programs=programs,
        capacity_fraction=args.capacity_fraction,
        preset=args.preset,
        work=args.work if not args.dry_run else min(args.work, 8),
        warmup=args.warmup if not args.dry_run else 1,
        steps=args.steps if not args.dry_run else 3,
        seconds=args.seconds,
        calibrate=not args.no_calibrate,
        framework=not args.no_framework,
        plot=not args.no_plot,
        resume=args.resume,
        hbm_limit=args.hbm_limit,
        stage_dot_reads=args.stage_dot_reads,
        profile_repeats=args.profile_repeats,
        **({"profile": tuple(args.profile)} if args.profile is not None else {}),
        answers=args.answers,
        host_alloc=args.host_alloc,
        started=started,
        **({"placements": tuple(args.placements)} if args.placements else {}),
    )
    try:
        run_real_bench(config)
    except MallocGameError as exc:  # no GPU, a bad answers directory: one line
        print(f"device_real: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
