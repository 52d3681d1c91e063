"""Matmuls that read host memory on a GPU, grouped by their operands' layouts (issue #43).

Reads the per-op times of a ``bench real`` run (``ops.csv``: each instruction's measured
seconds beside the cost model's, for the placements that were profiled), captures each
program again on the CPU (the same seeded module as on the device; shapes and strides are
all it needs) and gives every matmul instruction its layout in BLAS terms
(:func:`mallocgame.runtime.torch_graph.matmul_layout`, from the strides of the operands the
kernel receives: ``N`` when an operand's last dimension is contiguous, ``T`` when it is
transposed). ``bench real`` now writes the layout to ``ops.csv`` itself; this script
serves the runs from before. In a training step the forward linear layers are ``NT``
(``x @ W.T``), the gradient of their input ``NN`` (``grad @ W``) and that of their weight
``TN`` (``x.T @ grad``); the cost model's tiled slow reads do not see the layout.

One row per (program, placement, layout, opcode, operand shapes): the instructions, their
measured and simulated seconds in all, and the median and range of ``measured /
simulated`` per instruction. Markdown on stdout; ``--csv`` writes the rows too::

    JAX_PLATFORMS=cpu PYTHONPATH=src python benchmarks/gpu_matmul_layouts.py \\
        --ops docs/results/gpu-real-h200/ops.csv [--programs mlp-train ...] [--placement drop]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True)
class MatmulLayout:
    """One matmul instruction of an exported graph: ``name`` (the FX node's, which is the
    program instruction's), ``opcode``, ``layout`` (``"NT"``: left operand contiguous in
    its last dimension, right one transposed) and the operand shapes as the kernel sees
    them (``"1024x4096 @ 4096x4096"``)."""

    name: str
    opcode: str
    layout: str
    shapes: str


@dataclasses.dataclass(frozen=True)
class LayoutRow:
    """The matmuls of one (program, placement, layout, opcode, shapes) group: ``ops``
    instructions, measured and simulated seconds summed over them, and the median, least
    and greatest per-instruction ratio ``measured / simulated``."""

    program: str
    placement: str
    layout: str
    opcode: str
    shapes: str
    ops: int
    measured_s: float
    simulated_s: float
    ratio_median: float
    ratio_min: float
    ratio_max: float


def matmul_layouts(exported: Any) -> list[MatmulLayout]:
    """Every matmul node of a ``torch.export.ExportedProgram``'s graph with its layout."""
    from mallocgame.runtime.torch_graph import matmul_layout

    out = []
    for node in exported.graph.nodes:
        layout = matmul_layout(node)
        if not layout:
            continue
        left, right = (arg.meta["val"] for arg in node.args[-2:])
        shapes = " @ ".join("x".join(str(d) for d in v.shape) for v in (left, right))
        opcode = node.target.__name__.split(".")[0]
        out.append(MatmulLayout(node.name, opcode, layout, shapes))
    return out


def layout_rows(
    layouts: Sequence[MatmulLayout], op_rows: Iterable[dict[str, str]], program: str
) -> list[LayoutRow]:
    """Group ``ops.csv`` rows of ``program`` (instruction ``name`` as the FX node's) by
    placement, layout, opcode and shapes. Rows of instructions that are not matmuls are
    skipped; a matmul without a row is left out."""
    by_name = {m.name: m for m in layouts}
    groups: dict[tuple[str, str, str, str], list[tuple[float, float]]] = defaultdict(list)
    for row in op_rows:
        m = by_name.get(row["name"])
        if row["program"] != program or m is None:
            continue
        measured, simulated = float(row["measured_s"]), float(row["sim_latency_s"])
        groups[(row["placement"], m.layout, m.opcode, m.shapes)].append((measured, simulated))
    rows = []
    for (placement, layout, opcode, shapes), times in sorted(groups.items()):
        ratios = [m / s for m, s in times if s > 0]
        rows.append(
            LayoutRow(
                program,
                placement,
                layout,
                opcode,
                shapes,
                len(times),
                sum(m for m, _ in times),
                sum(s for _, s in times),
                statistics.median(ratios) if ratios else float("nan"),
                min(ratios, default=float("nan")),
                max(ratios, default=float("nan")),
            )
        )
    return rows


def capture(name: str) -> Any:
    """Program ``name`` of ``bench real`` (full size, seeded) exported on the CPU."""
    import torch

    from mallocgame.frontends.torch import TrainingStep
    from mallocgame.runtime.bench import PROGRAMS, build_program
    from mallocgame.runtime.torch_graph import capture_torch

    spec = PROGRAMS[name]
    module, inputs = build_program(name, torch.device("cpu"), False)
    step = TrainingStep(loss=spec.loss) if spec.loss is not None else None
    return capture_torch(module, inputs, name=name, training_step=step).exported


def markdown(rows: Sequence[LayoutRow]) -> str:
    head = (
        "| program | placement | layout | opcode | operands | ops | measured ms | "
        "simulated ms | measured / simulated (median, range) |\n"
        "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: |\n"
    )
    lines = [
        f"| {r.program} | {r.placement} | {r.layout} | {r.opcode} | {r.shapes} | {r.ops} | "
        f"{r.measured_s * 1e3:.2f} | {r.simulated_s * 1e3:.2f} | "
        f"{r.ratio_median:.2f} ({r.ratio_min:.2f}-{r.ratio_max:.2f}) |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=Path, required=True, help="ops.csv of a bench real run")
    parser.add_argument("--programs", nargs="*", help="programs to read (default: all in ops)")
    parser.add_argument("--placement", help="only this placement (default: every profiled one)")
    parser.add_argument("--csv", type=Path, help="write the rows here too")
    args = parser.parse_args(argv)
    try:
        with args.ops.open(newline="") as f:
            op_rows = list(csv.DictReader(f))
    except OSError as e:
        print(f"error: cannot read {args.ops}: {e.strerror}", file=sys.stderr)
        return 2
    if op_rows and not {"program", "placement", "name", "measured_s", "sim_latency_s"} <= set(
        op_rows[0]
    ):
        print(f"error: {args.ops} is not a bench real ops.csv", file=sys.stderr)
        return 2
    if args.placement:
        placements = sorted({r["placement"] for r in op_rows})
        if args.placement not in placements:
            print(
                f"error: no row of {args.ops} has placement {args.placement} "
                f"(its placements: {', '.join(placements) or 'none'})",
                file=sys.stderr,
            )
            return 2
        op_rows = [r for r in op_rows if r["placement"] == args.placement]
    names = args.programs or sorted({r["program"] for r in op_rows})
    from mallocgame.runtime.bench import PROGRAMS

    unknown = [n for n in names if n not in PROGRAMS]
    if unknown:
        print(f"error: not a program of bench real: {', '.join(unknown)}", file=sys.stderr)
        return 2
    rows: list[LayoutRow] = []
    for name in names:
        rows += layout_rows(matmul_layouts(capture(name)), op_rows, name)
    print(markdown(rows), end="")
    if args.csv:
        with args.csv.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(field.name for field in dataclasses.fields(LayoutRow))
            writer.writerows(dataclasses.astuple(r) for r in rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
