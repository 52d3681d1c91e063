"""Problem instances of the memory mapping game (SPEC sections 1, 2 and 7).

An :class:`Instance` is plain, immutable data: the hardware, the scheduled
instructions with their latency functions, the tensors and the buffers (the units
of decision, in game order). :func:`load_instance` / :func:`save_instance` read and
write the SPEC section 7 files (``.json`` or ``.json.gz``), :func:`validate` checks
every structural rule and raises :class:`~mallocgame.errors.InstanceError` naming
the first problem found.

Units: seconds (float) for times, bytes (int) for sizes and offsets; logical time
steps are instruction indices ``0 .. T-1``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any, TypeVar

from mallocgame.errors import InstanceError
from mallocgame.fileio import (
    MAX_JSON_DEPTH,
    canonical_sha256,
    check_header,
    is_finite_number,
    is_text,
    nested_deeper_than,
    read_document,
    write_json,
)

__all__ = [
    "INSTANCE_FORMAT",
    "INSTANCE_VERSION",
    "Hardware",
    "RooflineLatency",
    "TableLatency",
    "Latency",
    "Instruction",
    "Tensor",
    "Buffer",
    "Loop",
    "Instance",
    "instance_from_dict",
    "load_instance",
    "save_instance",
    "validate",
    "tensor_clusters",
    "tensor_to_dict",
    "MAX_BYTES",
    "MAX_SECONDS",
    "MAX_COUNT",
    "json_copy",
    "json_value_copy",
]

INSTANCE_FORMAT = "mallocgame-instance"
INSTANCE_VERSION = 1
MAX_TABLE_VARIED = 8

# The ranges of the SPEC's numbers (SPEC section 1, "Ranges"): inside them every sum the
# game, the checker and the simulator form is finite, and every byte count is exact in
# float64 and int64.
MAX_BYTES = 2**53  # a size, the capacity, the alignment, and all buffer sizes summed
MAX_SECONDS = 1e12  # every time of the instance (supply, demand, benefit, latencies)
MAX_COUNT = 2**31 - 1  # an instruction's count, a loop's trip count
MIN_BANDWIDTH = 1.0  # bytes/s; bandwidths are finite and at least this


@dataclass(frozen=True)
class Hardware:
    """The two memories and the copy engine between them."""

    name: str
    fast_memory_bytes: int  # capacity of the fast memory, bytes
    alignment_bytes: int  # offsets and allocation sizes are multiples of this (>= 1)
    fast_bandwidth: float  # bytes/s an instruction reads or writes fast memory at
    slow_bandwidth: float  # bytes/s an instruction reads or writes slow memory at
    copy_bandwidth: float  # bytes/s of a copy between the memories

    def aligned(self, size: int) -> int:
        """``size`` rounded up to a multiple of the alignment (bytes)."""
        a = self.alignment_bytes
        return -(-size // a) * a


@dataclass(frozen=True)
class RooflineLatency:
    """``L(S) = fixed_s + max(compute_s, sum_b size_b / bw_b)`` for one execution."""

    compute_s: float
    fixed_s: float = 0.0


@dataclass(frozen=True)
class TableLatency:
    """Measured latencies: ``latency_s[mask]``, bit ``i`` set when ``varied[i]`` is fast."""

    varied: tuple[int, ...]  # at most 8 buffer ids of the instruction
    latency_s: tuple[float, ...]  # 2 ** len(varied) values, seconds


Latency = RooflineLatency | TableLatency


@dataclass(frozen=True)
class Instruction:
    """One scheduled instruction; it runs at logical time = its index."""

    name: str
    opcode: str
    count: int  # executions (e.g. a loop's trip count), >= 1
    supply_s: float  # copy seconds that can overlap one execution
    buffers: tuple[int, ...]  # its operand and output buffer ids, in its own order
    latency: Latency


@dataclass(frozen=True)
class Tensor:
    """A value: a program input (``def_time == -1``) or one instruction's output."""

    id: int
    name: str
    size: int  # bytes
    def_time: int  # index of the defining instruction, -1 for a program input
    last_use_time: int  # end of the live range (inclusive), >= def_time
    live_out: bool = False  # a program result: must end in slow memory


def tensor_to_dict(x: Tensor) -> dict[str, Any]:
    """The tensor's file object (SPEC section 7): its fields by name, in order, those of a
    subclass included (a program tensor's ``shape``)."""
    return {f.name: getattr(x, f.name) for f in fields(x)}


@dataclass(frozen=True)
class Buffer:
    """One operand or output of one instruction: the unit of decision (paper Table 1)."""

    id: int  # index in game order
    instruction: int  # target time
    tensor_id: int
    alias_id: int  # buffers sharing an alias id share one storage location
    is_output: bool
    size: int  # bytes
    demand_s: float  # seconds to copy it between the memories
    benefit_s: float = 0.0  # informational: L_t(empty) - L_t({b})


@dataclass(frozen=True)
class Loop:
    """The flattened body of a loop, instructions ``first .. last``, run ``trip_count`` times."""

    first: int
    last: int
    trip_count: int


class ReadOnlyDict(dict):
    """A ``dict`` that refuses every change (``TypeError``): an :class:`Instance`'s
    ``source``, so that an instance shared (``load_workload`` hands out one per name) is
    the same for every holder. Copy it to change it: ``dict(instance.source)``."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("an Instance's source is read-only: change a copy, dict(instance.source)")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> tuple[Any, ...]:  # pickled and copied by its items
        return (type(self), (dict(self),))


class ReadOnlyList(list):
    """A ``list`` that refuses every change (``TypeError``): a list inside an
    :class:`Instance`'s ``source``."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("an Instance's source is read-only: change a copy, dict(instance.source)")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (list(self),))


def _read_only(value: Any) -> Any:
    """A JSON-like value whose objects and arrays refuse changes, all the way down."""
    if isinstance(value, Mapping):
        return ReadOnlyDict({k: _read_only(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return ReadOnlyList(_read_only(v) for v in value)
    return value


@dataclass(frozen=True)
class Instance:
    """A memory mapping problem: SPEC section 1, file format of section 7.

    ``document`` holds the parsed file (unknown keys included) that the hash covers;
    it is ``None`` for instances built in code, whose document is :meth:`to_dict`.
    ``source`` is read-only (:class:`ReadOnlyDict`, its objects and arrays too).
    """

    name: str
    hardware: Hardware
    instructions: tuple[Instruction, ...]
    tensors: tuple[Tensor, ...]
    buffers: tuple[Buffer, ...]
    loops: tuple[Loop, ...] = ()
    source: Mapping[str, Any] = field(default_factory=dict)
    document: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        """``source`` made read-only; :class:`InstanceError` where it is not a JSON object
        (a key that is not a string, a set, bytes, a NaN, a NumPy number at any depth):
        every instance made can be hashed and saved."""
        if not isinstance(self.source, ReadOnlyDict):
            if not isinstance(self.source, Mapping):
                raise InstanceError(f"source must be an object, not {self.source!r:.40}")
            source = json_value_copy(self.source, "source", MAX_JSON_DEPTH - 1)  # in a document
            object.__setattr__(self, "source", _read_only(source))

    @property
    def num_instructions(self) -> int:
        return len(self.instructions)

    @property
    def num_buffers(self) -> int:
        return len(self.buffers)

    def to_dict(self) -> dict[str, Any]:
        """The SPEC section 7 document (the parsed file when loaded from one), a copy of
        its own: what the caller changes in it leaves the instance as it is."""
        if self.document is not None:
            return json_copy(self.document)
        return _instance_to_dict(self)

    @cached_property
    def sha256(self) -> str:
        """The canonical instance hash of SPEC section 7."""
        if self.document is not None:
            return canonical_sha256(self.document)
        return canonical_sha256(_instance_to_dict(self))

    @cached_property
    def num_alias_groups(self) -> int:
        return len({b.alias_id for b in self.buffers})

    @cached_property
    def group_ids(self) -> tuple[int, ...]:
        """Each buffer's alias group as a dense index ``0 .. num_alias_groups - 1``, in the
        order the groups first appear: an ``alias_id`` is a label (any whole number >= 0,
        2**63 included), an index into nothing; code that sizes arrays by group uses these."""
        ranks: dict[int, int] = {}
        return tuple(ranks.setdefault(b.alias_id, len(ranks)) for b in self.buffers)


# ----------------------------------------------------------------------------- parsing


def json_copy(value: Any) -> Any:
    """A parsed JSON value copied all the way down (objects and arrays new, scalars shared)."""
    if isinstance(value, Mapping):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_copy(v) for v in value]
    return value


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise InstanceError(message)


def _get(obj: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(obj, dict):
        raise InstanceError(f"{where}: expected an object, got {type(obj).__name__}")
    if key not in obj:
        raise InstanceError(f"{where}: missing key '{key}'")
    return obj[key]


def _int(obj: Mapping[str, Any], key: str, where: str, default: Any = ...) -> int:
    value = obj.get(key, default) if default is not ... else _get(obj, key, where)
    if not (isinstance(value, int) and not isinstance(value, bool)):
        raise InstanceError(f"{where}: '{key}' must be an integer, got {value!r}")
    return value


def _float(obj: Mapping[str, Any], key: str, where: str, default: Any = ...) -> float:
    value = obj.get(key, default) if default is not ... else _get(obj, key, where)
    if not is_finite_number(value):
        raise InstanceError(f"{where}: '{key}' must be a finite number, got {value!r}")
    return float(value)


def _str(obj: Mapping[str, Any], key: str, where: str, default: Any = ...) -> str:
    value = obj.get(key, default) if default is not ... else _get(obj, key, where)
    if not isinstance(value, str):
        raise InstanceError(f"{where}: '{key}' must be a string, got {value!r:.40}")
    return value


def _bool(obj: Mapping[str, Any], key: str, where: str) -> bool:
    value = _get(obj, key, where)
    if not isinstance(value, bool):
        raise InstanceError(f"{where}: '{key}' must be true or false, got {value!r}")
    return value


def _list(obj: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = _get(obj, key, where)
    if not isinstance(value, list):
        raise InstanceError(f"{where}: '{key}' must be a list")
    return value


_Record = TypeVar("_Record")

_READERS: dict[str, Callable[[Mapping[str, Any], str, str], Any]] = {
    "int": _int,
    "float": _float,
    "bool": _bool,
    "str": _str,
}
"""The reader of a file field, by its dataclass field's type."""


def _record(cls: type[_Record], obj: Any, where: str, **optional: Any) -> _Record:
    """The dataclass ``cls`` read from the file object ``obj`` field by field, each by its
    type (:data:`_READERS`); a field named in ``optional`` may be absent and then takes that
    value, every other one is required (SPEC section 7)."""
    if not isinstance(obj, dict):
        raise InstanceError(f"{where}: expected an object, got {type(obj).__name__}")
    values = {
        f.name: optional[f.name]
        if f.name in optional and f.name not in obj
        else _READERS[str(f.type)](obj, f.name, where)
        for f in fields(cls)  # type: ignore[arg-type]
    }
    return cls(**values)


def _parse_latency(obj: Any, where: str) -> Latency:
    kind = _get(obj, "kind", where)
    if kind == "roofline":
        return RooflineLatency(
            compute_s=_float(obj, "compute_s", where), fixed_s=_float(obj, "fixed_s", where, 0.0)
        )
    if kind == "table":
        varied = _get(obj, "varied", where)
        values = _get(obj, "latency_s", where)
        if not isinstance(varied, list):
            raise InstanceError(f"{where}: 'varied' must be a list of buffer ids")
        if not isinstance(values, list):
            raise InstanceError(f"{where}: 'latency_s' must be a list of seconds")
        for v in varied:
            if not (isinstance(v, int) and not isinstance(v, bool)):
                raise InstanceError(f"{where}: 'varied' holds a non-integer {v!r}")
        for v in values:
            if not is_finite_number(v):
                raise InstanceError(
                    f"{where}: 'latency_s' holds a non-finite or non-number {v!r:.80}"
                )
        return TableLatency(varied=tuple(varied), latency_s=tuple(float(v) for v in values))
    raise InstanceError(f"{where}: unknown latency kind {kind!r} (expected 'roofline' or 'table')")


def instance_from_dict(doc: Any, *, where: str = "instance") -> Instance:
    """Build and validate an :class:`Instance` from a parsed SPEC section 7 document; the
    instance keeps a copy of ``doc``, so the caller's later edits change neither its fields
    nor its hash. A value no JSON file holds, anywhere in ``doc`` (a set, bytes, a NaN, a
    key that is not a string), is an :class:`InstanceError`: the hash is of the JSON."""
    return _instance_from_own_dict(json_value_copy(doc, where), where=where)


class _NotJson(Exception):
    """A value (or a key) no JSON file holds, met :attr:`path` (``.key``, ``[i]`` parts,
    innermost first) below the value copied."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[str] = []


def json_value_copy(value: Any, where: str, depth: int = MAX_JSON_DEPTH) -> Any:
    """:func:`json_copy` of a value made in code, refusing what no JSON file holds
    (:class:`InstanceError` naming its place below ``where``), nesting included: at most
    ``depth`` deep (a document: :data:`~mallocgame.fileio.MAX_JSON_DEPTH`, as in a file)."""
    too_deep = InstanceError(f"{where}: objects and arrays nested more than {depth} deep")
    try:
        copy = _checked_json_copy(value)
    except _NotJson as exc:
        raise InstanceError(f"{where}{''.join(reversed(exc.path))}: {exc.message}") from None
    except RecursionError:  # nested far deeper than any file may be
        raise too_deep from None
    if nested_deeper_than(copy, depth):  # (every Mapping now a dict, every tuple a list)
        raise too_deep
    return copy


def _checked_json_copy(value: Any) -> Any:
    """:func:`json_value_copy`'s walk; its place named only when it fails."""
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not is_text(k):
                raise _NotJson(f"the key {k!r:.40} is not a string (UTF-8 text)")
            try:
                out[k] = _checked_json_copy(v)
            except _NotJson as exc:
                exc.path.append(f".{k}")
                raise
        return out
    if isinstance(value, (list, tuple)):
        items = []
        for i, v in enumerate(value):
            try:
                items.append(_checked_json_copy(v))
            except _NotJson as exc:
                exc.path.append(f"[{i}]")
                raise
        return items
    if value is None or isinstance(value, bool) or type(value) is int or is_text(value):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, str):
        raise _NotJson(f"the string {value!a:.40} holds an unpaired surrogate (no UTF-8 text)")
    raise _NotJson(
        f"{value!r:.40} ({type(value).__name__}) is no JSON value (a finite number, a "
        "string, true, false, null, an array or an object)"
    )


def _instance_from_own_dict(doc: Any, *, where: str = "instance") -> Instance:
    """:func:`instance_from_dict` of a document nobody else holds (one just parsed): kept
    as it is, not copied."""
    check_header(
        doc, where=where, kind="instance", format_name=INSTANCE_FORMAT, version=INSTANCE_VERSION
    )
    name = _get(doc, "name", where)
    if not isinstance(name, str):
        raise InstanceError(f"{where}: 'name' must be a string")
    source = doc.get("source", {})
    if not isinstance(source, Mapping):
        raise InstanceError(f"{where}: 'source' must be an object")

    hardware = _record(Hardware, _get(doc, "hardware", where), "hardware")

    instructions = []
    for t, obj in enumerate(_list(doc, "instructions", where)):
        w = f"instruction {t}"
        bufs = _get(obj, "buffers", w)
        if not isinstance(bufs, list):
            raise InstanceError(f"{w}: 'buffers' must be a list of buffer ids")
        for b in bufs:
            if not (isinstance(b, int) and not isinstance(b, bool)):
                raise InstanceError(f"{w}: 'buffers' holds a non-integer {b!r}")
        instructions.append(
            Instruction(
                name=_str(obj, "name", w, f"i{t}"),
                opcode=_str(obj, "opcode", w, ""),
                count=_int(obj, "count", w, 1),
                supply_s=_float(obj, "supply_s", w),
                buffers=tuple(bufs),
                latency=_parse_latency(_get(obj, "latency", w), f"{w} latency"),
            )
        )

    tensors = [
        _record(Tensor, obj, f"tensor {i}", name=f"t{i}")
        for i, obj in enumerate(_list(doc, "tensors", where))
    ]
    buffers = [
        _record(Buffer, obj, f"buffer {i}", benefit_s=0.0)
        for i, obj in enumerate(_list(doc, "buffers", where))
    ]

    raw_loops = doc.get("loops", [])
    if not isinstance(raw_loops, list):
        raise InstanceError(f"{where}: 'loops' must be a list")
    loops = [_record(Loop, obj, f"loop {i}") for i, obj in enumerate(raw_loops)]

    instance = Instance(
        name=name,
        hardware=hardware,
        instructions=tuple(instructions),
        tensors=tuple(tensors),
        buffers=tuple(buffers),
        loops=tuple(loops),
        source=dict(source),
        document=doc,
    )
    validate(instance)
    return instance


def _latency_to_dict(lat: Latency) -> dict[str, Any]:
    if isinstance(lat, RooflineLatency):
        return {"kind": "roofline", "compute_s": lat.compute_s, "fixed_s": lat.fixed_s}
    return {"kind": "table", "varied": list(lat.varied), "latency_s": list(lat.latency_s)}


def _instance_to_dict(inst: Instance) -> dict[str, Any]:
    hw = inst.hardware
    doc: dict[str, Any] = {
        "format": INSTANCE_FORMAT,
        "version": INSTANCE_VERSION,
        "name": inst.name,
        "source": json_copy(inst.source),
        "hardware": {
            "name": hw.name,
            "fast_memory_bytes": hw.fast_memory_bytes,
            "alignment_bytes": hw.alignment_bytes,
            "fast_bandwidth": hw.fast_bandwidth,
            "slow_bandwidth": hw.slow_bandwidth,
            "copy_bandwidth": hw.copy_bandwidth,
        },
        "instructions": [
            {
                "name": ins.name,
                "opcode": ins.opcode,
                "count": ins.count,
                "supply_s": ins.supply_s,
                "buffers": list(ins.buffers),
                "latency": _latency_to_dict(ins.latency),
            }
            for ins in inst.instructions
        ],
        "tensors": [tensor_to_dict(x) for x in inst.tensors],
        "buffers": [
            {
                "id": b.id,
                "instruction": b.instruction,
                "tensor_id": b.tensor_id,
                "alias_id": b.alias_id,
                "is_output": b.is_output,
                "size": b.size,
                "demand_s": b.demand_s,
                "benefit_s": b.benefit_s,
            }
            for b in inst.buffers
        ],
    }
    if inst.loops:
        doc["loops"] = [
            {"first": lp.first, "last": lp.last, "trip_count": lp.trip_count} for lp in inst.loops
        ]
    return doc


# -------------------------------------------------------------------------- validation


def _seconds(value: float, what: str) -> None:
    if not 0 <= value <= MAX_SECONDS:
        raise InstanceError(f"{what} must be in 0..1e12 seconds, got {value!r}")


def validate(inst: Instance) -> None:
    """Check every structural rule of SPEC sections 1, 2 and 7.

    Raises :class:`InstanceError` naming the first broken rule and the object involved.
    """
    _validate_field_types(inst)
    _validate_hardware(inst.hardware)
    if not inst.instructions:
        raise InstanceError("instance has no instructions")
    _validate_tensors(inst)
    owner = _validate_instructions(inst)
    _validate_buffers(inst, owner)
    _validate_game_order(inst)
    _validate_loops_and_total(inst)


def _is_file_type(value: Any, kind: str) -> bool:
    """``value`` is of the file field type ``kind`` as JSON writes it: a Python ``int`` (not
    a bool, not NumPy's), a ``bool``, a ``str``, or for ``float`` an int or a float (NumPy's
    float64 is one; its float32 is not)."""
    if kind == "int":
        return type(value) is int
    if kind == "float":
        return type(value) is int or isinstance(value, float)
    return type(value) is bool if kind == "bool" else is_text(value)


def _validate_field_types(inst: Instance) -> None:
    """Every field of the hardware, tensors, instructions, buffers and loops is of its file
    type (:func:`_is_file_type`): what the loader refuses, an instance made in code (a
    float size, a NumPy integer, a name that is no string) is refused too, so every valid
    instance can be saved and loaded again."""
    if not isinstance(inst.name, str):
        raise InstanceError(
            f"instance: name must be a str, got {inst.name!r:.40} ({type(inst.name).__name__})"
        )
    if not is_text(inst.name):
        raise InstanceError(f"instance: name {inst.name!a:.40} holds an unpaired surrogate")
    groups: list[tuple[str, Any]] = [("hardware", (inst.hardware,))]
    groups += [("tensor", inst.tensors), ("instruction", inst.instructions)]
    groups += [("buffer", inst.buffers), ("loop", inst.loops)]
    for what, records in groups:
        if not records:
            continue
        typed = [(f.name, str(f.type)) for f in fields(records[0]) if str(f.type) in _READERS]
        for i, record in enumerate(records):
            for name, kind in typed:
                value = getattr(record, name)
                if not _is_file_type(value, kind):
                    where = what if what == "hardware" else f"{what} {i}"
                    if kind == "str" and isinstance(value, str):  # not text: a lone surrogate
                        raise InstanceError(
                            f"{where}: {name} {value!a:.40} holds an unpaired surrogate"
                        )
                    raise InstanceError(
                        f"{where}: {name} must be {'a' if kind != 'int' else 'an'} {kind}, "
                        f"got {value!r:.40} ({type(value).__name__})"
                    )
    for t, ins in enumerate(inst.instructions):
        _validate_nested_types(f"instruction {t}", ins)


def _validate_nested_types(where: str, ins: Instruction) -> None:
    """An instruction's buffer ids and its latency's numbers are of their file types."""
    lat = ins.latency
    if isinstance(lat, RooflineLatency):
        numbers: list[tuple[str, Any, str]] = [
            ("latency compute_s", lat.compute_s, "float"),
            ("latency fixed_s", lat.fixed_s, "float"),
        ]
    elif isinstance(lat, TableLatency):
        numbers = [("latency varied", v, "int") for v in lat.varied]
        numbers += [("latency latency_s", v, "float") for v in lat.latency_s]
    else:
        raise InstanceError(f"{where}: latency must be a RooflineLatency or a TableLatency")
    numbers += [("buffers", b, "int") for b in ins.buffers]
    for name, value, kind in numbers:
        if not _is_file_type(value, kind):
            raise InstanceError(
                f"{where}: {name} holds {value!r:.40} ({type(value).__name__}), "
                f"not {'a' if kind != 'int' else 'an'} {kind}"
            )


def _validate_hardware(hw: Hardware) -> None:
    if not 0 <= hw.fast_memory_bytes <= MAX_BYTES:
        raise InstanceError(
            f"hardware: fast_memory_bytes must be in 0..2**53, got {hw.fast_memory_bytes}"
        )
    if not 1 <= hw.alignment_bytes <= MAX_BYTES:
        raise InstanceError(
            f"hardware: alignment_bytes must be in 1..2**53, got {hw.alignment_bytes}"
        )
    for key in ("fast_bandwidth", "slow_bandwidth", "copy_bandwidth"):
        if not (math.isfinite(getattr(hw, key)) and getattr(hw, key) >= MIN_BANDWIDTH):
            raise InstanceError(
                f"hardware: {key} must be a finite number >= 1 byte/s, got {getattr(hw, key)!r}"
            )


def _validate_tensors(inst: Instance) -> None:
    num_t = len(inst.instructions)
    for i, x in enumerate(inst.tensors):
        if not x.id == i:
            raise InstanceError(f"tensor {i}: id is {x.id}, expected its index {i}")
        if not 0 <= x.size <= MAX_BYTES:
            raise InstanceError(f"tensor {i} ({x.name}): size {x.size} outside 0..2**53")
        if not (-1 <= x.def_time < num_t):
            raise InstanceError(
                f"tensor {i} ({x.name}): def_time {x.def_time} outside -1..{num_t - 1}"
            )
        if not (x.def_time <= x.last_use_time < num_t):
            raise InstanceError(
                f"tensor {i} ({x.name}): last_use_time {x.last_use_time} outside "
                f"{x.def_time}..{num_t - 1}"
            )


def _validate_instructions(inst: Instance) -> list[int]:
    """Each instruction's own fields; returns each buffer's listing instruction (-1: none)."""
    num_b = len(inst.buffers)
    owner = [-1] * num_b
    for t, ins in enumerate(inst.instructions):
        w = f"instruction {t} ({ins.name})"
        if not 1 <= ins.count <= MAX_COUNT:
            raise InstanceError(f"{w}: count must be in 1..2**31-1, got {ins.count}")
        _seconds(ins.supply_s, f"{w}: supply_s")
        for b in ins.buffers:
            if not (0 <= b < num_b):
                raise InstanceError(f"{w}: dangling buffer reference {b}")
            if not (owner[b] == -1):
                raise InstanceError(f"{w}: buffer {b} is listed twice")
            owner[b] = t
        lat = ins.latency
        if isinstance(lat, RooflineLatency):
            _seconds(lat.compute_s, f"{w}: compute_s")
            _seconds(lat.fixed_s, f"{w}: fixed_s")
        else:
            k = len(lat.varied)
            if not k <= MAX_TABLE_VARIED:
                raise InstanceError(f"{w}: a latency table varies {k} buffers (at most 8)")
            if not (len(set(lat.varied)) == k):
                raise InstanceError(f"{w}: a latency table names a buffer twice")
            for b in lat.varied:
                if b not in ins.buffers:
                    raise InstanceError(f"{w}: latency table varies buffer {b}, not one of its own")
            if not (len(lat.latency_s) == 1 << k):
                raise InstanceError(
                    f"{w}: latency table has {len(lat.latency_s)} values, expected 2**{k} = {1 << k}"
                )
            for v in lat.latency_s:
                _seconds(v, f"{w}: a latency of its table")
    return owner


def _validate_buffers(inst: Instance, owner: list[int]) -> None:
    num_t = len(inst.instructions)
    num_x = len(inst.tensors)
    defining: dict[int, int] = {}
    for i, b in enumerate(inst.buffers):
        w = f"buffer {i}"
        if not b.id == i:
            raise InstanceError(f"{w}: id is {b.id}, expected its index {i}")
        if not (0 <= b.instruction < num_t):
            raise InstanceError(f"{w}: dangling instruction reference {b.instruction}")
        if not owner[i] == b.instruction:
            raise InstanceError(
                f"{w}: not listed by its instruction {b.instruction}"
                if owner[i] == -1
                else f"{w}: says instruction {b.instruction} but is listed by instruction {owner[i]}"
            )
        if not (0 <= b.tensor_id < num_x):
            raise InstanceError(f"{w}: dangling tensor reference {b.tensor_id}")
        if not b.alias_id >= 0:
            raise InstanceError(f"{w}: negative alias_id {b.alias_id}")
        if not 0 <= b.size <= MAX_BYTES:
            raise InstanceError(f"{w}: size {b.size} outside 0..2**53")
        _seconds(b.demand_s, f"{w}: demand_s")
        if not -MAX_SECONDS <= b.benefit_s <= MAX_SECONDS:
            raise InstanceError(
                f"{w}: benefit_s must be in -1e12..1e12 seconds, got {b.benefit_s!r}"
            )
        x = inst.tensors[b.tensor_id]
        if b.is_output:
            if not b.instruction == x.def_time:
                raise InstanceError(
                    f"{w}: defining output of tensor {x.id} ({x.name}) at instruction "
                    f"{b.instruction}, but the tensor's def_time is {x.def_time}"
                )
            if not (b.tensor_id not in defining):
                raise InstanceError(
                    f"{w}: tensor {x.id} ({x.name}) has a second defining output "
                    f"(buffer {defining.get(b.tensor_id)})"
                )
            defining[b.tensor_id] = i
        else:
            if not (x.def_time < b.instruction <= x.last_use_time):
                raise InstanceError(
                    f"{w}: reads tensor {x.id} ({x.name}) at {b.instruction}, outside its live range "
                    f"({x.def_time}, {x.last_use_time}]"
                )
    for x in inst.tensors:
        if x.def_time >= 0 and x.id not in defining:
            raise InstanceError(
                f"tensor {x.id} ({x.name}): def_time {x.def_time} but no defining output buffer"
            )


def _validate_game_order(inst: Instance) -> None:
    """Buffer ids follow (target_time, is_output, position in the instruction's list)."""
    expected = 0
    for t, ins in enumerate(inst.instructions):
        ordered = [b for b in ins.buffers if not inst.buffers[b].is_output]
        ordered += [b for b in ins.buffers if inst.buffers[b].is_output]
        for b in ordered:
            if not b == expected:
                raise InstanceError(
                    f"buffer ids are not in game order: instruction {t} ({ins.name}) has buffer {b} "
                    f"where buffer {expected} belongs"
                )
            expected += 1


def _validate_loops_and_total(inst: Instance) -> None:
    num_t = len(inst.instructions)
    for i, lp in enumerate(inst.loops):
        if not (0 <= lp.first <= lp.last < num_t):
            raise InstanceError(f"loop {i}: body {lp.first}..{lp.last} outside 0..{num_t - 1}")
        if not 1 <= lp.trip_count <= MAX_COUNT:
            raise InstanceError(f"loop {i}: trip_count must be in 1..2**31-1, got {lp.trip_count}")
    total = sum(b.size for b in inst.buffers)
    if total > MAX_BYTES:
        raise InstanceError(f"the buffers' sizes sum to {total} bytes, more than 2**53")


# -------------------------------------------------------------------------------- files


def load_instance(path: str | os.PathLike[str]) -> Instance:
    """Read and validate an instance file (``.json`` or ``.json.gz``).

    Raises :class:`~mallocgame.errors.InputFileError`, :class:`FormatError` or
    :class:`InstanceError`, each with the file name and the problem.
    """
    return read_document(path, _instance_from_own_dict)


def save_instance(inst: Instance, path: str | os.PathLike[str]) -> None:
    """Atomically write ``inst`` (gzip-compressed when ``path`` ends in ``.gz``)."""
    write_json(path, inst.to_dict())


def tensor_clusters(inst: Instance) -> list[int]:
    """For each tensor, the smallest tensor id of its cluster: the tensors joined by
    buffers that share an alias group (one storage location), transitively."""
    parent = list(range(len(inst.tensors)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    first_tensor: dict[int, int] = {}
    for b in inst.buffers:
        ra, rb = find(first_tensor.setdefault(b.alias_id, b.tensor_id)), find(b.tensor_id)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return [find(x) for x in range(len(inst.tensors))]
