"""Module factories for the ``apply`` command's tests (``tests.runtime.factory_module:block``;
``accumulator`` and ``scales_its_input`` mutate a buffer and their input)."""

from __future__ import annotations

from tests.runtime.conftest import Block


def block():
    import torch

    torch.manual_seed(0)
    return Block().eval()


def accumulator():
    """A module that adds its input's column sums to a buffer it returns with (``acc``)."""
    import torch

    class Accumulator(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(32, 32)
            self.register_buffer("acc", torch.zeros(32))

        def forward(self, x):
            self.acc.add_(x.sum(0))
            return self.lin(x) * 2 + self.acc

    torch.manual_seed(0)
    return Accumulator().eval()


def scales_its_input():
    """A module that doubles its input in place before its layer reads it."""
    import torch

    class ScalesItsInput(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(32, 32)

        def forward(self, x):
            x.mul_(2)
            return self.lin(x)

    torch.manual_seed(0)
    return ScalesItsInput().eval()
