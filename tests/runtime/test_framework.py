"""PyTorch's own steps: eager inference, an eager training step (with an optimizer's
update or without), and save_on_cpu; the captured optimizer step run as torch.optim's."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from mallocgame.costmodel import derive_instance
from mallocgame.frontends.torch import TrainingStep
from mallocgame.runtime.bench import load_solver
from mallocgame.runtime.errors import ApplyError, ProgramMismatchError
from mallocgame.runtime.framework import framework_step, measure_framework
from mallocgame.runtime.memory import CpuMemory
from mallocgame.runtime.plan import PlacementPlan, placement_plan
from mallocgame.runtime.torch_graph import OPTIMIZER_SETTINGS, bind, capture_torch
from mallocgame.runtime.torch_run import PlacedRunner
from mallocgame.solvers.base import SolveRequest
from tests.runtime.conftest import Block, ReleaseCounting


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


def test_a_constant_fill_in_host_memory_is_written_there_not_staged(training):
    """The loss's gradient seed (``full_like``, no ``out=`` overload) that an answer puts in
    host memory is that memory filled in place: the same values, nothing through HBM."""
    from mallocgame.runtime.torch_run import fill_value

    _, _, instance, graph, reference = training
    fills = [
        op
        for op in graph.ops
        if op.node is not None and fill_value(op.node.target, op.node.args) is not None
    ]
    assert fills  # the step has one
    runner = PlacedRunner(
        graph,
        placement_plan(instance, load_solver("drop").solve(instance, SolveRequest())),
        CpuMemory(),
        trace=True,
    )
    got = runner.run()
    assert all(torch.equal(g, r) for g, r in zip(got, reference))
    assert not {op.node.name for op in fills} & runner.staged
    writes = {(t, where) for kind, t, _, where in runner.trace if kind == "write"}
    assert all((op.index, "host") in writes for op in fills)


def test_fill_values_are_read_only_from_fills():
    from mallocgame.runtime.torch_run import fill_value

    aten = torch.ops.aten
    assert fill_value(aten.full_like.default, (torch.ones(2), 0.5)) == 0.5
    assert fill_value(aten.full.default, ([2, 3], 7)) == 7
    assert fill_value(aten.scalar_tensor.default, (1.25,)) == 1.25
    assert fill_value(aten.add.Tensor, (torch.ones(2), 1.0)) is None
    assert fill_value(aten.full_like.default, (torch.ones(2), torch.ones(()))) is None


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
    # the checked run and the timed runs offload, and the first run counts what it moves,
    # each the same bytes
    runs = 1 + offloaded.measurement.steps
    assert len(packed) % runs == 0 and sum(packed) == runs * offloaded.host_bytes
    assert offloaded.measurement.max_abs_diff == plain.measurement.max_abs_diff < 1e-6
    assert offloaded.measurement.steps == 2 and offloaded.measurement.median_s > 0
    # the CPU stand-in counts no fast memory: no peak, rather than a measured 0
    assert plain.measurement.peak_hbm_bytes is offloaded.measurement.peak_hbm_bytes is None


def test_the_framework_step_releases_the_dead_through_its_backend(case):
    memory = ReleaseCounting()
    with torch.no_grad():
        reference = case.module(*case.inputs)
    measure_framework(case.module, case.inputs, memory, reference, warmup=1, steps=1)
    assert memory.released == 1  # once, before the allocation the step starts from


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


class Mlp(torch.nn.Module):
    """Two linear layers with a GELU between: the mean of its output has gradients well
    above rounding (Block's is the mean of a layer norm's output, zero but for rounding)."""

    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(32, 64)
        self.down = torch.nn.Linear(64, 8)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)))


@pytest.fixture(scope="module", params=["sgd", "adamw"])
def updating(request):
    """A training step with an optimizer's update: the module, its inputs, instance, bound
    graph and the graph's results with everything in HBM."""
    torch.manual_seed(0)
    module = Mlp().eval()
    inputs = (torch.randn(16, 32),)
    step = TrainingStep("mean", request.param)
    captured = capture_torch(module, inputs, name="block", training_step=step)
    instance = derive_instance(captured.program, "gpu_hbm_host", capacity_fraction=0.3)
    graph = bind(captured, instance)
    reference = PlacedRunner(graph, PlacementPlan.all_fast(instance), CpuMemory()).run()
    return request.param, module, inputs, instance, graph, reference


def test_the_update_is_torch_optims_of_the_graphs_gradients(updating):
    optimizer, module, inputs, instance, graph, reference = updating
    plain = capture_torch(module, inputs, training_step=TrainingStep("mean"))
    plain_instance = derive_instance(plain.program, "gpu_hbm_host", capacity_fraction=0.3)
    plain_graph = bind(plain, plain_instance)
    loss, *gradients = PlacedRunner(
        plain_graph, PlacementPlan.all_fast(plain_instance), CpuMemory()
    ).run()
    eager = copy.deepcopy(module)
    params = list(eager.parameters())
    for p, g in zip(params, gradients, strict=True):
        p.grad = g.clone()
    kind = torch.optim.SGD if optimizer == "sgd" else torch.optim.AdamW
    opt = kind(params, **OPTIMIZER_SETTINGS[optimizer])
    opt.step()
    expected = [loss]
    for p in params:
        state = opt.state[p]
        expected += [p.detach(), *(state[k] for k in ("exp_avg", "exp_avg_sq") if k in state)]
    assert len(reference) == len(expected)
    assert all(torch.equal(r, e) for r, e in zip(reference, expected))
    updates = [op.update for op in graph.ops if op.update is not None]
    assert [u.optimizer for u in updates] == [optimizer] * len(params)
    assert [instance.instructions[op.index].opcode for op in graph.ops[-len(params) :]] == [
        f"{optimizer}_update"
    ] * len(params)
    for u in updates:  # AdamW's moments are inputs that start at zero
        assert len(u.moments) == (2 if optimizer == "adamw" else 0)
        assert all(graph.inputs[m] == ("moment", u.parameter) for m in u.moments)
        assert all(not graph.input_value(m).any() for m in u.moments)


def test_the_eager_step_with_torch_optim_is_the_graphs_to_rounding(updating):
    optimizer, module, inputs, _, _, reference = updating
    eager = copy.deepcopy(module)  # torch.optim updates it in place
    got = framework_step(eager, inputs, loss="mean", optimizer=optimizer)()
    params = list(module.parameters())
    per_parameter = 3 if optimizer == "adamw" else 1  # the parameter, then its two moments
    assert len(got) == len(reference) == 1 + per_parameter * len(params)
    # eager autograd's gradients are the graph's to rounding, and so are the updates
    for g, r in zip(got, reference):
        assert g.shape == r.shape and torch.allclose(g, r, rtol=1e-5, atol=1e-8)
    new_params = reference[1::per_parameter]
    assert all(not torch.equal(n, p) for n, p in zip(new_params, params))  # they moved


def test_a_placed_optimizer_step_gives_the_same_results(updating):
    optimizer, _, _, instance, graph, reference = updating
    for name in ("heuristic", "drop"):
        answer = load_solver(name).solve(instance, SolveRequest())
        runner = PlacedRunner(graph, placement_plan(instance, answer), CpuMemory(), trace=True)
        got = runner.run()
        assert all(torch.equal(g, r) for g, r in zip(got, reference))
        if name == "drop":  # the updates read their operands from host memory
            first = next(op.index for op in graph.ops if op.update is not None)
            reads = [where for kind, t, _, where in runner.trace if kind == "read" and t >= first]
            assert reads and set(reads) == {"host"}
            # and their kernels write host memory themselves: nothing staged through HBM
            writes = [w for kind, t, _, w in runner.trace if kind == "write" and t >= first]
            assert writes and set(writes) == {"host"}
            assert not {n for n in runner.staged if n.startswith(f"{optimizer}.")}


def test_a_training_step_holds_no_more_hbm_than_its_plan(updating):
    """The backward pass and the optimizer's updates too reference exactly the HBM the plan
    holds after each instruction (the CPU stand-in counting live storages)."""
    from tests.runtime.conftest import LiveBytes

    _, _, _, instance, graph, _ = updating
    for name in ("heuristic", "drop"):
        plan = placement_plan(instance, load_solver(name).solve(instance, SolveRequest()))
        memory = LiveBytes()
        runner = PlacedRunner(graph, plan, memory)
        runner.prepare()
        assert memory.held_after_each_instruction(runner)[0] == plan.hbm_bytes()


def test_an_update_whose_kernels_refuse_host_memory_is_staged(updating, monkeypatch):
    """Where writing an update's result into host memory fails (as an ``out=`` overload
    may on a GPU), the update is computed in HBM and copied, and the runner says why."""
    import mallocgame.runtime.torch_run as run

    optimizer, _, _, instance, graph, reference = updating
    real = run.optimizer_update

    def refusing(update, operands, outs=None):
        if outs is not None and any(o is not None for o in outs):
            raise RuntimeError("out= into host-mapped memory is not supported")
        return real(update, operands, outs)

    monkeypatch.setattr(run, "optimizer_update", refusing)
    answer = load_solver("drop").solve(instance, SolveRequest())
    runner = PlacedRunner(graph, placement_plan(instance, answer), CpuMemory())
    got = runner.run()
    assert all(torch.equal(g, r) for g, r in zip(got, reference))
    assert {n for n in runner.staged if n.startswith(f"{optimizer}.")}
    assert runner.staged_why[f"{optimizer}_update"].startswith("RuntimeError: out=")


def test_measuring_an_optimizer_step_puts_the_parameters_back(updating):
    optimizer, module, inputs, _, _, reference = updating
    before = [p.detach().clone() for p in module.parameters()]
    got = measure_framework(
        module, inputs, CpuMemory(), reference, loss="mean", optimizer=optimizer, steps=2
    )
    assert got.measurement.max_abs_diff < 1e-6  # the first step, from the parameters as they were
    assert all(torch.equal(p, b) for p, b in zip(module.parameters(), before))
    assert all(p.grad is None for p in module.parameters())


def test_an_update_of_another_optimizer_is_refused(updating):
    optimizer, module, inputs, *_ = updating
    other = "adamw" if optimizer == "sgd" else "sgd"
    captured = capture_torch(module, inputs, training_step=TrainingStep("mean", other))
    instance = updating[3]
    with pytest.raises(ProgramMismatchError, match="not from this function"):
        bind(captured, instance)


@pytest.mark.parametrize(
    "kwargs, message",
    [({"optimizer": "adamw"}, "needs a loss"), ({"loss": "mean", "optimizer": "lion"}, "'lion'")],
)
def test_bad_optimizers_are_typed_errors(case, kwargs, message):
    with pytest.raises(ApplyError, match=message):
        framework_step(case.module, case.inputs, **kwargs)


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


class DictInOut(torch.nn.Module):
    """Takes a dict, updates one of its tensors in place and returns a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)

    def forward(self, x, extra):
        extra["y"].add_(1.0)
        return {"logits": self.fc(x) + extra["y"], "total": x.sum()}


def test_the_eager_baseline_reads_dicts_as_the_capture_does() -> None:
    from mallocgame.runtime.measure import check_runs, compare_results, flat_tensors

    torch.manual_seed(0)
    module = DictInOut().eval()
    inputs = (torch.randn(4, 3), {"y": torch.randn(4, 3)})
    assert len(flat_tensors(inputs)) == 2 and len(flat_tensors(module(*inputs))) == 2
    y = inputs[1]["y"].clone()
    with torch.no_grad():
        reference = module(*copy.deepcopy(inputs))
    measured = measure_framework(module, inputs, CpuMemory(), reference, warmup=1, steps=2)
    assert measured.measurement.identical  # the dict's tensors compared, not none of them
    assert torch.equal(inputs[1]["y"], y)  # the dict's input restored after the runs
    assert compare_results({"a": torch.ones(2)}, {"a": torch.zeros(2)}) == (False, 1.0)
    big = torch.tensor([2**62])
    assert compare_results([big], [-big]) == (False, float(2**63))  # no int64 overflow
    for steps, warmup in ((0, 1), (-1, 1), (2, -1), (2, 0)):
        with pytest.raises(ValueError, match="must be a whole number"):
            check_runs(warmup, steps)
