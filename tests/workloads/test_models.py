"""Tests of the real ML programs (mallocgame.workloads.models): they build and lower;
the six base programs also compile with XLA (JAX, CPU) into HLO of a useful size and
show the features the game models (loops of known trip count, in-place updates,
donated arguments). The larger programs are only lowered (cheap): compiling them is
the suite's job (``mallocgame extract --suite``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")
pytest.importorskip("optax")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from mallocgame.workloads.models import (  # noqa: E402
    MODEL_PROGRAMS,
    ModelProgram,
    model_program_names,
)

# The six base programs, compiled and run in these tests.
NAMES = [
    "alexnet_train_b32",
    "resnet_infer",
    "transformer_train",
    "lstm_infer",
    "inplace_update_loop",
    "donated_sgd_step",
]

# Every program, in registry order.
ALL_NAMES = NAMES + [
    "resnet50_infer",
    "resnet50_train",
    "mnasnet_infer",
    "mlp_mixer_infer",
    "unet_train",
    "vit_train",
    "cnn_bn_train",
    "vae_train",
    "gru_infer",
    "stacked_rnn_infer",
    "bigru_tagger_infer",
    "lstm_lm_train",
    "nmt_seq2seq_infer",
    "wavenet_infer",
    "bert_train",
    "transformer_train_bf16",
    "transformer_nmt_train",
    "gpt_train_deep",
    "alphatensor_matmul",
    "gnn_infer",
    "dlrm_train",
    "diffusion_sampler",
]

LOOPS = {
    "lstm_infer",
    "inplace_update_loop",
    "vae_train",
    "gru_infer",
    "stacked_rnn_infer",
    "bigru_tagger_infer",
    "lstm_lm_train",
    "nmt_seq2seq_infer",
    "gnn_infer",
    "diffusion_sampler",
}
TRAINING = {
    "alexnet_train_b32",
    "transformer_train",
    "donated_sgd_step",
    "resnet50_train",
    "unet_train",
    "vit_train",
    "cnn_bn_train",
    "vae_train",
    "lstm_lm_train",
    "bert_train",
    "transformer_train_bf16",
    "transformer_nmt_train",
    "gpt_train_deep",
    "dlrm_train",
}
DONATED = {"donated_sgd_step", "dlrm_train"}

# One HLO instruction per line: "  [ROOT ]%name = type opcode(...)".
_INSTRUCTION = re.compile(r"^\s+(?:ROOT\s+)?%?[\w.\-]+\s*=\s*\S.*?\s([\w\-]+)\(")


def hlo_opcodes(text: str) -> list[str]:
    """The opcode of every instruction in an HLO module's text (all computations)."""
    return [m.group(1) for line in text.splitlines() if (m := _INSTRUCTION.match(line))]


class Lowered(NamedTuple):
    args: tuple[Any, ...]  # the abstract example arguments
    kwargs: dict[str, Any]  # jit keyword arguments
    lowered: Any  # jax.stages.Lowered
    text: str  # its StableHLO


@pytest.fixture(scope="module")
def lowered() -> dict[str, Lowered]:
    """Every program built and lowered once from its abstract arguments (no compilation)."""
    out = {}
    for name, prog in MODEL_PROGRAMS.items():
        fn, args, kwargs = prog.build()
        low = jax.jit(fn, **kwargs).lower(*args)
        out[name] = Lowered(args, kwargs, low, low.as_text())
    return out


@pytest.fixture(scope="module")
def dump_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where :func:`compiled` has XLA dump each base program (``dump_root / name``)."""
    return tmp_path_factory.mktemp("xla-dumps")


@pytest.fixture(scope="module")
def compiled(lowered: dict[str, Lowered], dump_root: Path) -> dict[str, tuple[Any, str]]:
    """Each base program compiled once from its abstract arguments: (executable, HLO text).

    XLA also dumps each module (as :func:`mallocgame.frontends.xla.dump_jax` has it
    do), so the frontend tests extract these compilations instead of compiling again.
    """
    out = {}
    for name in NAMES:
        options = {"xla_dump_to": str(dump_root / name), "xla_dump_hlo_as_text": True}
        exe = lowered[name].lowered.compile(compiler_options=options)
        out[name] = (exe, exe.as_text())
    return out


@pytest.fixture(scope="module")
def concrete() -> dict[str, tuple[Any, ...]]:
    """The concrete example arguments of each base program, built once."""
    return {name: MODEL_PROGRAMS[name].build(concrete=True)[1] for name in NAMES}


def test_registry() -> None:
    assert model_program_names() == ALL_NAMES
    assert len(MODEL_PROGRAMS) >= 24 and len(set(ALL_NAMES)) == len(ALL_NAMES)
    for name, prog in MODEL_PROGRAMS.items():
        assert isinstance(prog, ModelProgram)
        assert prog.name == name
        assert len(prog.description) > 20
    assert {n for n, p in MODEL_PROGRAMS.items() if p.loops} == LOOPS
    assert {n for n, p in MODEL_PROGRAMS.items() if p.training} == TRAINING
    assert len(LOOPS) >= 5 and len(TRAINING) >= 5


@pytest.mark.parametrize("name", ALL_NAMES)
def test_builds_abstract_and_concrete(name: str, lowered: dict[str, Lowered]) -> None:
    prog = MODEL_PROGRAMS[name]
    args, kwargs = lowered[name].args, lowered[name].kwargs
    assert isinstance(args, tuple) and isinstance(kwargs, dict)
    leaves = jax.tree_util.tree_leaves(args)
    assert leaves and all(isinstance(a, jax.ShapeDtypeStruct) for a in leaves)
    fn, real, kwargs2 = prog.build(concrete=True)
    assert callable(fn) and kwargs2 == kwargs
    assert jax.tree_util.tree_structure(real) == jax.tree_util.tree_structure(args)
    real_leaves = jax.tree_util.tree_leaves(real)
    assert [(a.shape, a.dtype) for a in real_leaves] == [(a.shape, a.dtype) for a in leaves]
    assert all(isinstance(a, jax.Array) for a in real_leaves)


@pytest.mark.parametrize("name", NAMES)
def test_deterministic(
    name: str, lowered: dict[str, Lowered], concrete: dict[str, tuple[Any, ...]]
) -> None:
    prog = MODEL_PROGRAMS[name]
    fn, real, kwargs = prog.build(concrete=True)
    # Abstract and concrete arguments (values aside) lower to the same module.
    assert jax.jit(fn, **kwargs).lower(*real).as_text() == lowered[name].text
    a = jax.tree_util.tree_leaves(real)
    b = jax.tree_util.tree_leaves(concrete[name])
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("name", ALL_NAMES)
def test_lowers_with_its_features(name: str, lowered: dict[str, Lowered]) -> None:
    """Loops exactly where flagged; training steps return new params and a scalar loss."""
    prog = MODEL_PROGRAMS[name]
    low = lowered[name]
    assert "func.func public @main" in low.text
    assert ("stablehlo.while" in low.text) == prog.loops, name
    matmuls = low.text.count("stablehlo.dot_general") + low.text.count("stablehlo.convolution")
    assert matmuls >= 3, (name, matmuls)
    if prog.training:
        new_params, *_, loss = low.lowered.out_info
        assert jax.tree_util.tree_structure(new_params) == jax.tree_util.tree_structure(low.args[0])
        assert loss.shape == () and loss.dtype == np.float32
        assert matmuls >= 6, (name, matmuls)
    assert ("tf.aliasing_output" in low.text) == (name in DONATED)
    assert ("donate_argnums" in low.kwargs) == (name in DONATED)


def test_alphatensor_factorization_is_exact() -> None:
    """The rank-49 (U, V, W) of alphatensor_matmul decomposes the 4x4 matmul tensor."""
    from mallocgame.workloads.models_misc import STRASSEN, kron_factors

    def matmul_tensor(n: int) -> np.ndarray:
        t = np.zeros((n * n, n * n, n * n), int)
        for i in range(n):
            for j in range(n):
                for k in range(n):
                    t[i * n + k, k * n + j, i * n + j] = 1  # A_ik * B_kj -> C_ij
        return t

    assert np.array_equal(np.einsum("ir,jr,kr->ijk", *STRASSEN), matmul_tensor(2))
    u, v, w = kron_factors(STRASSEN, STRASSEN)
    assert u.shape == v.shape == w.shape == (16, 49)
    assert np.array_equal(np.einsum("ir,jr,kr->ijk", u, v, w), matmul_tensor(4))


@pytest.mark.parametrize("name", NAMES)
def test_compiles_to_sizable_hlo(name: str, compiled: dict[str, tuple[Any, str]]) -> None:
    _, text = compiled[name]
    assert text.startswith("HloModule")
    ops = hlo_opcodes(text)
    assert len(ops) > 48, (name, len(ops))
    assert "parameter" in ops


@pytest.mark.parametrize("name", ["lstm_infer", "inplace_update_loop"])
def test_loops_have_known_trip_count(name: str, compiled: dict[str, tuple[Any, str]]) -> None:
    _, text = compiled[name]
    assert "while" in hlo_opcodes(text)
    trips = [int(n) for n in re.findall(r'"known_trip_count":\{"n":"(\d+)"\}', text)]
    expected = {"lstm_infer": 16, "inplace_update_loop": 32}[name]
    assert expected in trips


def test_inplace_loop_has_dynamic_update_slice(compiled: dict[str, tuple[Any, str]]) -> None:
    _, text = compiled["inplace_update_loop"]
    assert "dynamic-update-slice" in hlo_opcodes(text)


def test_donated_step_aliases_inputs(compiled: dict[str, tuple[Any, str]]) -> None:
    _, text = compiled["donated_sgd_step"]
    header = text.splitlines()[0]
    assert "input_output_alias" in header
    # Every parameter and optimizer-state leaf is aliased to an output.
    _, args, kwargs = MODEL_PROGRAMS["donated_sgd_step"].build()
    assert kwargs["donate_argnums"] == (0, 1)
    donated = len(jax.tree_util.tree_leaves(args[:2]))
    assert header.count("may-alias") + header.count("must-alias") == donated
    # Programs without donation have no aliases.
    assert "input_output_alias" not in compiled["alexnet_train_b32"][1].splitlines()[0]


def test_training_programs_have_gradients(compiled: dict[str, tuple[Any, str]]) -> None:
    for name in ("alexnet_train_b32", "transformer_train", "donated_sgd_step"):
        ops = hlo_opcodes(compiled[name][1])
        assert ops.count("dot") + ops.count("convolution") >= 6, name


def test_run_on_real_inputs(
    compiled: dict[str, tuple[Any, str]], concrete: dict[str, tuple[Any, ...]]
) -> None:
    """The executables compiled from abstract args run on the concrete ones."""
    outputs = {}
    for name in NAMES:
        exe, _ = compiled[name]
        # Donated buffers are consumed by the call: hand the executable copies.
        args = (
            jax.tree_util.tree_map(jnp.copy, concrete[name]) if name in DONATED else concrete[name]
        )
        outputs[name] = exe(*args)
        for leaf in jax.tree_util.tree_leaves(outputs[name]):
            assert np.all(np.isfinite(np.asarray(leaf))), name
    probs = outputs["resnet_infer"]
    np.testing.assert_allclose(np.asarray(probs).sum(axis=-1), 1.0, rtol=1e-5)
    tokens, _, _ = outputs["inplace_update_loop"]
    assert tokens.shape == (32, 8) and int(tokens.min()) >= 0 and int(tokens.max()) < 256


@pytest.mark.parametrize("name", NAMES)
def test_extract_validates(
    name: str, compiled: dict[str, tuple[Any, str]], dump_root: Path
) -> None:
    """Each base program's compilation (dumped by the fixture) extracts to a valid Program."""
    xla = pytest.importorskip("mallocgame.frontends.xla")
    from mallocgame.program import Program, validate_program

    module = compiled[name][1].split(",", 1)[0].replace("HloModule", "").strip()
    program = xla.extract_dump(dump_root / name, module=module, name=name)
    assert isinstance(program, Program)
    validate_program(program)
    assert program.name == name
    assert len(program.instructions) > 10
    if name in ("lstm_infer", "inplace_update_loop"):
        assert program.loops, name
    if name in ("inplace_update_loop", "donated_sgd_step"):
        assert program.alias_groups, name


@pytest.mark.parametrize("name", ["inplace_update_loop", "donated_sgd_step"])
def test_extract_jax_end_to_end(
    name: str, compiled: dict[str, tuple[Any, str]], dump_root: Path
) -> None:
    """``extract_jax`` (compile + dump + extract) gives the program of the fixture's dump."""
    xla = pytest.importorskip("mallocgame.frontends.xla")
    fn, args, kwargs = MODEL_PROGRAMS[name].build()
    program = xla.extract_jax(fn, *args, name=name, **kwargs)
    module = compiled[name][1].split(",", 1)[0].replace("HloModule", "").strip()
    dumped = xla.extract_dump(dump_root / name, module=module, name=name)
    assert program.num_buffers == dumped.num_buffers
    assert [i.opcode for i in program.instructions] == [i.opcode for i in dumped.instructions]
    assert len(program.alias_groups) == len(dumped.alias_groups) > 0
