"""Instruction latencies and the reward of a mapping (SPEC section 5), in plain Python.

This is the reference computation used by the checker and by solvers that work
outside the game; the game itself computes the same quantities incrementally.
"""

from __future__ import annotations

from typing import AbstractSet, Iterable

from mallocgame.instance import Instance, RooflineLatency

__all__ = [
    "instruction_latency",
    "reward_normalizer",
    "mapping_reward",
    "normalize",
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


def reward_normalizer(inst: Instance) -> float:
    """``R = sum_t L_t(empty) - L_t(all buffers of t)`` (seconds)."""
    total = 0.0
    for t, ins in enumerate(inst.instructions):
        total += instruction_latency(inst, t, frozenset()) - instruction_latency(
            inst, t, frozenset(ins.buffers)
        )
    return total


def mapping_reward(inst: Instance, fast_buffers: Iterable[int]) -> float:
    """``sum_t L_t(empty) - L_t(S_t)`` for the set of buffers placed in fast memory (seconds)."""
    fast = frozenset(fast_buffers)
    total = 0.0
    for t, ins in enumerate(inst.instructions):
        if any(b in fast for b in ins.buffers):
            total += instruction_latency(inst, t, frozenset()) - instruction_latency(inst, t, fast)
    return total


def normalize(inst: Instance, reward_s: float, normalizer: float | None = None) -> float:
    """The normalized reward: ``reward_s / R`` (0 when ``R`` is 0)."""
    r = reward_normalizer(inst) if normalizer is None else normalizer
    return reward_s / r if r != 0 else 0.0
