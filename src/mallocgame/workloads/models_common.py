"""Shared pieces of the model programs (:mod:`mallocgame.workloads.models`).

:class:`ModelProgram`, the helpers that make example arguments (abstract
(:class:`jax.ShapeDtypeStruct`) by default, real arrays drawn from
``numpy.random.default_rng(SEED)`` with ``concrete=True``) and the training-step
builders that models of several files share. The model files (``models_*.py``, the
suites ``xla-v1`` and ``xla-v2``) import from here; :mod:`mallocgame.workloads.models`
is the registry of ``xla-v1``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

__all__ = ["ModelProgram", "Built", "SEED"]

SEED = 0

Built = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


@dataclass(frozen=True)
class ModelProgram:
    """One program: a jittable function with fixed example arguments.

    ``builder(concrete)`` returns ``(fn, example_args, jit_kwargs)``;
    ``jit_kwargs`` holds e.g. ``donate_argnums`` and is meant for ``jax.jit``.
    ``training`` marks a full training step (loss, gradients and an optimizer
    update); ``loops`` a program with at least one XLA ``while`` loop of known trip
    count (``lax.scan`` / ``fori_loop``); ``preset`` the hardware preset the program is
    sized for (``None``: its suite's).
    """

    name: str
    description: str
    builder: Callable[[bool], Built]
    training: bool = False
    loops: bool = False
    preset: str | None = None

    def build(self, concrete: bool = False) -> Built:
        """``(fn, example_args, jit_kwargs)``; abstract args unless ``concrete``."""
        return self.builder(concrete)

    def lower(self, concrete: bool = False) -> Any:
        """The program lowered by ``jax.jit`` (a ``jax.stages.Lowered``)."""
        fn, args, kwargs = self.build(concrete)
        return jax.jit(fn, **kwargs).lower(*args)


def _abstract(tree: Any) -> Any:
    """ShapeDtypeStructs of every array leaf of ``tree``."""
    return jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), tree)


_KEY = jax.ShapeDtypeStruct((2,), jnp.uint32)  # a raw PRNG key, for jax.eval_shape


def _fill(path: tuple[Any, ...], leaf: jax.ShapeDtypeStruct, rng: np.random.Generator) -> Any:
    """A real value for one parameter: by its name, else fan-in scaled normal.

    Real arrays are placed with ``jax.device_put`` (``jnp.asarray`` compiles a
    conversion per new shape: seconds for a model with hundreds of shapes).
    """
    last = path[-1] if path else None
    name = str(getattr(last, "key", getattr(last, "name", "")))
    if not jnp.issubdtype(leaf.dtype, jnp.floating) or name in ("bias", "mean"):
        value = np.zeros(leaf.shape, leaf.dtype)
    elif name in ("scale", "var"):
        value = np.ones(leaf.shape, leaf.dtype)
    elif len(leaf.shape) >= 2:
        fan_in = int(np.prod(leaf.shape[:-1]))
        value = (rng.standard_normal(leaf.shape) / np.sqrt(fan_in)).astype(leaf.dtype)
    else:
        value = np.zeros(leaf.shape, leaf.dtype)
    return jax.device_put(value)


def _params(
    init_fn: Callable[[jax.Array, jax.Array], Any],
    example: Any,
    concrete: bool,
    rng: np.random.Generator,
) -> Any:
    """Parameters of the shapes ``init_fn(key, example)`` makes: abstract or real.

    Only the shapes come from ``init_fn`` (``jax.eval_shape``, nothing computed);
    real values are drawn with numpy (:func:`_fill`), since running a model's
    random init through XLA costs far more to compile than the program itself.
    """
    shapes = _abstract(jax.eval_shape(init_fn, _KEY, example))
    if not concrete:
        return shapes
    return jax.tree_util.tree_map_with_path(lambda p, leaf: _fill(p, leaf, rng), shapes)


def _opt_state(tx: optax.GradientTransformation, params: Any, concrete: bool) -> Any:
    """The optimizer's initial state for ``params`` (abstract when they are).

    Real states come from one jitted ``tx.init`` (one small compilation instead of
    an eager dispatch, and compilation, per parameter shape).
    """
    if concrete:
        return jax.jit(tx.init)(params)
    return _abstract(jax.eval_shape(tx.init, params))


def _floats(rng: np.random.Generator, shape: tuple[int, ...], concrete: bool) -> Any:
    if concrete:
        return jax.device_put(rng.standard_normal(shape).astype(np.float32))
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def _ints(rng: np.random.Generator, shape: tuple[int, ...], high: int, concrete: bool) -> Any:
    if concrete:
        return jax.device_put(rng.integers(0, high, shape).astype(np.int32))
    return jax.ShapeDtypeStruct(shape, jnp.int32)


def _uniform(rng: np.random.Generator, shape: tuple[int, ...], concrete: bool) -> Any:
    """Values in [0, 1) (e.g. pixel intensities or binary targets)."""
    if concrete:
        return jax.device_put(rng.random(shape).astype(np.float32))
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def _rng_key(concrete: bool) -> Any:
    """A raw ``uint32[2]`` PRNG key argument (the program draws its own noise from it)."""
    if concrete:
        return jax.device_put(np.array([0, SEED], np.uint32))
    return _KEY


def _forward(model: Any, variables: Any, *args: Any) -> Any:
    """``model.apply(variables, *args)``, no collection mutable: the module's output, as its
    ``__call__`` types it (flax types ``apply`` for any ``mutable``, with the updated state
    in a tuple)."""
    return model.apply(variables, *args)


def _xent(logits: jax.Array, labels: jax.Array) -> jax.Array:
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


@functools.cache
def _variable_shapes(model: Any, examples: tuple[Any, ...], collections: tuple[str, ...]) -> Any:
    """``{collection: shapes}`` of ``model.init(key, *examples)`` (abstract; cached).

    Flax modules and ``ShapeDtypeStruct`` s are hashable, so a program built again
    (e.g. concrete after abstract) does not trace its model's init again.
    """

    def init(key: jax.Array, ex: tuple[Any, ...]) -> Any:
        v = model.init(key, *ex)
        return {c: v[c] for c in collections if c in v}

    return _abstract(jax.eval_shape(init, _KEY, examples))


def _model_variables(
    model: Any,
    examples: tuple[Any, ...],
    concrete: bool,
    rng: np.random.Generator,
    collections: tuple[str, ...] = ("params",),
) -> dict[str, Any]:
    """The ``collections`` of ``model.init(key, *examples)``: abstract or real (:func:`_fill`).

    ``examples`` are ``ShapeDtypeStruct`` s of the model's inputs (batch 1 suffices).
    """
    shapes = _variable_shapes(model, tuple(examples), tuple(collections))
    if not concrete:
        return jax.tree_util.tree_map(lambda a: a, shapes)  # a fresh tree
    return jax.tree_util.tree_map_with_path(lambda p, leaf: _fill(p, leaf, rng), shapes)


def _model_params(
    model: Any, examples: tuple[Any, ...], concrete: bool, rng: np.random.Generator
) -> Any:
    """The parameters of ``model.init(key, *examples)``: abstract or real."""
    return _model_variables(model, examples, concrete, rng)["params"]


def _gradient_step(
    tx: optax.GradientTransformation,
    loss_fn: Callable[[Any], jax.Array],
    params: Any,
    opt_state: Any,
) -> tuple[Any, Any, jax.Array]:
    """``(params, opt_state, loss)`` after one update of ``tx`` (optax).

    The update follows the gradient of ``loss_fn(params)``.

    For use inside a traced step: the loss and its gradient (``jax.value_and_grad``),
    the update, and the updated parameters, in that order.
    """
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def _train_step(
    loss_fn: Callable[..., jax.Array], tx: optax.GradientTransformation
) -> Callable[..., Any]:
    """``step(params, opt_state, *batch) -> (params, opt_state, loss)``: a :func:`_gradient_step`
    on ``loss_fn(params, *batch)``."""

    def train_step(params: Any, opt_state: Any, *batch: Any) -> Any:
        return _gradient_step(tx, lambda p: loss_fn(p, *batch), params, opt_state)

    return train_step


def _training_program(
    model: Any,
    tx: optax.GradientTransformation,
    loss_fn: Callable[..., jax.Array],
    init_examples: tuple[Any, ...],
    batch: tuple[Any, ...],
    concrete: bool,
    rng: np.random.Generator,
) -> Built:
    """A :func:`_train_step` with its params (of ``model.init(key, *init_examples)``) and optimizer state."""
    params = _model_params(model, init_examples, concrete, rng)
    opt_state = _opt_state(tx, params, concrete)
    return _train_step(loss_fn, tx), (params, opt_state, *batch), {}


def _next_token_train(
    model: Any, tx: optax.GradientTransformation, batch: int, seq: int, concrete: bool
) -> Built:
    """A language model's training step: next-token cross-entropy on ``batch`` sequences of ``seq`` tokens.

    ``model`` maps int32 tokens ``[batch, seq]`` to logits over ``model.vocab``; the
    batch argument is ``[batch, seq + 1]`` tokens (inputs and their shifted targets).
    """
    rng = np.random.default_rng(SEED)
    tokens = _ints(rng, (batch, seq + 1), model.vocab, concrete)

    def loss_fn(params, tokens):
        return _xent(_forward(model, {"params": params}, tokens[:, :-1]), tokens[:, 1:])

    t0 = jax.ShapeDtypeStruct((1, seq), jnp.int32)
    return _training_program(model, tx, loss_fn, (t0,), (tokens,), concrete, rng)
