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


class LiveBytes(CpuMemory):
    """The CPU stand-in that counts, at each :meth:`mark`, the bytes of the storages made
    by ATen ops since :meth:`track` began that are still referenced, host copies left out:
    the HBM a run holds (``samples``, one a mark). Ops are seen through a
    ``TorchDispatchMode``, storages followed by weak references to the tensors that use
    them."""

    def __init__(self) -> None:
        super().__init__()
        self.samples: list[int] = []
        self._uses: dict[int, list[int]] = {}  # storage address -> [bytes, tensors alive]

    def _forget(self, ptr: int) -> None:
        entry = self._uses.get(ptr)
        if entry is not None:
            entry[1] -= 1
            if entry[1] == 0:
                del self._uses[ptr]

    def _seen(self, value: Any) -> None:
        import weakref

        from torch.utils._pytree import tree_flatten

        for t in tree_flatten(value)[0]:
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr():
                storage = t.untyped_storage()
                entry = self._uses.setdefault(storage.data_ptr(), [storage.nbytes(), 0])
                entry[1] += 1
                weakref.finalize(t, self._forget, storage.data_ptr())

    def track(self) -> Any:
        """A context in which every ATen op's results are followed."""
        from torch.utils._python_dispatch import TorchDispatchMode

        memory = self

        class Follow(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                memory._seen(out)
                return out

        return Follow()

    def held(self) -> int:
        return sum(n for ptr, (n, _) in self._uses.items() if ptr not in self._host_ptrs)

    def mark(self) -> Any:
        self.samples.append(self.held())
        return super().mark()

    def held_after_each_instruction(self, runner: Any) -> tuple[list[int], Any]:
        """Run ``runner`` (a prepared ``PlacedRunner`` over this memory) twice, followed and
        without gradients, the first run making the outputs' host copies; the HBM bytes
        held after each instruction of the second run, and its results."""
        with torch.no_grad(), self.track():
            runner.run()
            self.samples.clear()
            results = runner.run(marks=[])
        return self.samples[1:], results


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
