"""Module factories for the ``apply`` command's tests (``tests.runtime.factory_module:block``;
``accumulator`` and ``scales_its_input`` mutate a buffer and their input,
``copies_its_input`` copies its input into a buffer; ``dict_and_int`` takes a dict of
tensors and an int, its own example inputs; ``noisy``'s
results differ run to run; ``on_meta``'s block has no values)."""

from __future__ import annotations

import torch

from tests.runtime.conftest import Block


class Accumulator(torch.nn.Module):
    """Adds its input's column sums to a buffer (``acc``) that its result adds in."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(32, 32)
        self.register_buffer("acc", torch.zeros(32))

    def forward(self, x):
        self.acc.add_(x.sum(0))
        return self.lin(x) * 2 + self.acc


class ScalesItsInput(torch.nn.Linear):
    """Doubles its input in place, then applies its layer to it."""

    def __init__(self) -> None:
        super().__init__(32, 32)

    def forward(self, x):
        x.mul_(2)
        return super().forward(x)


class CopiesItsInput(torch.nn.Module):
    """Keeps a copy of its input in a buffer (``last``), then applies its layer to it."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(32, 32)
        self.register_buffer("last", torch.zeros(16, 32))

    def forward(self, x):
        self.last.copy_(x)
        return self.lin(x)


class DictAndInt(torch.nn.Module):
    """Applies its layer to ``batch["x"]``, scales it by ``k`` and adds ``batch["y"]``."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(32, 32)

    def forward(self, batch, k):
        return self.lin(batch["x"]) * k + batch["y"]


class Noisy(torch.nn.Module):
    """Adds fresh noise to its layer's output: no two runs give the same results."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(32, 32)

    def forward(self, x):
        return self.lin(x) + torch.rand(x.shape[0], 32)


def _seeded(make):
    torch.manual_seed(0)
    return make().eval()


def block():
    return _seeded(Block)


def accumulator():
    return _seeded(Accumulator)


def scales_its_input():
    return _seeded(ScalesItsInput)


def copies_its_input():
    return _seeded(CopiesItsInput)


def dict_and_int():
    """The module and its example inputs: a dict of two tensors and an int."""
    return _seeded(DictAndInt), ({"x": torch.ones(16, 32), "y": torch.ones(16, 32)}, 3)


def noisy():
    return _seeded(Noisy)


def on_meta():
    """A block on the meta device: shapes and no values."""
    with torch.device("meta"):
        return Block()
