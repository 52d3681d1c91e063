"""A module factory for the ``apply`` command's tests (``tests.runtime.factory_module:block``)."""

from __future__ import annotations

from tests.runtime.conftest import Block


def block():
    import torch

    torch.manual_seed(0)
    return Block().eval()
