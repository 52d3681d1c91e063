"""XLA frontend: a scheduled HLO module (an XLA dump, or a JAX function) -> Program.

Input: a directory written by XLA with ``XLA_FLAGS="--xla_dump_to=DIR
--xla_dump_hlo_as_text"``; its ``*after_optimizations.txt`` holds the scheduled module
(``is_scheduled=true``: the printed order of each computation is its schedule). The CPU
backend names it ``*.cpu_after_optimizations.txt``, the GPU backend
``*.sm_9.0_gpu_after_optimizations.txt`` (its compute capability), the TPU backend
``*.after_optimizations.txt``.

What becomes what:

- **Decisions.** Every instruction of the entry computation that moves data (fusion,
  custom-call, dot, convolution, copy, sort, conditional, ...) becomes one
  :class:`~mallocgame.program.ProgramInstruction`, its operands the tensors it reads
  (tuple-shaped operands expand to their element tensors, in order) and its outputs
  one tensor per array leaf of its shape (tuple index tables are not buffers).
- **Views.** ``parameter`` and ``constant`` (also ``partition-id`` / ``replica-id``)
  make program-input tensors (``def_time = -1``); ``tuple``, ``get-tuple-element``,
  ``bitcast``, ``opt-barrier``, ``domain``, ``add-dependency`` and ``after-all`` make
  no instruction: their result *is* the operand's tensor(s).
- **XLA's own memory-space assignment is stripped** (TPU and GPU modules): a
  ``copy-start`` / ``copy-done`` pair (a prefetch into memory space 1, an eviction out of
  it, a host offload) makes no instruction: ``copy-done``'s result *is* the copied
  tensor. Where each value sat (its layout's ``S(n)``) and when each copy ran are kept
  as an :class:`~mallocgame.frontends.xla_placement.XlaPlacement` (see
  :func:`extract_dump_with_placement`).
- **Asynchronous pairs**: a ``*-start`` (``all-reduce-start``, ``all-gather-start``,
  ``collective-permute-start``, ``async-start`` wrapping any computation, ``call-start``
  (a TPU v5p's SparseCore offload, its computation ``to_apply``), ``send``,
  ``recv``) is the instruction: it reads the operands and writes the result; the tuple
  it returns echoes its operands (element 0), holds the result (element 1) and
  synchronization scalars (no buffers). ``*-done`` and ``async-update`` make no
  instruction: ``*-done``'s result *is* the start's result. An ``async-start`` whose
  computation's root is a ``slice`` of its parameter into a memory space other than 0 is
  a TPU's sliced prefetch as a dump file writes it, read as ``slice-start`` (its
  ``async-done`` as ``slice-done``).
- **Calls** are inlined: the callee's parameters are the call's operand tensors, its
  root is the call's result.
- **While loops** are flattened: the condition's instructions, then the body's, each
  with ``count`` multiplied by the trip count (``backend_config`` ``known_trip_count``;
  when XLA states none, 1 and a note; the condition really runs once more: ignored),
  and a :class:`~mallocgame.program.ProgramLoop` per flattened loop (nested loops give
  nested ``ProgramLoop`` s, each with its own trip count; counts multiply). Inside,
  the loop parameter *is* the while operand's tensors; the while's result *is* the
  body root's tensors. A stated trip count of 0 runs the condition once and the body
  never: the body makes no instruction and no loop, the while's result *is* its
  operand (and a note says so). A trip count that is not a whole number, or more than
  ``2**31 - 1`` (also as the product of nested counts), is refused
  (:class:`XlaFrontendError`, naming the loop).
- **Conditionals** are one opaque instruction (operands deduplicated, since one
  branch runs; flops and transcendentals each the most of any branch).

Alias groups (from HLO semantics only, never from buffer-assignment reuse), as
unions of tensors whose buffers (definitions and reads) then form one group:
loop-carried values (each leaf of a while operand with the body root's leaf at the
same index, when they differ), in-place pairs (``dynamic-update-slice`` / ``scatter``,
also as a fusion's output source reached from a fused parameter, and
``output_to_operand_aliasing`` of custom calls), and the module's
``input_output_alias`` (donation: the parameter leaf with the output leaf). Groups
that share a tensor merge; a group of one buffer is dropped.

Live ranges: ``def_time`` is the defining instruction (-1 for inputs);
``last_use_time`` the last reading instruction, extended to a loop's last instruction
for a value defined outside that loop and read inside it, and for each loop-carried
body result; a live-out (entry root) tensor lives to ``T-1``; a tensor never read ends
where it starts. Bytes: each operand and output moves its tensor's size (the bytes its
layout stores, tile padding included) unless ``partial_bytes`` is asked for. Shapes
are taken as printed: in a module partitioned for several devices (SPMD, with
``sharding=`` annotations) they are already one device's, and the annotations are
read past. Flops, transcendentals and
partial bytes: :mod:`mallocgame.frontends.hlo_cost`.

Malformed modules are refused with one line naming what is wrong: unreadable text, a
name defined twice, an empty computation or a shape of more than ``2**53`` bytes
(:class:`DumpError`, from :func:`~mallocgame.frontends.hlo_parse.parse_module`); an
operand not defined before its reader (in any computation the entry reaches), a while
without its condition or body, a conditional without a branch computation, a tuple index
out of range, a parameter its computation is not given, an ``input_output_alias`` naming
what the module does not have, aliasing an output or a parameter leaf twice or leaves of
different sizes, a while body whose result does not match its operand leaf for leaf
(count and bytes), an in-place update whose output and updated operand differ in bytes,
a ``copy-start`` that no ``copy-done`` ends (or two do), entry parameters numbered twice
or not 0 to n-1 (:class:`XlaFrontendError`, naming the instruction); a computation that
calls itself, and calls and loop bodies that inlined make more than
:data:`MAX_INLINED_INSTRUCTIONS` instructions (:class:`XlaFrontendError`, before any
instruction is read). An opcode is refused (:class:`UnsupportedHloError`) where the
builder reads it (the entry, calls, loops) if it cannot be modelled (``infeed``,
``outfeed``, ``scan``, or no HLO opcode: none of XLA's ``hlo_opcode.h`` nor a TPU dump's
``call-start`` / ``slice-start`` pairs), and in any other computation the entry reaches
(fusion bodies, branches, reducers: read by :mod:`~mallocgame.frontends.hlo_cost` alone,
which gives an opcode it has no formula for 0) only if it is no HLO opcode.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mallocgame.errors import InputFileError, MallocGameError
from mallocgame.frontends.hlo_cost import CostModel, trip_count
from mallocgame.frontends.hlo_parse import (
    HloComputation,
    HloInstruction,
    HloModule,
    HloParseError,
    Shape,
    parse_alias_list,
    parse_module,
    shape_leaves,
)
from mallocgame.frontends.xla_placement import (
    BufferSpace,
    XlaCopy,
    XlaPlacement,
    program_structure_sha256,
)
from mallocgame.instance import MAX_COUNT
from mallocgame.program import (
    Program,
    ProgramInstruction,
    ProgramLoop,
    ProgramTensor,
    validate_program,
)

__all__ = [
    "XlaFrontendError",
    "DumpError",
    "AmbiguousModuleError",
    "UnsupportedHloError",
    "CompileError",
    "DumpModule",
    "list_modules",
    "extract_dump",
    "extract_dump_with_placement",
    "extract_module",
    "extract_module_with_placement",
    "EntryInterface",
    "entry_interface",
    "extract_jax",
    "dump_jax",
]


class XlaFrontendError(MallocGameError):
    """The XLA frontend cannot turn its input into a program (the message says why)."""


class DumpError(XlaFrontendError, InputFileError):
    """A dump directory is missing, holds no scheduled module, or a file in it is unreadable."""


class AmbiguousModuleError(XlaFrontendError):
    """A dump holds several candidate modules; ``candidates`` lists them, pick one with ``module=``."""

    def __init__(self, message: str, candidates: Sequence[str] = ()):
        super().__init__(message)
        self.candidates = tuple(candidates)


class UnsupportedHloError(XlaFrontendError):
    """The module uses an HLO opcode the frontend cannot model (``opcode`` names it)."""

    def __init__(self, message: str, opcode: str = ""):
        super().__init__(message)
        self.opcode = opcode


class CompileError(XlaFrontendError):
    """JAX could not trace, lower or compile the function (the reason in one line)."""


_VIEWS = frozenset(
    {
        "tuple",
        "get-tuple-element",
        "bitcast",
        "opt-barrier",
        "domain",
        "add-dependency",
        "after-all",
    }
)
_INPUTS = frozenset({"parameter", "constant", "partition-id", "replica-id"})
_UNSUPPORTED = frozenset({"infeed", "outfeed", "scan"})
# Asynchronous starts whose tuple holds (operands, result, synchronization scalars...).
_TUPLE_STARTS = frozenset(
    {"all-gather-start", "collective-permute-start", "async-start", "call-start"}
)
# Dones whose result is element 1 of their start's tuple; all-reduce-done is its start's result.
_TUPLE_DONES = frozenset({"all-gather-done", "collective-permute-done", "async-done", "call-done"})
# Opcodes that make no program instruction: views, inputs, XLA's copies, the ends of asynchronous pairs.
_NO_INSTRUCTION = (
    _VIEWS
    | _INPUTS
    | _TUPLE_DONES
    | {"copy-start", "copy-done", "all-reduce-done", "async-update", "send-done", "recv-done"}
    | {"slice-start", "slice-done"}
)
_KNOWN = (
    frozenset(
        [
            "abs",
            "acos",
            "acosh",
            "add",
            "add-dependency",
            "after-all",
            "all-gather",
            "all-reduce",
            "all-to-all",
            "and",
            "asin",
            "asinh",
            "atan",
            "atan2",
            "atanh",
            "batch-norm-grad",
            "batch-norm-inference",
            "batch-norm-training",
            "bitcast",
            "bitcast-convert",
            "broadcast",
            "call",
            "cbrt",
            "ceil",
            "cholesky",
            "clamp",
            "count-leading-zeros",
            "collective-broadcast",
            "collective-permute",
            "collective-reduce",
            "compare",
            "complex",
            "concatenate",
            "conditional",
            "constant",
            "convert",
            "convolution",
            "copy",
            "cosh",
            "cosine",
            "custom-call",
            "divide",
            "domain",
            "dot",
            "dynamic-reshape",
            "dynamic-slice",
            "dynamic-update-slice",
            "erf",
            "exponential",
            "exponential-minus-one",
            "fft",
            "floor",
            "fusion",
            "gather",
            "get-dimension-size",
            "get-tuple-element",
            "imag",
            "iota",
            "is-finite",
            "log",
            "log-plus-one",
            "logistic",
            "map",
            "maximum",
            "minimum",
            "mulhi",
            "multiply",
            "negate",
            "not",
            "opt-barrier",
            "or",
            "pad",
            "parameter",
            "partition-id",
            "popcnt",
            "power",
            "ragged-all-to-all",
            "ragged-dot",
            "real",
            "reduce",
            "reduce-precision",
            "reduce-scatter",
            "reduce-window",
            "remainder",
            "replica-id",
            "reshape",
            "reverse",
            "rng",
            "rng-bit-generator",
            "rng-get-and-update-state",
            "round-nearest-afz",
            "round-nearest-even",
            "rsqrt",
            "scaled-dot",
            "scatter",
            "select",
            "select-and-scatter",
            "set-dimension-size",
            "shift-left",
            "shift-right-arithmetic",
            "shift-right-logical",
            "shuffle",
            "sign",
            "sine",
            "sinh",
            "slice",
            "sort",
            "sqrt",
            "stochastic-convert",
            "subtract",
            "tan",
            "tanh",
            "topk",
            "transpose",
            "triangular-solve",
            "tuple",
            "while",
            "xor",
            "copy-start",
            "copy-done",
            "slice-start",
            "slice-done",
            "all-reduce-start",
            "all-reduce-done",
            "async-update",
            "send",
            "send-done",
            "recv",
            "recv-done",
        ]
    )
    | _TUPLE_STARTS
    | _TUPLE_DONES
)

# Every opcode of XLA's HLO (xla/hlo/ir/hlo_opcode.h), and the TPU backend's call-start /
# call-done and slice-start / slice-done: what _KNOWN and _UNSUPPORTED hold together.
_HLO_OPCODES = _KNOWN | _UNSUPPORTED

# Opcodes whose meaning here rests on their first operand (a view of it, its tuple's elements).
_FIRST_OPERAND = (
    _VIEWS - {"tuple", "after-all"}
    | {"while", "copy-start", "copy-done", "all-reduce-done", "async-update", "recv-done", "send"}
    | {"slice-start", "slice-done"}
    | _TUPLE_DONES
)

Tree = Any  # a tensor id (int), None (a token) or a tuple of trees

# The most instructions the builder reads, calls and loop bodies inlined (once per call
# site): past it a module is refused before any is read (a chain of computations each
# calling the next twice would otherwise inline exponentially many).
MAX_INLINED_INSTRUCTIONS = 10_000_000


def _check_call_graph(module: HloModule) -> None:
    """Refuse a computation that calls itself (directly or through others, by any called
    computation attribute), a module whose calls and loops, inlined, make more than
    :data:`MAX_INLINED_INSTRUCTIONS` instructions to read (:func:`_call_graph_sizes`), and
    what :func:`_check_called_computations` refuses."""
    if _call_graph_sizes(module)[0] > MAX_INLINED_INSTRUCTIONS:
        raise XlaFrontendError(
            f"module {module.name}: its calls and loop bodies, inlined, make more than "
            f"{MAX_INLINED_INSTRUCTIONS} instructions to read (the most this reader takes)"
        )
    _check_called_computations(module)


def _check_called_computations(module: HloModule) -> None:
    """Refuse, in every computation the entry reaches (fusion bodies, branches, reducers,
    which only the cost model reads, as well as the calls and loop bodies the builder
    runs), an operand not defined before its reader (:class:`XlaFrontendError`, as the
    builder words it) and an opcode that is no HLO opcode (:class:`UnsupportedHloError`;
    :data:`_HLO_OPCODES`). The entry itself is left to the builder."""
    seen = {module.entry.name}
    pending = [module.entry]
    while pending:
        comp = pending.pop()
        defined: set[str] = set()
        for ins in comp.instructions:
            if not comp.is_entry:
                for name in ins.operands:
                    if name not in defined:
                        raise XlaFrontendError(
                            f"module {module.name}: {ins.opcode} {ins.name}: operand %{name} "
                            f"is not defined before it in computation {comp.name}"
                        )
                if ins.opcode not in _HLO_OPCODES:
                    raise UnsupportedHloError(
                        f"module {module.name}: unsupported HLO opcode {ins.opcode!r} "
                        f"(instruction {ins.name})",
                        ins.opcode,
                    )
            defined.add(ins.name)
            for _, callee in module.callees(ins):
                if callee in module.computations and callee not in seen:
                    seen.add(callee)
                    pending.append(module.computations[callee])


def _is_sliced_prefetch(module: HloModule, ins: HloInstruction) -> bool:
    """Whether ``ins`` is a slice of a sliced prefetch as a dump file writes it: an
    ``async-start`` of one operand whose called computation's root is a ``slice`` of
    its parameter into a memory space other than 0 (``calls=%async_computation``, the
    long form of ``slice-start``, which the compiled module's text prints instead)."""
    if ins.opcode != "async-start" or len(ins.operands) != 1:
        return False
    try:
        called = module.computation(ins, "calls")
    except HloParseError:
        return False
    root = called.root
    if root.opcode != "slice" or isinstance(root.shape, tuple) or len(root.operands) != 1:
        return False
    source = called.by_name.get(root.operands[0])
    return (
        root.shape.memory_space != 0
        and source is not None
        and source.opcode == "parameter"
        and isinstance(ins.shape, tuple)
        and len(ins.shape) >= 2
        and not isinstance(ins.shape[1], tuple)
        and ins.shape[1].memory_space == root.shape.memory_space
    )


def _is_concat_bitcast(ins: HloInstruction) -> bool:
    """Whether ``ins`` is a ``ConcatBitcast`` custom call (what joins a sliced prefetch's slices)."""
    target = ins.attrs.get("custom_call_target", "").strip('"')
    return ins.opcode == "custom-call" and target == "ConcatBitcast"


def _joins_slices_in(module: HloModule, comp: HloComputation, ins: HloInstruction) -> bool:
    """Whether ``ins`` of ``comp`` is, read from the text alone, what
    :meth:`_Builder.joins_slices` finds as it runs: the ``ConcatBitcast`` joining the slices
    of one sliced prefetch, each operand the end (``slice-done``, or the ``async-done`` of
    a sliced prefetch's ``async-start``) of a slice of one source into one memory space."""
    if not _is_concat_bitcast(ins) or not ins.operands:
        return False
    prefetches = set()
    for name in ins.operands:
        done = comp.by_name.get(name)
        if done is None or done.opcode not in ("slice-done", "async-done") or not done.operands:
            return False
        start = comp.by_name.get(done.operands[0])
        if start is None or not start.operands:
            return False
        if start.opcode != "slice-start" and not _is_sliced_prefetch(module, start):
            return False
        shape = start.shape
        if not isinstance(shape, tuple) or len(shape) < 2 or isinstance(shape[1], tuple):
            return False
        prefetches.add((start.operands[0], shape[1].memory_space))
    return len(prefetches) == 1


def _runs_body(module: HloModule, caller: HloComputation, ins: HloInstruction) -> bool:
    """Whether the builder reads the body of ``while`` ``ins``: not where its trip count,
    stated or counted, is 0 (a count it refuses, or a loop too malformed to count, is left
    to it to name)."""
    try:
        stated = trip_count(module, caller, ins)
    except (HloParseError, KeyError, IndexError, TypeError, ValueError):
        return True
    return stated != 0


def _call_graph_sizes(module: HloModule) -> tuple[int, int]:
    """The instructions the builder reads in ``module``, and the program instructions it
    makes of them: calls and loop bodies inlined, once per call site (a loop's body once,
    whatever its trip count; none where it is 0), each at most
    :data:`MAX_INLINED_INSTRUCTIONS` + 1. Raises :class:`XlaFrontendError` for a
    computation that calls itself (directly or through others, by any called computation
    attribute). One pass over the computations the entry reaches (each once); names of
    computations the module lacks are passed over here (the builder names them where it
    reads them)."""
    cap = MAX_INLINED_INSTRUCTIONS
    inlined = {"call": ("to_apply",), "while": ("condition", "body")}
    size: dict[str, int] = {}  # inlined instructions of each computation done (at most cap + 1)
    made: dict[str, int] = {}  # the program instructions they make (at most cap + 1)
    in_progress: set[str] = set()

    def edges(comp: HloComputation) -> Iterator[tuple[HloInstruction, str, str, bool]]:
        for ins in comp.instructions:
            for key, callee in module.callees(ins):
                if callee in module.computations:
                    yield ins, key, callee, key in inlined.get(ins.opcode, ())

    stack = [(module.entry, edges(module.entry))]
    in_progress.add(module.entry.name)
    while stack:
        comp, pending = stack[-1]
        for _, _, callee, _ in pending:
            if callee in in_progress:
                raise XlaFrontendError(
                    f"module {module.name}: computation {callee} calls itself, directly or "
                    "through others"
                )
            if callee not in size:
                callee_comp = module.computations[callee]
                in_progress.add(callee)
                stack.append((callee_comp, edges(callee_comp)))
                break
        else:
            stack.pop()
            in_progress.discard(comp.name)
            total = len(comp.instructions)
            emitted = sum(
                1
                for ins in comp.instructions
                if ins.opcode not in _NO_INSTRUCTION
                and ins.opcode not in inlined
                and not _is_sliced_prefetch(module, ins)
                and not _joins_slices_in(module, comp, ins)
            )
            for ins, key, callee, counts in edges(comp):
                if not counts:
                    continue
                total = min(total + size[callee], cap + 1)
                if key != "body" or _runs_body(module, comp, ins):
                    emitted = min(emitted + made[callee], cap + 1)
            size[comp.name], made[comp.name] = total, emitted
    return size[module.entry.name], made[module.entry.name]


def _leaves(tree: Tree) -> list[int]:
    if tree is None:
        return []
    if isinstance(tree, int):
        return [tree]
    return [x for sub in tree for x in _leaves(sub)]


def _subtree(tree: Tree, index: Sequence[int]) -> Tree:
    for i in index:
        tree = tree[i]
    return tree


class _Placed(int):
    """A tensor id that also says where this reference to the tensor lives in XLA's
    module: the memory space of the instruction that produced it and, for the result of
    a ``copy-done``, the copy (an index into ``_Builder.copies``). Equal to, and used
    as, the plain id everywhere else."""

    space: int
    copy: int | None

    def __new__(cls, tensor: int, space: int, copy: int | None = None) -> _Placed:
        obj = super().__new__(cls, tensor)
        obj.space, obj.copy = space, copy
        return obj


def _ends_slice(started: Tree) -> bool:
    """Whether ``started`` (an ``async-done``'s operand) is the tuple of a slice of a sliced
    prefetch: its element 1 is a copy in flight, which only :meth:`_Builder.slice_start`
    makes (another asynchronous start's element 1 is the result it writes)."""
    if not isinstance(started, tuple) or len(started) < 2:
        return False
    dest = started[1]
    return isinstance(dest, _Placed) and dest.copy is not None


def _buffer_space(x: int) -> BufferSpace:
    return BufferSpace(getattr(x, "space", 0), getattr(x, "copy", None))


def _leaf_name(name: str, index: tuple[int, ...]) -> str:
    return f"{name}{{{','.join(map(str, index))}}}" if index else name


@dataclass
class _Tensor:
    name: str
    size: int
    def_time: int
    shape: str
    reads: list[int]
    min_end: int = -1  # live at least until here (loop carry)
    live_out: bool = False


class _Builder:
    """Walks the entry computation in schedule order, flattening calls and loops."""

    def __init__(self, module: HloModule, partial_bytes: bool = False):
        self.module = module
        self.partial_bytes = partial_bytes
        self.costs = CostModel(module)
        self.instrs: list[ProgramInstruction] = []
        self.tensors: list[_Tensor] = []
        self.loops: list[ProgramLoop] = []
        self.parent: dict[int, int] = {}  # union-find over tensors
        self.entry_params: dict[int, Tree] = {}
        self.notes: list[str] = []
        self.spaces: list[tuple[BufferSpace, ...]] = []  # per instruction: operands, then outputs
        # [tensor, source space, dest space, start step, done step]
        self.copies: list[list[int]] = []
        # (tensor, dest space) -> its sliced prefetch's copy, until the slices are joined
        self.open_slices: dict[tuple[int, int], int] = {}
        # copy (an index into copies) -> the copy-start that began it, the copy-done that ended it
        self.copy_starts: dict[int, str] = {}
        self.copy_dones: dict[int, str] = {}
        # (old value, new value, step): the new value is written into the old one's storage
        # (a loop-carried value, an in-place update) at or before step; joined in finish()
        # unless the old value is read after step or is a result (XLA copied it: a copy
        # XLA's memory-space assignment made asynchronous, stripped as its prefetches are)
        self.overwrites: list[tuple[int, int, int]] = []
        self.current: HloInstruction | None = None  # the instruction being read, for errors

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def find(self, a: int) -> int:
        while self.parent.get(a, a) != a:
            a = self.parent[a]
        return a

    def new_tree(
        self, ins: HloInstruction, shape: Shape, def_time: int, index: tuple[int, ...] = ()
    ) -> Tree:
        if isinstance(shape, tuple):
            return tuple(self.new_tree(ins, s, def_time, index + (i,)) for i, s in enumerate(shape))
        if shape.is_token:
            return None
        self.tensors.append(
            _Tensor(_leaf_name(ins.name, index), shape.nbytes, def_time, str(shape), [])
        )
        tensor = len(self.tensors) - 1
        return _Placed(tensor, shape.memory_space) if shape.memory_space else tensor

    def run(self, comp: HloComputation, params: Sequence[Tree], count: int) -> Tree:
        env: dict[str, Tree] = {}
        for ins in comp.instructions:
            self.current = ins
            op = ins.opcode
            args = self.operand_trees(ins, comp, env)
            if op in _FIRST_OPERAND and not args:
                raise self.malformed(ins, "has no operand")
            if op == "parameter":
                number = self.parameter_number(ins)
                if comp.is_entry:
                    if number in self.entry_params:
                        raise self.malformed(
                            ins, f"parameter {number} of the entry computation is defined twice"
                        )
                    env[ins.name] = self.entry_params[number] = self.new_tree(ins, ins.shape, -1)
                elif number >= len(params):
                    raise self.malformed(
                        ins,
                        f"reads parameter {number} of computation {comp.name}, which is "
                        f"given {len(params)}",
                    )
                else:
                    env[ins.name] = params[number]
            elif op in _INPUTS:
                env[ins.name] = self.new_tree(ins, ins.shape, -1)
            elif op == "tuple":
                env[ins.name] = tuple(args)
            elif op == "get-tuple-element":
                env[ins.name] = self.element(ins, args[0], self.tuple_index(ins))
            elif op == "after-all":
                env[ins.name] = None
            elif op in _VIEWS:
                env[ins.name] = args[0]
            elif op == "call":
                env[ins.name] = self.run(self.module.computation(ins, "to_apply"), args, count)
            elif op == "while":
                env[ins.name] = self.run_while(ins, comp, args[0], count)
            elif op == "copy-start":
                env[ins.name] = self.copy_start(ins, args[0])
            elif op == "copy-done":
                env[ins.name] = self.copy_done(ins, args[0], element=0)
            elif op == "slice-start" or _is_sliced_prefetch(self.module, ins):
                env[ins.name] = self.slice_start(ins, args[0])
            elif op == "slice-done" or (op == "async-done" and _ends_slice(args[0])):
                env[ins.name] = self.copy_done(ins, args[0], element=1)
            elif op in ("all-reduce-done", "async-update") or self.joins_slices(ins, args):
                env[ins.name] = args[0]
            elif op in _TUPLE_DONES:
                env[ins.name] = self.element(ins, args[0], 1)
            elif op == "send-done":
                env[ins.name] = None
            elif op == "recv-done":
                env[ins.name] = (self.element(ins, args[0], 0), None)
            elif op in _TUPLE_STARTS:
                env[ins.name] = self.emit_start(ins, comp, args, count)
            elif op == "send":
                self.emit(ins, comp, args, count, out_index=None)
                env[ins.name] = (args[0], None, None)
            elif op == "recv":
                env[ins.name] = (self.emit(ins, comp, args, count, out_index=(0,)), None, None)
            elif op in _UNSUPPORTED or op not in _KNOWN:
                raise UnsupportedHloError(
                    f"module {self.module.name}: unsupported HLO opcode {op!r} (instruction {ins.name})",
                    op,
                )
            else:
                env[ins.name] = self.emit(ins, comp, args, count)
        if comp.is_entry and max(self.entry_params, default=-1) >= len(self.entry_params):
            n = len(self.entry_params)
            missing = min(set(range(n)) - set(self.entry_params))
            raise XlaFrontendError(
                f"module {self.module.name}: the entry computation has {n} parameters, none "
                f"numbered {missing} (they are numbered 0 to {n - 1})"
            )
        return env[comp.root.name]

    def malformed(self, ins: HloInstruction, problem: str) -> XlaFrontendError:
        """The one-line error for instruction ``ins`` of the module: ``problem``."""
        return XlaFrontendError(f"module {self.module.name}: {ins.opcode} {ins.name}: {problem}")

    def operand_trees(
        self, ins: HloInstruction, comp: HloComputation, env: dict[str, Tree]
    ) -> list[Tree]:
        """The trees of ``ins``'s operands, each defined earlier in ``comp``."""
        for name in ins.operands:
            if name not in env:
                raise self.malformed(
                    ins, f"operand %{name} is not defined before it in computation {comp.name}"
                )
        return [env[name] for name in ins.operands]

    def parameter_number(self, ins: HloInstruction) -> int:
        if not re.fullmatch(r"\s*[0-9]+\s*", ins.literal):
            raise self.malformed(ins, f"parameter number {ins.literal!r} is not a whole number")
        return int(ins.literal)

    def tuple_index(self, ins: HloInstruction) -> int:
        raw = ins.attrs.get("index")
        if raw is None or not re.fullmatch(r"[0-9]+", raw):
            raise self.malformed(ins, f"index {raw!r} is not a whole number")
        return int(raw)

    def element(self, ins: HloInstruction, tree: Tree, index: int) -> Tree:
        """Element ``index`` of the tuple tree of ``ins``'s first operand."""
        if not isinstance(tree, tuple):
            raise self.malformed(ins, f"operand %{ins.operands[0]} is not a tuple")
        if index >= len(tree):
            raise self.malformed(
                ins,
                f"tuple index {index} is out of range (operand %{ins.operands[0]} has "
                f"{len(tree)} elements)",
            )
        return tree[index]

    def run_while(
        self, ins: HloInstruction, caller: HloComputation, init: Tree, count: int
    ) -> Tree:
        """The loop flattened (module docstring): its trip count as XLA states it, or else as
        its counter gives it (:func:`~mallocgame.frontends.hlo_cost.trip_count`)."""
        stated = trip_count(self.module, caller, ins)
        if stated == 0:  # the condition runs once, the body never: the result is the operand
            self.notes.append(f"while {ins.name}: trip count 0, its body never runs")
            self.run(self.module.computation(ins, "condition"), [init], count)
            return init
        trip = 1 if stated is None else stated
        if stated is None:
            self.notes.append(f"while {ins.name}: trip count unknown, counted once")
        if count * trip > MAX_COUNT:
            raise self.malformed(
                ins,
                f"trip count {trip} inside loops run {count} times makes {count * trip} "
                "executions, more than 2**31-1 (the largest count of SPEC section 1)",
            )
        first = len(self.instrs)
        self.run(self.module.computation(ins, "condition"), [init], count * trip)
        result = self.run(self.module.computation(ins, "body"), [init], count * trip)
        last = len(self.instrs) - 1
        if last >= first:
            self.loops.append(ProgramLoop(first, last, trip))
        carried, returned = _leaves(init), _leaves(result)
        if len(carried) != len(returned):
            raise self.malformed(
                ins,
                f"its operand has {len(carried)} array leaves, its body's result {len(returned)}",
            )
        for x, r in zip(carried, returned):
            if x != r:
                if self.tensors[x].size != self.tensors[r].size:
                    tx, tr = self.tensors[x], self.tensors[r]
                    raise self.malformed(
                        ins,
                        f"its body returns %{tr.name} ({tr.size} bytes) where it is given "
                        f"%{tx.name} ({tx.size} bytes)",
                    )
                self.overwrites.append((x, r, last))
                self.tensors[r].min_end = max(self.tensors[r].min_end, last)
        return result

    def copy_start(self, ins: HloInstruction, source: Tree) -> Tree:
        """XLA's asynchronous copy of ``source`` between memory spaces: no instruction.

        Its tuple is (the destination: the same tensor, placed where the copy puts it;
        the source; a synchronization scalar).
        """
        shape = ins.shape
        if not isinstance(source, int):
            what = "a tuple" if isinstance(source, tuple) else "a token"
            raise UnsupportedHloError(
                f"module {self.module.name}: copy-start {ins.name} copies {what}", ins.opcode
            )
        if not (isinstance(shape, tuple) and len(shape) >= 2):
            raise self.malformed(
                ins,
                f"its shape {shape} is not a tuple (the copy, its source, a context), as a "
                "copy-start returns",
            )
        dest_space = shape[0].memory_space if not isinstance(shape[0], tuple) else 0
        source_space = getattr(source, "space", 0)
        self.copies.append(
            [int(source), source_space, dest_space, len(self.instrs), len(self.instrs)]
        )
        self.copy_starts[len(self.copies) - 1] = ins.name
        return (_Placed(int(source), dest_space, len(self.copies) - 1), source) + (None,) * (
            len(shape) - 2
        )

    def slice_start(self, ins: HloInstruction, source: Tree) -> Tree:
        """One slice of a sliced prefetch (``slice-start``): its tuple is ((the source), the
        slice, placed where the prefetch puts it; a synchronization scalar). The slices of
        one tensor into one space, up to the ``ConcatBitcast`` that joins them, are one
        copy of the whole tensor from the first ``slice-start`` to the last ``slice-done``
        (each slice's reader reads the tensor)."""
        shape = ins.shape
        if not (isinstance(shape, tuple) and len(shape) >= 2 and isinstance(source, int)):
            raise UnsupportedHloError(
                f"module {self.module.name}: slice-start {ins.name} slices a tuple", ins.opcode
            )
        dest_space = shape[1].memory_space if not isinstance(shape[1], tuple) else 0
        key = (int(source), dest_space)
        if key not in self.open_slices:
            source_space = getattr(source, "space", 0)
            self.copies.append(
                [int(source), source_space, dest_space, len(self.instrs), len(self.instrs)]
            )
            self.open_slices[key] = len(self.copies) - 1
        placed = _Placed(int(source), dest_space, self.open_slices[key])
        return ((source,), placed) + (None,) * (len(shape) - 2)

    def joins_slices(self, ins: HloInstruction, args: list[Tree]) -> bool:
        """Whether ``ins`` is the ``ConcatBitcast`` custom call joining the slices of one
        sliced prefetch (its result is then the prefetched tensor: no instruction)."""
        copies = {getattr(a, "copy", None) for a in args}
        if not _is_concat_bitcast(ins) or len(copies) != 1 or None in copies:
            return False
        first = args[0]
        self.open_slices.pop((int(first), first.space), None)
        return True

    def copy_done(self, ins: HloInstruction, started: Tree, element: int) -> Tree:
        """The end of a ``copy-start`` (its result is ``element`` 0) or a ``slice-start``
        (element 1; also an ``async-done`` of a sliced prefetch's ``async-start``): the copy
        ends here."""
        dest = started[element] if isinstance(started, tuple) and len(started) > element else None
        if not isinstance(dest, _Placed) or dest.copy is None:
            start = ins.opcode.replace("done", "start")
            raise XlaFrontendError(
                f"module {self.module.name}: {ins.opcode} {ins.name} does not end a {start}"
            )
        if element == 0:  # a copy-start's copy: one copy-done ends it
            if dest.copy in self.copy_dones:
                raise self.malformed(
                    ins,
                    f"ends copy-start {self.copy_starts[dest.copy]}, which copy-done "
                    f"{self.copy_dones[dest.copy]} ends already",
                )
            self.copy_dones[dest.copy] = ins.name
        self.copies[dest.copy][4] = len(self.instrs)
        return dest

    def emit_start(
        self, ins: HloInstruction, comp: HloComputation, args: list[Tree], count: int
    ) -> Tree:
        """An asynchronous start whose tuple echoes its operands (element 0), holds its
        result (element 1) and synchronization scalars: one instruction writing the result."""
        shape = ins.shape
        if not isinstance(shape, tuple) or len(shape) < 2:
            return self.emit(ins, comp, args, count)
        echo = tuple(args) if isinstance(shape[0], tuple) else args[0]
        result = self.emit(ins, comp, args, count, out_index=(1,))
        return (echo, result) + (None,) * (len(shape) - 2)

    def emit(
        self,
        ins: HloInstruction,
        comp: HloComputation,
        args: list[Tree],
        count: int,
        out_index: tuple[int, ...] | None = (),
    ) -> Tree:
        """One program instruction reading the leaves of ``args`` and writing the leaves
        of ``ins``'s shape at ``out_index`` (its whole shape by default; none if ``None``);
        returns the tree of the tensors written."""
        t = len(self.instrs)
        operands: list[int] = []
        operand_bytes: list[int] = []
        spaces: list[BufferSpace] = []
        for k, tree in enumerate(args):
            for x in _leaves(tree):
                if ins.opcode == "conditional" and x in operands:
                    continue
                full = self.tensors[x].size
                nb = full
                if self.partial_bytes and isinstance(tree, int):
                    nb = self.costs.operand_bytes(ins, comp, k, full)
                operands.append(int(x))
                operand_bytes.append(nb)
                spaces.append(_buffer_space(x))
        out_shape: Shape | None = None  # the shape at out_index (None: no output)
        out_tree: Tree = None
        if out_index is not None:
            out_shape = _subtree(ins.shape, out_index)
            if out_shape is not None:
                out_tree = self.new_tree(ins, out_shape, t, out_index)
        outputs, output_bytes = [], []
        for index, _ in shape_leaves(out_shape) if out_shape is not None else ():
            x = _subtree(out_tree, index)
            if x is not None:
                outputs.append(int(x))
                spaces.append(_buffer_space(x))
                full = self.tensors[x].size
                if self.partial_bytes and not out_index:
                    output_bytes.append(self.costs.output_bytes(ins, comp, index, full))
                else:
                    output_bytes.append(full)
        flops, trans = self.costs.cost(ins, comp)
        # the pairs' output indices are into the whole shape; the output emitted is the
        # part at out_index (a tuple-shaped start's element 1): a pair elsewhere in the shape
        # makes no buffer here
        emitted = () if out_index is None else out_index
        for opnum, op_index, result_index in (
            self.costs.in_place_pairs(ins) if out_index is not None else ()
        ):
            if result_index[: len(emitted)] != emitted:
                continue
            a = _subtree(args[opnum], op_index)
            b = _subtree(out_tree, result_index[len(emitted) :])
            if isinstance(a, int) and isinstance(b, int):
                ta, tb = self.tensors[a], self.tensors[b]
                if ta.size != tb.size:
                    raise self.malformed(
                        ins,
                        f"writes its output %{tb.name} ({tb.size} bytes) in place of its "
                        f"operand %{ta.name} ({ta.size} bytes)",
                    )
                self.overwrites.append((a, b, t))
        for x in operands:
            self.tensors[x].reads.append(t)
        self.spaces.append(tuple(spaces))
        self.instrs.append(
            ProgramInstruction(
                name=ins.name,
                opcode=ins.opcode,
                operands=tuple(operands),
                outputs=tuple(outputs),
                operand_bytes=tuple(operand_bytes),
                output_bytes=tuple(output_bytes),
                flops=float(flops),
                transcendentals=float(trans),
                count=count,
            )
        )
        return out_tree

    def join_overwrites(self) -> None:
        """One storage for each value and the value written over it (``overwrites``), except
        where the old value is still read after it is overwritten, or is a result: then XLA
        kept it apart, with a copy its memory-space assignment made an asynchronous
        ``copy-start`` / ``copy-done`` (a loop started from a copy of a parameter read again
        after the loop), and the two are separate storages (noted)."""
        kept_apart = []
        for old, new, step in self.overwrites:
            x = self.tensors[old]
            if x.live_out or any(r > step for r in x.reads):
                kept_apart.append(x.name)
            else:
                self.union(old, new)
        if kept_apart:
            self.notes.append(
                "read after being overwritten in place, so copied first by XLA and kept apart: "
                + ", ".join(sorted(set(kept_apart)))
            )

    def finish(self, name: str, source: dict[str, Any]) -> Program:
        _check_call_graph(self.module)
        root = self.run(self.module.entry, [], 1)
        self.current = None
        for copy, start in self.copy_starts.items():
            if copy not in self.copy_dones:
                raise XlaFrontendError(
                    f"module {self.module.name}: copy-start {start}: no copy-done ends it"
                )
        num_t = len(self.instrs)
        if num_t == 0:
            raise XlaFrontendError(
                f"module {self.module.name}: no instruction moves data (nothing to decide)"
            )
        for x in _leaves(root):
            self.tensors[x].live_out = True
        self.join_overwrites()
        outputs_aliased: set[tuple[int, ...]] = set()
        params_aliased: set[tuple[int, tuple[int, ...]]] = set()
        for out_index, param, param_index, _ in parse_alias_list(
            self.module.attrs.get("input_output_alias", "")
        ):
            if param not in self.entry_params:
                raise XlaFrontendError(
                    f"module {self.module.name}: input_output_alias names parameter {param}, "
                    "which the entry computation does not have"
                )
            a = self.alias_end(self.entry_params[param], param_index, f"parameter {param}")
            b = self.alias_end(root, out_index, "the output")
            at_param = f"parameter {param} at {{{','.join(map(str, param_index))}}}"
            at_out = f"the output at {{{','.join(map(str, out_index))}}}"
            twice = (out_index in outputs_aliased and at_out) or (
                (param, param_index) in params_aliased and at_param
            )
            if twice:
                raise XlaFrontendError(
                    f"module {self.module.name}: input_output_alias aliases {twice} twice"
                )
            outputs_aliased.add(out_index)
            params_aliased.add((param, param_index))
            if isinstance(a, int) and isinstance(b, int):
                if self.tensors[a].size != self.tensors[b].size:
                    raise XlaFrontendError(
                        f"module {self.module.name}: input_output_alias aliases {at_param} "
                        f"({self.tensors[a].size} bytes) with {at_out} "
                        f"({self.tensors[b].size} bytes)"
                    )
                self.union(a, b)
        tensors = []
        for i, tensor in enumerate(self.tensors):
            end = max([tensor.def_time, tensor.min_end] + tensor.reads)
            for lp in self.loops:
                if not lp.first <= tensor.def_time <= lp.last and any(
                    lp.first <= r <= lp.last for r in tensor.reads
                ):
                    end = max(end, lp.last)
            if tensor.live_out:
                end = num_t - 1
            tensors.append(
                ProgramTensor(
                    i, tensor.name, tensor.size, tensor.def_time, end, tensor.live_out, tensor.shape
                )
            )
        buffers: dict[int, list[tuple[int, int]]] = {}
        for t, pi in enumerate(self.instrs):
            for p, x in enumerate(pi.operands + pi.outputs):
                buffers.setdefault(self.find(x), []).append((t, p))
        groups = tuple(
            tuple(sorted(g)) for g in buffers.values() if len(g) > 1 and self._aliased(g)
        )
        if self.costs.unknown_custom_calls:
            self.notes.append(
                "custom calls without flops: " + ", ".join(sorted(self.costs.unknown_custom_calls))
            )
        if self.copies:
            self.notes.append(
                f"XLA's memory-space assignment stripped: {len(self.copies)} copy-start/copy-done pairs"
            )
        source = dict(source, notes="; ".join(self.notes))
        program = Program(
            name=name,
            instructions=tuple(self.instrs),
            tensors=tuple(tensors),
            alias_groups=tuple(sorted(groups)),
            loops=tuple(sorted(self.loops, key=lambda lp: (lp.first, -lp.last))),
            source=source,
        )
        validate_program(program)
        self.placement = XlaPlacement(
            program=name,
            buffers=tuple(self.spaces),
            copies=tuple(XlaCopy(*c) for c in self.copies),
            structure_sha256=program_structure_sha256(program),
        )
        return program

    def alias_end(self, tree: Tree, index: tuple[int, ...], what: str) -> Tree:
        """The subtree of ``tree`` at shape ``index`` that ``input_output_alias`` names."""
        for k, i in enumerate(index):
            if not isinstance(tree, tuple) or i >= len(tree):
                shown = ",".join(map(str, index[: k + 1]))
                raise XlaFrontendError(
                    f"module {self.module.name}: input_output_alias names {what} at {{{shown}}}, "
                    "which it does not have"
                )
            tree = tree[i]
        return tree

    def _aliased(self, group: list[tuple[int, int]]) -> bool:
        """A union class is an alias group only if it joins more than one tensor."""
        xs = {(self.instrs[t].operands + self.instrs[t].outputs)[p] for t, p in group}
        return len(xs) > 1


def extract_module(
    text: str,
    *,
    name: str | None = None,
    partial_bytes: bool = False,
    source: dict[str, Any] | None = None,
) -> Program:
    """Build a program from the text of one scheduled HLO module (see :func:`extract_dump`)."""
    return extract_module_with_placement(
        text, name=name, partial_bytes=partial_bytes, source=source
    )[0]


@dataclass(frozen=True)
class EntryInterface:
    """The entry computation's interface as the program's tensor ids (the ids
    :func:`extract_module` gives the same module): ``params`` maps each parameter number to
    its tensor id (a nested tuple of ids for a tuple-shaped parameter, ``None`` for a
    token); ``results`` are the ids of the root's array leaves, in order."""

    params: dict[int, Tree]
    results: tuple[int, ...]


def entry_interface(module: HloModule) -> EntryInterface:
    """The :class:`EntryInterface` of a parsed, scheduled ``module`` (for code that binds a
    program's inputs and results to a function's arguments and outputs)."""
    builder = _Builder(module)
    with _malformed_module(module, builder):
        _check_call_graph(module)
        root = builder.run(module.entry, [], 1)
    return EntryInterface(params=dict(builder.entry_params), results=tuple(_leaves(root)))


@contextlib.contextmanager
def _malformed_module(module: HloModule, builder: _Builder) -> Iterator[None]:
    """A malformed module's error while ``builder`` reads it, as one
    :class:`XlaFrontendError` naming the instruction it was at."""
    try:
        yield
    except HloParseError as exc:  # a malformed attribute (a trip count, a called computation)
        raise XlaFrontendError(f"module {module.name}: {exc}") from None
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        ins = builder.current
        at = "" if ins is None else f" at {ins.opcode} {ins.name}"
        raise XlaFrontendError(
            f"module {module.name}: malformed HLO{at} ({type(exc).__name__}: {exc})"
        ) from None
    except RecursionError:  # no cycle (_check_call_graph): nesting past Python's stack
        ins = builder.current
        at = "" if ins is None else f" at {ins.opcode} {ins.name}"
        raise XlaFrontendError(
            f"module {module.name}{at}: calls or tuples nest deeper than this reader follows "
            f"(Python's recursion limit, {sys.getrecursionlimit()})"
        ) from None


def extract_module_with_placement(
    text: str,
    *,
    name: str | None = None,
    partial_bytes: bool = False,
    source: dict[str, Any] | None = None,
    where: str = "HLO",
) -> tuple[Program, XlaPlacement]:
    """:func:`extract_module`, and XLA's own memory-space decisions in the module (see
    :mod:`mallocgame.frontends.xla_placement`; without them every buffer is in space 0).
    ``where`` names the text in errors (a file's path; ``HLO`` by default)."""
    try:
        module = parse_module(text, where=where)
    except HloParseError as exc:
        raise DumpError(str(exc)) from None
    except RecursionError:  # a shape of tuples nested past Python's stack
        raise DumpError(f"{where}: a shape nests tuples too deep to read") from None
    if not module.is_scheduled:
        raise DumpError(
            f"module {module.name} is not scheduled (no is_scheduled=true): dump it after optimizations"
        )
    src = {"frontend": "xla", "module": module.name, "jax": _jax_version()}
    src.update(source or {})
    src["bytes"] = "partial" if partial_bytes else "shape"
    builder = _Builder(module, partial_bytes)
    with _malformed_module(module, builder):
        program = builder.finish(name or module.name, src)
    return program, builder.placement


# ---------------------------------------------------------------------------------------
# Dump directories.

# module_0008.jit_mm.cpu_after_optimizations.txt, module_0008.jit_mm.sm_9.0_gpu_after_optimizations.txt,
# module_0003.SyncTensorsGraph.4.after_optimizations.txt (TPU).
_FILE_RE = re.compile(
    r"^(?P<prefix>(?:module_(?P<id>\d+)\.)?(?P<name>.+?))\.(?:(?P<backend>(?:sm_[\d.]+_)?[a-z0-9]+)_)?"
    r"after_optimizations\.txt$"
)


@dataclass(frozen=True)
class DumpModule:
    """One optimized module of a dump: ``module_0008.jit_mm`` (prefix), ``jit_mm`` (name).

    Its file is read where :attr:`unreadable` is asked, and parsed where
    :attr:`num_instructions` is (to rank several modules, or to list them): picking a
    module by name or the dump's only one parses nothing but the module extracted."""

    path: Path
    prefix: str
    name: str
    id: str

    @functools.cached_property
    def unreadable(self) -> str:
        """Why its file cannot be read (``"not HLO text (not UTF-8)"``), or ``""``."""
        try:
            _read_module_text(self.path)
        except DumpError as exc:
            return str(exc).removeprefix(f"{self.path}: ")
        return ""

    @functools.cached_property
    def num_instructions(self) -> int:
        """The program instructions it makes (calls and loop bodies inlined); 0 where its
        file cannot be read."""
        return 0 if self.unreadable else _module_size(_read_module_text(self.path))

    @property
    def trivial(self) -> bool:
        """A one-instruction helper (JAX's jit_convert_element_type, jit_broadcast_in_dim, ...)."""
        return self.num_instructions <= 1

    def describe(self) -> str:
        if self.unreadable:
            return f"{self.prefix} (unreadable: {self.unreadable})"
        return f"{self.prefix} ({self.num_instructions} instructions{', trivial' if self.trivial else ''})"

    def check_readable(self) -> DumpModule:
        """This module; :class:`DumpError` (its file and why) if its file cannot be read."""
        if self.unreadable:
            raise DumpError(f"{self.path}: {self.unreadable}")
        return self


def _read_module_text(path: Path) -> str:
    """The text of a module file; :class:`DumpError` naming it where it cannot be read or
    is not UTF-8."""
    try:
        return path.read_text()
    except OSError as exc:
        raise DumpError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise DumpError(f"{path}: not HLO text (not UTF-8)") from None


def _module_size(text: str) -> int:
    """The program instructions the builder makes of the module ``text``, its calls and
    loop bodies inlined (:func:`_call_graph_sizes`); for a module it cannot read (whose
    extraction names what is wrong), the lines of its entry computation that would make
    one."""
    try:
        return _call_graph_sizes(parse_module(text))[1]
    except (HloParseError, XlaFrontendError, RecursionError):
        pass
    entry = re.search(r"^ENTRY .*?^\}", text, re.M | re.S)
    body = entry.group(0).splitlines()[1:-1] if entry else []
    return sum(
        1
        for line in body
        if (om := re.search(r"\s([a-z][a-z0-9\-]*)\(", line.split("=", 1)[-1]))
        and om.group(1) not in _NO_INSTRUCTION
    )


def list_modules(dump_dir: str | os.PathLike[str]) -> list[DumpModule]:
    """The optimized modules of an XLA dump directory, by module id, each with the number
    of program instructions it makes (calls and loop bodies inlined: a training step
    written as one loop counts its body; counted where asked, :class:`DumpModule`), by
    which ``largest`` ranks them. A module whose
    file cannot be read (not UTF-8, unreadable) is listed with why (``unreadable``): it is
    refused only where it is the module picked, and never picked as the largest."""
    root = Path(dump_dir)
    if not root.is_dir():
        raise DumpError(f"{root}: not a directory (expected an XLA dump made with --xla_dump_to)")
    found = []
    for path in sorted(root.iterdir()):
        m = _FILE_RE.match(path.name)
        if m and path.is_file():
            found.append(DumpModule(path, m.group("prefix"), m.group("name"), m.group("id") or ""))
    return found


def _select(
    mods: list[DumpModule], module: str | None, where: str, auto: bool = False
) -> DumpModule:
    if not mods:
        raise DumpError(
            f"{where}: no scheduled module (*_after_optimizations.txt); dump with "
            "XLA_FLAGS='--xla_dump_to=DIR --xla_dump_hlo_as_text'"
        )
    matches = mods
    if module is not None:
        keys = lambda m: {m.name, m.prefix, m.path.name, m.id, f"module_{m.id}"}  # noqa: E731
        matches = [m for m in mods if module in keys(m)] or [m for m in mods if module in m.prefix]
        if not matches:
            listing = "; ".join(m.describe() for m in mods)
            raise DumpError(f"{where}: no module matches {module!r}; modules: {listing}")
    if len(matches) == 1:
        return matches[0].check_readable()
    readable = [m for m in matches if not m.unreadable]
    nontrivial = [m for m in readable if not m.trivial]
    if module is not None and len(nontrivial) == 1:
        return nontrivial[0]
    if auto:
        if not readable:
            return matches[0].check_readable()
        return max(nontrivial or readable, key=lambda m: (m.num_instructions, m.id))
    what = f"match {module!r}" if module is not None else "are in the dump"
    raise AmbiguousModuleError(
        f"{where}: {len(matches)} modules {what}; pick one with module=...: "
        + "; ".join(m.describe() for m in matches),
        [m.prefix for m in matches],
    )


def extract_dump(
    dump_dir: str | os.PathLike[str],
    *,
    module: str | None = None,
    name: str | None = None,
    partial_bytes: bool = False,
    largest: bool = False,
) -> Program:
    """Extract the program of one scheduled module of an XLA dump directory.

    ``module`` picks a module by name (``jit_mm``), prefix (``module_0008.jit_mm``), id
    (``0008``) or a substring of the prefix; where several match and exactly one is
    non-trivial (more than one instruction), that one. Without ``module`` the dump
    must hold a single module, or with ``largest=True`` the non-trivial module that
    makes the most program instructions, calls and loop bodies inlined, is taken (a
    training script's step, a loop's body counted; :func:`list_modules`); a module whose
    file cannot be read is refused (:class:`DumpError`) only where it is the one picked.
    ``dump_dir`` may also be the module's ``*_after_optimizations.txt`` file itself. ``name`` names
    the program (default: the module's name).

    Bytes: every operand and output moves its tensor's full size (shape bytes), so
    each buffer is as large as its tensor. ``partial_bytes=True`` counts instead what
    the instruction really touches (a fusion reading a parameter only through
    slices reads the slices; an in-place update reads nothing of the updated operand
    and writes only the update; see :mod:`mallocgame.frontends.hlo_cost`).
    """
    program, _ = _extract(
        dump_dir, module=module, name=name, partial_bytes=partial_bytes, auto=largest
    )
    return program


def extract_dump_with_placement(
    dump_dir: str | os.PathLike[str],
    *,
    module: str | None = None,
    name: str | None = None,
    partial_bytes: bool = False,
    largest: bool = False,
) -> tuple[Program, XlaPlacement]:
    """:func:`extract_dump`, and XLA's own memory-space decisions in the module (a TPU or
    GPU module's ``S(n)`` layouts and ``copy-start`` / ``copy-done`` pairs), for
    :func:`~mallocgame.frontends.xla_placement.placement_solution`."""
    return _extract(dump_dir, module=module, name=name, partial_bytes=partial_bytes, auto=largest)


def _extract(
    dump_dir: Any,
    *,
    module: str | None,
    name: str | None,
    partial_bytes: bool = False,
    auto: bool = False,
) -> tuple[Program, XlaPlacement]:
    path = Path(dump_dir)
    if path.is_file():
        chosen_path, prefix = path, path.name
    else:
        chosen = _select(list_modules(path), module, str(path), auto=auto)
        chosen_path, prefix = chosen.path, chosen.prefix
    text = _read_module_text(chosen_path)
    return extract_module_with_placement(
        text,
        name=name,
        partial_bytes=partial_bytes,
        source={"dump_module": prefix},
        where=str(chosen_path),
    )


# ---------------------------------------------------------------------------------------
# JAX functions.


def _jax_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("jax")
    except Exception:
        return None


@contextlib.contextmanager
def no_persistent_cache(jax: Any) -> Iterator[None]:
    """JAX's persistent compilation cache off meanwhile: a hit would skip XLA, so it would
    write no dump and compile nothing anew. JAX decides once a process whether the cache is
    used, so the decision is reset on the way in and out (``reset_cache``)."""
    try:
        from jax.experimental.compilation_cache import compilation_cache

        old = jax.config.jax_enable_compilation_cache
    except (ImportError, AttributeError):
        yield
        return
    jax.config.update("jax_enable_compilation_cache", False)
    compilation_cache.reset_cache()
    try:
        yield
    finally:
        jax.config.update("jax_enable_compilation_cache", old)
        compilation_cache.reset_cache()


def dump_jax(
    fn: Callable[..., Any],
    *example_args: Any,
    dump_dir: str | os.PathLike[str],
    name: str | None = None,
    donate_argnums: int | Sequence[int] = (),
    static_argnums: int | Sequence[int] = (),
) -> str:
    """Compile ``fn`` for the CPU with XLA (``jax.jit``), dumping into ``dump_dir``.

    Returns the HLO module's name (e.g. ``jit_fn``). The dump is requested through
    the compile options ``xla_dump_to`` / ``xla_dump_hlo_as_text``, so neither
    ``XLA_FLAGS`` nor the process's backend is touched; the persistent compilation
    cache is off meanwhile (a cache hit would skip XLA and write nothing). A function
    that JAX cannot trace, lower or compile raises :class:`CompileError`.
    """
    try:
        import jax
    except ImportError:
        raise XlaFrontendError(
            "the XLA frontend needs JAX to compile functions (pip install jax)"
        ) from None
    label = name or getattr(fn, "__name__", "function")
    options: dict[str, str | bool] = {
        "xla_dump_to": os.fspath(dump_dir),
        "xla_dump_hlo_as_text": True,
    }
    try:
        with jax.default_device(jax.devices("cpu")[0]), no_persistent_cache(jax):
            jitted = jax.jit(fn, donate_argnums=donate_argnums, static_argnums=static_argnums)
            compiled = jitted.lower(*example_args).compile(compiler_options=options)
            text = compiled.as_text()
            assert text is not None  # a CPU executable always has its HLO text
            return text.split(",", 1)[0].replace("HloModule", "").strip()
    except MallocGameError:
        raise
    except Exception as exc:
        lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
        reason = lines[0] if lines else ""
        raise CompileError(
            f"{label}: JAX could not compile it: {type(exc).__name__}: {reason}"
        ) from None


def extract_jax(
    fn: Callable[..., Any],
    *example_args: Any,
    name: str | None = None,
    donate_argnums: int | Sequence[int] = (),
    static_argnums: int | Sequence[int] = (),
    partial_bytes: bool = False,
) -> Program:
    """Compile ``fn`` for the CPU with XLA and extract its scheduled module (see :func:`dump_jax`).

    ``example_args`` are arrays or ``jax.ShapeDtypeStruct`` s (pytrees of them), or
    the values of ``static_argnums``. Donated arguments become ``input_output_alias``
    entries, hence alias groups. ``name`` names the program (default: the module's
    name, ``jit_<function name>``); ``partial_bytes`` as in :func:`extract_dump`.
    """
    with tempfile.TemporaryDirectory(prefix="mallocgame-xla-") as tmp:
        module = dump_jax(
            fn,
            *example_args,
            dump_dir=tmp,
            name=name,
            donate_argnums=donate_argnums,
            static_argnums=static_argnums,
        )
        if not list_modules(tmp):
            raise DumpError(
                f"{name or module}: XLA wrote no dump (was the compilation served from a cache?)"
            )
        program = _extract(
            tmp, module=module or None, name=name, partial_bytes=partial_bytes, auto=True
        )[0]
    # the dump directory was this call's own: the module file's number only counts what the
    # process compiled before, and would make the same function's instance hash differ
    dumped = re.sub(r"^module_\d+\.", "", str(program.source.get("dump_module", "")))
    return replace(program, source={**program.source, "dump_module": dumped})
