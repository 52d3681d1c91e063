"""The bundled suite of real programs: frozen XLA programs shipped in the package.

Each program of :mod:`mallocgame.workloads.models` is compiled by XLA (through JAX,
on the CPU), extracted by :mod:`mallocgame.frontends.xla` and frozen as
``data/xla-v1/NAME.program.json.gz``. The version in the suite name keeps results
comparable across JAX versions: a new extraction that changes a program belongs in
a new suite version. :func:`freeze` regenerates the files (a benchmark-time job,
``mallocgame extract --suite``); the tests only read them.

Bundled instance names are ``xla-v1/NAME``: the frozen program derived with the
default preset and capacity rule of :mod:`mallocgame.costmodel`.
"""

from __future__ import annotations

import time
from functools import lru_cache
from pathlib import Path
from typing import Callable

from mallocgame.costmodel import derive_instance
from mallocgame import hardware
from mallocgame.errors import InputFileError
from mallocgame.instance import Instance
from mallocgame.program import Program, load_program, save_program

__all__ = [
    "SUITE",
    "TABLE2_PROGRAMS",
    "DEFAULT_PRESET",
    "DATA_DIR",
    "program_path",
    "suite_names",
    "suite_program",
    "suite_instance",
    "freeze",
]

SUITE = "xla-v1"
TABLE2_PROGRAMS = (
    "xla-v1/mlp_mixer_infer",  # 323 buffers: the paper's Table 2 size of about 300
    "xla-v1/bert_train",  # 3,091 buffers: about 3,000
    "xla-v1/transformer_train_bf16",  # 9,193 buffers: about 9,000
    "xla-v1/transformer_nmt_train",  # 9,994 buffers: about 10,000
)
"""The four programs the comparison runs use (the sizes of the paper's Table 2)."""
DEFAULT_PRESET = hardware.DEFAULT_PRESET
DATA_DIR = Path(__file__).parent / "data" / SUITE
_SUFFIX = ".program.json.gz"


def program_path(name: str) -> Path:
    """The frozen program file of ``xla-v1/NAME`` (it may not exist)."""
    short = name.removeprefix(f"{SUITE}/")
    return DATA_DIR / f"{short}{_SUFFIX}"


def suite_names() -> list[str]:
    """Every frozen program of the suite, as ``xla-v1/NAME``, sorted."""
    return sorted(f"{SUITE}/{p.name.removesuffix(_SUFFIX)}" for p in DATA_DIR.glob(f"*{_SUFFIX}"))


@lru_cache(maxsize=64)
def suite_program(name: str) -> Program:
    """The frozen :class:`Program` ``xla-v1/NAME``; :class:`InputFileError` if there is none."""
    path = program_path(name)
    if not name.startswith(f"{SUITE}/") or not path.is_file():
        raise InputFileError(f"{name}: not a program of the bundled suite {SUITE}")
    return load_program(path)


@lru_cache(maxsize=64)
def suite_instance(name: str, preset: str = DEFAULT_PRESET) -> Instance:
    """The instance of ``xla-v1/NAME`` on ``preset`` (the default capacity rule)."""
    return derive_instance(suite_program(name), preset, name=name)


def freeze(
    names: list[str] | None = None,
    out_dir: Path = DATA_DIR,
    progress: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """Compile, extract and write every model program (or ``names``); returns seconds per program.

    Needs JAX and flax (``pip install 'mallocgame[xla]'``). Each file is written
    atomically; the extraction's duration and the JAX version go in its ``source``.
    """
    from mallocgame.frontends.xla import extract_jax
    from mallocgame.workloads.models import MODEL_PROGRAMS

    out_dir.mkdir(parents=True, exist_ok=True)
    durations: dict[str, float] = {}
    for short in names or sorted(MODEL_PROGRAMS):
        short = short.removeprefix(f"{SUITE}/")
        if short not in MODEL_PROGRAMS:
            raise InputFileError(f"{short}: no such model program (have: {', '.join(sorted(MODEL_PROGRAMS))})")
        model = MODEL_PROGRAMS[short]
        start = time.perf_counter()
        fn, args, jit_kwargs = model.build()
        program = extract_jax(fn, *args, name=f"{SUITE}/{short}", **jit_kwargs)
        seconds = time.perf_counter() - start
        source = {**program.source, "model": model.description, "suite": SUITE,
                  "extract_seconds": round(seconds, 3)}
        program = Program(
            name=program.name, instructions=program.instructions, tensors=program.tensors,
            alias_groups=program.alias_groups, loops=program.loops, source=source,
        )
        save_program(program, out_dir / f"{short}{_SUFFIX}")
        durations[short] = seconds
        if progress is not None:
            progress(f"{SUITE}/{short}: {program.num_buffers} buffers, {seconds:.1f} s")
    suite_program.cache_clear()
    suite_instance.cache_clear()
    return durations
