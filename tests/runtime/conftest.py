"""Small captured PyTorch programs shared by the runtime tests (module-scoped: a capture
takes about a second)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from mallocgame.costmodel import derive_instance
from mallocgame.instance import Instance
from mallocgame.runtime.memory import CpuMemory
from mallocgame.runtime.torch_graph import (
    BoundGraph,
    CapturedProgram,
    bind,
    capture_torch,
)


def write_results_csv(path: Any, rows: list[dict[str, Any]]) -> None:
    """``rows`` as a ``bench real`` results.csv at ``path`` (missing columns empty)."""
    import csv

    from mallocgame.runtime.bench import RESULT_COLUMNS

    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(RESULT_COLUMNS))
        w.writeheader()
        for r in rows:
            w.writerow(r)


class ReleaseCounting(CpuMemory):
    """The CPU stand-in, counting the calls of :meth:`~CpuMemory.release_dead`."""

    def __init__(self) -> None:
        super().__init__()
        self.released = 0

    def release_dead(self) -> None:
        self.released += 1


class Block(torch.nn.Module):
    """Linear layers with GELU, a layer norm (three results), a transpose view and a sum."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(4))
        self.norm = torch.nn.LayerNorm(32)

    def forward(self, x: Any) -> Any:
        for layer in self.layers:
            x = torch.nn.functional.gelu(layer(x))
        return self.norm(x).t(), x.sum()


@dataclass(frozen=True)
class Case:
    module: Any
    inputs: tuple[Any, ...]
    captured: CapturedProgram
    instance: Instance
    graph: BoundGraph


def make_case(capacity_fraction: float = 0.3) -> Case:
    torch.manual_seed(0)
    module = Block().eval()
    inputs = (torch.randn(16, 32),)
    captured = capture_torch(module, inputs, name="block")
    instance = derive_instance(
        captured.program, "gpu_hbm_host", capacity_fraction=capacity_fraction
    )
    return Case(module, inputs, captured, instance, bind(captured, instance))


@pytest.fixture(scope="module")
def case() -> Case:
    return make_case()
