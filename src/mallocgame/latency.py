"""Instruction latencies and the reward of a mapping (SPEC section 5), in plain Python.

This is the reference computation used by the checker and by every solver when it
writes an answer; the game itself computes the same quantities incrementally in
float64, for search.

The reward and its normalizer are exact: :func:`exact_mapping_reward` and
:func:`exact_reward_normalizer` evaluate SPEC section 5's formulas in rational
arithmetic (:class:`fractions.Fraction`) on the instance's numbers taken as the exact
values of their float64s, so that no cancellation of large latencies (a count of
``2**31 - 1`` times a table value of ``1e12`` s beside a reward of microseconds) can
change the answer. :func:`mapping_reward` and :func:`reward_normalizer` are those exact
values correctly rounded to float64: the one reference a solution's ``reward_s`` is
held to (SPEC section 7). :func:`instruction_latency` is a float64 latency for the
simulator and for display.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from fractions import Fraction

from mallocgame.instance import Instance, RooflineLatency

__all__ = [
    "instruction_latency",
    "exact_mapping_reward",
    "exact_reward_normalizer",
    "reward_normalizer",
    "mapping_reward",
    "normalize",
    "exact_normalized",
]


def instruction_latency(inst: Instance, t: int, fast: AbstractSet[int]) -> float:
    """``count * L_t(S)`` in seconds, ``S`` = the buffers of instruction ``t`` in ``fast``."""
    ins = inst.instructions[t]
    lat = ins.latency
    if isinstance(lat, RooflineLatency):
        hw = inst.hardware
        mem = 0.0
        for b in ins.buffers:
            bw = hw.fast_bandwidth if b in fast else hw.slow_bandwidth
            mem += inst.buffers[b].size / bw
        one = lat.fixed_s + max(lat.compute_s, mem)
    else:
        mask = 0
        for i, b in enumerate(lat.varied):
            if b in fast:
                mask |= 1 << i
        one = lat.latency_s[mask]
    return ins.count * one


def exact_instruction_gain(inst: Instance, t: int, fast: AbstractSet[int]) -> Fraction:
    """``count * (L_t(empty) - L_t(S))`` exactly, in seconds, ``S`` = the buffers of
    instruction ``t`` in ``fast``.

    Roofline: ``fixed_s`` cancels, and ``sum_b size_b / bw_b`` is ``F / fast_bw +
    (Z - F) / slow_bw`` with ``F`` the fast bytes and ``Z`` all bytes of ``t`` (integers),
    so the gain is ``count * (max(c, Z / slow_bw) - max(c, F / fast_bw + (Z - F) / slow_bw))``.
    Table: ``count * (latency_s[0] - latency_s[mask])``.
    """
    ins = inst.instructions[t]
    lat = ins.latency
    if isinstance(lat, RooflineLatency):
        total = 0
        in_fast = 0
        for b in ins.buffers:
            size = inst.buffers[b].size
            total += size
            if b in fast:
                in_fast += size
        if in_fast == 0:
            return Fraction(0)
        hw = inst.hardware
        slow_bw = Fraction(hw.slow_bandwidth)
        compute = Fraction(lat.compute_s)
        empty = max(compute, total / slow_bw)
        placed = max(compute, in_fast / Fraction(hw.fast_bandwidth) + (total - in_fast) / slow_bw)
        return ins.count * (empty - placed)
    mask = 0
    for i, b in enumerate(lat.varied):
        if b in fast:
            mask |= 1 << i
    if mask == 0:
        return Fraction(0)
    return ins.count * (Fraction(lat.latency_s[0]) - Fraction(lat.latency_s[mask]))


_NORMALIZERS: dict[int, Fraction] = {}  # id(instance) -> R, while the instance lives


def exact_reward_normalizer(inst: Instance) -> Fraction:
    """``R = sum_t L_t(empty) - L_t(all buffers of t)`` exactly (seconds); computed once
    per instance object (an :class:`Instance` is immutable)."""
    key = id(inst)
    cached = _NORMALIZERS.get(key)
    if cached is not None:
        return cached
    total = Fraction(0)
    for t, ins in enumerate(inst.instructions):
        total += exact_instruction_gain(inst, t, frozenset(ins.buffers))
    _NORMALIZERS[key] = total
    weakref.finalize(inst, _NORMALIZERS.pop, key, None)
    return total


def exact_mapping_reward(inst: Instance, fast_buffers: Iterable[int]) -> Fraction:
    """``sum_t L_t(empty) - L_t(S_t)`` exactly, for the set of buffers placed in fast
    memory (seconds). Buffer ids outside the instance are ignored."""
    fast = frozenset(fast_buffers)
    touched = sorted({inst.buffers[b].instruction for b in fast if 0 <= b < inst.num_buffers})
    total = Fraction(0)
    for t in touched:
        total += exact_instruction_gain(inst, t, fast)
    return total


def reward_normalizer(inst: Instance) -> float:
    """``R`` (:func:`exact_reward_normalizer`) correctly rounded to float64 (seconds)."""
    return float(exact_reward_normalizer(inst))


def mapping_reward(inst: Instance, fast_buffers: Iterable[int]) -> float:
    """The reward of a mapping (:func:`exact_mapping_reward`) correctly rounded to
    float64 (seconds): the reference for a solution's ``reward_s``."""
    return float(exact_mapping_reward(inst, fast_buffers))


def exact_normalized(reward: Fraction, normalizer: Fraction) -> float:
    """``reward / R`` computed exactly and rounded once (0 when ``R`` is 0)."""
    return float(reward / normalizer) if normalizer != 0 else 0.0


def normalize(inst: Instance, reward_s: float, normalizer: float | None = None) -> float:
    """The normalized reward: ``reward_s / R`` (0 when ``R`` is 0)."""
    r = reward_normalizer(inst) if normalizer is None else normalizer
    return reward_s / r if r != 0 else 0.0
