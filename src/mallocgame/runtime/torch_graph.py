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
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mallocgame.frontends.torch import TrainingStep
from mallocgame.instance import Instance
from mallocgame.nested import nested_leaves
from mallocgame.program import Program
from mallocgame.runtime.errors import ApplyError, ProgramMismatchError

__all__ = ["CapturedProgram", "Ref", "BoundOp", "BoundGraph", "TensorSpec", "capture_torch", "bind"]


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
class BoundOp:
    """Instruction ``index``: fx node ``node``; ``results[i]`` is the program tensor of the
    node's ``i``-th result (None for an empty or non-tensor one); ``multi``: the node returns
    a tuple."""

    index: int
    node: Any
    results: tuple[int | None, ...]
    multi: bool


@dataclass(frozen=True)
class BoundGraph:
    """A captured graph checked against an instance (see the module docstring).

    ``values``: fx node name -> :class:`Ref`, a tuple of them (None where empty), or None;
    ``inputs``: per program input tensor, ``("state", target)`` (a parameter, buffer or
    constant of the exported program) or ``("user", i)``; ``specs``: every tensor's layout;
    ``results``: the output node's values, in order.
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
            return self.captured.inputs[key]
        ep = self.captured.exported
        if key in ep.state_dict:
            return ep.state_dict[key]
        return ep.constants[key]


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
    graph's output order). ``inputs`` are real tensors (the module is run on them later),
    on the module's device."""
    from mallocgame.frontends.torch import (
        TorchFrontendError,
        _export,
        _source_of,
        _torch,
        extract_exported,
    )

    torch = _torch()
    if not isinstance(module, torch.nn.Module):
        raise TorchFrontendError(f"expected a torch.nn.Module, got {type(module).__name__}")
    label = name or type(module).__name__
    if any(t.is_meta for t in [*module.parameters(), *module.buffers()]) or any(
        getattr(x, "is_meta", False) for x in inputs
    ):
        raise ApplyError(
            f"{label}: a module or input on the meta device cannot be run: build it on a real "
            f"device"
        )
    if training_step is not None and training_step.optimizer != "none":
        raise ApplyError(
            f"{label}: the optimizer's update is modelled, not captured (torch.export does not "
            f"trace optimizer.step()): a training step to run needs optimizer 'none'"
        )
    captured = _export(torch, module, tuple(inputs), {}, training_step, label)
    source = _source_of(module, training_step, captured)
    program = extract_exported(captured.exported, name=label, granularity="tensor", source=source)
    return CapturedProgram(label, captured.exported, program, tuple(inputs))


def _spec(value: Any) -> TensorSpec:
    return TensorSpec(
        tuple(int(d) for d in value.shape), tuple(int(s) for s in value.stride()), value.dtype
    )


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
        args = self.fx.node.map_arg((node.args, node.kwargs), lambda a: self.values.get(a.name))
        for r in _flat(args):
            if r.tensor not in operands:
                operands.append(r.tensor)
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


def bind(captured: CapturedProgram, instance: Instance) -> BoundGraph:
    """Walk ``captured``'s graph and check it is ``instance``'s program (module docstring)."""
    return _Binder(captured, instance).run()
