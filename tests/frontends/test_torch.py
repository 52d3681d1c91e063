"""The PyTorch frontend on tiny modules whose programs are known by hand.

Each test builds a module of a few layers, captures it with
:func:`mallocgame.frontends.torch.extract_torch` and checks what the module docstring
promises: the instructions in graph order, tensor sizes (float32: 4 bytes an element),
live ranges, flops (PyTorch's formulas: ``2 m n k`` for a matmul, ``2 x output
elements x kernel volume x input channels`` for a convolution), alias groups, and
MARL's node granularity.
"""

from __future__ import annotations

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
