"""Run a bound PyTorch graph node by node with its tensors placed as a plan says.

:class:`PlacedRunner` follows a :class:`~mallocgame.runtime.plan.PlacementPlan` on a
:class:`~mallocgame.runtime.memory.Memory` backend. :meth:`PlacedRunner.prepare` puts the
program inputs where the plan starts them (host memory; HBM for the framework default's
resident inputs) once, outside any timing; each :meth:`PlacedRunner.run` is then one
execution of the program, instruction by instruction (:class:`~mallocgame.runtime.plan.Step`):

1. issue the step's copies in (host -> HBM, on the copy stream);
2. for each operand: the HBM segment the plan names (waiting for its copy in) or the
   host copy (waiting for its copy out, if it was made by one); view nodes between the
   tensor and the instruction are applied to that copy. With ``stage_dot_reads`` a
   matmul's (:data:`~mallocgame.costmodel.DOT_OPCODES`) operand in host memory is first
   copied into a scratch HBM tensor on the compute stream (:meth:`Memory.stage_in`), which
   the kernel reads and the step then drops: one bulk PCIe read, where the kernel reading
   host memory itself crosses PCIe again for each output tile. The step waits for that
   copy, which the game cannot express (its copies only overlap computation), and the
   scratch is HBM the plan does not count, as a kernel's workspace is; the bytes are
   counted (:attr:`PlacedRunner.dot_staged_bytes`);
3. run the ATen op. Outputs the plan writes to host memory are written there by the
   kernel itself through the op's ``out=`` overload (``aten.addmm.out`` ...) where one
   exists and accepts host memory ("direct"); otherwise the op writes HBM and the result
   is copied into host memory on the compute stream and the HBM result dropped
   ("staged", a mismatch with the game, counted in :attr:`PlacedRunner.staged`); a
   constant fill without one (``full_like`` ...) fills the host copy (:func:`fill_value`).
   A result the plan keeps in HBM on a storage larger than its elements (``aten.copy``
   into a view returns its base's whole storage, a column slice's strided layout spans
   it) is copied into a new, compact HBM tensor and that storage dropped, so that the run
   holds what the plan counts (its elements' bytes).
   An optimizer's update (:class:`~mallocgame.runtime.torch_graph.OptimizerUpdate`, no
   graph node) runs as :func:`optimizer_update`, its kernels writing its host results
   there themselves (staged only where one refuses host memory); a copy into a mutated
   buffer or input (:attr:`~mallocgame.runtime.torch_graph.BoundOp.copy`) copies its value
   into the result's host copy or a new HBM tensor of the buffer's layout.
4. issue the step's copies out (HBM -> host, on the copy stream);
5. drop the HBM segments the plan frees (PyTorch's caching allocator reuses them).

The results are read from the host copies of the program's outputs (a game answer ends
them there) or, for the framework default, from HBM. With ``trace`` the runner records
what it did, checked against the real storage of each argument
(:meth:`~mallocgame.runtime.memory.Memory.is_host`): ``(kind, step, tensor, where)``.
"""

from __future__ import annotations

import math
from typing import Any

from mallocgame.costmodel import DOT_OPCODES
from mallocgame.runtime.errors import ApplyError, PlanError
from mallocgame.runtime.memory import HostTensor, Memory
from mallocgame.runtime.plan import PlacementPlan
from mallocgame.runtime.torch_graph import (
    OPTIMIZER_SETTINGS,
    BoundGraph,
    BoundOp,
    OptimizerUpdate,
    Ref,
    _flat,
)

__all__ = ["PlacedRunner", "fill_value", "optimizer_update", "out_overload"]


def out_overload(target: Any) -> tuple[Any, tuple[str, ...]] | None:
    """The ``out=`` overload of ATen op ``target`` and its out argument names, or None.

    The overload must take the functional overload's arguments (same names and types, same
    order) plus keyword-only out arguments, one per result: ``aten.sum.dim_IntList``'s is
    ``sum.IntList_out``, not ``sum.DimnameList_out``, whose arguments have the same names.
    """
    packet = getattr(target, "overloadpacket", None)
    schema = getattr(target, "_schema", None)
    if packet is None or schema is None:
        return None
    names = [(a.name, str(a.type)) for a in schema.arguments]
    for overload in packet.overloads():
        op = getattr(packet, overload)
        s = op._schema
        outs = [
            a.name
            for a in s.arguments
            if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write
        ]
        rest = [(a.name, str(a.type)) for a in s.arguments if a.name not in outs]
        if outs and rest == names and len(outs) == len(schema.returns):
            return op, tuple(outs)
    return None


_FILLS = {
    "aten.full_like.default": 1,  # (self, fill_value, ...)
    "aten.full.default": 1,  # (size, fill_value, ...)
    "aten.scalar_tensor.default": 0,  # (s, ...)
}
"""Ops without an ``out=`` overload whose result is one value everywhere: the position of
that value among their arguments."""


def _refusal(exc: Exception) -> str:
    """Why a kernel refused to write host memory, in one line."""
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0][:160] if lines else ''}"


def fill_value(target: Any, args: tuple[Any, ...]) -> Any:
    """The value ATen op ``target`` fills its result with (a number), or None where it is
    not such an op (:data:`_FILLS`): its result written into a host copy is that copy's
    ``fill_`` of the value, as the op itself would have made it in the result's dtype."""
    index = _FILLS.get(str(target))
    if index is None or len(args) <= index or not isinstance(args[index], (int, float, bool)):
        return None
    return args[index]


def optimizer_update(
    update: OptimizerUpdate, operands: list[Any], outs: list[Any] | None = None
) -> list[Any]:
    """The first step of ``update``'s optimizer on ``operands`` (the parameter, its gradient,
    and AdamW's two moments), out of place: the new parameter (and moments), computed with
    the operations, in the order, of ``torch.optim``'s single-tensor path with
    :data:`~mallocgame.runtime.torch_graph.OPTIMIZER_SETTINGS`. ``outs``: where to write
    each result (a tensor of its shape, e.g. its host copy, or None: a new tensor); the
    values are the same either way."""
    from mallocgame.frontends.torch import _torch

    torch = _torch()
    settings = OPTIMIZER_SETTINGS[update.optimizer]
    lr = settings["lr"]
    count = 1 if update.optimizer == "sgd" else 3
    dst = list(outs) if outs is not None else [None] * count

    def into(i: int) -> dict[str, Any]:
        return {} if dst[i] is None else {"out": dst[i]}

    if update.optimizer == "sgd":
        param, grad = operands
        return [torch.add(param, grad, alpha=-lr, **into(0))]
    param, grad, exp_avg, exp_avg_sq = operands
    beta1, beta2 = settings["betas"]
    param = torch.mul(param, 1 - lr * settings["weight_decay"], **into(0))
    exp_avg = torch.lerp(exp_avg, grad, 1 - beta1, **into(1))
    exp_avg_sq = torch.mul(exp_avg_sq, beta2, **into(2)).addcmul_(grad, grad, value=1 - beta2)
    step = 1  # every run is the first step from the same state
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step
    denom = (exp_avg_sq.sqrt() / bias_correction2**0.5).add_(settings["eps"])
    param.addcdiv_(exp_avg, denom, value=-(lr / bias_correction1))
    return [param, exp_avg, exp_avg_sq]


class PlacedRunner:
    """Runs ``graph`` under ``plan`` on ``memory`` (see the module docstring);
    ``stage_dot_reads``: matmuls read their host operands through an HBM scratch copy."""

    def __init__(
        self,
        graph: BoundGraph,
        plan: PlacementPlan,
        memory: Memory,
        *,
        trace: bool = False,
        stage_dot_reads: bool = False,
    ):
        if plan.instance_sha256 != graph.instance_sha256:
            raise PlanError("the plan is for another instance than the bound graph")
        self.graph = graph
        self.plan = plan
        self.memory = memory
        self.trace_on = trace
        self.trace: list[tuple[str, int, int, str]] = []
        self.host: dict[int, HostTensor] = {}  # tensor -> its host copy (allocated once, reused)
        self.resident: dict[int, Any] = {}  # input tensor -> its HBM copy (framework default)
        self.staged: set[str] = set()  # nodes whose host outputs go through HBM
        self.staged_why: dict[str, str] = {}  # op -> why its out= overload was not used
        self._direct: dict[str, Any] = {}  # node -> out overload that works, or None
        self.prepared = False
        instructions = graph.captured.program.instructions
        self.dots = (  # instructions whose host operands are staged
            frozenset(t for t, ins in enumerate(instructions) if ins.opcode in DOT_OPCODES)
            if stage_dot_reads
            else frozenset()
        )
        self.dot_staged_bytes = 0  # bytes staged for matmuls by the latest run
        self.result_tensors = frozenset(r.tensor for r in _flat(graph.results))
        self._data_bytes = {  # tensor -> bytes of its elements (what the plan counts)
            x: math.prod(s.shape) * s.dtype.itemsize for x, s in graph.specs.items()
        }

    # ------------------------------------------------------------------------- setup
    def host_copy(self, x: int) -> HostTensor:
        """Tensor ``x``'s host allocation (made on first use, kept for later runs)."""
        h = self.host.get(x)
        if h is None:
            spec = self.graph.specs[x]
            h = self.host[x] = self.memory.host_empty(spec.shape, spec.stride, spec.dtype)
        return h

    def prepare(self, shared_host: dict[int, HostTensor] | None = None) -> None:
        """Place the program inputs: host copies of those the plan reads from host memory
        (``shared_host``: input host copies made by another runner of the same graph, reused),
        HBM copies of the resident ones. Blocks until done."""
        torch = self.memory_torch()
        with torch.no_grad():
            for x in self.graph.inputs:
                value = self.graph.input_value(x)
                if x in self.plan.resident:
                    spec = self.graph.specs[x]
                    dst = self.memory.hbm_empty(spec.shape, spec.stride, spec.dtype)
                    dst.copy_(value)
                    self.resident[x] = dst
                elif x in self.plan.host_tensors:
                    if shared_host is not None and x in shared_host:
                        self.host[x] = shared_host[x]
                    else:
                        self.host_copy(x).dma.copy_(value)
                        if shared_host is not None:
                            shared_host[x] = self.host[x]
        self.memory.synchronize()
        self.prepared = True

    @staticmethod
    def memory_torch() -> Any:
        from mallocgame.frontends.torch import _torch

        return _torch()

    # ------------------------------------------------------------------------- one run
    def _note(self, kind: str, t: int, x: int, where: str) -> None:
        if self.trace_on:
            self.trace.append((kind, t, x, where))

    def _where(self, value: Any) -> str:
        return "host" if self.memory.is_host(value) else "hbm"

    def _apply_chain(self, base: Any, ref: Ref, resolve: Any) -> Any:
        torch = self.memory_torch()
        value = base
        for vnode, index in ref.chain:
            rest_args, rest_kwargs = torch.fx.node.map_arg(
                (tuple(vnode.args[1:]), dict(vnode.kwargs)), resolve
            )
            value = vnode.target(value, *rest_args, **rest_kwargs)
            if index is not None:
                value = value[index]
        return value

    def run(
        self, marks: list[Any] | None = None, step_peaks: list[int | None] | None = None
    ) -> list[Any]:
        """One execution of the program; returns its results (the output node's values).

        The work is issued, not waited for (CUDA); :meth:`Memory.join` and a timer's stop
        wait for it. ``marks``, where given, receives a :meth:`Memory.mark` before the first
        instruction and one after each (``T + 1`` marks: instruction ``t`` ran between marks
        ``t`` and ``t + 1``, its waits for copies included). ``step_peaks``, where given,
        receives the backend's fast-memory peak (:meth:`Memory.peak`, bytes, None where it
        cannot tell) over each step, from its copies in to its frees (``T`` values; the
        peak is started anew at each step)."""
        if not self.prepared:
            self.prepare()
        torch = self.memory_torch()
        mem = self.memory
        plan = self.plan
        hbm: dict[int, Any] = {}  # segment -> tensor
        pending: dict[int, Any] = {}  # segment -> event of its copy in
        host_event: dict[int, Any] = {}  # tensor -> event of its copy out (None: no wait)
        written: set[int] = set()  # tensors whose host copy holds their value by now
        latest: dict[int, Any] = {}  # result tensor -> its latest HBM copy (the default's results)
        current: dict[int, Any] = {}
        outs: list[Any] | None  # a step's outputs (None once the step is done)
        self.dot_staged_bytes = 0

        def fetch(x: int, t: int) -> Any:
            if x in current:
                return current[x]
            raise PlanError(
                f"instruction {t} refers to tensor {x}, which the plan does not read there"
            )

        with torch.no_grad():
            if marks is not None:
                marks.append(mem.mark())
            for step, op in zip(plan.steps, self.graph.ops):
                t = step.index
                if step_peaks is not None:
                    mem.reset_peak()
                for sid in step.prefetch:
                    seg = plan.segments[sid]
                    if seg.tensor not in self.host:
                        raise PlanError(
                            f"step {t}: tensor {seg.tensor} is copied in before it has a host copy"
                        )
                    spec = self.graph.specs[seg.tensor]
                    dst = mem.hbm_empty(spec.shape, spec.stride, spec.dtype)
                    pending[sid] = mem.copy_in(dst, self.host[seg.tensor])
                    hbm[sid] = dst
                    self._note("prefetch", t, seg.tensor, "hbm")
                current = {}
                for r in step.reads:
                    x = r.tensor
                    if r.segment is not None:
                        if r.segment in pending:
                            mem.wait(pending.pop(r.segment))
                        current[x] = hbm[r.segment]
                    elif x in self.resident:
                        current[x] = self.resident[x]
                    else:
                        if x in host_event:
                            mem.wait(host_event.pop(x))
                        if x not in self.host or (x not in self.graph.inputs and x not in written):
                            raise PlanError(
                                f"step {t}: tensor {x} is read from host memory before it is there"
                            )
                        if t in self.dots:
                            current[x] = mem.stage_in(self.host[x])
                            self.dot_staged_bytes += current[x].untyped_storage().nbytes()
                            self._note("stage", t, x, "hbm")
                        else:
                            current[x] = self.host[x].kernel
                    self._note("read", t, x, self._where(current[x]))
                outs = self._execute(op, step, t, fetch, written)
                if marks is not None:
                    marks.append(mem.mark())
                for w, value in zip(step.writes, outs):
                    if w.segment is not None:
                        hbm[w.segment] = value
                        if self.keeps_in_hbm(w.tensor):  # others must be freed as planned
                            latest[w.tensor] = value
                    self._note("write", t, w.tensor, self._where(value))
                for sid in step.copy_out:
                    seg = plan.segments[sid]
                    host_event[seg.tensor] = mem.copy_out(self.host_copy(seg.tensor), hbm[sid])
                    written.add(seg.tensor)
                    self._note("copy_out", t, seg.tensor, "host")
                for sid in step.free:
                    hbm.pop(sid, None)
                    self._note("free", t, plan.segments[sid].tensor, "hbm")
                # nothing of this step stays referenced here, or the segments it frees stay
                # allocated into the next step's copies in and outputs (beyond the plan)
                current = {}
                outs = value = dst = None
                if step_peaks is not None:
                    step_peaks.append(mem.peak())
            for ev in host_event.values():
                mem.wait(ev)
            return [self._result(v, written, latest) for v in self.graph.results]

    def keeps_in_hbm(self, x: int) -> bool:
        """Whether the run keeps tensor ``x``'s last HBM copy to its end: a program result
        that never has a host copy (the framework default's results); a result an answer
        puts in host memory is read from there, and its HBM copies are freed as planned."""
        return x in self.result_tensors and x not in self.plan.host_tensors

    def _result(self, value: Any, written: set[int], latest: dict[int, Any]) -> Any:
        if isinstance(value, tuple):
            return tuple(self._result(v, written, latest) for v in value)
        if not isinstance(value, Ref):
            return value
        x = value.tensor
        if x in written or (x in self.graph.inputs and x in self.host):
            base = self.host[x].kernel
        elif x in latest:
            base = latest[x]
        elif x in self.resident:
            base = self.resident[x]
        else:
            raise PlanError(f"result tensor {x} is neither in host memory nor in HBM at the end")
        return self._apply_chain(base, value, lambda a: self._const(a))

    def _const(self, node: Any) -> Any:
        v = self.graph.values.get(node.name)
        if v is not None:
            raise ApplyError(
                f"a view takes tensor {node.name} as a further argument; not supported"
            )
        return None

    def _empty(self, made: Any) -> Any:
        """A value the graph binds to None: an empty tensor shaped as ``made`` (the node's
        ``meta["val"]``: a tensor with no elements holds no program tensor) on the memory's
        device, or None where ``made`` is no tensor."""
        if not (hasattr(made, "shape") and hasattr(made, "dtype")):
            return None
        torch = self.memory_torch()
        return torch.empty(tuple(made.shape), dtype=made.dtype, device=self.memory.device)

    def _execute(self, op: BoundOp, step: Any, t: int, fetch: Any, written: set[int]) -> list[Any]:
        """Run instruction ``t``; returns its non-empty results in the order of ``step.writes``."""
        torch = self.memory_torch()
        if op.update is not None:
            return self._update(op, step, t, fetch, written)
        if op.copy is not None:
            return self._copy(op, step, t, fetch, written)
        node = op.node

        def resolve(a: Any) -> Any:
            v = self.graph.values.get(a.name)
            made = a.meta.get("val")
            if isinstance(v, Ref):
                return self._apply_chain(fetch(v.tensor, t), v, resolve)
            if isinstance(v, tuple):
                return tuple(
                    self._empty(made[i])
                    if r is None
                    else self._apply_chain(fetch(r.tensor, t), r, resolve)
                    for i, r in enumerate(v)
                )
            return self._empty(made)

        args, kwargs = torch.fx.node.map_arg((tuple(node.args), dict(node.kwargs)), resolve)
        host_writes = {w.tensor for w in step.writes if w.segment is None}
        if host_writes and node.name not in self.staged:
            direct = self._direct.get(node.name, 0)
            if direct == 0:
                direct = self._direct[node.name] = out_overload(node.target)
            if direct is not None:
                outs = self._out_tensors(op, host_writes)
                try:
                    direct[0](*args, **kwargs, **dict(zip(direct[1], outs)))
                except Exception as exc:  # the kernel refuses host memory: staged
                    self._stage(node.name, str(node.target), _refusal(exc))
                else:
                    for x in host_writes:
                        written.add(x)
                    return [o for o, x in zip(outs, op.results) if x is not None]
            elif (value := fill_value(node.target, args)) is not None and not op.multi:
                (x,) = host_writes  # a fill has one result
                filled = self.host_copy(x).kernel.fill_(value)
                written.add(x)
                return [filled]
            else:
                self._stage(node.name, str(node.target), "no out= overload")
        result = node.target(*args, **kwargs)
        return self._keep(list(result) if op.multi else [result], op.results, host_writes, written)

    def _update(self, op: BoundOp, step: Any, t: int, fetch: Any, written: set[int]) -> list[Any]:
        """Instruction ``t``, an optimizer's update: the results the plan writes to host
        memory written there by the update's kernels themselves; where a kernel refuses
        host memory, computed in HBM and copied (staged), as for an op without ``out=``."""
        u = op.update
        assert u is not None
        operands = [fetch(x, t) for x in u.operands]
        operands[1] = self._apply_chain(operands[1], u.gradient, self._const)
        host_writes = {w.tensor for w in step.writes if w.segment is None}
        name = self.graph.captured.program.instructions[t].name
        if host_writes and name not in self.staged:
            outs = [
                self.host_copy(x).kernel if x is not None and x in host_writes else None
                for x in op.results
            ]
            try:
                values = optimizer_update(u, operands, outs)
            except Exception as exc:  # a kernel refuses host memory: staged from now on
                self._stage(name, f"{u.optimizer}_update", _refusal(exc))
            else:
                written.update(host_writes)
                return [v for v, x in zip(values, op.results) if x is not None]
        return self._keep(optimizer_update(u, operands), op.results, host_writes, written)

    def _copy(self, op: BoundOp, step: Any, t: int, fetch: Any, written: set[int]) -> list[Any]:
        """Instruction ``t``, a copy into a mutated buffer or input: its value (views applied)
        copied into its result's host copy where the plan writes it there, else into a new
        HBM tensor of the result's layout."""
        assert op.copy is not None
        (x,) = op.results
        assert x is not None
        value = self._apply_chain(fetch(op.copy.tensor, t), op.copy, self._const)
        if any(w.segment is None for w in step.writes):
            dst = self.host_copy(x).kernel
            written.add(x)
        else:
            spec = self.graph.specs[x]
            dst = self.memory.hbm_empty(spec.shape, spec.stride, spec.dtype)
        return [dst.copy_(value)]

    def _stage(self, name: str, op: str, why: str) -> None:
        """Instruction ``name``'s host results go through HBM from now on; ``why``, the
        first reason given for op ``op``, is kept in :attr:`staged_why`."""
        self.staged.add(name)
        self.staged_why.setdefault(op, why)

    def _keep(
        self,
        values: list[Any],
        results: tuple[int | None, ...],
        host_writes: set[int],
        written: set[int],
    ) -> list[Any]:
        """An instruction's non-empty results (``values[i]`` is tensor ``results[i]``), those
        the plan writes to host memory copied into their host copies (staged), those it keeps
        in HBM on a storage larger than their elements copied into a new, compact HBM
        tensor."""
        kept = []
        for value, x in zip(values, results):
            if x is None:
                continue
            if x in host_writes:
                h = self.host_copy(x)
                h.kernel.copy_(value)
                written.add(x)
                value = h.kernel
            elif value.untyped_storage().nbytes() > self._data_bytes[x]:
                spec = self.graph.specs[x]  # compact: its elements alone, in row-major order
                strides = [math.prod(spec.shape[i + 1 :]) for i in range(len(spec.shape))]
                value = self.memory.hbm_empty(spec.shape, strides, spec.dtype).copy_(value)
            kept.append(value)
        return kept

    def _out_tensors(self, op: BoundOp, host_writes: set[int]) -> list[Any]:
        torch = self.memory_torch()
        outs = []
        vals = op.node.meta.get("val")
        vals = list(vals) if op.multi else [vals]
        for x, v in zip(op.results, vals):
            if x is not None and x in host_writes:
                outs.append(self.host_copy(x).kernel)
            else:
                outs.append(
                    torch.empty_strided(
                        tuple(v.shape), tuple(v.stride()), dtype=v.dtype, device=self.memory.device
                    )
                )
        return outs
