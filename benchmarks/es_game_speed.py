"""How fast ``es`` plays one game of its initial policy, three ways, side by side.

- ``full replay``: every back-up undoes to its backup point and replays all the
  decisions after it (SPEC section 6 as written);
- ``one by one``: a back-up undoes only to the first decision the forced Drop changes
  (``DropBackup(deterministic=True)``: es's argmax policy is a pure function of the
  state), every move stepped from Python (as es plays under a deadline);
- ``forced loop``: as ``one by one``, with the moves that have no choice played in one
  compiled loop (``DropBackup.play_forced``, as es plays without a deadline).

All three give the same game (asserted). Best of ``--repeat`` games each, alternated.

Usage: ``python benchmarks/es_game_speed.py [--programs NAME ...] [--repeat 2]``
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from mallocgame.bench.inputs import at_least
from mallocgame.errors import MallocGameError
from mallocgame.solvers import es as es_module
from mallocgame.solvers.es import EsConfig, LinearPolicyShape, _Player
from mallocgame.workloads.registry import check_workload, load_workload

PROGRAMS = (
    "xla-v1/lstm_lm_train",
    "xla-v2/resnet152_train_b16",
    "hf-v1/gpt2_train_b8_s1024",
    "hf-v1/qwen2_0_5b_train_b8_s2048",
)


class _FullReplay(es_module.DropBackup):
    """Drop-backup as SPEC section 6 writes it: every back-up replays from its point."""

    def __init__(self, game, **kwargs) -> None:
        super().__init__(game)


def _play(player: _Player, theta: np.ndarray, way: str) -> tuple[float, tuple]:
    """Seconds of one game played ``way``, and what the game gave."""
    short = es_module.DropBackup
    es_module.DropBackup = _FullReplay if way == "full replay" else short
    try:
        # a deadline never reached: the moves are stepped one by one, as under a deadline
        deadline = None if way == "forced loop" else time.monotonic() + 1e9
        start = time.perf_counter()
        return_s, actions, backups, _ = player.play(theta, deadline)
        return time.perf_counter() - start, (return_s, actions.tobytes(), backups)
    finally:
        es_module.DropBackup = short


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", nargs="+", default=list(PROGRAMS))
    parser.add_argument("--repeat", type=at_least(1), default=2, help="games each (default 2)")
    args = parser.parse_args()
    for name in args.programs:  # every name before the first program's games
        try:
            check_workload(name)
        except MallocGameError as exc:
            parser.error(str(exc))
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}")
    ways = ("full replay", "one by one", "forced loop")
    print(f"{'program':34} {'buffers':>8} {'backups':>8} " + " ".join(f"{w:>12}" for w in ways))
    for name in args.programs:
        inst = load_workload(name)
        player = _Player(inst, None, LinearPolicyShape(0))
        player.warm_up()
        theta = LinearPolicyShape(0).initial(EsConfig(), np.random.default_rng(0))
        best = dict.fromkeys(ways, float("inf"))
        games = set()
        for _ in range(args.repeat):
            for way in ways:
                seconds, game = _play(player, theta, way)
                best[way] = min(best[way], seconds)
                games.add(game)  # the same actions, return and back-ups: shorter undos
        assert len(games) == 1, f"{name}: the three ways gave different games"
        backups = games.pop()[2]
        cells = " ".join(f"{best[w]:>11.2f}s" for w in ways)
        print(f"{name:34} {inst.num_buffers:>8} {backups:>8} {cells}", flush=True)


if __name__ == "__main__":
    main()
