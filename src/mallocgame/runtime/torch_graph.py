"""A PyTorch module captured for running, and its graph bound to an instance.

:func:`capture_torch` captures a module exactly as the torch frontend does
(:func:`mallocgame.frontends.torch.extract_torch`: ``torch.export`` then
``run_decompositions()``, granularity ``"tensor"``) and keeps the exported graph, the
program extracted from it and the example inputs, so the program can be run as well as
played. :func:`bind` walks that graph by the frontend's rules and checks it against an
:class:`~mallocgame.instance.Instance`: instruction ``t`` must be the ``t``-th node that
makes a tensor, with the instance's name, opcode, operand tensors and output tensors
(names and sizes); views and ``getitem`` make no instruction and become a
:class:`Ref` (a program tensor and the view nodes applied to it), which the runtime
applies to whichever copy of the tensor (HBM or host) the answer reads. A mismatch is a
:class:`~mallocgame.runtime.errors.ProgramMismatchError` naming the first difference.

A training step with an optimizer (:class:`~mallocgame.frontends.torch.TrainingStep`
``optimizer="sgd"`` or ``"adamw"``) ends with the frontend's update instructions, one per
parameter after the graph's nodes (``torch.export`` does not trace ``optimizer.step()``).
They bind to :class:`OptimizerUpdate` s that the runtime runs as ``torch.optim`` with its
default settings computes the first step (:data:`OPTIMIZER_SETTINGS`); AdamW's moments are
program inputs that start at zero. The step's results are then the graph's outputs but the
gradients (the update consumes them), followed by each update's outputs in order (the new
parameter, then AdamW's new moments).

Where a mutated buffer's or input's new value lives in another input's storage
(``self.a.copy_(x)``), the frontend appends a copy into it (``copy_.<target>``) after the
graph's nodes and before any optimizer update, one per such mutation in the graph's
output order; it binds to a :class:`BoundOp` whose ``copy`` is the value copied, which
the runtime copies into a new tensor of the buffer's layout, the mutation's result.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from mallocgame.errors import one_line
from mallocgame.frontends.torch import TrainingStep
from mallocgame.instance import Instance
from mallocgame.nested import nested_leaves
from mallocgame.program import Program
from mallocgame.runtime.errors import ApplyError, ProgramMismatchError

__all__ = [
    "CapturedProgram",
    "Ref",
    "OptimizerUpdate",
    "BoundOp",
    "BoundGraph",
    "TensorSpec",
    "OPTIMIZER_SETTINGS",
    "MATMUL_OPCODES",
    "capture_torch",
    "refuse_meta",
    "bind",
    "matmul_layout",
    "EagerResults",
    "eager_results",
]

MATMUL_OPCODES = ("mm", "addmm", "bmm", "baddbmm")
"""The ATen matmuls whose last two arguments are the GEMM's left and right operands."""

OPTIMIZER_SETTINGS: Mapping[str, Mapping[str, Any]] = {
    "sgd": {"lr": 1e-3},
    "adamw": {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 1e-2},
}
"""The settings an optimizer update runs with: ``torch.optim.SGD`` and ``torch.optim.AdamW``'s
defaults (SGD without momentum), as keyword arguments of their constructors."""


@dataclass(frozen=True)
class CapturedProgram:
    """A module's exported graph (functional core ATen), its program, and the example inputs.

    ``exported`` is a ``torch.export.ExportedProgram``; ``inputs`` the user inputs (real
    tensors) the module was captured with and is run on.
    """

    name: str
    exported: Any
    program: Program
    inputs: tuple[Any, ...]

    @cached_property
    def input_leaves(self) -> tuple[Any, ...]:
        """The user inputs as ``torch.export`` numbers them: the leaves of ``inputs`` (a
        tuple or dict argument is several)."""
        from torch.utils import _pytree

        return tuple(_pytree.tree_leaves(self.inputs))


@dataclass(frozen=True)
class Ref:
    """A graph value that is (a view of) program tensor ``tensor``: ``chain`` lists the view
    nodes applied to it in order, each with the element taken of a multi-output view (or None)."""

    tensor: int
    chain: tuple[tuple[Any, int | None], ...] = ()


@dataclass(frozen=True)
class TensorSpec:
    """A tensor's layout: shape, strides (elements) and torch dtype."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: Any


@dataclass(frozen=True)
class OptimizerUpdate:
    """One parameter's optimizer update: ``optimizer`` (``"sgd"`` or ``"adamw"``) reads
    program tensor ``parameter``, its ``gradient`` (the graph's output: a program tensor
    and the views that give it the parameter's shape) and ``moments`` (AdamW's first and
    second, program inputs that start at zero; none for SGD), and writes the new parameter
    and moments, in that order (:attr:`BoundOp.results`)."""

    optimizer: str
    parameter: int
    gradient: Ref
    moments: tuple[int, ...]

    @property
    def operands(self) -> tuple[int, ...]:
        """The tensors it reads, in order: the parameter, its gradient's, the moments."""
        return (self.parameter, self.gradient.tensor, *self.moments)


@dataclass(frozen=True)
class BoundOp:
    """Instruction ``index``: fx node ``node``; ``results[i]`` is the program tensor of the
    node's ``i``-th result (None for an empty or non-tensor one); ``multi``: the node returns
    a tuple. An optimizer's update has no node (None) and its ``update``; a copy into a
    mutated buffer or input has no node and its ``copy``, the value it copies (a program
    tensor and the views that give it the buffer's shape, or a shape that broadcasts to it)."""

    index: int
    node: Any
    results: tuple[int | None, ...]
    multi: bool
    update: OptimizerUpdate | None = None
    copy: Ref | None = None


@dataclass(frozen=True)
class BoundGraph:
    """A captured graph checked against an instance (see the module docstring).

    ``values``: fx node name -> :class:`Ref`, a tuple of them (None where empty), or None;
    ``inputs``: per program input tensor, ``("state", target)`` (a parameter, buffer or
    constant of the exported program), ``("user", i)`` or ``("moment", parameter)`` (an
    optimizer's state for the parameter's tensor, zero); ``specs``: every tensor's layout;
    ``results``: the step's results, in order (the output node's values; with an optimizer,
    see the module docstring).
    """

    captured: CapturedProgram
    instance_sha256: str
    ops: tuple[BoundOp, ...]
    values: Mapping[str, Any]
    inputs: Mapping[int, tuple[str, Any]]
    specs: Mapping[int, TensorSpec]
    results: tuple[Any, ...]

    def input_value(self, x: int) -> Any:
        """The real value of program input tensor ``x``."""
        kind, key = self.inputs[x]
        if kind == "user":
            return self.captured.input_leaves[key]
        if kind == "moment":
            return self.input_value(key).detach().clone().zero_()
        ep = self.captured.exported
        if key in ep.state_dict:
            return ep.state_dict[key]
        return ep.constants[key]


def refuse_meta(module: Any, inputs: Sequence[Any], label: str) -> None:
    """:class:`ApplyError` where a parameter or buffer of ``module`` or one of ``inputs`` is
    on the meta device (it has no values to run, nor to move to a device)."""
    if any(t.is_meta for t in [*module.parameters(), *module.buffers()]) or any(
        getattr(x, "is_meta", False) for x in inputs
    ):
        raise ApplyError(
            f"{label}: a module or input on the meta device cannot be run: build it on a real "
            f"device"
        )


def capture_torch(
    module: Any,
    inputs: Sequence[Any],
    *,
    name: str | None = None,
    training_step: TrainingStep | None = None,
) -> CapturedProgram:
    """Capture ``module(*inputs)`` as :func:`~mallocgame.frontends.torch.extract_torch` does
    (same graph, same program; granularity ``"tensor"``), or its ``training_step`` (the
    joint forward-backward graph; its results are the loss and the gradients, in the
    graph's output order; with an optimizer, its update of every parameter follows, run
    as the module docstring says). ``inputs`` are real tensors (the module is run on them
    later), on the module's device. ``name`` defaults to the module's class name (an empty
    one is refused: :class:`~mallocgame.frontends.torch.TorchFrontendError`)."""
    from mallocgame.frontends.torch import (
        TorchFrontendError,
        _export,
        _quiet_capture,
        _source_of,
        _torch,
        extract_exported,
        program_label,
    )

    torch = _torch()
    if not isinstance(module, torch.nn.Module):
        raise TorchFrontendError(f"expected a torch.nn.Module, got {type(module).__name__}")
    label = program_label(module, name)
    refuse_meta(module, inputs, label)
    with _quiet_capture():  # torch's own warnings (a deprecation inside export), as extract's
        captured = _export(torch, module, tuple(inputs), {}, training_step, label)
    source = _source_of(module, training_step, captured)
    optimizer = training_step.optimizer if training_step is not None else "none"
    program = extract_exported(
        captured.exported, name=label, granularity="tensor", source=source, optimizer=optimizer
    )
    return CapturedProgram(label, captured.exported, program, tuple(inputs))


def _spec(value: Any) -> TensorSpec:
    """``value``'s layout, with dense strides where its elements overlap (an expanded input,
    stride 0): a copy of it holds every element, as the program sizes it, since no copy can
    be written through overlapping strides."""
    shape = tuple(int(d) for d in value.shape)
    stride = tuple(int(s) for s in value.stride())
    return TensorSpec(
        shape, _dense_strides(shape) if _overlaps(shape, stride) else stride, value.dtype
    )


def _overlaps(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Whether two elements of the layout share an address (dimensions of size 1 aside)."""
    span = 1  # elements the smaller-strided dimensions reach
    for step, size in sorted((st, sz) for sz, st in zip(shape, stride) if sz > 1):
        if step < span:
            return True
        span = step * size
    return False


def _dense_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The row-major (contiguous) strides of ``shape``, in elements."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _flat(value: Any) -> list[Ref]:
    return nested_leaves(value, lambda v: isinstance(v, Ref))


class _Binder:
    """State of one run of :func:`bind`: the graph walked node by node, the values, inputs,
    layouts and instructions found so far, and the instance they are checked against."""

    def __init__(self, captured: CapturedProgram, instance: Instance) -> None:
        from mallocgame.frontends.torch import _is_view, _torch

        self.is_view = _is_view
        self.fx = _torch().fx
        self.captured = captured
        self.instance = instance
        self.ep = captured.exported
        signature = self.ep.graph_signature
        self.specs_in = {s.arg.name: s for s in signature.input_specs if hasattr(s.arg, "name")}
        self.user_names = list(signature.user_inputs)
        self.values: dict[str, Any] = {}
        self.inputs: dict[int, tuple[str, Any]] = {}
        self.specs: dict[int, TensorSpec] = {}
        self.input_values: dict[int, Any] = {}  # program input tensor -> its node's value
        self.ops: list[BoundOp] = []
        self.results: tuple[Any, ...] = ()
        self.next_input = 0
        self.where = f"{captured.name} against instance {instance.name!r}"

    def mismatch(self, message: str) -> ProgramMismatchError:
        """The error for the first difference between the graph and the instance."""
        return ProgramMismatchError(
            f"{self.where}: {message} (the program is not from this function)"
        )

    def expect_tensor(self, x: int, name: str, value: Any) -> None:
        """Check that the instance's tensor ``x`` is named ``name`` and has ``value``'s size
        (bytes)."""
        if x >= len(self.instance.tensors):
            raise self.mismatch(f"tensor {x} ({name}) is not in the instance")
        tensor = self.instance.tensors[x]
        size = int(value.numel()) * int(value.element_size())
        if tensor.name != name or tensor.size != size:
            raise self.mismatch(
                f"tensor {x} is {tensor.name!r} of {tensor.size} B in the instance, {name!r} "
                f"of {size} B here"
            )

    def run(self) -> BoundGraph:
        """Walk the graph's nodes in order and check the instruction count."""
        for node in self.ep.graph.nodes:
            if node.op == "placeholder":
                self.placeholder(node)
            elif node.op == "call_function":
                self.call_function(node)
            elif node.op == "output":
                self.results = tuple(
                    self.values.get(a.name) if hasattr(a, "name") else a for a in node.args[0]
                )
            else:
                raise ApplyError(
                    f"{self.captured.name}: cannot run graph node {node.op} ({node.name})"
                )
        self.copies()
        self.optimizer_updates()
        num_t = self.instance.num_instructions
        if len(self.ops) != num_t:
            raise self.mismatch(f"the graph has {len(self.ops)} instructions, the instance {num_t}")
        return BoundGraph(
            self.captured,
            self.instance.sha256,
            tuple(self.ops),
            self.values,
            self.inputs,
            self.specs,
            self.results,
        )

    def copies(self) -> None:
        """The instructions after the graph's nodes that copy a mutation's new value into the
        buffer or input it mutates (module docstring), where the captured program has them:
        each reads the value and writes the new contents, which replace the value among the
        results."""
        from torch.export.graph_signature import OutputKind

        mutations = (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION)
        captured = self.captured.program.instructions
        results = list(self.results)
        for i, spec in enumerate(self.ep.graph_signature.output_specs):
            t = len(self.ops)
            name = f"copy_.{spec.target}"
            if (
                spec.kind not in mutations
                or t >= len(captured)
                or (captured[t].name, captured[t].opcode) != (name, "copy_")
            ):
                continue
            ins = self.instance.instructions[t] if t < self.instance.num_instructions else None
            if ins is None or (ins.name, ins.opcode) != (name, "copy_"):
                raise self.mismatch(f"instruction {t} is not the copy into {spec.target!r}")
            user = spec.kind == OutputKind.USER_INPUT_MUTATION
            key = ("user", self.user_names.index(spec.target)) if user else ("state", spec.target)
            updated = next((x for x, k in self.inputs.items() if k == key), None)
            refs = _flat(results[i]) if i < len(results) else []
            bufs = [self.instance.buffers[b] for b in ins.buffers]
            operands = [b.tensor_id for b in bufs if not b.is_output]
            outputs = [b.tensor_id for b in bufs if b.is_output]
            if updated is None or not refs or operands != [refs[0].tensor] or len(outputs) != 1:
                raise self.mismatch(
                    f"instruction {t} ({name}) reads tensors {operands} and writes {outputs}; "
                    f"the copy into {spec.target!r} reads its new value and writes one tensor"
                )
            self.expect_tensor(outputs[0], f"{spec.target}'", self.input_values[updated])
            self.specs[outputs[0]] = self.specs[updated]
            self.ops.append(BoundOp(t, None, (outputs[0],), False, copy=refs[0]))
            results[i] = Ref(outputs[0])
        self.results = tuple(results)

    def optimizer_updates(self) -> None:
        """The instructions after the graph's: one optimizer update per parameter with a
        gradient, in the graph's output order, as the frontend appends them; the gradients
        leave the results and the updates' outputs join them."""
        from torch.export.graph_signature import OutputKind

        instance = self.instance
        if len(self.ops) >= instance.num_instructions:
            return
        specs = self.ep.graph_signature.output_specs
        by_target = {key: x for x, (kind, key) in self.inputs.items() if kind == "state"}
        results: list[Any] = []
        gradients: list[tuple[int, Ref]] = []
        for spec, value in zip(specs, self.results):
            if spec.kind == OutputKind.GRADIENT_TO_PARAMETER and isinstance(value, Ref):
                if spec.target not in by_target:
                    raise self.mismatch(f"the gradient of {spec.target} has no parameter input")
                gradients.append((by_target[spec.target], value))
            else:
                results.append(value)
        for parameter, gradient in gradients:
            t = len(self.ops)
            ins = instance.instructions[t] if t < instance.num_instructions else None
            optimizer = ins.opcode.removesuffix("_update") if ins is not None else ""
            captured = self.captured.program.instructions
            if (
                ins is None
                or optimizer not in OPTIMIZER_SETTINGS
                or t >= len(captured)
                or (captured[t].name, captured[t].opcode) != (ins.name, ins.opcode)
            ):
                raise self.mismatch(
                    f"instruction {t} is not an optimizer's update of "
                    f"{instance.tensors[parameter].name!r}"
                )
            bufs = [instance.buffers[b] for b in ins.buffers]
            operands = [b.tensor_id for b in bufs if not b.is_output]
            outputs = [b.tensor_id for b in bufs if b.is_output]
            moments = tuple(operands[2:])
            want = 2 if optimizer == "adamw" else 0
            if operands[:2] != [parameter, gradient.tensor] or len(moments) != want:
                raise self.mismatch(
                    f"instruction {t} ({ins.name}) reads tensors {operands}; the update of "
                    f"tensor {parameter} reads it, its gradient {gradient.tensor} and {want} "
                    f"moments"
                )
            if len(outputs) != 1 + want:
                raise self.mismatch(f"instruction {t} ({ins.name}) writes {len(outputs)} tensors")
            spec = self.specs[parameter]
            for x in moments:
                self.inputs[x] = ("moment", parameter)
                self.specs[x] = spec
            for x in outputs:
                self.specs[x] = spec
            update = OptimizerUpdate(optimizer, parameter, gradient, moments)
            self.ops.append(BoundOp(t, None, tuple(outputs), True, update))
            results.extend(Ref(x) for x in outputs)
        self.results = tuple(results)

    def placeholder(self, node: Any) -> None:
        """An input node: the next program input tensor (a user input or a state entry), or
        None for a non-tensor input."""
        value = node.meta.get("val")
        if not hasattr(value, "numel"):
            self.values[node.name] = None
            return
        x = self.next_input
        spec = self.specs_in.get(node.name)
        label = (spec.target if spec is not None and spec.target else None) or node.name
        self.expect_tensor(x, label, value)
        if node.name in self.user_names:
            self.inputs[x] = ("user", self.user_names.index(node.name))
        elif spec is not None and spec.target:
            self.inputs[x] = ("state", spec.target)
        else:
            raise ApplyError(
                f"{self.captured.name}: input {node.name} is neither a user input nor a state entry"
            )
        self.specs[x] = _spec(value)
        self.input_values[x] = value
        self.values[node.name] = Ref(x)
        self.next_input += 1

    def call_function(self, node: Any) -> None:
        """An operation node: ``getitem`` and views make a value but no instruction, a node
        with no tensor result makes None, any other is the next instruction."""
        value = node.meta.get("val")
        if node.target is operator.getitem:
            base = self.values.get(node.args[0].name)
            self.values[node.name] = base[node.args[1]] if isinstance(base, tuple) else base
            return
        multi = isinstance(value, (list, tuple))
        outs = list(value) if multi else [value]
        if self.is_view(node.target):
            self.values[node.name] = self.view(node, multi, len(outs))
            return
        if not any(hasattr(v, "numel") for v in outs):
            self.values[node.name] = None
            return
        self.instruction(node, outs, multi)

    def view(self, node: Any, multi: bool, count: int) -> Any:
        """A view node's value: the :class:`Ref` it views with the view added to its chain
        (``count`` of them, one per element, when ``multi``), or None when it views none."""
        refs = _flat(self.fx.node.map_arg(node.args[0], lambda a: self.values.get(a.name)))
        if not refs:
            return None
        if multi:
            return tuple(Ref(refs[0].tensor, refs[0].chain + ((node, i),)) for i in range(count))
        return Ref(refs[0].tensor, refs[0].chain + ((node, None),))

    def instruction(self, node: Any, outs: list[Any], multi: bool) -> None:
        """Node ``node`` as the next instruction: check its name, operand tensors and outputs
        against the instance's, and record it."""
        instance = self.instance
        t = len(self.ops)
        if t >= instance.num_instructions:
            raise self.mismatch(
                f"the graph has more than the instance's {instance.num_instructions} instructions"
            )
        ins = instance.instructions[t]
        if ins.name != node.name:
            raise self.mismatch(
                f"instruction {t} is {ins.name!r} in the instance, {node.name!r} here"
            )
        operands: list[int] = []

        def read(arg: Any) -> Any:  # every node an argument names, keyword arguments too
            for r in _flat(self.values.get(arg.name)):
                if r.tensor not in operands:
                    operands.append(r.tensor)
            return arg

        self.fx.node.map_arg((node.args, node.kwargs), read)
        bufs = [instance.buffers[b] for b in ins.buffers]
        want_operands = [b.tensor_id for b in bufs if not b.is_output]
        want_outputs = [b.tensor_id for b in bufs if b.is_output]
        if operands != want_operands:
            raise self.mismatch(
                f"instruction {t} ({node.name}) reads tensors {want_operands} in the "
                f"instance, {operands} here"
            )
        res = self.outputs(t, node, outs, want_outputs)
        refs_out = tuple(None if x is None else Ref(x) for x in res)
        self.values[node.name] = refs_out if multi else refs_out[0]
        self.ops.append(BoundOp(t, node, tuple(res), multi))

    def outputs(
        self, t: int, node: Any, outs: list[Any], want_outputs: list[int]
    ) -> list[int | None]:
        """The program tensor of each of instruction ``t``'s results (None for an empty or
        non-tensor one), checked against the instance's outputs ``want_outputs``."""
        res: list[int | None] = []
        produced = iter(want_outputs)
        for i, v in enumerate(outs):
            if not hasattr(v, "numel") or int(v.numel()) == 0:
                res.append(None)
                continue
            x = next(produced, None)
            if x is None:
                raise self.mismatch(
                    f"instruction {t} ({node.name}) makes more outputs than the instance's"
                )
            self.expect_tensor(x, node.name if len(outs) == 1 else f"{node.name}{{{i}}}", v)
            self.specs[x] = _spec(v)
            res.append(x)
        if next(produced, None) is not None:
            raise self.mismatch(
                f"instruction {t} ({node.name}) makes fewer outputs than the instance's"
            )
        return res


def matmul_layout(node: Any) -> str:
    """The BLAS layout of a matmul node (:data:`MATMUL_OPCODES`) as its kernel receives its
    operands, read from their strides (the graph's ``meta["val"]``): a letter per operand,
    left then right, ``N`` where its last dimension is contiguous, ``T`` where it is
    transposed (in a training step: ``NT`` the forward ``x @ W.T``, ``NN`` the input's
    gradient, ``TN`` the weight's). ``""`` for any other node, or where it cannot tell."""
    if node is None or getattr(node, "op", None) != "call_function":
        return ""
    if getattr(node.target, "__name__", "").split(".")[0] not in MATMUL_OPCODES:
        return ""
    letters = []
    for arg in node.args[-2:]:
        value = getattr(arg, "meta", {}).get("val")
        if value is None or not hasattr(value, "stride") or value.dim() < 2:
            return ""
        contiguous = value.stride()[-1] == 1 or value.shape[-1] == 1
        letters.append("N" if contiguous else "T")
    return "".join(letters)


def bind(captured: CapturedProgram, instance: Instance) -> BoundGraph:
    """Walk ``captured``'s graph and check it is ``instance``'s program (module docstring)."""
    return _Binder(captured, instance).run()


@dataclass(frozen=True)
class EagerResults:
    """An inference program's reference: the captured module run once eagerly.

    ``values``: in the order of :attr:`BoundGraph.results` (the graph's output specs), each
    mutated buffer's and input's new value and the module's outputs (None where the
    graph's result is None), what a placed run of the graph is compared with;
    ``outputs``: the module's outputs alone (``module(*inputs)``'s tensors), what the
    framework's own step returns.
    """

    values: tuple[Any, ...]
    outputs: tuple[Any, ...]


def eager_results(graph: BoundGraph) -> EagerResults:
    """Run ``graph``'s module once eagerly under ``no_grad``, on copies of the buffers and
    inputs it mutates (``self.acc.add_(...)``, ``x.mul_(2)``), so that the state and
    inputs the graph is bound to, which the unlifted module shares, stay as they were.
    For an inference program (a training step's results follow its optimizer).
    :class:`~mallocgame.runtime.errors.ApplyError` where the module fails on its inputs (an
    integer input to a float layer: a capture on fake tensors need not see it)."""
    import torch
    from torch.export.graph_signature import OutputKind
    from torch.utils import _pytree

    captured = graph.captured
    signature = captured.exported.graph_signature
    module = captured.exported.module()
    buffers: dict[str, Any] = {}
    for target in signature.buffers_to_mutate.values():
        owner, _, name = target.rpartition(".")
        buffers[target] = module.get_buffer(target).clone()
        setattr(module.get_submodule(owner), name, buffers[target])  # a registered buffer
    user_inputs = list(signature.user_inputs)
    leaves, structure = _pytree.tree_flatten(captured.inputs)  # as export numbers them
    for name in signature.user_inputs_to_mutate.values():
        leaves[user_inputs.index(name)] = leaves[user_inputs.index(name)].clone()
    try:
        with torch.no_grad():
            outputs = _pytree.tree_leaves(module(*_pytree.tree_unflatten(leaves, structure)))
    except Exception as exc:
        raise ApplyError(
            f"{captured.name}: the module failed on its inputs: {one_line(exc)}"
        ) from exc
    returned = iter(outputs)
    values: list[Any] = []
    for spec in signature.output_specs:
        if spec.kind == OutputKind.BUFFER_MUTATION:
            values.append(buffers[spec.target])
        elif spec.kind == OutputKind.USER_INPUT_MUTATION:
            values.append(leaves[user_inputs.index(spec.target)])
        elif spec.kind == OutputKind.USER_OUTPUT:
            values.append(next(returned))
        else:
            raise ApplyError(
                f"{captured.name}: an inference program has no {spec.kind.name} output"
            )
    return EagerResults(
        tuple(None if r is None else v for r, v in zip(graph.results, values, strict=True)),
        tuple(outputs),
    )
