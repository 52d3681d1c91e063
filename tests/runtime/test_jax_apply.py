"""An answer applied to a JAX function: the rewrite tested by its lowering for CUDA (no GPU
needed) and by running it on the CPU."""

from __future__ import annotations

import dataclasses
import os

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")
jnp = jax.numpy

from mallocgame.costmodel import derive_instance
from mallocgame.frontends.xla import extract_jax
from mallocgame.instance import Instance
from mallocgame.latency import exact_mapping_reward, exact_reward_normalizer
from mallocgame.runtime.bench import load_solver
from mallocgame.runtime.errors import (
    AnswerMismatchError,
    ApplyError,
    PlanError,
    ProgramMismatchError,
)
from mallocgame.runtime.jax_apply import (
    DEVICE,
    HOST,
    apply_jax,
    count_placements,
    cuda_placements,
    jax_placement,
    place_args,
)
from mallocgame.solution import Solution
from mallocgame.solvers.base import SolveRequest

NAMES = ("w1", "b1", "w2", "b2", "x")


def mlp(w1, b1, w2, b2, x):
    """A 2-layer MLP with its parameters as arguments."""
    return jnp.maximum(x @ w1 + b1, 0.0) @ w2 + b2


def mlp_args():
    keys = jax.random.split(jax.random.PRNGKey(0), 5)
    shapes = [(8, 16), (16,), (16, 4), (4,), (2, 8)]
    return tuple(jax.random.normal(k, s, jnp.float32) for k, s in zip(keys, shapes))


def instance_of(fn, *args, capacity_fraction=None) -> Instance:
    return derive_instance(
        extract_jax(fn, *args), "gpu_hbm_host", capacity_fraction=capacity_fraction
    )


def solve(inst, name):
    return load_solver(name).solve(inst, SolveRequest(seed=0))


def without(inst: Instance, sol: Solution, drop) -> Solution:
    """``sol`` with the allocations of the buffers ``drop(buffer)`` selects removed (Drop),
    its reward recomputed."""
    keep = tuple(a for a in sol.allocations if not drop(inst.buffers[a.buffer]))
    reward = exact_mapping_reward(inst, {a.buffer for a in keep})
    return dataclasses.replace(
        sol,
        allocations=keep,
        reward_s=float(reward),
        actions=None,
        normalized_reward=float(reward / exact_reward_normalizer(inst)),
    )


def tensor(inst: Instance, prefix: str) -> int:
    (x,) = [x.id for x in inst.tensors if x.name.split(".")[0] == prefix]
    return x


@pytest.fixture(scope="module")
def mlp_case():
    args = mlp_args()
    inst = instance_of(mlp, *args)
    return inst, args, solve(inst, "greedy")


def test_the_best_answer_leaves_in_host_what_the_game_cannot_copy_in_time(mlp_case):
    # The game's inputs start in slow memory and a copy needs steps before the read, so
    # x and w1 (read by instruction 0) are Drop; the result, written by the last
    # instruction, cannot be copied out after it: Drop. Every other buffer is fast.
    inst, args, fast = mlp_case
    assert len(fast.allocations) == inst.num_buffers - 3
    p = jax_placement(inst, fast, mlp, *args)
    assert p.host_args == (0, 4) and p.host_results == (0,)
    low = cuda_placements(p, mlp)
    assert (low.num_args, low.num_results) == (5, 1)
    assert low.host_args == (0, 4) and low.host_results == (0,)
    assert (low.to_device, low.to_host) == (2, 1)


def test_an_all_device_placement_has_no_host_annotation(mlp_case):
    inst, args, fast = mlp_case
    p = jax_placement(inst, fast, mlp, *args)
    p = dataclasses.replace(p, in_kinds=(DEVICE,) * 5, out_kinds=(DEVICE,))
    low = cuda_placements(p, mlp)
    assert low.host_args == () and low.host_results == ()
    assert (low.to_device, low.to_host) == (0, 0)
    assert "pinned_host" not in low.text


@pytest.mark.parametrize("dropped", ["b1", "w2", "b2"])
def test_a_dropped_weight_is_in_pinned_host(mlp_case, dropped):
    inst, args, fast = mlp_case
    w = tensor(inst, dropped)
    sol = without(inst, fast, lambda b: b.tensor_id == w)
    p = jax_placement(inst, sol, mlp, *args)
    i = NAMES.index(dropped)
    assert p.host_args == tuple(sorted((0, 4, i))) and p.in_tensors[i] == w
    low = cuda_placements(p, mlp)
    assert low.host_args == p.host_args and low.host_results == (0,)
    assert (low.to_device, low.to_host) == (3, 1)


def test_a_host_input_is_moved_right_before_its_first_use(mlp_case):
    inst, args, fast = mlp_case
    w = tensor(inst, "w2")
    p = jax_placement(inst, without(inst, fast, lambda b: b.tensor_id == w), mlp, *args)
    text = cuda_placements(p, mlp).text
    body = text[text.index("func.func public @main") :]
    first_dot = body.index("stablehlo.dot_general")
    move = body.index("@annotate_device_placement(%arg2)")
    second_dot = body.index("stablehlo.dot_general", first_dot + 1)
    assert first_dot < move < second_dot


def two_results(w, x):
    h = jnp.tanh(x @ w)
    return h, jnp.sin(h @ w).sum()


def test_a_result_is_in_pinned_host_exactly_when_the_answer_drops_it():
    w, x = jnp.ones((8, 8)) / 8, jnp.ones((4, 8))
    inst = instance_of(two_results, w, x)
    fast = solve(inst, "greedy")
    out = [x.id for x in inst.tensors if x.live_out]
    dropped = without(inst, fast, lambda b: b.tensor_id in out)  # every read slow too
    for sol in (fast, dropped):
        p = jax_placement(inst, sol, two_results, w, x)
        allocated = {sol_a.buffer for sol_a in sol.allocations}
        defining = {b.tensor_id: b.id for b in inst.buffers if b.is_output and b.tensor_id in out}
        want = tuple(HOST if defining[t] not in allocated else DEVICE for t in p.out_tensors)
        assert p.out_kinds == want
        low = cuda_placements(p, two_results)
        assert low.host_results == p.host_results and low.to_host == len(p.host_results)
    assert jax_placement(inst, fast, two_results, w, x).out_kinds.count(DEVICE) == 1
    assert jax_placement(inst, dropped, two_results, w, x).out_kinds == (HOST, HOST)


def test_the_all_slow_answer_puts_every_input_and_the_result_in_host(mlp_case):
    inst, args, _ = mlp_case
    p = jax_placement(inst, solve(inst, "drop"), mlp, *args)
    assert p.in_kinds == (HOST,) * 5 and p.out_kinds == (HOST,)
    low = cuda_placements(p, mlp)
    assert low.host_args == (0, 1, 2, 3, 4) and low.host_results == (0,)
    assert (low.to_device, low.to_host) == (5, 1)


def test_results_equal_the_original_on_the_cpu(mlp_case):
    inst, args, _ = mlp_case
    p = jax_placement(inst, solve(inst, "drop"), mlp, *args)
    want = mlp(*args)
    got = apply_jax(p, mlp)(*place_args(p, *args))
    assert got.sharding.memory_kind == HOST
    assert jnp.array_equal(got, want)
    assert jnp.array_equal(apply_jax(p, mlp, shardings=False)(*args), want)


def test_pytree_parameters_map_by_leaf(mlp_case):
    _, args, _ = mlp_case
    params = dict(zip(NAMES[:4], args[:4]))

    def net(params, x):
        return {"y": mlp(params["w1"], params["b1"], params["w2"], params["b2"], x)}

    inst = instance_of(net, params, args[4])
    w = tensor(inst, "params__w2__")
    sol = without(inst, solve(inst, "greedy"), lambda b: b.tensor_id == w)
    p = jax_placement(inst, sol, net, params, args[4])
    leaves = jax.tree_util.tree_flatten_with_path((params, args[4]))[0]
    host = [jax.tree_util.keystr(path) for path, _ in leaves]
    assert [host[i] for i in p.host_args] == ["[0]['w1']", "[0]['w2']", "[1]"]
    assert cuda_placements(p, net).host_args == p.host_args
    got = apply_jax(p, net)(*place_args(p, params, args[4]))
    assert jnp.array_equal(got["y"], net(params, args[4])["y"])


def test_an_unused_argument_stays_on_the_device():
    a, x = jnp.ones((4, 4)), jnp.ones((2, 4))

    def f(w, unused, x):
        return jnp.tanh(x @ w)

    inst = instance_of(f, a, a, x)
    p = jax_placement(inst, solve(inst, "drop"), f, a, a, x)
    assert p.in_tensors[1] is None and p.in_kinds == (HOST, DEVICE, HOST)
    assert cuda_placements(p, f).host_args == (0, 2)


def test_an_answer_for_another_instance_is_refused(mlp_case):
    inst, args, _ = mlp_case
    other = instance_of(mlp, *args, capacity_fraction=0.5)
    with pytest.raises(AnswerMismatchError):
        jax_placement(inst, solve(other, "drop"), mlp, *args)


def test_an_answer_that_fails_the_check_is_refused(mlp_case):
    inst, args, fast = mlp_case
    bad = dataclasses.replace(fast, reward_s=fast.reward_s + 1.0)
    with pytest.raises(PlanError):
        jax_placement(inst, bad, mlp, *args)


def test_another_function_is_refused(mlp_case):
    inst, args, fast = mlp_case
    with pytest.raises(ProgramMismatchError):
        jax_placement(inst, fast, lambda *a: jnp.tanh(mlp(*a)), *args)
    wide = args[:4] + (jnp.ones((3, 8)),)
    with pytest.raises(ProgramMismatchError):
        jax_placement(inst, fast, mlp, *wide)


def test_count_placements_reads_a_signature_and_refuses_a_module_without_main():
    text = (
        'func.func public @main(%arg0: tensor<2xf32> {mhlo.memory_kind = "pinned_host", '
        'sdy.sharding = #sdy.sharding<@mesh, [{}]>} loc("a"), %arg1: tensor<2xf32>) -> '
        '(tensor<2xf32> {jax.result_info = "[0]"}, tensor<2xf32> {jax.result_info = "[1]", '
        'mhlo.memory_kind = "pinned_host"}) {\n'
        "  %0 = stablehlo.custom_call @annotate_device_placement(%arg0) {has_side_effect = "
        'true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}}\n}'
    )
    low = count_placements(text)
    assert (low.host_args, low.host_results, low.num_args, low.num_results) == ((0,), (1,), 2, 2)
    assert (low.to_device, low.to_host) == (1, 0)
    with pytest.raises(ApplyError):
        count_placements("module @m {}")


def test_entry_interface_names_the_programs_inputs_and_result():
    # The public interface jax_apply binds arguments with: parameter N is the N-th input
    # tensor of the program extract_module makes, the root's leaf its result.
    from mallocgame.frontends.hlo_parse import parse_module
    from mallocgame.frontends.xla import entry_interface, extract_module
    from mallocgame.runtime.jax_apply import _compiled_module_text

    args = mlp_args()
    text = _compiled_module_text(mlp, args)
    interface = entry_interface(parse_module(text))
    program = extract_module(text)
    assert sorted(interface.params) == list(range(5))
    sizes = [program.tensors[interface.params[n]].size for n in range(5)]
    assert sizes == [a.size * 4 for a in args]
    assert [program.tensors[x].live_out for x in interface.results] == [True]
