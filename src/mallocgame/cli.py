"""The ``mallocgame`` command line (SPEC section 8).

``main(argv) -> int`` is called directly by the tests. Exit codes: 0 success, 1 a
failed check, 2 bad input (one line on stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from mallocgame.bench.inputs import at_least
from mallocgame.errors import MallocGameError, OutputFileError
from mallocgame.fileio import check_writable, output_beside, refuse_folder_name
from mallocgame.hardware import DEFAULT_PRESET, preset_names
from mallocgame.limits import MAX_SECONDS, MAX_SEED, MAX_WORK
from mallocgame.units import format_bytes
from mallocgame.workloads.suite import SUITE, SUITES

if TYPE_CHECKING:
    from mallocgame.frontends.xla_placement import XlaPlacement
    from mallocgame.instance import Instance
    from mallocgame.program import Program
    from mallocgame.solution import Solution
    from mallocgame.solvers.base import Improvement
    from mallocgame.solvers.xla_answer import XlaAnswer

__all__ = ["main"]

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a reader that closed early
DEFAULT_OPTIMIZE_SECONDS = 300.0  # optimize's wall-clock budget when none is given


class UsageError(MallocGameError):
    """Bad command-line arguments."""


_SubParsers = Any  # argparse._SubParsersAction[_Parser]: private in argparse


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit code 2 (via UsageError)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _default_out(instance_name: str, solver: str, seed: int) -> Path:
    """``out/NAME.SOLVER.sSEED.json`` with the instance and solver names made file-safe
    (a solver name read from a file, ``x/../..``, stays a name inside ``out/``)."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", instance_name).strip("-") or "instance"
    solver = re.sub(r"[^A-Za-z0-9_-]+", "-", solver).strip("-") or "solver"
    return Path("out") / f"{stem}.{solver}.s{seed}.json"


# ---------------------------------------------------------------------------- commands


def _cmd_list(args: argparse.Namespace) -> int:
    """``list``: a row per bundled workload (from the index kept beside them, or where it
    lacks one, as the workload loads), in columns wide enough for any of them."""
    from mallocgame.workloads.listing import summaries
    from mallocgame.workloads.registry import workload_names

    names = workload_names()
    header = ("name", "instructions", "buffers", "fast memory")
    # widths: the longest name; counts up to 9,999,999; sizes as "1023.9 GiB"
    widths = (max(len(n) for n in [header[0], *names]), len(header[1]), 8, 11)

    def print_row(row: tuple[str, ...]) -> None:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        print("  ".join(cells), flush=True)

    print_row(header)
    for row in summaries():
        counts = (str(row.instructions), str(row.buffers))
        print_row((row.name, *counts, format_bytes(row.fast_memory_bytes)))
    return EXIT_OK


def _output_file(out: Path, *inputs: str | None, flag: str = "--out") -> Path:
    """``out`` (given as ``flag``) as a file to write, checked before any work: not a
    directory, not one of the command's ``inputs`` (an instance or solution file it
    reads), and in a place that takes files (:func:`~mallocgame.fileio.check_writable`);
    :class:`UsageError`, or :class:`~mallocgame.errors.OutputFileError`, otherwise."""
    if out.is_dir():
        raise UsageError(f"{flag} {out}: a directory, not a file")
    for given in inputs:
        if given is not None and Path(given).exists() and out.resolve() == Path(given).resolve():
            raise UsageError(f"{flag} {out} is the file this command reads: give another")
    check_writable(out)  # a read-only folder, or a file where a folder goes: found out now
    return out


def _agent_files(config: object) -> tuple[str, ...]:
    """The files a run of ``config`` may read a trained agent from (a muzero solver's
    ``init``): the path itself, and in a folder its agent and its checkpoint
    (:func:`~mallocgame.solvers.muzero.agent.agent_checkpoint`); inputs of
    :func:`_output_file`, so no answer replaces the agent it starts from."""
    from mallocgame.solvers.checkpoint import CHECKPOINT_NAME
    from mallocgame.solvers.muzero.agent import AGENT_NAME
    from mallocgame.solvers.muzero.config import MuZeroConfig

    if not isinstance(config, MuZeroConfig) or config.init is None:
        return ()
    init = Path(config.init)
    return (str(init), str(init / AGENT_NAME), str(init / CHECKPOINT_NAME))


def _cmd_solve(args: argparse.Namespace, inst: Instance | None = None) -> int:
    """``solve``; ``inst``: the workload, where the caller loaded it already."""
    from mallocgame.solution import save_solution
    from mallocgame.solvers import SolveRequest, get_solver
    from mallocgame.workloads.registry import load_workload

    if args.out is not None and not args.out.strip():
        raise UsageError("--out must name a file")
    solver = get_solver(args.solver)
    inst = inst if inst is not None else load_workload(args.workload)
    out = Path(args.out) if args.out else _default_out(inst.name, args.solver, args.seed)
    options = _options(args.option)
    solver.check_options(options)  # (a bad option: named before the folder it would name)
    config = solver.config(options)
    _output_file(out, args.workload, *_agent_files(config))
    checkpoint_dir = getattr(config, "checkpoint_dir", None)
    if checkpoint_dir is not None:  # a trainer's folder: its checkpoint and best answer
        _refuse_the_runs_own_file(out, Path(checkpoint_dir), "checkpoint_dir")
        _refuse_a_folder_at_an_output(Path(checkpoint_dir), (out,), "checkpoint_dir")

    def progress(improvement: Improvement) -> None:
        work = ", ".join(f"{k} {v}" for k, v in improvement.work.items())
        print(
            f"  {improvement.elapsed_s:8.2f} s  {work}: normalized reward "
            f"{improvement.solution.normalized_reward:.6f}",
            file=sys.stderr,
        )

    request = SolveRequest(
        seed=args.seed,
        seconds=args.budget,
        work=args.work,
        callback=progress if args.progress else None,
        options=options,
    )
    solution = solver.solve(inst, request)  # (the game's kernels load outside its budget)
    save_solution(solution, out)  # (the write makes the folders to it)
    print(
        f"{inst.name}: {solver.name} normalized reward {solution.normalized_reward:.6f} "
        f"(reward {solution.reward_s:.6g} s) -> {out}"
    )
    return EXIT_OK


def _solver_options(items: Sequence[str], solvers: Sequence[str]) -> dict[str, dict[str, str]]:
    """``SOLVER:KEY=VALUE`` strings → each named solver's options."""
    per_solver: dict[str, list[str]] = {}
    for item in items:
        solver, sep, setting = item.partition(":")
        if not sep or "=" not in setting:
            raise UsageError(f"--option expects SOLVER:KEY=VALUE, not {item!r}")
        if solver not in solvers:
            raise UsageError(
                f"--option {item!r}: solver {solver!r} is not one of {', '.join(solvers)}"
            )
        per_solver.setdefault(solver, []).append(setting)
    return {solver: _options(settings, f"{solver}:") for solver, settings in per_solver.items()}


def _options(items: Sequence[str], solver: str = "") -> dict[str, str]:
    """``KEY=VALUE`` strings → a dict of strings; the solver's ``Config`` types them
    (:func:`mallocgame.options.parse_config`). A key given twice with the same text is
    one setting; with two texts :class:`UsageError` (neither is taken over the other,
    even where both mean one value: ``0.2`` and ``0.20``);
    ``solver`` (``"es:"``) prefixes the key in that message."""
    from mallocgame.options import key_values

    try:
        return key_values(items, solver)
    except ValueError as exc:
        raise UsageError(f"--option {exc}") from None


def _cmd_solvers(args: argparse.Namespace) -> int:
    from mallocgame.options import option_docs
    from mallocgame.solvers import SOLVERS

    names = args.names or list(SOLVERS)
    for name in names:
        if name not in SOLVERS:
            from mallocgame.solvers import get_solver

            get_solver(name)  # the error, with a suggestion
    for name in names:
        cls = SOLVERS[name]
        # the docstring's first paragraph, one line however many it is written on
        first = (cls.__doc__ or "").strip().split("\n\n")[0]
        doc = " ".join(line.strip() for line in first.splitlines()).replace("``", "")
        print(f"{name}  (work unit: {cls.work_unit})  {doc}")
        for opt in option_docs(cls.Config):
            default = json.dumps(opt.default)
            print(f"    {opt.name} = {default}  [{opt.kind}]  {opt.doc}")
    return EXIT_OK


def _cmd_train(args: argparse.Namespace) -> int:
    """``solve`` for the learning solvers, with checkpoints in --dir and progress lines."""
    from mallocgame.workloads.registry import load_workload

    if args.solver not in ("muzero", "muzero-nosearch", "egrl"):
        raise UsageError(f"train runs muzero, muzero-nosearch or egrl, not {args.solver!r}")
    _check_dir_argument(args.dir)
    _refuse_options_set_by(args.option, ("checkpoint_dir", "progress"), "train")
    args.option = [*args.option, f"checkpoint_dir={args.dir}", "progress=true"]
    args.option += _ray_options(args, args.solver)
    args.out = str(Path(args.dir) / "final.solution.json") if args.out is None else args.out
    _refuse_the_runs_own_file(Path(args.out), Path(args.dir))
    inst = load_workload(args.workload)
    _resumes(args.solver, inst, _options(args.option), args.seed, "use another --dir or remove it")
    return _cmd_solve(args, inst)


def _refuse_the_runs_own_file(out: Path, folder: Path, named: str = "--dir") -> None:
    """``--out`` is not the run's folder (``--dir``, or ``named``) itself nor a file the run
    keeps there (its checkpoint, its best answer): the answer would replace it, and the
    run could not resume (or its best answer would be replaced by a worse one)."""
    from mallocgame.solvers.checkpoint import BEST_NAME, CHECKPOINT_NAME

    if out.resolve() == folder.resolve():
        raise UsageError(f"--out {out} is {named}: give a file")
    if out.resolve() in (folder.resolve() / CHECKPOINT_NAME, folder.resolve() / BEST_NAME):
        raise UsageError(f"--out {out} is a file the run keeps in {named}: give another")


def _refuse_a_folder_at_an_output(folder: Path, outputs: Sequence[Path], named: str) -> None:
    """The run's folder (``named``) is none of the files the command writes (``outputs``)
    nor inside one: the run would make a folder where that file goes, and the write would
    fail only after all the work."""
    for path in outputs:
        if path.resolve() == folder.resolve():
            raise UsageError(f"{named} {folder} is a file this command writes: give another")
        if path.resolve() in folder.resolve().parents:
            raise UsageError(
                f"{named} {folder} is inside {path}, a file this command writes: give another"
            )


def _refuse_options_set_by(given: list[str], keys: tuple[str, ...], command: str) -> None:
    """A ``--option KEY=VALUE`` of ``keys``, which ``command`` sets itself (the checkpoint
    folder from ``--dir``, progress lines on), is refused: it would be overridden without
    a word."""
    for item in given:
        key = item.partition("=")[0].strip()
        if key in keys:
            raise UsageError(f"{command} sets {key} itself (--dir): drop --option {key}")


def _check_dir_argument(folder: str) -> None:
    """``--dir``: a directory, or a path where one can be created."""
    if not folder.strip():
        raise UsageError("--dir must name a directory")
    if Path(folder).exists() and not Path(folder).is_dir():
        raise UsageError(f"--dir {folder} is a file; give a directory (created if missing)")


def _ray_options(args: argparse.Namespace, solver: str) -> list[str]:
    """``--ray``/``--actors`` as the muzero settings ``ray`` and ``actors``; the same
    settings given with ``--option`` too are refused (the flags would override them), and
    so are actors without Ray (``--ray`` or ``--option ray``: they would be ignored)."""
    if args.ray is None:
        if args.actors is not None:
            raise UsageError("--actors needs --ray (local, auto or HOST:PORT)")
        values = {k.strip(): v.strip() for k, _, v in (item.partition("=") for item in args.option)}
        if "actors" in values and values.get("ray", "").lower() in ("", "none", "null"):
            raise UsageError("--option actors needs --ray (local, auto or HOST:PORT)")
        return []
    if not solver.startswith("muzero"):
        raise UsageError(f"--ray runs the muzero agents' self-play, not {solver}'s")
    if not args.ray.strip() or args.ray.strip().lower() == "none":
        raise UsageError("--ray needs local, auto or HOST:PORT (without --ray: one process)")
    given = {item.partition("=")[0].strip() for item in args.option}
    for key in ("ray", "actors"):
        if key in given:
            raise UsageError(f"give {key} once: --{key} or --option {key}=..., not both")
    return [f"ray={args.ray}", f"actors={args.actors if args.actors is not None else 2}"]


def _add_ray_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ray",
        default=None,
        metavar="ADDRESS",
        help="self-play on Ray actors: local (a one-node cluster started here), "
        "auto (the running cluster) or HOST:PORT (needs mallocgame[ray])",
    )
    p.add_argument(
        "--actors", type=_whole_number(1), default=None, help="with --ray: self-play actors (2)"
    )


def _cmd_train_agent(args: argparse.Namespace) -> int:
    """``train-agent``: one agent trained on many programs, a start for ``init=DIR``."""
    from mallocgame.solvers import get_solver
    from mallocgame.solvers.base import Stopwatch
    from mallocgame.solvers.checkpoint import stderr_log
    from mallocgame.workloads.registry import load_workload
    from mallocgame.workloads.suite import agent_split, suite_names

    _check_dir_argument(args.dir)
    _refuse_options_set_by(args.option, ("checkpoint_dir", "progress"), "train-agent")
    names = list(args.programs)
    for suite in args.suite:
        names += agent_split(suite_names(suite), args.split)
    if args.split != "all" and not args.suite:
        raise UsageError("--split chooses among the programs of --suite; give one")
    names = list(dict.fromkeys(names))
    if not names:
        split = (
            f" (--split {args.split} of {', '.join(args.suite)} leaves none)" if args.suite else ""
        )
        raise UsageError(f"no programs to train on: give workloads or --suite{split}")
    instances = [load_workload(name) for name in names]
    if args.max_buffers is not None:
        kept = [i for i in instances if i.num_buffers <= args.max_buffers]
        if not kept:
            smallest = min(i.num_buffers for i in instances)
            raise UsageError(
                f"none of the {len(instances)} programs has at most {args.max_buffers} buffers "
                f"(--max-buffers; the smallest has {smallest:,})"
            )
        instances = kept
    options = _options([*args.option, *_ray_options(args, "muzero")])
    config = get_solver("muzero").config({**options, "checkpoint_dir": args.dir})
    try:
        from mallocgame.solvers.muzero.agent import AGENT_NAME
        from mallocgame.solvers.muzero.shared import (
            SharedTrainer,
            check_agent_folder,
            check_programs,
        )
    except ImportError as exc:
        raise UsageError(
            f"train-agent needs JAX, flax, optax and mctx (pip install 'mallocgame[muzero]'): {exc}"
        ) from None
    remedy = f"start from it with --option init={args.dir} and another --dir"
    check_agent_folder(Path(args.dir), remedy)  # before the line below, nothing written
    check_programs(instances)  # (one without buffers, say) refused before the line below
    print(
        f"training one agent on {len(instances)} programs "
        f"({min(i.num_buffers for i in instances)} to {max(i.num_buffers for i in instances)} "
        f"buffers) -> {args.dir}",
        file=sys.stderr,
    )
    trainer = SharedTrainer(
        instances, config, seed=args.seed, checkpoint_dir=args.dir, log=stderr_log
    )
    try:
        answers = trainer.run(games=args.work, clock=Stopwatch(args.budget))
    finally:
        trainer.close()
    width = max(len(i.name) for i in instances)
    print(f"{'program'.ljust(width)}  buffers  games  best normalized reward")
    for inst, t, answer in zip(instances, trainer.trainers, answers):
        print(
            f"{inst.name.ljust(width)}  {inst.num_buffers:7d}  {t.counters.games:5d}  "
            f"{answer.normalized_reward:.4f}"
        )
    print(f"agent -> {Path(args.dir) / AGENT_NAME} (start a run from it: --option init={args.dir})")
    return EXIT_OK


def _resumes(
    solver_name: str, inst: Instance, options: dict[str, str], seed: int, remedy: str
) -> bool:
    """Whether a run of the learning solver ``solver_name`` (muzero, muzero-nosearch,
    muzero-prod or egrl) with ``options`` (its ``checkpoint_dir`` among them) resumes
    from a checkpoint there; a checkpoint it cannot resume (another run's, another
    trainer's, a damaged one) is refused now, with ``remedy`` ending the message, before
    anything runs or prints."""
    from mallocgame.solvers import checkpoint, get_solver

    solver = get_solver(solver_name)
    config = solver.config(options)
    if config.checkpoint_dir is None:
        return False
    try:
        if solver_name == "egrl":
            from mallocgame.solvers.egrl import trainer as egrl_trainer
        else:
            from mallocgame.solvers.muzero import train as muzero_trainer
            from mallocgame.solvers.muzero.solver import MuZeroSolver
    except ImportError as exc:
        raise UsageError(
            f"{solver_name} needs JAX, flax, optax and mctx "
            f"(pip install 'mallocgame[muzero]'): {exc}"
        ) from None
    if solver_name == "egrl":
        fingerprint = egrl_trainer.checkpoint_fingerprint(inst, config, seed)
        trainer = egrl_trainer.TRAINER
    else:
        assert isinstance(solver, MuZeroSolver)  # muzero, muzero-nosearch or muzero-prod
        fingerprint = muzero_trainer.checkpoint_fingerprint(inst, config, seed, solver.answer)
        trainer = muzero_trainer.TRAINER
    folder = checkpoint.checkpoint_directory(config.checkpoint_dir)  # not a file
    return checkpoint.check_checkpoint(
        folder / checkpoint.CHECKPOINT_NAME, fingerprint, remedy, trainer=trainer
    )


def _cmd_optimize(args: argparse.Namespace) -> int:
    """The main job: muzero-prod, a progress bar, the files, and the comparison table."""
    from mallocgame.optimize import (
        check_budget,
        format_comparison,
        optimize,
        output_paths,
        write_outputs,
    )
    from mallocgame.progress import BestSoFar, ProgressBar
    from mallocgame.residency import compare_residency, format_residency_comparison
    from mallocgame.solvers import get_solver
    from mallocgame.workloads.registry import load_workload

    if args.out is not None and not args.out.strip():
        raise UsageError("--out must name a file")
    if args.budget is None and args.work is None:
        args.budget = DEFAULT_OPTIMIZE_SECONDS
    compiled = _optimize_compiled(args)
    inst = compiled.instance if compiled is not None else load_workload(args.workload)
    out = Path(args.out) if args.out else _default_out(inst.name, "muzero-prod", args.seed)
    paths = output_paths(out)
    options = _options([*args.option, *_ray_options(args, "muzero-prod")])
    reads = (args.workload, *_agent_files(get_solver("muzero-prod").config(options)))
    writes = (*paths.files(), *([paths.steer] if args.steer is not None else []))
    for path in writes:
        _output_file(path, *reads)  # each checked before the run, not after it
    remedy = "delete it to start over, or give another --out"
    if "checkpoint_dir" in options:
        remedy = "delete it to start over, or give another checkpoint_dir"
    options.setdefault("checkpoint_dir", str(paths.checkpoint))
    checkpoint_dir = get_solver("muzero-prod").config(options).checkpoint_dir
    if checkpoint_dir is not None:  # (checkpoint_dir= or none: the run keeps no files)
        _refuse_the_runs_own_file(out, Path(checkpoint_dir), "checkpoint_dir")
        _refuse_a_folder_at_an_output(Path(checkpoint_dir), writes, "checkpoint_dir")
    check_budget(args.budget, options)  # a budget too short for the agent: before the run
    if _resumes("muzero-prod", inst, options, args.seed, remedy):
        print(
            f"resuming the agent from {options['checkpoint_dir']} (delete it to start over)",
            file=sys.stderr,
        )
    status = BestSoFar()

    with ProgressBar(f"optimize {inst.name}", args.budget) as bar:

        def show(improvement: Improvement) -> None:
            bar.update(
                status.improved(
                    improvement.solution.solver,
                    improvement.solution.normalized_reward,
                    improvement.work.get("games"),
                )
            )

        def played(work: Mapping[str, int | float]) -> None:
            bar.update(status.played(work.get("games")))

        outcome = optimize(
            inst,
            seconds=args.budget,
            games=args.work,
            seed=args.seed,
            options=options,
            on_improvement=show,
            on_progress=played,
            compiler=None if compiled is None else compiled.xla.solution,
        )
        bar.update(status.played(outcome.agent.work.get("games")))  # the last line: every game
    write_outputs(outcome, out)
    print(format_comparison(outcome))
    print(format_residency_comparison(compare_residency(inst, outcome.baseline, outcome.agent)))
    print(f"answer -> {paths.answer}; candidates -> {paths.baseline}, {paths.agent}")
    print(
        f"reward against time -> {paths.curve_png} ({paths.curve_csv.name}); layouts -> {paths.layouts}"
    )
    if args.steer is not None:
        assert compiled is not None  # _optimize_compiled refused --steer without a TPU target
        _steer(args, compiled, outcome.answer, paths.steer)
    return EXIT_OK


@dataclass(frozen=True)
class _Compiled:
    """``optimize --target``'s program: its instance on the target's preset, XLA's own
    placement and legal answer, and what recompiles it (``None`` for a dump)."""

    instance: Instance
    placement: XlaPlacement
    xla: XlaAnswer
    build: tuple[Callable[..., Any], list[Any], dict[str, Any]] | None


def _optimize_compiled(args: argparse.Namespace) -> _Compiled | None:
    """For ``optimize --target TPU`` (with ``--jax`` or a dump): the compiled program;
    ``None`` for a plain workload."""
    if args.jax is not None and not args.jax.strip():
        raise UsageError("--jax must name MODULE:FUNCTION")
    if (args.arg or args.donate) and args.jax is None:
        raise UsageError("--arg and --donate go with --jax MODULE:FUNCTION")
    if args.target == "cpu":
        if args.jax is not None or args.steer is not None:
            raise UsageError("--jax and --steer go with --target TPU (tpu-v4, tpu-v5e, ...)")
        if not args.workload:
            raise UsageError("give a workload: a bundled name, an instance file or a dump")
        return None
    if (args.jax is not None) == bool(args.workload):
        raise UsageError(
            f"--target {args.target}: give --jax MODULE:FUNCTION (compiled for it) or an XLA "
            "dump directory of a TPU compile, not both"
        )
    from mallocgame.costmodel import derive_instance
    from mallocgame.frontends.tpu import extract_jax_tpu, fast_spaces_of, tpu_target
    from mallocgame.solvers.xla_answer import xla_answer

    build = None
    if args.jax is not None:
        from mallocgame.frontends.argspec import parse_arg_spec, resolve_function

        fn = resolve_function(args.jax)
        example = [parse_arg_spec(spec) for spec in args.arg]
        kwargs: dict[str, Any] = {"donate_argnums": tuple(args.donate)}
        name = args.jax.rpartition(":")[2]
        program, placement = extract_jax_tpu(fn, *example, target=args.target, name=name, **kwargs)
        build = (fn, example, kwargs)
    else:
        from mallocgame.frontends.xla import extract_dump_with_placement

        if not Path(args.workload).is_dir():
            raise UsageError(
                f"--target {args.target}: {args.workload} is not an XLA dump directory"
            )
        program, placement = extract_dump_with_placement(args.workload, largest=True)
        _check_dump_target(placement, args.target, fast_spaces_of(args.target))
    inst = derive_instance(program, tpu_target(args.target).preset, capacity_fraction=None)
    answer = xla_answer(inst, placement, fast_spaces_of(args.target))
    return _Compiled(inst, placement, answer, build)


def _spaces_used(placement: XlaPlacement) -> set[int]:
    """The memory spaces XLA put a buffer or a copy of ``placement``'s module in."""
    return set(placement.spaces) | {c.dest_space for c in placement.copies}


def _check_dump_target(placement: XlaPlacement, target: str, fast_spaces: frozenset[int]) -> None:
    """Refuse (:class:`UsageError`) a dump none of whose buffers or copies is in ``target``'s
    fast ``fast_spaces``, the test :func:`_write_xla_solution` notes: XLA's answer would read
    as everything in slow memory (a dump of another TPU generation, of a CPU or GPU, or one
    whose module XLA placed nothing of in that memory)."""
    used = _spaces_used(placement)
    if used & fast_spaces:
        return
    hint = (
        "a CPU dump, or one XLA placed nothing of in fast memory?"
        if used <= {0}
        else f"it uses memory spaces {sorted(used)}: a dump of another generation?"
    )
    raise UsageError(
        f"--target {target}: no buffer or copy of the dump's module is in memory space "
        f"{sorted(fast_spaces)}, {target}'s fast memory ({hint}); XLA's answer would read as "
        "everything in slow memory"
    )


def _steer(args: argparse.Namespace, compiled: _Compiled, answer: Solution, out: Path) -> None:
    """``optimize --steer``: write the flags that steer XLA's assignment towards the
    answer, and with ``--jax`` compile with them and report what XLA then placed."""
    from mallocgame.fileio import write_json
    from mallocgame.frontends.tpu import fast_spaces_of
    from mallocgame.runtime.tpu_steer import steer_jax_tpu, steering_flags

    inst, mode = compiled.instance, args.steer
    flags = steering_flags(
        inst, answer, compiled.placement, fast_spaces=fast_spaces_of(args.target), mode=mode
    )
    write_json(out, flags.compiler_options())
    print(
        f"steering flags ({mode}; tensors assigned first: {len(flags.promoted)}, last: "
        f"{len(flags.demoted)}) -> {out}: pass them as compiler_options of "
        "jax.jit(...).lower(...).compile()"
    )
    if compiled.build is None:
        return
    fn, example, kwargs = compiled.build
    report = steer_jax_tpu(
        fn,
        *example,
        target=args.target,
        instance=inst,
        answer=answer,
        placement=compiled.placement,
        mode=mode,
        unsteered=compiled.xla,
        **kwargs,
    )
    print(
        f"XLA with the flags follows {report.followed_steered:.1%} of the answer's fast-memory "
        f"byte-steps (without: {report.followed_unsteered:.1%}); its legal answer simulates "
        f"at {report.steered_latency_s * 1e3:.4f} ms (without: "
        f"{report.unsteered_latency_s * 1e3:.4f} ms; the answer: "
        f"{report.answer_latency_s * 1e3:.4f} ms)"
    )


def _cmd_check(args: argparse.Namespace) -> int:
    from mallocgame.check import check_solution
    from mallocgame.solution import load_solution
    from mallocgame.workloads.registry import load_workload

    inst = load_workload(args.instance)
    solution = load_solution(args.solution)
    report = check_solution(inst, solution)
    if report.ok:
        print(
            f"valid: {inst.name}, {len(solution.allocations)} allocations, normalized reward "
            f"{solution.normalized_reward:.6f}"
        )
        return EXIT_OK
    print(f"invalid: {report.summary()}")
    return EXIT_CHECK_FAILED


def _checked_solution(args: argparse.Namespace, verb: str) -> tuple[Instance, Solution] | None:
    """``args.instance`` and ``args.solution`` loaded; ``None`` (after printing why, as
    "invalid (not VERB): ...") when the solution fails ``check``."""
    from mallocgame.check import check_solution
    from mallocgame.solution import load_solution
    from mallocgame.workloads.registry import load_workload

    inst = load_workload(args.instance)
    solution = load_solution(args.solution)
    report = check_solution(inst, solution)
    if not report.ok:
        print(f"invalid (not {verb}): {report.summary()}")
        return None
    return inst, solution


def _cmd_simulate(args: argparse.Namespace) -> int:
    from mallocgame.simulate import baseline_latency, simulate

    checked = _checked_solution(args, "simulated")
    if checked is None:
        return EXIT_CHECK_FAILED
    inst, solution = checked
    result = simulate(inst, solution)
    baseline = baseline_latency(inst)
    speedup = f"{baseline / result.latency_s:.4f}" if result.latency_s > 0 else "n/a (zero latency)"
    print(
        f"{inst.name}: latency {result.latency_s * 1e3:.6f} ms (all slow: {baseline * 1e3:.6f} ms), "
        f"speedup {speedup}; stalls {result.stall_s * 1e3:.6f} ms, "
        f"copy engine busy {result.copy_busy_s * 1e3:.6f} ms, {result.num_copies} copies"
    )
    return EXIT_OK


def _cmd_project(args: argparse.Namespace) -> int:
    """Replay a (checked) mapping's decisions as a game trajectory; report what it keeps."""
    from mallocgame.solution import save_solution
    from mallocgame.solvers.projection import DEFAULT_REPAIRS, project

    if args.out is not None and not args.out.strip():
        raise UsageError("--out must name a file")
    checked = _checked_solution(args, "projected")
    if checked is None:
        return EXIT_CHECK_FAILED
    inst, mapping = checked
    repairs = DEFAULT_REPAIRS if args.repairs is None else args.repairs
    out = (
        Path(args.out)
        if args.out
        else _default_out(inst.name, f"{mapping.solver}-projected", mapping.seed)
    )
    flag = "--out" if args.out else "the default output (give --out)"
    _output_file(out, args.instance, args.solution, flag=flag)  # before the projection's replays
    projected, kept = project(inst, mapping, repairs=repairs)
    save_solution(projected, out)
    info = projected.info
    repaired = (
        (
            f", {info['kept_before_repair']:.4f} before {info['repairs_kept']} repairs in "
            f"{info['repair_replays']} replays"
        )
        if repairs
        else ""
    )
    print(
        f"{inst.name}: mapping normalized reward {mapping.normalized_reward:.6f}, as a game "
        f"{projected.normalized_reward:.6f} (kept {kept:.4f}{repaired}); {info['fallbacks']} "
        f"fallbacks, {info['backups']} Drop-backups -> {out}"
    )
    return EXIT_OK


def _cmd_show(args: argparse.Namespace) -> int:
    from mallocgame.solution import load_solution
    from mallocgame.viz import draw_layout
    from mallocgame.workloads.registry import load_workload

    if not args.out.strip():
        raise UsageError("--out must name a file")
    if args.against is not None and not args.against.strip():
        raise UsageError("--against must name a solution file")
    paths = [args.solution] + ([args.against] if args.against else [])
    out = _output_file(Path(args.out), args.instance, *paths)
    if out.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise UsageError(f"--out must end in .png, .svg or .pdf, got '{out.name}'")
    inst = load_workload(args.instance)
    solutions = [load_solution(path) for path in paths]
    for path, solution in zip(paths, solutions):
        if solution.instance_sha256 != inst.sha256:
            raise UsageError(f"{path} is a solution of another instance ({solution.instance})")
    from mallocgame.check import check_solution

    reports = [check_solution(inst, solution) for solution in solutions]
    if len(solutions) == 1:
        draw_layout(inst, solutions[0], out)
        print(f"layout of {inst.name} ({len(solutions[0].allocations)} allocations) -> {out}")
    else:
        from mallocgame.residency import compare_residency, format_residency_comparison
        from mallocgame.viz import draw_layouts

        names = [s.solver for s in solutions]
        if names[0] == names[1]:  # two answers of one solver: told apart by their files
            names = [f"{s.solver} ({path})" for s, path in zip(solutions, paths)]
        draw_layouts(inst, solutions, out, titles=[f"{inst.name}: {n}" for n in names])
        print(f"layouts of {inst.name}: {names[0]} above {names[1]} -> {out}")
        comparison = compare_residency(inst, solutions[0], solutions[1], (names[0], names[1]))
        print(format_residency_comparison(comparison))
    status = EXIT_OK
    for path, report in zip(paths, reports):
        if not report.ok:  # drawn all the same: a picture helps to see what is wrong
            print(f"{path} invalid (drawn anyway): {report.summary()}")
            status = EXIT_CHECK_FAILED
    return status


def _cmd_extract(args: argparse.Namespace) -> int:
    from mallocgame.costmodel import DEFAULT_CAPACITY_FRACTION, derive_instance
    from mallocgame.hardware import get_preset
    from mallocgame.instance import save_instance
    from mallocgame.program import save_program

    if args.suite is not None:
        return _extract_suites(args)
    if args.model is not None and len(args.model) != 1:
        raise UsageError("--model takes one NAME (several: with --suite SUITE)")
    if args.out_dir is not None:
        raise UsageError("--out-dir goes with --suite and a TPU --target")
    sources = [args.dump, args.jax, args.torch, args.program, args.model and args.model[0]]
    if sum(1 for s in sources if s) != 1:
        raise UsageError(
            "give exactly one of --dump DIR, --jax MODULE:FUNCTION, --torch MODULE:FACTORY, "
            "--program FILE, --model NAME, --suite"
        )
    if (args.train or args.granularity != "tensor") and not args.torch:
        raise UsageError("--train and --granularity go with --torch MODULE:FACTORY")
    if (args.loss or args.labels or args.optimizer) and not args.train:
        raise UsageError("--loss, --labels and --optimizer go with --train")
    for flag, value, what in (
        ("--out", args.out, "a file"),
        ("--program-out", args.program_out, "a file"),
        ("--xla-solution", args.xla_solution, "a file"),
        ("--preset", args.preset, "a hardware preset"),
        ("--labels", args.labels, "the labels' shape, DTYPE[DIMS]"),
    ):
        if value is not None and not value.strip():
            raise UsageError(f"{flag} must name {what}")
    if args.name is not None and not args.name.strip():
        raise UsageError("--name must not be empty (leave it out for the default name)")
    if not args.out and not args.program_out:
        raise UsageError("give --out FILE (the instance) and/or --program-out FILE")
    tpu = args.target != "cpu"
    if tpu and not (args.jax or args.model):
        raise UsageError(f"--target {args.target} goes with --jax or --model (a dump is compiled)")
    if args.xla_solution is not None and not ((args.dump or tpu) and args.out):
        raise UsageError(
            "--xla-solution needs --dump DIR or --target TPU, and --out FILE (the instance it is "
            "a solution of)"
        )
    _check_extract_outputs(args)
    fast_spaces = _memory_spaces(args.xla_fast_spaces, args.target)
    preset = get_preset(args.preset if args.preset is not None else _target_preset(args.target))
    placement = None
    if args.dump:
        from mallocgame.frontends.xla import AmbiguousModuleError, extract_dump_with_placement

        try:
            program, placement = extract_dump_with_placement(
                args.dump, module=args.module, name=args.name
            )
        except AmbiguousModuleError as exc:  # the library's keyword is the command line's --module
            message = str(exc).replace("pick one with module=...", "pick one with --module NAME")
            raise UsageError(message) from None
    elif args.jax:
        from mallocgame.frontends.argspec import parse_arg_spec, resolve_function
        from mallocgame.frontends.xla import extract_jax

        fn = resolve_function(args.jax)
        example = [parse_arg_spec(spec) for spec in args.arg]
        if tpu:
            from mallocgame.frontends.tpu import extract_jax_tpu

            program, placement = extract_jax_tpu(
                fn, *example, target=args.target, name=args.name, donate_argnums=tuple(args.donate)
            )
        else:
            program = extract_jax(fn, *example, name=args.name, donate_argnums=tuple(args.donate))
    elif args.torch:
        program = _extract_torch_program(args)
    elif args.program:
        program = _named_program(args.program)
    else:
        program, placement = _extract_model_program(args.model[0], args.name, args.target)
    notes = program.source.get("notes") if isinstance(program.source, dict) else None
    if notes:  # what the frontend assumed (a loop of unknown trip count counted once, ...)
        print(f"note: {notes}", file=sys.stderr)
    # every output is made (and so checked) before any is written: a program whose
    # instance cannot be derived leaves --program-out as it was
    inst: Instance | None = None
    answer: XlaAnswer | None = None
    if args.out:
        fraction = args.capacity_fraction
        if fraction is None:  # a TPU compile's assignment had the whole fast memory
            fraction = None if tpu else DEFAULT_CAPACITY_FRACTION
        if args.physical:
            fraction = None
        inst = derive_instance(program, preset, capacity_fraction=fraction, name=args.name)
        if args.xla_solution and placement is not None:
            answer = _xla_solution(inst, placement, fast_spaces)
    if args.program_out:
        save_program(program, args.program_out)
        print(
            f"program {program.name}: {len(program.instructions)} instructions, "
            f"{program.num_buffers} buffers -> {args.program_out}"
        )
    if inst is not None:
        save_instance(inst, args.out)
        print(
            f"instance {inst.name} on {inst.hardware.name}: {inst.num_instructions} instructions, "
            f"{inst.num_buffers} buffers, fast memory {format_bytes(inst.hardware.fast_memory_bytes)} "
            f"-> {args.out}"
        )
    if answer is not None and placement is not None:
        _write_xla_solution(answer, placement, fast_spaces, args.xla_solution)
    return EXIT_OK


def _named_program(name: str) -> Program:
    """The bundled program ``SUITE/NAME``, else the program file at ``name``: as in
    :func:`~mallocgame.workloads.registry.load_workload`, a file or folder of a bundled
    name beside you does not shadow it (:class:`~mallocgame.errors.InputFileError` where
    it is neither)."""
    from mallocgame.program import load_program
    from mallocgame.workloads.suite import suite_names, suite_program

    if name in suite_names() or not Path(name).exists():
        return suite_program(name)
    return load_program(name)


def _extract_model_program(
    model: str, name: str | None, target: str
) -> tuple[Program, XlaPlacement | None]:
    """``extract --model SUITE/NAME``: the bundled model's program, compiled for ``target``
    (``cpu``, or a TPU whose compile gives XLA's placement too, else ``None``)."""
    from mallocgame.workloads.suite import extract_model, model_programs

    suite, slash, short = model.rpartition("/")
    if slash and not suite:
        raise UsageError(f"--model {model}: no suite before the '/' (give SUITE/NAME or NAME)")
    models = model_programs(suite or SUITE)
    if short not in models:
        raise UsageError(
            f"unknown model '{model}' of {suite or SUITE} (have: {', '.join(sorted(models))})"
        )
    frontend = SUITES[suite or SUITE].frontend
    if frontend == "tpu":
        raise UsageError(
            f"{suite}'s programs are frozen per target: --program {suite}/NAME-v4, or "
            "--model xla-v2/NAME --target tpu-v4"
        )
    if target == "cpu":
        program, _ = extract_model(frontend, models[short], name or model)
        return program, None
    if frontend != "xla":
        raise UsageError(f"--target {target}: {model} is not a JAX program")
    from mallocgame.frontends.tpu import extract_jax_tpu

    fn, example, jit_kwargs = models[short].build()
    return extract_jax_tpu(fn, *example, target=target, name=name or model, **jit_kwargs)


def _check_extract_outputs(args: argparse.Namespace) -> None:
    """``extract``'s settings that only some sources or outputs take, and its output files,
    checked before any work: a setting that would be ignored is refused, and every output
    is a file of its own that is not the program read (:func:`_output_file`)."""
    for flag, given, needs, what in (
        ("--module", args.module is not None, args.dump, "--dump DIR"),
        ("--arg", bool(args.arg), args.jax or args.torch, "--jax or --torch"),
        ("--donate", bool(args.donate), args.jax, "--jax MODULE:FUNCTION"),
        (
            "--xla-fast-spaces",
            args.xla_fast_spaces is not None,
            args.xla_solution,
            "--xla-solution",
        ),
        ("--preset", args.preset is not None, args.out, "--out FILE (the instance)"),
        ("--physical", args.physical, args.out, "--out FILE (the instance)"),
        ("--capacity-fraction", args.capacity_fraction is not None, args.out, "--out FILE"),
    ):
        if given and not needs:
            raise UsageError(f"{flag} goes with {what}")
    if args.physical and args.capacity_fraction is not None:
        raise UsageError("--physical is the whole fast memory: drop --capacity-fraction")
    fraction = args.capacity_fraction
    if fraction is not None and not (math.isfinite(fraction) and fraction > 0):
        raise UsageError(f"--capacity-fraction must be a finite number above 0, not {fraction}")
    outputs = [Path(p) for p in (args.out, args.program_out, args.xla_solution) if p]
    for path in outputs:
        _output_file(path, args.program)
    if len({path.resolve() for path in outputs}) < len(outputs):
        raise UsageError("--out, --program-out and --xla-solution must be three different files")


_ONE_PROGRAM_SETTINGS = (
    "dump",
    "module",
    "jax",
    "torch",
    "program",
    "loss",
    "labels",
    "optimizer",
    "preset",
    "capacity_fraction",
    "name",
    "out",
    "program_out",
    "xla_solution",
    "xla_fast_spaces",
)
"""``extract``'s settings (None unless given) that name one program's source or output."""


def _extract_flags(args: argparse.Namespace) -> dict[str, bool]:
    """``extract``'s flags that name one program's source or output, each with whether it
    is given (``--suite`` takes none of them)."""
    given = {
        f"--{dest.replace('_', '-')}": getattr(args, dest) is not None
        for dest in _ONE_PROGRAM_SETTINGS
    }
    return given | {
        "--train": args.train,
        "--physical": args.physical,
        "--arg": bool(args.arg),
        "--donate": bool(args.donate),
        "--granularity": args.granularity != "tensor",
    }


def _extract_suites(args: argparse.Namespace) -> int:
    """``extract --suite [SUITE] [--model NAME ...]``: the bundled suites (or one, or some of
    its programs) extracted again in place; with ``--target``, :func:`_extract_suite_for_target`."""
    from mallocgame.workloads.suite import freeze

    if args.suite and args.suite not in SUITES:
        raise UsageError(f"unknown suite '{args.suite}' (have: {', '.join(SUITES)})")
    if args.model and not args.suite:
        raise UsageError(
            "--model with --suite needs the suite named: --suite SUITE --model NAME ..."
        )
    if args.model is not None and not args.model:
        raise UsageError("--model with --suite needs the names of the programs to extract")
    ignored = [flag for flag, given in _extract_flags(args).items() if given]
    if ignored:  # each suite has its own preset and rule: these would be dropped
        raise UsageError(f"--suite re-extracts the bundled programs as frozen: drop {ignored[0]}")
    if args.out_dir is not None and args.target == "cpu":
        raise UsageError(
            "--out-dir goes with --suite and a TPU --target (CPU suites extract in place)"
        )
    if args.target != "cpu":
        return _extract_suite_for_target(args)
    start = time.perf_counter()
    total = 0
    for suite in [args.suite] if args.suite else list(SUITES):
        frozen = freeze(args.model or None, progress=print, suite=suite)
        total += len(frozen)
        if SUITES[suite].frontend == "tpu":  # XLA's placement as a legal answer, frozen too
            from mallocgame.solvers.xla_answer import freeze_xla_answers

            freeze_xla_answers([f"{suite}/{name}" for name in frozen], progress=print)
    print(f"froze {total} programs in {time.perf_counter() - start:.1f} s")
    return EXIT_OK


def _extract_torch_program(args: argparse.Namespace) -> Program:
    """``extract --torch MODULE:FACTORY``: the module's program, inference or (``--train``) the
    training step that ``--loss``, ``--labels`` and ``--optimizer`` name."""
    from mallocgame.frontends.argspec import parse_spec
    from mallocgame.frontends.torch import (
        TrainingStep,
        _module_device,
        extract_torch,
        meta_inputs,
        resolve_factory,
    )

    step = TrainingStep(args.loss or "output", args.optimizer or "none") if args.train else None
    if step is not None and step.needs_labels != bool(args.labels):
        raise UsageError(
            f"--loss {step.loss} needs --labels DTYPE[DIMS]"
            if step.needs_labels
            else f"--labels goes with --loss model or cross-entropy, not {step.loss}"
        )
    if args.labels:
        parse_spec(args.labels)  # a bad spec is refused before the factory runs
    model = resolve_factory(args.torch, args.arg)
    model.module.train(args.train)
    labels = None
    if args.labels:
        (labels,) = meta_inputs(
            [args.labels], device=_module_device(model.module), like=model.inputs
        )
    return extract_torch(
        model.module,
        model.inputs,
        name=args.name,
        training_step=step or False,
        labels=labels,
        granularity=args.granularity,
    )


def _extract_suite_for_target(args: argparse.Namespace) -> int:
    """``extract --suite SUITE --target TPU --out-dir DIR``: every JAX model of the suite
    (or ``--model``) compiled for the generation, each as a program, XLA's placement, an
    instance on the generation's preset and XLA's legal answer in ``DIR``."""
    from mallocgame.costmodel import derive_instance
    from mallocgame.frontends.tpu import fast_spaces_of, tpu_target
    from mallocgame.frontends.xla_placement import load_placement
    from mallocgame.instance import save_instance
    from mallocgame.program import load_program
    from mallocgame.solution import save_solution
    from mallocgame.solvers.xla_answer import xla_answer
    from mallocgame.workloads.suite import freeze

    if not args.suite or not args.out_dir:
        raise UsageError(
            f"--suite with --target {args.target} needs the suite named and --out-dir DIR "
            "(the bundled suites stay as they are)"
        )
    out_dir = Path(args.out_dir)
    start = time.perf_counter()
    frozen = freeze(
        args.model or None, out_dir, progress=print, suite=args.suite, target=args.target
    )
    preset, fast = tpu_target(args.target).preset, fast_spaces_of(args.target)
    for name in frozen:
        program = load_program(out_dir / f"{name}.program.json.gz")
        inst = derive_instance(program, preset, capacity_fraction=None, name=f"{args.suite}/{name}")
        answer = xla_answer(inst, load_placement(out_dir / f"{name}.xla.json.gz"), fast)
        save_instance(inst, out_dir / f"{name}.json.gz")
        save_solution(answer.solution, out_dir / f"{name}.xla-answer.json.gz")
        print(
            f"{name}: instance on {preset}, XLA's legal answer {answer.solution.normalized_reward:.4f}"
            f" (kept {answer.kept_fraction:.1%} of its placement as it is)"
        )
    print(
        f"compiled {len(frozen)} programs for {args.target} in "
        f"{time.perf_counter() - start:.1f} s -> {out_dir}"
    )
    return EXIT_OK


def _target_preset(target: str) -> str:
    """The hardware preset of ``--target``: a TPU generation's own, else the default."""
    if target == "cpu":
        return DEFAULT_PRESET
    from mallocgame.frontends.tpu import tpu_target

    return tpu_target(target).preset


def _memory_spaces(text: str | None, target: str) -> frozenset[int]:
    """The memory spaces of ``--xla-fast-spaces``, or by default the target's fast memory."""
    if text is None:
        from mallocgame.frontends.tpu import fast_spaces_of

        return fast_spaces_of(target)
    try:
        spaces = frozenset(int(v) for v in text.split(","))
    except ValueError:
        spaces = frozenset({-1})
    if not spaces or min(spaces) < 0:
        raise UsageError(
            f"--xla-fast-spaces must be memory space numbers separated by commas, e.g. 1 or 0, got '{text}'"
        )
    return spaces


def _xla_solution(
    inst: Instance, placement: XlaPlacement, fast_spaces: frozenset[int]
) -> XlaAnswer:
    """XLA's own placement as the solution ``xla``: as XLA made it where that passes the
    checker, else projected onto the closest legal game trajectory
    (:func:`~mallocgame.solvers.xla_answer.xla_answer`), checked; nothing is written."""
    from mallocgame.check import check_solution
    from mallocgame.solvers.xla_answer import xla_answer

    answer = xla_answer(inst, placement, fast_spaces)
    report = check_solution(inst, answer.solution)
    if not report.ok:  # a projection is legal by construction: this is a bug, not input
        raise MallocGameError(f"XLA's projected placement fails the check: {report.summary()}")
    return answer


def _write_xla_solution(
    answer: XlaAnswer, placement: XlaPlacement, fast_spaces: frozenset[int], out: str
) -> None:
    """``answer`` (:func:`_xla_solution`, of ``placement``) written to ``out``, and what the
    raw reading broke said."""
    from mallocgame.solution import save_solution

    solution = answer.solution
    save_solution(solution, out)
    used = _spaces_used(placement)
    if not used & fast_spaces:  # nothing read as fast: say which spaces the module has
        hint = (
            "(a CPU dump?)"
            if used <= {0}
            else f"(it uses memory spaces {sorted(used)}: name the fast one with --xla-fast-spaces)"
        )
        print(
            f"note: no buffer or copy of the module is in memory space {sorted(fast_spaces)} "
            f"{hint}: XLA's placement reads as everything in slow memory"
        )
    if answer.projected:
        broken = ", ".join(f"{kind} x{n}" for kind, n in answer.raw_failures.items())
        print(
            f"XLA's placement as it is breaks the game's rules ({broken}; normalized reward "
            f"{answer.raw.normalized_reward:.6f}): projected onto the closest legal trajectory, "
            f"keeping {answer.kept_fraction:.1%} of its reward"
        )
    print(
        f"solution xla: {len(solution.allocations)} allocations, {len(placement.copies)} copies of XLA's, "
        f"normalized reward {solution.normalized_reward:.6f} -> {out}; check: valid"
    )
    unexpressed = solution.info.get("unexpressed", [])
    for line in unexpressed[:5]:
        print(f"  not expressible in the game as XLA made it: {line}")
    if len(unexpressed) > 5:
        print(
            f"  ... and {len(unexpressed) - 5} more (the solution's info.unexpressed lists them all)"
        )


def _cmd_bench_speedups(args: argparse.Namespace) -> int:
    from mallocgame.bench import speedups
    from mallocgame.bench.sweep import check_jobs, check_records, job_records, run_sweep, sweep_jobs
    from mallocgame.workloads.suite import suite_names

    solvers = list(dict.fromkeys([args.baseline, *args.solvers]))
    programs = args.programs or suite_names(SUITE)
    jobs = sweep_jobs(
        programs,
        solvers,
        args.seeds,
        seconds=args.budget,
        work=args.work,
        options=_solver_options(args.option, solvers),
    )
    if not args.out.strip():
        raise UsageError("--out must name the records' folder")
    if args.ray is not None and not args.ray.strip():
        raise UsageError("--ray needs local, auto or HOST:PORT")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {args.out}: a file, not the records' folder")
    if args.csv is not None:  # refused before the sweep, not after it
        if not args.csv.strip():
            raise UsageError("--csv must name a file")
        _output_file(Path(args.csv), *programs, flag="--csv")  # not a program file it reads
        csv_path = Path(args.csv).resolve()
        if csv_path == out.resolve() or (
            csv_path.parent == out.resolve() and args.csv.endswith(".json")
        ):
            raise UsageError(
                f"--csv {args.csv} is the records' folder (--out) or a record in it: give another"
            )
    if (
        args.existing
    ):  # a sweep under way elsewhere (pinned_sweep.py): its complete programs, nothing run
        if not out.is_dir():
            raise UsageError(f"--existing: no records directory {out}")
        check_jobs(jobs)
        check_records(jobs, out)
        records = speedups.complete_programs(job_records(out, jobs), jobs)
        done = len({r["program"] for r in records})
        if not done:
            raise UsageError(
                f"--existing: no program in {out} has a record of every solver and seed asked for "
                f"(check --solvers, --seeds, --budget/--work and --option)"
            )
        print(
            f"{done} of {len(set(programs))} programs have a record of every solver and seed in {out}",
            file=sys.stderr,
        )
    else:
        run_sweep(
            jobs,
            out,
            workers=args.workers,
            ray_address=args.ray,
            progress=lambda msg: print(msg, file=sys.stderr),
        )
        records = job_records(out, jobs)
    invalid = [r for r in records if not r["valid"]]
    for r in invalid:
        print(
            f"INVALID: {r['program']} {r['solver']} s{r['seed']}: {r['failures']}", file=sys.stderr
        )
    derived = speedups.candidate_records(records, args.baseline)  # not the baseline's answer
    table = speedups.speedup_table(records + derived, args.baseline)
    print(speedups.format_table(table, args.baseline))
    if args.per_program:
        others = [
            s
            for s in dict.fromkeys([*solvers, *(r["solver"] for r in derived)])
            if s != args.baseline
        ]
        print()
        print(speedups.format_program_table(records + derived, [args.baseline, *others]))
        for solver in others:
            print()
            print(speedups.format_extremes(records + derived, solver, args.baseline))
    if args.csv:
        speedups.write_program_csv(
            args.csv, speedups.program_results(records + derived, args.baseline), args.baseline
        )
        print(f"per program and solver -> {args.csv}", file=sys.stderr)
    return EXIT_CHECK_FAILED if invalid else EXIT_OK


def _cmd_bench_versus(args: argparse.Namespace) -> int:
    from mallocgame.bench.sweep import job_options
    from mallocgame.bench.versus import format_versus, head_to_head, read_entries, summarize

    a, b = args.solvers
    if a == b:
        raise UsageError(f"compare two different solvers, not {a!r} with itself")

    settings = {s: dict(job_options(s, o)) for s, o in _solver_options(args.option, [a, b]).items()}
    budget = {"seconds": args.budget, "work": args.work}
    entries = read_entries(
        [Path(f) for f in args.out],
        (a, b),
        budget=budget,
        options=settings,
        programs=args.programs,
        seeds=args.seeds,
    )
    rows = head_to_head(entries, a, b)  # a cell recorded twice: refused first
    missing = [s for s in (a, b) if not any(e.solver == s for e in entries)]
    if missing:  # a misspelt name, or a budget or setting not swept: not an empty comparison
        wanted = " and ".join(
            x
            for x in (args.budget and f"{args.budget:g} s", args.work and f"work {args.work}")
            if x
        )
        raise UsageError(
            f"no records of {' or '.join(missing)} with budget {wanted or 'none'} "
            f"and these settings in {' '.join(args.out)}"
        )
    for entry in entries:
        if entry.reward is None:
            print(
                f"INVALID: {entry.program} {entry.solver} s{entry.seed}: {entry.failures}",
                file=sys.stderr,
            )
    print(format_versus(rows, a, b))
    print()
    print(summarize(rows, a, b))
    return EXIT_CHECK_FAILED if any(e.reward is None for e in entries) else EXIT_OK


def _cmd_bench_correlation(args: argparse.Namespace) -> int:
    from mallocgame.bench.correlation import format_correlation, reward_latency_correlation
    from mallocgame.workloads.registry import check_workload
    from mallocgame.workloads.suite import suite_names

    if args.programs:  # a program named twice is one row, run once
        args.programs = list(dict.fromkeys(args.programs))
    for program in args.programs or ():  # every name checked before the first program's work
        check_workload(program)
    if args.training is not None:
        return _bench_training_correlation(args)
    if args.out is not None or args.option or args.samples is not None or args.seed is not None:
        raise UsageError("--out, --option, --samples and --seed go with --training")
    rows = []
    for program in args.programs or suite_names(SUITE):
        rows.append(reward_latency_correlation(program, random_games=args.games or 40))
        print(f"{program}: Pearson {rows[-1].pearson:.3f}", file=sys.stderr)
    print(format_correlation(rows))
    return EXIT_OK


def _bench_training_correlation(args: argparse.Namespace) -> int:
    """Table 5 and Figure 6 as the paper made them: samples of one muzero run per program."""
    from mallocgame.bench import correlation
    from mallocgame.solvers import get_solver

    if not args.programs:
        raise UsageError("--training needs --programs")
    if args.games is not None:
        raise UsageError("--games is the random games' count: drop it with --training")
    if not args.out:
        raise UsageError("--training needs --out (its CSV and PNG)")
    out = Path(args.out)  # its CSV and PNG checked before the training, as any output
    csv_path = _output_file(output_beside(out, ".csv"))
    png_path = _output_file(output_beside(out, ".png"))
    options = _options(args.option)
    get_solver("muzero").check_options(options)
    rows = []
    for program in args.programs:
        row = correlation.training_correlation(
            program,
            args.training,
            seed=args.seed or 0,
            samples=args.samples or 10,
            options=options,
        )
        print(f"{program}: {row.games} games, Pearson {row.pearson:.3f}", file=sys.stderr)
        rows.append(row)
    correlation.write_training_csv(rows, csv_path)
    correlation.plot_training_correlation(rows, png_path)
    print(correlation.format_training_correlation(rows))
    return EXIT_OK


def _cmd_bench_suite(args: argparse.Namespace) -> int:
    from mallocgame.bench.suite_table import format_suite_table, suite_row
    from mallocgame.workloads.registry import check_workload, workload_names
    from mallocgame.workloads.suite import suite_names

    if args.suite is not None and args.suite not in SUITES:
        raise UsageError(f"unknown suite '{args.suite}' (have: {', '.join(SUITES)})")
    if args.programs and args.suite is not None:
        raise UsageError("give --programs or --suite, not both")
    names = list(  # a program named twice is one row, run once
        dict.fromkeys(
            args.programs or (suite_names(args.suite) if args.suite else workload_names())
        )
    )
    for name in names:  # every name checked before the first program's work
        check_workload(name)
    rows = [
        suite_row(
            name,
            random_games=args.random_games,
            exact_seconds=args.exact_seconds,
            progress=lambda msg: print(msg, file=sys.stderr),
        )
        for name in names
    ]
    print(format_suite_table(rows))
    return EXIT_OK


def _cmd_bench_xla(args: argparse.Namespace) -> int:
    from mallocgame.bench.xla_table import format_xla_table, write_xla_csv, xla_row
    from mallocgame.workloads.registry import check_workload, load_workload
    from mallocgame.workloads.suite import suite_names, suite_placement

    names = list(dict.fromkeys(args.programs or suite_names("tpu-v2")))
    for name in names:  # every name and the CSV checked before the first program's work
        check_workload(name)
        placed = name if name in suite_names() else load_workload(name).name  # a file's own
        if suite_placement(placed) is None:
            raise UsageError(
                f"{name} has no XLA placement: bench xla takes programs compiled for a TPU "
                "(those of the tpu-v1 and tpu-v2 suites)"
            )
    if args.csv is not None:
        if not args.csv.strip():
            raise UsageError("--csv must name a file")
        _output_file(Path(args.csv), *names, flag="--csv")  # not a program file it reads
    rows = [
        xla_row(
            name,
            bound_seconds=args.bound_seconds,
            progress=lambda msg: print(msg, file=sys.stderr),
        )
        for name in names
    ]
    print(format_xla_table(rows))
    if args.csv:
        write_xla_csv(rows, args.csv)
        print(f"per program -> {args.csv}", file=sys.stderr)
    return EXIT_OK


def _cmd_bench_rewards(args: argparse.Namespace) -> int:
    from mallocgame.bench.rewards import (
        check_programs,
        final_table,
        run_reward_curves,
        solver_spec,
    )
    from mallocgame.curves import normalized_upper_bound, plot_curves
    from mallocgame.workloads.registry import load_workload

    for spec in args.solvers:
        solver_spec(spec)  # every spec and program checked before anything runs
    check_programs(args.programs)
    for name in ("programs", "solvers", "seeds"):  # one named twice is one curve, run once
        setattr(args, name, list(dict.fromkeys(getattr(args, name))))
    out = Path(args.out)
    csv_path = _output_file(output_beside(out, ".csv"))
    _output_file(output_beside(out, ".png"))  # the picture's place too, before the curves
    # the CSV written after every cell, a stopped run going on from there; a stale cell or
    # another budget refused before any runs
    points = run_reward_curves(
        args.programs,
        args.solvers,
        args.seeds,
        args.budget,
        csv_path,
        progress=lambda msg: print(msg, file=sys.stderr),
    )
    points = [
        p
        for p in points
        if p.program in args.programs and p.solver in args.solvers and p.seed in args.seeds
    ]
    bounds = {program: normalized_upper_bound(load_workload(program)) for program in args.programs}
    for program, bound in bounds.items():  # None: the normalizer is not positive, no bound
        text = "— (normalizer not positive)" if bound is None else f"{bound:.4f}"
        print(f"{program}: upper bound {text}", file=sys.stderr)
    drawn = {program: bound for program, bound in bounds.items() if bound is not None}
    plot_curves(points, output_beside(out, ".png"), drawn)
    print(final_table(points))
    return EXIT_OK


def _cmd_bench_tasks(args: argparse.Namespace) -> int:
    from mallocgame.bench import tasks
    from mallocgame.sharing import MARL_SOCKET

    limited = 1 in args.tasks and "fast-only" in args.placements  # the limit's unit is there
    if args.limit is not None and not limited:
        raise UsageError(
            "--limit is a multiple of one task alone in fast memory: give 1 among --tasks "
            "and fast-only among --placements, or drop --limit"
        )
    program = _named_program(args.program)
    out = Path(args.out)
    # every place the study writes, found wanting before any cell runs
    _output_file(output_beside(out, ".csv"))
    png = _output_file(output_beside(out, ".png"))
    check_writable(tasks.solutions_folder(out) / "answer.solution.json")
    rows = tasks.run_tasks_study(
        program,
        MARL_SOCKET,
        args.tasks,
        args.placements,
        args.seeds,
        args.budget,
        out,
        progress=lambda msg: print(msg, file=sys.stderr),
    )
    rows = tasks.rows_asked(rows, args.tasks, args.placements)  # every seed the CSV holds
    alone = [r.latency_s for r in rows if r.tasks == 1 and r.placement == "fast-only"]
    limit = 1.25 if args.limit is None else args.limit
    limit_s = limit * alone[0] if limited and alone else None
    tasks.plot_tasks(rows, png, limit_s)
    print(tasks.latency_table(rows))
    print()
    print(tasks.fit_table(MARL_SOCKET, program))
    if limit_s is not None:
        print(
            f"\nlatency limit: {limit:g} x one task alone with every buffer in fast memory"
            f" = {limit_s:.4g} s\n"
        )
        print(tasks.limit_table(rows, limit_s, tasks.fit_counts(MARL_SOCKET, program)))
    return EXIT_OK


# ------------------------------------------------------------------------------ parser


def _positive_number(text: str, unit: str = "") -> float:
    """A finite number above 0 (``unit``: what it counts, for the messages), or an
    :class:`argparse.ArgumentTypeError`."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number{unit}: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive, finite number{unit}, not {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    """An argparse type: a wall-clock budget, a finite number of seconds above 0 and at
    most :data:`MAX_SECONDS` (7 days)."""
    seconds = _positive_number(text, " of seconds")
    if seconds > MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"at most {MAX_SECONDS:.0f} seconds (7 days), not {text!r}"
        )
    return seconds


def _file_arg(text: str) -> str:
    """An ``--out`` (or ``--csv``) that names a file or a stem: one that ends in a path
    separator names a folder, which would be written as a file of that name
    (:func:`~mallocgame.fileio.refuse_folder_name`)."""
    try:
        refuse_folder_name(text)
    except OutputFileError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _seed(text: str) -> int:
    """An argparse type: a seed, a whole number in 0 .. :data:`MAX_SEED` (2**63 - 1)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to 2**63 - 1, not {text}")
    return value


def _positive_multiple(text: str) -> float:
    """An argparse type: a finite number above 0 (a ratio)."""
    return _positive_number(text)


def _seconds_or_zero(text: str) -> float:
    """An argparse type: 0 (written any way: ``-0``, ``0e0``), or a finite number of
    seconds above 0."""
    try:
        if float(text) == 0.0:
            return 0.0
    except ValueError:
        pass
    try:
        return _positive_seconds(text)
    except argparse.ArgumentTypeError as exc:
        if str(exc).startswith("must be a positive"):
            raise argparse.ArgumentTypeError(
                f"must be 0 or a positive, finite number of seconds, not {text!r}"
            ) from None
        raise


_whole_number = at_least
"""An argparse type: a whole number of at least its bound (:func:`~mallocgame.bench.inputs.at_least`)."""

_work = at_least(1, MAX_WORK)
"""An argparse type: a work budget, a whole number in ``1 .. MAX_WORK`` as SolveRequest holds it."""


def _add_run_arguments(p: argparse.ArgumentParser, *, work: str, out: str, option: str) -> None:
    """The arguments ``solve`` and ``train`` share: the workload, seed, budgets, output."""
    p.add_argument(
        "workload", help="a bundled workload name, an instance file or an XLA dump directory"
    )
    p.add_argument("--seed", type=_seed, default=0)
    p.add_argument(
        "--budget",
        type=_positive_seconds,
        default=None,
        help="wall-clock budget, seconds (at most 7 days)",
    )
    p.add_argument("--work", type=_work, default=None, help=work)
    p.add_argument("--out", type=_file_arg, default=None, help=out)
    p.add_argument("--progress", action="store_true", help="print every new best solution")
    _add_option_argument(p, "KEY=VALUE", option)


def _add_instance_and_solution(p: argparse.ArgumentParser, solution: str) -> None:
    p.add_argument(
        "instance", help="a bundled workload name, an instance file or an XLA dump directory"
    )
    p.add_argument("solution", help=solution)


def _parser() -> _Parser:
    from mallocgame.runtime.cli import add_apply_parser, add_bench_real_parser

    parser = _Parser(prog="mallocgame", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_solve_parsers(sub)
    _add_optimize_parser(sub)
    p = sub.add_parser("check", help="validate a solution (exit 1 if invalid)")
    _add_instance_and_solution(p, "a solution file, or a sweep record (its solution)")
    p.set_defaults(func=_cmd_check)

    _add_extract_parser(sub)
    p = sub.add_parser(
        "simulate", help="end-to-end latency of a (checked) solution and its speedup"
    )
    _add_instance_and_solution(p, "a solution file, or a sweep record (its solution)")
    p.set_defaults(func=_cmd_simulate)

    add_apply_parser(sub)  # mallocgame apply: an answer run for real (mallocgame.runtime)

    p = sub.add_parser(
        "project", help="a mapping's decisions replayed as a game trajectory (what it keeps)"
    )
    _add_instance_and_solution(p, "a valid solution, e.g. the heuristic's")
    p.add_argument(
        "--out",
        type=_file_arg,
        default=None,
        help="the trajectory (default out/NAME.SOLVER-projected.sSEED.json)",
    )
    p.add_argument(
        "--repairs",
        type=_whole_number(0),
        default=None,
        help="at most this many replays repairing the decisions the game cannot follow "
        "(0: the plain replay; default 200, the library's DEFAULT_REPAIRS)",
    )
    p.set_defaults(func=_cmd_project)

    p = sub.add_parser("bench", help="experiments: resumable sweeps and their tables")
    bench = p.add_subparsers(dest="experiment", required=True, parser_class=_Parser)
    _add_speedups_parser(bench)
    _add_versus_parser(bench)
    _add_correlation_parser(bench)
    _add_rewards_parser(bench)
    _add_tasks_parser(bench)
    _add_xla_parser(bench)
    _add_suite_parser(bench)
    add_bench_real_parser(bench)  # mallocgame bench real: measured step times on a GPU

    p = sub.add_parser(
        "show", help="draw the memory layout of a solution (exit 1 if it is invalid)"
    )
    _add_instance_and_solution(p, "a solution file, or a sweep record (its solution)")
    p.add_argument(
        "--against",
        metavar="SOLUTION",
        help="a second solution: both layouts, one above the other, and which tensors each keeps "
        "in fast memory, evicts and fetches again",
    )
    p.add_argument("--out", type=_file_arg, required=True, help="picture file (.png, .svg or .pdf)")
    p.set_defaults(func=_cmd_show)
    return parser


def _add_solve_parsers(sub: _SubParsers) -> None:
    """list, solvers, solve, train."""
    p = sub.add_parser("list", help="the bundled workloads")
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("solvers", help="the solvers: work unit and every option with its default")
    p.add_argument("names", nargs="*", help="only these solvers")
    p.set_defaults(func=_cmd_solvers)

    p = sub.add_parser("solve", help="solve a workload and write a solution file")
    p.add_argument("--solver", required=True, help="a solver name (see 'mallocgame solvers')")
    _add_run_arguments(
        p,
        work="work budget in the solver's unit (games, ...)",
        out="solution file (default out/NAME.SOLVER.sSEED.json)",
        option="a solver setting (repeat), e.g. sigma=0.2 for es; see 'mallocgame solvers'",
    )
    p.set_defaults(func=_cmd_solve)

    p = sub.add_parser(
        "train", help="train MMap-MuZero (or EGRL) on a workload, with checkpoints (resumes)"
    )
    p.add_argument("--dir", required=True, help="checkpoints, best.solution.json; resumes from it")
    p.add_argument("--solver", default="muzero", help="muzero (default), muzero-nosearch or egrl")
    _add_run_arguments(
        p,
        work="work in total over resumed runs: self-play games (muzero), proposals (egrl)",
        out="the final solution (default DIR/final.solution.json)",
        option="a setting of the solver (repeat), e.g. num_simulations=32",
    )
    _add_ray_arguments(p)
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser(
        "train-agent",
        help="train one MMap-MuZero agent on many programs (a start for --option init=DIR)",
    )
    p.add_argument("programs", nargs="*", help="bundled workloads, instance files or dumps")
    p.add_argument("--suite", action="append", default=[], help="a suite's programs (repeat)")
    p.add_argument(
        "--split",
        choices=("all", "train", "held-out"),
        default="all",
        help="of --suite: the three quarters a shared agent trains on, or the quarter held "
        "out from it (chosen by name, frozen)",
    )
    p.add_argument(
        "--max-buffers", type=_whole_number(1), default=None, help="skip larger programs"
    )
    p.add_argument("--dir", required=True, help="the agent's checkpoint; resumes from it")
    p.add_argument("--seed", type=_seed, default=0)
    p.add_argument("--budget", type=_positive_seconds, default=None, help="wall-clock seconds")
    p.add_argument("--work", type=_work, default=None, help="games, all programs")
    _add_option_argument(
        p, "KEY=VALUE", "an agent setting (repeat); see 'mallocgame solvers muzero'"
    )
    _add_ray_arguments(p)
    p.set_defaults(func=_cmd_train_agent)


def _add_optimize_parser(sub: _SubParsers) -> None:
    """optimize: the main job."""
    p = sub.add_parser(
        "optimize", help="the main job: muzero-prod, and how it compares with the heuristic"
    )
    p.add_argument(
        "workload",
        nargs="?",
        help="a bundled workload name, an instance file or an XLA dump directory (with "
        "--target: a dump of a TPU compile)",
    )
    p.add_argument("--jax", help="MODULE:FUNCTION, a JAX function to compile for --target")
    p.add_argument(
        "--arg",
        action="append",
        default=[],
        help="an example argument of --jax, e.g. f32[8,64] (repeat)",
    )
    p.add_argument(
        "--donate",
        type=_whole_number(0),
        action="append",
        default=[],
        help="a donated argument index of --jax (repeat)",
    )
    p.add_argument(
        "--target",
        default="cpu",
        choices=["cpu", *_tpu_target_names()],
        help="a TPU generation: compile --jax for it (libtpu, no TPU needed) or read a dump "
        "of it, on its own preset, with XLA's own answer as a candidate and a row",
    )
    p.add_argument(
        "--steer",
        nargs="?",
        const="diff",
        default=None,
        choices=_steer_modes(),
        help="with --target: write the libtpu flags that steer XLA's memory-space assignment "
        "towards the answer (OUT.steer.json; mode diff by default) and, with --jax, compile "
        "with them and report what XLA then placed",
    )
    p.add_argument(
        "--budget",
        type=_positive_seconds,
        default=None,
        help=f"wall-clock budget, seconds (default {DEFAULT_OPTIMIZE_SECONDS:g} unless --work is given)",
    )
    p.add_argument(
        "--work",
        type=_work,
        default=None,
        help="the agent's self-play games (in total, over resumed runs)",
    )
    p.add_argument("--seed", type=_seed, default=0)
    p.add_argument(
        "--out",
        type=_file_arg,
        default=None,
        help="the answer (default out/NAME.muzero-prod.sSEED.json); the candidates, the reward curve "
        "and the layouts go beside it, the agent's checkpoint to OUT.checkpoint/ (resumes)",
    )
    _add_option_argument(
        p,
        "KEY=VALUE",
        "an agent setting (repeat), e.g. num_simulations=32; see 'mallocgame solvers muzero-prod'",
    )
    _add_ray_arguments(p)
    p.set_defaults(func=_cmd_optimize)


def _add_option_argument(p: argparse.ArgumentParser, metavar: str, help: str) -> None:
    """``--option METAVAR`` (repeatable): a solver setting."""
    p.add_argument("--option", action="append", default=[], metavar=metavar, help=help)


def _add_torch_extract_arguments(p: argparse.ArgumentParser) -> None:
    """extract's options of the PyTorch frontend: the module, a training step, the granularity."""
    from mallocgame.frontends.torch import OPTIMIZERS
    from mallocgame.frontends.torch_adapter import LOSSES

    p.add_argument(
        "--torch",
        metavar="MODULE:FACTORY",
        help="a PyTorch module to capture with torch.export: FACTORY() returns an nn.Module (inputs from "
        "--arg) or a (module, example_inputs) pair",
    )
    p.add_argument(
        "--train",
        action="store_true",
        help="with --torch: a training step (forward, loss = the module's first output, backward); "
        "otherwise inference (the module in eval mode)",
    )
    p.add_argument(
        "--loss",
        choices=LOSSES,
        help="with --train: the loss: the module's first output (output, the default), the "
        "model's own given labels= (model), or sum, mean or cross-entropy of its first output "
        "(a ModelOutput's logits)",
    )
    p.add_argument(
        "--labels",
        metavar="DTYPE[DIMS]",
        help="with --loss model or cross-entropy: the labels' shape, e.g. s64[4,512]",
    )
    p.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        help="with --train: the update after the backward pass (default none: the step ends at "
        "the gradients)",
    )
    p.add_argument(
        "--granularity",
        choices=("tensor", "node"),
        default="tensor",
        help="with --torch: one decision per buffer (tensor), or MARL's per node: a layer's weights "
        "one decision, each operation's activations one (node)",
    )


def _add_extract_parser(sub: _SubParsers) -> None:
    """extract: a real program in, an instance and/or a program file out."""
    p = sub.add_parser(
        "extract", help="turn a real program into an instance (and/or a program file)"
    )
    p.add_argument(
        "--dump", help="an XLA dump directory (XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text)"
    )
    p.add_argument("--module", help="which module of the dump (name, prefix or id)")
    p.add_argument("--jax", help="MODULE:FUNCTION, a JAX function to compile with XLA")
    _add_torch_extract_arguments(p)
    p.add_argument(
        "--arg",
        action="append",
        default=[],
        help="an example argument of --jax or --torch, e.g. f32[8,64] (repeat)",
    )
    p.add_argument(
        "--donate",
        type=_whole_number(0),
        action="append",
        default=[],
        help="a donated argument index of --jax (repeat)",
    )
    p.add_argument("--program", help="a program file or a bundled program name (xla-v1/NAME)")
    p.add_argument(
        "--model",
        nargs="*",
        action="extend",  # a repeated --model adds its names, refused outside --suite
        help="a model program defined in the package: an xla-v1 name, or SUITE/NAME",
    )
    p.add_argument(
        "--suite",
        nargs="?",
        const="",
        metavar="SUITE",
        help=f"re-extract a bundled suite ({', '.join(SUITES)}; every one if none is named), "
        "or only its --model names, in place",
    )
    p.add_argument(
        "--preset",
        default=None,
        help=f"hardware preset ({', '.join(preset_names())}; default: the --target's, "
        f"else {DEFAULT_PRESET})",
    )
    p.add_argument(
        "--capacity-fraction",
        type=float,
        default=None,
        help="fast memory = this fraction of the peak live bytes (capped by the preset; "
        "default 0.25, or with a TPU --target the preset's whole fast memory, as XLA had it)",
    )
    p.add_argument(
        "--physical",
        action="store_true",
        help="fast memory = the preset's physical fast memory (no fraction; programs at real sizes)",
    )
    p.add_argument(
        "--out-dir",
        help="with --suite and a TPU --target: where the compiled programs, XLA's placements, "
        "the instances and XLA's answers go",
    )
    p.add_argument("--name", help="the program/instance name")
    p.add_argument("--out", type=_file_arg, help="the instance file to write (.json or .json.gz)")
    p.add_argument("--program-out", type=_file_arg, help="also write the extracted program file")
    p.add_argument(
        "--xla-solution",
        metavar="FILE",
        help="with --dump: also write XLA's own memory-space assignment (S(1) layouts, copy-start/done) "
        "as the solution 'xla' of --out, and check it",
    )
    p.add_argument(
        "--xla-fast-spaces",
        default=None,
        metavar="N[,N...]",
        help="XLA memory spaces that are the fast memory (default: the --target's alternate memory, "
        "3 on tpu-v4, else 1; 0 for host offloading, where 5 is the host)",
    )
    p.add_argument(
        "--target",
        default="cpu",
        choices=["cpu", *_tpu_target_names()],
        help="with --jax or --model: compile for the CPU, or for a TPU generation with libtpu "
        "(no TPU needed; XLA's own memory-space assignment inside: see --xla-solution)",
    )
    p.set_defaults(func=_cmd_extract)


def _steer_modes() -> list[str]:
    from mallocgame.runtime.tpu_steer import MODES

    return list(MODES)


def _tpu_target_names() -> list[str]:
    from mallocgame.frontends.tpu import TPU_TARGETS

    return list(TPU_TARGETS)


def _add_speedups_parser(bench: _SubParsers) -> None:
    """bench speedups (paper Table 3)."""
    q = bench.add_parser(
        "speedups", help="simulated speedup of each solver over a baseline (paper Table 3)"
    )
    q.add_argument("--programs", nargs="+", help="workloads (default: the xla-v1 suite)")
    q.add_argument("--solvers", nargs="+", default=["random"], help="solvers to compare")
    q.add_argument(
        "--baseline", default="heuristic", help="the solver speedups are measured against"
    )
    q.add_argument("--seeds", type=_seed, nargs="+", default=[0])
    q.add_argument(
        "--budget", type=_positive_seconds, default=None, help="wall-clock seconds per job"
    )
    q.add_argument("--work", type=_work, default=None, help="work budget per job")
    q.add_argument(
        "--out",
        default="results/speedups",
        help="one result file per job; existing ones are skipped",
    )
    q.add_argument(
        "--workers",
        type=_whole_number(1),
        default=None,
        help="local processes (default: all cores)",
    )
    q.add_argument(
        "--ray",
        default=None,
        metavar="ADDRESS",
        help="run the jobs on Ray: local (a cluster of --workers CPUs started here), auto "
        "(the running cluster) or HOST:PORT (needs mallocgame[ray])",
    )
    q.add_argument(
        "--per-program",
        action="store_true",
        help="also each program's normalized rewards, and each solver's six largest and smallest speedups",
    )
    q.add_argument(
        "--csv",
        type=_file_arg,
        default=None,
        metavar="FILE",
        help="also write one CSV row per program and solver (means over seeds; a hybrid's candidates too)",
    )
    q.add_argument(
        "--existing",
        action="store_true",
        help="run no job: the table of the records already in --out, over the programs with a record of "
        "every solver at every seed (a sweep still under way, e.g. benchmarks/pinned_sweep.py)",
    )
    _add_option_argument(
        q, "SOLVER:KEY=VALUE", "a setting for one solver's jobs (repeat), e.g. es:workers=2"
    )
    q.set_defaults(func=_cmd_bench_speedups)


def _add_versus_parser(bench: _SubParsers) -> None:
    """bench versus: two solvers head to head."""
    q = bench.add_parser(
        "versus", help="two solvers head to head per program and seed, from sweep records"
    )
    q.add_argument(
        "solvers", nargs=2, metavar="SOLVER", help="A and B: the table counts A's wins over B"
    )
    q.add_argument(
        "--out", nargs="+", required=True, help="record folders of sweeps (one per setting)"
    )
    q.add_argument(
        "--budget",
        type=_positive_seconds,
        default=None,
        help="the records' wall-clock seconds per job",
    )
    q.add_argument("--work", type=_work, default=None, help="the records' work budget per job")
    q.add_argument(
        "--programs", nargs="+", help="only these programs (default: every one with records)"
    )
    q.add_argument("--seeds", type=_seed, nargs="+", help="only these seeds (default: every one)")
    _add_option_argument(
        q, "SOLVER:KEY=VALUE", "only records made with this setting (repeat), as given to the sweep"
    )
    q.set_defaults(func=_cmd_bench_versus)


def _add_correlation_parser(bench: _SubParsers) -> None:
    """bench correlation (paper Table 5)."""
    q = bench.add_parser(
        "correlation", help="Pearson correlation of reward and simulated latency (paper Table 5)"
    )
    q.add_argument("--programs", nargs="+", help="workloads (default: the xla-v1 suite)")
    q.add_argument(
        "--games",
        type=_whole_number(2, MAX_WORK),
        default=None,
        help="random games per program (default 40; not with --training)",
    )
    q.add_argument(
        "--training",
        type=_positive_seconds,
        metavar="SECONDS",
        help="instead: self-play games sampled from one muzero training run of this many seconds "
        "per program, as the paper did (needs --programs and --out)",
    )
    q.add_argument(
        "--samples",
        type=_whole_number(2),
        default=None,
        help="--training: games sampled per run (default 10)",
    )
    q.add_argument(
        "--seed", type=_seed, default=None, help="--training: the run's seed (default 0)"
    )
    _add_option_argument(q, "KEY=VALUE", "--training: a muzero setting (repeat)")
    q.add_argument(
        "--out", type=_file_arg, help="--training: path of the CSV and PNG (suffixes replaced)"
    )
    q.set_defaults(func=_cmd_bench_correlation)


def _add_rewards_parser(bench: _SubParsers) -> None:
    """bench rewards (paper Table 2, Figure 5)."""
    q = bench.add_parser(
        "rewards", help="best reward against wall-clock time per solver (paper Table 2, Figure 5)"
    )
    q.add_argument("--programs", nargs="+", required=True, help="workloads")
    q.add_argument(
        "--solvers",
        nargs="+",
        default=["random", "es", "mcts"],
        help="solver names, or NAME[KEY=VALUE;...] for one under other settings (its own curve)",
    )
    q.add_argument("--seeds", type=_seed, nargs="+", default=[0])
    q.add_argument(
        "--budget", type=_positive_seconds, default=60.0, help="wall-clock seconds per run"
    )
    q.add_argument(
        "--out", type=_file_arg, default="results/rewards", help="writes OUT.csv and OUT.png"
    )
    q.set_defaults(func=_cmd_bench_rewards)


def _add_xla_parser(bench: _SubParsers) -> None:
    """bench xla: our heuristic against XLA's own memory-space assignment."""
    q = bench.add_parser(
        "xla",
        help="XLA's own placement (as it is, and as a legal answer) against the heuristic's, "
        "their agreement and the bound, per program compiled for a TPU",
    )
    q.add_argument("--programs", nargs="+", help="workloads (default: the tpu-v2 suite)")
    q.add_argument(
        "--bound-seconds",
        type=_positive_seconds,
        default=60.0,
        help="seconds the bound's LP is given per program",
    )
    q.add_argument("--csv", type=_file_arg, help="also write the rows to this CSV file")
    q.set_defaults(func=_cmd_bench_xla)


def _add_tasks_parser(bench: _SubParsers) -> None:
    """bench tasks (MARL Figures 10-11)."""
    q = bench.add_parser(
        "tasks",
        help="one task's latency against the number of tasks sharing MARL's DRAM + "
        "persistent-memory machine (MARL Figures 10-11)",
    )
    q.add_argument(
        "--program",
        default="torch-v1/wrn101_2_infer_b128",
        help="a suite program or a program file",
    )
    q.add_argument(
        "--tasks",
        type=_whole_number(1),
        nargs="+",
        default=[1, 2, 4, 8, 16, 32],
        help="numbers of tasks running at once",
    )
    q.add_argument(
        "--placements",
        nargs="+",
        default=["all-slow", "fast-only", "memory-mode", "first-touch", "agnostic", "heuristic"],
        help="all-slow, fast-only, memory-mode, and solver names or NAME[KEY=VALUE;...]",
    )
    q.add_argument("--seeds", type=_seed, nargs="+", default=[0])
    q.add_argument(
        "--budget",
        type=_positive_seconds,
        default=30.0,
        help="wall-clock seconds per solver and number of tasks",
    )
    q.add_argument(
        "--limit",
        type=_positive_multiple,
        default=None,
        help="the latency limit, as a multiple of one task alone with every buffer in fast "
        "memory (default 1.25; needs 1 among --tasks and fast-only among --placements)",
    )
    q.add_argument(
        "--out",
        type=_file_arg,
        default="results/tasks",
        help="writes OUT.csv, OUT.png and OUT.solutions/",
    )
    q.set_defaults(func=_cmd_bench_tasks)


def _add_suite_parser(bench: _SubParsers) -> None:
    """bench suite: the hardness table."""
    q = bench.add_parser(
        "suite", help="the hardness table: sizes and random/greedy/heuristic/exact/bound rewards"
    )
    q.add_argument(
        "--programs", nargs="+", help="workloads (default: every bundled one, or --suite's)"
    )
    q.add_argument("--suite", help=f"the programs of one bundled suite ({', '.join(SUITES)})")
    q.add_argument(
        "--random-games",
        type=_whole_number(1),
        default=20,
        help="random: the best of this many games",
    )
    q.add_argument(
        "--exact-seconds",
        type=_seconds_or_zero,
        default=60.0,
        help="exact's wall-clock budget (0: not run)",
    )
    q.set_defaults(func=_cmd_bench_suite)


def _jax_on_the_cpu() -> None:
    """With libtpu installed (the ``tpu`` extra), JAX's first use would look for a TPU on a
    machine that has none (seconds, and lines of warnings); the commands' JAX (the agents'
    networks, compiling programs, libtpu's ahead-of-time TPU targets) means the CPU. A
    ``JAX_PLATFORMS`` the user set is kept."""
    import importlib.util

    if "JAX_PLATFORMS" not in os.environ and importlib.util.find_spec("libtpu") is not None:
        os.environ["JAX_PLATFORMS"] = "cpu"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    _jax_on_the_cpu()
    try:
        args = _parser().parse_args(argv)
        return args.func(args)
    except MallocGameError as exc:
        print(f"mallocgame: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("mallocgame: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``mallocgame ... | head``): stop quietly with the shell's
        # SIGPIPE status, and point stdout at nothing so the exit-time flush is silent too.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):  # stdout without a file descriptor (captured)
            pass
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        print(f"mallocgame: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
