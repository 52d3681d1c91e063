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
captured program does. With an ``optimizer`` (``sgd`` or ``adamw``, ``torch.optim``'s own,
with :data:`~mallocgame.runtime.torch_graph.OPTIMIZER_SETTINGS`, made at the first step)
the step ends with ``optimizer.step()`` and its results are the loss, then each updated
parameter followed by its moments (AdamW), as the captured program's; the parameters
are restored to their values before the first step when the measurement ends, as the
module's buffers and the inputs always are (a step may mutate them, and the captured
graph shares them).

:func:`measure_framework` times it as :func:`~mallocgame.runtime.measure.measure` times a
placement: the first run's results compared with ``reference``, warm-up runs, then timed
runs one at a time (CUDA events), and the peak HBM during the timed runs above what was
allocated before the first run (every gradient freed first), plus the bytes of the
parameters and inputs (resident before it), so that the figure counts what the runner's
framework default counts. ``host_bytes``: for ``save_on_cpu``, the bytes of the tensors
autograd saves in one step (what it moves to host memory and back), counted as the first
step offloads them (a pass of its own that kept them in HBM would need the memory that
offloading saves, and run out of it under a cap).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from mallocgame.runtime.errors import ApplyError
from mallocgame.runtime.measure import (
    Measurement,
    check_runs,
    compare_results,
    flat_tensors,
    warm_and_time,
)
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


def framework_step(
    module: Any, inputs: tuple[Any, ...], *, loss: str | None = None, optimizer: str = "none"
) -> Callable[[], list[Any]]:
    """The eager step of ``module`` on ``inputs``: inference (``loss`` None) or a training
    step whose loss is the ``mean`` or ``sum`` of the module's first output tensor, ending
    with ``optimizer``'s update. The returned function runs one step and returns its
    results (see the module docstring)."""
    import torch

    from mallocgame.runtime.torch_graph import OPTIMIZER_SETTINGS

    if loss is not None and loss not in _LOSSES:
        raise ApplyError(f"eager training step: loss {loss!r} is not one of {', '.join(_LOSSES)}")
    if optimizer != "none" and (loss is None or optimizer not in OPTIMIZER_SETTINGS):
        raise ApplyError(
            f"eager training step: optimizer {optimizer!r} needs a loss and one of "
            f"{', '.join(OPTIMIZER_SETTINGS)}"
        )
    if loss is None:

        def infer() -> list[Any]:
            with torch.no_grad():
                return flat_tensors(module(*inputs))

        return infer

    params = [p for p in module.parameters() if p.requires_grad]

    def train() -> list[Any]:
        for p in params:
            p.grad = None
        first = flat_tensors(module(*inputs))
        if not first:
            raise ApplyError("eager training step: the module returned no tensor")
        value = first[0].mean() if loss == "mean" else first[0].sum()
        value.backward()
        return [value.detach()] + [p.grad for p in params if p.grad is not None]

    if optimizer == "none":
        return train
    made: list[Any] = []

    def train_and_update() -> list[Any]:
        value = train()[0]
        if not made:
            kind = torch.optim.SGD if optimizer == "sgd" else torch.optim.AdamW
            made.append(kind(params, **OPTIMIZER_SETTINGS[optimizer]))
        opt = made[0]
        updated = [p for p in params if p.grad is not None]
        opt.step()
        results = [value]
        for p in updated:
            state = opt.state.get(p, {})
            results += [p.detach(), *(state[k] for k in ("exp_avg", "exp_avg_sq") if k in state)]
        return results

    return train_and_update


def measure_framework(
    module: Any,
    inputs: tuple[Any, ...],
    memory: Memory,
    reference: Any,
    *,
    baseline: str = "eager",
    loss: str | None = None,
    optimizer: str = "none",
    warmup: int = 3,
    steps: int = 10,
    max_seconds: float | None = None,
    deadline: float | None = None,
) -> FrameworkMeasurement:
    """Time ``baseline`` (one of :data:`FRAMEWORK_BASELINES`) on ``module``; ``loss`` and
    ``optimizer`` as in :func:`framework_step` (``eager-save-on-cpu`` needs a loss). Same
    stopping rules as :func:`~mallocgame.runtime.measure.measure` (``warmup`` runs, the
    first the checked one, so at least 1; ``ValueError`` below)."""

    check_runs(warmup, steps)
    if baseline not in FRAMEWORK_BASELINES:
        raise ApplyError(
            f"unknown framework baseline {baseline!r} (have: {', '.join(FRAMEWORK_BASELINES)})"
        )
    if baseline == "eager-save-on-cpu" and loss is None:
        raise ApplyError("save_on_cpu offloads what autograd saves: it needs a training step")
    step = framework_step(module, inputs, loss=loss, optimizer=optimizer)
    with _state_kept(module, inputs, parameters=optimizer != "none"):
        return _measure(
            step, module, inputs, memory, reference, baseline, warmup, steps, max_seconds, deadline
        )


@contextmanager
def _state_kept(module: Any, inputs: tuple[Any, ...], parameters: bool) -> Iterator[None]:
    """Put ``module``'s buffers and the ``inputs`` back to their values on entry (a host
    copy) when the block ends, and with ``parameters`` its parameters too, their gradients
    dropped: a step may mutate them (``self.acc.add_(...)``, ``x.mul_(2)``, an optimizer's
    update), and the captured graph that placements run shares them."""
    import torch

    kept = [*module.buffers(), *flat_tensors(inputs)]
    if parameters:
        kept += list(module.parameters())
    with torch.no_grad():
        before = [(t, t.detach().to("cpu", copy=True)) for t in kept]
    try:
        yield
    finally:
        with torch.no_grad():
            for t, value in before:
                t.copy_(value)
            if parameters:
                for p in module.parameters():
                    p.grad = None


def _measure(
    step: Callable[[], list[Any]],
    module: Any,
    inputs: tuple[Any, ...],
    memory: Memory,
    reference: Any,
    baseline: str,
    warmup: int,
    steps: int,
    max_seconds: float | None,
    deadline: float | None,
) -> FrameworkMeasurement:
    """:func:`measure_framework` once ``step`` is made: the first step (from the module's
    state on entry) is the one compared with ``reference``."""
    import torch

    plain = step
    saved = [0]  # bytes autograd saved (and save_on_cpu moved) so far
    if baseline == "eager-save-on-cpu":
        offload = torch.autograd.graph.save_on_cpu(pin_memory=memory.device.type == "cuda")

        def pack(t: Any) -> Any:
            saved[0] += t.numel() * t.element_size()
            return offload.pack_hook(t)

        counted = torch.autograd.graph.saved_tensors_hooks(pack, offload.unpack_hook)

        def step() -> list[Any]:
            with counted:
                return plain()

    resident = sum(  # parameters, buffers (BatchNorm's statistics) and inputs stay in HBM
        t.numel() * t.element_size()
        for t in [*module.parameters(), *module.buffers(), *flat_tensors(inputs)]
    )
    for p in module.parameters():  # an earlier step's gradients are not this step's base
        p.grad = None
    memory.release_dead()
    memory.synchronize()
    base = memory.allocated()
    results = step()
    memory.synchronize()
    host_bytes = saved[0]
    identical, worst = compare_results(results, reference)
    differing = tuple(
        (i, diff)
        for i, (got, expected) in enumerate(zip(results, flat_tensors(reference)))
        for same, diff in [compare_results([got], [expected])]
        if not same
    )
    del results
    times = warm_and_time(
        step, memory, warmup=warmup, steps=steps, max_seconds=max_seconds, deadline=deadline
    )
    peak = memory.peak()  # None: the backend cannot tell
    held = None if peak is None else max(peak - base, 0) + resident
    return FrameworkMeasurement(
        Measurement.of(times, peak_hbm_bytes=held, identical=identical, max_abs_diff=worst),
        host_bytes,
        differing,
    )
