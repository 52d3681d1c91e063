"""Instruction latencies and the reward of a mapping (mallocgame.latency, SPEC section 5).

Worked by hand on :func:`tests.builders.reward_instance` (fast memory 1000 B/s, slow
100 B/s): instruction 0 (count 3, roofline compute 2.5 s, fixed 0.25 s) reads P = 0
(100 B) and Q = 1 (200 B) and writes O = 2 (100 B); instruction 1 (count 2) reads P2 =
3, Q2 = 4, R2 = 5 and writes O2 = 6 (100 B each) under a table over [R2, P2] (index =
R2 + 2 * P2) of latencies 8, 5, 6, 1 s.
"""

from __future__ import annotations

import pytest

from mallocgame.latency import instruction_latency, mapping_reward, normalize, reward_normalizer
from tests.builders import (
    CONFORMANCE_NAMES,
    I,
    X,
    build,
    conformance_instance,
    reward_instance,
    roofline,
    table,
)

REL = 1e-12


@pytest.mark.parametrize(
    "fast, latency",
    [
        # count 3 * (0.25 + max(2.5, memory)); memory all slow: 1 + 2 + 1 = 4 s
        (set(), 3 * 4.25),
        ({0}, 3 * 3.35),  # P fast: 0.1 + 2 + 1 = 3.1
        ({1}, 3 * 2.75),  # Q fast: 1 + 0.2 + 1 = 1.2 < 2.5, compute bound
        ({2}, 3 * 3.35),  # an output counts like an operand
        ({0, 1, 2}, 3 * 2.75),
        ({3, 4, 5, 6}, 3 * 4.25),  # another instruction's buffers do not matter
    ],
)
def test_roofline_latency_by_hand(fast: set[int], latency: float) -> None:
    assert instruction_latency(reward_instance(), 0, fast) == pytest.approx(latency, rel=REL)


@pytest.mark.parametrize(
    "fast, latency",
    [
        (set(), 2 * 8.0),
        ({5}, 2 * 5.0),  # R2: bit 0
        ({3}, 2 * 6.0),  # P2: bit 1
        ({3, 5}, 2 * 1.0),
        ({4, 6}, 2 * 8.0),  # Q2 and O2 are not varied: no effect
        ({3, 4, 5, 6}, 2 * 1.0),
    ],
)
def test_table_latency_by_hand(fast: set[int], latency: float) -> None:
    assert instruction_latency(reward_instance(), 1, frozenset(fast)) == latency


def test_fixed_time_is_added_and_memory_can_dominate() -> None:
    # 100 B read and 100 B written, compute 0.5 s, fixed 0.1 s, count 4:
    # slow 0.1 + max(0.5, 2) = 2.1; one fast 0.1 + max(0.5, 1.1) = 1.2; both 0.1 + 0.5.
    inst = build(
        tensors=[X(100), X(100)],
        instructions=[I(reads=[0], writes=[1], count=4, latency=roofline(0.5, 0.1))],
    )
    assert instruction_latency(inst, 0, set()) == pytest.approx(4 * 2.1, rel=REL)
    assert instruction_latency(inst, 0, {1}) == pytest.approx(4 * 1.2, rel=REL)
    assert instruction_latency(inst, 0, {0, 1}) == pytest.approx(4 * 0.6, rel=REL)


def test_normalizer_by_hand() -> None:
    # R = 3 * (4.25 - 2.75) + 2 * (8 - 1)
    assert reward_normalizer(reward_instance()) == pytest.approx(18.5, rel=REL)


@pytest.mark.parametrize(
    "fast, reward",
    [
        ([], 0.0),
        ([0, 1, 2, 3, 4, 6], 3 * 1.5 + 2 * 2.0),  # the game of tests/game/test_rules.py
        ([3, 5], 2 * 7.0),
        ([5], 2 * 3.0),
        ([4, 6], 0.0),  # not varied by the table, and no buffer of instruction 0
        ([0], 3 * 0.9),
        ([0, 1], 3 * 1.5),  # P and Q: 2.75 s, compute bound
    ],
)
def test_mapping_reward_by_hand(fast: list[int], reward: float) -> None:
    assert mapping_reward(reward_instance(), fast) == pytest.approx(reward, rel=REL, abs=1e-15)


def test_mapping_reward_takes_any_iterable_and_ignores_repeats() -> None:
    inst = reward_instance()
    assert (
        mapping_reward(inst, iter([3, 5]))
        == mapping_reward(inst, {3, 5})
        == mapping_reward(inst, [5, 3, 5])
    )


@pytest.mark.parametrize("name", CONFORMANCE_NAMES)
def test_every_buffer_fast_earns_the_normalizer(name: str) -> None:
    inst = conformance_instance(name)
    everything = range(inst.num_buffers)
    assert mapping_reward(inst, everything) == pytest.approx(reward_normalizer(inst), rel=1e-9)
    # and the reward is the sum over instructions of what each one saves
    saved = sum(
        instruction_latency(inst, t, frozenset())
        - instruction_latency(inst, t, frozenset(ins.buffers))
        for t, ins in enumerate(inst.instructions)
    )
    assert reward_normalizer(inst) == pytest.approx(saved, rel=1e-12)


def test_normalize() -> None:
    inst = reward_instance()
    assert normalize(inst, 8.5) == pytest.approx(8.5 / 18.5, rel=REL)
    assert normalize(inst, 3.0, normalizer=6.0) == 0.5  # a given normalizer is used as is
    assert normalize(inst, 3.0, normalizer=0.0) == 0.0


def test_normalize_is_zero_when_nothing_can_be_gained() -> None:
    # compute 10 s dwarfs the 1 s of memory time: fast memory saves nothing, R = 0
    inst = build(tensors=[X(100)], instructions=[I(reads=[0], latency=roofline(compute_s=10.0))])
    assert reward_normalizer(inst) == 0.0
    assert mapping_reward(inst, [0]) == 0.0
    assert normalize(inst, 1.0) == 0.0


def test_rewards_are_exact_where_float64_sums_cancel() -> None:
    # count * 953923248486.9957 ~ 1.2e21 beside a gain of 0.5 s a run: the exact reward
    # of both varied buffers fast is count * 0.5, and mapping_reward rounds it once.
    from fractions import Fraction

    from mallocgame.latency import exact_mapping_reward, exact_reward_normalizer

    inst = build(
        [X(64), X(64), X(64)],
        [
            I(
                reads=[0, 1],
                writes=[2],
                count=1286573169,
                latency=table([0, 1], [1.0, 953923248486.9957, 1.0, 0.5]),
            )
        ],
    )
    assert exact_mapping_reward(inst, [0, 1]) == Fraction(1286573169, 2)
    assert mapping_reward(inst, [0, 1]) == 643286584.5
    assert exact_mapping_reward(inst, [0]) == 1286573169 * (1 - Fraction(953923248486.9957))
    assert exact_reward_normalizer(inst) == Fraction(1286573169, 2)
    assert reward_normalizer(inst) == 643286584.5


def test_the_normalizer_is_computed_once_per_instance_and_forgotten_with_it() -> None:
    import gc

    from mallocgame import latency

    inst = build([X(64), X(32)], [I(reads=[0], writes=[1])])
    first = latency.exact_reward_normalizer(inst)
    assert latency._NORMALIZERS[id(inst)] is first
    assert latency.exact_reward_normalizer(inst) is first
    key = id(inst)
    del inst
    gc.collect()
    assert key not in latency._NORMALIZERS
