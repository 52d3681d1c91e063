"""Does an answer steer XLA's TPU memory-space assignment? One record per (program, mode).

For each ``tpu-v1`` program of ``--programs`` (default: every one), the answer of
``--solver`` (default ``heuristic``; ``--seconds`` for a timed solver, seed 0) on the
program's instance is turned into libtpu's sort-order flag
(:mod:`mallocgame.runtime.tpu_steer`, each of ``--modes``), the model is compiled again
with it, and what XLA then placed is compared with its frozen, unsteered placement: the
share of the answer's fast-memory byte-steps XLA follows, and the simulated latency of
XLA's legal answers. Records (JSON lines) go to ``--out``, each with its ``budget_s``
(``--seconds``, ``null`` where none was given); a (program, mode, solver, budget) with a
record is skipped (a record without ``budget_s``, from before it was kept, matches none).
A line of ``--out`` that is not such a record is one line on stderr and exit 2.

Usage::

    python benchmarks/tpu_steering.py --programs tpu-v1/gru_infer_b512-v4 \\
        --out results/tpu/steering.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def _record(name: str, mode: str, solver: str, seconds: float | None) -> dict:
    from mallocgame.runtime.tpu_steer import steer_jax_tpu
    from mallocgame.solvers import SolveRequest, get_solver
    from mallocgame.workloads.suite import model_programs, suite_instance, suite_placement

    instance = suite_instance(name)
    placement = suite_placement(name)
    assert placement is not None, name
    short = name.removeprefix("tpu-v1/")
    model, _, generation = short.rpartition("-")
    answer = get_solver(solver).solve(instance, SolveRequest(seed=0, seconds=seconds))
    fn, example, jit_kwargs = model_programs("tpu-v1")[model].build()
    started = time.perf_counter()
    report = steer_jax_tpu(
        fn,
        *example,
        target=f"tpu-{generation}",
        instance=instance,
        answer=answer,
        placement=placement,
        mode=mode,
        **jit_kwargs,
    )
    return {
        "promoted": len(report.flags.promoted),
        "demoted": len(report.flags.demoted),
        "flag_chars": len(report.flags.sort_order_overrides),
        "followed_unsteered": round(report.followed_unsteered, 4),
        "followed_steered": round(report.followed_steered, 4),
        "unsteered_latency_s": report.unsteered_latency_s,
        "steered_latency_s": report.steered_latency_s,
        "answer_latency_s": report.answer_latency_s,
        "unsteered_reward": round(report.unsteered_reward, 4),
        "steered_reward": round(report.steered_reward, 4),
        "answer_reward": round(report.answer_reward, 4),
        "copies": [report.unsteered_copies, report.steered_copies],
        "seconds": round(time.perf_counter() - started, 1),
    }


FIGURE_FIELDS = (
    "program",
    "mode",
    "followed_unsteered",
    "followed_steered",
    "unsteered_latency_s",
    "steered_latency_s",
    "answer_latency_s",
)
"""What a record needs to be drawn (:func:`_draw`)."""


def _read_records(path: Path, fields: tuple[str, ...]) -> list[dict]:
    """The records (JSON lines) of ``path``, each an object with ``fields``;
    :class:`ValueError` naming the first line that is not one, :class:`OSError` where
    ``path`` cannot be read."""
    records = []
    for number, line in enumerate(path.read_bytes().split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:  # a UnicodeDecodeError too
            raise ValueError(f"{path}: line {number} is not JSON ({exc})") from None
        if not isinstance(record, dict) or not set(fields) <= set(record):
            raise ValueError(
                f"{path}: line {number} is not a steering record (with {', '.join(fields)})"
            )
        records.append(record)
    return records


def _draw(records: list[dict], path: Path) -> None:
    """Per program: the share of the answer XLA follows without and with the flag (left),
    and the simulated speedup of XLA's steered placement and of the answer over XLA's
    unsteered one (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = sorted(records, key=lambda r: r["followed_steered"] - r["followed_unsteered"])
    names = [r["program"].split("/")[-1] for r in records]
    y = range(len(records))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.32 * len(records) + 1.5), sharey=True)
    for i, r in enumerate(records):
        left.plot([r["followed_unsteered"], r["followed_steered"]], [i, i], color="0.7", zorder=1)
    left.scatter([r["followed_unsteered"] for r in records], y, label="XLA alone", zorder=2)
    left.scatter([r["followed_steered"] for r in records], y, label="XLA with the flag", zorder=2)
    left.set_xlabel("share of the answer's fast-memory byte-steps XLA's placement has")
    left.set_yticks(list(y), names, fontsize=8)
    left.legend(loc="lower right", fontsize=8)
    steered = [r["unsteered_latency_s"] / r["steered_latency_s"] for r in records]
    answer = [r["unsteered_latency_s"] / r["answer_latency_s"] for r in records]
    right.scatter(steered, y, label="XLA with the flag", color="C1", zorder=2)
    right.scatter(answer, y, label="the answer (heuristic)", marker="|", s=120, color="k")
    right.axvline(1.0, color="0.7", zorder=1)
    right.set_xlabel("simulated speedup over XLA alone")
    right.legend(loc="lower right", fontsize=8)
    fig.suptitle("Steering libtpu's memory-space assignment with an answer (tpu-v1)")
    fig.tight_layout()
    fig.savefig(path, dpi=120, format="png")


def main() -> None:
    from mallocgame.bench.inputs import seconds_arg
    from mallocgame.runtime.tpu_steer import MODES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", nargs="*", help="tpu-v1 programs (default: every one)")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--solver", default="heuristic")
    parser.add_argument("--seconds", type=seconds_arg, default=None)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--figure", type=Path, help="draw the records of --out (mode diff) to this PNG and stop"
    )
    args = parser.parse_args()
    from mallocgame.errors import MallocGameError
    from mallocgame.fileio import check_writable

    if args.figure is not None:
        try:
            records = _read_records(args.out, FIGURE_FIELDS)
            check_writable(args.figure)
        except OSError as exc:
            parser.error(f"--out {args.out}: {exc.strerror or exc}")
        except (MallocGameError, ValueError) as exc:
            parser.error(str(exc))
        records = [r for r in records if r["mode"] == "diff"]
        if not records:
            parser.error(f"--out {args.out}: no record of mode diff to draw")
        args.figure.parent.mkdir(parents=True, exist_ok=True)
        _draw(records, args.figure)
        return
    from mallocgame.solvers import get_solver
    from mallocgame.workloads.suite import suite_names

    unknown = sorted(set(args.programs or ()) - set(suite_names("tpu-v1")))
    if unknown:
        parser.error(f"--programs {' '.join(unknown)}: not tpu-v1 programs (see 'mallocgame list')")
    try:
        get_solver(args.solver)
    except MallocGameError as exc:
        parser.error(str(exc))

    try:
        check_writable(args.out)
        records = (
            _read_records(args.out, ("program", "mode", "solver")) if args.out.is_file() else []
        )
    except OSError as exc:
        parser.error(f"--out {args.out}: {exc.strerror or exc}")
    except (MallocGameError, ValueError) as exc:
        parser.error(str(exc))
    unbudgeted = sum("budget_s" not in r for r in records)
    if unbudgeted:
        print(
            f"{args.out}: {unbudgeted} records keep no budget_s (written before it was kept): "
            "none is taken for a run of this one",
            file=sys.stderr,
        )
    done = {
        (r["program"], r["mode"], r["solver"], r["budget_s"])
        for r in records
        if "budget_s" in r and isinstance(r["budget_s"], (int, float, type(None)))
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for name in args.programs or suite_names("tpu-v1"):
        for mode in args.modes:
            if (name, mode, args.solver, args.seconds) in done:
                continue
            record = {"program": name, "mode": mode, "solver": args.solver}
            record["budget_s"] = args.seconds
            record.update(_record(name, mode, args.solver, args.seconds))
            with args.out.open("a") as out:
                out.write(json.dumps(record) + "\n")
            print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
