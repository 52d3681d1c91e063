"""The checker against exact arithmetic, on adversarial magnitudes (SPEC sections 4, 5, 7).

The judge here is written for these tests and shares no code with the checker:
:func:`exact_reward` evaluates SPEC section 5's return with :class:`fractions.Fraction`
straight from the formula (``fixed_s`` included, one ``size / bw`` term per buffer),
and :func:`claim_is_valid` is SPEC section 7's claim rule, ``|c - r| <= 1e-9 |r|``,
exactly. Instances span the whole of SPEC section 1's ranges: times from ``1e-12`` to
``1e12`` s side by side, counts up to ``2**31 - 1``, sizes up to ``2**47`` bytes,
bandwidths from 1 B/s. Every property runs on a fixed seed (``derandomize``), over two
thousand instances and claims per run in all:

- no false "invalid": every honest answer (a Drop-backup game written by
  :func:`solution_from_game`, and the same mapping without its actions) passes;
- no false "valid": a ``reward_s`` / ``normalized_reward`` / ``bound_s`` claim passes
  exactly when the judge says it is within SPEC's tolerance;
- the copy walk is SPEC section 4's float64 walk in its stated order (the test
  model of ``tests/game/test_property.py``, step by step, bit for bit);
- rule 5 of the physical check agrees with the exact supply sum.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mallocgame.check import check_solution, physical_check
from mallocgame.errors import InstanceError, SolutionError
from mallocgame.game.backup import play
from mallocgame.game.state import Game
from mallocgame.instance import Instance, RooflineLatency, instance_from_dict
from mallocgame.solution import Allocation
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.solvers.base import solution_from_game
from mallocgame.workloads.registry import load_workload
from tests.builders import B, I, X, build, random_policy, roofline, table
from tests.game.test_property import Reference

RTOL = Fraction(1, 10**9)  # SPEC section 7
MAX_COUNT = 2**31 - 1
EXAMPLES = 400  # per property: 4 x 400 instances and claims a run, and 600 supply cases


# ====================================================================== the judge


def exact_latency(inst: Instance, t: int, fast: set[int]) -> Fraction:
    """``count * L_t(S)`` of SPEC section 5, exactly."""
    ins = inst.instructions[t]
    lat = ins.latency
    if isinstance(lat, RooflineLatency):
        hw = inst.hardware
        memory = sum(
            (
                Fraction(inst.buffers[b].size)
                / Fraction(hw.fast_bandwidth if b in fast else hw.slow_bandwidth)
                for b in ins.buffers
            ),
            Fraction(0),
        )
        one = Fraction(lat.fixed_s) + max(Fraction(lat.compute_s), memory)
    else:
        index = sum(1 << i for i, b in enumerate(lat.varied) if b in fast)
        one = Fraction(lat.latency_s[index])
    return ins.count * one


def exact_reward(inst: Instance, fast_buffers: Iterable[int]) -> Fraction:
    """``sum_t L_t(empty) - L_t(S_t)``, exactly."""
    fast = set(fast_buffers)
    return sum(
        (
            exact_latency(inst, t, set()) - exact_latency(inst, t, fast)
            for t in range(inst.num_instructions)
        ),
        Fraction(0),
    )


def exact_normalizer(inst: Instance) -> Fraction:
    return sum(
        (
            exact_latency(inst, t, set()) - exact_latency(inst, t, set(ins.buffers))
            for t, ins in enumerate(inst.instructions)
        ),
        Fraction(0),
    )


def claim_is_valid(claim: float, exact: Fraction) -> bool:
    """SPEC section 7: ``|claim - exact| <= 1e-9 |exact|``, in exact arithmetic."""
    return math.isfinite(claim) and abs(Fraction(claim) - exact) <= RTOL * abs(exact)


# ================================================================== the instances

# Times: 0, or log-uniform over 1e-12 .. 1e12 s, and a few awkward exact values.
times = st.one_of(
    st.just(0.0),
    st.sampled_from([2.0**-14, 1e-12, 0.5, 1.0, 1e12, 953923248486.9957]),
    st.builds(lambda m, e: min(m * 10.0**e, 1e12), st.floats(1.0, 9.99), st.integers(-12, 11)),
)
counts = st.one_of(st.integers(1, 4), st.integers(1, MAX_COUNT), st.just(MAX_COUNT))
sizes = st.one_of(st.just(0), st.integers(1, 4096), st.integers(1, 2**47))
bandwidths = st.one_of(
    st.just(1.0), st.builds(lambda m, e: m * 10.0**e, st.floats(1.0, 9.99), st.integers(0, 13))
)


@st.composite
def extreme_instances(draw) -> Instance:
    """Small programs (1-6 instructions) whose numbers span SPEC section 1's ranges: reads
    of inputs and earlier results, in-place alias groups, roofline and table latencies,
    a capacity from too small to roomy."""
    num_t = draw(st.integers(1, 6))
    tensors: list[X] = []
    available: list[int] = []
    for _ in range(draw(st.integers(0, 3))):
        available.append(len(tensors))
        tensors.append(X(draw(sizes), live_out=draw(st.integers(0, 3)) == 0))
    instructions: list[I] = []
    keys = iter(range(10**6))
    for _ in range(num_t):
        reads = [
            B(draw(st.sampled_from(available)), demand=draw(times))
            for _ in range(draw(st.integers(0, min(3, len(available)))))
        ]
        writes = []
        for _ in range(draw(st.integers(0, 2))):
            writes.append(B(len(tensors), demand=draw(times)))
            tensors.append(X(draw(sizes), live_out=draw(st.integers(0, 3)) == 0))
        if reads and writes and draw(st.booleans()):  # an in-place update
            reads[0].alias = writes[0].alias = f"k{next(keys)}"
        n = len(reads) + len(writes)
        if draw(st.booleans()):
            lat = roofline(draw(times), draw(times))
        else:
            k = draw(st.integers(0, min(3, n)))
            varied = draw(st.permutations(range(n)))[:k] if n else []
            lat = table(varied, draw(st.lists(times, min_size=1 << k, max_size=1 << k)))
        instructions.append(
            I(reads=reads, writes=writes, supply=draw(times), count=draw(counts), latency=lat)
        )
        available.extend(w.tensor for w in writes)
    largest = max((x.size for x in tensors), default=0)
    capacity = int(largest * draw(st.sampled_from([0.6, 1.0, 1.5, 3.0])))
    return build(
        tensors,
        instructions,
        capacity=capacity,
        alignment=draw(st.sampled_from([1, 256])),
        fast_bw=draw(bandwidths),
        slow_bw=draw(bandwidths),
        copy_bw=draw(bandwidths),
    )


def honest_game(inst: Instance, seed: int) -> Game:
    game = Game(inst)
    play(game, random_policy(seed))
    assert game.complete
    return game


SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ==================================================================== properties


@SETTINGS
@given(inst=extreme_instances(), seed=st.integers(0, 2**32 - 1))
def test_honest_answers_pass_and_claim_the_exact_reward(inst: Instance, seed: int) -> None:
    game = honest_game(inst, seed)
    answer = solution_from_game(inst, game, solver="random", seed=seed, wall_s=0.0)
    report = check_solution(inst, answer)
    assert report.ok, report.summary()
    assert check_solution(inst, replace(answer, actions=None)).ok
    exact = exact_reward(inst, (a.buffer for a in answer.allocations))
    assert answer.reward_s == float(exact)  # rounded once
    normalizer = exact_normalizer(inst)
    assert claim_is_valid(
        answer.normalized_reward, exact / normalizer if normalizer else Fraction(0)
    )


@SETTINGS
@given(
    inst=extreme_instances(),
    seed=st.integers(0, 2**32 - 1),
    relative=st.sampled_from([0.0, 4e-10, -9.9e-10, 1.01e-9, -1.01e-9, 3e-9, -1e-6, 1e-3, 1.0]),
    absolute=st.sampled_from([0.0, 0.0, 1e-300, -1e-20, 1e-6, 0.9]),
)
def test_a_reward_claim_passes_exactly_when_within_the_tolerance(
    inst: Instance, seed: int, relative: float, absolute: float
) -> None:
    game = honest_game(inst, seed)
    answer = solution_from_game(inst, game, solver="random", seed=seed, wall_s=0.0)
    exact = exact_reward(inst, (a.buffer for a in answer.allocations))
    claim = float(exact * (1 + Fraction(relative))) + absolute
    if not math.isfinite(claim):
        return
    report = check_solution(inst, replace(answer, reward_s=claim))
    assert ("reward_mismatch" not in report.kinds) == claim_is_valid(claim, exact), (
        claim,
        float(exact),
        report.summary(),
    )


@SETTINGS
@given(
    inst=extreme_instances(),
    seed=st.integers(0, 2**32 - 1),
    relative=st.sampled_from([0.0, 5e-10, -1.01e-9, 2e-9, -0.5]),
    absolute=st.sampled_from([0.0, 1e-300, -1e-12, 1e-9]),
    bound_relative=st.sampled_from([0.0, -2e-9, -0.5e-9, 1e-6, -1.0, -3.0]),
)
def test_normalized_and_bound_claims_are_judged_exactly(
    inst: Instance, seed: int, relative: float, absolute: float, bound_relative: float
) -> None:
    game = honest_game(inst, seed)
    answer = solution_from_game(inst, game, solver="random", seed=seed, wall_s=0.0)
    exact = exact_reward(inst, (a.buffer for a in answer.allocations))
    normalizer = exact_normalizer(inst)
    normalized = exact / normalizer if normalizer else Fraction(0)
    claim = float(normalized * (1 + Fraction(relative))) + absolute
    bound = float(exact * (1 + Fraction(bound_relative)))
    report = check_solution(inst, replace(answer, normalized_reward=claim, bound_s=bound))
    assert ("reward_mismatch" not in report.kinds) == claim_is_valid(claim, normalized)
    bound_ok = bound >= 0 and Fraction(bound) >= (1 - RTOL) * exact
    assert ("false_bound" not in report.kinds) == bound_ok, (bound, float(exact))


@SETTINGS
@given(inst=extreme_instances(), seed=st.integers(0, 2**32 - 1))
def test_the_copy_walk_is_the_specs_float64_walk(inst: Instance, seed: int) -> None:
    # Decision by decision against the test model: legal actions, outcomes and the
    # remaining supply, bit for bit, on supplies and demands of mixed magnitudes.
    rng = random.Random(seed)
    game, ref = Game(inst), Reference(inst)
    while not game.done:
        options = ref.options()
        assert game.legal_mask().tolist() == [options[a] is not None for a in range(3)]
        for a in range(3):
            assert game.outcome(a) == options[a]
        assert game.supply_left().tolist() == ref.W
        action = rng.choice([a for a in range(3) if options[a] is not None])
        game.step(action)
        ref.step(action)
    assert game.supply_left().tolist() == ref.W
    if game.complete:  # rule 5 (exact, looser) accepts what the float64 walk accepted
        assert physical_check(inst, game.allocations()) == []


supplies = st.lists(
    st.one_of(st.just(0.0), st.sampled_from([1e12, 2.0**-14, 1e-12]), times), min_size=1, max_size=8
)


@settings(max_examples=600, deadline=None, derandomize=True)
@given(
    supply=supplies,
    scale=st.sampled_from([1.0, 1 - 1e-9, 1 - 1.0000001e-9, 1 - 0.9999999e-9, 1 + 1e-15, 0.5]),
)
def test_rule_5_compares_the_exact_supply_sum(supply: list[float], scale: float) -> None:
    # An input read by the last instruction and copied in over every earlier step:
    # copy_supply fails exactly when sum(supply) < (1 - 1e-9) * demand.
    total = sum((Fraction(w) for w in supply), Fraction(0))
    demand = min(float(total / Fraction(scale)), 1e12)
    n = len(supply)
    instructions = [I(supply=w) for w in supply] + [I(reads=[B(0, demand=demand)], supply=0.0)]
    inst = build([X(64)], instructions, capacity=1024)
    b = inst.instructions[n].buffers[0]
    copy = Allocation(buffer=b, action="Copy", offset=0, start=0, end=n, copy=(0, n - 1))
    failures = physical_check(inst, [copy])
    short = total < (1 - RTOL) * Fraction(demand)
    assert any(f.kind == "copy_supply" for f in failures) == short, (float(total), demand)


# ============================================================ the probe's findings


def _gru_with_a_huge_instruction(count: int) -> Instance:
    doc = json.loads(json.dumps(load_workload("xla-v1/gru_infer").to_dict()))
    doc["instructions"].append(
        {
            "name": "huge",
            "opcode": "custom",
            "count": count,
            "supply_s": 0.0,
            "buffers": [],
            "latency": {"kind": "roofline", "compute_s": 1e12, "fixed_s": 0.0},
        }
    )
    return instance_from_dict(doc)


@pytest.mark.parametrize("count", [1, MAX_COUNT])
def test_a_huge_instruction_widens_no_tolerance(count: int) -> None:
    inst = _gru_with_a_huge_instruction(count)
    answer = get_solver("heuristic").solve(inst, SolveRequest(seed=0, work=1))
    assert check_solution(inst, answer).ok
    for claim in (answer.reward_s + 0.9, answer.reward_s * (1 + 2e-9), 2e9):
        report = check_solution(inst, replace(answer, reward_s=claim))
        assert "reward_mismatch" in report.kinds, claim
    report = check_solution(inst, replace(answer, normalized_reward=9133.45))
    assert "reward_mismatch" in report.kinds


def _cancelling_table_instance() -> Instance:
    # count * 953923248486.9957 is about 1.2e21: a float64 running sum of the game's
    # rewards cancels to 643039232.0 where the exact reward is 643286584.5.
    # Two steps of supply before it let both inputs be copied in (0.64 s each).
    return build(
        [X(64), X(64), X(64)],
        [
            I(supply=1.0),
            I(supply=1.0),
            I(
                reads=[0, 1],
                writes=[2],
                count=1286573169,
                supply=1.0,
                latency=table([0, 1], [1.0, 953923248486.9957, 1.0, 0.5]),
            ),
        ],
        capacity=4096,
    )


@pytest.mark.parametrize(
    "solver, seed, work",
    [("random", 2, 5), ("es", 0, 20), ("greedy", 0, 1), ("heuristic", 0, 1), ("exact", 0, 500)],
)
def test_honest_answers_on_cancelling_latencies_pass(solver: str, seed: int, work: int) -> None:
    inst = _cancelling_table_instance()
    answer = get_solver(solver).solve(inst, SolveRequest(seed=seed, work=work))
    report = check_solution(inst, answer)
    assert report.ok, report.summary()
    assert answer.reward_s == float(exact_reward(inst, (a.buffer for a in answer.allocations)))
    if solver in ("exact", "es"):  # both inputs fast: 0.5 s a run, 2**31-scale counts
        assert answer.reward_s == 643286584.5


def test_the_game_sum_cancels_where_the_answer_does_not() -> None:
    inst = _cancelling_table_instance()
    game = Game(inst)
    for action in (0, 0):  # both inputs copied in
        game.step(action)
    play(game, lambda g, mask: 2)
    assert game.return_s != 643286584.5  # the float64 running sum lost it
    answer = solution_from_game(inst, game, solver="manual", seed=0, wall_s=0.0)
    assert answer.reward_s == 643286584.5 and check_solution(inst, answer).ok


def test_the_cancelling_case_is_exact_where_floats_are_not() -> None:
    inst = _cancelling_table_instance()
    # Buffer 0 alone fast costs 9.5e11 s a run, buffer 1 alone gains nothing, both gain 0.5 s.
    assert exact_reward(inst, [0]) == 1286573169 * (1 - Fraction(953923248486.9957))
    assert exact_reward(inst, [1]) == 0
    assert exact_reward(inst, [0, 1]) == Fraction(1286573169, 2)
    both = exact_reward(inst, [0, 1])
    assert both == 1286573169 * (Fraction(1.0) - Fraction(0.5)) == Fraction(1286573169, 2)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_claims_fail(bad: float) -> None:
    # A Solution refuses them where it is made; the checker fails them all the same
    # when one is forced past that (a solution object is not trusted).
    inst = _cancelling_table_instance()
    answer = get_solver("greedy").solve(inst, SolveRequest(seed=0, work=1))
    for field, kind in (
        ("reward_s", "reward_mismatch"),
        ("normalized_reward", "reward_mismatch"),
        ("bound_s", "false_bound"),
    ):
        with pytest.raises(SolutionError):
            replace(answer, **{field: bad})
        forced = replace(answer)
        object.__setattr__(forced, field, bad)
        assert kind in check_solution(inst, forced).kinds


def test_a_negative_bound_or_one_below_the_reward_is_false() -> None:
    inst = load_workload("xla-v1/gru_infer")
    answer = get_solver("heuristic").solve(inst, SolveRequest(seed=0, work=1))
    assert answer.reward_s > 0
    assert check_solution(inst, replace(answer, bound_s=answer.reward_s)).ok
    for bound in (-1.0, answer.reward_s * 0.99):
        assert check_solution(inst, replace(answer, bound_s=bound)).kinds == {"false_bound"}


def test_wrong_argument_types_are_typed_errors() -> None:
    inst = _cancelling_table_instance()
    answer = get_solver("greedy").solve(inst, SolveRequest(seed=0, work=1))
    with pytest.raises(SolutionError):
        check_solution(inst, None)  # type: ignore[arg-type]
    with pytest.raises(InstanceError):
        check_solution(answer, inst)  # type: ignore[arg-type]


def test_a_tampered_hash_is_named_as_such() -> None:
    inst = _cancelling_table_instance()
    answer = get_solver("greedy").solve(inst, SolveRequest(seed=0, work=1))
    report = check_solution(inst, replace(answer, instance_sha256="0" * 64))
    assert report.kinds == {"instance_mismatch"}
    assert "edited" in report.summary() and "another" not in report.summary()


def test_the_judge_agrees_with_the_library_on_a_bundled_program() -> None:
    # The exact reference of mallocgame.latency and this file's judge are one number.
    from mallocgame.latency import exact_mapping_reward, exact_reward_normalizer

    inst = load_workload("xla-v1/gru_infer")
    fast = np.random.default_rng(0).choice(inst.num_buffers, inst.num_buffers // 3, replace=False)
    assert exact_mapping_reward(inst, fast.tolist()) == exact_reward(inst, fast.tolist())
    assert exact_reward_normalizer(inst) == exact_normalizer(inst)
