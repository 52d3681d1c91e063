"""What the bench studies accept as budgets, seeds and counts, checked before anything runs.

A study given a wall-clock budget of 0, a negative one, ``nan`` or ``inf`` (which
never ends), or a negative seed, is refused with :class:`StudyInputError` (one line
naming the value) rather than run, and so is a number read back from a study's own
CSV that no run could have written (:func:`finite`, :func:`within`). Units: seconds.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable
from numbers import Integral, Real

from mallocgame.errors import MallocGameError
from mallocgame.limits import MAX_SECONDS, MAX_SEED, MAX_WORK

__all__ = [
    "StudyInputError",
    "budget_seconds",
    "seed",
    "seeds",
    "work_budget",
    "whole_number",
    "at_least",
    "seconds_arg",
    "finite",
    "within",
]

MAX_BUDGET_S = MAX_SECONDS
"""The longest wall-clock budget a study takes: 7 days, in seconds (the solvers' own limit)."""


class StudyInputError(MallocGameError, ValueError):
    """A budget, seed or count a study cannot run with (the message names it)."""


def budget_seconds(value: object, what: str = "budget") -> float:
    """``value`` as a wall-clock budget in seconds: a finite number above 0 and at most
    :data:`MAX_BUDGET_S`; :class:`StudyInputError` otherwise (``what`` names it)."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise StudyInputError(f"{what} must be a number of seconds, not {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_BUDGET_S:
        raise StudyInputError(
            f"{what} must be a finite number of seconds above 0 and at most "
            f"{MAX_BUDGET_S:g} (7 days), not {value!r}"
        )
    return seconds


def whole_number(value: object, what: str, least: int, most: int | None = None) -> int:
    """``value`` as an integer from ``least`` to ``most`` (``None``: no upper limit);
    :class:`StudyInputError` otherwise (``what`` names it)."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise StudyInputError(f"{what} must be a whole number, not {value!r}")
    number = int(value)
    if number < least or (most is not None and number > most):
        limits = f"at least {least}" if most is None else f"from {least} to {most:,}"
        raise StudyInputError(f"{what} must be {limits}, not {number}")
    return number


def at_least(least: int, most: int | None = None) -> Callable[[str], int]:
    """An argparse type (the command line's and the benchmark scripts' counts): a whole
    number of at least ``least`` (and at most ``most``, where given), else argparse's one
    line (exit 2) naming the value."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, not {value}")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"must be at most {most}, not {value}")
        return value

    return parse


def seconds_arg(text: str) -> float:
    """An argparse type (the benchmark scripts' budgets): :func:`budget_seconds` of
    ``text``, else argparse's one line (exit 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    try:
        return budget_seconds(value, "seconds")
    except StudyInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def seed(value: object, what: str = "seed") -> int:
    """``value`` as a seed: an integer from 0 to ``MAX_SEED`` (2**63 - 1, the solvers'
    range); :class:`StudyInputError` otherwise."""
    return whole_number(value, what, 0, MAX_SEED)


def seeds(values: Iterable[object]) -> tuple[int, ...]:
    """``values`` as seeds (:func:`seed`), at least one; :class:`StudyInputError` otherwise."""
    checked = tuple(seed(v, "a seed") for v in values)
    if not checked:
        raise StudyInputError("no seed given")
    return checked


def work_budget(value: object) -> int:
    """``value`` as a work budget: an integer from 1 to ``MAX_WORK`` (2**53, the solvers'
    limit); :class:`StudyInputError` otherwise."""
    return whole_number(value, "the work budget", 1, MAX_WORK)


def finite(value: float, what: str, least: float | None = None, *, above: bool = False) -> float:
    """``value`` if it is finite and at least ``least`` (above it with ``above``; ``None``:
    any finite number); else :class:`ValueError` naming ``what`` (for a reader to put the
    file and line to it)."""
    if least is None:
        if not math.isfinite(value):
            raise ValueError(f"{what} {value!r} is not a finite number")
    elif not math.isfinite(value) or value < least or (above and value == least):
        bound = f"above {least:g}" if above else f"at least {least:g}"
        raise ValueError(f"{what} {value!r} is not a finite number {bound}")
    return value


def within(value: float, what: str, least: float, most: float) -> float:
    """``value`` if it is finite and in ``[least, most]``; else :class:`ValueError`
    naming ``what``."""
    if not (math.isfinite(value) and least <= value <= most):
        raise ValueError(f"{what} {value!r} is not a finite number from {least:g} to {most:g}")
    return value
