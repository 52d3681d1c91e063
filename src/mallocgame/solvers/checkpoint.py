"""Reading a learning solver's checkpoint back: one msgpack document with a fingerprint.

``muzero`` and ``egrl`` write their state as a flax msgpack document whose
``"fingerprint"`` names what the run is for (instance hash, seed, settings).
:func:`restore_checkpoint` reads it and refuses a damaged file or one written for
another run, with a :class:`~mallocgame.errors.SolverError` naming the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from mallocgame.errors import SolverError

__all__ = ["restore_checkpoint"]


def restore_checkpoint(path: Path, fingerprint: Mapping[str, Any], remedy: str) -> dict[str, Any]:
    """The state dict at ``path`` if its fingerprint equals ``fingerprint`` on every key;
    ``remedy`` ends the message of a mismatch (e.g. ``"use another --dir or remove it"``)."""
    from flax import serialization

    try:
        state = serialization.msgpack_restore(path.read_bytes())
    except Exception as exc:  # msgpack raises several types for a damaged file
        raise SolverError(f"{path}: not a readable checkpoint ({type(exc).__name__})") from None
    if not isinstance(state, dict):
        raise SolverError(f"{path}: not a readable checkpoint (not a mapping)")
    theirs = state.get("fingerprint", {})
    for key, value in fingerprint.items():
        if not isinstance(theirs, dict) or theirs.get(key) != value:
            raise SolverError(f"{path}: checkpoint was written for a different {key} ({remedy})")
    return state
