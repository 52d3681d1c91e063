"""Solutions (SPEC section 7): a mapping of buffers to fast memory, and its reward.

A :class:`Solution` lists one :class:`Allocation` per buffer placed in fast memory;
game trajectories also carry their ``actions``. Every solver reports the ``work`` it
did and, where it proves one, ``bound_s``; its other diagnostics are ``info``. In the
file ``work`` and ``bound_s`` are top-level keys (SPEC section 7) and ``info`` one
object; a file's other top-level keys (what files written before ``info`` existed
carry) are read into ``info``. :func:`load_solution` also reads the solution kept in a
sweep record. :func:`save_solution` writes atomically.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mallocgame.errors import FormatError, SolutionError
from mallocgame.fileio import (
    check_header,
    is_finite_number,
    is_finite_real,
    read_document,
    write_json,
)
from mallocgame.limits import MAX_SEED

MAX_INT = 2**53  # the largest magnitude of an integer of a solution file

__all__ = [
    "SOLUTION_FORMAT",
    "SOLUTION_VERSION",
    "ACTION_NAMES",
    "Allocation",
    "Solution",
    "solution_from_dict",
    "load_solution",
    "save_solution",
]

SOLUTION_FORMAT = "mallocgame-solution"
SOLUTION_VERSION = 1
ACTION_NAMES = ("Copy", "NoCopy", "Drop")  # index = action id of SPEC section 4


@dataclass(frozen=True)
class Allocation:
    """One buffer in fast memory: ``[offset, offset + aligned size)`` over ``[start, end]``.

    ``start``/``end`` are ``None`` for an empty memory interval (a NoCopy read of a
    tensor that is already resident); ``copy`` is the inclusive step interval of the
    copy, or ``None`` for none. Only the kinds of the fields are checked here: every
    integer has a magnitude of at most 2**53 (NumPy integers are taken as Python ints)
    and ``action`` is a string, else a :class:`SolutionError`; whether the allocation
    keeps the rules (a known buffer and action, intervals of the right shape) is for
    :mod:`mallocgame.check` to judge.
    """

    buffer: int
    action: str  # "Copy" or "NoCopy"
    offset: int  # bytes
    start: int | None
    end: int | None
    copy: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if _plain(self):  # the common case (every allocation the game makes): nothing to do
            return
        if not (_is_int(self.buffer) and _is_int(self.offset)):
            raise SolutionError(
                f"allocation: 'buffer' and 'offset' must be integers of magnitude "
                f"at most 2**53, not {self.buffer!r} and {self.offset!r}"
            )
        if not isinstance(self.action, str):
            raise SolutionError(
                f"allocation of buffer {self.buffer}: 'action' must be a string, "
                f"not {self.action!r}"
            )
        if not all(v is None or _is_int(v) for v in (self.start, self.end)):
            raise SolutionError(
                f"allocation of buffer {self.buffer}: 'start' and 'end' must be "
                f"None or integers of magnitude at most 2**53, not {self.start!r} "
                f"and {self.end!r}"
            )
        copy = self.copy
        if copy is not None:
            pair = isinstance(copy, (tuple, list)) and len(copy) == 2
            if not pair or not all(_is_int(c) for c in copy):
                raise SolutionError(
                    f"allocation of buffer {self.buffer}: 'copy' must be None or a "
                    f"pair of integers of magnitude at most 2**53, not {copy!r}"
                )
            object.__setattr__(self, "copy", (int(copy[0]), int(copy[1])))
        for name in ("buffer", "offset", "start", "end"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, int(getattr(self, name)))

    @property
    def is_empty(self) -> bool:
        return self.start is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "buffer": self.buffer,
            "action": self.action,
            "offset": self.offset,
            "start": self.start,
            "end": self.end,
            "copy": None if self.copy is None else [self.copy[0], self.copy[1]],
        }


@dataclass(frozen=True)
class Solution:
    """A solved instance: allocations, reward, and how it was found."""

    instance: str
    instance_sha256: str
    solver: str
    seed: int
    wall_s: float
    allocations: tuple[Allocation, ...]
    reward_s: float
    normalized_reward: float
    # the game trajectory, or None for a mapping found outside the game
    actions: tuple[int, ...] | None = None
    work: Mapping[str, int | float] = field(
        default_factory=dict
    )  # work done, in the solver's units
    bound_s: float | None = None  # a proven upper bound on reward_s, seconds
    info: Mapping[str, Any] = field(default_factory=dict)  # the solver's diagnostics (JSON values)

    def __post_init__(self) -> None:
        """A :class:`SolutionError` of one line for a non-finite (or non-number)
        ``reward_s``, ``normalized_reward``, ``wall_s`` or ``bound_s`` (SPEC section 7:
        they are finite), ``actions`` that are not whole numbers (a float, a bool), an
        allocation that is not an :class:`Allocation` (the allocations are kept as a
        tuple), ``work`` that is not finite numbers by name, ``info`` that is not JSON (a
        key that is not a string, or a set, bytes or another object at any depth; its
        NumPy numbers are kept as Python's), a ``seed`` that is not a whole number of 64 bits, or an
        ``instance``, ``instance_sha256`` or ``solver`` that is not a string: a solution is
        refused where it is made, as its file would be. The four numbers are kept as Python
        floats, the seed as a Python int, ``work``'s numbers as Python numbers and the
        actions as a tuple of Python ints (a NumPy scalar or array given is converted), so
        every reader sees the file's types and every solution made can be saved."""
        for name in ("instance", "instance_sha256", "solver"):
            if not isinstance(getattr(self, name), str):
                value = getattr(self, name)
                raise SolutionError(f"solution: '{name}' must be a string, not {value!r:.80}")
        if type(self.seed) is not int:
            seed = self.seed
            if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
                raise SolutionError(f"solution: 'seed' must be a whole number, not {seed!r:.80}")
            object.__setattr__(self, "seed", int(seed))
        if not _is_seed(self.seed):
            raise SolutionError(
                f"solution: 'seed' must be a whole number of at most 64 bits, not {self.seed}"
            )
        for name in ("reward_s", "normalized_reward", "wall_s"):
            if not is_finite_real(getattr(self, name)):
                value = getattr(self, name)
                raise SolutionError(f"solution: '{name}' must be a finite number, not {value!r}")
            if type(getattr(self, name)) is not float:
                object.__setattr__(self, name, float(getattr(self, name)))
        if self.bound_s is not None:
            if not is_finite_real(self.bound_s):
                raise SolutionError(
                    f"solution: 'bound_s' must be a finite number or None, not {self.bound_s!r}"
                )
            if type(self.bound_s) is not float:
                object.__setattr__(self, "bound_s", float(self.bound_s))
        if self.actions is not None:
            object.__setattr__(self, "actions", _action_tuple(self.actions))
        if not isinstance(self.allocations, tuple):  # kept as given once: an iterator's
            # items were used up by the check below, and the solution saved without them
            try:
                object.__setattr__(self, "allocations", tuple(self.allocations))
            except TypeError:
                raise SolutionError(
                    f"solution: 'allocations' must be Allocation objects, not {self.allocations!r:.80}"
                ) from None
        if not all(isinstance(a, Allocation) for a in self.allocations):
            raise SolutionError("solution: 'allocations' must hold Allocation objects")
        if not isinstance(self.info, Mapping):
            raise SolutionError(
                f"solution: 'info' must map names (strings) to values, not {self.info!r:.80}"
            )
        if _has_numpy(self.info, "info"):  # checked all the way down on the way
            object.__setattr__(self, "info", _plain_json(self.info))
        if not isinstance(self.work, Mapping) or not all(
            is_finite_real(v) for v in self.work.values()
        ):
            raise SolutionError(
                f"solution: 'work' must map names to finite numbers, not {self.work!r}"
            )
        if any(isinstance(v, np.generic) for v in self.work.values()):
            plain = {k: v.item() if isinstance(v, np.generic) else v for k, v in self.work.items()}
            object.__setattr__(self, "work", plain)

    def to_dict(self) -> dict[str, Any]:
        """The SPEC section 7 document; ``info``'s non-finite numbers (diagnostics such
        as a diverged loss) are written as ``null``, since JSON has no NaN or infinity."""
        doc: dict[str, Any] = {
            "format": SOLUTION_FORMAT,
            "version": SOLUTION_VERSION,
            "instance": self.instance,
            "instance_sha256": self.instance_sha256,
            "solver": self.solver,
            "seed": self.seed,
            "wall_s": self.wall_s,
        }
        if self.actions is not None:
            doc["actions"] = list(self.actions)
        doc["allocations"] = [a.to_dict() for a in self.allocations]
        doc["reward_s"] = self.reward_s
        doc["normalized_reward"] = self.normalized_reward
        if self.work:
            doc["work"] = dict(self.work)
        if self.bound_s is not None:
            doc["bound_s"] = self.bound_s
        if self.info:
            doc["info"] = _finite_json(dict(self.info))
        return doc


def _has_numpy(value: Any, where: str) -> bool:
    """Whether ``value`` (a solution's ``info``) holds a NumPy number; a
    :class:`SolutionError` naming the place for a key that is not a string or a value no
    JSON file holds (a set, bytes, an object), at any depth."""
    if isinstance(value, Mapping):
        found = False
        for k, v in value.items():
            if not isinstance(k, str):
                raise SolutionError(f"solution: {where} has the key {k!r:.40}, not a string")
            found = _has_numpy(v, f"{where}.{k}") or found
        return found
    if isinstance(value, (list, tuple)):
        found = False
        for i, v in enumerate(value):
            found = _has_numpy(v, f"{where}[{i}]") or found
        return found
    if value is None or isinstance(value, (bool, str, int, float)):
        return isinstance(value, np.generic)  # NumPy's float64 is a float
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return True
    raise SolutionError(
        f"solution: {where} is {value!r:.40} ({type(value).__name__}), no JSON value"
    )


def _plain_json(value: Any) -> Any:
    """``value`` with its NumPy numbers as Python's (containers kept as their kind)."""
    if isinstance(value, Mapping):
        return {k: _plain_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain_json(v) for v in value)
    return value.item() if isinstance(value, np.generic) else value


def _finite_json(value: Any) -> Any:
    """``value`` with every non-finite float inside its dicts, lists and tuples as ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_json(v) for v in value]
    return value


def _plain(a: Allocation) -> bool:
    """Whether ``a``'s fields are already plain Python ints (or ``None``) of the file's range,
    a string action and a tuple ``copy``: true of every allocation the game and the solvers
    make, which then skip the per-field checks and conversions."""
    m = MAX_INT
    c = a.copy
    return (
        type(a.buffer) is int
        and -m <= a.buffer <= m
        and type(a.offset) is int
        and -m <= a.offset <= m
        and (a.start is None or (type(a.start) is int and -m <= a.start <= m))
        and (a.end is None or (type(a.end) is int and -m <= a.end <= m))
        and type(a.action) is str
        and (
            c is None
            or (
                type(c) is tuple
                and len(c) == 2
                and type(c[0]) is int
                and type(c[1]) is int
                and -m <= c[0] <= m
                and -m <= c[1] <= m
            )
        )
    )


def _fail(where: str, message: str) -> SolutionError:
    return SolutionError(f"{where}: {message}")


def _is_int(v: Any) -> bool:
    """An integer of the file's range: magnitude at most 2**53 (SPEC section 1); NumPy
    integers count, ``bool`` does not."""
    return (
        isinstance(v, numbers.Integral)
        and not isinstance(v, bool)
        and -MAX_INT <= int(v) <= MAX_INT
    )


def _action_tuple(actions: Any) -> tuple[int, ...]:
    """``actions`` as a tuple of Python ints; :class:`SolutionError` unless it is a sequence
    (a list, a tuple, a 1-D NumPy array) of whole numbers that are not booleans."""
    if type(actions) is tuple and all(type(a) is int for a in actions):
        return actions  # what the game gives: nothing to convert
    if isinstance(actions, (str, bytes, Mapping)) or not hasattr(actions, "__iter__"):
        raise SolutionError(
            f"solution: 'actions' must be a sequence of integers, not {actions!r:.80}"
        )
    items = list(actions)
    for a in items:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, numbers.Integral):
            raise SolutionError(f"solution: 'actions' holds {a!r:.80}, not a whole number")
    return tuple(int(a) for a in items)


def _is_seed(v: Any) -> bool:
    """A seed a file may hold: an int64 (the solvers take ``0 .. 2**63 - 1``; files
    written before seeds were checked may hold a negative one)."""
    return isinstance(v, int) and not isinstance(v, bool) and -MAX_SEED - 1 <= v <= MAX_SEED


def _allocation_from_dict(obj: Any, where: str) -> Allocation:
    if not isinstance(obj, Mapping):
        raise _fail(where, "expected an object")
    for key in ("buffer", "action", "offset", "start", "end"):
        if key not in obj:
            raise _fail(where, f"missing key '{key}'")
    if not _is_int(obj["buffer"]) or not _is_int(obj["offset"]):
        raise _fail(where, "'buffer' and 'offset' must be integers of magnitude at most 2**53")
    if obj["action"] not in ("Copy", "NoCopy"):
        raise _fail(where, f"'action' must be 'Copy' or 'NoCopy', got {obj['action']!r}")
    start, end = obj["start"], obj["end"]
    if (start is None) != (end is None):
        raise _fail(where, "'start' and 'end' must both be null or both integers")
    if start is not None and not (_is_int(start) and _is_int(end)):
        raise _fail(where, "'start' and 'end' must be integers of magnitude at most 2**53, or null")
    copy = obj.get("copy")
    if copy is not None:
        if not (isinstance(copy, list) and len(copy) == 2 and all(_is_int(c) for c in copy)):
            raise _fail(
                where, "'copy' must be null or a pair of integers of magnitude at most 2**53"
            )
        copy = (copy[0], copy[1])
    return Allocation(obj["buffer"], obj["action"], obj["offset"], start, end, copy)


def solution_from_dict(doc: Any, *, where: str = "solution") -> Solution:
    """Parse a solution document; raise :class:`FormatError`/:class:`SolutionError` if malformed."""
    check_header(
        doc, where=where, kind="solution", format_name=SOLUTION_FORMAT, version=SOLUTION_VERSION
    )
    for key in ("instance", "instance_sha256", "allocations", "reward_s", "normalized_reward"):
        if key not in doc:
            raise _fail(where, f"missing key '{key}'")
    if not isinstance(doc["allocations"], list):
        raise _fail(where, "'allocations' must be a list")
    for key in ("reward_s", "normalized_reward"):
        if not is_finite_number(doc[key]):
            raise _fail(where, f"'{key}' must be a finite number")
    for key in ("instance", "instance_sha256", "solver"):
        if key in doc and not isinstance(doc[key], str):
            raise _fail(where, f"'{key}' must be a string")
    if "seed" in doc and not _is_seed(doc["seed"]):
        raise _fail(where, "'seed' must be a whole number of at most 64 bits")
    for key in ("wall_s", "bound_s"):  # optional, but where present a number
        if key in doc and not is_finite_number(doc[key]):
            raise _fail(where, f"'{key}' must be a finite number")
    actions = doc.get("actions")
    if actions is not None:
        if not isinstance(actions, list) or not all(_is_int(a) for a in actions):
            raise _fail(where, "'actions' must be a list of integers")
        actions = tuple(actions)
    work = doc.get("work", {})
    if not isinstance(work, Mapping) or not all(is_finite_number(v) for v in work.values()):
        raise _fail(where, "'work' must be an object of finite numbers")
    info = doc.get("info", {})
    if not isinstance(info, Mapping):
        raise _fail(where, "'info' must be an object")
    known = {
        "format",
        "version",
        "instance",
        "instance_sha256",
        "solver",
        "seed",
        "wall_s",
        "actions",
        "allocations",
        "reward_s",
        "normalized_reward",
        "work",
        "bound_s",
        "info",
    }
    return Solution(
        instance=doc["instance"],
        instance_sha256=doc["instance_sha256"],
        solver=doc.get("solver", ""),
        seed=doc.get("seed", 0),
        wall_s=float(doc.get("wall_s", 0.0)),
        allocations=tuple(
            _allocation_from_dict(a, f"{where} allocation {i}")
            for i, a in enumerate(doc["allocations"])
        ),
        reward_s=float(doc["reward_s"]),
        normalized_reward=float(doc["normalized_reward"]),
        actions=actions,
        work=dict(work),
        bound_s=float(doc["bound_s"]) if "bound_s" in doc else None,
        info={**{k: v for k, v in doc.items() if k not in known}, **info},
    )


RECORD_FORMAT = "mallocgame-result"
"""The format of a sweep record (:mod:`mallocgame.bench.sweep`), which keeps its solution."""
RECORD_VERSION = 1
"""The version of a sweep record this package writes and reads."""


def check_record_version(doc: Mapping[str, Any]) -> None:
    """Raise :class:`~mallocgame.errors.FormatError` unless the sweep record ``doc`` is of
    :data:`RECORD_VERSION`."""
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version != RECORD_VERSION:
        raise FormatError(
            f"a sweep record of version {version!r}: this mallocgame reads version {RECORD_VERSION}"
        )


def load_solution(path: str | os.PathLike[str]) -> Solution:
    """Read a solution file, or the solution kept in a sweep record; errors name the
    file and the problem."""
    return read_document(path, _solution_or_record)


def _solution_or_record(doc: Any) -> Solution:
    if isinstance(doc, Mapping) and doc.get("format") == RECORD_FORMAT:
        check_record_version(doc)
        if not isinstance(doc.get("solution"), Mapping):
            raise FormatError(
                "a sweep record without its solution (written before records kept it)"
            )
        doc = doc["solution"]
    return solution_from_dict(doc)


def save_solution(solution: Solution, path: str | os.PathLike[str]) -> None:
    """Atomically write ``solution`` as JSON."""
    write_json(path, solution.to_dict(), indent=None)
