"""``msa-search``: the heuristic's mapping improved by searching the order it places in.

The heuristic (:mod:`mallocgame.solvers.heuristic`) places *candidates* (tensors joined by
alias groups) greedily, the most memory-bound first, each with XLA's prefetch windows,
evictions and best-fit offsets. Which candidates get fast memory depends on that order
alone, so the order is a search space whose every point is a complete mapping the
heuristic's own placement builds: offsets by best fit and repacking, which the game's
lowest-fit placement cannot express (the projection's loss, docs/muzero-experiments.md).

:func:`search_order` is a (1+1) local search over that order: a proposal moves a few
candidates (to a uniformly earlier or later position, or a short way either side), the
heuristic places the new order (only from the first position that changed:
:class:`~mallocgame.solvers.heuristic.OrderedAssignment`), the simulator
(:func:`mallocgame.simulate.simulate`) times the mapping, and a proposal no slower than
the current order replaces it (ties too, so the search drifts across plateaus); a
strictly faster one must also pass :func:`mallocgame.check.physical_check` to become the
best, and only a checked mapping is ever reported or answered. The best is never slower
than the best valid start order's mapping, and the heuristic's own verified mapping is
always a start: the answer is never slower in simulation than ``heuristic``'s. With fewer
than two candidates no order differs from the heuristic's, and no proposal is made.
The objective is the simulated latency, not the reward: each mapping reported is strictly
faster in simulation than the one before, and its reward can be lower (``xla-v1/dlrm_train``,
seed 3: normalized reward 0.6079, then a faster mapping of 0.6046).

``muzero-prod`` runs it after its agent, from the heuristic's order and from an order
that puts first the candidates the agent's answer placed in fast memory
(:func:`order_from_mapping`).

Work unit: evaluations (one proposal placed and simulated). With a work budget the same
seed gives the same answer; with neither budget, :data:`DEFAULT_EVALUATIONS`. A
wall-clock budget is kept from the first evaluation on: the heuristic's own verified
placement, the start of every proposal, runs first whatever the budget, so a budget
shorter than it ends after it.
Cost of one evaluation: the heuristic's placement from the first moved position on,
plus one simulation (``O(instructions + copies)``): benchmarks/order_search_speed.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mallocgame.check import physical_check
from mallocgame.instance import Instance
from mallocgame.latency import mapping_reward
from mallocgame.options import check_ranges, setting
from mallocgame.simulate import simulate
from mallocgame.solution import Allocation, Solution
from mallocgame.solvers.base import Run, Solver
from mallocgame.solvers.heuristic import OrderedAssignment

__all__ = [
    "OrderSearchConfig",
    "OrderSearchResult",
    "OrderSearchSolver",
    "Start",
    "search_order",
    "order_from_mapping",
    "stop_rule",
    "search_answer",
    "DEFAULT_EVALUATIONS",
]

DEFAULT_EVALUATIONS = 200
"""Evaluations run when the request has neither a work nor a wall-clock budget."""


@dataclass(frozen=True)
class OrderSearchConfig:
    """The settings of ``msa-search`` (``muzero-prod``'s order search runs with the defaults)."""

    max_moves: int = setting(
        6, "most candidates one proposal moves (1 + a geometric count)", within="[1, 1000]"
    )
    local_share: float = setting(
        0.2,
        "share of moves that go a short way (normal, local_spread positions) instead of "
        "to a uniform earlier or later position",
        within="[0, 1]",
    )
    local_spread: float = setting(
        20.0, "standard deviation of a short move, in positions", within="(0, 1e6]"
    )

    def __post_init__(self) -> None:
        check_ranges(self)


@dataclass(frozen=True)
class Start:
    """A start order of the search: a name (reported) and a permutation of the candidates."""

    name: str
    order: tuple[int, ...]


@dataclass(frozen=True)
class OrderSearchResult:
    """The best of a search: its mapping (checked), its simulated latency and order."""

    allocations: tuple[Allocation, ...]
    latency_s: float  # simulated, seconds
    order: tuple[int, ...]
    start: str  # the start it descends from
    evaluations: int  # proposals placed and simulated so far (the starts not counted)
    improvements: int  # proposals strictly faster than the best so far


def order_from_mapping(
    assignment: OrderedAssignment, allocations: Sequence[Allocation]
) -> tuple[int, ...]:
    """The heuristic's order with the candidates that ``allocations`` places in fast
    memory (any of their buffers) moved to the front, each group in its old order."""
    fast = np.zeros(assignment.num_candidates, dtype=bool)
    for allocation in allocations:
        c = assignment.candidate_of(allocation.buffer)
        if c >= 0:
            fast[c] = True
    default = np.asarray(assignment.default_order, dtype=np.int64)
    chosen = fast[default]
    return tuple(int(c) for c in np.concatenate([default[chosen], default[~chosen]]))


def _valid(instance: Instance, allocations: Sequence[Allocation]) -> bool:
    return not physical_check(instance, allocations)


def _propose(order: np.ndarray, rng: np.random.Generator, config: OrderSearchConfig) -> np.ndarray:
    """``order`` (of at least two candidates) with ``min(G, max_moves)`` candidates moved,
    ``G`` geometric with p = 1/2 (``G >= 1``); a moved candidate can land where it was."""
    n = len(order)
    moves = 1 + min(int(rng.geometric(0.5)) - 1, config.max_moves - 1)
    items = list(order)
    for _ in range(moves):
        i = int(rng.integers(n))
        item = items.pop(i)
        u = rng.random()
        if u < config.local_share:
            j = i + int(round(rng.normal(0.0, config.local_spread)))
        elif u < config.local_share + (1 - config.local_share) / 2:
            j = int(rng.integers(0, i + 1))
        else:
            j = int(rng.integers(i, n))
        items.insert(min(max(j, 0), n - 1), item)
    return np.asarray(items, dtype=np.int64)


def search_order(
    assignment: OrderedAssignment,
    *,
    seed: int,
    stop: Callable[[int], bool],
    starts: Sequence[Start] = (),
    config: OrderSearchConfig = OrderSearchConfig(),
    on_improve: Callable[[OrderSearchResult], None] | None = None,
) -> OrderSearchResult:
    """Search the candidates' order from the heuristic's and from ``starts``.

    ``stop(evaluations)`` is asked before each proposal and ends the search when true
    (with fewer than two candidates there is no proposal to make: no evaluation).
    The first best is the heuristic's verified mapping, replaced by a start order's
    mapping that is valid and faster; ``on_improve`` sees that first best, then each
    strictly faster one.
    Deterministic in ``seed`` and the sequence of ``stop``'s answers.
    """
    instance = assignment.instance
    rng = np.random.default_rng(seed % 2**63)
    heuristic = tuple(assignment.heuristic_allocations)
    best = OrderSearchResult(
        heuristic,
        simulate(instance, heuristic).latency_s,
        assignment.default_order,
        "heuristic",
        0,
        0,
    )
    for start in starts:
        allocations = tuple(assignment.assign(start.order))
        latency = simulate(instance, allocations).latency_s
        if latency < best.latency_s and _valid(instance, allocations):
            best = OrderSearchResult(allocations, latency, start.order, start.name, 0, 0)
    if on_improve is not None:
        on_improve(best)
    # ``current`` may be an unchecked order as fast as ``best`` (a plateau move); only a
    # strictly faster proposal is checked, and an invalid one sends the search back.
    current = np.asarray(best.order, dtype=np.int64)
    evaluations = improvements = 0
    while assignment.num_candidates > 1 and not stop(evaluations):
        proposal = _propose(current, rng, config)
        allocations = tuple(assignment.assign(proposal))
        evaluations += 1
        latency = simulate(instance, allocations).latency_s
        if not latency <= best.latency_s:
            continue
        if latency == best.latency_s:
            current = proposal
            continue
        if not _valid(instance, allocations):
            current = np.asarray(best.order, dtype=np.int64)
            continue
        current = proposal
        improvements += 1
        best = OrderSearchResult(
            allocations,
            latency,
            tuple(int(c) for c in proposal),
            best.start,
            evaluations,
            improvements,
        )
        if on_improve is not None:
            on_improve(best)
    return OrderSearchResult(
        best.allocations, best.latency_s, best.order, best.start, evaluations, improvements
    )


def stop_rule(run: Run, evaluations_left: int | None) -> Callable[[int], bool]:
    """Stop once ``run``'s wall clock is spent or ``evaluations_left`` are done (``None``:
    no limit on the count)."""

    def stop(evaluations: int) -> bool:
        return run.expired() or (evaluations_left is not None and evaluations >= evaluations_left)

    return stop


def search_answer(run: Run, result: OrderSearchResult, work: dict[str, int]) -> Solution:
    """``result`` as ``run``'s mapping answer (its exact reward; ``info``: latency and start)."""
    reward = mapping_reward(run.instance, [a.buffer for a in result.allocations])
    info = {
        "latency_s": result.latency_s,
        "start": result.start,
        "improvements": result.improvements,
    }
    return run.mapping_answer(result.allocations, reward, work, info=info)


class OrderSearchSolver(
    Solver, name="msa-search", work_unit="evaluations", config=OrderSearchConfig
):
    """The heuristic's mapping, improved by a local search over its placement order."""

    default_work = DEFAULT_EVALUATIONS

    def search(self, instance: Instance, config: OrderSearchConfig, run: Run) -> Solution:
        assignment = OrderedAssignment(instance)
        limit = run.work_budget

        def report(result: OrderSearchResult) -> None:
            run.improve(search_answer(run, result, {"evaluations": result.evaluations}))

        result = search_order(
            assignment, seed=run.seed, stop=stop_rule(run, limit), config=config, on_improve=report
        )
        return search_answer(run, result, {"evaluations": result.evaluations})
