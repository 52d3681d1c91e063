"""Calibrate the simulator against the H100 run of ``benchmarks/device_real.py`` (issue #43).

Reads ``docs/results/gpu-real-h100/`` (``calibration.csv``, ``results.csv``,
``programs.json.gz``), re-extracts the three programs (mlp, 4-layer BERT, ResNet-50) with
the torch frontend on the meta device (no weights; shapes only) and checks that their
buffers are the run's (names, sizes, order), checks that the ``gpu_h100_host`` preset holds
the measured figures, then re-simulates every measured answer (its fast-buffer set replayed
on the re-derived instance) on ``gpu_h100_host`` with the tiled slow reads of matmul-like
instructions off (``slow_dot_tile = 0``, the plain roofline) and at each tile edge. The
tile is fitted on ONE program (``--fit``, default mlp: the edge of ``--tiles`` with the
lowest mean relative error there) and judged on the other two. Two alternatives are
printed as evidence: one constant read factor for every slow matmul operand (fitted the
same way), and the same tile rule applied to convolutions as implicit GEMMs.

Usage::

    JAX_PLATFORMS=cpu PYTHONPATH=src python benchmarks/gpu_model_fit.py [--fit mlp]

Statistics over the 8 answers of each program (the framework default, all in HBM, is
left out as in ``summary.csv``): Spearman's rank correlation and the mean relative error
``mean(|simulated - measured| / measured)`` of the simulated step time.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import gzip
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import mallocgame.costmodel as costmodel
from mallocgame.bench.inputs import at_least
from mallocgame.costmodel import derive_instance
from mallocgame.hardware import GPU_H100_HOST, HardwarePreset
from mallocgame.instance import Instance, instance_from_dict
from mallocgame.program import Program, ProgramInstruction
from mallocgame.runtime.bench import build_program, mean_relative_error, spearman
from mallocgame.simulate import simulate
from mallocgame.solution import Allocation, solution_from_dict

_DOT_RULE = costmodel.slow_read_factors  # the cost model's own rule
RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results" / "gpu-real-h100"
PROGRAMS = ("mlp", "bert", "resnet50")
# calibration.csv name -> the preset's field it sets
FIGURES = {
    "fast_bandwidth": "fast_bandwidth",
    "slow_read_bandwidth": "slow_bandwidth",
    "copy_out_bandwidth": "copy_bandwidth",
    "peak_flops_fp32": "peak_flops",
    "fixed_s": "fixed_s",
}


@dataclasses.dataclass(frozen=True)
class Fit:
    """Spearman and mean relative error (fraction) of one model on one program's answers."""

    spearman: float
    mre: float
    simulated_s: tuple[float, ...]


def extract(name: str) -> Program:
    """The program ``name`` of ``mallocgame.runtime.bench`` captured on the meta device."""
    import torch

    from mallocgame.frontends.torch import extract_torch

    module, inputs = build_program(name, torch.device("meta"), False)
    return extract_torch(module, inputs, name=name)


def same_buffers(a: Instance, b: Instance) -> bool:
    """Whether two instances have the same instructions (names, opcodes) and buffers."""
    key = lambda i: (  # noqa: E731
        [(x.name, x.opcode, x.buffers) for x in i.instructions],
        [(x.instruction, x.tensor_id, x.is_output, x.size) for x in i.buffers],
    )
    return key(a) == key(b)


def evaluate(
    inst: Instance, answers: dict[str, list[Allocation]], measured: dict[str, float]
) -> Fit:
    """Simulate each answer's allocations (its fast set, copies and all) on ``inst``."""
    labels = sorted(answers)
    sim = [simulate(inst, answers[label]).latency_s for label in labels]
    meas = [measured[label] for label in labels]
    return Fit(spearman(sim, meas), mean_relative_error(sim, meas), tuple(sim))


@contextmanager
def factors(
    rule: Callable[[Program, ProgramInstruction, int], tuple[int, ...]],
) -> Iterator[None]:
    """Derive instances with another slow-read rule than the cost model's (an alternative)."""
    saved = costmodel.slow_read_factors
    costmodel.slow_read_factors = rule
    try:
        yield
    finally:
        costmodel.slow_read_factors = saved


def constant_rule(program: Program, ins: ProgramInstruction, c: int) -> tuple[int, ...]:
    """Every slow operand of a matmul-like instruction read ``c`` times, whatever its shape."""
    k = len(ins.operands) + len(ins.outputs)
    if c <= 0 or ins.opcode not in costmodel.DOT_OPCODES:
        return (1,) * k
    return tuple(c if p < len(ins.operands) else 1 for p in range(k))


def conv_rule(program: Program, ins: ProgramInstruction, tile: int) -> tuple[int, ...]:
    """The cost model's rule, plus convolutions as implicit GEMMs: output ``[B, C, H, W]``,
    ``M = B*H*W``, ``N = C``; the input read ``ceil(N/tile)`` times, the weight
    ``ceil(M/tile)``."""
    base = _DOT_RULE(program, ins, tile)
    if tile <= 0 or ins.opcode != "convolution":
        return base
    b, c, h, w = costmodel._dims(program.tensors[ins.outputs[0]].shape)
    out = list(base)
    out[0], out[1] = -(-c // tile), -(-(b * h * w) // tile)
    return tuple(out)


def tile_edges(text: str) -> list[int]:
    """An argparse type: tile edges in elements, a comma list of whole numbers of at least
    0 (``16,32,64``), else argparse's one line (exit 2) naming the item."""
    edge = at_least(0)
    return [edge(item.strip()) for item in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--fit", default="mlp", choices=PROGRAMS, help="the program the tile is fitted on"
    )
    parser.add_argument(
        "--tiles",
        type=tile_edges,
        default=[16, 32, 64, 128, 256],
        help="tile edges tried (elements, comma-separated; default 16,32,64,128,256)",
    )
    args = parser.parse_args()
    tiles = args.tiles

    with (RESULTS / "calibration.csv").open() as f:
        cal = {r["name"]: float(r["value"]) for r in csv.DictReader(f)}
    for figure, field in FIGURES.items():
        value = getattr(GPU_H100_HOST, field)
        assert value == cal[figure], f"gpu_h100_host.{field} = {value}, measured {cal[figure]}"
    slowest_copy = min(cal["copy_in_bandwidth"], cal["copy_out_bandwidth"])
    assert slowest_copy == GPU_H100_HOST.copy_bandwidth
    with (RESULTS / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    with gzip.open(RESULTS / "programs.json.gz", "rt") as f:
        docs = json.load(f)

    programs: dict[str, Program] = {}
    answers: dict[str, dict[str, list[Allocation]]] = {}
    measured: dict[str, dict[str, float]] = {}
    run_cal: dict[str, dict[str, float]] = {}
    for name in PROGRAMS:
        program = extract(name)
        stored = instance_from_dict(docs[name]["instance"])
        mine = derive_instance(program, stored.source["preset"], capacity_fraction=0.25)
        if not same_buffers(mine, stored):
            raise SystemExit(f"{name}: the re-extracted program's buffers differ from the run's")
        programs[name] = program
        answers[name], measured[name], run_cal[name] = {}, {}, {}
        for r in rows:
            if r["program"] != name or r["placement"] == "hbm-resident" or r["error"]:
                continue
            sol = solution_from_dict(docs[name]["answers"][r["placement"]])
            answers[name][r["placement"]] = list(sol.allocations)
            measured[name][r["placement"]] = float(r["measured_median_s"])
            run_cal[name][r["placement"]] = float(r["sim_calibrated_s"])
        print(
            f"{name}: re-extracted, {mine.num_buffers} buffers equal to the run's; "
            f"{len(answers[name])} measured answers"
        )

    def fits(preset: HardwarePreset) -> dict[str, Fit]:
        out = {}
        for name in PROGRAMS:
            inst = derive_instance(programs[name], preset, capacity_fraction=0.25, name=name)
            out[name] = evaluate(inst, answers[name], measured[name])
        return out

    def with_tile(tile: int) -> HardwarePreset:
        return dataclasses.replace(GPU_H100_HOST, slow_dot_tile=tile)

    print("\nthe run's own calibrated preset (results.csv sim_calibrated_s):")
    for name in PROGRAMS:
        labels = sorted(answers[name])
        sim = [run_cal[name][x] for x in labels]
        meas = [measured[name][x] for x in labels]
        mre = mean_relative_error(sim, meas)
        print(f"  {name:9s} Spearman {spearman(sim, meas):.3f}  MRE {mre:.3f}")

    table = {0: fits(with_tile(0))}
    for tile in tiles:
        table[tile] = fits(with_tile(tile))
    print("\ngpu_h100_host, Spearman / mean relative error per slow_dot_tile (0: roofline):")
    print(f"  {'tile':>5s}" + "".join(f"  {n:>16s}" for n in PROGRAMS))
    for tile, f in table.items():
        cells = "".join(f"  {f[n].spearman:7.3f} / {f[n].mre:6.3f}" for n in PROGRAMS)
        print(f"  {tile:5d}{cells}")
    best = min(tiles, key=lambda t: table[t][args.fit].mre)
    print(f"\nfitted on {args.fit}: tile {best} (lowest mean relative error there)")
    print(
        f"  {'program':9s} {'role':8s} {'Spearman before':>16s} {'after':>6s}  "
        f"{'MRE before':>11s} {'after':>6s}"
    )
    for name in PROGRAMS:
        b, a = table[0][name], table[best][name]
        role = "fit" if name == args.fit else "held out"
        print(
            f"  {name:9s} {role:8s} {b.spearman:16.3f} {a.spearman:6.3f}  "
            f"{b.mre:11.3f} {a.mre:6.3f}"
        )
    print(f"\nper answer, ms (measured / roofline / tile {best}):")
    for name in PROGRAMS:
        for i, label in enumerate(sorted(answers[name])):
            before, after = table[0][name].simulated_s[i], table[best][name].simulated_s[i]
            print(
                f"  {name:9s} {label:12s} {measured[name][label] * 1e3:8.1f} "
                f"{before * 1e3:8.1f} {after * 1e3:8.1f}"
            )

    # The evidence for a shape-dependent factor: the mlp's step times (its 8 answers and
    # all-in-HBM) fitted on its slow MiB per operand role, in ms per MiB.
    import numpy as np

    mlp = derive_instance(programs["mlp"], GPU_H100_HOST, capacity_fraction=0.25)
    roles = ("addmm x", "addmm w", "addmm out", "gelu in", "gelu out")
    where = {("addmm", 1): 0, ("addmm", 2): 1, ("addmm", 3): 2, ("gelu", 0): 3, ("gelu", 1): 4}
    hbm_mlp = next(r for r in rows if r["program"] == "mlp" and r["placement"] == "hbm-resident")
    xs, ys = [[0.0] * len(roles)], [float(hbm_mlp["measured_median_s"]) * 1e3]
    for label, allocs in answers["mlp"].items():
        fast = {a.buffer for a in allocs}
        row = [0.0] * len(roles)
        for ins in mlp.instructions:
            for p, b in enumerate(ins.buffers):
                if b not in fast and (ins.opcode, p) in where:
                    row[where[ins.opcode, p]] += mlp.buffers[b].size / 2**20
        xs.append(row)
        ys.append(measured["mlp"][label] * 1e3)
    design = np.c_[np.array(xs), np.ones(len(ys))]
    coef = np.linalg.lstsq(design, np.array(ys), rcond=None)[0]
    stream = 2**20 / GPU_H100_HOST.slow_bandwidth * 1e3
    print(
        f"\nmlp: least squares of step time on slow MiB per role (ms/MiB; streaming "
        f"{stream:.4f}); x and gelu out always go together, so only their sum is fixed:"
    )
    for role, c in zip(roles, coef):
        print(f"  {role:10s} {c:8.4f}  ({c / stream:5.1f}x streaming)")
    both = coef[0] + coef[4]
    print(f"  x + gelu out {both:.4f} ({both / stream:.1f}x); intercept {coef[-1]:.2f} ms")

    print("\nalternative 1: one read factor c for every slow matmul operand, whatever its shape:")
    with factors(constant_rule):
        consts = {c: fits(with_tile(c)) for c in (4, 8, 16, 24, 32)}
    for c, f in consts.items():
        cells = "".join(f"  {n} {f[n].spearman:.3f} / {f[n].mre:.3f}" for n in PROGRAMS)
        print(f"  c={c:3d}{cells}")
    c_best = min(consts, key=lambda c: consts[c][args.fit].mre)
    print(f"  fitted on {args.fit}: c = {c_best}")

    print("\nalternative 2: convolutions as implicit GEMMs under the same tile rule (resnet50):")
    with factors(conv_rule):
        for tile in tiles:
            f = fits(with_tile(tile))["resnet50"]
            print(f"  tile {tile:4d}: resnet50 Spearman {f.spearman:.3f}, MRE {f.mre:.3f}")

    inst = derive_instance(programs["resnet50"], GPU_H100_HOST, capacity_fraction=0.25)
    fp32 = sum(i.count * i.supply_s for i in inst.instructions)
    tf32 = 0.0
    for ins, pi in zip(inst.instructions, programs["resnet50"].instructions):
        if ins.opcode == "convolution":
            mem = sum(inst.buffers[b].size for b in ins.buffers) / GPU_H100_HOST.fast_bandwidth
            compute = pi.flops / cal["peak_flops_tf32"]
            tf32 += ins.count * (GPU_H100_HOST.fixed_s + max(compute, mem))
        else:
            tf32 += ins.count * ins.supply_s
    hbm = next(
        float(r["measured_median_s"])
        for r in rows
        if r["program"] == "resnet50" and r["placement"] == "hbm-resident"
    )
    print(
        f"\nresnet50 all in HBM: measured {hbm * 1e3:.2f} ms; simulated {fp32 * 1e3:.2f} ms "
        f"(fp32 peak), {tf32 * 1e3:.2f} ms with convolutions at the TF32 rate"
    )


if __name__ == "__main__":
    main()
