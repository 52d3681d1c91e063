"""MMap-MuZero self-play throughput: game steps per second with search.

Plays ``parallel_games`` (default 16) games of one program in lockstep with one
batched Gumbel MuZero search of ``num_simulations`` (default 16) per move, the
default CPU network, through Drop-backup, as the trainer does. Two phases after a
warm-up (not timed) that builds the demonstrations (``es`` for ``--seconds``) and
compiles the search and the learner:

* ``self-play only``: moves only (games finishing go to the replay);
* ``with learner``: one learner step (batch 64, unroll 5) every ``train_every``
  moves, as in training (the default config: every 4 moves), each with its Reanalyse
  search of ``parallel_games`` kept positions.

A game step is one decision of one game (a batched move is ``parallel_games`` steps).

Usage: ``python benchmarks/muzero_selfplay.py [--program xla-v1/bert_train] [--seconds 20]
[--option KEY=VALUE ...]``
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import jax

from mallocgame.bench.inputs import seconds_arg
from mallocgame.errors import MallocGameError
from mallocgame.solvers.base import Stopwatch
from mallocgame.solvers.muzero.solver import MuZeroSolver
from mallocgame.solvers.muzero.train import Trainer
from mallocgame.workloads.registry import load_workload


def _option(text: str) -> tuple[str, str]:
    """An argparse type: ``KEY=VALUE`` as ``(key, value)``, else one line (exit 2)."""
    key, equals, value = text.partition("=")
    if not key or not equals:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    return key, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", default="xla-v1/bert_train")
    parser.add_argument("--seconds", type=seconds_arg, default=20.0, help="timed seconds per phase")
    parser.add_argument("--option", type=_option, action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()

    try:
        inst = load_workload(args.program)
        config = MuZeroSolver().config(dict(args.option))
    except MallocGameError as exc:
        parser.error(str(exc))
    trainer = Trainer(inst, config, seed=0)
    print(
        f"{inst.name}: {inst.num_buffers} buffers; {config.parallel_games} games x "
        f"{config.num_simulations} simulations ({config.search}); batch {config.batch_size}, "
        f"train every {config.train_every} moves"
    )
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"jax {jax.__version__} on {jax.default_backend()}"
    )

    start = time.perf_counter()
    trainer.add_demonstrations(Stopwatch(args.seconds / config.es_share))  # es: --seconds
    moves = 0
    while trainer.replay.positions < max(config.min_replay, config.batch_size):
        for done in trainer.selfplay.step(trainer.params, jax.random.PRNGKey(moves)):
            trainer.replay.add(done.record)  # no rng: no restarts, so every game is whole
        moves += 1
    trainer._learn()  # compile the learner
    print(
        f"warm-up (compilation, {moves} moves to fill the replay): {time.perf_counter() - start:.1f} s"
    )

    for phase, learn in (("self-play only", False), ("with learner", True)):
        steps = learner = 0
        start = time.perf_counter()
        while time.perf_counter() - start < args.seconds:
            for done in trainer.selfplay.step(trainer.params, jax.random.PRNGKey(moves)):
                trainer.replay.add(done.record)
            moves += 1
            steps += config.parallel_games
            if learn and moves % config.train_every == 0:
                trainer._learn()
                learner += 1
        jax.block_until_ready(trainer.params)
        wall = time.perf_counter() - start
        print(
            f"{phase:15s}: {steps / wall:8.0f} game steps/s ({steps} steps, {learner} learner steps, "
            f"{wall:.1f} s)"
        )


if __name__ == "__main__":
    main()
