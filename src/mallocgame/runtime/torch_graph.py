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

from mallocgame.instance import Instance
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
    module: Any, inputs: Sequence[Any], *, name: str | None = None
) -> CapturedProgram:
    """Capture ``module(*inputs)`` as :func:`~mallocgame.frontends.torch.extract_torch` does
    (same graph, same program; granularity ``"tensor"``). ``inputs`` are real tensors (the
    module is run on them later), on the module's device."""
    from mallocgame.frontends.torch import TorchFrontendError, _export, _torch, extract_exported

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
    exported = _export(torch, module, tuple(inputs), {}, False, label)
    source = {"module": type(module).__name__, "mode": "train" if module.training else "eval"}
    program = extract_exported(exported, name=label, granularity="tensor", source=source)
    return CapturedProgram(label, exported, program, tuple(inputs))


def _spec(value: Any) -> TensorSpec:
    return TensorSpec(
        tuple(int(d) for d in value.shape), tuple(int(s) for s in value.stride()), value.dtype
    )


def _flat(value: Any) -> list[Ref]:
    if isinstance(value, Ref):
        return [value]
    if isinstance(value, (list, tuple)):
        return [r for v in value for r in _flat(v)]
    return []


def bind(captured: CapturedProgram, instance: Instance) -> BoundGraph:
    """Walk ``captured``'s graph and check it is ``instance``'s program (module docstring)."""
    from mallocgame.frontends.torch import _is_view, _torch

    torch = _torch()
    ep = captured.exported
    fx = torch.fx
    specs_in = {s.arg.name: s for s in ep.graph_signature.input_specs if hasattr(s.arg, "name")}
    user_names = list(ep.graph_signature.user_inputs)
    values: dict[str, Any] = {}
    inputs: dict[int, tuple[str, Any]] = {}
    specs: dict[int, TensorSpec] = {}
    ops: list[BoundOp] = []
    results: tuple[Any, ...] = ()
    where = f"{captured.name} against instance {instance.name!r}"

    def mismatch(message: str) -> ProgramMismatchError:
        return ProgramMismatchError(f"{where}: {message} (the program is not from this function)")

    def expect_tensor(x: int, name: str, value: Any) -> None:
        if x >= len(instance.tensors):
            raise mismatch(f"tensor {x} ({name}) is not in the instance")
        tensor = instance.tensors[x]
        size = int(value.numel()) * int(value.element_size())
        if tensor.name != name or tensor.size != size:
            raise mismatch(
                f"tensor {x} is {tensor.name!r} of {tensor.size} B in the instance, {name!r} "
                f"of {size} B here"
            )

    next_input = 0
    for node in ep.graph.nodes:
        value = node.meta.get("val")
        if node.op == "placeholder":
            if not hasattr(value, "numel"):
                values[node.name] = None
                continue
            spec = specs_in.get(node.name)
            label = (spec.target if spec is not None and spec.target else None) or node.name
            expect_tensor(next_input, label, value)
            if node.name in user_names:
                inputs[next_input] = ("user", user_names.index(node.name))
            elif spec is not None and spec.target:
                inputs[next_input] = ("state", spec.target)
            else:
                raise ApplyError(
                    f"{captured.name}: input {node.name} is neither a user input nor a state entry"
                )
            specs[next_input] = _spec(value)
            values[node.name] = Ref(next_input)
            next_input += 1
        elif node.op == "call_function":
            target = node.target
            if target is operator.getitem:
                base = values.get(node.args[0].name)
                values[node.name] = base[node.args[1]] if isinstance(base, tuple) else base
                continue
            outs = list(value) if isinstance(value, (list, tuple)) else [value]
            if _is_view(target):
                refs = _flat(fx.node.map_arg(node.args[0], lambda a: values.get(a.name)))
                if not refs:
                    values[node.name] = None
                elif isinstance(value, (list, tuple)):
                    values[node.name] = tuple(
                        Ref(refs[0].tensor, refs[0].chain + ((node, i),)) for i in range(len(outs))
                    )
                else:
                    values[node.name] = Ref(refs[0].tensor, refs[0].chain + ((node, None),))
                continue
            if not any(hasattr(v, "numel") for v in outs):
                values[node.name] = None
                continue
            t = len(ops)
            if t >= instance.num_instructions:
                raise mismatch(
                    f"the graph has more than the instance's {instance.num_instructions} "
                    f"instructions"
                )
            ins = instance.instructions[t]
            if ins.name != node.name:
                raise mismatch(
                    f"instruction {t} is {ins.name!r} in the instance, {node.name!r} here"
                )
            operands: list[int] = []
            for r in _flat(fx.node.map_arg((node.args, node.kwargs), lambda a: values.get(a.name))):
                if r.tensor not in operands:
                    operands.append(r.tensor)
            bufs = [instance.buffers[b] for b in ins.buffers]
            want_operands = [b.tensor_id for b in bufs if not b.is_output]
            want_outputs = [b.tensor_id for b in bufs if b.is_output]
            if operands != want_operands:
                raise mismatch(
                    f"instruction {t} ({node.name}) reads tensors {want_operands} in the "
                    f"instance, {operands} here"
                )
            res: list[int | None] = []
            produced = iter(want_outputs)
            for i, v in enumerate(outs):
                if not hasattr(v, "numel") or int(v.numel()) == 0:
                    res.append(None)
                    continue
                x = next(produced, None)
                if x is None:
                    raise mismatch(
                        f"instruction {t} ({node.name}) makes more outputs than the instance's"
                    )
                expect_tensor(x, node.name if len(outs) == 1 else f"{node.name}{{{i}}}", v)
                specs[x] = _spec(v)
                res.append(x)
            if next(produced, None) is not None:
                raise mismatch(
                    f"instruction {t} ({node.name}) makes fewer outputs than the instance's"
                )
            multi = isinstance(value, (list, tuple))
            refs_out = tuple(None if x is None else Ref(x) for x in res)
            values[node.name] = refs_out if multi else refs_out[0]
            ops.append(BoundOp(t, node, tuple(res), multi))
        elif node.op == "output":
            results = tuple(values.get(a.name) if hasattr(a, "name") else a for a in node.args[0])
        else:
            raise ApplyError(f"{captured.name}: cannot run graph node {node.op} ({node.name})")
    if len(ops) != instance.num_instructions:
        raise mismatch(
            f"the graph has {len(ops)} instructions, the instance {instance.num_instructions}"
        )
    return BoundGraph(captured, instance.sha256, tuple(ops), values, inputs, specs, results)
