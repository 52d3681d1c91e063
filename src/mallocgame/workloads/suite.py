"""The bundled suites of real programs: frozen XLA programs shipped in the package.

A suite is a set of model programs compiled by XLA (through JAX, on the CPU, from
abstract shapes), extracted by :mod:`mallocgame.frontends.xla` and frozen as
``data/SUITE/NAME.program.json.gz``. The version in a suite's name keeps results
comparable across JAX versions: a new extraction that changes a program belongs in a
new suite version. :func:`freeze` regenerates the files (a benchmark-time job,
``mallocgame extract --suite``; then ``python -m mallocgame.workloads.listing`` rewrites
the index of sizes ``mallocgame list`` reads); the tests only read them.

Suites (:data:`SUITES`):

``xla-v1`` (frozen)
    28 small models at toy sizes (:mod:`mallocgame.workloads.models`), 70 to 16,911
    buffers, on :data:`~mallocgame.hardware.DEFAULT_PRESET` with the capacity rule's
    fraction 0.25 of the peak live bytes (so that the fast memory binds at all).
``xla-v2``
    Programs at the sizes their published configurations run at
    (:mod:`mallocgame.workloads.models_v2`), each on the preset it is sized for, with
    that preset's physical fast memory (no fraction): ``tpu_v4i`` (128 MiB CMEM
    before 8 GiB HBM; each program's peak live bytes at most 8 GiB) and, for the
    offloading programs whose working set exceeds a GPU, ``gpu_hbm_host`` (40 GiB HBM
    before host memory). The preset is recorded in each frozen program's ``source``.
``torch-v1``
    The MARL paper's workloads captured by the PyTorch frontend
    (:mod:`mallocgame.workloads.models_torch`, :mod:`mallocgame.frontends.torch`):
    WideResNet-101-2 (also at MARL's per-node granularity), ResNet-152 and BERT-base
    inference and a ResNet-50 training step, on ``dram_pmem`` with its physical fast
    memory (the 2 GiB of DRAM the MARL machine leaves to its tasks; the peak live bytes
    of every program but ``wrn101_2_infer_b128``, 1.62 GiB, exceed it).
``hf-v1``
    Hugging Face ``transformers`` models at their checkpoints' sizes
    (:mod:`mallocgame.workloads.models_hf`), inference and training steps (the model's own
    loss, an AdamW update), captured by the PyTorch frontend with their defaults, each on
    the physical fast memory of its preset (``dram_pmem``; the 0.5 B and 1.1 B language
    models' training steps ``gpu_hbm_host``); every program's peak live bytes exceed it.
    Regenerating needs the ``hf`` extra (``transformers``).
``tpu-v1``
    The ``xla-v2`` models sized for ``tpu_v4i`` (all but the two Llama-2-70B programs, sized
    for a GPU with host memory: they exceed a TPU chip's HBM) compiled by the real TPU
    compiler (libtpu, without a TPU: :mod:`mallocgame.frontends.tpu`) for a TPU v4 (XLA's
    alternate memory: the CMEM) and a TPU v5e (the VMEM), named ``NAME-v4`` and
    ``NAME-v5e``, each frozen with XLA's own
    placement in its module (``NAME.xla.json.gz``, :func:`suite_placement`; the solver
    ``xla`` answers with it), each on its generation's preset (``tpu_v4``: 64 MiB of CMEM;
    ``tpu_v5e``: 128 MiB of VMEM) with its physical fast memory, as XLA had it.
``tpu-v2``
    ``tpu-v1`` extracted again (the same libtpu, the same compiles and placements) with a
    convolution's flops counted over the window positions that read an input element, as
    XLA's ``HloCostAnalysis`` counts them: libtpu writes batched matmuls as dilated
    convolutions, whose every position ``tpu-v1`` counted. The suite the TPU comparisons
    of ``docs/results.md`` run on from 2026-11-29.
``holdout-v1`` (held out)
    Models no other suite has (:mod:`mallocgame.workloads.models_holdout`), each on the
    physical fast memory of its preset (``tpu_v4i``, ``gpu_hbm_host`` or ``dram_pmem``;
    every program's peak live bytes exceed it). Held out: its programs and results are
    never used to choose a default, an option value or a table of any solver; they only
    report how the solvers do on programs nothing was tuned on.

Bundled instance names are ``SUITE/NAME``.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from mallocgame import hardware
from mallocgame.costmodel import DEFAULT_CAPACITY_FRACTION, derive_instance
from mallocgame.errors import InputFileError
from mallocgame.fileio import read_json
from mallocgame.frontends.xla_placement import (
    XlaPlacement,
    load_placement,
    placement_to_dict,
    save_placement,
)
from mallocgame.instance import Instance
from mallocgame.program import Program, load_program, save_program

__all__ = [
    "Suite",
    "SUITES",
    "SUITE",
    "TABLE2_PROGRAMS",
    "DEFAULT_PRESET",
    "program_path",
    "suite_of",
    "suite_names",
    "AGENT_SPLITS",
    "agent_split",
    "suite_program",
    "suite_preset",
    "suite_instance",
    "model_programs",
    "extract_model",
    "freeze",
    "suite_placement",
    "xla_answer_path",
]


@dataclass(frozen=True)
class Suite:
    """One versioned suite: where its files are, and how its instances are derived.

    ``capacity_fraction`` ``None``: the preset's physical fast memory. ``preset``: the
    preset of a program whose frozen ``source`` names none. ``models``: the module
    (``MODULE:ATTRIBUTE``) whose dict of model programs :func:`freeze` extracts (imported
    only then): :class:`~mallocgame.workloads.models_common.ModelProgram` s compiled by
    XLA (``frontend`` ``"xla"``: needs JAX and flax) or
    :class:`~mallocgame.workloads.models_torch.TorchProgram` s captured by
    ``torch.export`` (``"torch"``: needs torch), or JAX model programs compiled by libtpu
    for each of ``targets`` (``"tpu"``: needs the ``tpu`` extra), frozen as
    ``NAME-GEN`` (``GEN``: the target without ``tpu-``) with XLA's placement beside.
    """

    name: str
    description: str
    capacity_fraction: float | None
    preset: str
    models: str
    frontend: str = "xla"
    targets: tuple[str, ...] = ()  # frontend "tpu": each model compiled for each of these
    needs: str = ""  # the optional extra its models need; "" for the frontend's own

    @property
    def extra(self) -> str:
        """The optional extra (``pip install 'mallocgame[EXTRA]'``) extracting its models needs."""
        return self.needs or self.frontend

    @property
    def data_dir(self) -> Path:
        return Path(__file__).parent / "data" / self.name


_TPU_V1 = Suite(
    "tpu-v1",
    "the xla-v2 models compiled by libtpu for a TPU v4 and a TPU v5e, with XLA's own placement",
    None,
    "tpu_v4i",
    "mallocgame.workloads.models_v2:V2_PROGRAMS",
    frontend="tpu",
    targets=("tpu-v4", "tpu-v5e"),
)

SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite(
            "xla-v1",
            "28 small models at toy sizes, fast memory 0.25 x peak live bytes (frozen)",
            DEFAULT_CAPACITY_FRACTION,
            hardware.DEFAULT_PRESET,
            "mallocgame.workloads.models:MODEL_PROGRAMS",
        ),
        Suite(
            "xla-v2",
            "models at their published sizes on the physical fast memory of the preset they fit",
            None,
            "tpu_v4i",
            "mallocgame.workloads.models_v2:V2_PROGRAMS",
        ),
        Suite(
            "torch-v1",
            "the MARL paper's workloads from PyTorch on the 2 GiB of DRAM its machine leaves to tasks",
            None,
            "dram_pmem",
            "mallocgame.workloads.models_torch:TORCH_PROGRAMS",
            frontend="torch",
        ),
        Suite(
            "hf-v1",
            "Hugging Face transformers models at their checkpoints' sizes, inference and training "
            "steps with AdamW, on dram_pmem and gpu_hbm_host",
            None,
            "dram_pmem",
            "mallocgame.workloads.models_hf:HF_PROGRAMS",
            frontend="torch",
            needs="hf",
        ),
        _TPU_V1,
        replace(
            _TPU_V1,
            name="tpu-v2",
            description="tpu-v1 extracted again: a convolution's flops counted over the "
            "positions that read an input element",
        ),
        Suite(
            "holdout-v1",
            "held out: never used to choose a default or setting; models no other suite has, "
            "on the physical fast memory of their preset",
            None,
            "tpu_v4i",
            "mallocgame.workloads.models_holdout:HOLDOUT_PROGRAMS",
        ),
    )
}
SUITE = "xla-v1"
"""The suite the comparison runs of ``docs/results.md`` use."""
TABLE2_PROGRAMS = (
    "xla-v1/mlp_mixer_infer",  # 323 buffers: the paper's Table 2 size of about 300
    "xla-v1/bert_train",  # 3,091 buffers: about 3,000
    "xla-v1/transformer_train_bf16",  # 9,193 buffers: about 9,000
    "xla-v1/transformer_nmt_train",  # 9,994 buffers: about 10,000
)
"""The four programs the comparison runs use (the sizes of the paper's Table 2)."""
DEFAULT_PRESET = hardware.DEFAULT_PRESET
DATA_DIR = SUITES[SUITE].data_dir
_SUFFIX = ".program.json.gz"
_PLACEMENT_SUFFIX = ".xla.json.gz"
_XLA_ANSWER_SUFFIX = ".xla-answer.json.gz"


def suite_of(name: str) -> Suite | None:
    """The suite of ``SUITE/NAME``, or ``None`` when its prefix names no suite."""
    prefix, sep, _ = name.partition("/")
    return SUITES.get(prefix) if sep else None


def program_path(name: str) -> Path:
    """The frozen program file of ``SUITE/NAME`` (it may not exist); a bare name is in xla-v1.
    :class:`InputFileError` for a NAME that is no file name (``..``, a folder in it): it
    would name a file outside the suite's folder."""
    suite = suite_of(name) or SUITES[SUITE]
    rest = name.removeprefix(f"{suite.name}/")
    if not rest or rest.startswith(".") or "/" in rest or "\\" in rest:
        raise InputFileError(f"{name}: not a program of the bundled suites {', '.join(SUITES)}")
    return suite.data_dir / f"{rest}{_SUFFIX}"


def suite_names(suite: str | None = None) -> list[str]:
    """Every frozen program of ``suite`` (of every suite if ``None``), as ``SUITE/NAME``, sorted."""
    chosen = SUITES.values() if suite is None else [_suite(suite)]
    return [
        name
        for s in chosen
        for name in sorted(
            f"{s.name}/{p.name.removesuffix(_SUFFIX)}" for p in s.data_dir.glob(f"*{_SUFFIX}")
        )
    ]


AGENT_SPLITS = ("all", "train", "held-out")
"""The parts of a list of programs :func:`agent_split` gives."""


def agent_split(names: Sequence[str], split: str) -> list[str]:
    """Of ``names``, those of ``split``: ``"held-out"`` the quarter a shared agent never
    trains on (a program whose name's SHA-256, as an integer, is divisible by 4),
    ``"train"`` the other three quarters, ``"all"`` every one. The split depends on the
    name alone, so it is frozen: a program keeps its side as suites grow."""
    if split not in AGENT_SPLITS:
        raise ValueError(f"split must be one of {', '.join(AGENT_SPLITS)}, not {split!r}")
    if split == "all":
        return list(names)
    held = [int(hashlib.sha256(n.encode()).hexdigest(), 16) % 4 == 0 for n in names]
    return [n for n, h in zip(names, held) if h == (split == "held-out")]


def _suite(name: str) -> Suite:
    if name not in SUITES:
        raise InputFileError(f"{name}: no such suite (have: {', '.join(SUITES)})")
    return SUITES[name]


@lru_cache(maxsize=128)
def suite_program(name: str) -> Program:
    """The frozen :class:`Program` ``SUITE/NAME``; :class:`InputFileError` if there is none."""
    path = program_path(name)
    if suite_of(name) is None or not path.is_file():
        raise InputFileError(f"{name}: not a program of the bundled suites {', '.join(SUITES)}")
    return load_program(path)


def suite_preset(name: str) -> str:
    """The preset ``SUITE/NAME`` is derived on: its frozen ``source``'s, else its suite's."""
    suite = suite_of(name) or SUITES[SUITE]
    return str(suite_program(name).source.get("preset", suite.preset))


@lru_cache(maxsize=128)
def suite_instance(name: str, preset: str | None = None) -> Instance:
    """The instance of ``SUITE/NAME``: on its own preset (or ``preset``), by its suite's capacity rule."""
    suite = suite_of(name)
    program = suite_program(name)
    assert suite is not None  # suite_program refused names outside the suites
    return derive_instance(
        program, preset or suite_preset(name), capacity_fraction=suite.capacity_fraction, name=name
    )


def model_programs(suite: str) -> dict:
    """The model programs (name -> model program, see :class:`Suite`) of ``suite``.

    Imports the suite's model module: needs its packages (:attr:`Suite.extra`); without them
    an :class:`~mallocgame.errors.InputFileError` names the extra to install.
    """
    import importlib

    chosen = _suite(suite)
    module, _, attribute = chosen.models.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except ImportError as exc:
        raise InputFileError(
            f"{suite}: extracting its models needs the '{chosen.extra}' extra "
            f"(pip install 'mallocgame[{chosen.extra}]'): {exc}"
        ) from None


def _freeze_jobs(suite: Suite, names: list[str] | None, models: dict) -> list[tuple[str, str, str]]:
    """``(frozen name, model name, target)`` for every program of ``suite`` to freeze
    (``names``: model names, or for a ``tpu`` suite also frozen names ``NAME-GEN``);
    ``target`` is ``""`` outside ``tpu`` suites."""
    targets = suite.targets or ("",)
    elsewhere: dict[str, str] = {}  # model -> the other preset it is sized for
    if suite.frontend == "tpu":  # the models sized for the suite's preset: others exceed a chip
        elsewhere = {m: p.preset for m, p in models.items() if p.preset not in (None, suite.preset)}
        models = {m: p for m, p in models.items() if m not in elsewhere}
    every = {(f"{m}-{t.removeprefix('tpu-')}" if t else m): (m, t) for m in models for t in targets}
    jobs = []
    for name in names or sorted(models):
        short = name.removeprefix(f"{suite.name}/")
        if short in every:
            jobs.append((short, *every[short]))
        elif short in models:
            jobs.extend((f, m, t) for f, (m, t) in every.items() if m == short)
        elif short in elsewhere:
            raise InputFileError(
                f"{short}: sized for {elsewhere[short]}, so not compiled for TPU targets (only "
                f"the models sized for {suite.preset} are)"
            )
        else:
            raise InputFileError(
                f"{short}: no such model program in {suite.name} (have: {', '.join(sorted(models))})"
            )
    return jobs


def freeze(
    names: list[str] | None = None,
    out_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    suite: str = SUITE,
    target: str | None = None,
) -> dict[str, float]:
    """Compile, extract and write every model program of ``suite`` (or ``names``); seconds per program.

    Needs the suite's frontend: JAX and flax (``pip install 'mallocgame[xla]'``), torch
    (``'mallocgame[torch]'``) or libtpu (``'mallocgame[tpu]'``). Each file is written
    atomically to ``out_dir`` (default: the suite's data directory), and for a ``tpu``
    suite XLA's placement beside it; the extraction's duration, the frontend's version, the
    target and the preset (a TPU target's own, else the model's where it names one) go in
    its ``source``. A file that already holds the program but for that duration
    (:func:`_unchanged`) is kept unwritten: its instance keeps its hash, and the solutions
    stored of it still check (a changed program gets a new one). ``target`` (a TPU
    generation) compiles a suite of JAX models for it instead, as ``NAME-GEN`` with XLA's
    placement beside (the models sized for the suite's preset); then ``out_dir`` is
    required: the bundled suites stay as they are.
    """
    chosen = _suite(suite)
    if target:
        if chosen.frontend == "torch":
            raise InputFileError(
                f"{suite} holds PyTorch models: they cannot be compiled for {target}"
            )
        if out_dir is None:
            raise InputFileError(f"compiling {suite} for {target} needs a directory to write to")
        from mallocgame.frontends.tpu import tpu_target

        tpu_target(target)  # an unknown one refused before the folder is made
        chosen = replace(chosen, frontend="tpu", targets=(target,))
    models = model_programs(suite)
    out_dir = chosen.data_dir if out_dir is None else out_dir
    jobs = _freeze_jobs(chosen, names, models)  # (names checked before the folder is made)
    out_dir.mkdir(parents=True, exist_ok=True)
    durations: dict[str, float] = {}
    for frozen, short, job_target in jobs:
        model = models[short]
        start = time.perf_counter()
        program, placement = extract_model(chosen.frontend, model, f"{suite}/{frozen}", job_target)
        seconds = time.perf_counter() - start
        source = {
            **program.source,
            "model": model.description,
            "suite": suite,
            "extract_seconds": round(seconds, 3),
        }
        if model.preset is not None:
            source["preset"] = model.preset
        if job_target:  # on the generation's own preset: the fast memory XLA had
            from mallocgame.frontends.tpu import tpu_target

            source["preset"] = tpu_target(job_target).preset
        program = replace(program, source=source)
        if placement is not None:
            placement_path = out_dir / f"{frozen}{_PLACEMENT_SUFFIX}"
            if not _unchanged(placement_path, placement_to_dict(placement)):
                save_placement(placement, placement_path)
        path = out_dir / f"{frozen}{_SUFFIX}"
        kept = _unchanged(path, program.to_dict())
        if not kept:  # kept: its instance, and every solution stored of it, keeps its hash
            save_program(program, path)
        durations[frozen] = seconds
        if progress is not None:
            note = ", unchanged, kept" if kept else ""
            progress(f"{suite}/{frozen}: {program.num_buffers} buffers, {seconds:.1f} s{note}")
    suite_program.cache_clear()
    suite_instance.cache_clear()
    return durations


def _unchanged(path: Path, document: dict[str, Any]) -> bool:
    """Whether the file at ``path`` holds ``document`` but for what differs between two
    extractions of one program: the extraction's duration (``source.extract_seconds``) and
    the number a ``source.dump_module`` frozen before the frontend dropped it began with
    (``module_0020.``: it counted what the process had compiled before). ``False`` where
    there is no such file, or none that reads."""
    try:
        old = read_json(path) if path.is_file() else None
        new = json.loads(json.dumps(document))
    except (InputFileError, OSError, TypeError, ValueError):  # save_* says what is wrong
        return False
    return old is not None and _comparable(old) == _comparable(new)


def _comparable(document: Any) -> Any:
    """A program or placement document without what :func:`_unchanged` lets differ."""
    if not isinstance(document, dict) or not isinstance(document.get("source"), dict):
        return document
    source = {k: v for k, v in document["source"].items() if k != "extract_seconds"}
    if isinstance(source.get("dump_module"), str):
        source["dump_module"] = re.sub(r"^module_\d+\.", "", source["dump_module"])
    return {**document, "source": source}


def extract_model(
    frontend: str, model: Any, name: str, target: str = ""
) -> tuple[Program, XlaPlacement | None]:
    """The program of one model program of a suite, by its suite's frontend, and XLA's
    placement where the frontend compiles for a TPU ``target``."""
    if frontend == "torch":
        return model.extract(name), None
    fn, args, jit_kwargs = model.build()
    if frontend == "tpu":
        from mallocgame.frontends.tpu import extract_jax_tpu

        return extract_jax_tpu(fn, *args, target=target, name=name, **jit_kwargs)
    from mallocgame.frontends.xla import extract_jax

    return extract_jax(fn, *args, name=name, **jit_kwargs), None


def xla_answer_path(name: str) -> Path | None:
    """Where the legal answer made of XLA's placement of ``SUITE/NAME`` is frozen (written by
    :func:`mallocgame.solvers.xla_answer.freeze_xla_answers`; the file may not exist), or
    ``None`` outside the suites."""
    suite = suite_of(name)
    if suite is None:
        return None
    return suite.data_dir / f"{name.removeprefix(f'{suite.name}/')}{_XLA_ANSWER_SUFFIX}"


def suite_placement(name: str) -> XlaPlacement | None:
    """XLA's own placement frozen with ``SUITE/NAME`` (a ``tpu`` suite's), else ``None``."""
    suite = suite_of(name)
    if suite is None:
        return None
    path = suite.data_dir / f"{name.removeprefix(f'{suite.name}/')}{_PLACEMENT_SUFFIX}"
    return load_placement(path) if path.is_file() else None
