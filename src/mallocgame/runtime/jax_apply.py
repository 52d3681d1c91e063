"""An answer applied to a JAX function: what it leaves in slow memory lives in host memory.

The instance is the program of a JAX function as :func:`~mallocgame.frontends.xla.extract_jax`
extracts it (compiled for the CPU, read from XLA's scheduled module), derived on a GPU
preset (``gpu_hbm_host``: HBM fast, host memory slow). :func:`jax_placement` maps an
answer for it onto what JAX can express with memory kinds; :func:`apply_jax` builds the
jitted function; :func:`cuda_placements` lowers it for CUDA (from any machine, no GPU
needed) and counts the memory-kind annotations in the StableHLO text.

What is mapped (see docs/runtime-jax.md for each mismatch with the game):

- **Inputs** (the function's array arguments, flattened as pytrees). The frontend makes
  one program input per entry ``parameter(N)`` of the module, named after the
  instruction (``w1.1``, ``params__w1__.1``); parameter ``N`` is the ``N``-th argument
  leaf that JAX keeps (unused arguments are dropped from the module: ``kept_var_idx``).
  The mapping is checked leaf by leaf (the parameter's shape against the leaf's shape,
  the instance tensor's bytes against the leaf's bytes). An input whose every read the
  answer leaves in slow memory (Drop) is passed in host memory (``memory_kind=
  "pinned_host"`` in ``in_shardings``) and moved to the device inside the jitted
  function (``jax.device_put(x, jax.memory.Space.Device)``) right before the first
  equation of the jaxpr that reads it. An input with any Copy or NoCopy read is passed
  in device memory.
- **Results** (the function's output leaves: the leaves of the module's root). A result
  whose defining output buffer the answer drops (written straight to slow memory) is
  returned in host memory (``memory_kind="pinned_host"`` in ``out_shardings``); a result
  the answer writes to fast memory and copies out (Copy; the game forbids NoCopy for a
  result) is returned in device memory, its copy out left to the caller
  (``jax.device_get``). A result that *is* an input takes the input's placement.
- **Intermediate values are not mapped.** The instance's tensors are the outputs of the
  CPU module's fusions; no sound correspondence to jaxpr values (hence to
  ``checkpoint_name`` / ``save_and_offload_only_these_names``) exists.

Units: bytes. Arguments must be arrays or ``jax.ShapeDtypeStruct`` s (pytrees of them),
passed positionally, the same as those the instance was extracted with.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from mallocgame.frontends.hlo_parse import HloParseError, parse_module
from mallocgame.frontends.xla import dump_jax, entry_interface, extract_module, list_modules
from mallocgame.instance import Instance
from mallocgame.runtime.errors import ApplyError, ProgramMismatchError
from mallocgame.runtime.plan import placement_plan
from mallocgame.solution import Solution

__all__ = [
    "HOST",
    "DEVICE",
    "JaxPlacement",
    "LoweredPlacements",
    "jax_placement",
    "apply_jax",
    "place_args",
    "cuda_placements",
    "count_placements",
]

HOST = "pinned_host"  # JAX's memory kind for page-locked host memory
DEVICE = "device"  # JAX's memory kind for the accelerator's own memory (HBM)


@dataclasses.dataclass(frozen=True)
class JaxPlacement:
    """Where an answer puts a JAX function's argument and result leaves.

    ``in_kinds[i]`` / ``out_kinds[j]``: :data:`HOST` or :data:`DEVICE`, one per flattened
    argument leaf (``in_tree``, the tree of the positional-argument tuple) and per
    flattened result leaf (``out_tree``). ``in_tensors[i]`` is the instance's tensor id of
    argument leaf ``i`` (None: an argument the module does not keep, never read: device);
    ``out_tensors[j]`` the tensor id of result leaf ``j``. ``in_avals`` are the leaves'
    ``jax.ShapeDtypeStruct`` s. ``instance_sha256`` and ``label`` say which answer it is.
    """

    label: str
    instance_sha256: str
    in_tree: Any
    out_tree: Any
    in_avals: tuple[Any, ...]
    in_kinds: tuple[str, ...]
    out_kinds: tuple[str, ...]
    in_tensors: tuple[int | None, ...]
    out_tensors: tuple[int, ...]

    @property
    def host_args(self) -> tuple[int, ...]:
        """Indices of the argument leaves passed in host memory."""
        return tuple(i for i, k in enumerate(self.in_kinds) if k == HOST)

    @property
    def host_results(self) -> tuple[int, ...]:
        """Indices of the result leaves returned in host memory."""
        return tuple(j for j, k in enumerate(self.out_kinds) if k == HOST)


@dataclasses.dataclass(frozen=True)
class LoweredPlacements:
    """The memory-kind annotations of a lowered (StableHLO) module's ``main`` function.

    ``host_args`` / ``host_results``: indices of ``main``'s arguments / results carrying
    ``mhlo.memory_kind = "pinned_host"``; ``to_device`` / ``to_host``: the numbers of
    ``annotate_device_placement`` custom calls placing a value in device memory (an
    in-function ``device_put`` to ``Space.Device``) and in host memory (a result or an
    in-function ``device_put`` to ``Space.Host``); ``num_args`` / ``num_results``: how
    many ``main`` has; ``text``: the module's text.
    """

    host_args: tuple[int, ...]
    host_results: tuple[int, ...]
    to_device: int
    to_host: int
    num_args: int
    num_results: int
    text: str = ""


def _jax() -> Any:
    try:
        import jax
    except ImportError:
        raise ApplyError(
            "applying an answer to a JAX function needs JAX (pip install jax)"
        ) from None
    return jax


def _compiled_module_text(fn: Callable[..., Any], args: Sequence[Any]) -> str:
    """The scheduled CPU module of ``fn``, compiled exactly as ``extract_jax`` compiles it."""
    with tempfile.TemporaryDirectory(prefix="mallocgame-jax-apply-") as tmp:
        name = dump_jax(fn, *args, dump_dir=tmp)
        mods = [m for m in list_modules(tmp) if m.name == name] or list_modules(tmp)
        if not mods:
            raise ApplyError(f"{name}: XLA wrote no dump")
        chosen = max(mods, key=lambda m: (m.num_instructions, m.id))
        return chosen.path.read_text()


def _check_program(instance: Instance, text: str) -> None:
    """Raise :class:`ProgramMismatchError` unless ``text``'s program is ``instance``'s."""
    program = extract_module(text)
    if len(program.tensors) != len(instance.tensors):
        raise ProgramMismatchError(
            f"the function's program has {len(program.tensors)} tensors, the instance "
            f"{len(instance.tensors)}"
        )
    if len(program.instructions) != instance.num_instructions:
        raise ProgramMismatchError(
            f"the function's program has {len(program.instructions)} instructions, the "
            f"instance {instance.num_instructions}"
        )
    for p, x in zip(program.tensors, instance.tensors):
        if (p.name, p.size, p.def_time, p.live_out) != (x.name, x.size, x.def_time, x.live_out):
            raise ProgramMismatchError(
                f"tensor {x.id}: the instance has {x.name} ({x.size} bytes, defined at "
                f"{x.def_time}), the function's program {p.name} ({p.size} bytes, defined "
                f"at {p.def_time})"
            )
    for t, (pi, i) in enumerate(zip(program.instructions, instance.instructions)):
        if pi.name != i.name:
            raise ProgramMismatchError(
                f"instruction {t}: the instance has {i.name}, the function's program {pi.name}"
            )


def _nbytes(aval: Any) -> int:
    import numpy as np

    return int(np.prod(aval.shape, dtype=np.int64)) * np.dtype(aval.dtype).itemsize


def jax_placement(
    instance: Instance, solution: Solution, fn: Callable[..., Any], *args: Any
) -> JaxPlacement:
    """Map ``solution`` (an answer for ``instance``, the program of ``fn`` on ``args``)
    onto ``fn``'s argument and result leaves (see the module docstring).

    Raises :class:`~mallocgame.runtime.errors.AnswerMismatchError` when the answer is for
    another instance (hash), :class:`~mallocgame.runtime.errors.PlanError` when it fails
    the checker, :class:`ProgramMismatchError` when ``fn`` on ``args`` does not compile to
    the instance's program (tensors, instructions) or an argument leaf does not match its
    program input (shape, bytes), :class:`ApplyError` for what cannot be mapped (a
    tuple-shaped parameter, a result count that differs from the module's root).
    """
    plan = placement_plan(instance, solution)  # hash and check_solution first
    jax = _jax()
    text = _compiled_module_text(fn, args)
    _check_program(instance, text)
    try:
        module = parse_module(text)
    except HloParseError as exc:  # extract_module read it already; kept for safety
        raise ApplyError(str(exc)) from None
    interface = entry_interface(module)

    leaves, in_tree = jax.tree_util.tree_flatten(tuple(args))
    in_avals = tuple(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in leaves)
    lowered = jax.jit(fn).lower(*args)
    kept = sorted(lowered._lowering.compile_args.get("kept_var_idx", range(len(leaves))))
    if len(kept) != len(interface.params):
        raise ProgramMismatchError(
            f"the module has {len(interface.params)} parameters, JAX keeps {len(kept)} "
            f"of the {len(leaves)} argument leaves"
        )
    entry = {ins.name: ins for ins in module.entry.instructions}
    in_tensors: list[int | None] = [None] * len(leaves)
    for number, tree in sorted(interface.params.items()):
        if not isinstance(tree, int):
            raise ApplyError(f"parameter {number} of the module is a tuple: not mapped")
        leaf = kept[number]
        tensor = instance.tensors[int(tree)]
        aval = in_avals[leaf]
        shape = entry[tensor.name].shape if tensor.name in entry else None
        dims = tuple(getattr(shape, "dims", ()) or ())
        if tensor.size != _nbytes(aval) or (shape is not None and dims != tuple(aval.shape)):
            raise ProgramMismatchError(
                f"argument leaf {leaf} ({aval.dtype}{list(aval.shape)}, {_nbytes(aval)} "
                f"bytes) is not parameter {number} ({tensor.name}, {shape}, {tensor.size} bytes)"
            )
        in_tensors[leaf] = int(tree)

    reads: dict[int, list[bool]] = {}
    for step in plan.steps:
        for r in step.reads:
            reads.setdefault(r.tensor, []).append(r.segment is None)
    input_host = {x: all(reads.get(x, [])) for x in in_tensors if x is not None}
    in_kinds = tuple(HOST if x is not None and input_host[x] else DEVICE for x in in_tensors)

    out_leaves = jax.tree_util.tree_leaves(lowered.out_info)
    out_tree = lowered.out_tree
    roots = interface.results
    if len(roots) != len(out_leaves):
        raise ApplyError(
            f"the function returns {len(out_leaves)} arrays, the module's root has "
            f"{len(roots)}: not mapped"
        )
    out_kinds: list[str] = []
    for j, (x, info) in enumerate(zip(roots, out_leaves)):
        tensor = instance.tensors[int(x)]
        if tensor.size != _nbytes(info):
            raise ProgramMismatchError(
                f"result {j} ({_nbytes(info)} bytes) is not tensor {tensor.name} "
                f"({tensor.size} bytes)"
            )
        if tensor.def_time < 0:
            host = input_host.get(int(x), True)
        else:  # Drop: written to slow memory; Copy and NoCopy: written to HBM
            writes = plan.steps[tensor.def_time].writes
            host = any(w.tensor == int(x) and w.segment is None for w in writes)
        out_kinds.append(HOST if host else DEVICE)
    return JaxPlacement(
        label=plan.label,
        instance_sha256=instance.sha256,
        in_tree=in_tree,
        out_tree=out_tree,
        in_avals=in_avals,
        in_kinds=in_kinds,
        out_kinds=tuple(out_kinds),
        in_tensors=tuple(in_tensors),
        out_tensors=tuple(int(x) for x in roots),
    )


def _shardings(placement: JaxPlacement, device: Any, abstract: bool) -> tuple[Any, Any]:
    """``in_shardings`` (a tuple, one per positional argument) and ``out_shardings``."""
    jax = _jax()
    from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

    if abstract:
        mesh = jax.sharding.AbstractMesh((1,), ("x",))

        def make(kind: str) -> Any:
            return NamedSharding(mesh, PartitionSpec(), memory_kind=HOST if kind == HOST else None)

    else:
        dev = device if device is not None else jax.devices()[0]

        def make(kind: str) -> Any:
            return SingleDeviceSharding(dev, memory_kind=HOST if kind == HOST else None)

    ins = jax.tree_util.tree_unflatten(placement.in_tree, [make(k) for k in placement.in_kinds])
    outs = jax.tree_util.tree_unflatten(placement.out_tree, [make(k) for k in placement.out_kinds])
    return ins, outs


def _eval_moving(closed: Any, host: frozenset[int], leaves: Sequence[Any]) -> list[Any]:
    """Evaluate ``closed`` (a closed jaxpr) on ``leaves``, moving each input whose index is in
    ``host`` to device memory right before the first equation that reads it."""
    jax = _jax()
    from jax.extend.core import Literal

    jaxpr = closed.jaxpr
    env: dict[Any, Any] = {}
    pending = {v for i, v in enumerate(jaxpr.invars) if i in host}

    def read(v: Any) -> Any:
        if isinstance(v, Literal):
            return v.val
        if v in pending:
            env[v] = jax.device_put(env[v], jax.memory.Space.Device)
            pending.discard(v)
        return env[v]

    for v, c in zip(jaxpr.constvars, closed.consts):
        env[v] = c
    for v, x in zip(jaxpr.invars, leaves):
        env[v] = x
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        bound = eqn.primitive.get_bind_params(eqn.params)
        # jax 0.10 returns the parameters (sub-functions inside); older versions
        # returned (sub-functions, parameters).
        subfuns, params = bound if isinstance(bound, tuple) else ((), bound)
        ctx = getattr(getattr(eqn, "ctx", None), "manager", None)
        with ctx if ctx is not None else contextlib.nullcontext():
            outs = eqn.primitive.bind(*subfuns, *invals, **params)
        if not eqn.primitive.multiple_results:
            outs = [outs]
        for v, o in zip(eqn.outvars, outs):
            env[v] = o
    return [v.val if isinstance(v, Literal) else env[v] for v in jaxpr.outvars]


def apply_jax(
    placement: JaxPlacement,
    fn: Callable[..., Any],
    *,
    device: Any = None,
    abstract: bool = False,
    shardings: bool = True,
) -> Callable[..., Any]:
    """``fn`` jitted with ``placement``: host-placed argument leaves in ``pinned_host``
    (``in_shardings``), each moved to device memory inside the function right before its
    first use, host-placed results in ``pinned_host`` (``out_shardings``).

    ``device``: the device of the shardings (default: ``jax.devices()[0]``);
    ``abstract=True`` uses a one-device ``AbstractMesh`` instead, to export for a platform
    this machine lacks (:func:`cuda_placements`). ``shardings=False`` leaves out the
    shardings (the in-function moves stay): the function then runs on any backend, with
    committed arguments in any memory kind. Call it with the positional arguments
    ``fn`` was placed for; :func:`place_args` puts them where ``in_shardings`` expects.
    On the CPU backend the in-function moves are no-ops (XLA CPU has one memory).
    """
    jax = _jax()
    host = frozenset(placement.host_args)
    closed = jax.make_jaxpr(lambda *xs: fn(*jax.tree_util.tree_unflatten(placement.in_tree, xs)))(
        *placement.in_avals
    )
    out_tree = placement.out_tree

    def placed(*args: Any) -> Any:
        leaves = jax.tree_util.tree_leaves(tuple(args))
        return jax.tree_util.tree_unflatten(out_tree, _eval_moving(closed, host, leaves))

    placed.__name__ = getattr(fn, "__name__", "fn")
    if not shardings:
        return jax.jit(placed)
    in_shardings, out_shardings = _shardings(placement, device, abstract)
    return jax.jit(placed, in_shardings=in_shardings, out_shardings=out_shardings)


def place_args(placement: JaxPlacement, *args: Any, device: Any = None) -> tuple[Any, ...]:
    """``args`` put on ``device`` (default ``jax.devices()[0]``), each leaf in the memory kind
    ``placement`` gives it (what the function of :func:`apply_jax` expects)."""
    jax = _jax()
    in_shardings, _ = _shardings(placement, device, abstract=False)
    return tuple(jax.device_put(a, s) for a, s in zip(args, in_shardings))


def _close(text: str, start: int) -> int:
    """Index of the bracket closing the one at ``text[start]`` (``(``, ``[`` or ``{``)."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = []
    in_string = False
    for i in range(start, len(text)):
        c = text[i]
        if in_string:
            in_string = c != '"' or text[i - 1] == "\\"
        elif c == '"':
            in_string = True
        elif c in pairs:
            stack.append(pairs[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return i
        elif c in ")]}" and stack:
            raise ApplyError(f"unbalanced StableHLO signature near {text[i - 20 : i + 20]!r}")
    raise ApplyError("unbalanced StableHLO signature")


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and strings."""
    parts, depth, in_string, begin = [], 0, False, 0
    for i, c in enumerate(text):
        if in_string:
            in_string = c != '"' or text[i - 1] == "\\"
        elif c == '"':
            in_string = True
        elif c in "([{<":
            depth += 1
        elif c in ")]}>" and not (c == ">" and text[i - 1] == "-"):
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[begin:i])
            begin = i + 1
    if text[begin:].strip():
        parts.append(text[begin:])
    return [p.strip() for p in parts]


_HOST_KIND = re.compile(r'mhlo\.memory_kind\s*=\s*"pinned_host"')
_ANNOTATE = re.compile(
    r"custom_call\s+@annotate_device_placement\b[^\n]*?_xla_buffer_placement\s*=\s*\"([a-z_]+)\""
)


def count_placements(stablehlo: str) -> LoweredPlacements:
    """The memory-kind annotations of the public ``main`` function of a StableHLO module's
    text (see :class:`LoweredPlacements`). Raises :class:`ApplyError` without one."""
    m = re.search(r"func\.func public @main\(", stablehlo)
    if m is None:
        raise ApplyError("the lowered module has no public @main function")
    open_args = m.end() - 1
    close_args = _close(stablehlo, open_args)
    args = _split_top(stablehlo[open_args + 1 : close_args])
    rest = stablehlo[close_args + 1 :].lstrip()
    results: list[str] = []
    if rest.startswith("->"):
        rest = rest[2:].lstrip()
        if rest.startswith("("):
            results = _split_top(rest[1 : _close(rest, 0)])
        else:
            results = [rest.split("{", 1)[0]]
    kinds = _ANNOTATE.findall(stablehlo)
    return LoweredPlacements(
        host_args=tuple(i for i, a in enumerate(args) if _HOST_KIND.search(a)),
        host_results=tuple(j for j, r in enumerate(results) if _HOST_KIND.search(r)),
        to_device=sum(k == DEVICE for k in kinds),
        to_host=sum(k == HOST for k in kinds),
        num_args=len(args),
        num_results=len(results),
        text=stablehlo,
    )


def cuda_placements(placement: JaxPlacement, fn: Callable[..., Any]) -> LoweredPlacements:
    """The annotations of ``apply_jax(placement, fn)`` lowered for CUDA
    (``jax.export.export(..., platforms=["cuda"])`` with abstract shardings, so no GPU is
    needed): what a GPU would run, counted by :func:`count_placements`. ``host_args`` are
    indices of argument leaves (``main`` lacks the leaves JAX drops as unused)."""
    jax = _jax()
    jitted = apply_jax(placement, fn, abstract=True)
    args = jax.tree_util.tree_unflatten(placement.in_tree, list(placement.in_avals))
    try:
        exported = jax.export.export(jitted, platforms=["cuda"])(*args)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ApplyError(
            f"cannot lower the placed function for CUDA: {type(exc).__name__}: {first}"
        ) from None
    low = count_placements(exported.mlir_module())
    # ``main`` has only the argument leaves JAX keeps: report leaf indices.
    kept = tuple(getattr(exported, "module_kept_var_idx", range(low.num_args)))
    if len(kept) != low.num_args:
        raise ApplyError(
            f"the lowered main has {low.num_args} arguments, JAX keeps {len(kept)} leaves"
        )
    return dataclasses.replace(low, host_args=tuple(kept[i] for i in low.host_args))
