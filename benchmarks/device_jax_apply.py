"""The JAX apply path on a real GPU: host-placed parameters, their lowering, and step times.

For a JAX MLP whose weights are arguments (``LAYERS`` layers of ``WIDTH`` x ``WIDTH``, fp32,
batch ``BATCH``), it extracts the program on the backend JAX runs on, derives the
``gpu_hbm_host`` instance with the fast memory a fraction of the peak live bytes, solves it
with ``drop``, ``greedy`` and ``heuristic``, applies each answer
(:func:`mallocgame.runtime.jax_apply.apply_jax`: inputs the answer leaves in slow memory
in ``pinned_host``, moved to the device inside the jit before their first use), checks the
results against the plain ``jax.jit`` and times both (median of ``--steps`` runs after
warm-up, ``block_until_ready``). One CSV row per answer in ``OUT/jax_apply.csv``; a log line
per step. ``--dry-run`` runs tiny sizes on the CPU (where memory kinds are accepted and the
moves are no-ops)::

    PYTHONPATH=src python3 benchmarks/device_jax_apply.py --out OUT [--dry-run]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

from mallocgame.bench.inputs import at_least
from mallocgame.errors import MallocGameError
from mallocgame.fileio import check_writable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU")
    parser.add_argument("--steps", type=at_least(1), default=15, help="timed runs per answer")
    args = parser.parse_args(argv)
    try:  # a file at --out, or in its place: found before JAX starts
        check_writable(args.out / "jax_apply.csv")
    except MallocGameError as exc:
        parser.error(str(exc))
    if args.dry_run:
        os.environ["JAX_PLATFORMS"] = "cpu"
    import jax
    import jax.numpy as jnp
    import numpy as np

    from mallocgame.check import check_solution
    from mallocgame.costmodel import derive_instance
    from mallocgame.frontends.xla import extract_jax
    from mallocgame.runtime.bench import load_solver
    from mallocgame.runtime.jax_apply import apply_jax, cuda_placements, jax_placement, place_args
    from mallocgame.simulate import simulate

    load_solver("drop")  # imports the solvers package without OR-Tools where it is missing
    from mallocgame.solvers.base import SolveRequest

    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f}s] {message}", flush=True)

    layers, width, batch = (2, 16, 4) if args.dry_run else (6, 8192, 2048)

    def mlp(*leaves):
        x = leaves[-1]
        for i in range(layers):
            x = jnp.maximum(x @ leaves[2 * i] + leaves[2 * i + 1], 0.0)
        return x

    keys = jax.random.split(jax.random.PRNGKey(0), 2 * layers + 1)
    shapes = [s for _ in range(layers) for s in ((width, width), (width,))] + [(batch, width)]
    values = tuple(
        jax.random.normal(k, s, jnp.float32) / np.sqrt(width) for k, s in zip(keys, shapes)
    )
    device = jax.devices()[0]
    log(
        f"jax {jax.__version__} on {device.platform} ({device.device_kind}); "
        f"{layers} layers of {width}, batch {batch}"
    )
    inst = derive_instance(extract_jax(mlp, *values), "gpu_hbm_host", capacity_fraction=0.25)
    log(
        f"instance: {inst.num_instructions} instructions, {inst.num_buffers} buffers, "
        f"fast memory {inst.hardware.fast_memory_bytes / 2**20:.1f} MiB"
    )

    def timed(fn, call_args) -> list[float]:
        jax.block_until_ready(fn(*call_args))
        jax.block_until_ready(fn(*call_args))
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*call_args))
            times.append(time.perf_counter() - t0)
        return times

    plain = jax.jit(mlp)
    device_args = tuple(jax.device_put(v, device) for v in values)
    reference = np.asarray(plain(*device_args))
    base = timed(plain, device_args)
    log(f"plain jit, everything on the device: median {statistics.median(base) * 1e3:.3f} ms")
    columns = (
        "answer",
        "normalized_reward",
        "check_ok",
        "simulated_s",
        "host_args",
        "host_results",
        "lowered_host_args",
        "lowered_device_moves",
        "median_s",
        "p10_s",
        "p90_s",
        "plain_median_s",
        "identical",
        "max_abs_diff",
        "error",
    )
    with open(args.out / "jax_apply.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        for name in ("drop", "greedy", "heuristic"):
            row = {"answer": name, "plain_median_s": statistics.median(base)}
            try:
                answer = load_solver(name).solve(inst, SolveRequest(seed=0))
                row.update(
                    normalized_reward=answer.normalized_reward,
                    check_ok=check_solution(inst, answer).ok,
                    simulated_s=simulate(inst, answer).latency_s,
                )
                placement = jax_placement(inst, answer, mlp, *values)
                row.update(
                    host_args=len(placement.host_args), host_results=len(placement.host_results)
                )
                lowered = cuda_placements(placement, mlp)
                row.update(
                    lowered_host_args=len(lowered.host_args), lowered_device_moves=lowered.to_device
                )
                fn = apply_jax(placement, mlp, device=device)
                placed = place_args(placement, *values, device=device)
                out = np.asarray(fn(*placed))
                row.update(
                    identical=bool(np.array_equal(out, reference)),
                    max_abs_diff=float(np.max(np.abs(out - reference))),
                )
                times = timed(fn, placed)
                q = np.quantile(times, [0.1, 0.9])
                row.update(median_s=statistics.median(times), p10_s=q[0], p90_s=q[1])
                log(
                    f"{name}: reward {answer.normalized_reward:.4f}, host args "
                    f"{row['host_args']} (lowered {row['lowered_host_args']}), median "
                    f"{row['median_s'] * 1e3:.3f} ms, identical {row['identical']}"
                )
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                log(f"{name}: FAILED {row['error']}")
                traceback.print_exc()
            writer.writerow(row)
            handle.flush()
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
