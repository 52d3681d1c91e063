"""The captured graph bound and run beyond the frontend's program: a matmul's operand
layout, the eager reference a placed run is compared with, a tensor passed as a keyword
argument, and a tuple argument's tensors."""

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


@pytest.mark.parametrize("factory", ["accumulator", "scales_its_input", "copies_its_input"])
def test_the_eager_reference_leaves_what_the_module_mutates_as_it_was(factory) -> None:
    """The reference holds the graph's results in order, mutations first, and comes from
    copies: the state and inputs the graph is bound to (shared with the module) stay."""
    from mallocgame.costmodel import derive_instance
    from mallocgame.runtime.measure import compare_results
    from mallocgame.runtime.memory import CpuMemory
    from mallocgame.runtime.plan import PlacementPlan
    from mallocgame.runtime.torch_graph import bind, eager_results
    from mallocgame.runtime.torch_run import PlacedRunner
    from tests.runtime import factory_module

    module = getattr(factory_module, factory)()
    x = torch.randn(16, 32)
    captured = capture_torch(module, (x,), name=factory)
    instance = derive_instance(captured.program, "gpu_hbm_host")
    graph = bind(captured, instance)
    before = [t.clone() for t in (x, *module.buffers())]
    eager = eager_results(graph)
    assert len(eager.values) == 2 and len(eager.outputs) == 1  # the mutation, the output
    assert eager.values[1] is eager.outputs[0]
    assert all(torch.equal(a, b) for a, b in zip(before, (x, *module.buffers())))
    placed = PlacedRunner(graph, PlacementPlan.all_fast(instance), CpuMemory())
    assert compare_results(placed.run(), eager.values) == (True, 0.0)
    assert compare_results(placed.run(), eager.values) == (True, 0.0)  # no drift: functional
    with torch.no_grad():  # what the module computes from the untouched state, once
        assert torch.equal(module(x.clone()), eager.outputs[0])


def test_a_copy_into_a_buffer_binds_in_the_frontends_order_before_the_optimizer() -> None:
    """``self.last.copy_(x)`` is the frontend's ``copy_.last`` after the graph's nodes (a
    joint graph keeps torch's ``copy`` node: it is taken out here, as an inference graph
    has it) and before the optimizer's updates; the placed step computes what the graph
    with torch's node computes."""
    from mallocgame.costmodel import derive_instance
    from mallocgame.frontends.torch import extract_exported
    from mallocgame.runtime.measure import compare_results
    from mallocgame.runtime.memory import CpuMemory
    from mallocgame.runtime.plan import PlacementPlan, placement_plan
    from mallocgame.runtime.torch_graph import CapturedProgram, bind
    from mallocgame.runtime.torch_run import PlacedRunner
    from mallocgame.solvers import SolveRequest, get_solver
    from tests.runtime import factory_module

    def placed(captured, solver):
        instance = derive_instance(captured.program, "gpu_hbm_host", capacity_fraction=0.25)
        graph = bind(captured, instance)
        if solver == "fast":
            plan = PlacementPlan.all_fast(instance)
        else:
            plan = placement_plan(instance, get_solver(solver).solve(instance, SolveRequest()))
        return graph, PlacedRunner(graph, plan, CpuMemory()).run()

    step = TrainingStep("sum", optimizer="sgd")
    x = torch.randn(16, 32)
    with_node = capture_torch(factory_module.copies_its_input(), (x,), training_step=step)
    exported = capture_torch(factory_module.copies_its_input(), (x,), training_step=step).exported
    (copy,) = [n for n in exported.graph.nodes if n.target is torch.ops.aten.copy.default]
    copy.replace_all_uses_with(copy.args[1])
    exported.graph.erase_node(copy)
    program = extract_exported(exported, name="copies", optimizer="sgd")
    opcodes = [ins.opcode for ins in program.instructions]
    assert "copy" not in opcodes and opcodes[-3:] == ["copy_", "sgd_update", "sgd_update"]
    captured = CapturedProgram("copies", exported, program, (x,))
    _, expected = placed(with_node, "fast")
    assert torch.equal(expected[0], x)  # the buffer's new contents, first
    for solver in ("fast", "heuristic", "drop"):
        graph, results = placed(captured, solver)
        assert graph.ops[-3].copy is not None and graph.ops[-1].update is not None
        assert compare_results(results, expected) == (True, 0.0)


def test_an_op_that_takes_a_tensor_as_a_keyword_binds_and_runs() -> None:
    """Attention's backward takes its mask as ``attn_mask=``: an operand, as the frontend
    counts it."""
    from mallocgame.costmodel import derive_instance
    from mallocgame.runtime.measure import compare_results
    from mallocgame.runtime.memory import CpuMemory
    from mallocgame.runtime.plan import PlacementPlan, placement_plan
    from mallocgame.runtime.torch_graph import bind
    from mallocgame.runtime.torch_run import PlacedRunner
    from mallocgame.solvers import SolveRequest, get_solver

    class Attention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x, mask):
            q = self.lin(x)
            return torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)

    torch.manual_seed(0)
    inputs = (torch.randn(1, 2, 8, 4), torch.randn(1, 1, 8, 8))
    captured = capture_torch(Attention(), inputs, training_step=TrainingStep("sum"))
    keyword = [n for n in captured.exported.graph.nodes if "attn_mask" in n.kwargs]
    assert any(isinstance(n.kwargs["attn_mask"], torch.fx.Node) for n in keyword)
    instance = derive_instance(captured.program, "gpu_hbm_host", capacity_fraction=0.25)
    graph = bind(captured, instance)
    answer = get_solver("heuristic").solve(instance, SolveRequest())
    everything_fast = PlacedRunner(graph, PlacementPlan.all_fast(instance), CpuMemory()).run()
    placed = PlacedRunner(graph, placement_plan(instance, answer), CpuMemory()).run()
    assert compare_results(placed, everything_fast)[0]


def test_a_tuple_argument_is_several_inputs() -> None:
    """``forward(xs, y)`` with ``xs = (a, b)``: export numbers the leaves a, b, y."""
    from mallocgame.costmodel import derive_instance
    from mallocgame.runtime.measure import compare_results
    from mallocgame.runtime.memory import CpuMemory
    from mallocgame.runtime.plan import PlacementPlan
    from mallocgame.runtime.torch_graph import bind, eager_results
    from mallocgame.runtime.torch_run import PlacedRunner

    class Pair(torch.nn.Module):
        def forward(self, xs, y):
            a, b = xs
            return a @ b + y

    inputs = ((torch.randn(4, 8), torch.randn(8, 4)), torch.randn(4, 4))
    captured = capture_torch(Pair(), inputs, name="pair")
    assert [tuple(t.shape) for t in captured.input_leaves] == [(4, 8), (8, 4), (4, 4)]
    instance = derive_instance(captured.program, "gpu_hbm_host")
    graph = bind(captured, instance)
    placed = PlacedRunner(graph, PlacementPlan.all_fast(instance), CpuMemory()).run()
    assert compare_results(placed, eager_results(graph).values) == (True, 0.0)


def test_an_empty_name_is_refused() -> None:
    from mallocgame.frontends.torch import TorchFrontendError

    for name in ("", 5):  # (5: AttributeError from .strip())
        with pytest.raises(TorchFrontendError, match="name is a string that is not empty"):
            capture_torch(TwoLinear(), (torch.randn(2, 8),), name=name)


def test_a_capture_holds_back_torchs_own_warnings(recwarn) -> None:
    """As ``extract`` does: torch warns of a deprecation inside export on every capture,
    which a user of ``apply`` can do nothing about."""
    capture_torch(TwoLinear(), (torch.randn(2, 8),), name="two")
    assert [str(w.message) for w in recwarn] == []
