"""Solver settings: declared once as a typed frozen dataclass, parsed by one coercer.

A solver's ``Config`` is a frozen dataclass whose fields are declared with
:func:`setting` (a default and one line of doc, with its unit). Field types are
``bool``, ``int``, ``float``, ``str``, ``Literal[...]`` (a choice), ``tuple[str, ...]``
or ``tuple[int, ...]`` (a list), ``X | None``, or another such dataclass (its fields are
named ``FIELD.SUB``).

Ranges: every number setting declares the interval its values lie in
(``setting(0.25, "...", within="[0, 1]")``; an end written ``(`` or ``)`` is open) and
every list setting how many items it holds (``length=(1, 8)``) and, for a list of
numbers, the interval of each item; :func:`unranged_options` names a ``Config``'s
settings that declare none. The coercer checks the declared ranges, and a ``Config``
made directly checks them, and that each choice is one of its ``Literal``'s and each
``bool`` a bool, by calling :func:`check_ranges` in its ``__post_init__``; what no
single range says (one setting against another) lives in ``__post_init__``
too, which raises ``ValueError`` with what is wrong.

:func:`parse_config` turns options (from the command line: strings; from the library
or a sweep: JSON values) into a ``Config``. The command line, sweeps and the library
all go through it, so a bad name or value is one :class:`~mallocgame.errors.SolverError`
line that names the solver and lists the valid names or values, or the option's range.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

from mallocgame.errors import SolverError
from mallocgame.fileio import is_finite_number

__all__ = [
    "setting",
    "parse_config",
    "option_docs",
    "OptionDoc",
    "json_settings",
    "typed_options",
    "Interval",
    "unranged_options",
    "check_ranges",
    "key_values",
]

C = TypeVar("C", bound="DataclassInstance")

_TRUE = ("true", "yes", "1")
_FALSE = ("false", "no", "0")


@dataclass(frozen=True)
class Interval:
    """The numbers a setting accepts: ``low`` to ``high`` (both finite), each end
    included unless it is open. Written and printed as ``[0, 1]``, ``(0, 1]``, ..."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False
    text: str = dataclasses.field(default="", compare=False)  # as written

    @classmethod
    def parse(cls, text: str) -> Interval:
        """The interval ``text`` writes; ``TypeError`` (a ``Config`` bug, not input) if
        it is not ``[``/``(`` low, high ``]``/``)`` with finite ends, low <= high."""
        body = text.strip()
        ends = body[:1] + body[-1:]
        parts = body[1:-1].split(",")
        try:
            if len(body) < 2 or ends[0] not in "[(" or ends[1] not in "])" or len(parts) != 2:
                raise ValueError(text)
            low, high = (json.loads(p.strip()) for p in parts)
            numbers = [
                v for v in (low, high) if isinstance(v, (int, float)) and not isinstance(v, bool)
            ]
            if len(numbers) != 2 or not all(math.isfinite(v) for v in numbers):
                raise ValueError(text)
        except ValueError:
            raise TypeError(f"setting range {text!r} is not like '[0, 1]' or '(0, 1e6]'") from None
        if low > high:
            raise TypeError(f"setting range {text!r} is empty")
        written = f"{ends[0]}{parts[0].strip()}, {parts[1].strip()}{ends[1]}"
        return cls(low, high, ends[0] == "(", ends[1] == ")", written)

    def __contains__(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def __str__(self) -> str:
        return self.text


def setting(
    default: Any = dataclasses.MISSING,
    doc: str = "",
    *,
    factory: Any = None,
    within: str | None = None,
    length: tuple[int, int] | None = None,
) -> Any:
    """A ``Config`` field: its ``default`` (or a ``factory`` for a dataclass default),
    ``doc`` (one line with the unit), and its range: ``within``, the interval (as
    :meth:`Interval.parse` reads it) of a number or of each number of a list, and
    ``length``, the least and most items of a list."""
    metadata: dict[str, Any] = {"doc": doc}
    if within is not None:
        metadata["within"] = Interval.parse(within)
    if length is not None:
        low, high = length
        if not 0 <= low <= high:
            raise TypeError(f"setting length {length!r} is not (least, most) items")
        metadata["length"] = (int(low), int(high))
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class OptionDoc:
    """One setting as ``mallocgame solvers`` lists it."""

    name: str  # as given on the command line (``FIELD.SUB`` for nested settings)
    kind: str  # the accepted values, e.g. "int", "one of adam, sgd", "list of str"
    default: Any  # the default, as JSON
    doc: str


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _strip_optional(hint: Any) -> tuple[Any, bool]:
    """``(X, True)`` for ``X | None``, else ``(hint, False)``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0], True
    return hint, False


def _kind(hint: Any, metadata: Mapping[str, Any]) -> str:
    inner, optional = _strip_optional(hint)
    origin = typing.get_origin(inner)
    within = metadata.get("within")
    if origin is Literal:
        text = "one of " + ", ".join(str(a) for a in typing.get_args(inner))
    elif origin is tuple:
        text = f"list of {typing.get_args(inner)[0].__name__} (comma-separated)"
        if "length" in metadata:
            text += ", {} to {} items".format(*metadata["length"])
        if within is not None:
            text += f", each in {within}"
    else:
        text = getattr(inner, "__name__", str(inner))
        if within is not None:
            text += f" in {within}"
    return text + (" or none" if optional else "")


def _range_problem(value: Any, metadata: Mapping[str, Any]) -> str | None:
    """What is wrong with ``value`` (coerced; ``None`` for an optional setting left
    out) against its field's declared range, as "must be ...", or ``None`` if nothing."""
    if value is None:
        return None
    within: Interval | None = metadata.get("within")
    if isinstance(value, tuple):
        if "length" in metadata:
            least, most = metadata["length"]
            if not least <= len(value) <= most:
                return f"must hold {least} to {most} items, not {len(value)}"
        if within is not None:
            for item in value:
                if item not in within:
                    return f"items must be in {within}, not {item!r}"
        return None
    if within is not None and value not in within:
        return f"must be in {within}, not {value!r}"
    return None


def _type_problem(value: Any, hint: Any) -> str | None:
    """What is wrong with ``value`` against its field's type where that is a choice
    (``Literal[...]``: one of its values), a switch (``bool``: a bool, not a string
    or a number) or a count (``int``, or the items of a ``tuple[int, ...]``: an ``int``,
    not a bool or a float, whole or not), as "must be ..." in the coercer's words, or
    ``None`` if nothing."""
    inner, optional = _strip_optional(hint)
    if value is None and optional:
        return None
    if typing.get_origin(inner) is Literal:
        choices = typing.get_args(inner)
        if not any(isinstance(value, type(c)) and value == c for c in choices):
            return "must be one of " + ", ".join(repr(c) for c in choices) + f", not {value!r}"
    elif inner is bool and not isinstance(value, bool):
        return f"must be true or false, not {value!r}"
    elif inner is int and not _is_count(value):
        return f"must be a whole number, not {value!r}"
    elif typing.get_origin(inner) is tuple and typing.get_args(inner)[0] is int:
        for item in value if isinstance(value, (tuple, list)) else ():
            if not _is_count(item):
                return f"items must be whole numbers, not {item!r}"
    return None


def _is_count(value: Any) -> bool:
    """``value`` is an ``int`` (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_ranges(config: Any) -> None:
    """``ValueError`` naming the first setting of ``config`` (a ``Config`` made directly,
    not by :func:`parse_config`) that is not one of its ``Literal``'s choices, not a bool
    where a ``bool`` is declared, not an ``int`` where an ``int`` is, or outside its
    declared range. A ``Config`` calls it
    first in its ``__post_init__``; nested settings check their own."""
    kind: type = type(config)
    hints = _hints(kind)
    for f in fields(config):
        value = getattr(config, f.name)
        problem = _type_problem(value, hints[f.name]) or _range_problem(value, f.metadata)
        if problem is not None:
            raise ValueError(f"option {f.name} {problem}")


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """``value`` as the type ``hint``; :class:`SolverError` naming ``where`` if it is not one."""
    inner, optional = _strip_optional(hint)
    if optional and (
        value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null"))
    ):
        return None  # an optional setting given empty (``checkpoint_dir=``) is unset
    text = value.strip() if isinstance(value, str) else None

    def bad(expected: str) -> SolverError:
        return SolverError(f"{where} must be {expected}, not {value!r}")

    origin = typing.get_origin(inner)
    if origin is Literal:
        choices = typing.get_args(inner)
        if value in choices or text in choices:
            return value if value in choices else text
        raise bad("one of " + ", ".join(repr(c) for c in choices))
    if origin is tuple:
        item = typing.get_args(inner)[0]
        if text is not None:
            items: list[Any] = [part.strip() for part in text.split(",")] if text else []
            if any(not part for part in items):  # "8,,16": never read as (8, 16)
                raise bad(f"a list of {item.__name__} without an empty item")
        elif isinstance(value, (list, tuple)):
            items = list(value)
        elif item is int and isinstance(value, int) and not isinstance(value, bool):
            items = [value]
        else:
            raise bad(f"a list of {item.__name__}")
        return tuple(_coerce(v, item, f"{where} item") for v in items)
    if inner is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if text is not None and text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        raise bad("true or false")
    if inner is int:
        number: Any = value
        if text is not None:
            try:
                number = json.loads(text)
            except ValueError:
                raise bad("a whole number") from None
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise bad("a whole number")
        if isinstance(number, float) and not (math.isfinite(number) and number.is_integer()):
            raise bad("a whole number")
        return int(number)
    if inner is float:
        number = value
        if text is not None:
            try:
                number = float(text)
            except ValueError:
                raise bad("a number") from None
        if not is_finite_number(number):  # an int too large for a float is not finite
            raise bad("a finite number")
        return float(number) + 0.0  # -0 is 0: one setting, one sweep cell
    if inner is str:
        if isinstance(value, str):
            return value
        raise bad("a string")
    raise TypeError(
        f"{where}: settings of type {inner!r} are not supported"
    )  # a Config bug, not input


def _names(cls: type, prefix: str = "") -> list[str]:
    """Every option name of ``cls`` (nested dataclasses as ``FIELD.SUB``)."""
    out = []
    hints = _hints(cls)
    for f in fields(cls):
        if is_dataclass(hints[f.name]):
            out += _names(hints[f.name], f"{prefix}{f.name}.")
        else:
            out.append(prefix + f.name)
    return out


def parse_config(cls: type[C], options: Mapping[str, Any], solver: str) -> C:
    """``cls`` with ``options`` applied by name, every value coerced to its field's type.

    Raises :class:`SolverError` (one line naming ``solver``) for an unknown name (listing
    the valid ones), a value of the wrong kind (saying what is expected) or a value the
    dataclass's ``__post_init__`` refuses.
    """
    return _parse(cls, options, solver, "")


def _parse(cls: type[C], options: Mapping[str, Any], solver: str, prefix: str) -> C:
    hints = _hints(cls)
    metadata = {f.name: f.metadata for f in fields(cls)}
    by_name = set(metadata)
    values: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for key, value in options.items():
        name, dot, sub = str(key).partition(".")
        if name not in by_name or bool(dot) != is_dataclass(hints[name]):
            valid = ", ".join(_names(cls, prefix)) or "none"
            raise SolverError(f"{solver}: unknown option '{prefix}{key}' (valid: {valid})")
        if dot:
            nested.setdefault(name, {})[sub] = value
        else:
            where = f"{solver}: option {prefix}{key}"
            values[name] = _coerce(value, hints[name], where)
            problem = _range_problem(values[name], metadata[name])
            if problem is not None:
                raise SolverError(f"{where} {problem}")
    for name, sub_options in nested.items():
        values[name] = _parse(hints[name], sub_options, solver, f"{prefix}{name}.")
    try:
        return cls(**values)
    except ValueError as exc:
        raise SolverError(f"{solver}: {exc}") from None


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def json_settings(config: Any) -> dict[str, Any]:
    """Every setting of ``config`` as it reads back from JSON (tuples become lists,
    keys sorted), so settings computed now compare equal to settings stored in a file."""
    return _json(dataclasses.asdict(config))


def typed_options(config: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """The options named in ``options``, with the values ``config`` (parsed from them)
    holds, as JSON: ``{"workers": "2"}`` gives ``{"workers": 2}``."""
    out = {}
    for key in options:
        value = config
        for part in str(key).split("."):
            value = getattr(value, part)
        out[str(key)] = _json(value)
    return out


def option_docs(cls: type) -> list[OptionDoc]:
    """Every setting of ``cls``: name, accepted values, default and doc."""
    out: list[OptionDoc] = []
    hints = _hints(cls)
    defaults = cls()
    for f in fields(cls):
        hint = hints[f.name]
        if isinstance(hint, type) and is_dataclass(hint):
            out += [dataclasses.replace(d, name=f"{f.name}.{d.name}") for d in option_docs(hint)]
            continue
        out.append(
            OptionDoc(
                f.name,
                _kind(hint, f.metadata),
                _json(getattr(defaults, f.name)),
                f.metadata.get("doc", ""),
            )
        )
    return out


def unranged_options(cls: type) -> list[str]:
    """The settings of ``cls`` (``FIELD.SUB`` for nested ones) that declare no range: a
    number without ``within``, a list without ``length``, a list of numbers without
    ``within``. Every solver's ``Config`` has none (a test holds them to it)."""
    out: list[str] = []
    hints = _hints(cls)
    for f in fields(cls):
        hint = hints[f.name]
        if isinstance(hint, type) and is_dataclass(hint):
            out += [f"{f.name}.{name}" for name in unranged_options(hint)]
            continue
        inner, _optional = _strip_optional(hint)
        if typing.get_origin(inner) is tuple:
            numbers = typing.get_args(inner)[0] in (int, float)
            if "length" not in f.metadata or (numbers and "within" not in f.metadata):
                out.append(f.name)
        elif inner in (int, float) and "within" not in f.metadata:
            out.append(f.name)
    return out


def key_values(items: Iterable[str], key_prefix: str = "") -> dict[str, str]:
    """``KEY=VALUE`` texts -> a dict of their stripped texts (:func:`parse_config` types
    them). A key given twice with the same text is one setting; with two texts, or an item
    that is not ``KEY=VALUE``, :class:`ValueError` saying which (``key_prefix`` before the
    key: ``"es:"``), for the caller to place."""
    options: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{item!r} is not KEY=VALUE")
        key, value = key.strip(), value.strip()
        if options.get(key, value) != value:
            raise ValueError(
                f"{key_prefix}{key} given twice, as {options[key]!r} and {value!r}: give one value"
            )
        options[key] = value
    return options
