"""Per-instruction work of HLO: flops, transcendentals, bytes moved, in-place pairs.

XLA (and JAX) report flops only for whole modules, so the frontend counts them per
instruction from the HLO itself, in the spirit of XLA's ``HloCostAnalysis``:

- ``dot``: ``2 × output elements × contraction size`` (product of the lhs
  contracting dimensions); ``ragged-dot`` / ``scaled-dot`` likewise.
- ``convolution``: ``2 × (batch × output features) × kernel input features × valid
  positions`` (the kernel's ``i`` dimension, which is ``input features /
  feature_group_count``), as ``HloCostAnalysis::GetConvolutionFlops`` counts: the valid
  positions are the (output position, window position) pairs that read an input
  element, not padding nor a hole of the lhs (base) dilation, multiplied over the
  spatial dimensions. So libtpu's batched matmuls and grouped convolutions, rewritten
  as convolutions over an lhs-dilated dimension, cost what the matmul does. Where the
  dimension labels or the window cannot be read, every output element × window
  position counts.
- elementwise arithmetic (add, multiply, compare, select, bitwise, ...): 1 flop per
  output element; ``convert`` and pure data movement (copy, transpose, slice,
  broadcast, gather, pad, concatenate, ...): 0.
- transcendental functions (exp, log, tanh, logistic, rsqrt, sqrt, power, sin, cos,
  erf, atan2, ...): 1 transcendental (and no flop) per output element.
- ``reduce``: input elements × (flops of one reducer application, at least 1);
  ``reduce-window``: output elements × window size × reducer flops;
  ``scatter``: update elements × combiner flops; ``map``: elements × its flops;
  ``sort``: elements × ceil(log2 n) × comparator flops; ``fft``: 5 N log2 N.
- ``fusion`` / ``call``: the sum over the called computation (nested fusions
  included); ``while``: trip count × (condition + body), the condition alone for a
  trip count of 0; ``conditional``: the most of any branch, flops and transcendentals
  each (as ``HloCostAnalysis::HandleConditional`` takes each property's maximum; one
  with no branch computation is malformed:
  :class:`~mallocgame.frontends.hlo_parse.HloParseError`).
- ``custom-call``: the sum over its called computations if it has any; else a
  best-effort formula from the shapes for matmul/gemm (``2 × out × K``: ``K`` the
  product of the lhs contracting dimensions its ``backend_config``'s
  ``gemm_backend_config.dot_dimension_numbers`` states, as cuBLAS gemms on a GPU do;
  the lhs's last dimension where none is stated), LAPACK trsm (``out × m``), getrf
  (``2/3 n³``) and potrf (``1/3 n³``) targets; else 0 (the extraction notes name such
  calls).

Partial bytes (used by the frontend only when asked, ``partial_bytes=True``; by
default every buffer moves its tensor's full size): an operand or output moves its
shape's bytes (layouts ignored), except that a fusion parameter read only through
``slice`` / ``dynamic-slice`` / ``gather`` moves what those read, and an in-place
``dynamic-update-slice`` / ``scatter`` reads nothing of the updated operand and
writes only the update, as in ``HloCostAnalysis``.
"""

from __future__ import annotations

import math
import re

from mallocgame.frontends.hlo_parse import (
    ArrayShape,
    HloComputation,
    HloInstruction,
    HloModule,
    HloParseError,
    Shape,
    parse_alias_list,
    shape_leaves,
)
from mallocgame.instance import MAX_COUNT

__all__ = [
    "CostModel",
    "counted_trip_count",
    "elements",
    "known_trip_count",
    "trip_count",
]

ELEMENTWISE = frozenset(
    [
        "abs",
        "add",
        "and",
        "clamp",
        "compare",
        "complex",
        "count-leading-zeros",
        "divide",
        "floor",
        "ceil",
        "imag",
        "is-finite",
        "maximum",
        "minimum",
        "multiply",
        "mulhi",
        "negate",
        "not",
        "or",
        "popcnt",
        "real",
        "remainder",
        "round-nearest-afz",
        "round-nearest-even",
        "select",
        "shift-left",
        "shift-right-arithmetic",
        "shift-right-logical",
        "sign",
        "subtract",
        "xor",
    ]
)
TRANSCENDENTAL = frozenset(
    [
        "acos",
        "acosh",
        "asin",
        "asinh",
        "atan",
        "atan2",
        "atanh",
        "cbrt",
        "cosh",
        "cosine",
        "erf",
        "exponential",
        "exponential-minus-one",
        "log",
        "log-plus-one",
        "logistic",
        "power",
        "rsqrt",
        "sine",
        "sinh",
        "sqrt",
        "tan",
        "tanh",
    ]
)
_PER_ELEMENT = frozenset(
    [
        "rng",
        "rng-bit-generator",
        "reduce-precision",
        "stochastic-convert",
        "all-reduce",
        "all-reduce-start",  # a GPU dump's asynchronous all-reduce: the same work
        "reduce-scatter",
        "topk",
        "collective-reduce",
    ]
)


def shape_bytes(shape: Shape) -> int:
    return sum(leaf.nbytes for _, leaf in shape_leaves(shape))


def elements(shape: Shape) -> int:
    return sum(leaf.elements for _, leaf in shape_leaves(shape))


def _array(shape: Shape) -> ArrayShape:
    leaves = shape_leaves(shape)
    return leaves[0][1] if leaves else ArrayShape("token", ())


_TRIP_RE = re.compile(r'"known_trip_count"\s*:\s*(\{[^{}]*\}|[^,{}]*)')
_TRIP_N_RE = re.compile(r'\{\s*"n"\s*:\s*(?:"([^"]*)"|([^\s,}]+))\s*\}')


def _backend_config(ins: HloInstruction) -> str:
    """``ins``'s ``backend_config`` as JSON text: the older, escaped form
    (``backend_config="{\\"k\\":...}"``) unescaped."""
    config = ins.attrs.get("backend_config", "")
    if len(config) > 1 and config[0] == config[-1] == '"':
        config = config[1:-1].replace('\\"', '"')
    return config


def known_trip_count(ins: HloInstruction) -> int | None:
    """The trip count XLA states for a ``while``: its ``backend_config``'s
    ``"known_trip_count":{"n":"3"}``, also in the older escaped form
    ``backend_config="{\\"known_trip_count\\":...}"`` (``{}``, proto3 JSON's way of writing 0, is 0);
    ``None`` where the config states none.

    Raises :class:`~mallocgame.frontends.hlo_parse.HloParseError` naming the loop where
    the stated count is not a whole number (``"abc"``, ``-3``) or is more than
    ``2**31 - 1``, the largest count of SPEC section 1.
    """
    config = _backend_config(ins)
    m = _TRIP_RE.search(config)
    if m is None:
        return None
    stated = m.group(1).strip()
    if re.fullmatch(r"\{\s*\}", stated):
        return 0
    nm = _TRIP_N_RE.fullmatch(stated)
    if nm is None:
        raise HloParseError(
            f"while {ins.name}: known_trip_count {stated!r} in its backend_config is not "
            '{"n":COUNT}'
        )
    raw = nm.group(1) if nm.group(1) is not None else nm.group(2)
    if not re.fullmatch(r"[0-9]+", raw):
        raise HloParseError(
            f"while {ins.name}: known_trip_count {raw!r} in its backend_config is not a "
            "whole number"
        )
    if int(raw) > MAX_COUNT:
        raise HloParseError(
            f"while {ins.name}: known_trip_count {int(raw)} is more than 2**31-1 (the largest "
            "count of SPEC section 1)"
        )
    return int(raw)


_SCALAR_PASSES = frozenset({"copy", "bitcast", "convert", "reshape"})
"""Opcodes that carry a scalar loop counter through unchanged."""


def _through(comp: HloComputation, ins: HloInstruction) -> HloInstruction:
    """``ins`` followed back through :data:`_SCALAR_PASSES` to what it carries."""
    seen = 0
    while ins.opcode in _SCALAR_PASSES and ins.operands and seen < 64:
        ins = comp.by_name.get(ins.operands[0], ins)
        seen += 1
    return ins


def _int_constant(comp: HloComputation, ins: HloInstruction) -> int | None:
    ins = _through(comp, ins)
    if ins.opcode != "constant" or not re.fullmatch(r"-?[0-9]+", ins.literal):
        return None
    return int(ins.literal)


def _counter_index(comp: HloComputation, ins: HloInstruction) -> int | None:
    """``k`` where ``ins`` is element ``k`` of ``comp``'s parameter 0 (the loop state)."""
    ins = _through(comp, ins)
    if ins.opcode != "get-tuple-element" or not ins.operands:
        return None
    state = comp.by_name.get(ins.operands[0])
    if state is None or state.opcode != "parameter" or state.literal.strip() != "0":
        return None
    index = ins.attr_ints("index")
    return index[0] if len(index) == 1 else None


def counted_trip_count(
    module: HloModule, caller: HloComputation, ins: HloInstruction
) -> int | None:
    """The trip count of a counted ``while`` that states none (the TPU backend writes no
    ``known_trip_count``), found as XLA's own loop analysis finds it: the condition compares
    element ``k`` of the loop state with a constant (``LT``, ``LE``, ``NE``, or the
    constant first with ``GT``, ``GE``), the body's result sets element ``k`` to element
    ``k`` plus a positive constant, and the while's operand starts element ``k`` at a
    constant. ``None`` where the loop is not of that form."""
    try:
        cond = module.computation(ins, "condition")
        body = module.computation(ins, "body")
    except HloParseError:
        return None
    test = cond.root
    if test.opcode != "compare" or len(test.operands) != 2:
        return None
    lhs, rhs = (cond.by_name.get(o) for o in test.operands)
    if lhs is None or rhs is None:
        return None
    direction = test.attrs.get("direction", "")
    flipped = {"GT": "LT", "GE": "LE", "NE": "NE"}
    if _counter_index(cond, lhs) is not None:
        k, bound = _counter_index(cond, lhs), _int_constant(cond, rhs)
    elif direction in flipped:
        k, bound, direction = (
            _counter_index(cond, rhs),
            _int_constant(cond, lhs),
            flipped[direction],
        )
    else:
        return None
    init_tuple = caller.by_name.get(ins.operands[0]) if ins.operands else None
    step_tuple = body.root
    if k is None or bound is None or init_tuple is None or init_tuple.opcode != "tuple":
        return None
    if (
        step_tuple.opcode != "tuple"
        or k >= len(step_tuple.operands)
        or k >= len(init_tuple.operands)
    ):
        return None
    start = _int_constant(caller, caller.by_name[init_tuple.operands[k]])
    add = _through(body, body.by_name[step_tuple.operands[k]])
    if start is None or add.opcode != "add" or len(add.operands) != 2:
        return None
    a, b = (body.by_name.get(o) for o in add.operands)
    if a is None or b is None:
        return None
    if _counter_index(body, a) != k:
        a, b = b, a
    step = _int_constant(body, b)
    if _counter_index(body, a) != k or step is None or step <= 0:
        return None
    span = bound - start
    if direction == "LT":
        trip = -(-span // step)
    elif direction == "LE":
        trip = span // step + 1
    elif direction == "NE" and span >= 0 and span % step == 0:  # a start past the bound
        trip = span // step  # never equals it: no count, not 0
    else:
        return None
    return min(max(trip, 0), MAX_COUNT + 1)


def trip_count(module: HloModule, caller: HloComputation, ins: HloInstruction) -> int | None:
    """The trip count of ``while`` ``ins`` (called from ``caller``): as its backend_config
    states it (:func:`known_trip_count`), else as its counter gives it
    (:func:`counted_trip_count`); ``None`` where neither tells it."""
    stated = known_trip_count(ins)
    return counted_trip_count(module, caller, ins) if stated is None else stated


def _window_size(ins: HloInstruction) -> int:
    m = re.search(r"size=([\dx]+)", ins.attrs.get("window", ""))
    return math.prod(int(v) for v in m.group(1).split("x")) if m else 1


_WINDOW_KEYS = ("size", "stride", "pad", "lhs_dilate", "rhs_dilate")


def _window(ins: HloInstruction, n: int) -> list[tuple[int, int, int, int]] | None:
    """(stride, low padding, lhs dilation, rhs dilation) of each of a convolution's ``n``
    spatial dimensions, from ``window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=...}``
    (absent entries: 1, 0, 1, 1); ``None`` where the window does not have ``n``."""
    fields = dict(re.findall(r"(\w+)=([-\d_x]+)", ins.attrs.get("window", "").strip("{}")))
    parts = {k: fields[k].split("x") for k in _WINDOW_KEYS if k in fields}
    if any(len(v) != n for v in parts.values()):
        return None
    try:
        return [
            (
                int(parts["stride"][d]) if "stride" in parts else 1,
                int(parts["pad"][d].split("_")[0]) if "pad" in parts else 0,
                int(parts["lhs_dilate"][d]) if "lhs_dilate" in parts else 1,
                int(parts["rhs_dilate"][d]) if "rhs_dilate" in parts else 1,
            )
            for d in range(n)
        ]
    except ValueError:
        return None


def _in_progression(lo: int, hi: int, step: int, offset: int, dilation: int) -> int:
    """How many ``t`` in ``[lo, hi]`` have ``t * step + offset`` divisible by
    ``dilation`` (both positive)."""
    if hi < lo:
        return 0
    g = math.gcd(step, dilation)
    if offset % g:
        return 0
    period = dilation // g
    first = (-offset // g) * pow(step // g, -1, period) % period if period > 1 else 0
    start = lo + (first - lo) % period  # the first such t at or after lo
    return 0 if start > hi else (hi - start) // period + 1


def _valid_positions(
    size: int, out: int, window: int, stride: int, pad_low: int, lhs_dil: int, rhs_dil: int
) -> int:
    """How many (output position, window position) pairs of one spatial dimension of a
    convolution read an input element: not padding, not a hole of the lhs dilation (as
    XLA's ``HloCostAnalysis::GetConvolutionFlops`` counts them)."""
    if size <= 0 or out <= 0 or window <= 0 or min(stride, lhs_dil, rhs_dil) <= 0:
        return 0
    last = (size - 1) * lhs_dil  # the last input element in the dilated input
    # one of the two loops, over the shorter: x = o * stride + k * rhs_dil - pad_low
    outer, inner, inner_step, outer_step = (
        (window, out, stride, rhs_dil) if window <= out else (out, window, rhs_dil, stride)
    )
    count = 0
    for a in range(outer):
        base = a * outer_step - pad_low  # x = b * inner_step + base, 0 <= x <= last
        lo = max(0, -(base // inner_step)) if base < 0 else 0
        hi = min(inner - 1, (last - base) // inner_step) if last >= base else -1
        count += _in_progression(lo, hi, inner_step, base, lhs_dil)
    return count


def _convolution_flops(
    ins: HloInstruction, lhs: ArrayShape, kernel: ArrayShape, result: ArrayShape
) -> float:
    """``2 × (batch × output features) × kernel input features × valid positions``: the
    product over spatial dimensions of :func:`_valid_positions`; where the dimension
    labels or the window cannot be read, every output element × window position."""
    m = re.fullmatch(r"([^_]+)_([^-]+)->(.+)", ins.attrs.get("dim_labels", "").strip())
    labels = m.groups() if m else ("", "", "")
    shapes = (lhs, kernel, result)
    kernel_labels = labels[1] if len(labels[1]) == len(kernel.dims) else ""
    # the kernel's input features (input features / feature_group_count)
    per = math.prod(k for lab, k in zip(kernel_labels, kernel.dims) if lab == "i")
    every = 2.0 * result.elements * per  # × the window's size: every position counted
    every *= math.prod(k for lab, k in zip(kernel_labels, kernel.dims) if lab.isdigit())
    n = sum(c.isdigit() for c in kernel_labels)
    window = _window(ins, n)
    if window is None or any(
        len(lab) != len(x.dims)
        or sorted(c for c in lab if c.isdigit()) != sorted(map(str, range(n)))
        for lab, x in zip(labels, shapes)
    ):
        return every
    sizes = [[x.dims[lab.index(str(d))] for lab, x in zip(labels, shapes)] for d in range(n)]
    valid = 1
    for (size, k, o), (stride, pad_low, lhs_dil, rhs_dil) in zip(sizes, window):
        valid *= _valid_positions(size, o, k, stride, pad_low, lhs_dil, rhs_dil)
    rest = result.elements // max(1, math.prod(o for _, _, o in sizes))  # batch × features
    return 2.0 * rest * per * valid


def _log2(n: int) -> float:
    return math.log2(n) if n > 1 else 1.0


def _permute_pairs(
    shape: Shape, at: tuple[int, ...]
) -> list[tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """The in-place pairs of an in-place ``collective-permute`` (``at`` ``()``) or
    ``-start`` (``at`` ``(1,)``, where its result lies in its tuple): operand 1 is the
    result, and where the result is a tuple, each of its elements operand 1's element."""
    result: Shape | None = shape
    for i in at:
        result = result[i] if isinstance(result, tuple) and i < len(result) else None
    if result is None:
        return []
    pairs: list[tuple[int, tuple[int, ...], tuple[int, ...]]] = [(1, (), at)]
    if isinstance(result, tuple):
        pairs += [(1, (i,), at + (i,)) for i in range(len(result))]
    return pairs


_LHS_CONTRACTING_RE = re.compile(r'"lhs_contracting_dimensions"\s*:\s*\[([^\]]*)\]')


def _gemm_contraction(ins: HloInstruction, lhs: ArrayShape) -> int | None:
    """The contraction size of a gemm custom call: the product of the lhs dimensions its
    ``backend_config`` names in ``"lhs_contracting_dimensions":["0"]`` (cuBLAS gemms'
    ``gemm_backend_config.dot_dimension_numbers``; also in the older, escaped form), or
    ``None`` where the config names none.

    Raises :class:`~mallocgame.frontends.hlo_parse.HloParseError` naming the call where a
    named dimension is not a whole number or not one of the lhs's.
    """
    config = _backend_config(ins)
    m = _LHS_CONTRACTING_RE.search(config)
    if m is None:
        return None
    k = 1
    for raw in (v.strip().strip('"') for v in m.group(1).split(",") if v.strip()):
        if not re.fullmatch(r"[0-9]+", raw) or int(raw) >= len(lhs.dims):
            raise HloParseError(
                f"custom-call {ins.name}: lhs_contracting_dimensions names {raw!r}, which is "
                f"not a dimension of its lhs {lhs.dtype}{list(lhs.dims)}"
            )
        k *= lhs.dims[int(raw)]
    return k


def _calls_itself(name: str) -> str:
    return f"computation {name} calls itself, directly or through others"


class CostModel:
    """Flops, bytes and in-place pairs of the instructions of one module (memoized)."""

    def __init__(self, module: HloModule):
        self.module = module
        self._comp_cost: dict[str, tuple[float, float]] = {}
        self._in_progress: set[str] = set()  # computations whose cost is being summed
        self._users: dict[str, dict[str, list[tuple[HloInstruction, int]]]] = {}
        self._pairs: dict[int, list[tuple[int, tuple[int, ...], tuple[int, ...]]] | None] = {}
        self.unknown_custom_calls: set[str] = set()

    # -- flops ---------------------------------------------------------------------------

    def computation_cost(self, comp: HloComputation) -> tuple[float, float]:
        """(flops, transcendentals) of one execution of ``comp`` (:class:`HloParseError`
        if it calls itself, directly or through others)."""
        if comp.name not in self._comp_cost:
            if comp.name in self._in_progress:
                raise HloParseError(_calls_itself(comp.name))
            self._in_progress.add(comp.name)
            try:
                f = t = 0.0
                for ins in comp.instructions:
                    a, b = self.cost(ins, comp)
                    f, t = f + a, t + b
            finally:
                self._in_progress.discard(comp.name)
            self._comp_cost[comp.name] = (f, t)
        return self._comp_cost[comp.name]

    def _called_cost(self, ins: HloInstruction, key: str) -> tuple[float, float]:
        return self.computation_cost(self.module.computation(ins, key))

    def cost(self, ins: HloInstruction, comp: HloComputation) -> tuple[float, float]:
        """(flops, transcendentals) of one execution of ``ins`` (a computation's member)."""
        op = ins.opcode
        out = elements(ins.shape)

        def operand(k: int) -> ArrayShape:
            return _array(comp.by_name[ins.operands[k]].shape)

        if op in TRANSCENDENTAL:
            return 0.0, float(out)
        if op in ELEMENTWISE:
            return float(out), 0.0
        if op in _PER_ELEMENT:
            return float(out), 0.0
        if op in ("dot", "ragged-dot", "scaled-dot"):
            lhs = operand(0)
            k = math.prod(lhs.dims[d] for d in ins.attr_ints("lhs_contracting_dims"))
            return 2.0 * out * k, 0.0
        if op == "convolution":
            return _convolution_flops(ins, operand(0), operand(1), _array(ins.shape)), 0.0
        if op in ("fusion", "call", "async-start", "call-start"):
            return self._called_cost(ins, "to_apply" if op in ("call", "call-start") else "calls")
        if op == "while":
            f1, t1 = self._called_cost(ins, "condition")
            f2, t2 = self._called_cost(ins, "body")
            n = trip_count(self.module, comp, ins)  # counted as the builder counts it
            if n == 0:  # the condition runs once, the body never
                return f1, t1
            n = 1 if n is None else n
            return n * (f1 + f2), n * (t1 + t2)
        if op == "conditional":
            branches = self.module.calls(ins)
            if not branches:  # as a while without a body, malformed: not a free instruction
                raise HloParseError(
                    f"{ins.name}: conditional names no branch computation (branch_computations, "
                    "or true_computation and false_computation)"
                )
            costs = [self.computation_cost(b) for b in branches]
            return max(f for f, _ in costs), max(t for _, t in costs)
        if op == "reduce":
            n = elements(comp.by_name[ins.operands[0]].shape)
            f, t = self._called_cost(ins, "to_apply")
            return n * max(1.0, f), n * t
        if op == "reduce-window":
            f, t = self._called_cost(ins, "to_apply")
            w = _window_size(ins) * _array(ins.shape).elements
            return w * max(1.0, f), w * t
        if op == "select-and-scatter":
            src = operand(1).elements
            fs, _ = self._called_cost(ins, "select")
            fc, _ = self._called_cost(ins, "scatter")
            return src * _window_size(ins) * max(1.0, fs) + src * fc, 0.0
        if op == "scatter":
            n = (len(ins.operands) - 1) // 2
            upd = sum(operand(k).elements for k in range(n + 1, len(ins.operands)))
            f, t = self._called_cost(ins, "to_apply")
            return upd * f, upd * t
        if op == "map":
            f, t = self._called_cost(ins, "to_apply")
            return out * f, out * t
        if op == "sort":
            x = operand(0)
            dims = ins.attr_ints("dimensions")
            n = x.dims[dims[0]] if dims and x.dims else 1
            f, _ = self._called_cost(ins, "to_apply")
            return x.elements * math.ceil(_log2(n)) * max(1.0, f), 0.0
        if op == "fft":
            length = math.prod(ins.attr_ints("fft_length")) or 1
            return 5.0 * out * _log2(length), 0.0
        if op == "cholesky":
            a = operand(0)
            n = a.dims[-1] if a.dims else 1
            return a.elements * n / 3.0, 0.0
        if op == "triangular-solve":
            a = operand(0)
            return float(out * (a.dims[-1] if a.dims else 1)), 0.0
        if op.startswith("batch-norm"):
            x = operand(0)
            return 5.0 * x.elements, float(
                x.dims[int(ins.attrs.get("feature_index", 0))] if x.dims else 1
            )
        if op == "custom-call":
            return self._custom_call_cost(ins, comp, out)
        return 0.0, 0.0

    def _custom_call_cost(
        self, ins: HloInstruction, comp: HloComputation, out: int
    ) -> tuple[float, float]:
        called = self.module.calls(ins)
        if called:
            f = t = 0.0
            for c in called:
                a, b = self.computation_cost(c)
                f, t = f + a, t + b
            return f, t
        target = ins.attrs.get("custom_call_target", "").strip('"').lower()
        shapes = [_array(comp.by_name[o].shape) for o in ins.operands]
        first = shapes[0] if shapes else ArrayShape("token", ())
        n = first.dims[-1] if first.dims else 1
        if ("matmul" in target or "gemm" in target) and shapes:
            k = _gemm_contraction(ins, first)
            return 2.0 * _array(ins.shape).elements * (n if k is None else k), 0.0
        if "trsm" in target and shapes:
            return float(_array(ins.shape).elements * n), 0.0
        if "getrf" in target:
            return first.elements * n * 2.0 / 3.0, 0.0
        if "potrf" in target:
            return first.elements * n / 3.0, 0.0
        self.unknown_custom_calls.add(target or ins.name)
        return 0.0, 0.0

    # -- in-place pairs -----------------------------------------------------------------

    def _follow(
        self, comp: HloComputation, ins: HloInstruction, index: tuple[int, ...]
    ) -> tuple[HloInstruction, tuple[int, ...]]:
        """Follow tuple / get-tuple-element indirection back to the source of ``index``
        (:class:`HloParseError` for a cycle of them: an instruction that reads itself)."""
        for _ in range(len(comp.instructions) + 1):
            if ins.opcode == "tuple" and index:
                ins, index = comp.by_name[ins.operands[index[0]]], index[1:]
            elif ins.opcode == "get-tuple-element":
                index = (int(ins.attrs["index"]),) + index
                ins = comp.by_name[ins.operands[0]]
            else:
                return ins, index
        raise HloParseError(
            f"computation {comp.name}: tuple / get-tuple-element at %{ins.name} reads itself"
        )

    def in_place_pairs(
        self, ins: HloInstruction
    ) -> list[tuple[int, tuple[int, ...], tuple[int, ...]]]:
        """(operand number, operand shape index, output shape index) that must share storage.

        XLA's table of what it updates in place by default (``AliasInfo::
        GetInPlaceInputOutputPairs``); output indices are into ``ins``'s whole shape:

        - ``dynamic-update-slice``, ``scatter`` and ``all-reduce-start`` update operand 0
          (with several operands, operand ``i`` is output element ``i``); an
          ``all-reduce-start`` whose ``backend_config`` names ``nvshmem`` updates none;
        - ``ragged-all-to-all`` writes into operand 1 (its output buffer);
        - the in-place ``collective-permute`` (4 operands and ``slice_sizes``) writes
          into operand 1, a ``collective-permute-start`` of that form into operand 1 as
          its output element 1 (each element of a tuple operand 1 as well);
        - ``set-dimension-size`` is operand 0;
        - ``output_to_operand_aliasing`` of custom calls, fusions and ``async-start`` is
          honoured; a fusion whose output comes from an in-place update of a fused
          parameter updates that operand.
        """
        if id(ins) not in self._pairs:
            self._pairs[id(ins)] = None  # being found: met again, a fusion reaches itself
            try:
                self._pairs[id(ins)] = self._in_place_pairs(ins)
            except BaseException:
                del self._pairs[id(ins)]
                raise
        pairs = self._pairs[id(ins)]
        if pairs is None:
            raise HloParseError(_calls_itself(self.module.computation(ins, "calls").name))
        return pairs

    def _in_place_pairs(
        self, ins: HloInstruction
    ) -> list[tuple[int, tuple[int, ...], tuple[int, ...]]]:
        op = ins.opcode
        if op == "dynamic-update-slice":
            return [(0, (), ())]
        if op in ("scatter", "all-reduce-start"):
            if (
                op == "all-reduce-start"
                and "nvshmem" in ins.attrs.get("backend_config", "").lower()
            ):
                return []  # XLA's one-shot NVSHMEM all-reduce needs separate buffers
            n = (len(ins.operands) - 1) // 2 if op == "scatter" else len(ins.operands)
            return [(0, (), ())] if n == 1 else [(k, (), (k,)) for k in range(n)]
        if op == "ragged-all-to-all" and len(ins.operands) > 1:
            return [(1, (), ())]
        if op == "set-dimension-size" and ins.operands:
            return [(0, (), ())]
        if (
            op in ("collective-permute", "collective-permute-start")
            and len(ins.operands) == 4
            and "slice_sizes" in ins.attrs
        ):
            return _permute_pairs(ins.shape, (1,) if op == "collective-permute-start" else ())
        pairs = []
        if (
            op in ("custom-call", "fusion", "async-start")
            and "output_to_operand_aliasing" in ins.attrs
        ):
            for out_idx, opnum, op_idx, _ in parse_alias_list(
                ins.attrs["output_to_operand_aliasing"]
            ):
                pairs.append((opnum, op_idx, out_idx))
        if op == "fusion":
            fused = self.module.computation(ins, "calls")
            for index, _ in shape_leaves(ins.shape):
                src, sidx = self._follow(fused, fused.root, index)
                for opnum, op_idx, out_idx in self.in_place_pairs(src):
                    if out_idx != sidx:
                        continue
                    inp, iidx = self._follow(fused, fused.by_name[src.operands[opnum]], op_idx)
                    if inp.opcode == "fusion":
                        for o2, oi2, out2 in self.in_place_pairs(inp):
                            if out2 == iidx:
                                inp, iidx = self._follow(
                                    fused, fused.by_name[inp.operands[o2]], oi2
                                )
                    while inp.opcode == "bitcast":
                        inp = fused.by_name[inp.operands[0]]
                    if inp.opcode == "parameter":
                        pair = (int(inp.literal), iidx, index)
                        if pair not in pairs:
                            pairs.append(pair)
        return pairs

    # -- bytes ----------------------------------------------------------------------------

    def _users_of(self, comp: HloComputation) -> dict[str, list[tuple[HloInstruction, int]]]:
        if comp.name not in self._users:
            users: dict[str, list[tuple[HloInstruction, int]]] = {}
            for u in comp.instructions:
                for k, o in enumerate(u.operands):
                    users.setdefault(o, []).append((u, k))
            self._users[comp.name] = users
        return self._users[comp.name]

    def _read_bytes(self, comp: HloComputation, name: str, in_place: bool) -> int | None:
        """Bytes read of value ``name`` if it is only sliced / updated in place, else None."""
        total = 0
        for user, k in self._users_of(comp).get(name, []):
            op = user.opcode
            if op == "bitcast":
                sub = self._read_bytes(comp, user.name, in_place)
                if sub is None:
                    return None
                total += sub
            elif op in ("slice", "dynamic-slice", "gather") and k == 0:
                total += shape_bytes(user.shape)
            elif op in ("dynamic-update-slice", "scatter") and k == 0 and in_place:
                pass
            else:
                return None
        return total

    def _update_bytes(
        self, comp: HloComputation, ins: HloInstruction, index: tuple[int, ...]
    ) -> int:
        """Bytes an in-place update writes into its output leaf ``index``."""
        if ins.opcode == "dynamic-update-slice":
            return shape_bytes(comp.by_name[ins.operands[1]].shape)
        n = (len(ins.operands) - 1) // 2
        k = index[0] if index else 0
        return shape_bytes(comp.by_name[ins.operands[n + 1 + k]].shape)

    def operand_bytes(self, ins: HloInstruction, comp: HloComputation, k: int, full: int) -> int:
        """Bytes instruction ``ins`` reads of its (array) operand ``k`` of ``full`` bytes."""
        op = ins.opcode
        if op in ("slice", "dynamic-slice", "gather") and k == 0:
            return min(full, shape_bytes(ins.shape))
        if op == "dynamic-update-slice" and k == 0:
            return 0
        if op == "scatter" and k < (len(ins.operands) - 1) // 2:
            return 0
        if op == "fusion":
            fused = self.module.computation(ins, "calls")
            in_place = any(p[0] == k for p in self.in_place_pairs(ins))
            try:
                param = fused.parameter(k)
            except KeyError:
                return full
            read = self._read_bytes(fused, param.name, in_place)
            if read is not None:
                return min(full, read)
        return full

    def output_bytes(
        self, ins: HloInstruction, comp: HloComputation, index: tuple[int, ...], full: int
    ) -> int:
        """Bytes instruction ``ins`` writes of its output leaf ``index`` of ``full`` bytes."""
        if ins.opcode in ("dynamic-update-slice", "scatter"):
            return min(full, self._update_bytes(comp, ins, index))
        if ins.opcode == "fusion" and any(p[2] == index for p in self.in_place_pairs(ins)):
            fused = self.module.computation(ins, "calls")
            src, sidx = self._follow(fused, fused.root, index)
            if src.opcode in ("dynamic-update-slice", "scatter"):
                return min(full, self._update_bytes(fused, src, sidx))
        return full
