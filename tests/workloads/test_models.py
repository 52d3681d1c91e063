"""Tests of the real ML programs (mallocgame.workloads.models): they build, compile
with XLA (JAX, CPU) into HLO of a useful size and show the features the game models
(loops of known trip count, in-place updates, donated arguments)."""

from __future__ import annotations

import re
from typing import Any

import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("flax")
pytest.importorskip("optax")

import numpy as np  # noqa: E402

from mallocgame.workloads.models import (  # noqa: E402
    MODEL_PROGRAMS,
    ModelProgram,
    model_program_names,
)

NAMES = [
    "alexnet_train_b32",
    "resnet_infer",
    "transformer_train",
    "lstm_infer",
    "inplace_update_loop",
    "donated_sgd_step",
]

# One HLO instruction per line: "  [ROOT ]%name = type opcode(...)".
_INSTRUCTION = re.compile(r"^\s+(?:ROOT\s+)?%?[\w.\-]+\s*=\s*\S.*?\s([\w\-]+)\(")


def hlo_opcodes(text: str) -> list[str]:
    """The opcode of every instruction in an HLO module's text (all computations)."""
    return [m.group(1) for line in text.splitlines() if (m := _INSTRUCTION.match(line))]


@pytest.fixture(scope="module")
def compiled() -> dict[str, tuple[Any, str]]:
    """Each program compiled once from its abstract arguments: (executable, HLO text)."""
    out = {}
    for name, prog in MODEL_PROGRAMS.items():
        fn, args, kwargs = prog.build()
        exe = jax.jit(fn, **kwargs).lower(*args).compile()
        out[name] = (exe, exe.as_text())
    return out


def test_registry() -> None:
    assert model_program_names() == NAMES
    for name, prog in MODEL_PROGRAMS.items():
        assert isinstance(prog, ModelProgram)
        assert prog.name == name
        assert len(prog.description) > 20


@pytest.mark.parametrize("name", NAMES)
def test_builds_abstract_and_concrete(name: str) -> None:
    prog = MODEL_PROGRAMS[name]
    fn, args, kwargs = prog.build()
    assert callable(fn) and isinstance(args, tuple) and isinstance(kwargs, dict)
    leaves = jax.tree_util.tree_leaves(args)
    assert leaves and all(isinstance(a, jax.ShapeDtypeStruct) for a in leaves)
    _, real, kwargs2 = prog.build(concrete=True)
    assert kwargs2 == kwargs
    real_leaves = jax.tree_util.tree_leaves(real)
    assert [(a.shape, a.dtype) for a in real_leaves] == [(a.shape, a.dtype) for a in leaves]
    assert all(isinstance(a, jax.Array) for a in real_leaves)


@pytest.mark.parametrize("name", NAMES)
def test_deterministic(name: str) -> None:
    prog = MODEL_PROGRAMS[name]
    # Abstract and concrete arguments (values aside) lower to the same module.
    assert prog.lower(concrete=True).as_text() == prog.lower().as_text()
    a = jax.tree_util.tree_leaves(prog.build(concrete=True)[1])
    b = jax.tree_util.tree_leaves(prog.build(concrete=True)[1])
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


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


def test_run_on_real_inputs(compiled: dict[str, tuple[Any, str]]) -> None:
    """The executables compiled from abstract args run on the concrete ones."""
    for name, prog in MODEL_PROGRAMS.items():
        exe, _ = compiled[name]
        _, real, _ = prog.build(concrete=True)
        out = exe(*real)
        for leaf in jax.tree_util.tree_leaves(out):
            assert np.all(np.isfinite(np.asarray(leaf))), name
    probs = compiled["resnet_infer"][0](*MODEL_PROGRAMS["resnet_infer"].build(True)[1])
    np.testing.assert_allclose(np.asarray(probs).sum(axis=-1), 1.0, rtol=1e-5)
    tokens, _, _ = compiled["inplace_update_loop"][0](
        *MODEL_PROGRAMS["inplace_update_loop"].build(True)[1]
    )
    assert tokens.shape == (32, 8) and int(tokens.min()) >= 0 and int(tokens.max()) < 256


@pytest.mark.parametrize("name", NAMES)
def test_extract_jax_validates(name: str) -> None:
    """With the XLA frontend present, each program extracts to a valid Program."""
    xla = pytest.importorskip("mallocgame.frontends.xla")
    if not hasattr(xla, "extract_jax"):
        pytest.skip("mallocgame.frontends.xla has no extract_jax yet")
    from mallocgame.program import Program, validate_program

    fn, args, kwargs = MODEL_PROGRAMS[name].build()
    program = xla.extract_jax(fn, *args, name=name, **kwargs)
    assert isinstance(program, Program)
    validate_program(program)
    assert program.name == name
    assert len(program.instructions) > 10
    if name in ("lstm_infer", "inplace_update_loop"):
        assert program.loops, name
    if name in ("inplace_update_loop", "donated_sgd_step"):
        assert program.alias_groups, name
