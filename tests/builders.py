"""A tiny DSL for writing small game instances by hand in tests.

Describe the program as tensors plus instructions that read and write them; the
builder fills in what an instance file needs: buffer ids in game order (operands
before outputs), each tensor's ``def_time`` (the instruction writing it, -1 for a
program input) and ``last_use_time`` (its last read, or ``def_time``), every buffer's
own alias group unless an ``alias`` key joins it to others, ``demand_s = size /
copy_bandwidth`` unless given, ``supply_s = 1.0`` unless given, and a roofline
latency with ``compute_s = fixed_s = 0`` unless given.

Example::

    inst = build(
        tensors=[X(100), X(50, live_out=True)],          # tensor ids 0, 1
        instructions=[
            I(writes=[1], supply=1.0),                    # instruction 0 defines tensor 1
            I(reads=[0, B(1, alias="g")], supply=0.5),    # instruction 1 reads both
        ],
        capacity=4096, alignment=1,
    )

Default hardware: ``fast_bandwidth = 1000``, ``slow_bandwidth = 100``,
``copy_bandwidth = 100`` bytes/s, so a 100-byte buffer costs 1 s to copy, 1 s to
read from slow memory and 0.1 s from fast memory (numbers easy to work by hand).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Sequence

from mallocgame.instance import Instance, instance_from_dict

__all__ = ["X", "B", "I", "roofline", "table", "build_doc", "build", "buffer_ids"]


@dataclass
class X:
    """A tensor: ``size`` bytes; ``last_use`` overrides the derived last use time."""

    size: int
    live_out: bool = False
    last_use: int | None = None
    name: str | None = None


@dataclass
class B:
    """One buffer of an instruction: reads or writes ``tensor``.

    ``alias``: any hashable key; buffers with equal keys form one alias group.
    ``size`` defaults to the tensor's size, ``demand`` to ``size / copy_bandwidth``.
    """

    tensor: int
    alias: Any = None
    size: int | None = None
    demand: float | None = None


@dataclass
class I:
    """One instruction. ``reads``/``writes``: tensor ids or :class:`B` specs.

    ``latency``: a dict from :func:`roofline` or :func:`table` (table ``varied``
    entries are positions in the instruction's buffer list in game order: its
    reads first, then its writes).
    """

    reads: Sequence[int | B] = ()
    writes: Sequence[int | B] = ()
    supply: float = 1.0
    count: int = 1
    latency: dict[str, Any] | None = None
    name: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def roofline(compute_s: float = 0.0, fixed_s: float = 0.0) -> dict[str, Any]:
    return {"kind": "roofline", "compute_s": compute_s, "fixed_s": fixed_s}


def table(varied: Sequence[int], latency_s: Sequence[float]) -> dict[str, Any]:
    """``varied``: positions in the instruction's buffers (reads first, then writes)."""
    return {"kind": "table", "varied": list(varied), "latency_s": list(latency_s)}


def _spec(item: int | B) -> B:
    return item if isinstance(item, B) else B(item)


def build_doc(
    tensors: Sequence[X | int],
    instructions: Sequence[I],
    *,
    capacity: int = 4096,
    alignment: int = 1,
    fast_bw: float = 1000.0,
    slow_bw: float = 100.0,
    copy_bw: float = 100.0,
    name: str = "built",
) -> dict[str, Any]:
    """The SPEC section 7 document of the described program (not validated)."""
    xs = [t if isinstance(t, X) else X(t) for t in tensors]
    def_time = [-1] * len(xs)
    last_read = [None] * len(xs)
    for t, ins in enumerate(instructions):
        for w in ins.writes:
            def_time[_spec(w).tensor] = t
        for r in ins.reads:
            last_read[_spec(r).tensor] = t

    buffers: list[dict[str, Any]] = []
    ins_docs: list[dict[str, Any]] = []
    alias_ids: dict[Any, int] = {}
    for t, ins in enumerate(instructions):
        specs = [(s, False) for s in map(_spec, ins.reads)] + [(s, True) for s in map(_spec, ins.writes)]
        ids = []
        for s, is_out in specs:
            b = len(buffers)
            size = xs[s.tensor].size if s.size is None else s.size
            if s.alias is None:
                alias = len(alias_ids)
                alias_ids[("__own__", b)] = alias
            else:
                alias = alias_ids.setdefault(s.alias, len(alias_ids))
            buffers.append(
                {
                    "id": b,
                    "instruction": t,
                    "tensor_id": s.tensor,
                    "alias_id": alias,
                    "is_output": is_out,
                    "size": size,
                    "demand_s": size / copy_bw if s.demand is None else s.demand,
                    "benefit_s": 0.0,
                }
            )
            ids.append(b)
        lat = copy.deepcopy(ins.latency) if ins.latency is not None else roofline()
        if lat["kind"] == "table":
            lat["varied"] = [ids[i] for i in lat["varied"]]
        doc = {
            "name": ins.name or f"i{t}",
            "opcode": "fusion",
            "count": ins.count,
            "supply_s": ins.supply,
            "buffers": ids,
            "latency": lat,
        }
        doc.update(ins.extra)
        ins_docs.append(doc)

    tensor_docs = []
    for i, x in enumerate(xs):
        last = x.last_use
        if last is None:
            last = last_read[i] if last_read[i] is not None else def_time[i]
        tensor_docs.append(
            {
                "id": i,
                "name": x.name or f"x{i}",
                "size": x.size,
                "def_time": def_time[i],
                "last_use_time": last,
                "live_out": x.live_out,
            }
        )
    return {
        "format": "mallocgame-instance",
        "version": 1,
        "name": name,
        "source": {"frontend": "tests.builders"},
        "hardware": {
            "name": "toy",
            "fast_memory_bytes": capacity,
            "alignment_bytes": alignment,
            "fast_bandwidth": fast_bw,
            "slow_bandwidth": slow_bw,
            "copy_bandwidth": copy_bw,
        },
        "instructions": ins_docs,
        "tensors": tensor_docs,
        "buffers": buffers,
    }


def build(tensors: Sequence[X | int], instructions: Sequence[I], **kwargs: Any) -> Instance:
    """The validated :class:`Instance` of the described program (see :func:`build_doc`)."""
    return instance_from_dict(build_doc(tensors, instructions, **kwargs))


def buffer_ids(inst: Instance, t: int) -> list[int]:
    """Buffer ids of instruction ``t`` in game order."""
    return sorted(inst.instructions[t].buffers)
