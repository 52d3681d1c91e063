"""The apply path: run a real program with its tensors placed as an answer says.

:mod:`mallocgame.runtime.plan` turns an answer (a :class:`~mallocgame.solution.Solution`
for an :class:`~mallocgame.instance.Instance`) into a :class:`PlacementPlan`: per
instruction, which tensor copy each operand reads (HBM or host memory), where each
output is written, which copies start, and when HBM copies are freed. It needs no torch.
:mod:`mallocgame.runtime.torch_graph` captures a PyTorch module with the torch frontend's
own capture and binds its graph to an instance (instruction ``t`` is the ``t``-th op
node, checked by name and tensors); :mod:`mallocgame.runtime.torch_run` runs that graph
node by node with a plan on a memory backend (:mod:`mallocgame.runtime.memory`: CUDA
with host-mapped pinned memory, or a CPU stand-in for tests);
:mod:`mallocgame.runtime.measure` times it and :mod:`mallocgame.runtime.calibrate`
measures the machine. :mod:`mallocgame.runtime.jax_apply` applies an answer to a JAX
function through memory kinds (inputs and results in ``pinned_host``);
:mod:`mallocgame.runtime.tpu_steer` gives an answer to the real TPU compiler as the flags
that steer its own memory-space assignment. The whole path and its mismatches with the
game: docs/runtime.md, docs/runtime-jax.md and docs/tpu.md.
"""

from __future__ import annotations

from mallocgame.runtime.errors import (
    AnswerMismatchError,
    ApplyError,
    NoGpuError,
    PlanError,
    ProgramMismatchError,
)
from mallocgame.runtime.plan import PlacementPlan, placement_plan

__all__ = [
    "ApplyError",
    "AnswerMismatchError",
    "ProgramMismatchError",
    "NoGpuError",
    "PlanError",
    "PlacementPlan",
    "placement_plan",
]
