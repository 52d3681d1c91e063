"""Programs: the hardware-independent form of a compiled program (frozen on disk).

A :class:`Program` is what a frontend extracts from a real compiler (XLA's scheduled
HLO, a PyTorch module, ...): the scheduled instructions with their work (flops,
transcendentals) and the bytes of every operand and output, the tensors with sizes,
live ranges and ``live_out``, the alias groups, and the loops. It knows nothing of
any hardware: :func:`mallocgame.costmodel.derive_instance` turns it into an
:class:`~mallocgame.instance.Instance` for a hardware preset, cheaply, so a new preset
or cost model never means re-extracting.

Buffers: instruction ``t``'s buffers are its operands (in order) followed by its
outputs (in order); position ``p`` in that list names one buffer, ``(t, p)``. This is
the game order of SPEC section 2, so buffer ids of the derived instance follow it.

File: ``{"format": "mallocgame-program", "version": 1, ...}`` as ``.json`` or
``.json.gz`` (see :meth:`Program.to_dict`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mallocgame.errors import InstanceError
from mallocgame.fileio import (
    MAX_JSON_DEPTH,
    check_header,
    is_finite_number,
    is_text,
    read_document,
    write_json,
)
from mallocgame.instance import (
    MAX_BYTES,
    MAX_COUNT,
    Loop,
    Tensor,
    json_copy,
    json_value_copy,
    tensor_to_dict,
)

__all__ = [
    "PROGRAM_FORMAT",
    "PROGRAM_VERSION",
    "ProgramTensor",
    "ProgramInstruction",
    "ProgramLoop",
    "Program",
    "ProgramError",
    "validate_program",
    "program_from_dict",
    "load_program",
    "save_program",
]

PROGRAM_FORMAT = "mallocgame-program"
PROGRAM_VERSION = 1


class ProgramError(InstanceError):
    """A program breaks a structural rule (the message names it)."""


@dataclass(frozen=True)
class ProgramTensor(Tensor):
    """An instance's :class:`~mallocgame.instance.Tensor` with its shape: a program input
    (``def_time == -1``) or one instruction's output; sizes in bytes."""

    shape: str = ""  # e.g. "f32[8,64]" (informational)


@dataclass(frozen=True)
class ProgramInstruction:
    """One scheduled instruction; it runs at logical time = its index.

    ``operands`` / ``outputs`` are tensor ids; ``operand_bytes`` / ``output_bytes``
    the bytes the instruction moves for each (usually the tensor's size; less for a
    slice that reads part of its operand).
    """

    name: str
    opcode: str
    operands: tuple[int, ...]
    outputs: tuple[int, ...]
    operand_bytes: tuple[int, ...]
    output_bytes: tuple[int, ...]
    flops: float = 0.0  # floating-point operations of one execution
    transcendentals: float = 0.0  # exp, log, tanh, ... of one execution
    count: int = 1  # executions (a loop body's trip count)

    @property
    def num_buffers(self) -> int:
        return len(self.operands) + len(self.outputs)


# a flattened loop body: instructions ``first .. last``, run ``trip_count`` times
ProgramLoop = Loop


@dataclass(frozen=True)
class Program:
    """A compiled program, hardware-independent.

    ``alias_groups``: each a tuple of buffers ``(instruction, position)`` that must
    share one storage location (in-place updates, loop-carried values, donation).
    """

    name: str
    instructions: tuple[ProgramInstruction, ...]
    tensors: tuple[ProgramTensor, ...]
    alias_groups: tuple[tuple[tuple[int, int], ...], ...] = ()
    loops: tuple[ProgramLoop, ...] = ()
    source: Mapping[str, Any] = field(default_factory=dict)

    @property
    def num_buffers(self) -> int:
        return sum(ins.num_buffers for ins in self.instructions)

    def to_dict(self) -> dict[str, Any]:
        """The file document."""
        return {
            "format": PROGRAM_FORMAT,
            "version": PROGRAM_VERSION,
            "name": self.name,
            "source": json_copy(self.source),
            "instructions": [
                {
                    "name": i.name,
                    "opcode": i.opcode,
                    "operands": list(i.operands),
                    "outputs": list(i.outputs),
                    "operand_bytes": list(i.operand_bytes),
                    "output_bytes": list(i.output_bytes),
                    "flops": i.flops,
                    "transcendentals": i.transcendentals,
                    "count": i.count,
                }
                for i in self.instructions
            ],
            "tensors": [tensor_to_dict(x) for x in self.tensors],
            "alias_groups": [[list(m) for m in g] for g in self.alias_groups],
            "loops": [
                {"first": lp.first, "last": lp.last, "trip_count": lp.trip_count}
                for lp in self.loops
            ],
        }


def validate_program(program: Program) -> None:
    """Check the structural rules; raise :class:`ProgramError` naming the first broken one.

    Rules: every field is of its file type (ids, sizes, bytes, times, counts, loop bounds
    and alias members plain ``int``, not a bool or NumPy's; the program's, tensors' and
    instructions' names, opcodes and shapes ``str`` that UTF-8 holds; ``live_out`` a bool;
    the records and an instruction's id and byte lists tuples; ``source`` a JSON object,
    at most 99 deep), so that every valid program derives and saves; tensor ids are their
    indices; sizes and bytes in ``0 .. 2**53``; each instruction's byte lists match its
    operand/output lists; every tensor with ``def_time >= 0`` is the output of exactly that
    instruction and of no other; every read happens inside the tensor's live range, after
    its definition; counts and trip counts in ``1 .. 2**31 - 1``; every alias group has a
    member, and alias group members name existing buffers, each at most once over all
    groups. (The ranges are SPEC section 1's:
    a program outside them could never become an instance.) A message is written only for
    the rule that breaks, so a valid program costs its comparisons alone.
    """
    if not is_text(program.name):
        raise ProgramError(f"program: name {program.name!r:.40} is no string (UTF-8 text)")
    _validate_program_containers(program)
    if not isinstance(program.source, Mapping):
        raise ProgramError(f"program: source {program.source!r:.40} is no object")
    try:  # a JSON object, as in a file (one level below the document), that to_dict copies
        json_value_copy(program.source, "program: source", MAX_JSON_DEPTH - 1)
    except InstanceError as exc:
        raise ProgramError(str(exc)) from None
    num_t = len(program.instructions)
    if num_t < 1:
        raise ProgramError("program has no instructions")
    _validate_program_tensors(program.tensors, num_t)
    defined_by = _validate_program_instructions(program)
    for x in program.tensors:
        if x.def_time >= 0 and defined_by[x.id] != x.def_time:
            raise ProgramError(f"tensor {x.id} ({x.name}): no defining instruction")
    _validate_program_groups_and_loops(program)


def _validate_program_containers(program: Program) -> None:
    """The program's records are tuples (or lists) of their types, an instruction's
    operands, outputs and byte counts tuples: what the other rules walk and join."""
    sequences = (tuple, list)
    for what, records, kind in (
        ("tensors", program.tensors, ProgramTensor),
        ("instructions", program.instructions, ProgramInstruction),
        ("loops", program.loops, ProgramLoop),
    ):
        if not isinstance(records, sequences) or not all(isinstance(r, kind) for r in records):
            raise ProgramError(f"program: {what} must be a tuple of {kind.__name__}")
    if not isinstance(program.alias_groups, sequences) or not all(
        isinstance(group, sequences) for group in program.alias_groups
    ):
        raise ProgramError("program: alias_groups must be a tuple of groups (tuples)")
    for t, ins in enumerate(program.instructions):
        for key in ("operands", "outputs", "operand_bytes", "output_bytes"):
            if not isinstance(getattr(ins, key), tuple):
                raise ProgramError(f"instruction {t}: {key} {getattr(ins, key)!r:.40} is no tuple")


def _validate_program_tensors(tensors: tuple[ProgramTensor, ...], num_t: int) -> None:
    """Ids, sizes and live ranges of every tensor of a program of ``num_t`` steps."""
    for i, x in enumerate(tensors):
        if x.id != i:
            raise ProgramError(f"tensor {i}: id is {x.id!r:.40}, expected its index")
        if not is_text(x.name):
            raise ProgramError(f"tensor {i}: name {x.name!r:.40} is no string (UTF-8 text)")
        for key in ("id", "size", "def_time", "last_use_time"):  # 2.5, true: no file holds them
            if not _is_whole(getattr(x, key)):
                raise ProgramError(
                    f"tensor {i} ({x.name}): {key} {getattr(x, key)!r:.40} is no integer"
                )
        if not isinstance(x.live_out, bool):
            raise ProgramError(f"tensor {i} ({x.name}): live_out {x.live_out!r:.40} is no bool")
        if not is_text(getattr(x, "shape", "")):
            raise ProgramError(
                f"tensor {i} ({x.name}): shape {x.shape!r:.40} is no string (UTF-8 text)"
            )
        if x.size < 0:
            raise ProgramError(f"tensor {i} ({x.name}): negative size {x.size}")
        if x.size > MAX_BYTES:
            shape = ", " + x.shape if x.shape else ""
            raise ProgramError(
                f"tensor {i} ({x.name}{shape}): size {x.size} bytes is more than 2**53"
            )
        if not -1 <= x.def_time < num_t:
            raise ProgramError(f"tensor {i} ({x.name}): def_time {x.def_time} out of range")
        if not x.def_time <= x.last_use_time < num_t:
            raise ProgramError(
                f"tensor {i} ({x.name}): last_use_time {x.last_use_time} outside "
                f"{x.def_time}..{num_t - 1}"
            )


def _validate_program_instructions(program: Program) -> list[int]:
    """Counts, bytes, reads and definitions of every instruction; the defining
    instruction of each tensor (-1: none)."""
    tensors = program.tensors
    num_x = len(tensors)
    defined_by = [-1] * num_x
    for t, ins in enumerate(program.instructions):
        if not (is_text(ins.name) and is_text(ins.opcode)):
            raise ProgramError(
                f"instruction {t}: name {ins.name!r:.40} or opcode {ins.opcode!r:.40} is no "
                "string (UTF-8 text)"
            )
        if not _is_whole(ins.count):
            raise ProgramError(
                f"instruction {t} ({ins.name}): count {ins.count!r:.40} is no integer"
            )
        if not all(_is_whole(b) for b in [*ins.operand_bytes, *ins.output_bytes]):
            raise ProgramError(f"instruction {t} ({ins.name}): a byte count is no integer")
        if not all(_is_whole(x) for x in [*ins.operands, *ins.outputs]):
            raise ProgramError(f"instruction {t} ({ins.name}): a tensor id is no integer")
        for key in ("flops", "transcendentals"):  # finite, at least 0 (NaN and inf are not)
            value = getattr(ins, key)
            if not (is_finite_number(value) and value >= 0):
                raise ProgramError(
                    f"instruction {t} ({ins.name}): {key} must be finite and >= 0, got {value!r}"
                )
        if not 1 <= ins.count <= MAX_COUNT:
            _raise_instruction_count(t, ins)
        if len(ins.operand_bytes) != len(ins.operands):
            raise ProgramError(f"instruction {t} ({ins.name}): operand_bytes length differs")
        if len(ins.output_bytes) != len(ins.outputs):
            raise ProgramError(f"instruction {t} ({ins.name}): output_bytes length differs")
        moved = [*ins.operand_bytes, *ins.output_bytes]
        if moved and (min(moved) < 0 or max(moved) > MAX_BYTES):
            kind = (
                "negative bytes" if min(moved) < 0 else "moves more than 2**53 bytes for one buffer"
            )
            raise ProgramError(f"instruction {t} ({ins.name}): {kind}")
        for x in ins.operands:
            if not 0 <= x < num_x:
                raise ProgramError(f"instruction {t} ({ins.name}): dangling operand tensor {x}")
            tensor = tensors[x]
            if not tensor.def_time < t <= tensor.last_use_time:
                raise ProgramError(
                    f"instruction {t} ({ins.name}): reads tensor {x} ({tensor.name}) outside "
                    f"its live range ({tensor.def_time}, {tensor.last_use_time}]"
                )
        for x in ins.outputs:
            if not 0 <= x < num_x:
                raise ProgramError(f"instruction {t} ({ins.name}): dangling output tensor {x}")
            if defined_by[x] != -1:
                raise ProgramError(
                    f"instruction {t} ({ins.name}): tensor {x} is already defined by "
                    f"instruction {defined_by[x]}"
                )
            defined_by[x] = t
            if tensors[x].def_time != t:
                raise ProgramError(
                    f"instruction {t} ({ins.name}): defines tensor {x} whose def_time is "
                    f"{tensors[x].def_time}"
                )
    return defined_by


def _raise_instruction_count(t: int, ins: ProgramInstruction) -> None:
    """The message of instruction ``t``'s broken count rule."""
    w = f"instruction {t} ({ins.name})"
    if not ins.count >= 1:
        raise ProgramError(f"{w}: count must be >= 1")
    raise ProgramError(f"{w}: count {ins.count} is more than 2**31-1")


def _validate_program_groups_and_loops(program: Program) -> None:
    """Alias group members name existing buffers, each once; loop bodies and trip counts."""
    num_t = len(program.instructions)
    seen: set[tuple[int, int]] = set()
    for g, group in enumerate(program.alias_groups):
        if not group:  # the loader's rule (_alias_group): a file holds no empty group
            raise ProgramError(f"alias group {g} is not a non-empty list of members")
        for member in group:
            if (
                not isinstance(member, (tuple, list))
                or len(member) != 2
                or not all(_is_whole(v) for v in member)
            ):
                raise ProgramError(
                    f"alias group {g}: member {member!r:.40} is no (instruction, position)"
                )
            t, p = member
            buffer = (t, p)  # a plain tuple, whatever sequence the member was built as
            if not (0 <= t < num_t and 0 <= p < program.instructions[t].num_buffers):
                raise ProgramError(f"alias group {g}: no buffer {buffer}")
            if buffer in seen:
                raise ProgramError(f"alias group {g}: buffer {buffer} is in two groups")
            seen.add(buffer)
    for i, lp in enumerate(program.loops):
        if not all(_is_whole(v) for v in (lp.first, lp.last, lp.trip_count)):
            raise ProgramError(f"loop {i}: first, last and trip_count must be integers")
        if not 0 <= lp.first <= lp.last < num_t:
            raise ProgramError(f"loop {i}: body {lp.first}..{lp.last} out of range")
        if lp.trip_count < 1:
            raise ProgramError(f"loop {i}: trip_count must be >= 1")
        if lp.trip_count > MAX_COUNT:
            raise ProgramError(f"loop {i}: trip_count {lp.trip_count} is more than 2**31-1")


def _is_whole(value: Any) -> bool:
    """A plain ``int`` (not a bool, not NumPy's, which no file holds and JSON cannot
    write): what a program's counts, sizes, times and ids are."""
    return type(value) is int


def _whole(value: Any) -> int:
    """``value`` where it is a JSON integer (:class:`TypeError` otherwise: a float, a
    string or a bool is not taken for one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _number(value: Any) -> float:
    """``value`` as a float where it is a JSON number (:class:`TypeError` otherwise: a
    string or a bool is not taken for one; :class:`ValueError` for an integer too large
    for a float); :func:`validate_program` judges its value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {value!r}")
    try:
        return float(value)
    except OverflowError:
        raise ValueError("expected a number, got an integer too large for a float") from None


def _flag(value: Any) -> bool:
    """``value`` where it is true or false (:class:`TypeError` otherwise: ``"false"`` is
    not taken for true)."""
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {value!r}")
    return value


_KINDS: dict[str, type | tuple[type, ...]] = {
    "a string": str,
    "a list": (list, tuple),
    "an object": Mapping,
}


def _field(record: Any, key: str, kind: str, default: Any = ...) -> Any:
    """``record[key]`` (``default`` where given and the key is absent) where it is ``kind``
    ("a string", "a list", "an object"); :class:`TypeError` in the instance loader's words
    otherwise: nothing is converted (``null`` is not taken for the name ``"None"``, nor
    ``{}`` for an empty list)."""
    value = record[key] if default is ... else record.get(key, default)
    if not isinstance(value, _KINDS[kind]):
        raise TypeError(f"'{key}' must be {kind}, got {value!r:.40}")
    return value


def _alias_group(group: Any, index: int) -> tuple[tuple[int, int], ...]:
    """An alias group of a program document: a non-empty list of ``[instruction,
    position]`` pairs; ``ValueError`` otherwise."""
    if not isinstance(group, (list, tuple)) or not group:
        raise ValueError(f"alias group {index} is not a non-empty list of members")
    members = []
    for m in group:
        if not isinstance(m, (list, tuple)) or len(m) != 2:
            raise ValueError(
                f"alias group {index}: member {m!r:.40} is not [instruction, position]"
            )
        members.append((_whole(m[0]), _whole(m[1])))
    return tuple(members)


def program_from_dict(doc: Any, *, where: str = "program") -> Program:
    """Build and validate a :class:`Program` from its file document."""
    check_header(
        doc, where=where, kind="program", format_name=PROGRAM_FORMAT, version=PROGRAM_VERSION
    )
    try:
        program = Program(
            name=_field(doc, "name", "a string"),
            source=dict(_field(doc, "source", "an object", {})),
            instructions=tuple(
                ProgramInstruction(
                    name=_field(i, "name", "a string"),
                    opcode=_field(i, "opcode", "a string"),
                    operands=tuple(map(_whole, _field(i, "operands", "a list"))),
                    outputs=tuple(map(_whole, _field(i, "outputs", "a list"))),
                    operand_bytes=tuple(map(_whole, _field(i, "operand_bytes", "a list"))),
                    output_bytes=tuple(map(_whole, _field(i, "output_bytes", "a list"))),
                    flops=_number(i.get("flops", 0.0)),
                    transcendentals=_number(i.get("transcendentals", 0.0)),
                    count=_whole(i.get("count", 1)),
                )
                for i in _field(doc, "instructions", "a list")
            ),
            tensors=tuple(
                ProgramTensor(
                    id=_whole(x["id"]),
                    name=_field(x, "name", "a string"),
                    size=_whole(x["size"]),
                    def_time=_whole(x["def_time"]),
                    last_use_time=_whole(x["last_use_time"]),
                    live_out=_flag(x.get("live_out", False)),
                    shape=_field(x, "shape", "a string", ""),
                )
                for x in _field(doc, "tensors", "a list")
            ),
            alias_groups=tuple(
                _alias_group(g, i) for i, g in enumerate(_field(doc, "alias_groups", "a list", []))
            ),
            loops=tuple(
                ProgramLoop(_whole(lp["first"]), _whole(lp["last"]), _whole(lp["trip_count"]))
                for lp in _field(doc, "loops", "a list", [])
            ),
        )
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ProgramError(
            f"{where}: malformed program document ({type(exc).__name__}: {exc})"
        ) from None
    validate_program(program)
    return program


def load_program(path: str | os.PathLike[str]) -> Program:
    """Read and validate a program file (``.json`` or ``.json.gz``)."""
    return read_document(path, program_from_dict)


def save_program(program: Program, path: str | os.PathLike[str]) -> None:
    """Atomically write ``program`` (gzip-compressed when ``path`` ends in ``.gz``).

    Raises :class:`ProgramError` before anything is written for a program that
    :func:`validate_program` refuses (a file :func:`load_program` would not read back).
    """
    validate_program(program)
    write_json(path, program.to_dict())
