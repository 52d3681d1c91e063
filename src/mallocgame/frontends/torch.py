"""PyTorch frontend: an ``nn.Module`` and example inputs -> Program, through ``torch.export``.

Needs the optional extra ``torch`` (``pip install 'mallocgame[torch]'``, pinned to
``torch==2.13.0``); without it every entry point raises :class:`TorchMissingError`.
Nothing of PyTorch is forked or hooked: the graph is PyTorch's own capture.

Capture
    ``torch.export.export(module, example_inputs)`` then ``run_decompositions()``:
    a functional graph of core ATen operations in execution order, each node
    carrying its FakeTensor (``node.meta["val"]``: shape, dtype). The module is
    captured in the mode it is in (``.eval()`` for inference, ``.train()`` for
    batch-norm statistics updates). Modules and inputs on the ``meta`` device cost no
    memory, so models are captured at their real sizes. What is captured is
    :mod:`mallocgame.frontends.torch_adapter`'s adapter around the module: every tensor
    of its outputs (dataclasses and caches included), its tied parameters and the
    parameters of a module used under several names as one input each. Where the core
    ATen decomposition fails, the functional ATen graph without decompositions is taken
    (``source["capture"] = "aten"``, the failure in ``source["notes"]``). A
    :class:`TrainingStep` captures a training step instead:
    ``torch.export.experimental._export_forward_backward`` (AOT autograd's joint graph)
    gives the forward pass, the loss (the module's first output, a scalar, or one the
    step names) and the backward pass with the parameters' gradients as outputs; the
    optimizer's update (:data:`OPTIMIZERS`) is then appended, one instruction per
    parameter, from its per-element arithmetic (torch.export does not trace ``step()``).

What becomes what
    - **Program inputs** (``def_time = -1``): the placeholders: parameters, buffers,
      lifted constants and the user's inputs.
    - **Instructions**: every other node that makes a tensor, in graph order (the
      schedule). Its operands are the tensors its arguments refer to (each once, in
      argument order), its outputs one tensor per non-empty tensor it returns (an
      output of zero elements holds no bytes and is left out).
    - **Views make no instruction**: an ATen op whose schema returns an alias of its
      input (``view``, ``permute``, ``expand``, ``slice``, ``alias``, ...; also
      ``_unsafe_view``) and ``getitem`` of a multi-output op: their result *is* the
      operand's tensor. Nodes that make no tensor (assertions, symbolic sizes) are
      skipped.
    - **Sizes** in bytes: ``numel * element_size`` of the FakeTensor; each operand and
      output moves its tensor's size (with ``granularity="node"``: the part it reads,
      below).
    - **Live ranges**: ``def_time`` the defining instruction; ``last_use_time`` its
      last reader (a tensor never read ends where it starts); the graph's outputs
      (user outputs, the loss, gradients, mutated buffers' new values) are
      ``live_out`` and live to ``T-1``.
    - **Flops** of one execution: PyTorch's own formulas where it has one
      (``torch.utils.flop_counter``'s registry: ``mm``, ``addmm``, ``bmm``,
      ``convolution`` and its backward, attention kernels), else from the shapes
      (:func:`_shape_cost`): 1 flop per output element for elementwise arithmetic,
      1 transcendental per output element for ``exp``/``tanh``/``erf``/... (and
      ``gelu``, ``_softmax`` with a few flops each), input elements for reductions,
      output elements x window for pooling, a few flops per element for
      normalizations, 0 for data movement (copies, concatenation, gathers, fills).

Alias groups (unions of tensors whose buffers, definitions and reads, form one group)
    - a **mutated buffer or input** (the graph signature's ``BUFFER_MUTATION`` /
      ``USER_INPUT_MUTATION``: batch-norm running statistics in training mode, an
      input updated in place) with the output holding its new value: PyTorch writes
      it into the input's storage. Where that value is another input's storage
      (``buf.copy_(w)``), a ``copy_`` instruction is appended instead (after the graph's
      operations, where the functional program writes it back): it reads the value and
      writes a new tensor of the input's size, which joins the input;
    - an **in-place op** (``relu_``, ``add_``, ``x.mul_(2)``; functionalized by the
      capture into ``relu``, ``add``, ...; recognized by the node's provenance,
      ``meta["from_node"]``) with the tensor it updated; on a view (``x[:, :2].mul_(2)``:
      ``mul`` of the slice, then ``slice_scatter`` into ``x``), the scatter's result too;
    - an **optimizer update** with the parameter (and moment) it overwrites.

Granularity
    ``"tensor"`` (default): the paper's unit, one decision per buffer (every operand
    and output of every instruction). ``"node"``: the MARL paper's unit, where each
    graph node has one weight allocation and one activation allocation: the
    parameters and buffers of one module (``conv.weight`` and ``conv.bias``; a
    batch norm's four) are merged into one program input of their summed size
    (an instruction reading some of them reads those parts: its operand bytes
    are the sum of the distinct parts it reads), and all the buffers of that input form
    one alias group (one decision, with the statistics it updates in place); every
    instruction's outputs are merged into one tensor (a consumer reads the parts it
    uses, their sum likewise), and
    all its buffers, the definition and every read, form one alias group (one
    decision for the activation's whole life). Both granularities of one module
    have the same instructions and flops; the peak live bytes can be higher per node,
    where an operation's outputs are one allocation that lives as long as its
    longest-lived part (a max pool's indices, never read, live as long as its output).

Errors: :class:`TorchMissingError` (torch not installed), :class:`ExportError` (the
module cannot be captured), :class:`TorchFrontendError` (anything else the frontend
cannot model, e.g. dynamic shapes, an op whose output size depends on tensor values such
as ``nonzero``, control flow: ``torch.cond``, ``scan``, ``while_loop``); all
:class:`~mallocgame.errors.MallocGameError`.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import logging
import math
import operator
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from mallocgame.errors import MallocGameError, one_line
from mallocgame.frontends.xla import (
    _Tensor,
)  # a tensor under construction: name, size, def_time, shape, reads
from mallocgame.nested import nested_leaves
from mallocgame.program import Program, ProgramInstruction, ProgramTensor, validate_program

__all__ = [
    "TorchFrontendError",
    "TorchMissingError",
    "ExportError",
    "TorchModel",
    "TrainingStep",
    "OPTIMIZERS",
    "extract_torch",
    "extract_exported",
    "resolve_factory",
    "meta_inputs",
]

GRANULARITIES = ("tensor", "node")
OPTIMIZERS = ("none", "sgd", "adamw")
"""The update a training step ends with: ``none`` (the gradients are the step's outputs), ``sgd``
(``p -= lr g``, as ``torch.optim.SGD`` without momentum) or ``adamw`` (``torch.optim.AdamW``:
two moments per parameter, of its size, kept between steps)."""
OPTIMIZER_COST = {"none": (0.0, 0.0), "sgd": (2.0, 0.0), "adamw": (12.0, 1.0)}
"""(flops, transcendentals) per parameter element of an optimizer's update: SGD's
multiply-add; AdamW's decay, the two moments' updates, the square root, its bias
correction and epsilon, and the scaled division (PyTorch's ``_single_tensor_adamw``)."""


@dataclass(frozen=True)
class TrainingStep:
    """What a captured training step is: the forward pass, ``loss`` (one of
    :data:`~mallocgame.frontends.torch_adapter.LOSSES`; ``"output"``: the module's first
    output), the backward pass to every parameter's gradient, then ``optimizer``'s update
    (one of :data:`OPTIMIZERS`)."""

    loss: str = "output"
    optimizer: str = "none"

    def __post_init__(self) -> None:
        from mallocgame.frontends.torch_adapter import LOSSES

        if self.loss not in LOSSES:
            raise TorchFrontendError(f"unknown loss {self.loss!r} (have: {', '.join(LOSSES)})")
        if self.optimizer not in OPTIMIZERS:
            raise TorchFrontendError(
                f"unknown optimizer {self.optimizer!r} (have: {', '.join(OPTIMIZERS)})"
            )

    @property
    def needs_labels(self) -> bool:
        """Whether the loss takes labels (``model``, ``cross-entropy``)."""
        from mallocgame.frontends.torch_adapter import NEEDS_LABELS

        return self.loss in NEEDS_LABELS


class TorchFrontendError(MallocGameError):
    """The PyTorch frontend cannot turn its input into a program (the message says why)."""


class TorchMissingError(TorchFrontendError):
    """PyTorch is not installed (the optional extra ``mallocgame[torch]``)."""


class ExportError(TorchFrontendError):
    """``torch.export`` could not capture the module (the reason in one line)."""


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise TorchMissingError(
            "the PyTorch frontend needs torch (pip install 'mallocgame[torch]', torch==2.13.0)"
        ) from None
    return torch


def torch_version() -> str | None:
    """The installed torch's version, or ``None``."""
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:
        return None


# ---------------------------------------------------------------------------------------
# Work per operation.

_TRANSCENDENTAL = frozenset(
    [
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "tanh",
        "sigmoid",
        "erf",
        "erfc",
        "erfinv",
        "rsqrt",
        "sqrt",
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "atan2",
        "sinh",
        "cosh",
        "asinh",
        "acosh",
        "atanh",
        "pow",
        "reciprocal",
    ]
)
_MOVES = frozenset(  # data movement and fills: no arithmetic
    [
        "clone",
        "copy",
        "_to_copy",
        "cat",
        "stack",
        "constant_pad_nd",
        "index",
        "index_select",
        "gather",
        "embedding",
        "slice_scatter",
        "select_scatter",
        "as_strided_scatter",
        "scatter",
        "full",
        "full_like",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "empty",
        "empty_like",
        "empty_strided",
        "arange",
        "scalar_tensor",
        "lift_fresh_copy",
        "repeat",
        "flip",
        "roll",
        "index_put",
        "masked_fill",
        "_unsafe_index",
    ]
)
_REDUCTIONS = frozenset(
    [
        "sum",
        "mean",
        "amax",
        "amin",
        "max",
        "min",
        "prod",
        "var",
        "var_mean",
        "std",
        "argmax",
        "argmin",
        "any",
        "all",
        "logsumexp",
    ]
)
_POOLS = frozenset(
    ["max_pool2d_with_indices", "max_pool3d_with_indices", "avg_pool2d", "avg_pool3d"]
)
# (flops, transcendentals) per element of the first (input) operand.
_PER_ELEMENT = {
    "_softmax": (4.0, 1.0),
    "_log_softmax": (4.0, 1.0),
    "_softmax_backward_data": (3.0, 0.0),
    "_log_softmax_backward_data": (3.0, 1.0),
    "gelu": (5.0, 1.0),
    "gelu_backward": (8.0, 1.0),
    "native_layer_norm": (7.0, 0.0),
    "layer_norm": (7.0, 0.0),  # undecomposed graphs (see _decomposed)
    "rms_norm": (4.0, 1.0),
    "native_layer_norm_backward": (12.0, 0.0),
    "_native_batch_norm_legit_no_training": (2.0, 0.0),
    "_native_batch_norm_legit_functional": (7.0, 0.0),
    "_native_batch_norm_legit": (7.0, 0.0),
    "native_batch_norm_backward": (12.0, 0.0),
}


def _numel(value: Any) -> int:
    return int(value.numel()) if hasattr(value, "numel") else 0


def _tensors_in(tree: Any) -> list[Any]:
    if isinstance(tree, (list, tuple)):
        return [x for sub in tree for x in _tensors_in(sub)]
    return [tree] if hasattr(tree, "numel") and hasattr(tree, "dtype") else []


def _shape_cost(name: str, args: Sequence[Any], out: Any) -> tuple[float, float]:
    """(flops, transcendentals) of one ATen op from its argument and result shapes."""
    outs = _tensors_in(out)
    ins = _tensors_in(list(args))
    out_elems = float(_numel(outs[0])) if outs else 0.0
    in_elems = float(_numel(ins[0])) if ins else 0.0
    if name in _ATTENTION and len(ins) >= 3:
        return _attention_cost(ins[0].shape, ins[1].shape, ins[2].shape)
    if name in _ATTENTION_BACKWARD and len(ins) >= 4:  # (grad_out, query, key, value, ...)
        return _attention_backward_cost(ins[1].shape, ins[2].shape, ins[3].shape)
    if name in _PER_ELEMENT:
        flops, trans = _PER_ELEMENT[name]
        return flops * in_elems, trans * in_elems
    if name in _TRANSCENDENTAL:
        return 0.0, out_elems
    if name in _MOVES or not outs:
        return 0.0, 0.0
    if name in _REDUCTIONS or name.startswith("_adaptive_avg_pool"):
        return in_elems, 0.0
    if name in _POOLS:
        kernel = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else ()
        return out_elems * float(math.prod(int(k) for k in kernel) if kernel else 1), 0.0
    if (
        name.endswith("_backward") and ins
    ):  # a backward op without a formula: its gradient's elements
        return float(max(_numel(x) for x in ins)), 0.0
    return out_elems, 0.0


_ATTENTION = frozenset(
    ["scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu"]
)
"""Fused attention ops without a formula in ``torch.utils.flop_counter`` (the CPU kernel
and the undecomposed op): (query, key, value, ...)."""
_ATTENTION_BACKWARD = frozenset(["_scaled_dot_product_flash_attention_for_cpu_backward"])
"""Their backward ops: (grad_out, query, key, value, ...)."""


def _attention_backward_cost(
    query: Sequence[int], key: Sequence[int], value: Sequence[int]
) -> tuple[float, float]:
    """(flops, transcendentals) of attention's backward pass, as ``torch.utils.flop_counter``
    counts the fused kernels' (``sdpa_backward_flop_count``): the scores recomputed (``2 L S
    E``), the gradients of the scores and of the values (``2 L S Ev`` each), of the queries
    and of the keys (``2 L S E`` each), for each of the leading query dimensions; and one
    exponential per score, recomputed."""
    rows = float(math.prod(int(d) for d in query[:-1]))
    keys = float(key[-2])
    e, ev = int(query[-1]), int(value[-1])
    return 2.0 * rows * keys * (3 * e + 2 * ev), rows * keys


def _attention_cost(
    query: Sequence[int], key: Sequence[int], value: Sequence[int]
) -> tuple[float, float]:
    """(flops, transcendentals) of attention with query ``[..., L, E]``, key ``[..., S, E]`` and
    value ``[..., S, Ev]``: the two matmuls (``2 L S E + 2 L S Ev`` for each of the leading
    query dimensions, as ``torch.utils.flop_counter`` counts its fused kernels; grouped keys
    and values broadcast over the query's heads) and one exponential per score."""
    rows = float(math.prod(int(d) for d in query[:-1]))
    keys = float(key[-2])
    return 2.0 * rows * keys * (int(query[-1]) + int(value[-1])), rows * keys


def _op_cost(
    torch: Any, target: Any, args: Sequence[Any], kwargs: dict[str, Any], out: Any
) -> tuple[float, float]:
    """PyTorch's own flop formula for ``target`` where it has one; for an op that is not core
    ATen (an undecomposed graph's ``linear``, ``matmul``, ...) the count of
    ``torch.utils.flop_counter.FlopCounterMode`` running it on the node's fake tensors
    (the core ops it decomposes into) where that is not zero; else :func:`_shape_cost`."""
    from torch.utils.flop_counter import flop_registry

    packet = getattr(target, "overloadpacket", None)
    formula = flop_registry.get(packet) if packet is not None else None
    if formula is not None:
        try:
            return float(formula(*args, **kwargs, out_val=out)), 0.0
        except Exception:
            pass
    name = _op_name(target)
    if (
        packet is not None
        and torch.Tag.core not in getattr(target, "tags", (torch.Tag.core,))
        and name not in _ATTENTION
        and name not in _ATTENTION_BACKWARD
    ):
        counted = _counted_flops(torch, target, args, kwargs)
        if counted > 0:
            return counted, 0.0
    return _shape_cost(name, args, out)


def _counted_flops(torch: Any, target: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> float:
    """The flops ``FlopCounterMode`` counts for ``target`` on fake tensors (0 where the arguments
    hold no fake tensor, so nothing is ever allocated, or the op cannot run on them)."""
    from torch.utils.flop_counter import FlopCounterMode

    tensors = _tensors_in([*args, *kwargs.values()])
    mode = torch._guards.detect_fake_mode(tensors) if tensors else None
    if mode is None:
        return 0.0
    try:
        with mode, FlopCounterMode(display=False) as counter:
            target(*args, **kwargs)
    except Exception:
        return 0.0
    return float(counter.get_total_flops())


def _op_name(target: Any) -> str:
    packet = getattr(target, "overloadpacket", None)
    return packet.__name__ if packet is not None else getattr(target, "__name__", str(target))


# ---------------------------------------------------------------------------------------
# The graph walk.


@dataclass(frozen=True)
class _Ref:
    """What a graph value refers to: a program tensor, the bytes of it that value is, and
    which part of the tensor they are (node granularity merges parts into one tensor: a
    module's parameters, an op's outputs; ``""``: the whole tensor)."""

    tensor: int
    nbytes: int
    part: str = ""


def _shape_str(value: Any) -> str:
    dtype = str(value.dtype).removeprefix("torch.")
    return f"{dtype}[{','.join(str(int(d)) for d in value.shape)}]"


def _symbolic_shape(value: Any) -> str:
    """``dtype[d0,d1,...]`` of a tensor whose dimensions may be symbols (``float32[u0,1]``)."""
    dtype = str(value.dtype).removeprefix("torch.")
    return f"{dtype}[{','.join(str(d) for d in value.shape)}]"


def _shape_elements(shape: str) -> int:
    """The number of elements of a shape string ``dtype[d0,d1,...]`` (:func:`_shape_str`)."""
    dims = shape.partition("[")[2].rstrip("]")
    return math.prod(int(d) for d in dims.split(",") if d)


def _nbytes(value: Any, where: str) -> int:
    try:
        return int(value.numel()) * int(value.element_size())
    except (TypeError, ValueError, RuntimeError) as exc:  # a SymInt that is not a number
        raise TorchFrontendError(
            f"{where}: size is not static ({one_line(exc)}); export with static example inputs"
        ) from None


def _data_dependent(value: Any) -> bool:
    """Whether the shape of ``value`` (a FakeTensor) has a size known only when the op runs: an
    unbacked symbol (``nonzero``, ``unique``, ``masked_select``: ``[u0, 1]``)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    return bool(free_unbacked_symbols(value))


def _dynamic(value: Any) -> bool:
    """Whether a dimension of ``value`` (a FakeTensor) is a symbol that is not a constant: a
    dynamic shape (``torch.export.Dim``: ``[s77, 8]``) or a data-dependent size."""
    from torch.fx.experimental.symbolic_shapes import is_concrete_int

    return not all(is_concrete_int(d) for d in value.shape)


def _refuse_dynamic(label: str, where: str, value: Any) -> None:
    """A :class:`TorchFrontendError` where ``value`` (of the node ``where``) has a dynamic shape:
    its size in the program would be the example's, silently."""
    if _dynamic(value):
        raise TorchFrontendError(
            f"{label}: {where} has a dynamic shape ({_symbolic_shape(value)}): a program's sizes "
            "are static, dynamic shapes are not modelled; export without dynamic_shapes"
        )


def _writes_in_place(target: Any) -> bool:
    """An ATen op that writes one of its arguments (``relu_``, ``add_``, ``copy_``, an ``out=``
    variant): its schema marks the argument as written (``Tensor(a!)``)."""
    schema = getattr(target, "_schema", None)
    return schema is not None and any(
        a.alias_info is not None and a.alias_info.is_write for a in schema.arguments
    )


def _is_view(target: Any) -> bool:
    """An ATen op whose result aliases its first argument without writing it."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return False
    if schema.name == "aten::_unsafe_view":
        return True
    returns = schema.returns
    return bool(returns) and all(
        r.alias_info is not None and not r.alias_info.is_write for r in returns
    )


_SCATTERS = frozenset(["slice_scatter", "select_scatter", "diagonal_scatter", "as_strided_scatter"])
"""The functional ops that write a view's new contents back into its base."""


def _in_place_origin(node: Any) -> str | None:
    """The in-place ATen op of the module that ``node`` was functionalized from (``relu_`` for
    the ``relu`` of ``x.relu_()``; ``mul_`` for both the ``mul`` and the ``slice_scatter`` of
    ``x[:, :2].mul_(2)``), by the node's provenance ``meta["from_node"]``; else ``None``."""
    sources = node.meta.get("from_node") or []
    if not sources:
        return None
    src = sources[-1]
    while getattr(src, "from_node", None):
        src = src.from_node[-1]
    parts = str(getattr(src, "target", "")).split(".")
    if (
        len(parts) != 3
        or parts[0] != "aten"
        or not parts[1].endswith("_")
        or parts[1].startswith("_")
    ):
        return None
    return parts[1]


def _updates_in_place(node: Any) -> bool:
    """Whether ``node``'s first output is stored where its first argument was: the functional
    form of an in-place op (``relu_`` -> ``relu``), or the scatter that writes an in-place op's
    result on a view back into the view's base."""
    origin = _in_place_origin(node)
    if origin is None:
        return False
    name = _op_name(node.target)
    return origin[:-1] == name or name in _SCATTERS


class _Builder:
    """Walks an exported graph in order; see the module docstring for what becomes what."""

    def __init__(
        self, torch: Any, ep: Any, granularity: str, optimizer: str = "none", name: str = ""
    ):
        self.torch = torch
        self.name = name  # the program's, for messages
        self.ep = ep
        self.node_level = granularity == "node"
        self.optimizer = optimizer
        self.tensors: list[_Tensor] = []
        self.instrs: list[ProgramInstruction] = []
        self.aliases: list[tuple[int, int]] = []  # pairs of tensors that share one storage
        self.units: set[int] = (
            set()
        )  # tensors whose buffers form a group on their own (node granularity)
        self.env: dict[str, Any] = {}  # fx node name -> _Ref, tuple of refs, or None
        # (owned by the module: a parameter, buffer or constant?, its target or name) ->
        # tensor: a buffer ``x`` and a forward argument ``x`` are two inputs
        self.placeholder_tensor: dict[tuple[bool, str], int] = {}
        self.placeholder_value: dict[tuple[bool, str], Any] = {}  # the same keys -> FakeTensor
        self.notes: list[str] = []
        self.new_values = self._new_values()

    def _new_values(self) -> set[tuple[str, int | None]]:
        """The values that are a mutated input's new contents: ``(producer node, output index)``."""
        from torch.export.graph_signature import OutputKind

        output = next(n for n in self.ep.graph.nodes if n.op == "output")
        found: set[tuple[str, int | None]] = set()
        for spec, value in zip(self.ep.graph_signature.output_specs, output.args[0]):
            if spec.kind not in (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION):
                continue
            if getattr(value, "target", None) is operator.getitem:
                found.add((value.args[0].name, int(value.args[1])))
            elif hasattr(value, "name"):
                found.add((value.name, None))
        return found

    def new_tensor(self, name: str, size: int, def_time: int, shape: str) -> int:
        self.tensors.append(_Tensor(name, size, def_time, shape, []))
        return len(self.tensors) - 1

    def inputs(self) -> None:
        from torch.export.graph_signature import InputKind

        weights: dict[str, int] = {}  # owner module -> merged tensor (node granularity)
        specs = {
            s.arg.name: s for s in self.ep.graph_signature.input_specs if hasattr(s.arg, "name")
        }
        for node in self.ep.graph.nodes:
            if node.op != "placeholder":
                continue
            value = node.meta.get("val")
            spec = specs.get(node.name)
            if not hasattr(value, "numel"):
                self.env[node.name] = None
                continue
            _refuse_dynamic(self.name, f"the input {node.name}", value)
            nbytes = _nbytes(value, node.name)
            label = (spec.target if spec is not None and spec.target else None) or node.name
            owned = spec is not None and spec.kind in (
                InputKind.PARAMETER,
                InputKind.BUFFER,
                InputKind.CONSTANT_TENSOR,
            )
            if self.node_level and owned:
                owner = label.rpartition(".")[0]
                if owner not in weights:
                    weights[owner] = self.new_tensor(f"{owner or '<module>'}.*", 0, -1, "")
                    self.units.add(weights[owner])
                x = weights[owner]
                merged = self.tensors[x]
                merged.size += nbytes
                merged.shape = f"{merged.shape} {_shape_str(value)}".strip()
            else:
                x = self.new_tensor(label, nbytes, -1, _shape_str(value))
            self.placeholder_tensor[(owned, label)] = x
            self.placeholder_value[(owned, label)] = value
            self.env[node.name] = _Ref(x, nbytes, label if self.node_level and owned else "")

    def refs(self, arg: Any) -> list[_Ref]:
        """The tensor refs an argument tree refers to, in order."""
        fx = self.torch.fx
        found: list[_Ref] = []

        def visit(a: Any) -> Any:
            value = self.env.get(a.name)
            found.extend(r for r in _flat_refs(value))
            return a

        fx.node.map_arg(arg, visit)
        return found

    def call(self, node: Any) -> None:
        target = node.target
        if target is operator.getitem:
            base = self.env.get(node.args[0].name)
            self.env[node.name] = base[node.args[1]] if isinstance(base, tuple) else base
            return
        if isinstance(target, self.torch._ops.HigherOrderOperator):
            raise TorchFrontendError(
                f"{self.name}: {target.name()} ({node.name}) runs subgraphs (torch.cond, scan, "
                "while_loop, map): control flow is not modelled; capture one branch or an "
                "unrolled loop instead"
            )
        if _writes_in_place(target):
            raise TorchFrontendError(
                f"{self.name}: {_op_name(target)} ({node.name}) writes its input in place: the "
                "graph is not functional; call run_decompositions() on the exported program "
                "first"
            )
        value = node.meta.get("val")
        outs = [v for v in (value if isinstance(value, (list, tuple)) else [value])]
        if _is_view(target):
            base = self.refs(node.args[0])
            ref = base[0] if base else None
            self.env[node.name] = (
                tuple(ref for _ in outs) if isinstance(value, (list, tuple)) else ref
            )
            return
        if not any(hasattr(v, "numel") for v in outs):
            self.env[node.name] = None  # assertions, symbolic sizes: no data
            return
        for v in outs:
            if hasattr(v, "numel") and _data_dependent(v):
                raise TorchFrontendError(
                    f"{self.name}: {_op_name(target)} ({node.name}) makes a tensor whose size "
                    f"depends on tensor values ({_symbolic_shape(v)}): a program's sizes are "
                    "static, data-dependent sizes are not modelled"
                )
            if hasattr(v, "numel"):
                _refuse_dynamic(self.name, f"{_op_name(target)} ({node.name})", v)
        t = len(self.instrs)
        operands: list[int] = []
        operand_bytes: list[int] = []
        parts: list[set[str]] = []  # the parts of each operand read, each counted once
        for ref in self.refs((node.args, node.kwargs)):
            if ref.tensor in operands:
                i = operands.index(ref.tensor)
                if ref.part not in parts[i]:
                    parts[i].add(ref.part)
                    operand_bytes[i] = min(
                        operand_bytes[i] + ref.nbytes, self.tensors[ref.tensor].size
                    )
                continue
            operands.append(ref.tensor)
            operand_bytes.append(ref.nbytes)
            parts.append({ref.part})
        out_refs: list[_Ref | None] = []
        outputs: list[int] = []
        merged: int | None = None
        for i, v in enumerate(outs):
            if not hasattr(v, "numel") or _numel(v) == 0:
                out_refs.append(None)
                continue
            nbytes = _nbytes(v, node.name)
            index = i if isinstance(value, (list, tuple)) else None
            if self.node_level and (node.name, index) not in self.new_values:
                if merged is None:
                    merged = self.new_tensor(node.name, 0, t, "")
                    self.units.add(merged)
                    outputs.append(merged)
                m = self.tensors[merged]
                m.size += nbytes
                m.shape = f"{m.shape} {_shape_str(v)}".strip()
                out_refs.append(_Ref(merged, nbytes, f"{node.name}:{i}"))
            else:
                name = node.name if len(outs) == 1 else f"{node.name}{{{i}}}"
                x = self.new_tensor(name, nbytes, t, _shape_str(v))
                outputs.append(x)
                out_refs.append(_Ref(x, nbytes))
        meta = self.torch.fx.node.map_arg((node.args, node.kwargs), lambda a: a.meta.get("val"))
        flops, trans = _op_cost(self.torch, target, meta[0], meta[1], value)
        for x in operands:
            self.tensors[x].reads.append(t)
        self.instrs.append(
            ProgramInstruction(
                name=node.name,
                opcode=_op_name(target),
                operands=tuple(operands),
                outputs=tuple(outputs),
                operand_bytes=tuple(operand_bytes),
                output_bytes=tuple(self.tensors[x].size for x in outputs),
                flops=float(flops),
                transcendentals=float(trans),
            )
        )
        if outputs and node.args and _updates_in_place(node):
            updated = self.refs(node.args[0])
            if updated:
                self.aliases.append((updated[0].tensor, outputs[0]))
        self.env[node.name] = tuple(out_refs) if isinstance(value, (list, tuple)) else out_refs[0]

    def optimizer_update(self, gradients: list[tuple[int, int]]) -> None:
        """Append the optimizer's update of every parameter after the backward pass, in the
        order of the gradients (see :data:`OPTIMIZERS`): one instruction per parameter that
        reads it and its gradient (and AdamW's two moments, new program inputs of the
        parameter's size) and writes each of them in place (an alias with what it updates;
        the new values are live out). The gradients end at their update."""
        per_element = OPTIMIZER_COST[self.optimizer]
        for parameter, gradient in gradients:
            p = self.tensors[parameter]
            g = self.tensors[gradient]
            g.live_out = False
            t = len(self.instrs)
            updated = [parameter]
            if self.optimizer == "adamw":
                for moment in ("exp_avg", "exp_avg_sq"):
                    updated.append(self.new_tensor(f"{p.name}.{moment}", p.size, -1, p.shape))
            operands = [parameter, gradient, *updated[1:]]
            outputs = []
            for x in updated:
                new = self.new_tensor(f"{self.tensors[x].name}'", self.tensors[x].size, t, p.shape)
                self.tensors[new].live_out = True
                self.aliases.append((x, new))
                outputs.append(new)
            for x in operands:
                self.tensors[x].reads.append(t)
            elements = float(_shape_elements(p.shape))
            self.instrs.append(
                ProgramInstruction(
                    name=f"{self.optimizer}.{p.name}",
                    opcode=f"{self.optimizer}_update",
                    operands=tuple(operands),
                    outputs=tuple(outputs),
                    operand_bytes=tuple(self.tensors[x].size for x in operands),
                    output_bytes=tuple(self.tensors[x].size for x in outputs),
                    flops=per_element[0] * elements,
                    transcendentals=per_element[1] * elements,
                )
            )

    def copy_into(self, target: str, updated: int, source: _Ref, value: Any) -> None:
        """Append the copy of ``source`` (another input's storage: ``buf.copy_(w)``) into the
        mutated buffer or input ``updated`` (named ``target``), where the functional graph
        writes it back, after its last operation: an instruction reading ``source`` and writing
        a new tensor of ``value``'s size (``updated``'s: the new contents, a broadcast source
        included), live out, in ``updated``'s alias group. Joining ``source`` itself to
        ``updated`` would put two storages at one place."""
        t = len(self.instrs)
        nbytes = _nbytes(value, target)
        new = self.new_tensor(f"{target}'", nbytes, t, _shape_str(value))
        self.tensors[new].live_out = True
        self.tensors[source.tensor].reads.append(t)
        self.aliases.append((updated, new))
        self.instrs.append(
            ProgramInstruction(
                name=f"copy_.{target}",
                opcode="copy_",
                operands=(source.tensor,),
                outputs=(new,),
                operand_bytes=(source.nbytes,),
                output_bytes=(nbytes,),
                flops=0.0,
                transcendentals=0.0,
            )
        )

    def finish(self, name: str, source: dict[str, Any]) -> Program:
        from torch.export.graph_signature import OutputKind

        for node in self.ep.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "call_function":
                self.call(node)
            elif node.op == "output":
                results = node.args[0]
            elif node.op != "get_attr":
                raise TorchFrontendError(f"{name}: unsupported graph node {node.op} ({node.name})")
        result_refs = [
            _flat_refs(self.env.get(r.name)) if hasattr(r, "name") else [] for r in results
        ]
        specs = self.ep.graph_signature.output_specs
        storage = _storages(len(self.tensors), self.aliases)
        inputs = {storage[i] for i, x in enumerate(self.tensors) if x.def_time < 0}
        copies: list[tuple[Any, int, _Ref, Any]] = []  # (spec, input, new value, input's val)
        for spec, refs in zip(specs, result_refs):
            if spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION) and refs:
                owned = spec.kind == OutputKind.BUFFER_MUTATION
                updated = self.placeholder_tensor.get((owned, spec.target))
                if updated is None:
                    continue
                new = refs[0].tensor
                if storage[new] in inputs and storage[new] != storage[updated]:
                    value = self.placeholder_value[(owned, spec.target)]
                    copies.append((spec, updated, refs[0], value))  # another input's storage
                else:
                    self.aliases.append((updated, new))
        copied = {id(spec) for spec, _, _, _ in copies}
        for spec, refs in zip(specs, result_refs):
            for ref in refs if id(spec) not in copied else ():
                self.tensors[ref.tensor].live_out = True
        for spec, updated, ref, value in copies:
            self.copy_into(spec.target, updated, ref, value)
        if not self.instrs:
            raise TorchFrontendError(
                f"{name}: the graph has no operation that makes a tensor (nothing to decide)"
            )
        gradients: list[tuple[int, int]] = []  # (parameter, its gradient)
        for spec, refs in zip(specs, result_refs):
            if spec.kind == OutputKind.GRADIENT_TO_PARAMETER and refs:
                parameter = self.placeholder_tensor.get((True, spec.target))
                if parameter is not None:
                    gradients.append((parameter, refs[0].tensor))
        if self.optimizer != "none":
            self.optimizer_update(gradients)
        num_t = len(self.instrs)
        tensors = []
        for i, tensor in enumerate(self.tensors):
            end = num_t - 1 if tensor.live_out else max([tensor.def_time] + tensor.reads)
            tensors.append(
                ProgramTensor(
                    i, tensor.name, tensor.size, tensor.def_time, end, tensor.live_out, tensor.shape
                )
            )
        storage = _storages(len(self.tensors), self.aliases)
        buffers: dict[int, list[tuple[int, int]]] = {}
        members: dict[int, set[int]] = {}
        for t, ins in enumerate(self.instrs):
            for p, x in enumerate(ins.operands + ins.outputs):
                buffers.setdefault(storage[x], []).append((t, p))
                members.setdefault(storage[x], set()).add(x)
        groups = tuple(
            sorted(
                tuple(sorted(g))
                for root, g in buffers.items()
                if len(g) > 1 and (len(members[root]) > 1 or members[root] & self.units)
            )
        )
        program = Program(
            name=name,
            instructions=tuple(self.instrs),
            tensors=tuple(tensors),
            alias_groups=groups,
            source=dict(source, notes="; ".join(self.notes)),
        )
        validate_program(program)
        return program


def _storages(num_tensors: int, aliases: list[tuple[int, int]]) -> list[int]:
    """Per tensor, the smallest tensor id of its connected component under ``aliases``."""
    neighbours: dict[int, list[int]] = {}
    for a, b in aliases:
        neighbours.setdefault(a, []).append(b)
        neighbours.setdefault(b, []).append(a)
    label = list(range(num_tensors))
    seen: set[int] = set()
    for start in sorted(neighbours):
        if start in seen:
            continue
        component, stack = [], [start]
        seen.add(start)
        while stack:
            x = stack.pop()
            component.append(x)
            for y in neighbours[x]:
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        for x in component:
            label[x] = start  # the smallest: components are entered from their lowest id
    return label


def _flat_refs(value: Any) -> list[_Ref]:
    return nested_leaves(value, lambda v: isinstance(v, _Ref))


# ---------------------------------------------------------------------------------------
# Entry points.


def extract_exported(
    exported: Any,
    *,
    name: str,
    granularity: str = "tensor",
    source: dict[str, Any] | None = None,
    optimizer: str = "none",
) -> Program:
    """The program of a ``torch.export.ExportedProgram`` that is already functional (core ATen,
    after ``run_decompositions()``, or a joint forward-backward graph); see the module docstring.
    A graph with an in-place op (``relu_``, ``add_``: ``torch.export.export``'s graph before
    ``run_decompositions()``) is refused (:class:`TorchFrontendError`): its writes would be
    read as fresh tensors, without the alias groups they make.
    ``optimizer`` (:data:`OPTIMIZERS`; a joint graph's) appends the parameters' update.
    A graph whose sizes are not static (exported with ``dynamic_shapes``; an op whose output
    size depends on tensor values) is refused: :class:`TorchFrontendError`."""
    torch = _torch()
    if granularity not in GRANULARITIES:
        raise TorchFrontendError(
            f"unknown granularity {granularity!r} (have: {', '.join(GRANULARITIES)})"
        )
    if optimizer not in OPTIMIZERS:
        raise TorchFrontendError(f"unknown optimizer {optimizer!r} (have: {', '.join(OPTIMIZERS)})")
    if optimizer != "none" and granularity == "node":
        raise TorchFrontendError(
            f"{name}: an optimizer update is modelled per tensor: use granularity 'tensor'"
        )
    src = {"frontend": "torch", "torch": torch_version(), "granularity": granularity}
    src.update(source or {})
    notes = [str(n) for n in src.pop("notes", []) or []]
    if not isinstance(exported, torch.export.ExportedProgram):
        raise TorchFrontendError(
            f"{name}: expected a torch.export.ExportedProgram, got {type(exported).__name__}"
        )
    try:
        builder = _Builder(torch, exported, granularity, optimizer, name)
        builder.notes.extend(notes)
        builder.inputs()
        return builder.finish(name, src)
    except MallocGameError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
        raise TorchFrontendError(
            f"{name}: cannot read the exported graph ({one_line(exc)})"
        ) from None


@contextlib.contextmanager
def _quiet_capture() -> Iterator[None]:
    """Hold back torch's warnings, log records and stderr: a failed capture writes the graph
    and its guards there, and the reason is already the error's one line."""
    disabled = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", UserWarning)
            yield
    finally:
        logging.disable(disabled)


@dataclass(frozen=True)
class _Captured:
    """An exported, functional graph and how it was made (for the program's notes)."""

    exported: Any  # torch.export.ExportedProgram
    notes: tuple[str, ...]
    capture: str  # "core-aten" (decomposed) or "aten" (not decomposed: the fallback)


def _cuts_gradient(node: Any) -> bool:
    """Whether ``node`` (of ``torch.export.export``'s graph) passes no gradient to its inputs:
    ``detach()`` (``p.detach()``, ``p.data``) or a block under ``torch.no_grad()``
    (``wrap_with_set_grad_enabled(False, ...)``)."""
    target = node.target
    if getattr(target, "overloadpacket", None) is not None:
        return _op_name(target) == "detach"
    name = getattr(target, "name", None)
    return (
        callable(name)
        and name() == "wrap_with_set_grad_enabled"
        and bool(node.args)
        and node.args[0] is False
    )


def _unused_parameters(exported: Any) -> list[str]:
    """The parameters of ``exported`` (a training step's capture, its first user output the
    loss) that the loss does not depend on through a gradient (a pooler that a loss of the
    hidden states does not use; a parameter read only through ``detach()`` or under
    ``torch.no_grad()``): they get no gradient, so the joint graph is derived with them
    frozen."""
    from torch.export.graph_signature import InputKind, OutputKind

    nodes = {n.name: n for n in exported.graph.nodes}
    loss = next(
        (
            s.arg.name
            for s in exported.graph_signature.output_specs
            if s.kind == OutputKind.USER_OUTPUT and hasattr(s.arg, "name")
        ),
        None,
    )
    if loss is None or loss not in nodes:
        return []
    reached, stack = {loss}, [nodes[loss]]
    while stack:
        node = stack.pop()
        if _cuts_gradient(node):
            continue  # its inputs get no gradient through it
        for source in node.all_input_nodes:
            if source.name not in reached:
                reached.add(source.name)
                stack.append(source)
    return [
        str(spec.target)
        for spec in exported.graph_signature.input_specs
        if spec.kind == InputKind.PARAMETER and spec.arg.name not in reached
    ]


@contextlib.contextmanager
def _without_gradient(module: Any, names: Sequence[str]) -> Iterator[None]:
    """The parameters ``names`` of ``module`` without ``requires_grad`` while the block runs."""
    params = [module.get_parameter(n) for n in names]
    was = [p.requires_grad for p in params]
    try:
        for p in params:
            p.requires_grad_(False)
        yield
    finally:
        for p, flag in zip(params, was):
            p.requires_grad_(flag)


def _joint_graph(exported: Any, table: dict[Any, Any] | None) -> Any:
    """The training step's joint forward-backward graph of ``exported``: with ``table``
    ``None`` as ``_export_forward_backward`` derives it (core ATen decompositions), else with
    the decompositions of ``table`` alone (``{}``: none, the ATen graph)."""
    from torch.export.experimental import _export_forward_backward

    if table is None:
        return _export_forward_backward(exported)
    from torch.export.experimental import _copy_graph_module_and_signature, _remove_detach_pass
    from torch.export.exported_program import _decompose_exported_program

    joint = _decompose_exported_program(
        exported,
        cia_to_decomp={},
        python_decomp_table=table,
        joint_loss_index=0,
        decompose_custom_triton_ops=False,
    )
    graph, signature = _copy_graph_module_and_signature(joint)
    _remove_detach_pass(graph, signature)
    return joint._update(graph, signature)


_CAPTURE_HINT = (
    "try static example inputs of the real shapes, the model in eval mode, or a factory that "
    "turns off what branches on tensor values"
)


def _export(
    torch: Any,
    module: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    step: TrainingStep | None,
    label: str,
) -> _Captured:
    """``module(*args, **kwargs)`` (through :class:`~mallocgame.frontends.torch_adapter.
    CaptureAdapter`) captured by ``torch.export``, then its training step derived or its graph
    decomposed to core ATen; where that decomposition fails, the functional ATen graph without
    decompositions (noted). Any failure is an :class:`ExportError` naming ``label``, the stage
    and what to try."""
    from mallocgame.frontends.torch_adapter import (
        AdapterError,
        CaptureAdapter,
        modules_shared_once,
        parameters_tied_once,
    )

    try:
        adapter = CaptureAdapter(module, None if step is None else step.loss)
    except AdapterError as exc:
        raise ExportError(f"{label}: {exc}") from None
    with modules_shared_once(module) as shared, parameters_tied_once(module) as ties:
        exported = _capture(torch, adapter, args, kwargs, label)
        unused = _unused_parameters(exported) if step is not None else []
        with _without_gradient(module, unused):
            if unused:  # captured again: a parameter's requires_grad is part of the capture
                exported = _capture(torch, adapter, args, kwargs, label)
            graph, failure = _decomposed(exported, step, label)
    notes: list[str] = []
    if shared:
        notes.append(f"modules under several names, one input per parameter: {', '.join(shared)}")
    if ties:
        notes.append(f"tied parameters, one input each: {', '.join(ties)}")
    if adapter.found:
        notes.append(f"outputs read for their tensors: {', '.join(adapter.found)}")
    if step is not None and step.loss != "output":
        notes.append(f"loss: {step.loss}")
    if unused:
        notes.append(f"parameters the loss does not depend on, no gradient: {', '.join(unused)}")
    if step is not None and step.optimizer != "none":
        notes.append(f"{step.optimizer} update of every parameter after the backward pass")
    if failure is None:
        return _Captured(graph, tuple(notes), "core-aten")
    notes.append(
        f"core ATen decomposition failed ({failure}): the ATen graph without decompositions, "
        "flops of composite ops by torch's FlopCounterMode"
    )
    return _Captured(graph, tuple(notes), "aten")


def _capture(
    torch: Any, adapter: Any, args: tuple[Any, ...], kwargs: dict[str, Any], label: str
) -> Any:
    """``torch.export.export`` of the adapter; an :class:`ExportError` where it fails."""
    from mallocgame.frontends.torch_adapter import AdapterError

    try:
        return torch.export.export(adapter, args, kwargs)
    except AdapterError as exc:
        raise ExportError(f"{label}: {exc}") from None
    except Exception as exc:
        raise ExportError(
            f"{label}: torch.export could not capture it: {one_line(exc)} ({_CAPTURE_HINT})"
        ) from None


def _decomposed(exported: Any, step: TrainingStep | None, label: str) -> tuple[Any, str | None]:
    """The functional graph of ``exported``: its training step's joint graph, or its inference
    graph, in core ATen; where that fails, without decompositions, with the first failure in
    one line. Both failing is an :class:`ExportError` naming the stage and what to try."""

    def derive(table: dict[Any, Any] | None) -> Any:
        if step is not None:
            return _joint_graph(exported, table)
        return (
            exported.run_decompositions() if table is None else exported.run_decompositions(table)
        )

    try:
        return derive(None), None
    except Exception as exc:
        failure = one_line(exc)
    try:
        return derive({}), failure
    except Exception as exc:
        what = "derive its training step" if step is not None else "decompose it"
        reason = one_line(exc)
        if step is not None and "did not receive a gradient" in reason:
            hint = (
                "a parameter the loss reads gets no gradient in a way the frontend does not "
                "see: freeze it in the factory, p.requires_grad_(False)"
            )
        elif step is not None and "does not require gradients" in reason:
            hint = (
                "the loss depends on no trainable parameter: a training step has nothing to train"
            )
        else:
            hint = "the model may need a factory that fixes the failing layer"
        raise ExportError(f"{label}: torch.export could not {what}: {reason} ({hint})") from None


def _source_of(module: Any, step: TrainingStep | None, captured: _Captured) -> dict[str, Any]:
    """The program's ``source`` for a capture of ``module``: its class, its mode, how it was
    captured where that is not core ATen, a training step's loss and optimizer, the notes."""
    source: dict[str, Any] = {
        "module": type(module).__name__,
        "mode": "training_step" if step is not None else ("train" if module.training else "eval"),
    }
    if captured.capture != "core-aten":
        source["capture"] = captured.capture
    if step is not None and (step.loss != "output" or step.optimizer != "none"):
        source["loss"] = step.loss
        source["optimizer"] = step.optimizer
    if captured.notes:
        source["notes"] = list(captured.notes)
    return source


def extract_torch(
    module: Any,
    example_inputs: Sequence[Any],
    *,
    example_kwargs: dict[str, Any] | None = None,
    name: str | None = None,
    training_step: bool | TrainingStep = False,
    labels: Any = None,
    granularity: str = "tensor",
) -> Program:
    """Capture ``module(*example_inputs, **example_kwargs)`` with ``torch.export`` and extract its program.

    ``module`` is captured in its own mode (call ``.eval()`` for inference); its outputs
    may be any tensors in tuples, lists, dicts, dataclasses and caches (Hugging Face's
    ``ModelOutput``, ``DynamicCache``): every tensor in them is an output. With
    ``training_step`` (``True``: :class:`TrainingStep` ``()``, the module's first output
    is the loss) the forward pass, the loss, the backward pass and the optimizer's
    update; ``labels`` (a tensor) goes with the losses that need it (``model``,
    ``cross-entropy``). Inputs may be real tensors or tensors on the ``meta`` device (no
    memory; the module's parameters then on ``meta`` too, e.g. built under ``with
    torch.device("meta"):``). ``name`` defaults to the module's class name (an empty one is
    refused); ``granularity`` is ``"tensor"`` or ``"node"``.
    """
    torch = _torch()
    if not isinstance(module, torch.nn.Module):
        raise TorchFrontendError(f"expected a torch.nn.Module, got {type(module).__name__}")
    if granularity not in GRANULARITIES:
        raise TorchFrontendError(
            f"unknown granularity {granularity!r} (have: {', '.join(GRANULARITIES)})"
        )
    if not isinstance(example_inputs, (list, tuple)):
        raise TorchFrontendError(
            "example_inputs is a tuple or list of the module's positional inputs, not a "
            f"{type(example_inputs).__name__}"
        )
    if example_kwargs is not None and not isinstance(example_kwargs, dict):
        raise TorchFrontendError(
            "example_kwargs is a dict of the module's keyword inputs, not a "
            f"{type(example_kwargs).__name__}"
        )
    if not isinstance(training_step, (bool, TrainingStep)) and training_step is not None:
        raise TorchFrontendError(
            f"training_step is True, False or a TrainingStep, not {training_step!r:.60}"
        )
    step = TrainingStep() if training_step is True else (training_step or None)
    label = program_label(module, name)
    if step is None and labels is not None:
        raise TorchFrontendError(f"{label}: labels go with a training step's loss")
    if step is not None:
        if step.needs_labels and labels is None:
            raise TorchFrontendError(f"{label}: the loss {step.loss!r} needs labels")
        if labels is not None and not step.needs_labels:
            raise TorchFrontendError(
                f"{label}: the loss {step.loss!r} takes no labels (model and cross-entropy do)"
            )
        if step.optimizer != "none" and granularity == "node":
            raise TorchFrontendError(
                f"{label}: an optimizer update is modelled per tensor: use granularity 'tensor'"
            )
        if any(t.is_meta for t in [*module.parameters(), *module.buffers()]):
            raise TorchFrontendError(
                f"{label}: a training step cannot be captured from parameters on the meta device "
                "(torch's joint graph needs real ones): build the module on the CPU, e.g. "
                "module.to_empty(device='cpu')"
            )
    kwargs = dict(example_kwargs or {})
    if labels is not None:
        kwargs["labels"] = labels
    with _quiet_capture():
        captured = _export(torch, module, tuple(example_inputs), kwargs, step, label)
    source = _source_of(module, step, captured)
    return extract_exported(
        captured.exported,
        name=label,
        granularity=granularity,
        source=source,
        optimizer="none" if step is None else step.optimizer,
    )


def meta_inputs(
    specs: Sequence[str], device: str = "meta", like: Sequence[Any] = ()
) -> tuple[Any, ...]:
    """``["f32[8,64]", "s64[8,128]"]`` -> storage-less tensors of those shapes and dtypes
    on ``device`` (the spec syntax and checks of
    :func:`mallocgame.frontends.argspec.parse_spec`; a bad spec raises its ``ArgSpecError``).

    On the ``meta`` device they are meta tensors; on any other device (the device of a
    module's parameters, ``"cpu"``) they are torch's fake tensors (one ``FakeTensorMode``
    for all of them, which ``torch.export`` then traces with): shape, dtype and device
    without storage. No input is ever allocated, whatever its size: the frontend needs
    only shapes. Fake tensors made to go with others (``like``: inputs made earlier, e.g.
    labels for a factory's inputs) share their ``FakeTensorMode``, as ``torch.export`` needs.
    A device torch does not know is refused: :class:`TorchFrontendError`.
    """
    from mallocgame.frontends.argspec import DTYPES, parse_spec

    parsed = [parse_spec(spec) for spec in specs]
    torch = _torch()
    dtypes = [getattr(torch, DTYPES[p.dtype]) for p in parsed]
    try:
        kind = torch.device(device).type
    except (RuntimeError, TypeError, ValueError) as exc:
        raise TorchFrontendError(f"device {device!r}: {one_line(exc)}") from None
    if kind == "meta":
        return tuple(torch.empty(p.dims, dtype=d, device=device) for p, d in zip(parsed, dtypes))
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = torch._guards.detect_fake_mode(list(like)) if like else None
    with mode or FakeTensorMode(allow_non_fake_inputs=True):
        return tuple(torch.empty(p.dims, dtype=d, device=device) for p, d in zip(parsed, dtypes))


@dataclass(frozen=True)
class TorchModel:
    """A module and its example inputs, as a factory gives them (see :func:`resolve_factory`)."""

    module: Any  # torch.nn.Module
    inputs: tuple[Any, ...]  # example inputs (tensors; meta or fake ones from --arg specs)
    kwargs: dict[str, Any] = field(default_factory=dict)  # example keyword inputs
    labels: Any = None  # a training step's labels (a tensor), for the losses that need them


def program_label(module: Any, name: str | None) -> str:
    """The program's name: ``name``, else the module's class name;
    :class:`TorchFrontendError` for a name that is no string or is blank."""
    label = type(module).__name__ if name is None else name
    if not isinstance(label, str) or not label.strip():
        raise TorchFrontendError(
            f"name {name!r:.60}: a program's name is a string that is not empty"
        )
    return label


def _module_device(module: Any) -> str:
    """The device type of ``module``'s first parameter, else of its first buffer, else
    ``"cpu"``: where inputs made for it go."""
    state = itertools.chain(module.parameters(), module.buffers())
    return next((t.device.type for t in state), "cpu")


def resolve_factory(target: str, arg_specs: Sequence[str] = ()) -> TorchModel:
    """``package.module:factory`` -> the module and example inputs it builds.

    The factory is called with no arguments and returns an ``nn.Module`` (then
    ``arg_specs``, e.g. ``["f32[8,3,224,224]"]``, give its inputs: storage-less tensors
    on the device of its parameters, or of its buffers where it has none, see
    :func:`meta_inputs`) or a ``(module,
    example_inputs)`` pair (``arg_specs`` must then be empty). Errors are
    :class:`~mallocgame.frontends.argspec.ArgSpecError` (a bad string, checked before the
    factory runs; an import failure) and :class:`TorchFrontendError`.
    """
    from mallocgame.frontends.argspec import parse_spec, resolve_function

    for spec in arg_specs:
        parse_spec(spec)
    torch = _torch()
    factory: Callable[[], Any] = resolve_function(target)
    try:
        built = factory()
    except MallocGameError:
        raise
    except Exception as exc:
        raise TorchFrontendError(f"{target}: the factory failed: {one_line(exc)}") from None
    if isinstance(built, torch.nn.Module):
        if not arg_specs:
            raise TorchFrontendError(
                f"{target} returns a module without example inputs: give them with --arg"
            )
        return TorchModel(built, meta_inputs(arg_specs, device=_module_device(built)))
    if (
        isinstance(built, tuple)
        and len(built) == 2
        and isinstance(built[0], torch.nn.Module)
        and isinstance(built[1], (tuple, list))
    ):
        if arg_specs:
            raise TorchFrontendError(f"{target} returns its own example inputs: give no --arg")
        return TorchModel(built[0], tuple(built[1]))
    raise TorchFrontendError(
        f"{target} must return an nn.Module or a (module, example_inputs) pair, got {type(built).__name__}"
    )
