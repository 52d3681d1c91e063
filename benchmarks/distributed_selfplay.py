"""Self-play throughput against the number of Ray actors, and the learner's steps per second.

For one program, side by side in one run: the one-process trainer, then distributed runs
with each ``--actors`` count (``ray=local``: one cluster of this machine, started once),
each training for ``--seconds`` with the default settings (learning on, as in a real
run). Throughput is counted after warm-up: from the first completed game (every actor
has compiled its search by then) to the end, as game steps (moves of one game) and
games per second. Then the learner alone: ``--learner-steps`` steps on batches of the
replay the one-process run filled, on each device JAX has (the CPU, and the GPU where
one is seen). One JSON line per measurement goes to ``--out`` (and stdout) as soon as it
is measured.

Usage::

    python benchmarks/distributed_selfplay.py --program xla-v1/wavenet_infer --seconds 60 \\
        --actors 1 2 --out docs/results/distributed/selfplay-2core.jsonl

``--actors`` with no count measures the one-process trainer and the learner without
starting Ray (a machine without it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from mallocgame.bench.inputs import at_least, seconds_arg
from mallocgame.errors import MallocGameError
from mallocgame.fileio import check_writable
from mallocgame.workloads.registry import check_workload


def _selfplay(program: str, seconds: float, actors: int | None, seed: int) -> dict[str, Any]:
    from mallocgame.solvers.muzero.solver import MuZeroSolver
    from mallocgame.solvers.muzero.train import Trainer
    from mallocgame.workloads.registry import load_workload

    options: dict[str, Any] = {"demonstrations": "heuristic"}
    if actors is not None:
        options |= {"ray": "local", "actors": str(actors)}
    trainer = Trainer(load_workload(program), MuZeroSolver().config(options), seed=seed)
    warm: list[tuple[float, int, int]] = []

    def on_game(_done: Any, elapsed_s: float) -> None:
        if not warm:
            warm.append((elapsed_s, trainer.counters.steps, trainer.counters.games))

    try:
        trainer.run(seconds=seconds, on_game=on_game)
    finally:
        trainer.close()
    c = trainer.counters
    if not warm:
        raise SystemExit(f"{program}: no game was complete in {seconds} s; give more --seconds")
    t0, steps0, games0 = warm[0]
    span = c.seconds - t0
    return {
        "measure": "selfplay",
        "program": program,
        "actors": actors or 0,
        "seconds": round(c.seconds, 2),
        "warmup_s": round(t0, 2),
        "steps_per_s": round((c.steps - steps0) / span, 2),
        "games_per_s": round((c.games - games0) / span, 4),
        "learner_steps": c.learner_steps,
        "games": c.games,
        "trainer": trainer,
    }


def _learner(trainer: Any, steps: int, device: Any) -> dict[str, Any]:
    """``steps`` learner steps on ``device`` (one compiled step first, not timed)."""
    from mallocgame.solvers.muzero.learner import batch_to_device
    from mallocgame.solvers.muzero.train import learner_batch

    rng = np.random.default_rng(0)
    batches = [learner_batch(trainer.config, trainer.replay, [], rng) for _ in range(8)]
    with jax.default_device(device):
        params = jax.device_put(trainer.params, device)
        opt_state = jax.device_put(trainer.opt_state, device)
        on_device = [jax.device_put(batch_to_device(b), device) for b in batches]
        params, opt_state, info = trainer._train_step(params, opt_state, on_device[0])
        jax.block_until_ready(info)
        start = time.perf_counter()
        for i in range(steps):
            params, opt_state, info = trainer._train_step(params, opt_state, on_device[i % 8])
        jax.block_until_ready(info)
        elapsed = time.perf_counter() - start
    return {
        "measure": "learner",
        "device": str(device),
        "batch_size": trainer.config.batch_size,
        "steps_per_s": round(steps / elapsed, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", default="xla-v1/wavenet_infer")
    parser.add_argument("--seconds", type=seconds_arg, default=60.0)
    parser.add_argument(
        "--actors",
        type=at_least(1),
        nargs="*",
        default=[1, 2, 4, 8],
        help="actor counts to measure (none: the one-process trainer and the learner alone, "
        "without Ray)",
    )
    parser.add_argument("--learner-steps", type=at_least(1), default=200)
    parser.add_argument("--seed", type=at_least(0), default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    try:  # the program and the records' place checked before Ray starts
        check_workload(args.program)
        if args.out:
            check_writable(args.out)
    except MallocGameError as exc:
        parser.error(str(exc))
    from mallocgame.solvers.muzero.distributed import connect

    machine = {
        "cpus": os.cpu_count(),
        "machine": platform.processor() or platform.machine(),
        "jax_backend": jax.default_backend(),  # where the one-process trainer's JAX runs
    }
    out = Path(args.out) if args.out else None
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)

    def emit(row: dict[str, Any]) -> None:
        line = json.dumps({**row, **machine})
        print(line, flush=True)
        if out is not None:
            with out.open("a") as handle:
                handle.write(line + "\n")

    if args.actors:
        connect("local", max(args.actors) + 1)  # and the Reanalyse actor
    baseline = _selfplay(args.program, args.seconds, None, args.seed)
    trainer = baseline.pop("trainer")
    emit(baseline)
    for actors in args.actors:
        row = _selfplay(args.program, args.seconds, actors, args.seed)
        row.pop("trainer")
        row["speedup"] = round(row["steps_per_s"] / baseline["steps_per_s"], 3)
        emit(row)
    for device in {d.platform: d for d in jax.devices() + jax.devices("cpu")}.values():
        emit(_learner(trainer, args.learner_steps, device))


if __name__ == "__main__":
    main()
