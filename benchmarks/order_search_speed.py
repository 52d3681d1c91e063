"""Order-search speed: evaluations a second, and what placing from the first moved
position saves against placing every order from scratch.

For each program: the same 60 proposals (seed 0) placed incrementally
(`OrderedAssignment.assign` on one object, as `search_order` does) and from scratch (a
new `OrderedAssignment` per proposal, its construction not counted), then a whole
`search_order` of the same proposals with its simulations and checks.

Usage: ``python benchmarks/order_search_speed.py [--programs xla-v2/bert_base_train_b32 ...]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mallocgame.errors import MallocGameError
from mallocgame.solvers.heuristic import OrderedAssignment
from mallocgame.solvers.order_search import OrderSearchConfig, _propose, search_order
from mallocgame.workloads.registry import check_workload, load_workload

PROPOSALS = 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--programs",
        nargs="+",
        default=[
            "xla-v2/alexnet_train_b32",
            "xla-v2/unet_train_b2",
            "xla-v2/bert_base_train_b32",
            "holdout-v1/ddpm_unet_train_b64",
        ],
    )
    args = parser.parse_args()
    try:
        for name in args.programs:
            check_workload(name)
    except MallocGameError as exc:
        parser.error(str(exc))
    print(
        f"{'program':<36} {'candidates':>10} {'incremental (ms)':>17} {'scratch (ms)':>13} "
        f"{'ratio':>6} {'search evals/s':>15}"
    )
    for name in args.programs:
        inst = load_workload(name)
        assignment = OrderedAssignment(inst)
        rng = np.random.default_rng(0)
        order = np.asarray(assignment.default_order)
        proposals = [_propose(order, rng, OrderSearchConfig()) for _ in range(PROPOSALS)]
        start = time.perf_counter()
        for p in proposals:
            assignment.assign(p)
        incremental = (time.perf_counter() - start) / PROPOSALS
        scratch = 0.0
        for p in proposals:
            fresh = OrderedAssignment(inst)
            start = time.perf_counter()
            fresh.assign(p)
            scratch += time.perf_counter() - start
        scratch /= PROPOSALS
        start = time.perf_counter()
        search_order(OrderedAssignment(inst), seed=0, stop=lambda n: n >= PROPOSALS)
        rate = PROPOSALS / (time.perf_counter() - start)
        print(
            f"{name:<36} {assignment.num_candidates:>10} {incremental * 1e3:>17.1f} {scratch * 1e3:>13.1f} "
            f"{scratch / incremental:>6.2f} {rate:>15.1f}"
        )


if __name__ == "__main__":
    main()
