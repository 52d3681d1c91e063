"""XLA frontend: a scheduled HLO module (an XLA dump, or a JAX function) -> Program.

Input: a directory written by XLA's CPU backend with ``XLA_FLAGS="--xla_dump_to=DIR
--xla_dump_hlo_as_text"``; its ``*.cpu_after_optimizations.txt`` holds the scheduled
module (``is_scheduled=true``: the printed order of each computation is its schedule).

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
- **Calls** are inlined: the callee's parameters are the call's operand tensors, its
  root is the call's result.
- **While loops** are flattened: the condition's instructions, then the body's, each
  with ``count`` multiplied by the trip count (``backend_config`` ``known_trip_count``;
  when XLA states none, 1 and a note; the condition really runs once more: ignored),
  and a :class:`~mallocgame.program.ProgramLoop` per flattened loop (nested loops give
  nested ``ProgramLoop`` s, each with its own trip count; counts multiply). Inside,
  the loop parameter *is* the while operand's tensors; the while's result *is* the
  body root's tensors.
- **Conditionals** are one opaque instruction (operands deduplicated, since one
  branch runs; flops of the most expensive branch).

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
where it starts. Bytes: each operand and output moves its tensor's size (shape bytes,
layouts ignored) unless ``partial_bytes`` is asked for. Flops, transcendentals and
partial bytes: :mod:`mallocgame.frontends.hlo_cost`.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from mallocgame.errors import InputFileError, MallocGameError
from mallocgame.frontends.hlo_cost import CostModel, known_trip_count
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
from mallocgame.program import Program, ProgramInstruction, ProgramLoop, ProgramTensor, validate_program

__all__ = [
    "XlaFrontendError",
    "DumpError",
    "AmbiguousModuleError",
    "UnsupportedHloError",
    "CompileError",
    "DumpModule",
    "list_modules",
    "extract_dump",
    "extract_module",
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


_VIEWS = frozenset({"tuple", "get-tuple-element", "bitcast", "opt-barrier", "domain", "add-dependency", "after-all"})
_INPUTS = frozenset({"parameter", "constant", "partition-id", "replica-id"})
_UNSUPPORTED = frozenset(
    "async-start async-update async-done copy-start copy-done send send-done recv recv-done "
    "infeed outfeed all-reduce-start all-reduce-done all-gather-start all-gather-done "
    "collective-permute-start collective-permute-done scan".split()
)
_KNOWN = frozenset(
    "abs acos acosh add add-dependency after-all all-gather all-reduce all-to-all and asin asinh "
    "atan atan2 atanh batch-norm-grad batch-norm-inference batch-norm-training bitcast "
    "bitcast-convert broadcast call cbrt ceil cholesky clamp count-leading-zeros "
    "collective-broadcast collective-permute collective-reduce compare complex concatenate "
    "conditional constant convert convolution copy cosh cosine custom-call divide domain dot "
    "dynamic-reshape dynamic-slice dynamic-update-slice erf exponential exponential-minus-one "
    "fft floor fusion gather get-dimension-size get-tuple-element imag iota is-finite log "
    "log-plus-one logistic map maximum minimum mulhi multiply negate not opt-barrier or pad "
    "parameter partition-id popcnt power ragged-all-to-all ragged-dot real reduce "
    "reduce-precision reduce-scatter reduce-window remainder replica-id reshape reverse rng "
    "rng-bit-generator rng-get-and-update-state round-nearest-afz round-nearest-even rsqrt "
    "scaled-dot scatter select select-and-scatter set-dimension-size shift-left "
    "shift-right-arithmetic shift-right-logical shuffle sign sine sinh slice sort sqrt "
    "stochastic-convert subtract tan tanh topk transpose triangular-solve tuple while xor".split()
)

Tree = Any  # a tensor id (int), None (a token) or a tuple of trees


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

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def find(self, a: int) -> int:
        while self.parent.get(a, a) != a:
            a = self.parent[a]
        return a

    def new_tree(self, ins: HloInstruction, shape: Shape, def_time: int, index: tuple[int, ...] = ()) -> Tree:
        if isinstance(shape, tuple):
            return tuple(self.new_tree(ins, s, def_time, index + (i,)) for i, s in enumerate(shape))
        if shape.is_token:
            return None
        self.tensors.append(_Tensor(_leaf_name(ins.name, index), shape.nbytes, def_time, str(shape), []))
        return len(self.tensors) - 1

    def run(self, comp: HloComputation, params: Sequence[Tree], count: int) -> Tree:
        env: dict[str, Tree] = {}
        for ins in comp.instructions:
            op = ins.opcode
            args = [env[o] for o in ins.operands]
            if op == "parameter":
                number = int(ins.literal)
                if comp.is_entry:
                    env[ins.name] = self.entry_params[number] = self.new_tree(ins, ins.shape, -1)
                else:
                    env[ins.name] = params[number]
            elif op in _INPUTS:
                env[ins.name] = self.new_tree(ins, ins.shape, -1)
            elif op == "tuple":
                env[ins.name] = tuple(args)
            elif op == "get-tuple-element":
                env[ins.name] = args[0][int(ins.attrs["index"])]
            elif op == "after-all":
                env[ins.name] = None
            elif op in _VIEWS:
                env[ins.name] = args[0]
            elif op == "call":
                env[ins.name] = self.run(self.module.computation(ins, "to_apply"), args, count)
            elif op == "while":
                env[ins.name] = self.run_while(ins, args[0], count)
            elif op in _UNSUPPORTED or op not in _KNOWN:
                raise UnsupportedHloError(
                    f"module {self.module.name}: unsupported HLO opcode {op!r} (instruction {ins.name})", op
                )
            else:
                env[ins.name] = self.emit(ins, comp, args, count)
        return env[comp.root.name]

    def run_while(self, ins: HloInstruction, init: Tree, count: int) -> Tree:
        stated = known_trip_count(ins)
        trip = 1 if stated is None else stated
        if stated is None:
            self.notes.append(f"while {ins.name}: trip count unknown, counted once")
        elif trip < 1:
            self.notes.append(f"while {ins.name}: trip count {trip}, counted once")
            trip = 1
        first = len(self.instrs)
        self.run(self.module.computation(ins, "condition"), [init], count * trip)
        result = self.run(self.module.computation(ins, "body"), [init], count * trip)
        last = len(self.instrs) - 1
        if last >= first:
            self.loops.append(ProgramLoop(first, last, trip))
        for x, r in zip(_leaves(init), _leaves(result)):
            if x != r:
                self.union(x, r)
                self.tensors[r].min_end = max(self.tensors[r].min_end, last)
        return result

    def emit(self, ins: HloInstruction, comp: HloComputation, args: list[Tree], count: int) -> Tree:
        t = len(self.instrs)
        operands: list[int] = []
        operand_bytes: list[int] = []
        for k, tree in enumerate(args):
            for x in _leaves(tree):
                if ins.opcode == "conditional" and x in operands:
                    continue
                full = self.tensors[x].size
                nb = full
                if self.partial_bytes and isinstance(tree, int):
                    nb = self.costs.operand_bytes(ins, comp, k, full)
                operands.append(x)
                operand_bytes.append(nb)
        out_tree = self.new_tree(ins, ins.shape, t)
        outputs, output_bytes = [], []
        for index, _ in shape_leaves(ins.shape):
            x = _subtree(out_tree, index)
            if x is not None:
                outputs.append(x)
                full = self.tensors[x].size
                output_bytes.append(self.costs.output_bytes(ins, comp, index, full) if self.partial_bytes else full)
        flops, trans = self.costs.cost(ins, comp)
        for opnum, op_index, out_index in self.costs.in_place_pairs(ins):
            a, b = _subtree(args[opnum], op_index), _subtree(out_tree, out_index)
            if isinstance(a, int) and isinstance(b, int):
                self.union(a, b)
        for x in operands:
            self.tensors[x].reads.append(t)
        self.instrs.append(
            ProgramInstruction(
                name=ins.name, opcode=ins.opcode, operands=tuple(operands), outputs=tuple(outputs),
                operand_bytes=tuple(operand_bytes), output_bytes=tuple(output_bytes),
                flops=float(flops), transcendentals=float(trans), count=count,
            )
        )
        return out_tree

    def finish(self, name: str, source: dict[str, Any]) -> Program:
        root = self.run(self.module.entry, [], 1)
        num_t = len(self.instrs)
        if num_t == 0:
            raise XlaFrontendError(f"module {self.module.name}: no instruction moves data (nothing to decide)")
        for x in _leaves(root):
            self.tensors[x].live_out = True
        for out_index, param, param_index, _ in parse_alias_list(self.module.attrs.get("input_output_alias", "")):
            a = _subtree(self.entry_params.get(param), param_index)
            b = _subtree(root, out_index)
            if isinstance(a, int) and isinstance(b, int):
                self.union(a, b)
        tensors = []
        for i, x in enumerate(self.tensors):
            end = max([x.def_time, x.min_end] + x.reads)
            for lp in self.loops:
                if not lp.first <= x.def_time <= lp.last and any(lp.first <= r <= lp.last for r in x.reads):
                    end = max(end, lp.last)
            if x.live_out:
                end = num_t - 1
            tensors.append(ProgramTensor(i, x.name, x.size, x.def_time, end, x.live_out, x.shape))
        buffers: dict[int, list[tuple[int, int]]] = {}
        for t, pi in enumerate(self.instrs):
            for p, x in enumerate(pi.operands + pi.outputs):
                buffers.setdefault(self.find(x), []).append((t, p))
        groups = tuple(tuple(sorted(g)) for g in buffers.values() if len(g) > 1 and self._aliased(g))
        if self.costs.unknown_custom_calls:
            self.notes.append("custom calls without flops: " + ", ".join(sorted(self.costs.unknown_custom_calls)))
        source = dict(source, notes="; ".join(self.notes))
        program = Program(
            name=name, instructions=tuple(self.instrs), tensors=tuple(tensors),
            alias_groups=tuple(sorted(groups)), loops=tuple(sorted(self.loops, key=lambda lp: (lp.first, -lp.last))),
            source=source,
        )
        validate_program(program)
        return program

    def _aliased(self, group: list[tuple[int, int]]) -> bool:
        """A union class is an alias group only if it joins more than one tensor."""
        xs = {(self.instrs[t].operands + self.instrs[t].outputs)[p] for t, p in group}
        return len(xs) > 1


def extract_module(
    text: str, *, name: str | None = None, partial_bytes: bool = False, source: dict[str, Any] | None = None
) -> Program:
    """Build a program from the text of one scheduled HLO module (see :func:`extract_dump`)."""
    try:
        module = parse_module(text)
    except HloParseError as exc:
        raise DumpError(str(exc)) from None
    if not module.is_scheduled:
        raise DumpError(f"module {module.name} is not scheduled (no is_scheduled=true): dump it after optimizations")
    src = {"frontend": "xla", "module": module.name, "jax": _jax_version()}
    src.update(source or {})
    try:
        src["bytes"] = "partial" if partial_bytes else "shape"
        return _Builder(module, partial_bytes).finish(name or module.name, src)
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise XlaFrontendError(f"module {module.name}: malformed HLO ({type(exc).__name__}: {exc})") from None


# ---------------------------------------------------------------------------------------
# Dump directories.

_FILE_RE = re.compile(r"^(?P<prefix>(?:module_(?P<id>\d+)\.)?(?P<name>.+?))\.(?P<backend>\w+)_after_optimizations\.txt$")


@dataclass(frozen=True)
class DumpModule:
    """One optimized module of a dump: ``module_0008.jit_mm`` (prefix), ``jit_mm`` (name)."""

    path: Path
    prefix: str
    name: str
    id: str
    num_instructions: int  # instructions of the entry computation that are not views or inputs

    @property
    def trivial(self) -> bool:
        """A one-instruction helper (JAX's jit_convert_element_type, jit_broadcast_in_dim, ...)."""
        return self.num_instructions <= 1

    def describe(self) -> str:
        return f"{self.prefix} ({self.num_instructions} instructions{', trivial' if self.trivial else ''})"


def list_modules(dump_dir: str | os.PathLike[str]) -> list[DumpModule]:
    """The optimized modules of an XLA dump directory, by module id."""
    root = Path(dump_dir)
    if not root.is_dir():
        raise DumpError(f"{root}: not a directory (expected an XLA dump made with --xla_dump_to)")
    found = []
    for path in sorted(root.iterdir()):
        m = _FILE_RE.match(path.name)
        if not m or not path.is_file():
            continue
        try:
            text = path.read_text()
        except OSError as exc:
            raise DumpError(f"{path}: cannot read ({exc.strerror or exc})") from None
        entry = re.search(r"^ENTRY .*?^\}", text, re.M | re.S)
        body = entry.group(0).splitlines()[1:-1] if entry else []
        count = sum(
            1 for line in body
            if (om := re.search(r"\s([a-z][a-z0-9\-]*)\(", line.split("=", 1)[-1]))
            and om.group(1) not in _VIEWS | _INPUTS
        )
        found.append(DumpModule(path, m.group("prefix"), m.group("name"), m.group("id") or "", count))
    return found


def _select(mods: list[DumpModule], module: str | None, where: str, auto: bool = False) -> DumpModule:
    if not mods:
        raise DumpError(f"{where}: no scheduled module (*_after_optimizations.txt); dump with "
                        "XLA_FLAGS='--xla_dump_to=DIR --xla_dump_hlo_as_text'")
    listing = "; ".join(m.describe() for m in mods)
    matches = mods
    if module is not None:
        keys = lambda m: {m.name, m.prefix, m.path.name, m.id, f"module_{m.id}"}  # noqa: E731
        matches = [m for m in mods if module in keys(m)] or [m for m in mods if module in m.prefix]
        if not matches:
            raise DumpError(f"{where}: no module matches {module!r}; modules: {listing}")
    if len(matches) == 1:
        return matches[0]
    nontrivial = [m for m in matches if not m.trivial]
    if module is not None and len(nontrivial) == 1:
        return nontrivial[0]
    if auto:
        return max(nontrivial or matches, key=lambda m: (m.num_instructions, m.id))
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
    must hold a single module, or with ``largest=True`` the non-trivial module with
    the most instructions is taken (a training script's step). ``dump_dir`` may also be the module's
    ``*_after_optimizations.txt`` file itself. ``name`` names the program (default:
    the module's name).

    Bytes: every operand and output moves its tensor's full size (shape bytes), so
    each buffer is as large as its tensor. ``partial_bytes=True`` counts instead what
    the instruction really touches (a fusion reading a parameter only through
    slices reads the slices; an in-place update reads nothing of the updated operand
    and writes only the update; see :mod:`mallocgame.frontends.hlo_cost`).
    """
    return _extract(dump_dir, module=module, name=name, partial_bytes=partial_bytes, auto=largest)


def _extract(
    dump_dir: Any, *, module: str | None, name: str | None, partial_bytes: bool = False, auto: bool = False
) -> Program:
    path = Path(dump_dir)
    if path.is_file():
        chosen_path, prefix = path, path.name
    else:
        chosen = _select(list_modules(path), module, str(path), auto=auto)
        chosen_path, prefix = chosen.path, chosen.prefix
    try:
        text = chosen_path.read_text()
    except OSError as exc:
        raise DumpError(f"{chosen_path}: cannot read ({exc.strerror or exc})") from None
    return extract_module(text, name=name, partial_bytes=partial_bytes, source={"dump_module": prefix})


# ---------------------------------------------------------------------------------------
# JAX functions.


def _jax_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("jax")
    except Exception:  # noqa: BLE001 - jax is optional
        return None


@contextlib.contextmanager
def _no_persistent_cache(jax: Any):
    """A persistent-cache hit would skip XLA and write no dump: turn the cache off meanwhile."""
    try:
        old = jax.config.jax_enable_compilation_cache
    except AttributeError:
        yield
        return
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        yield
    finally:
        jax.config.update("jax_enable_compilation_cache", old)


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
        raise XlaFrontendError("the XLA frontend needs JAX to compile functions (pip install jax)") from None
    label = name or getattr(fn, "__name__", "function")
    options = {"xla_dump_to": os.fspath(dump_dir), "xla_dump_hlo_as_text": True}
    try:
        with jax.default_device(jax.devices("cpu")[0]), _no_persistent_cache(jax):
            jitted = jax.jit(fn, donate_argnums=donate_argnums, static_argnums=static_argnums)
            compiled = jitted.lower(*example_args).compile(compiler_options=options)
            return compiled.as_text().split(",", 1)[0].replace("HloModule", "").strip()
    except MallocGameError:
        raise
    except Exception as exc:  # noqa: BLE001 - JAX raises many types; report the reason
        lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
        reason = lines[0] if lines else ""
        raise CompileError(f"{label}: JAX could not compile it: {type(exc).__name__}: {reason}") from None


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
            fn, *example_args, dump_dir=tmp, name=name,
            donate_argnums=donate_argnums, static_argnums=static_argnums,
        )
        if not list_modules(tmp):
            raise DumpError(f"{name or module}: XLA wrote no dump (was the compilation served from a cache?)")
        return _extract(tmp, module=module or None, name=name, partial_bytes=partial_bytes, auto=True)
