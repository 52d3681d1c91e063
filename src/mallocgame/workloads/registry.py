"""Workloads by name: a bundled instance, an instance file, or an XLA dump directory.

Bundled names look like ``SUITE/NAME``: ``xla-v1/NAME`` for the frozen real programs
of :mod:`mallocgame.workloads.suite` (on its default preset), and
``synthetic-vN/SIZE`` for the seeded synthetic programs of
:mod:`mallocgame.workloads.synthetic`. A directory is read as an XLA dump
(:func:`mallocgame.frontends.xla.extract_dump`): its one scheduled module, or where it
holds several (a training script compiles many) the non-trivial one with the most
instructions, derived on :data:`DUMP_PRESET` by the cost model.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from mallocgame.errors import InputFileError
from mallocgame.hardware import DEFAULT_PRESET
from mallocgame.instance import Instance, load_instance
from mallocgame.workloads import suite, synthetic

__all__ = ["DUMP_PRESET", "workload_names", "check_workload", "load_workload"]

DUMP_PRESET = DEFAULT_PRESET


def workload_names() -> list[str]:
    """Every bundled workload name, in listing order."""
    return suite.suite_names() + list(synthetic.SYNTHETIC_NAMES)


def load_workload(name_or_path: str | os.PathLike[str]) -> Instance:
    """A bundled workload by name, else the instance file or XLA dump directory at that path.

    Raises :class:`InputFileError` when it is none of them (with the closest bundled
    names when there are some) or when ``name_or_path`` is not a string or a path
    (``None``, a number, ``bytes``), and the XLA frontend's errors for a dump it cannot read.
    """
    name_or_path = check_workload(name_or_path)
    path = Path(name_or_path)
    if name_or_path in synthetic.SYNTHETIC_NAMES:
        return synthetic.named(name_or_path)
    if name_or_path in suite.suite_names():  # first, as a synthetic name: a folder of that
        return suite.suite_instance(name_or_path)  # name beside you does not shadow it
    if path.is_dir():
        return _dump_instance(path)
    return load_instance(path)


def check_workload(name_or_path: str | os.PathLike[str]) -> str:
    """``name_or_path`` as a string, once it is a bundled name or an existing path: what
    :func:`load_workload` refuses without reading a file, checked before long work (a sweep
    over many programs). Raises :class:`InputFileError` otherwise, as :func:`load_workload`."""
    if isinstance(name_or_path, os.PathLike) and not isinstance(name_or_path, bytes):
        name_or_path = os.fspath(name_or_path)
    if not isinstance(name_or_path, str):
        raise InputFileError(
            f"a workload is a bundled name or a path (a string), not {name_or_path!r:.80}"
        )
    if not name_or_path or "\0" in name_or_path:
        raise InputFileError(
            f"{name_or_path!r}: not a workload name or path (see 'mallocgame list')"
        )
    if name_or_path in synthetic.SYNTHETIC_NAMES or name_or_path in suite.suite_names():
        return name_or_path
    try:
        if Path(name_or_path).exists():
            return name_or_path
    except OSError as exc:  # a name too long for the file system
        raise InputFileError(f"{name_or_path}: cannot read: {exc.strerror or exc}") from None
    close = difflib.get_close_matches(name_or_path, workload_names(), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else " (see 'mallocgame list')"
    raise InputFileError(
        f"{name_or_path}: neither a bundled workload nor an instance file or XLA dump directory{hint}"
    )


def _dump_instance(path: Path) -> Instance:
    from mallocgame.costmodel import derive_instance
    from mallocgame.frontends.xla import extract_dump

    return derive_instance(extract_dump(path, largest=True), DUMP_PRESET)
