"""Observation speed: microseconds per decision to sync and write the MuZero observation.

Plays random games (uniform over the allowed actions, through the Drop-backup
driver, as self-play does) and after every decision times
``Observer.observe(move, out=batch, index=i)``: the incremental occupancy sync (add
the new allocation, or subtract the undone ones after a back-up) plus writing every
array of the observation into one row of a 16-game batch. For comparison it also
times the decision itself (``DropBackup.step``), ``observe`` of an unchanged state
(no sync work), and the decision feature vector alone (part of ``observe``).

Usage: ``python benchmarks/observe_speed.py [--workloads xla-v1/bert_train ...] [--games 3]``
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from mallocgame.bench.inputs import at_least
from mallocgame.errors import MallocGameError
from mallocgame.game import Game
from mallocgame.game.backup import DropBackup
from mallocgame.game.features import feature_extractor
from mallocgame.game.observe import ObservationConfig, Observer, empty_batch
from mallocgame.solvers.random import UniformPolicy
from mallocgame.workloads.registry import check_workload, load_workload

BATCH = 16


def play_and_observe(
    game: Game, observer: Observer, batch: dict, seed: int
) -> dict[str, np.ndarray]:
    """One random Drop-backup game; seconds per decision of each timed part."""
    game.reset()
    observer.observe(0, out=batch, index=0)
    driver = DropBackup(game)
    policy = UniformPolicy(np.random.default_rng(seed))
    extractor = feature_extractor(game)
    row = batch["decision"][1]
    step_s, observe_s, again_s, features_s = [], [], [], []
    clock = time.perf_counter
    move = 0
    while not game.complete:
        action = policy(game, driver.allowed())
        t0 = clock()
        driver.step(action)
        t1 = clock()
        move += 1
        observer.observe(move, out=batch, index=move % BATCH)
        t2 = clock()
        observer.observe(move, out=batch, index=move % BATCH)
        t3 = clock()
        extractor(game, out=row)
        t4 = clock()
        step_s.append(t1 - t0)
        observe_s.append(t2 - t1)
        again_s.append(t3 - t2)
        features_s.append(t4 - t3)
    return {
        "step": np.array(step_s),
        "observe": np.array(observe_s),
        "again": np.array(again_s),
        "features": np.array(features_s),
        "backups": np.array([driver.backups]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", default=["xla-v1/bert_train"])
    parser.add_argument("--games", type=at_least(1), default=3, help="games each (default 3)")
    args = parser.parse_args()
    try:
        for name in args.workloads:
            check_workload(name)
    except MallocGameError as exc:
        parser.error(str(exc))

    print(
        f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, "
        f"python {platform.python_version()}, numpy {np.__version__}"
    )
    config = ObservationConfig()
    print(f"config: {config}")
    warm = Game(load_workload("xla-v1/lstm_infer"))  # compile (or load the cache) outside timing
    play_and_observe(warm, Observer(warm, config), empty_batch(config, BATCH), 0)
    print(
        f"{'workload':>22} {'buffers':>8} {'steps':>6} {'backups':>8} "
        f"{'observe med':>12} {'mean':>7} {'p99':>7} {'unchanged':>10} "
        f"{'features':>9} {'game step':>10}   (us per decision)"
    )
    for name in args.workloads:
        inst = load_workload(name)
        game = Game(inst)
        observer = Observer(game, config)
        batch = empty_batch(config, BATCH)
        runs = [play_and_observe(game, observer, batch, seed) for seed in range(args.games)]
        t = {k: np.concatenate([r[k] for r in runs]) for k in runs[0]}
        us = {k: v * 1e6 for k, v in t.items() if k != "backups"}
        print(
            f"{name:>22} {inst.num_buffers:>8} {inst.num_instructions:>6} "
            f"{int(t['backups'].sum()):>8} {np.median(us['observe']):>12.1f} "
            f"{us['observe'].mean():>7.1f} {np.percentile(us['observe'], 99):>7.1f} "
            f"{np.median(us['again']):>10.1f} {np.median(us['features']):>9.1f} "
            f"{np.median(us['step']):>10.1f}"
        )


if __name__ == "__main__":
    main()
