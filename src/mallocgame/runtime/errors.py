"""Typed errors of the apply path (:mod:`mallocgame.runtime`).

Every one is a :class:`~mallocgame.errors.MallocGameError`, so the command line turns it
into one line and exit code 2.
"""

from __future__ import annotations

from mallocgame.errors import MallocGameError

__all__ = ["ApplyError", "AnswerMismatchError", "ProgramMismatchError", "NoGpuError", "PlanError"]


class ApplyError(MallocGameError):
    """An answer cannot be applied to a program (the message says why)."""


class AnswerMismatchError(ApplyError):
    """The answer was computed for another instance (its ``instance_sha256`` differs)."""


class ProgramMismatchError(ApplyError):
    """The captured program is not the one the instance was extracted from (an instruction's
    name, opcode or tensors differ)."""


class NoGpuError(ApplyError):
    """A CUDA device is needed (host-mapped memory, CUDA streams) and none is available."""


class PlanError(ApplyError):
    """An answer's allocations do not describe a placement the runtime can follow (it
    breaks a physical rule of SPEC section 7: a fast read without a fast copy, a slow read
    of a tensor that never reaches slow memory)."""
