"""PyTorch's own steps: eager inference, an eager training step, and save_on_cpu."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mallocgame.costmodel import derive_instance
from mallocgame.frontends.torch import TrainingStep
from mallocgame.runtime.bench import load_solver
from mallocgame.runtime.errors import ApplyError
from mallocgame.runtime.framework import framework_step, measure_framework
from mallocgame.runtime.memory import CpuMemory
from mallocgame.runtime.plan import PlacementPlan, placement_plan
from mallocgame.runtime.torch_graph import bind, capture_torch
from mallocgame.runtime.torch_run import PlacedRunner
from mallocgame.solvers.base import SolveRequest
from tests.runtime.conftest import Block


@pytest.fixture(scope="module")
def training():
    """Block's training step (mean of its first output), captured and bound, and the
    graph's results with everything in HBM."""
    torch.manual_seed(0)
    module = Block().eval()
    inputs = (torch.randn(16, 32),)
    captured = capture_torch(module, inputs, name="block", training_step=TrainingStep("mean"))
    instance = derive_instance(captured.program, "gpu_hbm_host", capacity_fraction=0.3)
    graph = bind(captured, instance)
    reference = PlacedRunner(graph, PlacementPlan.all_fast(instance), CpuMemory()).run()
    return module, inputs, instance, graph, reference


def test_eager_inference_is_the_modules_output(case):
    got = framework_step(case.module, case.inputs)()
    with torch.no_grad():
        expected = case.module(*case.inputs)
    assert len(got) == 2 and all(torch.equal(g, e) for g, e in zip(got, expected))


def test_the_training_step_graph_computes_the_eager_loss_and_gradients(training):
    module, inputs, instance, _, reference = training
    got = framework_step(module, inputs, loss="mean")()
    params = list(module.parameters())
    assert len(got) == len(reference) == 1 + len(params)
    assert instance.source["mode"] == "training_step"
    for g, r in zip(got, reference):
        assert g.shape == r.shape and torch.allclose(g, r, atol=1e-6)


def test_a_placed_training_step_gives_the_same_results(training):
    _, _, instance, graph, reference = training
    for name in ("heuristic", "drop"):
        answer = load_solver(name).solve(instance, SolveRequest())
        got = PlacedRunner(graph, placement_plan(instance, answer), CpuMemory()).run()
        assert all(torch.equal(g, r) for g, r in zip(got, reference))


def test_each_step_allocates_its_gradients_anew(training):
    module, inputs, *_ = training
    step = framework_step(module, inputs, loss="mean")
    first = step()
    second = step()
    assert first[1] is not second[1] and torch.equal(first[1], second[1])


def test_save_on_cpu_offloads_what_autograd_saves(training, monkeypatch):
    module, inputs, _, _, reference = training
    packed: list[int] = []
    real = torch.autograd.graph.save_on_cpu

    class Counting(real):
        def __init__(self, pin_memory: bool = False) -> None:
            super().__init__(pin_memory=pin_memory)
            inner_pack = self.pack_hook

            def pack(t):
                packed.append(t.numel() * t.element_size())
                return inner_pack(t)

            self.pack_hook = pack

    monkeypatch.setattr(torch.autograd.graph, "save_on_cpu", Counting)
    plain = measure_framework(
        module, inputs, CpuMemory(), reference, loss="mean", warmup=1, steps=2
    )
    offloaded = measure_framework(
        module,
        inputs,
        CpuMemory(),
        reference,
        baseline="eager-save-on-cpu",
        loss="mean",
        warmup=1,
        steps=2,
    )
    assert plain.host_bytes == 0 and offloaded.host_bytes > 0
    # the checked run and the timed runs offload (the counting pass has its own hooks),
    # each the same bytes
    runs = 1 + offloaded.measurement.steps
    assert len(packed) % runs == 0 and sum(packed) == runs * offloaded.host_bytes
    assert offloaded.measurement.max_abs_diff == plain.measurement.max_abs_diff < 1e-6
    assert offloaded.measurement.steps == 2 and offloaded.measurement.median_s > 0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"baseline": "deepspeed"}, "unknown framework baseline"),
        ({"baseline": "eager-save-on-cpu"}, "needs a training step"),
        ({"loss": "cross-entropy"}, "loss 'cross-entropy'"),
    ],
)
def test_bad_baselines_are_typed_errors(case, kwargs, message):
    with pytest.raises(ApplyError, match=message):
        measure_framework(case.module, case.inputs, CpuMemory(), None, **kwargs)


def test_a_training_step_with_an_optimizer_is_not_run(case):
    with pytest.raises(ApplyError, match="optimizer"):
        capture_torch(case.module, case.inputs, training_step=TrainingStep("mean", "sgd"))


def test_an_earlier_steps_gradients_are_not_counted_as_the_base(training, monkeypatch):
    # the base is taken with every gradient freed: a gradient left on the module by an
    # earlier step would otherwise hide the step's own gradients from its peak
    module, inputs, _, _, reference = training
    seen = []

    class Recording(CpuMemory):
        def allocated(self):
            seen.append([p.grad for p in module.parameters()])
            return 0

    framework_step(module, inputs, loss="mean")()  # leaves gradients on the module
    assert all(p.grad is not None for p in module.parameters())
    got = measure_framework(module, inputs, Recording(), reference, loss="mean", warmup=1, steps=1)
    assert seen and all(g is None for g in seen[0])
    assert got.differing == () or all(d < 1e-6 for _, d in got.differing)
