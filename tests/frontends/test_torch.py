"""The PyTorch frontend on tiny modules whose programs are known by hand.

Each test builds a module of a few layers, captures it with
:func:`mallocgame.frontends.torch.extract_torch` and checks what the module docstring
promises: the instructions in graph order, tensor sizes (float32: 4 bytes an element),
live ranges, flops (PyTorch's formulas: ``2 m n k`` for a matmul, ``2 x output
elements x kernel volume x input channels`` for a convolution), alias groups, and
MARL's node granularity.
"""

from __future__ import annotations

import dataclasses
import re
import sys

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from mallocgame.check import check_solution  # noqa: E402
from mallocgame.costmodel import derive_instance, peak_live_bytes  # noqa: E402
from mallocgame.errors import MallocGameError  # noqa: E402
from mallocgame.frontends.argspec import ArgSpecError  # noqa: E402
from mallocgame.frontends.torch import (  # noqa: E402
    ExportError,
    TorchFrontendError,
    TorchMissingError,
    TrainingStep,
    extract_torch,
    meta_inputs,
    resolve_factory,
)
from mallocgame.program import Program  # noqa: E402
from mallocgame.solvers import SolveRequest, get_solver  # noqa: E402


def _tensor(program: Program, name: str):
    return next(x for x in program.tensors if x.name == name)


def _opcodes(program: Program) -> list[str]:
    return [ins.opcode for ins in program.instructions]


def _group_tensor_ids(program: Program) -> list[set[int]]:
    """Each alias group as the ids of the tensors its buffers belong to."""
    return [
        {(program.instructions[t].operands + program.instructions[t].outputs)[p] for t, p in group}
        for group in program.alias_groups
    ]


def _group_tensors(program: Program) -> list[set[str]]:
    """Each alias group as the names of the tensors its buffers belong to."""
    out = []
    for group in program.alias_groups:
        names = set()
        for t, p in group:
            ins = program.instructions[t]
            names.add(program.tensors[(ins.operands + ins.outputs)[p]].name)
        out.append(names)
    return out


def _plays(program: Program) -> None:
    inst = derive_instance(program, "dram_pmem", capacity_fraction=0.5)
    solution = get_solver("random").solve(inst, SolveRequest(seed=0))
    assert check_solution(inst, solution).ok


# --------------------------------------------------------------------------- modules


class ConvBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(self.conv(x))


class InPlace(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, state):
        y = self.fc(x)
        y.relu_()
        y.mul_(2.0)
        state.add_(y.sum(0))
        return y


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1, bias=False)

    def forward(self, x):
        y = self.conv2(torch.relu(self.conv1(x)))
        return torch.relu(y + x)


class MLPLoss(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x, labels):
        return (nn.functional.cross_entropy(self.fc2(torch.relu(self.fc1(x))), labels),)


def linear_factory():
    """A factory: a module; the inputs come from --arg."""
    return nn.Linear(4, 3)


def not_a_model():
    return 3


class Scales(nn.Module):
    """A module with a buffer and no parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x):
        return x * self.scale


def buffers_on_meta_factory():
    """A factory: a module without parameters built on the meta device."""
    with torch.device("meta"):
        return Scales()


def exploding_factory():
    raise AssertionError("a factory must not run when an --arg spec is bad")


# --------------------------------------------------------------------------- by hand


def test_a_linear_layer() -> None:
    program = extract_torch(nn.Linear(4, 3).eval(), (torch.zeros(2, 4),), name="linear")
    assert program.name == "linear" and program.source["frontend"] == "torch"
    assert program.source["mode"] == "eval" and program.source["granularity"] == "tensor"
    (ins,) = program.instructions
    assert ins.opcode == "addmm"  # the transpose of the weight is a view, no instruction
    weight, bias, x = (_tensor(program, n) for n in ("weight", "bias", "input"))
    assert (weight.size, bias.size, x.size) == (48, 12, 32)
    assert {weight.id, bias.id, x.id} == set(ins.operands) and ins.operand_bytes == tuple(
        program.tensors[t].size for t in ins.operands
    )
    (out,) = ins.outputs
    assert program.tensors[out].size == 2 * 3 * 4 and program.tensors[out].live_out
    assert ins.flops == 2 * 2 * 4 * 3  # PyTorch's formula: 2 m k n
    for t in (weight, bias, x):
        assert (t.def_time, t.last_use_time) == (-1, 0)
    assert program.alias_groups == ()


def test_a_conv_and_batch_norm_in_training_mode() -> None:
    program = extract_torch(ConvBN().train(), (torch.zeros(2, 3, 5, 5),))
    assert program.source["mode"] == "train"
    assert _opcodes(program) == ["convolution", "add", "_native_batch_norm_legit_functional"]
    conv, count, bn = program.instructions
    assert conv.flops == 2 * (2 * 4 * 5 * 5) * (
        3 * 3 * 3
    )  # output elements x kernel volume x in channels
    assert program.tensors[conv.outputs[0]].size == 2 * 4 * 5 * 5 * 4
    # outputs: normalized, batch mean, batch inverse std, new running mean and variance
    assert [program.tensors[x].size for x in bn.outputs] == [800, 16, 16, 16, 16]
    normalized = program.tensors[bn.outputs[0]]
    assert normalized.live_out and normalized.last_use_time == 2
    assert program.tensors[conv.outputs[0]].last_use_time == 2  # read by the batch norm
    # the running statistics are updated in place: each with its new value
    groups = _group_tensors(program)
    assert {"bn.running_mean", f"{bn.name}{{3}}"} in groups
    assert {"bn.running_var", f"{bn.name}{{4}}"} in groups
    assert {"bn.num_batches_tracked", count.name} in groups
    assert len(groups) == 3
    _plays(program)


def test_in_place_ops_and_a_mutated_input_alias_what_they_update() -> None:
    program = extract_torch(InPlace().eval(), (torch.zeros(4, 8), torch.zeros(8)))
    assert _opcodes(program) == ["addmm", "relu", "mul", "sum", "add"]
    addmm, relu, mul, total, add = program.instructions
    assert relu.operands == addmm.outputs and mul.operands == relu.outputs
    groups = _group_tensors(program)
    # y = fc(x); y.relu_(); y.mul_(2): one storage, so one group
    assert {program.tensors[x].name for x in addmm.outputs + relu.outputs + mul.outputs} in groups
    # state.add_(...) writes the input: the new value lives where the input did
    assert {"state", program.tensors[add.outputs[0]].name} in groups
    assert program.tensors[add.outputs[0]].live_out  # the new contents outlive the call
    assert relu.flops == mul.flops == 4 * 8 and total.flops == 4 * 8
    _plays(program)


class BufferNamedAsAnInput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("x", torch.zeros(4))

    def forward(self, x):
        self.x.add_(x)
        return x * 2


def test_a_mutated_buffer_joins_its_own_input_not_an_argument_of_its_name() -> None:
    program = extract_torch(BufferNamedAsAnInput(), (torch.zeros(4),))
    buffer, argument = (x for x in range(len(program.tensors)) if program.tensors[x].name == "x")
    (add,) = [i for i in program.instructions if i.opcode == "add"]
    (group,) = _group_tensor_ids(program)
    assert group == {buffer, add.outputs[0]}  # the argument is a storage of its own
    assert argument not in group
    _plays(program)


class BufferCopiedFromInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.zeros(4))
        self.register_buffer("acc", torch.zeros(4))
        self.register_buffer("one", torch.ones(1))
        self.w = nn.Parameter(torch.ones(4))

    def forward(self, x):
        y = (x + self.buf + self.acc) * self.w
        self.buf.copy_(self.w)  # overwritten by another input: two storages
        self.acc.copy_(self.one)  # broadcast from a smaller one
        return (y,)


def test_a_buffer_overwritten_by_another_input_is_a_copy_not_a_shared_storage() -> None:
    program = extract_torch(BufferCopiedFromInputs().eval(), (torch.zeros(4),))
    ids = {x.name: x.id for x in program.tensors}
    copies = program.instructions[-2:]
    assert [(i.opcode, i.operands) for i in copies] == [
        ("copy_", (ids["w"],)),
        ("copy_", (ids["one"],)),
    ]
    assert [i.output_bytes for i in copies] == [(16,), (16,)]  # the buffers' sizes
    assert sorted(map(sorted, _group_tensor_ids(program))) == [
        [ids["buf"], ids["buf'"]],
        [ids["acc"], ids["acc'"]],
    ]
    assert program.tensors[ids["buf'"]].live_out and not program.tensors[ids["w"]].live_out
    _plays(program)


class InPlaceOnViews(nn.Module):
    def forward(self, x, z):
        y = torch.relu(x)
        y[:, :2].mul_(2.0)  # mul on the slice, then slice_scatter into y
        y[:, 2:].copy_(z)  # copy into the slice, then slice_scatter
        w = y * 3
        w.diagonal().zero_()  # full_like of the diagonal, then diagonal_scatter
        return w


def test_in_place_ops_on_views_write_into_their_base() -> None:
    program = extract_torch(InPlaceOnViews().eval(), (torch.zeros(4, 4), torch.zeros(4, 2)))
    ops = _opcodes(program)
    assert ops.count("slice_scatter") == 2 and ops.count("diagonal_scatter") == 1
    groups = _group_tensors(program)
    # relu's output, the slices' new contents and both scatters: one storage (y)
    (y,) = [g for g in groups if "relu" in g]
    assert {"relu", "mul", "slice_scatter", "copy", "slice_scatter_1"} <= y
    # w and its new value after the diagonal is zeroed
    (w,) = [g for g in groups if "mul_1" in g]
    assert "diagonal_scatter" in w and not w & y
    _plays(program)


def test_a_residual_block() -> None:
    program = extract_torch(Residual().eval(), (torch.zeros(1, 4, 6, 6),))
    assert _opcodes(program) == ["convolution", "relu", "convolution", "add", "relu"]
    x = _tensor(program, "x")
    assert (x.def_time, x.last_use_time) == (
        -1,
        3,
    )  # read by the first conv and by the residual add
    act = 4 * 6 * 6 * 4
    assert all(program.tensors[i.outputs[0]].size == act for i in program.instructions)
    ends = [program.tensors[i.outputs[0]].last_use_time for i in program.instructions]
    assert ends == [1, 2, 3, 4, 4]
    assert program.instructions[0].flops == 2 * (4 * 6 * 6) * (3 * 3 * 4)
    assert program.instructions[3].flops == 4 * 6 * 6  # one flop per element
    assert program.alias_groups == ()
    # each weight is 576 B as well; at step 2: conv2's weight, x, relu's output and conv2's output
    assert peak_live_bytes(program) == 4 * act
    _plays(program)


def test_a_training_step_has_the_backward_pass() -> None:
    module = MLPLoss().train()
    program = extract_torch(
        module, (torch.zeros(8, 16), torch.zeros(8, dtype=torch.int64)), training_step=True
    )
    assert program.source["mode"] == "training_step"
    ops = _opcodes(program)
    assert (
        ops.count("addmm") == 2 and ops.count("mm") >= 3
    )  # forward, and the gradients of both layers
    forward = 2 * 8 * 16 * 32 + 2 * 8 * 32 * 10
    matmuls = sum(i.flops for i in program.instructions if i.opcode in ("mm", "addmm"))
    # backward: fc2's weight and input gradients, fc1's weight gradient (x needs none)
    assert matmuls == forward + 2 * (2 * 8 * 32 * 10) + 2 * 8 * 16 * 32
    live_out = {x.size for x in program.tensors if x.live_out and x.def_time >= 0}
    assert {16 * 32 * 4, 32 * 4, 32 * 10 * 4, 10 * 4} <= live_out  # every parameter's gradient
    _plays(program)


# --------------------------------------------------------------------------- granularity


def test_node_granularity_merges_a_layers_weights_and_decides_activations_once() -> None:
    args = (torch.zeros(2, 3, 5, 5),)
    per_tensor = extract_torch(ConvBN().train(), args)
    per_node = extract_torch(ConvBN().train(), args, granularity="node")
    assert per_node.source["granularity"] == "node"
    assert _opcodes(per_node) == _opcodes(per_tensor)
    assert [i.flops for i in per_node.instructions] == [i.flops for i in per_tensor.instructions]
    assert peak_live_bytes(per_node) == peak_live_bytes(
        per_tensor
    )  # the merged outputs are results
    bn_weights = _tensor(per_node, "bn.*")
    assert (
        bn_weights.size == 4 * 4 * 4 + 8
    )  # weight, bias, running mean and variance, the int64 count
    bn = per_node.instructions[2]
    assert (
        bn.operands[1] == bn_weights.id and bn.operand_bytes[1] == 4 * 4 * 4
    )  # the parts it reads
    assert per_node.num_buffers < per_tensor.num_buffers
    groups = _group_tensors(per_node)
    # the weights with the statistics updated in place: one decision
    weights = next(g for g in groups if "bn.*" in g)
    assert weights == {"bn.*", "add", f"{bn.name}{{3}}", f"{bn.name}{{4}}"}
    # the convolution's activation, its definition and its read by the batch norm: one decision
    assert {"convolution"} in groups
    merged = per_node.tensors[bn.outputs[0]]
    assert merged.size == 800 + 16 + 16  # the normalized output and the batch statistics
    _plays(per_node)


class SortScatter(nn.Module):
    """One op (``scatter``) reading both outputs of another (``sort``), one of them twice."""

    def forward(self, x):
        values, order = torch.sort(x, dim=1)
        return values.scatter(1, order, values)


class SquaredWeight(nn.Module):
    """One op (``mul``) reading a parameter twice, beside parameters it does not read."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(4, 8))
        self.c = nn.Parameter(torch.ones(64, 8))

    def forward(self, x):
        return self.w * self.w + x + self.c.sum()


def test_node_granularity_counts_each_part_an_op_reads_once() -> None:
    x = torch.randn(4, 8)
    program = extract_torch(SortScatter(), (x,), granularity="node")
    scatter = next(i for i in program.instructions if i.opcode == "scatter")
    merged = program.tensors[scatter.operands[0]]
    # the sorted values (float32) and their order (int64), each counted once
    assert merged.size == scatter.operand_bytes[0] == 4 * 8 * 4 + 4 * 8 * 8
    program = extract_torch(SquaredWeight(), (x,), granularity="node")
    square = program.instructions[0]
    assert program.tensors[square.operands[0]].size == (4 * 8 + 64 * 8) * 4
    assert square.operand_bytes == (4 * 8 * 4,)  # w once, not twice; c not at all


def test_node_granularity_on_a_real_scale_model_costs_no_memory() -> None:
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 4096)).eval()
    x = torch.empty(1024, 4096, device="meta")
    program = extract_torch(model, (x,), granularity="node")
    assert _tensor(program, "0.*").size == (4096 * 4096 + 4096) * 4
    assert program.instructions[0].flops == 2 * 1024 * 4096 * 4096


# --------------------------------------------------------------------------- errors


class DataDependent(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # control flow on a value: torch.export cannot capture it
            return x * 2
        return x


def test_errors_are_typed_one_liners(monkeypatch) -> None:
    with pytest.raises(ExportError, match="torch.export could not capture it") as info:
        extract_torch(DataDependent(), (torch.ones(3),))
    assert "\n" not in str(info.value) and isinstance(info.value, MallocGameError)
    with pytest.raises(TorchFrontendError, match="expected a torch.nn.Module"):
        extract_torch(lambda x: x, (torch.ones(3),))
    with pytest.raises(TorchFrontendError, match="unknown granularity"):
        extract_torch(nn.Linear(2, 2), (torch.ones(1, 2),), granularity="layer")
    with torch.device("meta"):
        meta = MLPLoss()
    with pytest.raises(TorchFrontendError, match="meta device"):
        extract_torch(meta, meta_inputs(["f32[8,16]", "s64[8]"]), training_step=True)
    with pytest.raises(ExportError, match="scalar loss"):
        extract_torch(nn.Linear(2, 2), (torch.ones(3, 2),), training_step=True)
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(TorchMissingError, match="pip install 'mallocgame\\[torch\\]'"):
        extract_torch(nn.Linear(2, 2), (torch.ones(1, 2),))


def test_a_factorys_module_without_parameters_gets_inputs_on_its_buffers_device() -> None:
    model = resolve_factory(f"{__name__}:buffers_on_meta_factory", ["f32[2,4]"])
    assert model.inputs[0].is_meta
    assert _opcodes(extract_torch(model.module, model.inputs)) == ["mul"]


@pytest.mark.parametrize("name", ["", "  ", 5])
def test_an_empty_name_is_refused(name) -> None:
    """Not the class name for the program and an empty one for its instance; a name that
    is no string (AttributeError from .strip()) is refused too."""
    with pytest.raises(TorchFrontendError, match="name is a string that is not empty"):
        extract_torch(nn.Linear(2, 2), (torch.ones(1, 2),), name=name)


def test_arguments_of_the_wrong_kind_are_typed_errors() -> None:
    from mallocgame.frontends.torch import extract_exported

    with pytest.raises(TorchFrontendError, match="expected a torch.export.ExportedProgram, got"):
        extract_exported("not an exported program", name="x")
    with pytest.raises(TorchFrontendError, match="example_kwargs is a dict .* not a list"):
        extract_torch(nn.Linear(2, 2), (torch.ones(1, 2),), example_kwargs=[1])
    with pytest.raises(TorchFrontendError, match="device 'nodev': RuntimeError") as info:
        meta_inputs(["f32[4]"], device="nodev")
    assert "\n" not in str(info.value)


class NonZero(nn.Module):
    def forward(self, x):
        return torch.nonzero(x).float() * 2  # as many rows as x has non-zero values


def test_a_data_dependent_size_is_refused_naming_the_op() -> None:
    with pytest.raises(
        TorchFrontendError, match=r"NZ: nonzero \(nonzero\) .* depends on tensor"
    ) as info:
        extract_torch(NonZero(), (torch.ones(3),), name="NZ")
    assert "\n" not in str(info.value) and "int64[u0,1]" in str(info.value)


@pytest.mark.filterwarnings("ignore::FutureWarning")  # torch's own, from dynamic_shapes
def test_dynamic_shapes_are_refused_not_fixed_at_the_example_size() -> None:
    from mallocgame.frontends.torch import extract_exported

    batch = torch.export.Dim("B", min=2, max=1024)
    exported = torch.export.export(
        nn.Linear(8, 8).eval(), (torch.zeros(16, 8),), dynamic_shapes=({0: batch},)
    ).run_decompositions()
    with pytest.raises(TorchFrontendError, match=r"dyn: the input input has a dynamic shape"):
        extract_exported(exported, name="dyn")


class InPlaceOnly(nn.Module):
    def forward(self, x):
        y = x * 2
        y.relu_()
        return (y,)


@pytest.mark.filterwarnings("ignore::FutureWarning")  # torch.export's own
def test_a_graph_with_in_place_ops_is_refused_until_decomposed() -> None:
    from mallocgame.frontends.torch import extract_exported

    exported = torch.export.export(InPlaceOnly(), (torch.zeros(4),))
    with pytest.raises(TorchFrontendError, match=r"raw: relu_ .* run_decompositions\(\)"):
        extract_exported(exported, name="raw")
    program = extract_exported(exported.run_decompositions(), name="ok")
    assert _opcodes(program) == ["mul", "relu"] and program.alias_groups


class Branches(nn.Module):
    def forward(self, x, flag):
        return (torch.cond(flag.sum() > 0, lambda x: x.relu() * 2, lambda x: x.sigmoid(), (x,)),)


def test_control_flow_is_refused_naming_the_operator() -> None:
    with pytest.raises(TorchFrontendError, match=r"cond: cond \(cond\) .* not modelled") as info:
        extract_torch(Branches(), (torch.zeros(4), torch.ones(1)), name="cond")
    assert "\n" not in str(info.value)


def test_factories() -> None:
    model = resolve_factory(f"{__name__}:linear_factory", ["f32[5,4]"])
    assert isinstance(model.module, nn.Linear) and model.inputs[0].shape == (5, 4)
    with pytest.raises(ArgSpecError, match="expected module:function"):
        resolve_factory("nocolon")
    with pytest.raises(ArgSpecError, match="cannot import"):
        resolve_factory("no_such_module_xyz:f")
    with pytest.raises(TorchFrontendError, match="give them with --arg"):
        resolve_factory(f"{__name__}:linear_factory")
    with pytest.raises(TorchFrontendError, match="must return an nn.Module"):
        resolve_factory(f"{__name__}:not_a_model")
    with pytest.raises(ArgSpecError, match="bad argument spec"):
        meta_inputs(["f33[2]"])


def test_inputs_from_specs_are_never_allocated() -> None:
    from torch._subclasses.fake_tensor import FakeTensor

    # 4 TB of float32 on the CPU: a real tensor fails to allocate (it used to crash --torch).
    (x,) = meta_inputs(["f32[1000000,1000000]"], device="cpu")
    assert isinstance(x, FakeTensor) and x.shape == (10**6, 10**6) and x.device.type == "cpu"
    (y,) = meta_inputs(["s64[2,3]"])
    assert y.is_meta and y.dtype == torch.int64
    model = resolve_factory(f"{__name__}:linear_factory", ["f32[1000000000000,4]"])
    program = extract_torch(model.module, model.inputs)
    assert _tensor(program, "input").size == 16 * 10**12
    assert _tensor(program, "addmm").size == 12 * 10**12


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("f32[100000000000000000000000]", r"more than 2\*\*53"),
        ("f32[8,,3]", "dimension 1 is empty"),
    ],
)
def test_a_bad_spec_is_refused_before_the_factory_runs(spec: str, needle: str) -> None:
    with pytest.raises(ArgSpecError, match=needle):
        resolve_factory(f"{__name__}:exploding_factory", [spec])
    with pytest.raises(ArgSpecError, match=needle):
        meta_inputs([spec], device="cpu")


# --------------------------------------------------------------------------- outputs, losses, updates


class _Cache:
    """An output container torch.export does not know (as a KV cache is)."""

    def __init__(self, keys, values) -> None:
        self.layers = [{"keys": keys, "values": values}]
        self.length = 3


class CachedHead(nn.Module):
    """Logits and a cache of two tensors, in a dict (as a ModelOutput is)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.k = nn.Linear(4, 2)

    def forward(self, x):
        return {"logits": self.fc(x), "cache": _Cache(self.k(x), torch.tanh(x)), "none": None}


class Tied(nn.Module):
    """An embedding whose weight the output layer shares (a language model's tie)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.out = nn.Linear(4, 10, bias=False)
        self.out.weight = self.embed.weight
        self.unused = nn.Linear(4, 4)  # read by no loss: gets no gradient

    def forward(self, ids, labels=None):
        logits = self.out(self.embed(ids))
        extra = self.unused(self.embed(ids))
        if labels is None:
            return logits, extra
        return {
            "loss": nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten()),
            "x": extra,
        }


class SharedBlocks(nn.Module):
    """One layer used under several names: an attribute and a list of the same block."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = self.a
        self.layers = nn.ModuleList([self.a] * 2)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x).relu()
        return self.b(self.a(x)).sum()


def test_a_module_used_under_several_names_is_one_set_of_inputs() -> None:
    from mallocgame.frontends.torch_adapter import parameters_tied_once

    module, x = SharedBlocks(), (torch.zeros(2, 4),)
    with parameters_tied_once(module) as ties:  # one slot reached through three paths: no tie
        assert ties == [] and list(module.a._parameters) == ["weight", "bias"]
    for step in (False, TrainingStep(optimizer="sgd")):
        program = extract_torch(module.train(bool(step)), x, training_step=step)
        inputs = [t.name for t in program.tensors if t.def_time < 0]
        assert inputs == ["a.weight", "a.bias", "x"], step
        assert "b is a, layers.0 is a, layers.1 is a" in program.source["notes"]
        assert _opcodes(program).count("addmm") == 4
    assert [n for n, _ in module.named_parameters()] == ["a.weight", "a.bias"]
    assert module.layers[1] is module.a and module.b is module.a  # as it was


class NoLoss(CachedHead):
    def forward(self, x, labels=None):
        return super().forward(x)


def test_outputs_in_containers_and_caches_are_read_for_their_tensors() -> None:
    program = extract_torch(CachedHead().eval(), (torch.zeros(2, 4),))
    live = sorted(x.name for x in program.tensors if x.live_out)
    assert live == ["addmm", "addmm_1", "tanh"]  # logits, the cache's keys and values
    assert "outputs read for their tensors: _Cache" in program.source["notes"]
    assert [x.name for x in program.tensors if x.def_time < 0] == [
        "fc.weight",
        "fc.bias",
        "k.weight",
        "k.bias",
        "x",
    ]  # the module's own names: the capture's adapter adds no prefix
    _plays(program)


@dataclasses.dataclass(slots=True)
class _SlotsCache:
    """An output container without a ``__dict__`` (a dataclass with slots)."""

    keys: torch.Tensor
    values: torch.Tensor


class SlotsHead(nn.Module):
    def forward(self, x):
        h = x * 2
        return h, _SlotsCache(h.sin(), h.cos())


def test_outputs_in_slots_are_read_for_their_tensors() -> None:
    program = extract_torch(SlotsHead().eval(), (torch.zeros(2, 4),))
    assert sorted(x.name for x in program.tensors if x.live_out) == ["cos", "mul", "sin"]
    assert "outputs read for their tensors: _SlotsCache" in program.source["notes"]


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (
            lambda: extract_torch(nn.Linear(2, 2), None),
            "a tuple or list of the module's positional inputs, not a NoneType",
        ),
        (lambda: extract_torch(nn.Linear(2, 2), torch.ones(1, 2)), "not a Tensor"),
        (
            lambda: extract_torch(nn.Linear(2, 2), (torch.ones(1, 2),), training_step="sgd"),
            "training_step is True, False or a TrainingStep, not 'sgd'",
        ),
        (lambda: extract_torch(nn.Linear(2, 2), (torch.ones(1, 2),), training_step=1), "not 1"),
    ],
)
def test_wrong_argument_types_are_one_typed_error(call, needle: str) -> None:
    with pytest.raises(TorchFrontendError, match=re.escape(needle)):
        call()


def test_the_capture_adapter_says_a_loss_needs_labels() -> None:
    from mallocgame.frontends.torch_adapter import AdapterError, CaptureAdapter

    adapter = CaptureAdapter(nn.Linear(4, 3), "cross-entropy")
    with pytest.raises(AdapterError, match="the loss 'cross-entropy' needs labels="):
        adapter(torch.zeros(2, 4))


@pytest.mark.parametrize(
    ("loss", "labels", "extra"),
    [
        ("cross-entropy", (2, 3), "_log_softmax"),
        ("model", (2, 3), "_log_softmax"),
        ("sum", None, "sum"),
        ("mean", None, "mean"),
    ],
)
def test_a_training_step_takes_a_named_loss(loss, labels, extra) -> None:
    module = Tied().train()
    label_tensor = None if labels is None else torch.zeros(labels, dtype=torch.int64)
    program = extract_torch(
        module,
        (torch.zeros(2, 3, dtype=torch.int64),),
        training_step=TrainingStep(loss),
        labels=label_tensor,
    )
    assert extra in _opcodes(program)
    names = {x.name for x in program.tensors if x.def_time < 0}
    assert "embed.weight" in names and "out.weight" not in names  # one input for the tie
    assert "out.weight is embed.weight" in program.source["notes"]
    assert "unused.weight, unused.bias" in program.source["notes"]
    gradients = [x for x in program.tensors if x.live_out and x.def_time >= 0]
    assert {x.size for x in gradients} >= {10 * 4 * 4}  # the tied weight's one gradient
    assert module.out.weight is module.embed.weight  # the module is as it was
    assert "out.weight" in dict(module.named_parameters(remove_duplicate=False))
    assert all(p.requires_grad for p in module.parameters())
    _plays(program)


def test_an_optimizer_update_follows_the_backward_pass() -> None:
    args = (torch.zeros(8, 16), torch.zeros(8, dtype=torch.int64))
    plain = extract_torch(MLPLoss().train(), args, training_step=True)
    sgd = extract_torch(MLPLoss().train(), args, training_step=TrainingStep(optimizer="sgd"))
    adamw = extract_torch(MLPLoss().train(), args, training_step=TrainingStep(optimizer="adamw"))
    params = {"fc1.weight": 16 * 32, "fc1.bias": 32, "fc2.weight": 32 * 10, "fc2.bias": 10}
    for program, kind, moments in ((sgd, "sgd", 0), (adamw, "adamw", 2)):
        updates = program.instructions[len(plain.instructions) :]
        assert [u.opcode for u in updates] == [f"{kind}_update"] * 4
        assert program.instructions[: len(plain.instructions)] == plain.instructions
        for u in updates:
            name = u.name.removeprefix(f"{kind}.")
            elements = params[name]
            assert len(u.operands) == 2 + moments and len(u.outputs) == 1 + moments
            p, g = (program.tensors[x] for x in u.operands[:2])
            assert p.name == name and p.size == 4 * elements and g.size == p.size
            assert not g.live_out and g.last_use_time == program.instructions.index(u)
            assert all(program.tensors[x].live_out for x in u.outputs)
            assert u.flops == {"sgd": 2, "adamw": 12}[kind] * elements
            if moments:
                assert [program.tensors[x].name for x in u.operands[2:]] == [
                    f"{name}.exp_avg",
                    f"{name}.exp_avg_sq",
                ]
        # each parameter (every read) and its new value are one storage: one alias group
        groups = [g for g in _group_tensors(program) if any(n in params for n in g)]
        assert len(groups) == 4  # a parameter's own group; a moment's is on its own
        assert {frozenset(g) for g in groups} >= {frozenset({"fc2.bias", "fc2.bias'"})}
        assert program.source["optimizer"] == kind
        _plays(program)
    moments = [x for x in adamw.tensors if x.name.endswith(".exp_avg_sq")]
    assert sorted(x.size for x in moments) == sorted(4 * e for e in params.values())


def test_a_graph_that_does_not_decompose_is_taken_undecomposed(monkeypatch) -> None:
    from torch.export import ExportedProgram

    original = ExportedProgram.run_decompositions

    def failing(self, table=None, *a, **k):
        if table is None:
            raise ValueError("Cannot view a tensor with shape [4, 512, 768]\nmore")
        return original(self, table, *a, **k)

    monkeypatch.setattr(ExportedProgram, "run_decompositions", failing)
    module = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8)).eval()
    program = extract_torch(module, (torch.zeros(2, 4),))
    assert program.source["capture"] == "aten"
    assert "core ATen decomposition failed (ValueError: Cannot view" in program.source["notes"]
    linear, norm = program.instructions
    assert (linear.opcode, norm.opcode) == ("linear", "layer_norm")
    assert linear.flops == 2 * 2 * 4 * 8  # FlopCounterMode's count of the matmul it runs
    assert norm.flops == 7 * 2 * 8  # a few flops an element, as native_layer_norm
    _plays(program)


def test_attention_flops_are_the_two_matmuls() -> None:
    class Attention(nn.Module):
        def forward(self, q, k, v):
            return nn.functional.scaled_dot_product_attention(q, k, v)

    q, k, v = torch.zeros(2, 4, 8, 16), torch.zeros(2, 4, 6, 16), torch.zeros(2, 4, 6, 32)
    program = extract_torch(Attention().eval(), (q, k, v))
    matmuls = sum(i.flops for i in program.instructions if i.opcode in ("bmm", "mm"))
    assert matmuls == 2 * (2 * 4) * 8 * 6 * (16 + 32)


class SelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(16, 16)

    def forward(self, x):
        q = self.q(x).view(2, 8, 4, 4).transpose(1, 2)  # batch 2, 4 heads, 8 tokens, 4 wide
        return nn.functional.scaled_dot_product_attention(q, q, q).sum()


def test_attention_backward_flops_are_its_five_matmuls() -> None:
    # on CPU parameters the joint graph keeps attention's fused CPU backward kernel, which
    # torch's flop counter has no formula for: the scores recomputed, and the gradients of
    # the scores, values, queries and keys (torch's sdpa_backward_flop_count)
    program = extract_torch(SelfAttention().train(), (torch.zeros(2, 8, 16),), training_step=True)
    (backward,) = [
        i for i in program.instructions if i.opcode.endswith("attention_for_cpu_backward")
    ]
    rows, keys, width = 2 * 4 * 8, 8, 4
    assert backward.flops == 2 * rows * keys * (3 * width + 2 * width)
    assert backward.transcendentals == rows * keys


class Detached(nn.Module):
    """Parameters the loss reads without a gradient: through detach() and under no_grad."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(4, 4)
        self.k = nn.Linear(4, 4)
        self.scale = nn.Parameter(torch.ones(4))

    def forward(self, x):
        with torch.no_grad():
            z = self.k(x)
        return (self.l(x) * z * self.scale.detach()).sum()


class NoParameters(nn.Module):
    def forward(self, x):
        return (x * x).sum()


def test_a_parameter_read_without_a_gradient_is_frozen_and_noted() -> None:
    program = extract_torch(Detached().train(), (torch.zeros(2, 4),), training_step=True)
    head, _, frozen = program.source["notes"].partition(": ")
    assert head == "parameters the loss does not depend on, no gradient"
    assert sorted(frozen.split(", ")) == ["k.bias", "k.weight", "scale"]
    assert "mm" in _opcodes(program)  # the backward pass, to l's gradients
    with pytest.raises(ExportError, match="depends on no trainable parameter") as info:
        extract_torch(NoParameters(), (torch.ones(3),), training_step=True)
    assert "scalar" not in str(info.value)


def test_training_step_options_are_checked() -> None:
    module, args = Tied().train(), (torch.zeros(2, 3, dtype=torch.int64),)
    labels = torch.zeros(2, 3, dtype=torch.int64)
    with pytest.raises(TorchFrontendError, match="unknown loss"):
        TrainingStep("hinge")
    with pytest.raises(TorchFrontendError, match="unknown optimizer"):
        TrainingStep(optimizer="lamb")
    with pytest.raises(TorchFrontendError, match="needs labels"):
        extract_torch(module, args, training_step=TrainingStep("cross-entropy"))
    with pytest.raises(TorchFrontendError, match="takes no labels"):
        extract_torch(module, args, training_step=TrainingStep("sum"), labels=labels)
    with pytest.raises(TorchFrontendError, match="go with a training step"):
        extract_torch(module, args, labels=labels)
    with pytest.raises(TorchFrontendError, match="per tensor"):
        extract_torch(module, args, training_step=TrainingStep("sum", "sgd"), granularity="node")
    with pytest.raises(ExportError, match=r"labels of shape \[2, 3\], got \[6\]"):
        extract_torch(
            module, args, training_step=TrainingStep("cross-entropy"), labels=labels.flatten()
        )
    with pytest.raises(ExportError, match="not a scalar loss: name one with --loss"):
        extract_torch(module, args, training_step=True)
    with pytest.raises(ExportError, match="forward takes no labels="):
        extract_torch(
            CachedHead().train(),
            (torch.zeros(2, 4),),
            training_step=TrainingStep("model"),
            labels=torch.zeros(2, dtype=torch.int64),
        )
    with pytest.raises(ExportError, match="no 'loss'"):
        extract_torch(
            NoLoss().train(),
            (torch.zeros(2, 4),),
            training_step=TrainingStep("model"),
            labels=torch.zeros(2, dtype=torch.int64),
        )


class ReadsItsTiedHead(nn.Module):
    """Reads the tied head's weight without calling the head (as Mamba reads
    ``lm_head.weight.dtype``)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.head = nn.Linear(8, 10, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, i):
        return (self.emb(i).to(self.head.weight.dtype) @ self.head.weight.T).sum()


def test_a_tied_weight_read_without_its_module_is_captured() -> None:
    module = ReadsItsTiedHead()
    index = torch.zeros(3, dtype=torch.int64)
    for step in (None, TrainingStep("output")):
        program = extract_torch(module, (index,), training_step=step)
        assert "head.weight is emb.weight" in program.source["notes"]
    assert module.head.weight is module.emb.weight  # the module is as it was
