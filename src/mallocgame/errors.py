"""Typed exceptions of the library.

Every error a user can cause (a bad file, a bad instance, an illegal action, an
unknown solver) is a subclass of :class:`MallocGameError`; the command line turns
each into a one-line message and exit code 2. A failed *check* of a solution is
not an exception but a :class:`mallocgame.check.CheckReport`.
"""

from __future__ import annotations

__all__ = [
    "MallocGameError",
    "InputFileError",
    "OutputFileError",
    "FormatError",
    "InstanceError",
    "SolutionError",
    "IllegalActionError",
    "GameOverError",
    "UndoError",
    "NoSuchIdError",
    "SolverError",
    "StaleRecordError",
    "ComparisonError",
    "one_line",
]


class MallocGameError(Exception):
    """Base class of every error the library raises on purpose."""


class InputFileError(MallocGameError):
    """A file is missing, unreadable, or not valid (gzip-)JSON."""


class OutputFileError(InputFileError):
    """A file cannot be written: its path is a directory or a special file that cannot
    take a document (a block device, a socket), the system refused the write, or the
    document holds a number JSON cannot represent (NaN, an infinity). A subclass of
    :class:`InputFileError`, which write failures raised before this class existed."""


class FormatError(MallocGameError):
    """A document has the wrong ``format`` tag or an unsupported ``version``."""


class InstanceError(MallocGameError):
    """An instance breaks a structural rule of SPEC section 1 (the message names it)."""


class SolutionError(MallocGameError):
    """A solution document is malformed (missing keys, wrong types)."""


class IllegalActionError(MallocGameError):
    """An action that is not legal in the current game state was played."""


class GameOverError(MallocGameError):
    """An action was played after the game ended (complete or infeasible)."""


class UndoError(MallocGameError, ValueError):
    """An undo past the start of the game, or to a mark ahead of the current state (a
    ``ValueError`` too, as it was before it had a type of its own)."""


class NoSuchIdError(MallocGameError, IndexError):
    """A game asked about a buffer, tensor or alias group it does not have (an
    ``IndexError`` too: a negative id used to answer for the last one)."""


class SolverError(MallocGameError):
    """An unknown solver or an invalid solver configuration."""


class WorkerError(MallocGameError):
    """A worker process of a pool ended before returning its work (killed from
    outside, or by the out-of-memory killer)."""


class StaleRecordError(MallocGameError):
    """A sweep's result file was written with other solver settings than the job's
    (a default changed since): skipping it would mix two settings in one table."""


class ComparisonError(MallocGameError):
    """Records cannot make the asked comparison (two records for one cell, a solver
    compared with itself)."""


def one_line(exc: BaseException) -> str:
    """``exc`` as one line of a message: its type and the first non-blank line of its text
    (a compiler's or a framework's error can run to pages)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"
