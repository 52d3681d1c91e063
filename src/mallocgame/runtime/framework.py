"""The framework's own step, measured: PyTorch eager, and eager with ``save_on_cpu``.

These are the baselines a PyTorch user has without this project: the module run eagerly
with everything in HBM (``eager``), and, for a training step, PyTorch's own activation
offloading, :class:`torch.autograd.graph.save_on_cpu` (``eager-save-on-cpu``): every
tensor autograd saves for the backward pass (activations, and the weights a matmul's
backward reads) is copied to host memory (pinned, on a GPU) when it is saved and back
when the backward pass needs it, on the compute stream; the parameters themselves, the
gradients and the forward's temporaries stay in HBM.

A step is what the captured program computes (:mod:`mallocgame.runtime.torch_graph`):
inference, ``module(*inputs)`` under ``no_grad``, with the output's tensors as results;
a training step (:class:`~mallocgame.frontends.torch.TrainingStep` with a ``mean`` or
``sum`` loss), the loss of the module's first output tensor and ``backward()``, with the
loss and the gradients (``module.parameters()`` order, those that get one) as results,
every gradient set to ``None`` before each step so that each step allocates them as the
captured program does.

:func:`measure_framework` times it as :func:`~mallocgame.runtime.measure.measure` times a
placement: the first run's results compared with ``reference``, warm-up runs, then timed
runs one at a time (CUDA events), and the peak HBM during the timed runs above what was
allocated before the first run (every gradient freed first), plus the bytes of the
parameters and inputs (resident before it), so that the figure counts what the runner's
framework default counts. ``host_bytes``: for ``save_on_cpu``, the bytes of the tensors
autograd saves in one step (what it moves to host memory and back), counted by a pass
with identity hooks.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mallocgame.nested import nested_leaves
from mallocgame.runtime.errors import ApplyError
from mallocgame.runtime.measure import Measurement, compare_results, warm_and_time
from mallocgame.runtime.memory import Memory

__all__ = ["FRAMEWORK_BASELINES", "FrameworkMeasurement", "framework_step", "measure_framework"]

FRAMEWORK_BASELINES = ("eager", "eager-save-on-cpu")
"""The baselines by label: ``eager`` (inference and training), ``eager-save-on-cpu``
(training steps only)."""

_LOSSES = ("mean", "sum")


@dataclass(frozen=True)
class FrameworkMeasurement:
    """A baseline's :class:`~mallocgame.runtime.measure.Measurement`, the bytes it keeps
    in host memory during a step (0 for ``eager``), and the results (by index) that are not
    bit-equal to the reference, with their largest absolute difference."""

    measurement: Measurement
    host_bytes: int
    differing: tuple[tuple[int, float], ...] = ()


def _tensors(value: Any) -> list[Any]:
    import torch

    return nested_leaves(value, lambda v: isinstance(v, torch.Tensor))


def framework_step(
    module: Any, inputs: tuple[Any, ...], *, loss: str | None = None
) -> Callable[[], list[Any]]:
    """The eager step of ``module`` on ``inputs``: inference (``loss`` None) or a training
    step whose loss is the ``mean`` or ``sum`` of the module's first output tensor. The
    returned function runs one step and returns its results (see the module docstring)."""
    import torch

    if loss is not None and loss not in _LOSSES:
        raise ApplyError(f"eager training step: loss {loss!r} is not one of {', '.join(_LOSSES)}")
    if loss is None:

        def infer() -> list[Any]:
            with torch.no_grad():
                return _tensors(module(*inputs))

        return infer

    params = [p for p in module.parameters() if p.requires_grad]

    def train() -> list[Any]:
        for p in params:
            p.grad = None
        first = _tensors(module(*inputs))
        if not first:
            raise ApplyError("eager training step: the module returned no tensor")
        value = first[0].mean() if loss == "mean" else first[0].sum()
        value.backward()
        return [value.detach()] + [p.grad for p in params if p.grad is not None]

    return train


def _saved_bytes(step: Callable[[], list[Any]]) -> int:
    """Bytes of the tensors autograd saves during one ``step`` (a pass that keeps them where
    they are and only counts)."""
    import torch

    seen = [0]

    def pack(t: Any) -> Any:
        seen[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    return seen[0]


def measure_framework(
    module: Any,
    inputs: tuple[Any, ...],
    memory: Memory,
    reference: Any,
    *,
    baseline: str = "eager",
    loss: str | None = None,
    warmup: int = 3,
    steps: int = 10,
    max_seconds: float | None = None,
    deadline: float | None = None,
) -> FrameworkMeasurement:
    """Time ``baseline`` (one of :data:`FRAMEWORK_BASELINES`) on ``module``; ``loss`` as in
    :func:`framework_step` (``eager-save-on-cpu`` needs one). Same stopping rules as
    :func:`~mallocgame.runtime.measure.measure`."""
    import torch

    if baseline not in FRAMEWORK_BASELINES:
        raise ApplyError(
            f"unknown framework baseline {baseline!r} (have: {', '.join(FRAMEWORK_BASELINES)})"
        )
    if baseline == "eager-save-on-cpu" and loss is None:
        raise ApplyError("save_on_cpu offloads what autograd saves: it needs a training step")
    step = framework_step(module, inputs, loss=loss)
    host_bytes = 0
    if baseline == "eager-save-on-cpu":
        host_bytes = _saved_bytes(step)
        offload = torch.autograd.graph.save_on_cpu(pin_memory=memory.device.type == "cuda")
        plain = step

        def step() -> list[Any]:
            with offload:
                return plain()

    resident = sum(t.numel() * t.element_size() for t in [*module.parameters(), *_tensors(inputs)])
    for p in module.parameters():  # an earlier step's gradients are not this step's base
        p.grad = None
    gc.collect()
    memory.synchronize()
    base = memory.allocated()
    results = step()
    memory.synchronize()
    identical, worst = compare_results(results, reference)
    differing = tuple(
        (i, diff)
        for i, (got, expected) in enumerate(zip(results, _tensors(reference)))
        for same, diff in [compare_results([got], [expected])]
        if not same
    )
    del results
    times = warm_and_time(
        step, memory, warmup=warmup, steps=steps, max_seconds=max_seconds, deadline=deadline
    )
    peak = max(memory.peak() - base, 0) + resident if memory.peak() else 0  # 0: cannot tell
    return FrameworkMeasurement(
        Measurement.of(times, peak_hbm_bytes=peak, identical=identical, max_abs_diff=worst),
        host_bytes,
        differing,
    )
