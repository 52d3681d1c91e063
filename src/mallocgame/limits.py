"""The limits every entry point holds a request to (the library, the command line, the
sweeps): one definition, imported where a seed or a budget is checked.

- :data:`MAX_SEED`: seeds are whole numbers in ``0 .. MAX_SEED``; every solver derives its
  random streams (numpy, JAX, CP-SAT's 32-bit seed folded) from them.
- :data:`MAX_SECONDS`: a wall-clock budget is a finite number of seconds in
  ``(0, MAX_SECONDS]`` (7 days: what anyone means).
- :data:`MAX_WORK`: a work budget is a whole number in ``1 .. MAX_WORK`` (the largest integer
  a solution or record file holds exactly, SPEC section 1).
"""

from __future__ import annotations

__all__ = ["MAX_SEED", "MAX_SECONDS", "MAX_WORK"]

MAX_SEED = 2**63 - 1
MAX_SECONDS = 7 * 24 * 3600.0
MAX_WORK = 2**53
