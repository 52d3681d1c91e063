"""XLA's own memory-space assignment, read from a TPU or GPU module, as a solution named ``xla``.

A scheduled module from the TPU or GPU backend already holds XLA's decisions: each
value's layout names its memory space (``S(1)``: the fast, alternate memory), and
``copy-start`` / ``copy-done`` pairs copy values between spaces (prefetches into the
fast memory, evictions out of it). The XLA frontend strips those copies to recover
the program underneath and records what they decided as an :class:`XlaPlacement`;
:func:`placement_solution` turns that into a :class:`~mallocgame.solution.Solution` of
the program's instance, so XLA's answer is checked, simulated and compared like any
solver's.

How each decision becomes an allocation (SPEC sections 4 and 7), ``fast_spaces`` being
the memory spaces that count as the fast memory (default ``{1}``):

- An output produced into a fast space: NoCopy, memory interval = its tensor's live
  range; if XLA also evicts it (a copy from a fast to a slow space), Copy instead,
  copied out from the next step until the step before the eviction's ``copy-done``.
- An operand read through a prefetch (a copy from a slow to a fast space): Copy, copied
  in from the step after ``copy-start`` until the step before the read (a copy that
  finished earlier is stretched to the read, as the game's copies end there); the
  copy's later reads are NoCopy, each extending the allocation to its step.
- An operand read from the fast space it was produced in: NoCopy, extending the
  output's allocation where the read lies past it.
- Everything else stays in slow memory.

Offsets: each chain of allocations (an output and its reads, or a prefetch and its
reads; chains of one alias group together) takes the lowest aligned offset free over
its time span, chains taken in order of first step. XLA's own offsets are not used:
its sizes and times are not the game's.

A placement records its program's structure (:func:`program_structure_sha256`: the
tensor of each instruction's buffers and each tensor's size), and
:func:`placement_solution` refuses an instance of another structure, even one with the
same counts of instructions and buffers. A placement file without it (written before
the field existed) is held to the counts alone.

Decisions the game cannot express are listed in the solution's ``info["unexpressed"]``
(a value read from a fast space it never reached through a copy or an output, such as
an entry parameter the caller placed there; a program result XLA leaves in a fast
space, where the game's results end in slow memory; a prefetch with no step to copy
in, such as a cross-program prefetch) and left in slow memory. Other differences are
left for the checker to name: concurrent copies (the game's copy intervals share at
most one step), copies faster than the cost model's supply allows, chains that do not
fit the instance's fast memory (also listed).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mallocgame.errors import FormatError, MallocGameError
from mallocgame.fileio import read_document, write_json
from mallocgame.instance import Instance
from mallocgame.latency import mapping_reward, normalize
from mallocgame.program import Program
from mallocgame.solution import Allocation, Solution

__all__ = [
    "PlacementError",
    "BufferSpace",
    "XlaCopy",
    "XlaPlacement",
    "placement_solution",
    "program_structure_sha256",
    "instance_structure_sha256",
    "placement_to_dict",
    "placement_from_dict",
    "save_placement",
    "load_placement",
]

PLACEMENT_FORMAT = "mallocgame-xla-placement"
PLACEMENT_VERSION = 1

DEFAULT_FAST_SPACES = frozenset({1})


class PlacementError(MallocGameError):
    """XLA's placement does not belong to the instance it is applied to."""


@dataclass(frozen=True)
class BufferSpace:
    """Where one buffer's value sat in XLA's module: memory space ``space``, reached
    through copy ``copy`` (an index into :attr:`XlaPlacement.copies`) or, ``None``,
    where its defining instruction produced it."""

    space: int
    copy: int | None = None


@dataclass(frozen=True)
class XlaCopy:
    """One ``copy-start`` / ``copy-done`` pair of XLA's module, in program steps.

    ``start``: the first program instruction after the ``copy-start`` (the copy
    overlaps it); ``done``: the first program instruction after the ``copy-done`` (the
    copy has finished before it runs; the number of instructions if none follows).
    """

    tensor: int
    source_space: int
    dest_space: int
    start: int
    done: int


@dataclass(frozen=True)
class XlaPlacement:
    """XLA's memory-space decisions for a program extracted from its module.

    ``buffers[t][p]``: the space of buffer ``p`` (operands, then outputs) of program
    instruction ``t``. ``structure_sha256``: the program's
    :func:`program_structure_sha256` (``None`` for a file written before it was recorded).
    """

    program: str
    buffers: tuple[tuple[BufferSpace, ...], ...]
    copies: tuple[XlaCopy, ...]
    structure_sha256: str | None = None

    @property
    def spaces(self) -> frozenset[int]:
        """Every memory space a buffer or a copy names."""
        found = {b.space for row in self.buffers for b in row}
        found.update(s for c in self.copies for s in (c.source_space, c.dest_space))
        return frozenset(found)


def _structure_sha256(tensors_of: Sequence[Sequence[int]], sizes: Sequence[int]) -> str:
    """SHA-256 of the JSON of ``[tensors_of, sizes]``: each instruction's buffers' tensor ids
    (operands, then outputs) and each tensor's size in bytes."""
    text = json.dumps([[list(row) for row in tensors_of], list(sizes)], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def program_structure_sha256(program: Program) -> str:
    """The digest of ``program``'s structure a placement is bound to: the tensor of each
    buffer of each instruction (operands, then outputs) and each tensor's size in bytes. Any
    instance derived from the program has the same :func:`instance_structure_sha256`,
    whatever its hardware."""
    return _structure_sha256(
        [ins.operands + ins.outputs for ins in program.instructions],
        [t.size for t in program.tensors],
    )


def instance_structure_sha256(instance: Instance) -> str:
    """:func:`program_structure_sha256` of the program ``instance`` was derived from, read
    from the instance itself."""
    buffers = instance.buffers
    return _structure_sha256(
        [[buffers[b].tensor_id for b in ins.buffers] for ins in instance.instructions],
        [t.size for t in instance.tensors],
    )


def placement_to_dict(placement: XlaPlacement) -> dict[str, Any]:
    """The placement's file object: ``buffers`` as ``[space, copy]`` pairs per instruction
    (``copy`` -1 for none), ``copies`` as ``[tensor, source, dest, start, done]`` rows, and
    the program's ``structure_sha256`` where known."""
    structure = (
        {}
        if placement.structure_sha256 is None
        else {"structure_sha256": placement.structure_sha256}
    )
    return {
        "format": PLACEMENT_FORMAT,
        "version": PLACEMENT_VERSION,
        "program": placement.program,
        **structure,
        "buffers": [
            [[b.space, -1 if b.copy is None else b.copy] for b in row] for row in placement.buffers
        ],
        "copies": [
            [c.tensor, c.source_space, c.dest_space, c.start, c.done] for c in placement.copies
        ],
    }


def placement_from_dict(doc: Any) -> XlaPlacement:
    """The placement of a file object written by :func:`placement_to_dict`; a malformed one
    is a :class:`~mallocgame.errors.FormatError` of one line."""
    if not isinstance(doc, dict) or doc.get("format") != PLACEMENT_FORMAT:
        raise FormatError(f"not an XLA placement (format {PLACEMENT_FORMAT!r})")
    version = doc.get("version")
    if type(version) is not int or version != PLACEMENT_VERSION:  # true and 1.0 == 1, but are not
        raise FormatError(f"XLA placement version {version!r} (this build reads 1)")
    try:
        copies = tuple(XlaCopy(*(_whole(v) for v in row)) for row in _list(doc["copies"], "copies"))
        buffers = tuple(
            tuple(
                _buffer_space(space, copy, len(copies))
                for space, copy in _list(row, "a row of buffers")
            )
            for row in _list(doc["buffers"], "buffers")
        )
        structure = doc.get("structure_sha256")
        if structure is not None and not _is_sha256(structure):
            raise ValueError(f"structure_sha256 {structure!r:.80} is not a SHA-256 digest")
        program = doc["program"]
        if not isinstance(program, str):
            raise ValueError(f"program {program!r:.40} is not a string")
        return XlaPlacement(program, buffers, copies, structure)
    except (KeyError, TypeError, ValueError) as exc:
        raise FormatError(f"a malformed XLA placement ({type(exc).__name__}: {exc})") from None


def _is_sha256(value: Any) -> bool:
    """``value`` is 64 lowercase hexadecimal digits."""
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def _whole(value: Any) -> int:
    """A placement file's number: a whole number (not a bool, not 1.7), else ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r:.40} is not a whole number")
    return value


def _list(value: Any, what: str) -> list[Any]:
    """A placement file's list (``{}`` is not taken for an empty one), else ``ValueError``."""
    if not isinstance(value, list):
        raise ValueError(f"{what} {value!r:.40} is not a list")
    return value


def _buffer_space(space: Any, copy: Any, copies: int) -> BufferSpace:
    """One ``[space, copy]`` pair of a placement file (``copy`` -1 for none, else the index
    of one of its ``copies``), else ``ValueError``."""
    index = _whole(copy)
    if not -1 <= index < copies:
        raise ValueError(f"copy {index} of {copies} copies")
    return BufferSpace(_whole(space), None if index < 0 else index)


def save_placement(placement: XlaPlacement, path: str | os.PathLike[str]) -> None:
    """Atomically write ``placement`` (gzip-compressed when ``path`` ends in ``.gz``)."""
    write_json(path, placement_to_dict(placement))


def load_placement(path: str | os.PathLike[str]) -> XlaPlacement:
    """Read a placement file written by :func:`save_placement`."""
    return read_document(path, placement_from_dict)


@dataclass
class _Chain:
    """Allocations of one tensor served by one arrival in the fast memory."""

    end: int  # the latest step of its memory intervals so far
    members: list[
        tuple[int, str, int | None, int | None, tuple[int, int] | None]
    ]  # buffer, action, start, end, copy


def placement_solution(
    instance: Instance,
    placement: XlaPlacement,
    *,
    fast_spaces: Iterable[int] = DEFAULT_FAST_SPACES,
) -> Solution:
    """The solution named ``xla`` of ``instance`` (derived from the program ``placement``
    was read with): XLA's decisions as allocations (see the module docstring).

    Raises :class:`PlacementError` when the instance's instructions or buffers are not
    the placement's program's (its recorded structure, or else their counts).
    """
    started = time.perf_counter()
    fast = frozenset(fast_spaces)
    num_t = len(instance.instructions)
    if len(placement.buffers) != num_t or any(
        len(row) != len(ins.buffers) for row, ins in zip(placement.buffers, instance.instructions)
    ):
        raise PlacementError(
            f"XLA's placement of {placement.program!r} does not match instance {instance.name!r} "
            "(another program's instructions or buffers)"
        )
    if (
        placement.structure_sha256 is not None
        and placement.structure_sha256 != instance_structure_sha256(instance)
    ):
        raise PlacementError(
            f"XLA's placement of {placement.program!r} does not match instance {instance.name!r} "
            "(another program's tensors or sizes)"
        )
    tensors = instance.tensors
    evicted: dict[int, int] = {}  # tensor -> the step its first eviction is done by
    for c in placement.copies:
        if c.source_space in fast and c.dest_space not in fast:
            evicted[c.tensor] = min(evicted.get(c.tensor, num_t), c.done)
    chains: dict[tuple[str, int], _Chain] = {}
    unexpressed: list[str] = []
    left_slow: set[int] = set()  # tensors whose fast placement the game cannot express (noted once)

    def extend(chain: _Chain, b: int, t: int) -> None:
        if t <= chain.end:
            chain.members.append((b, "NoCopy", None, None, None))
        else:
            chain.members.append((b, "NoCopy", chain.end + 1, t, None))
            chain.end = t

    for t, ins in enumerate(instance.instructions):
        for p, b in enumerate(ins.buffers):
            buf = instance.buffers[b]
            where = placement.buffers[t][p]
            if where.space not in fast:
                continue
            x = tensors[buf.tensor_id]
            if buf.is_output:
                done = evicted.get(x.id)
                if done is None and x.live_out:
                    unexpressed.append(
                        f"{ins.name}: program result {x.name} stays in memory space {where.space} "
                        "(the game's results end in slow memory)"
                    )
                    left_slow.add(x.id)
                elif done is None:
                    chains[("out", x.id)] = _Chain(
                        x.last_use_time, [(b, "NoCopy", t, x.last_use_time, None)]
                    )
                elif t + 1 <= num_t - 1:
                    e = min(max(t + 1, done - 1), num_t - 1)
                    chains[("out", x.id)] = _Chain(e, [(b, "Copy", t, e, (t + 1, e))])
                else:
                    unexpressed.append(
                        f"{ins.name}: {x.name} is evicted after the last instruction"
                    )
                continue
            if where.copy is None:
                chain = chains.get(("out", x.id))
                if chain is not None:
                    extend(chain, b, t)
                elif x.id not in left_slow:
                    unexpressed.append(
                        f"{ins.name}: reads {x.name} from memory space {where.space}, which no copy or "
                        "output put it in (an entry parameter the caller placed there)"
                    )
                    left_slow.add(x.id)
                continue
            key = ("copy", where.copy)
            if key in chains:
                extend(chains[key], b, t)
                continue
            first = max(x.def_time + 1, 0)
            if t - 1 < first:
                unexpressed.append(f"{ins.name}: the prefetch of {x.name} has no step to copy in")
                continue
            s = min(max(placement.copies[where.copy].start, first), t - 1)
            chains[key] = _Chain(t, [(b, "Copy", s, t, (s, t - 1))])

    allocations = _with_offsets(instance, list(chains.values()), unexpressed)
    reward = mapping_reward(instance, (a.buffer for a in allocations))
    return Solution(
        instance=instance.name,
        instance_sha256=instance.sha256,
        solver="xla",
        seed=0,
        wall_s=time.perf_counter() - started,
        allocations=tuple(sorted(allocations, key=lambda a: a.buffer)),
        reward_s=reward,
        normalized_reward=normalize(instance, reward),
        info={
            "fast_spaces": sorted(fast),
            "copies": len(placement.copies),
            "unexpressed": unexpressed,
        },
    )


def _with_offsets(
    instance: Instance, chains: list[_Chain], unexpressed: list[str]
) -> list[Allocation]:
    """Offsets by lowest fit: chains of one alias group share one offset."""
    align = instance.hardware.alignment_bytes
    capacity = instance.hardware.fast_memory_bytes
    by_alias: dict[int, int] = {}
    parent = list(range(len(chains)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, chain in enumerate(chains):
        for b, *_ in chain.members:
            alias = instance.buffers[b].alias_id
            j = by_alias.setdefault(alias, i)
            ri, rj = find(i), find(j)
            if ri != rj:
                parent[max(ri, rj)] = min(ri, rj)
    items: dict[int, list[_Chain]] = {}
    for i, chain in enumerate(chains):
        items.setdefault(find(i), []).append(chain)
    placed: list[tuple[int, int, int, int]] = []  # (first, last, offset, aligned size)
    out: list[Allocation] = []
    for group in sorted(
        items.values(), key=lambda g: min(m[2] for c in g for m in c.members if m[2] is not None)
    ):
        spans = [  # a member's start and end are both set or both None
            (m[2], m[3]) for c in group for m in c.members if m[2] is not None and m[3] is not None
        ]
        first, last = min(s for s, _ in spans), max(e for _, e in spans)
        size = max(instance.buffers[m[0]].size for c in group for m in c.members)
        z = -(-size // align) * align
        taken = sorted((o, o + w) for f, e, o, w in placed if f <= last and first <= e)
        offset = 0
        for lo, hi in taken:
            if offset + z <= lo:
                break
            offset = max(offset, -(-hi // align) * align)
        if offset + z > capacity:
            names = sorted(
                {
                    instance.tensors[instance.buffers[m[0]].tensor_id].name
                    for c in group
                    for m in c.members
                }
            )
            unexpressed.append(
                f"{', '.join(names[:3])}: no room in the fast memory over steps {first}..{last}"
            )
        placed.append((first, last, offset, z))
        for c in group:
            for b, action, s, e, copy in c.members:
                out.append(Allocation(b, action, offset, s, e, copy))
    return out
