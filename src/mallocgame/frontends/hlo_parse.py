"""Readers for XLA's text dumps: HLO modules, live-range files and buffer assignments.

Only what the XLA frontend needs is parsed: shapes (element type, dimensions and
the layout: dimension order, tiles, element width and memory space), instructions (name, shape, opcode,
operand names, attributes kept as raw text), computations in printed order (the
schedule when the module header says ``is_scheduled=true``) and the module header
(``input_output_alias``). The readers of ``*-live-range.txt`` and
``*-buffer-assignment.txt`` exist so tests and tools can compare a
:class:`~mallocgame.program.Program` with XLA's own view.

Formats, as written by XLA's CPU backend (jaxlib 0.10)::

    HloModule jit_f, is_scheduled=true, input_output_alias={ {}: (0, {}, may-alias) }, ...
    %fused_computation (param_0: f32[8,16]) -> f32[8,16] {
      %param_0 = f32[8,16]{1,0} parameter(0)
      ROOT %tanh.0 = f32[8,16]{1,0} tanh(%param_0), metadata={...}
    }
    ENTRY %main.1 (x.1: f32[8,16]) -> f32[8,16] { ... }

and by the TPU and GPU backends, whose layouts carry tiles, element widths and memory
spaces (``bf16[300,200]{1,0:T(8,128)(2,1)S(1)}``: tiled by 8x128 and again by 2x1,
in memory space 1). A shape's :attr:`ArrayShape.nbytes` is what its layout stores,
tile padding included (see :class:`Layout`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from mallocgame.errors import MallocGameError
from mallocgame.instance import MAX_BYTES

__all__ = [
    "HloParseError",
    "Layout",
    "ArrayShape",
    "Shape",
    "parse_layout",
    "HloInstruction",
    "HloComputation",
    "HloModule",
    "parse_shape",
    "parse_module",
    "shape_leaves",
    "parse_alias_list",
    "XlaLiveRanges",
    "XlaValue",
    "XlaAllocation",
    "parse_live_ranges",
    "parse_buffer_assignment",
]


class HloParseError(MallocGameError):
    """An XLA dump file could not be read (the message names the file and the line)."""


# Bytes per element when packed; a sub-byte type packs only where its layout says so
# (``E(4)``): without, XLA stores one byte per element (ArrayShape.nbytes).
_DTYPE_BYTES = {
    "pred": 1.0,
    "s1": 0.125,
    "u1": 0.125,
    "s2": 0.25,
    "u2": 0.25,
    "s4": 0.5,
    "u4": 0.5,
    "s8": 1.0,
    "u8": 1.0,
    "s16": 2.0,
    "u16": 2.0,
    "s32": 4.0,
    "u32": 4.0,
    "s64": 8.0,
    "u64": 8.0,
    "f16": 2.0,
    "bf16": 2.0,
    "f32": 4.0,
    "f64": 8.0,
    "c64": 8.0,
    "c128": 16.0,
    "token": 0.0,
    "opaque": 0.0,
}


@dataclass(frozen=True)
class Layout:
    """How an array is laid out in memory: XLA's ``{minor_to_major:T(..)..E(n)S(n)}``.

    ``minor_to_major`` orders the dimensions, fastest varying first. ``tiles`` are
    applied in turn, each to the most minor dimensions of what the one before left (the
    first to the array in its physical, major-to-minor order; a tile longer than that
    shape sees leading dimensions of 1); every dimension a tile covers is padded up to a
    multiple of the tile's, ``None`` (XLA's ``*``, a combined dimension) pads nothing.
    ``element_bits`` (``E(n)``) overrides the element type's width; 0 keeps it.
    ``memory_space`` (``S(n)``) is where the array lives (0: the default memory; XLA's
    memory-space assignment puts values in 1, host offloading in 5).
    """

    minor_to_major: tuple[int, ...]
    tiles: tuple[tuple[int | None, ...], ...] = ()
    element_bits: int = 0
    memory_space: int = 0

    def stored_elements(self, dims: tuple[int, ...]) -> int:
        """Elements stored for an array of ``dims`` under this layout, tile padding included."""
        order = (
            self.minor_to_major
            if len(self.minor_to_major) == len(dims)
            else tuple(reversed(range(len(dims))))
        )
        physical = [dims[d] for d in reversed(order)]
        for tile in self.tiles:
            if len(tile) > len(physical):
                physical = [1] * (len(tile) - len(physical)) + physical
            outer, inner = (
                physical[: len(physical) - len(tile)],
                physical[len(physical) - len(tile) :],
            )
            sizes = [n if t is None else t for n, t in zip(inner, tile)]
            physical = outer + [-(-n // t) if t > 0 else n for n, t in zip(inner, sizes)] + sizes
        return math.prod(physical)


def _element_bits(dtype: str) -> float:
    if dtype in _DTYPE_BYTES:
        return 8 * _DTYPE_BYTES[dtype]
    if dtype[:2] in ("f8", "f6", "f4"):
        return {"f8": 8.0, "f6": 6.0, "f4": 4.0}[dtype[:2]]
    raise HloParseError(f"unknown element type {dtype!r}")


@dataclass(frozen=True)
class ArrayShape:
    """An array (or token) shape: element type, dimensions (bounds for dynamic ones) and
    its layout where the text gives one (not part of equality)."""

    dtype: str
    dims: tuple[int, ...]
    layout: Layout | None = field(default=None, compare=False)

    @property
    def elements(self) -> int:
        return math.prod(self.dims)

    @property
    def nbytes(self) -> int:
        """Bytes the array occupies: its elements at the element width (a sub-byte type's
        only where the layout packs it, ``E(n)``; else a byte each), tile padding included
        (rounded up to whole bytes; exact integer arithmetic at any size)."""
        bits = int(_element_bits(self.dtype))
        if 0 < bits < 8:  # a sub-byte type unpacked: one byte each
            bits = 8
        elements = self.elements
        if self.layout is not None:
            elements = self.layout.stored_elements(self.dims) if self.layout.tiles else elements
            bits = self.layout.element_bits or bits
        return -(-elements * bits // 8)

    @property
    def memory_space(self) -> int:
        """The layout's memory space (0 without a layout)."""
        return 0 if self.layout is None else self.layout.memory_space

    @property
    def is_token(self) -> bool:
        return self.dtype == "token"

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(str(d) for d in self.dims)}]"


# A shape is an array shape or a (possibly nested, possibly empty) tuple of shapes.
Shape = ArrayShape | tuple


def shape_leaves(
    shape: Shape, prefix: tuple[int, ...] = ()
) -> list[tuple[tuple[int, ...], ArrayShape]]:
    """The array leaves of ``shape`` with their shape indices, in order."""
    if isinstance(shape, ArrayShape):
        return [(prefix, shape)]
    out: list[tuple[tuple[int, ...], ArrayShape]] = []
    for i, sub in enumerate(shape):
        out.extend(shape_leaves(sub, prefix + (i,)))
    return out


def shape_text(shape: Shape) -> str:
    if isinstance(shape, ArrayShape):
        return str(shape)
    return "(" + ", ".join(shape_text(s) for s in shape) + ")"


_OPEN = {"(": ")", "{": "}", "[": "]"}


_SPECIAL_RE = re.compile(r'[(){}\[\]",\\]')


def _unquoted(
    text: str, start: int = 0, tokens: re.Pattern[str] = _SPECIAL_RE
) -> Iterator[tuple[int, str]]:
    """``(index, token)`` of each match of ``tokens`` in ``text[start:]`` outside
    double-quoted strings (in which a backslash escapes the next character); ``tokens``
    must match ``"`` and ``\\`` too: by default the brackets and commas."""
    quote, skip = False, -1
    for m in tokens.finditer(text, start):
        j, c = m.start(), m.group()
        if j == skip:
            continue
        if quote:
            if c == "\\":
                skip = j + 1
            elif c == '"':
                quote = False
        elif c == '"':
            quote = True
        elif c != "\\":
            yield j, c


def split_top(text: str) -> list[str]:
    """Split on commas outside brackets and quotes; pieces stripped, empty ones dropped."""
    parts, depth, start = [], 0, 0
    for j, c in _unquoted(text):
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:j])
            start = j + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _close(text: str, i: int) -> int:
    """Index of the bracket closing the one at ``text[i]`` (quoted text skipped)."""
    stack: list[str] = []
    for j, c in _unquoted(text, i):
        if c in _OPEN:
            stack.append(_OPEN[c])
        elif c in ")}]":
            if not stack or c != stack[-1]:
                raise ValueError(f"unbalanced {c!r} at column {j}")
            stack.pop()
            if not stack:
                return j
    raise ValueError("unbalanced brackets")


_ARRAY_RE = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\]")
_LAYOUT_ITEM_RE = re.compile(r"([A-Z#*]+)((?:\([^()]*\))+)")


def _layout_items(rest: str) -> Iterator[re.Match[str]]:
    """The items of a layout after its ``:`` (``T(8,128)(2,1)``, ``S(1)``...), each
    matched where the one before (and any whitespace) ends, so every character is read
    once; :class:`ValueError` (showing at most 40 characters) where no item is."""
    position = 0
    while position < len(rest):
        if rest[position].isspace():
            position += 1
            continue
        m = _LAYOUT_ITEM_RE.match(rest, position)
        if m is None:
            shown = rest[position : position + 40] + ("..." if len(rest) > position + 40 else "")
            raise ValueError(f"cannot read layout item {shown!r}")
        yield m
        position = m.end()


def parse_layout(text: str) -> Layout:
    """Parse the inside of a layout's braces: ``1,0``, ``1,0:T(8,128)(2,1)S(1)``, ``:T(256)``.

    Items other than tiles (``T``), element width (``E``) and memory space (``S``), such
    as dimension level types (``D``) or tail padding (``L``), are read past.
    """
    order, _, rest = text.partition(":")
    minor_to_major = tuple(int(v) for v in order.split(",") if v.strip())
    tiles: list[tuple[int | None, ...]] = []
    bits = space = 0
    for m in _layout_items(rest):
        groups = re.findall(r"\(([^()]*)\)", m.group(2))
        if m.group(1) == "T":
            for g in groups:
                tile = tuple(
                    None if v.strip() == "*" else int(v) for v in g.split(",") if v.strip()
                )
                if any(t is not None and t < 1 for t in tile):
                    raise ValueError(f"a tile's sizes are at least 1, not {g!r}")
                tiles.append(tile)
        elif m.group(1) == "E":
            bits = int(groups[0])
            if bits < 1:
                raise ValueError(f"an element width E(n) is at least 1 bit, not {bits}")
        elif m.group(1) == "S":
            space = int(groups[0])
    return Layout(minor_to_major, tuple(tiles), bits, space)


def parse_shape(text: str) -> Shape:
    """Parse ``f32[8,16]{1,0}``, ``(s32[], f32[4]{0})``, ``pred[]``, ``token[]``, ``s32[<=8]``,
    ``bf16[8,256]{1,0:T(8,128)(2,1)S(1)}``."""
    text = text.strip()
    if text.startswith("("):
        end = _close(text, 0)
        return tuple(parse_shape(p) for p in split_top(text[1:end]))
    m = _ARRAY_RE.match(text)
    if not m:
        if text in ("token", "token[]"):
            return ArrayShape("token", ())
        raise ValueError(f"not a shape: {text!r}")
    dims = []
    for d in m.group(2).split(","):
        d = d.strip().lstrip("<=")
        if d == "?":
            raise ValueError(f"unbounded dynamic dimension in {text!r}: its size is unknown")
        if d:
            dims.append(int(d))
            if dims[-1] < 0:
                raise ValueError(f"negative dimension {d} in {text!r}")
    layout = None
    rest = text[m.end() :]
    if rest.startswith("{") and m.group(1) != "token":
        layout = parse_layout(rest[1 : _close(rest, 0)])
        order = layout.minor_to_major
        if order and sorted(order) != list(range(len(dims))):
            listed = ",".join(str(d) for d in order)
            raise ValueError(f"layout {{{listed}}} is not an order of the {len(dims)} dimensions")
    return ArrayShape(m.group(1), tuple(dims), layout)


@dataclass
class HloInstruction:
    name: str
    opcode: str
    shape: Shape
    operands: tuple[str, ...]  # operand instruction names (no '%')
    attrs: dict[str, str]  # raw attribute text, e.g. {"calls": "%fused_computation"}
    literal: str = ""  # text inside the parentheses of parameter / constant
    is_root: bool = False

    def attr_ints(self, key: str) -> tuple[int, ...]:
        """``{1,2}`` style integer list attribute (empty if absent)."""
        raw = self.attrs.get(key, "").strip().strip("{}")
        return tuple(int(v) for v in raw.split(",") if v.strip())

    def called(self, key: str) -> list[str]:
        """Computation names in attribute ``key`` (``calls=%c`` or ``branch_computations={%a, %b}``)."""
        raw = self.attrs.get(key, "").strip()
        if raw.startswith("{"):
            raw = raw[1:-1]
        return [p.strip().lstrip("%") for p in split_top(raw)]


_CALL_KEYS = (
    "calls",
    "to_apply",
    "condition",
    "body",
    "branch_computations",
    "called_computations",
    "true_computation",
    "false_computation",
)


@dataclass
class HloComputation:
    name: str
    instructions: list[HloInstruction]
    is_entry: bool = False
    by_name: dict[str, HloInstruction] = field(default_factory=dict)

    @property
    def root(self) -> HloInstruction:
        for ins in self.instructions:
            if ins.is_root:
                return ins
        return self.instructions[-1]

    def parameter(self, number: int) -> HloInstruction:
        for ins in self.instructions:
            if ins.opcode == "parameter" and int(ins.literal) == number:
                return ins
        raise KeyError(f"{self.name} has no parameter {number}")

    def users(self, name: str) -> list[tuple[HloInstruction, int]]:
        """(user, operand number) pairs reading instruction ``name``."""
        return [(u, k) for u in self.instructions for k, o in enumerate(u.operands) if o == name]


@dataclass
class HloModule:
    name: str
    attrs: dict[str, str]
    computations: dict[str, HloComputation]
    entry: HloComputation

    @property
    def is_scheduled(self) -> bool:
        return self.attrs.get("is_scheduled", "false") == "true"

    def callees(self, ins: HloInstruction) -> Iterator[tuple[str, str]]:
        """``(attribute, computation name)`` of each computation ``ins`` names (``calls``,
        ``to_apply``, ``body``...), whether the module has it or not."""
        for key in _CALL_KEYS:
            for name in ins.called(key) if key in ins.attrs else ():
                yield key, name

    def calls(self, ins: HloInstruction) -> list[HloComputation]:
        """The computations ``ins`` calls (fused, loop, branch, reducer...)."""
        out = []
        for _, name in self.callees(ins):
            if name not in self.computations:
                raise HloParseError(f"{ins.name}: calls unknown computation {name!r}")
            out.append(self.computations[name])
        return out

    def computation(self, ins: HloInstruction, key: str) -> HloComputation:
        names = ins.called(key)
        if len(names) != 1 or names[0] not in self.computations:
            raise HloParseError(f"{ins.name}: attribute {key!r} names no computation")
        return self.computations[names[0]]


_COMMENT_TOKEN_RE = re.compile(r'["\\]|/\*')


def _strip_comments(line: str) -> str:
    """``line`` without its ``/* ... */`` comments outside double-quoted strings (in which
    a backslash escapes the next character): each from a ``/*`` to the first ``*/``
    after it; an unclosed one is kept. Read once left to right."""
    if "/*" not in line:
        return line
    parts, kept = [], 0
    # a comment ends outside any string: the scan starts again after it, unquoted
    while (opened := next(_unquoted(line, kept, _COMMENT_TOKEN_RE), None)) is not None:
        close = line.find("*/", opened[0] + 2)
        if close < 0:
            break
        parts.append(line[kept : opened[0]])
        kept = close + 2
    parts.append(line[kept:])
    return "".join(parts)


_INSTR_HEAD_RE = re.compile(r"\s*(ROOT\s+)?%?([^\s=]+)\s*=\s*")
_COMP_HEAD_RE = re.compile(r"^(ENTRY\s+)?%?([^\s(]+)\s*\(.*\{\s*$")
_NO_OPERANDS = frozenset({"parameter", "constant"})


def _is_shape_text(text: str) -> bool:
    """Whether ``text`` is all one shape's text: ``f32[8]``, ``f32[8]{0}``, ``(s32[], f32[8])``."""
    rest = text
    if not text.startswith("("):
        m = _ARRAY_RE.match(text)
        if m is None:
            return False
        rest = text[m.end() :]  # the layout, if any
        if not rest:
            return True
        if not rest.startswith("{"):
            return False
    try:
        return _close(rest, 0) == len(rest) - 1
    except ValueError:
        return False


def _operand_name(piece: str) -> str:
    """The instruction name of one operand, ``%x`` or (older dumps) ``f32[8]{0} %x``."""
    parts = piece.rsplit(maxsplit=1)
    if len(parts) == 2 and not _is_shape_text(parts[0]):
        shown = piece[:60] + ("..." if len(piece) > 60 else "")
        raise ValueError(f"operand {shown!r} is not one name, after at most a shape")
    return parts[-1].lstrip("%")


def _parse_instruction(line: str) -> HloInstruction:
    m = _INSTR_HEAD_RE.match(line)
    if not m:
        raise ValueError("not an instruction")
    rest = line[m.end() :]
    if rest.startswith("("):
        end = _close(rest, 0)
        shape_str, rest = rest[: end + 1], rest[end + 1 :].lstrip()
    else:
        shape_str, _, rest = rest.partition(" ")
        rest = rest.lstrip()
    om = re.match(r"([a-z][a-z0-9\-]*)\(", rest)
    if not om:
        raise ValueError("no opcode")
    opcode = om.group(1)
    open_at = om.end() - 1
    end = _close(rest, open_at)
    inside = rest[open_at + 1 : end]
    attrs: dict[str, str] = {}
    for piece in split_top(rest[end + 1 :]):
        key, eq, value = piece.partition("=")
        if eq:
            attrs[key.strip()] = value.strip()
    operands: tuple[str, ...] = ()
    if opcode not in _NO_OPERANDS:
        operands = tuple(_operand_name(p) for p in split_top(inside))
    return HloInstruction(
        name=m.group(2).lstrip("%"),
        opcode=opcode,
        shape=parse_shape(shape_str),
        operands=operands,
        attrs=attrs,
        literal=inside.strip() if opcode in _NO_OPERANDS else "",
        is_root=bool(m.group(1)),
    )


def _check_size(ins: HloInstruction, where: str) -> None:
    """Refuse an instruction with an array of more than ``2**53`` bytes (SPEC section 1),
    or of an element type that is not known (both naming ``where`` and the instruction)."""
    for index, leaf in shape_leaves(ins.shape):
        try:
            nbytes = leaf.nbytes
        except HloParseError as exc:
            raise HloParseError(f"{where}: instruction %{ins.name}: {exc}") from None
        if nbytes > MAX_BYTES:
            element = f" (element {{{','.join(map(str, index))}}})" if index else ""
            raise HloParseError(
                f"{where}: instruction %{ins.name}: shape {leaf}{element} holds {leaf.nbytes} "
                "bytes, more than 2**53 (the byte range of SPEC section 1)"
            )


def parse_module(text: str, *, where: str = "HLO") -> HloModule:
    """Parse the text of one HLO module (``HloModule ...`` header and its computations).

    Besides unreadable lines, raises :class:`HloParseError` (naming the line) for a
    computation defined twice, a second ENTRY computation, a computation without
    instructions, a ``}`` or an indented line outside any computation (other top-level
    lines, such as the stack-frame tables of newer dumps, are read past), an instruction
    name defined twice in one computation, and an array shape of more than ``2**53``
    bytes (SPEC section 1: no instance could hold it).
    """
    name, attrs = "", {}
    computations: dict[str, HloComputation] = {}
    entry: HloComputation | None = None
    current: HloComputation | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = _strip_comments(raw).rstrip()
        try:
            if current is not None:
                if line.strip() == "}" or line.startswith("}, "):  # "}, execution_thread=..."
                    if not current.instructions:
                        raise HloParseError(
                            f"{where}:{lineno}: computation {current.name} has no instructions"
                        )
                    computations[current.name] = current
                    current = None
                elif line.strip():
                    ins = _parse_instruction(line)
                    if ins.name in current.by_name:
                        raise HloParseError(
                            f"{where}:{lineno}: instruction %{ins.name} is defined twice in "
                            f"computation {current.name}"
                        )
                    _check_size(ins, f"{where}:{lineno}")
                    if ins.is_root and any(i.is_root for i in current.instructions):
                        raise HloParseError(
                            f"{where}:{lineno}: a second ROOT in computation {current.name}"
                        )
                    current.instructions.append(ins)
                    current.by_name[ins.name] = ins
                continue
            if line.startswith("HloModule "):
                head = split_top(line[len("HloModule ") :])
                name = head[0]
                for piece in head[1:]:
                    key, eq, value = piece.partition("=")
                    if eq:
                        attrs[key.strip()] = value.strip()
                continue
            if line.strip() == "}" or line.startswith("}, "):
                raise HloParseError(f"{where}:{lineno}: a '}}' that closes no computation")
            if line[:1].isspace() and line.strip():
                raise HloParseError(f"{where}:{lineno}: an instruction outside any computation")
            m = _COMP_HEAD_RE.match(line)
            if m and not line[0].isspace():
                current = HloComputation(
                    name=m.group(2), instructions=[], is_entry=bool(m.group(1))
                )
                if current.name in computations:
                    raise HloParseError(
                        f"{where}:{lineno}: computation {current.name} is defined twice"
                    )
                if current.is_entry:
                    if entry is not None:
                        raise HloParseError(
                            f"{where}:{lineno}: a second ENTRY computation ({current.name}; "
                            f"the first is {entry.name})"
                        )
                    entry = current
        except (ValueError, IndexError, KeyError) as exc:
            raise HloParseError(
                f"{where}:{lineno}: cannot parse {raw.strip()[:120]!r} ({exc})"
            ) from None
    if current is not None:
        raise HloParseError(f"{where}: computation {current.name} is not closed")
    if not name or entry is None:
        raise HloParseError(f"{where}: no 'HloModule' header or no ENTRY computation")
    return HloModule(name=name, attrs=attrs, computations=computations, entry=entry)


_ALIAS_RE = re.compile(
    r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}\s*(?:,\s*([\w-]+))?\s*\)"
)


def _index(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(",") if v.strip())


def parse_alias_list(text: str) -> list[tuple[tuple[int, ...], int, tuple[int, ...], str]]:
    """``{ {0}: (1, {}, may-alias) }`` -> [(output index, operand/parameter number, its
    index, kind)]; :class:`ValueError` for text that is not such a list (no part of it is
    passed over)."""
    rest = text.strip()
    if rest.startswith("{") and rest.endswith("}"):
        rest = rest[1:-1]
    entries = []
    position = 0
    for m in _ALIAS_RE.finditer(rest):
        if rest[position : m.start()].strip(" ,\t\n"):
            break
        entries.append((_index(m.group(1)), int(m.group(2)), _index(m.group(3)), m.group(4) or ""))
        position = m.end()
    if rest[position:].strip(" ,\t\n"):
        raise ValueError(f"cannot read alias list {text.strip()[:80]!r}")
    return entries


# ---------------------------------------------------------------------------------------
# XLA's own analyses, for comparison.


@dataclass(frozen=True)
class XlaLiveRanges:
    """``*-live-range.txt``: the flattened sequence and each value's ``[start, end]``.

    Positions index ``sequence`` (views, parameters and loop bodies included);
    ``max_time`` is the end given to live-out values and entry parameters.
    """

    max_time: int
    sequence: tuple[str, ...]
    ranges: dict  # "name{idx}" -> (start, end), e.g. "while.0{1}", "x.1{}"


def parse_live_ranges(text: str) -> XlaLiveRanges:
    m = re.search(r"HloLiveRange \(max (\d+)\)", text)
    if not m:
        raise HloParseError("not a live-range file (no 'HloLiveRange (max N)' line)")
    sequence: list[str] = []
    ranges: dict[str, tuple[int, int]] = {}
    section = ""
    for line in text.splitlines():
        s = line.strip()
        if s == "InstructionSequence:":
            section = "seq"
        elif s == "BufferLiveRange:":
            section = "ranges"
        elif s.startswith("Live ranges at") or s.startswith("Stack trace"):
            section = ""
        elif section == "seq" and s:
            pos, _, nm = s.partition(":")
            if int(pos) != len(sequence):
                raise HloParseError(f"live-range file: sequence position {pos} out of order")
            sequence.append(nm)
        elif section == "ranges" and s:
            rm = re.match(r"(.+\{[\d,]*\}):(\d+)-(\d+)$", s)
            if not rm:
                raise HloParseError(f"live-range file: cannot parse {s!r}")
            ranges[rm.group(1)] = (int(rm.group(2)), int(rm.group(3)))
    return XlaLiveRanges(max_time=int(m.group(1)), sequence=tuple(sequence), ranges=ranges)


@dataclass(frozen=True)
class XlaValue:
    id: int
    name: str  # defining instruction
    index: tuple[int, ...]  # shape index within it
    size: int
    offset: int
    shape: str
    is_phi: bool

    @property
    def key(self) -> str:
        return f"{self.name}{{{','.join(map(str, self.index))}}}"


@dataclass(frozen=True)
class XlaAllocation:
    index: int
    size: int
    kind: str  # the rest of the header, e.g. "parameter 1, shape |f32[16,32]| at ShapeIndex {}"
    values: tuple[XlaValue, ...]


_VALUE_RE = re.compile(
    r"value:\s*<(\d+)\s+([^\s{>]+)(\{[\d,]*\})?\s*(\(phi\))?\s*@\d+>\s*\(size=(\d+),offset=(\d+)\):\s*(.*)$"
)


def parse_buffer_assignment(text: str) -> list[XlaAllocation]:
    """``*-buffer-assignment.txt``: allocations and the values each holds."""
    allocations: list[XlaAllocation] = []
    head: tuple[int, int, str] | None = None
    values: list[XlaValue] = []

    def flush() -> None:
        if head is not None:
            allocations.append(XlaAllocation(head[0], head[1], head[2], tuple(values)))

    for line in text.splitlines():
        s = line.strip()
        am = re.match(r"allocation (\d+): size (\d+)(?:, (.*?))?:?$", s)
        if am:
            flush()
            head, values = (int(am.group(1)), int(am.group(2)), (am.group(3) or "").rstrip(":")), []
            continue
        if head is None:
            continue
        vm = _VALUE_RE.match(s)
        if vm:
            values.append(
                XlaValue(
                    id=int(vm.group(1)),
                    name=vm.group(2),
                    index=_index((vm.group(3) or "{}")[1:-1]),
                    size=int(vm.group(5)),
                    offset=int(vm.group(6)),
                    shape=vm.group(7).strip(),
                    is_phi=bool(vm.group(4)),
                )
            )
        elif s and not s.startswith("value:"):
            flush()
            head = None
    flush()
    return allocations
