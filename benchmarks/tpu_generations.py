"""Every tpu-sized ``xla-v2`` model compiled by libtpu for each TPU generation: does it read?

For each (model, target) of ``--targets`` (default: all four generations), this compiles
the model's program for the target (no TPU needed), extracts it with XLA's own placement,
makes XLA's placement a legal answer on the target's own preset (its whole fast memory,
as XLA had it) and checks it, and writes
one JSON record per line to ``--out`` (a (model, target) with a record that has no
``error`` is skipped, so an interrupted run goes on where it stopped and a refused one is
tried again; the last record of a pair counts; a last line cut off by an interrupted write
is said on stderr and left out, and removed before the run appends). A refusal of the
frontend is a record with ``error``; the run goes on. Any other line that is not a record,
a ``--summary`` of no file, and an ``--out`` where no file can be written are one line on
stderr and exit 2, before any compile.

Each record: ``model``, ``target``, ``seconds`` (compile + extract + answer, on this
machine), ``buffers``, ``instructions``, ``copies`` (XLA's copy-start/done pairs kept),
``spaces`` (every memory space XLA's placement names), ``packed_fast_bytes`` (the top
address XLA's raw placement reaches in the fast memory when packed by
:func:`~mallocgame.frontends.xla_placement.placement_solution`, in the game's buffer sizes),
``raw_failures`` (the rules XLA's raw placement breaks, by kind), ``legal_ok`` (the legal
answer passes ``check``), ``kept_fraction``, ``xla`` and
``heuristic`` (normalized latencies of XLA's legal answer and of the heuristic).

Usage::

    python benchmarks/tpu_generations.py --targets tpu-v5p tpu-v6e \\
        --out results/tpu/generations.jsonl
    python benchmarks/tpu_generations.py --summary --out results/tpu/generations.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def _packed_fast_bytes(instance, solution) -> int:  # type: ignore[no-untyped-def]
    """The top of the fast memory the solution's allocations reach (offset + aligned size)."""
    hardware = instance.hardware
    return max(
        (
            a.offset + hardware.aligned(instance.buffers[a.buffer].size)
            for a in solution.allocations
        ),
        default=0,
    )


def _survey(model_name: str, model, target: str) -> dict:  # type: ignore[no-untyped-def]
    from mallocgame.check import check_solution
    from mallocgame.costmodel import derive_instance
    from mallocgame.frontends.tpu import fast_spaces_of, tpu_target
    from mallocgame.solvers import SolveRequest, get_solver
    from mallocgame.solvers.xla_answer import xla_answer
    from mallocgame.workloads.suite import extract_model

    started = time.perf_counter()
    program, placement = extract_model("tpu", model, model_name, target)
    assert placement is not None
    preset = tpu_target(target).preset
    instance = derive_instance(
        program, preset, capacity_fraction=None, name=f"{model_name}-{target}"
    )
    answer = xla_answer(instance, placement, fast_spaces_of(target))
    heuristic = get_solver("heuristic").solve(instance, SolveRequest(seed=0))
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "buffers": instance.num_buffers,
        "instructions": len(program.instructions),
        "copies": len(placement.copies),
        "spaces": sorted(placement.spaces),
        "packed_fast_bytes": _packed_fast_bytes(instance, answer.raw),
        "raw_failures": dict(answer.raw_failures),
        "legal_ok": check_solution(instance, answer.solution).ok,
        "kept_fraction": round(answer.kept_fraction, 4),
        "xla": round(answer.solution.normalized_reward, 4),
        "heuristic": round(heuristic.normalized_reward, 4),
    }


def _record(line: bytes, where: str) -> dict:
    """The record on one line; :class:`ValueError` naming ``where`` if it is none."""
    try:
        record = json.loads(line)
    except ValueError as exc:  # a UnicodeDecodeError too
        raise ValueError(f"{where} is not JSON ({exc})") from None
    if not (
        isinstance(record, dict)
        and isinstance(record.get("model"), str)
        and isinstance(record.get("target"), str)
    ):
        raise ValueError(f"{where} is not a record (an object with a model and a target)")
    return record


def _read_records(path: Path) -> tuple[list[dict], bytes]:
    """The records of the JSON-lines file ``path``, and its last line where an interrupted
    write cut it off (no line break, not JSON; left out), else ``b""``; :class:`ValueError`
    naming the line for any other line that is not a record, :class:`OSError` where
    ``path`` cannot be read."""
    *whole, tail = path.read_bytes().split(b"\n")
    records = [
        _record(line, f"{path}: line {number}")
        for number, line in enumerate(whole, 1)
        if line.strip()
    ]
    if tail.strip():
        try:
            json.loads(tail)
        except ValueError:
            return records, tail
        records.append(_record(tail, f"{path}: line {len(whole) + 1}"))
    return records, b""


def _summary(records: list[dict]) -> str:
    records = list({(r["model"], r["target"]): r for r in records}.values())
    lines = [
        "| target | programs | refused | legal answers | copies (sum) | spaces |",
        "|---|---|---|---|---|---|",
    ]
    for target in sorted({r["target"] for r in records}):
        rows = [r for r in records if r["target"] == target]
        ok = [r for r in rows if "error" not in r]
        spaces = sorted({s for r in ok for s in r["spaces"]})
        lines.append(
            f"| {target} | {len(rows)} | {len(rows) - len(ok)} | "
            f"{sum(r['legal_ok'] for r in ok)} | {sum(r['copies'] for r in ok)} | {spaces} |"
        )
    return "\n".join(lines)


def main() -> None:
    from mallocgame.frontends.tpu import TPU_TARGETS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--targets", nargs="+", default=list(TPU_TARGETS), choices=list(TPU_TARGETS)
    )
    parser.add_argument(
        "--models",
        nargs="*",
        help="model names of the tpu-v1 suite, sized for its preset (default: every one)",
    )
    parser.add_argument("--out", type=Path, required=True, help="JSON-lines records (appended)")
    parser.add_argument("--summary", action="store_true", help="print the table of --out and stop")
    args = parser.parse_args()
    from mallocgame.errors import MallocGameError
    from mallocgame.fileio import check_writable

    done: list[dict] = []
    cut = b""
    try:
        if args.summary and not args.out.is_file():
            what = "a directory" if args.out.is_dir() else "no such file"
            raise ValueError(f"--summary of {args.out}: {what}, no records to read")
        if not args.summary:
            check_writable(args.out)
        if args.out.is_file():
            done, cut = _read_records(args.out)
    except OSError as exc:
        parser.error(f"{args.out}: cannot read: {exc.strerror or exc}")
    except (MallocGameError, ValueError) as exc:
        parser.error(str(exc))
    if cut:
        print(
            f"{args.out}: its last line is cut off (an interrupted write): left out"
            + ("" if args.summary else ", and removed before this run appends"),
            file=sys.stderr,
        )
    if args.summary:
        print(_summary(done))
        return
    from mallocgame.workloads.suite import SUITES, model_programs

    suite = SUITES["tpu-v1"]
    try:
        programs = model_programs(suite.name)
    except MallocGameError as exc:  # the models' packages missing
        parser.error(str(exc))
    models = {m: p for m, p in programs.items() if p.preset in (None, suite.preset)}
    unknown = sorted(set(args.models or ()) - set(models))
    if unknown:
        parser.error(f"--models {' '.join(unknown)}: not in the tpu-v1 suite ({', '.join(models)})")
    seen = {(r["model"], r["target"]) for r in done if "error" not in r}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if cut:  # the cut line's bytes dropped: the next record starts a line of its own
        os.truncate(args.out, args.out.stat().st_size - len(cut))
    elif args.out.is_file() and done and not args.out.read_bytes().endswith(b"\n"):
        with args.out.open("a") as out:  # a whole last record without its line break
            out.write("\n")
    for target in args.targets:
        for name in args.models or sorted(models):
            if (name, target) in seen:
                continue
            try:
                record = {"model": name, "target": target, **_survey(name, models[name], target)}
            except Exception as exc:  # a refusal is the finding: record it and go on
                record = {"model": name, "target": target, "error": f"{type(exc).__name__}: {exc}"}
                traceback.print_exc()
            with args.out.open("a") as out:
                out.write(json.dumps(record) + "\n")
            print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
