"""Command-line pieces of the apply path, for ``mallocgame`` to wire in.

``add_apply_parser(subparsers)`` adds ``mallocgame apply``::

    mallocgame apply --torch mymodule:factory [--arg f32[8,64]] SOLUTION
        [--preset gpu_hbm_host] [--capacity-fraction 0.25] [--device cuda|cpu]
        [--steps 10] [--warmup 3]

which captures the module, derives its instance (the answer must be for exactly that
instance: its hash), runs the program with the answer's placement and prints one line:
measured and simulated step time, peak HBM, host bytes, and whether the results are
identical to the module's own (exit 1 if not). With ``--jax MODULE:FUNCTION --instance
FILE`` it runs a JAX function instead (:func:`_apply_jax`); an option of the other source
(``--preset``, ``--capacity-fraction`` or ``--stage-dot-reads`` with ``--jax``,
``--instance`` with ``--torch``) is refused, not ignored. ``add_bench_real_parser(bench_subparsers)``
adds ``mallocgame bench real`` (the job of ``benchmarks/device_real.py``,
:func:`mallocgame.runtime.bench.run_real_bench`). Errors are
:class:`~mallocgame.errors.MallocGameError`\\ s for the command line's one-line exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mallocgame.limits import MAX_SECONDS

__all__ = ["add_apply_parser", "cmd_apply", "add_bench_real_parser", "cmd_bench_real"]


def _number(low: float, high: float, kind: type = float) -> Any:
    """An argparse type: a ``kind`` number in ``[low, high]`` (finite), else one line."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {kind.__name__}") from None
        if not (low <= value <= high):  # also refuses nan
            raise argparse.ArgumentTypeError(f"{text} is not in [{low:g}, {high:g}]")
        return value

    return parse


_PRESET = "gpu_hbm_host"
_CAPACITY_FRACTION = 0.25
"""The defaults of ``--preset`` and ``--capacity-fraction`` (``BenchConfig``'s too)."""


def _add_derivation_options(p: argparse.ArgumentParser) -> None:
    """``--preset`` and ``--capacity-fraction``: how a PyTorch program's instance is derived
    (``apply --torch`` and ``bench real``); ``None`` where not given (:data:`_PRESET` and
    :data:`_CAPACITY_FRACTION` then), so that ``apply --jax`` can refuse them."""
    p.add_argument(
        "--preset",
        default=None,
        help=f"the preset the instance is derived on (default: {_PRESET}; gpu_h100_host: an "
        "H100's measured one)",
    )
    p.add_argument(
        "--capacity-fraction",
        type=_number(1e-6, 1.0),
        default=None,
        help=f"fast memory / peak live bytes (default: {_CAPACITY_FRACTION:g})",
    )


def add_apply_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``apply`` to ``subparsers`` (``func`` = :func:`cmd_apply`)."""
    p = subparsers.add_parser(
        "apply",
        help="run a PyTorch module or a JAX function with an answer's placement (HBM / host "
        "memory)",
    )
    p.add_argument("solution", help="the answer (a solution file for the program's instance)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--torch",
        metavar="MODULE:FACTORY",
        help="the module's factory, as for extract",
    )
    source.add_argument(
        "--jax",
        metavar="MODULE:FUNCTION",
        help="a JAX function, as for extract, with --instance: its inputs and results placed "
        "with memory kinds (docs/runtime-jax.md)",
    )
    p.add_argument(
        "--instance",
        metavar="FILE",
        help="with --jax: the instance the answer was solved on (extract --jax ... --out FILE); "
        "the function must compile to its program (--preset and --capacity-fraction go with "
        "--torch)",
    )
    p.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="SPEC",
        help="an input, e.g. f32[8,64] (repeat)",
    )
    _add_derivation_options(p)
    p.add_argument(
        "--device", choices=("cuda", "cpu"), default="cuda", help="cpu: the CPU stand-in"
    )
    p.add_argument("--steps", type=_number(1, 10**6, int), default=10, help="timed runs")
    p.add_argument(
        "--warmup",
        type=_number(1, 10**6, int),
        default=3,
        help="untimed runs before them (the first, whose results are checked, included)",
    )
    p.add_argument(
        "--stage-dot-reads",
        action="store_true",
        help="with --torch: matmuls read their host operands through an HBM scratch copy (one "
        "bulk copy that the step waits for, not one PCIe read per output tile)",
    )
    p.set_defaults(func=cmd_apply)
    return p


def _real_inputs(torch: Any, inputs: tuple[Any, ...], device: Any) -> tuple[Any, ...]:
    """Example inputs with values: each tensor among them (in tuples, lists and dicts too)
    replaced by random normals for floating point, zeros otherwise (seeded, in the order of
    the leaves); other values (an int) kept as they are."""
    from torch.utils import _pytree

    gen = torch.Generator().manual_seed(0)

    def real(x: Any) -> Any:
        if not isinstance(x, torch.Tensor):
            return x
        if x.is_floating_point():
            return torch.randn(tuple(x.shape), generator=gen, dtype=x.dtype).to(device)
        return torch.zeros(tuple(x.shape), dtype=x.dtype, device=device)

    return tuple(_pytree.tree_map(real, tuple(inputs)))


def cmd_apply(args: argparse.Namespace) -> int:
    """``mallocgame apply``: see the module docstring. Returns the exit code (0, or 1 when the
    placed results differ from the module's)."""
    from mallocgame.costmodel import derive_instance
    from mallocgame.frontends.torch import _torch, resolve_factory
    from mallocgame.runtime.errors import ApplyError
    from mallocgame.runtime.measure import measure
    from mallocgame.runtime.memory import make_memory
    from mallocgame.runtime.plan import placement_plan
    from mallocgame.runtime.torch_graph import bind, capture_torch, eager_results, refuse_meta
    from mallocgame.simulate import simulate
    from mallocgame.solution import load_solution

    if args.steps < 1 or args.warmup < 1:
        raise ApplyError("--steps and --warmup must be at least 1")
    for flag, value, what in (
        ("--jax", args.jax, "MODULE:FUNCTION"),
        ("--torch", args.torch, "MODULE:FACTORY"),
        ("--instance", args.instance, "a file"),
    ):
        if value is not None and not value.strip():
            raise ApplyError(f"{flag} must name {what}")
    if args.jax is not None:
        if args.stage_dot_reads:
            raise ApplyError("--stage-dot-reads goes with --torch (XLA places its own copies)")
        for option, value in (
            ("--preset", args.preset),
            ("--capacity-fraction", args.capacity_fraction),
        ):
            if value is not None:
                raise ApplyError(
                    f"{option} goes with --torch (apply --jax reads its instance from --instance)"
                )
        return _apply_jax(args)
    if args.instance is not None:
        raise ApplyError("--instance goes with --jax (apply --torch derives its instance)")
    torch = _torch()
    memory = make_memory(args.device)
    solution = load_solution(args.solution)
    model = resolve_factory(args.torch, args.arg)
    refuse_meta(model.module, (), args.torch)  # before it is moved (its inputs: shapes alone)
    module = model.module.to(memory.device).eval()
    inputs = _real_inputs(torch, model.inputs, memory.device)
    captured = capture_torch(module, inputs, name=solution.instance)
    instance = derive_instance(
        captured.program,
        _PRESET if args.preset is None else args.preset,
        capacity_fraction=(
            _CAPACITY_FRACTION if args.capacity_fraction is None else args.capacity_fraction
        ),
    )
    plan = placement_plan(instance, solution)
    graph = bind(captured, instance)
    m = measure(
        graph,
        plan,
        memory,
        eager_results(graph).values,
        warmup=args.warmup,
        steps=args.steps,
        stage_dot_reads=args.stage_dot_reads,
    )
    simulated = simulate(instance, solution).latency_s
    print(
        f"{instance.name}: {solution.solver} on {args.device}: measured {m.median_s * 1e3:.3f} ms "
        f"(p10 {m.p10_s * 1e3:.3f}, p90 {m.p90_s * 1e3:.3f}, {m.steps} runs), simulated "
        f"{simulated * 1e3:.3f} ms; "
        f"peak HBM {m.peak_hbm_text()}, host {plan.host_bytes() / 2**20:.1f} MiB; "
        f"results identical: {m.identical}"
        + (f"; staged through HBM: {len(m.staged)} ops" if m.staged else "")
        + (
            f"; matmul operands staged: {m.dot_staged_bytes / 2**20:.1f} MiB"
            if args.stage_dot_reads
            else ""
        )
    )
    return 0 if m.identical else 1


_BENCH_PROGRAMS = (
    "mlp",
    "bert",
    "resnet50",
    "ffn",
    "bert-small",
    "mlp-train",
    "mlp-train-adamw",
    "bert-small-train",
)
"""The names of :data:`mallocgame.runtime.bench.PROGRAMS` (the parser is built without
importing it; a test checks they agree)."""


def _apply_jax(args: argparse.Namespace) -> int:
    """``mallocgame apply --jax``: the answer checked against ``--instance`` (its hash and
    the checker) and the function on seeded inputs of the ``--arg`` specs against the
    instance's program (it must compile to it), mapped onto the function's inputs and
    results (:func:`~mallocgame.runtime.jax_apply.jax_placement`), run jitted with the
    placement (on ``cuda``: host-placed inputs passed in ``pinned_host``; on ``cpu`` the
    moves are no-ops) and against the plain ``jax.jit``: one line, exit 1 if the results
    differ. The instance is read, not derived again: a JAX extraction's source names its
    dump module, whose number depends on what the process compiled before."""
    import statistics
    import time

    import jax
    import numpy as np

    from mallocgame.frontends.argspec import parse_arg_spec, resolve_function
    from mallocgame.instance import load_instance
    from mallocgame.runtime.errors import ApplyError, NoGpuError
    from mallocgame.runtime.jax_apply import apply_jax, cuda_placements, jax_placement, place_args
    from mallocgame.simulate import simulate
    from mallocgame.solution import load_solution

    platform = "gpu" if args.device == "cuda" else "cpu"
    try:
        device = jax.devices(platform)[0]
    except RuntimeError:
        raise NoGpuError(
            "no CUDA device seen by JAX: running an answer on HBM and host memory needs a GPU"
        ) from None
    if not args.instance:
        raise ApplyError("apply --jax needs --instance FILE: the instance the answer was solved on")
    instance = load_instance(args.instance)
    solution = load_solution(args.solution)
    fn = resolve_function(args.jax)
    keys = jax.random.split(jax.random.PRNGKey(0), max(len(args.arg), 1))
    values = []
    for key, spec in zip(keys, args.arg):
        aval = parse_arg_spec(spec)
        if np.issubdtype(aval.dtype, np.floating):
            values.append(jax.random.normal(key, aval.shape, aval.dtype))
        else:
            values.append(jax.numpy.zeros(aval.shape, aval.dtype))
    with jax.default_device(device):
        placement = jax_placement(instance, solution, fn, *values)
    lowered = cuda_placements(placement, fn)
    if args.device == "cuda":
        placed_fn = apply_jax(placement, fn, device=device)
        placed_args = place_args(placement, *values, device=device)
    else:
        placed_fn = apply_jax(placement, fn, shardings=False)
        placed_args = tuple(jax.device_put(v, device) for v in values)
    plain = jax.jit(fn)
    plain_args = tuple(jax.device_put(v, device) for v in values)

    def timed(f: Any, call_args: tuple[Any, ...]) -> tuple[Any, float]:
        out = jax.block_until_ready(f(*call_args))
        for _ in range(args.warmup - 1):
            jax.block_until_ready(f(*call_args))
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            jax.block_until_ready(f(*call_args))
            times.append(time.perf_counter() - t0)
        return out, statistics.median(times)

    reference, plain_s = timed(plain, plain_args)
    got, placed_s = timed(placed_fn, placed_args)
    pairs = list(zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(reference)))
    identical = len(pairs) == len(jax.tree_util.tree_leaves(reference)) and all(
        _same_values(np.asarray(a), np.asarray(b)) for a, b in pairs
    )
    simulated = simulate(instance, solution).latency_s
    print(
        f"{instance.name}: {solution.solver} on {args.device} (JAX {jax.__version__}): measured "
        f"{placed_s * 1e3:.3f} ms (plain jit {plain_s * 1e3:.3f} ms, medians of {args.steps}), "
        f"simulated {simulated * 1e3:.3f} ms; inputs in host memory "
        f"{len(placement.host_args)} of {len(placement.in_kinds)} (in the CUDA lowering "
        f"{len(lowered.host_args)}), results in host memory {len(placement.host_results)}; "
        f"results identical: {identical}"
    )
    return 0 if identical else 1


def _same_values(a: Any, b: Any) -> bool:
    """Two result arrays equal in shape, dtype and every element, NaN where the other has
    NaN (``log`` of a random input is NaN in places, in both)."""
    import numpy as np

    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


def add_bench_real_parser(bench_subparsers: Any) -> argparse.ArgumentParser:
    """Add ``real`` to the ``bench`` subparsers (``func`` = :func:`cmd_bench_real`)."""
    p = bench_subparsers.add_parser(
        "real", help="run answers for real on a GPU and compare with the simulator"
    )
    p.add_argument("--out", required=True, type=Path, help="directory for the CSVs and the log")
    p.add_argument("--dry-run", action="store_true", help="on the CPU with tiny programs")
    p.add_argument(
        "--programs",
        nargs="+",
        default=None,
        choices=_BENCH_PROGRAMS,
        metavar="PROGRAM",
        help=f"default: mlp bert resnet50 (have: {', '.join(_BENCH_PROGRAMS)})",
    )
    p.add_argument(
        "--placements",
        nargs="+",
        default=None,
        metavar="SOLVER[:SEED]",
        help="the answers to run (default: drop heuristic greedy first-touch random:0-2 es:0)",
    )
    p.add_argument(
        "--seconds",
        type=_number(1.0, MAX_SECONDS),
        default=330.0,
        help="stop measuring after this (s)",
    )
    p.add_argument(
        "--answers",
        type=Path,
        default=None,
        help="directory of extra solution files (*.json), one solution file, or an earlier "
        "run's programs.json.gz (the answers it was given)",
    )
    p.add_argument(
        "--torch",
        metavar="MODULE:FACTORY",
        default=None,
        help="your own module as a program (after --programs; alone without them), its "
        "inputs from --arg, as for extract",
    )
    p.add_argument(
        "--arg", action="append", default=[], metavar="SPEC", help="an input of --torch (repeat)"
    )
    p.add_argument(
        "--training-step",
        action="store_true",
        help="with --torch: its training step (the mean of its first output as the loss)",
    )
    from mallocgame.frontends.torch import OPTIMIZERS

    p.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        default="none",
        help="with --training-step: the parameters' update that ends the step (torch.optim's "
        "defaults)",
    )
    _add_derivation_options(p)
    p.add_argument(
        "--hbm-limit",
        type=_number(1e-3, 1e3),
        default=None,
        metavar="MULTIPLE",
        help="cap PyTorch's allocator per program at what the program holds plus MULTIPLE x "
        "its instance's fast memory (a GPU only)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="keep the programs an earlier run in --out finished, and its machine figures",
    )
    p.add_argument(
        "--no-framework",
        action="store_true",
        help="skip PyTorch's own baselines (eager, and eager with save_on_cpu for training steps)",
    )
    p.add_argument(
        "--profile",
        nargs="*",
        default=None,
        metavar="PLACEMENT",
        help="placements whose per-op times are measured, by their labels: hbm-resident, a "
        "--placements spec as written, given:SOLVER (or given:SOLVER:sSEED) of --answers, "
        "LABEL+staged-dots (default: hbm-resident, and drop where --placements has it; "
        "--profile alone: none)",
    )
    p.add_argument(
        "--stage-dot-reads",
        action="store_true",
        help="measure each answer again with its matmuls reading their host operands through "
        "an HBM scratch copy (rows LABEL+staged-dots, simulated on the staged preset)",
    )
    p.set_defaults(func=cmd_bench_real)
    return p


def cmd_bench_real(args: argparse.Namespace) -> int:
    """``mallocgame bench real``: :func:`mallocgame.runtime.bench.run_real_bench`."""
    from mallocgame.runtime.bench import BenchConfig, factory_program, run_real_bench
    from mallocgame.runtime.errors import ApplyError

    if args.torch is not None and not args.torch.strip():
        raise ApplyError("--torch must name MODULE:FACTORY")
    if (args.arg or args.training_step) and args.torch is None:
        raise ApplyError("--arg and --training-step go with --torch MODULE:FACTORY")
    if args.optimizer != "none" and not args.training_step:
        raise ApplyError("--optimizer goes with --training-step")
    extra = (
        (
            factory_program(
                args.torch, args.arg, training=args.training_step, optimizer=args.optimizer
            ),
        )
        if args.torch is not None
        else ()
    )
    default = () if extra else ("mlp", "bert", "resnet50")
    given: dict[str, Any] = {}  # the options given; BenchConfig's defaults otherwise
    if args.placements:
        given["placements"] = tuple(args.placements)
    if args.profile is not None:
        given["profile"] = tuple(args.profile)
    if args.preset is not None:
        given["preset"] = args.preset
    if args.capacity_fraction is not None:
        given["capacity_fraction"] = args.capacity_fraction
    if args.dry_run:
        given.update(work=8, warmup=1, steps=3)
    config = BenchConfig(
        out=args.out,
        device="cpu" if args.dry_run else "cuda",
        tiny=args.dry_run,
        programs=tuple(args.programs or default),
        extra=extra,
        seconds=args.seconds,
        answers=args.answers,
        framework=not args.no_framework,
        resume=args.resume,
        hbm_limit=args.hbm_limit,
        stage_dot_reads=args.stage_dot_reads,
        **given,
    )
    unbuilt = run_real_bench(config)["unbuilt"]
    if unbuilt:  # the others measured and written; the run says it is not whole
        print(
            f"mallocgame: {len(unbuilt)} program(s) could not be built: {', '.join(unbuilt)} "
            f"(why: {Path(args.out) / 'run.log'})",
            file=sys.stderr,
        )
        return 1
    return 0
