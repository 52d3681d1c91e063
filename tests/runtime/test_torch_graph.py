"""What the captured graph tells the runtime beyond the program: a matmul's operand layout."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mallocgame.frontends.torch import TrainingStep
from mallocgame.runtime.torch_graph import MATMUL_OPCODES, capture_torch, matmul_layout


class TwoLinear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x))) @ torch.ones(4, 3)


def test_matmul_layouts_of_a_training_step():
    torch.manual_seed(0)
    captured = capture_torch(TwoLinear(), (torch.randn(32, 8),), training_step=TrainingStep("mean"))
    nodes = list(captured.exported.graph.nodes)
    found = {}
    for node in nodes:
        layout = matmul_layout(node)
        opcode = getattr(node.target, "__name__", "").split(".")[0]
        assert bool(layout) == (node.op == "call_function" and opcode in MATMUL_OPCODES)
        if layout:
            found.setdefault(opcode, set()).add(layout)
    # forward x @ W.T (addmm) and the plain @ (mm, NN); backward: the inputs' gradients
    # grad @ W (NN) and through the plain @ (NT), the weights' x.T @ grad (TN)
    assert found == {"addmm": {"NT"}, "mm": {"NN", "NT", "TN"}}
    assert matmul_layout(None) == ""
