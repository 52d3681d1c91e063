"""The interpreter runs the exported graph node by node with the answer's placement."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mallocgame.costmodel import derive_instance
from mallocgame.frontends.torch import extract_torch
from mallocgame.runtime.bench import load_solver
from mallocgame.runtime.errors import (
    ApplyError,
    NoGpuError,
    PlanError,
    ProgramMismatchError,
)
from mallocgame.runtime.memory import CpuMemory, make_memory
from mallocgame.runtime.plan import PlacementPlan, placement_plan
from mallocgame.runtime.torch_graph import bind, capture_torch
from mallocgame.runtime.torch_run import PlacedRunner, out_overload
from mallocgame.solvers.base import SolveRequest
from tests.runtime.conftest import Block

PLACEMENTS = [("drop", None), ("heuristic", None), ("greedy", None), ("random", 3), ("es", 8)]


def answer(instance, name, work):
    return load_solver(name).solve(instance, SolveRequest(seed=1, work=work))


def test_capture_is_the_frontends_program(case):
    expected = extract_torch(case.module, case.inputs, name="block")
    assert case.captured.program.to_dict() == expected.to_dict()


def test_instruction_t_is_the_t_th_op_node(case):
    names = [op.node.name for op in case.graph.ops]
    assert names == [ins.name for ins in case.instance.instructions]
    assert [op.index for op in case.graph.ops] == list(range(case.instance.num_instructions))


@pytest.mark.parametrize("solver,work", PLACEMENTS)
def test_results_are_identical_with_and_without_the_placement(case, solver, work):
    plan = placement_plan(case.instance, answer(case.instance, solver, work))
    runner = PlacedRunner(case.graph, plan, CpuMemory())
    with torch.no_grad():
        expected = case.module(*case.inputs)
    for _ in range(2):  # a second run reuses the host copies
        got = runner.run()
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert torch.equal(g, e)


@pytest.mark.parametrize("solver,work", PLACEMENTS)
def test_each_argument_lives_where_the_answer_says(case, solver, work):
    plan = placement_plan(case.instance, answer(case.instance, solver, work))
    runner = PlacedRunner(case.graph, plan, CpuMemory(), trace=True)
    runner.run()
    reads = [(t, x, where) for kind, t, x, where in runner.trace if kind == "read"]
    writes = [(t, x, where) for kind, t, x, where in runner.trace if kind == "write"]
    want_reads = [
        (s.index, r.tensor, "hbm" if r.segment is not None else "host")
        for s in plan.steps
        for r in s.reads
    ]
    want_writes = [
        (s.index, w.tensor, "hbm" if w.segment is not None else "host")
        for s in plan.steps
        for w in s.writes
    ]
    assert reads == want_reads
    assert writes == want_writes
    prefetches = [(t, x) for kind, t, x, _ in runner.trace if kind == "prefetch"]
    assert prefetches == [
        (s.index, plan.segments[sid].tensor) for s in plan.steps for sid in s.prefetch
    ]
    copies_out = [(t, x) for kind, t, x, _ in runner.trace if kind == "copy_out"]
    assert copies_out == [
        (s.index, plan.segments[sid].tensor) for s in plan.steps for sid in s.copy_out
    ]
    assert runner.staged == set()  # every host output here is written by the kernel itself (out=)


def test_drop_reads_every_operand_from_host_memory(case):
    plan = placement_plan(case.instance, answer(case.instance, "drop", None))
    runner = PlacedRunner(case.graph, plan, CpuMemory(), trace=True)
    runner.run()
    assert {where for kind, _, _, where in runner.trace if kind in ("read", "write")} == {"host"}


def test_the_framework_default_runs_in_hbm(case):
    runner = PlacedRunner(
        case.graph, PlacementPlan.all_fast(case.instance), CpuMemory(), trace=True
    )
    got = runner.run()
    assert {where for kind, _, _, where in runner.trace if kind in ("read", "write")} == {"hbm"}
    with torch.no_grad():
        expected = case.module(*case.inputs)
    assert all(torch.equal(g, e) for g, e in zip(got, expected))


def test_an_op_without_out_overload_is_staged_through_hbm(case, monkeypatch):
    import mallocgame.runtime.torch_run as run

    monkeypatch.setattr(run, "out_overload", lambda target: None)
    plan = placement_plan(case.instance, answer(case.instance, "drop", None))
    runner = PlacedRunner(case.graph, plan, CpuMemory(), trace=True)
    got = runner.run()
    with torch.no_grad():
        expected = case.module(*case.inputs)
    assert all(torch.equal(g, e) for g, e in zip(got, expected))
    assert runner.staged == {op.node.name for op in case.graph.ops}
    assert {where for kind, _, _, where in runner.trace if kind == "write"} == {"host"}
    assert set(runner.staged_why.values()) == {"no out= overload"}
    assert set(runner.staged_why) == {str(op.node.target) for op in case.graph.ops}


def test_an_out_overload_that_refuses_host_memory_is_staged_with_its_reason(case, monkeypatch):
    import mallocgame.runtime.torch_run as run

    def refusing(*args, **kwargs):
        raise RuntimeError("out= into host-mapped memory is not supported\nmore detail")

    monkeypatch.setattr(run, "out_overload", lambda target: (refusing, ("out",)))
    plan = placement_plan(case.instance, answer(case.instance, "drop", None))
    runner = PlacedRunner(case.graph, plan, CpuMemory())
    runner.run()
    assert runner.staged and set(runner.staged_why.values()) == {
        "RuntimeError: out= into host-mapped memory is not supported"
    }


def test_out_overload_matches_the_functional_arguments():
    op, outs = out_overload(torch.ops.aten.native_layer_norm.default)
    assert op is torch.ops.aten.native_layer_norm.out and outs == ("out0", "out1", "out2")
    assert out_overload(torch.ops.aten.addmm.default)[1] == ("out",)


def _schema(*arguments, returns=1):
    from types import SimpleNamespace

    args = [
        SimpleNamespace(
            name=name,
            type=kind,
            kwarg_only=name == "out",
            alias_info=SimpleNamespace(is_write=True) if name == "out" else None,
        )
        for name, kind in arguments
    ]
    return SimpleNamespace(arguments=args, returns=[None] * returns)


def test_out_overload_matches_argument_types_not_only_names():
    """torch 2.11 lists ``sum.DimnameList_out`` before ``sum.IntList_out``: same names, and
    an int list handed to the first fails. The overload taken is the one whose types match."""
    from types import SimpleNamespace

    dims = _schema(("self", "Tensor"), ("dim", "List[str]"), ("out", "Tensor"))
    ints = _schema(("self", "Tensor"), ("dim", "Optional[List[int]]"), ("out", "Tensor"))
    packet = SimpleNamespace(
        overloads=lambda: ["DimnameList_out", "IntList_out"],
        DimnameList_out=SimpleNamespace(_schema=dims),
        IntList_out=SimpleNamespace(_schema=ints),
    )
    functional = SimpleNamespace(
        overloadpacket=packet, _schema=_schema(("self", "Tensor"), ("dim", "Optional[List[int]]"))
    )
    op, outs = out_overload(functional)
    assert op is packet.IntList_out and outs == ("out",)
    assert out_overload(torch.ops.aten.sum.dim_IntList)[0] is torch.ops.aten.sum.IntList_out


def test_a_program_not_from_the_function_is_refused(case):
    torch.manual_seed(0)
    other = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU()).eval()
    captured = capture_torch(other, case.inputs, name="block")
    with pytest.raises(ProgramMismatchError, match="not from this function"):
        bind(captured, case.instance)


def test_a_plan_for_another_instance_is_refused(case):
    other = derive_instance(case.captured.program, "gpu_hbm_host", capacity_fraction=0.5)
    plan = PlacementPlan.all_fast(other)
    with pytest.raises(PlanError):
        PlacedRunner(case.graph, plan, CpuMemory())


def test_meta_modules_cannot_be_run():
    with torch.device("meta"):
        module = Block().eval()
    with pytest.raises(ApplyError, match="meta"):
        capture_torch(module, (torch.empty(4, 32, device="meta"),))


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_no_gpu_is_a_typed_error():
    with pytest.raises(NoGpuError, match="no CUDA device"):
        make_memory("cuda")


def test_an_unknown_device_is_a_typed_error():
    with pytest.raises(ApplyError):
        make_memory("tpu")


def test_host_memory_is_told_apart_from_hbm():
    mem = CpuMemory()
    host = mem.host_empty((4, 8), (8, 1), torch.float32)
    assert mem.is_host(host.kernel) and mem.is_host(host.kernel.t())
    assert not mem.is_host(mem.hbm_empty((4, 8), (8, 1), torch.float32))
    assert host.nbytes % 512 == 0 and host.nbytes >= 128


class _AtAddress:
    """A tensor as :meth:`~CpuMemory.is_host` reads it: a storage at ``ptr`` (an address
    the allocator reused for a fast tensor, made deterministic)."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def untyped_storage(self) -> _AtAddress:
        return self

    def data_ptr(self) -> int:
        return self.ptr


def test_a_freed_host_allocation_is_host_memory_no_more():
    """Before, every host pointer stayed registered: a fast tensor the allocator put where
    a freed host allocation was host memory to ``is_host`` (the runner's trace, which
    checks where each argument really is, said ``host`` for it)."""
    import gc

    mem = CpuMemory()
    host = mem.host_empty((4, 8), (8, 1), torch.float32)
    ptr = host.kernel.untyped_storage().data_ptr()
    view = host.kernel.t()
    del host
    gc.collect()
    assert mem.is_host(view) and mem.is_host(_AtAddress(ptr))  # a view keeps it alive
    del view
    gc.collect()
    assert ptr not in mem._host_ptrs and not mem.is_host(_AtAddress(ptr))


def test_a_host_allocation_seen_as_two_storages_is_host_while_either_lives():
    """On a GPU the kernel and dma views of one host allocation are two storages at one
    address (torch's pinned memory under unified addressing): the dma view stays host
    memory once the kernel view is gone."""
    import gc

    import numpy as np

    class TwoStorages(CpuMemory):
        def _host_bytes(self, nbytes):
            raw = np.zeros(nbytes, dtype=np.uint8)
            return torch.from_numpy(raw), torch.from_numpy(raw)

    mem = TwoStorages()
    host = mem.host_empty((4, 8), (8, 1), torch.float32)
    assert host.kernel.untyped_storage() is not host.dma.untyped_storage()
    ptr = host.dma.untyped_storage().data_ptr()
    assert host.kernel.untyped_storage().data_ptr() == ptr
    dma = host.dma
    del host
    gc.collect()
    assert mem.is_host(dma)
    del dma
    gc.collect()
    assert not mem.is_host(_AtAddress(ptr))


@pytest.mark.parametrize("solver", ["heuristic", "drop", "es"])
def test_a_run_holds_no_more_hbm_than_its_plan_at_any_instruction(case, solver):
    """After each instruction the run references exactly the HBM the plan holds there:
    nothing a step freed stays alive into the next (the allocator could not reuse it)."""
    from tests.runtime.conftest import LiveBytes

    plan = placement_plan(case.instance, answer(case.instance, solver, 8))
    memory = LiveBytes()
    runner = PlacedRunner(case.graph, plan, memory)
    runner.prepare()
    held, _ = memory.held_after_each_instruction(runner)
    assert len(held) == len(plan.steps) and held == plan.hbm_bytes()


class SetRow(torch.nn.Module):
    """``z[0] = 5.0`` on a new tensor: exported as ``copy(select(clone, 0, 0), 5.0)``,
    whose kernel returns the row on a new storage of the whole base (2048 bytes for 128)."""

    def forward(self, x):
        z = x * 2
        z[0] = 5.0
        return z


class SetColumns(torch.nn.Module):
    """``z[:, 4:8] = 7.0``: ``copy(slice(clone, 1, 4, 8), 7.0)`` returns a [16, 4] result
    of stride (32, 1), whose layout spans 1936 bytes for its 256."""

    def forward(self, x):
        z = x * 2
        z[:, 4:8] = 7.0
        return z


@pytest.mark.parametrize("module", [SetRow, SetColumns])
@pytest.mark.parametrize("solver", ["heuristic", None])
def test_a_result_on_a_storage_larger_than_its_tensor_is_held_at_its_size(solver, module):
    from tests.runtime.conftest import LiveBytes

    torch.manual_seed(0)
    x = torch.randn(16, 32)
    captured = capture_torch(module(), (x,), name="setrow")
    instance = derive_instance(captured.program, "gpu_hbm_host", capacity_fraction=0.4)
    assert "copy" in [ins.name for ins in instance.instructions]
    graph = bind(captured, instance)
    if solver is None:
        plan = PlacementPlan.all_fast(instance)
    else:
        plan = placement_plan(instance, answer(instance, solver, None))
    memory = LiveBytes()
    runner = PlacedRunner(graph, plan, memory)
    runner.prepare()
    held, got = memory.held_after_each_instruction(runner)
    # (the resident inputs, placed before the runs were followed, are left out)
    resident = sum(plan.sizes[x] for x in plan.resident)
    assert held == [b - resident for b in plan.hbm_bytes()]
    with torch.no_grad():
        assert torch.equal(got[0], module()(x))


def _dot_steps(case):
    from mallocgame.costmodel import DOT_OPCODES
    from mallocgame.frontends.torch import _op_name

    return {op.index for op in case.graph.ops if _op_name(op.node.target) in DOT_OPCODES}


def test_staged_dot_reads_copy_a_matmuls_host_operands_into_hbm(case):
    plan = placement_plan(case.instance, answer(case.instance, "drop", None))
    runner = PlacedRunner(case.graph, plan, CpuMemory(), trace=True, stage_dot_reads=True)
    got = runner.run()
    dots = _dot_steps(case)
    assert len(dots) == 4  # the Linear layers' addmm
    staged = [(t, x) for kind, t, x, _ in runner.trace if kind == "stage"]
    reads = [(t, x, where) for kind, t, x, where in runner.trace if kind == "read"]
    assert staged == [(t, x) for t, x, _ in reads if t in dots]  # every operand of a matmul
    assert {where for t, _, where in reads if t in dots} == {"hbm"}
    assert {where for t, _, where in reads if t not in dots} == {"host"}  # the rest as planned
    assert runner.dot_staged_bytes == sum(case.instance.tensors[x].size for _, x in staged)
    with torch.no_grad():
        expected = case.module(*case.inputs)
    assert all(torch.equal(g, e) for g, e in zip(got, expected))
    unstaged = PlacedRunner(case.graph, plan, CpuMemory(), trace=True)
    unstaged.run()
    assert unstaged.dot_staged_bytes == 0
    assert not [kind for kind, *_ in unstaged.trace if kind == "stage"]


def test_a_staged_matmul_operand_is_held_for_its_step_only(case):
    """Beyond the plan's HBM, a run with staged matmul reads holds just the scratch copies
    of the instruction that ran, and nothing of them into the next."""
    from tests.runtime.conftest import LiveBytes

    plan = placement_plan(case.instance, answer(case.instance, "heuristic", None))
    memory = LiveBytes()
    runner = PlacedRunner(case.graph, plan, memory, trace=True, stage_dot_reads=True)
    runner.prepare()
    with torch.no_grad(), memory.track():
        runner.run()
        memory.samples.clear()
        runner.trace.clear()
        runner.run(marks=[])
    scratch = [0] * len(plan.steps)
    for kind, t, x, _ in runner.trace:
        if kind == "stage":
            scratch[t] += case.instance.tensors[x].size
    assert any(scratch)
    held = memory.samples[1:]
    assert [h - p for h, p in zip(held, plan.hbm_bytes())] == scratch


def test_only_results_without_a_host_copy_stay_in_hbm(case):
    # an answer ends every result in host memory: its HBM copies are freed as planned,
    # not held to the end of the step beside the host copy
    answer = load_solver("heuristic").solve(case.instance, SolveRequest())
    placed = PlacedRunner(case.graph, placement_plan(case.instance, answer), CpuMemory())
    assert placed.result_tensors and not any(placed.keeps_in_hbm(x) for x in placed.result_tensors)
    default = PlacedRunner(case.graph, PlacementPlan.all_fast(case.instance), CpuMemory())
    assert all(default.keeps_in_hbm(x) for x in default.result_tensors)
    assert not any(default.keeps_in_hbm(x) for x in case.graph.inputs)


def test_an_op_that_reads_a_computed_empty_tensor_runs() -> None:
    """A tensor of no elements holds no program tensor: the op that reads it is given an
    empty tensor of its shape, under every plan."""
    from mallocgame.runtime.measure import compare_results
    from mallocgame.runtime.torch_graph import eager_results

    class EmptyPart(torch.nn.Module):
        def forward(self, x):
            empty = torch.zeros(0, 8) + x[:0] * 2
            return (torch.cat([x * 3, empty]),)

    captured = capture_torch(EmptyPart(), (torch.randn(4, 8),), name="empty-part")
    instance = derive_instance(captured.program, "gpu_hbm_host", capacity_fraction=0.25)
    graph = bind(captured, instance)
    reference = eager_results(graph).values
    heuristic = placement_plan(instance, answer(instance, "heuristic", None))
    for plan in (PlacementPlan.all_fast(instance), heuristic):
        assert compare_results(PlacedRunner(graph, plan, CpuMemory()).run(), reference)[0]


def test_an_expanded_input_and_buffer_are_copied_dense() -> None:
    """Stride-0 layouts (``expand``) cannot be written through: their copies are dense, as
    the program sizes them (every element)."""
    from mallocgame.runtime.measure import compare_results
    from mallocgame.runtime.torch_graph import eager_results

    class Positions(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("pos", torch.arange(8.0).expand(4, -1))

        def forward(self, x):
            return (x * 2 + self.pos,)

    x = torch.randn(1, 8).expand(4, 8)
    captured = capture_torch(Positions(), (x,), name="positions")
    instance = derive_instance(captured.program, "gpu_hbm_host", capacity_fraction=0.25)
    graph = bind(captured, instance)
    assert {graph.specs[i].stride for i in graph.inputs} == {(8, 1)}
    reference = eager_results(graph).values
    heuristic = placement_plan(instance, answer(instance, "heuristic", None))
    for plan in (PlacementPlan.all_fast(instance), heuristic):
        assert compare_results(PlacedRunner(graph, plan, CpuMemory()).run(), reference)[0]
