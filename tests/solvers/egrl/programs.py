"""Hand-made programs the ``egrl`` tests share (built with :mod:`tests.builders`)."""

from __future__ import annotations

from mallocgame.instance import Instance
from tests.builders import B, I, X, build

__all__ = ["alias_program"]


def alias_program() -> Instance:
    """Two instructions; buffers in game order: 0 = read of X0 (alias group g, demand
    0), 1 = write of X1, 2 = read of X1, 3 = read of X0 (group g, demand 0), 4 = write
    of X2 (a program result). Nodes of its graph: buffers 0-4, instructions 5-6,
    tensors 7-9, the group of buffers 0 and 3 at 10."""
    return build(
        tensors=[X(100), X(100), X(50, live_out=True)],
        instructions=[
            I(reads=[B(0, alias="g", demand=0.0)], writes=[1], supply=2.0),
            I(reads=[1, B(0, alias="g", demand=0.0)], writes=[2], supply=2.0),
        ],
        capacity=1000,
    )
