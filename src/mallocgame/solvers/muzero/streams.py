"""The random streams of a MuZero run: one NumPy generator per use of the run's seed.

Each use has a tag, and each draw of it its counters (the moves played, a learner
step, an actor's calls): :func:`stream` keys the generator by ``SeedSequence(seed,
spawn_key=(tag, *counters))``. Spawn keys of different lengths or values are different
streams; seeding with the list ``[seed, tag, *counters]`` instead would not be, since
NumPy reads ``[s, 1, 0]`` as ``[s, 1]``: a self-play draw at move 0 would repeat learner
step 1's, and the restarts' draw learner step 2's.

JAX's keys (the search's noise, Reanalyse's) come from :func:`jax_key`, which keeps every
bit of a 63-bit seed: ``jax.random.PRNGKey`` alone keeps its low 32 bits (without x64),
so seeds ``s`` and ``s + 2**32`` would search with the same noise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["SELFPLAY", "RESTARTS", "ACTOR", "LEARNER", "stream", "jax_key"]

SELFPLAY = 1
"""Restarts drawn in one self-play step: counters ``(moves,)``, or ``(program, moves)``
for a shared agent's trainer of one program."""
RESTARTS = 2
"""The restarts a run starts before its first move: no counters."""
ACTOR = 3
"""A distributed self-play actor's restarts: counters ``(actor index, process id, calls)``."""
LEARNER = 4
"""A learner step's sampling: counters ``(learner steps,)``."""


def stream(seed: int, tag: int, *counters: int) -> np.random.Generator:
    """The generator of use ``tag`` of ``seed`` at ``counters`` (whole numbers >= 0)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(tag, *counters)))


def jax_key(seed: int) -> Any:
    """The JAX key of ``seed`` (0 .. 2**63 - 1): ``PRNGKey`` of its low 32 bits, its high
    bits folded in where there are any (so every seed below 2**32 keeps the key it always
    had, and no two seeds share one)."""
    import jax

    key = jax.random.PRNGKey(seed & 0xFFFFFFFF)
    return key if seed >> 32 == 0 else jax.random.fold_in(key, seed >> 32)
