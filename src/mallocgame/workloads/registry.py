"""Workloads by name: the bundled instances, or an instance file path.

Bundled names look like ``SUITE/NAME``: ``xla-v1/NAME`` for the frozen real
programs of :mod:`mallocgame.workloads.suite` (on the default preset), and
``synthetic/SIZE`` for the seeded synthetic programs of
:mod:`mallocgame.workloads.synthetic`.
"""

from __future__ import annotations

from pathlib import Path

from mallocgame.errors import InputFileError
from mallocgame.instance import Instance, load_instance
from mallocgame.workloads import suite, synthetic

__all__ = ["workload_names", "load_workload"]


def workload_names() -> list[str]:
    """Every bundled workload name, in listing order."""
    return suite.suite_names() + list(synthetic.SYNTHETIC_NAMES)


def load_workload(name_or_path: str) -> Instance:
    """A bundled workload by name, else the instance file at that path.

    Raises :class:`InputFileError` when it is neither.
    """
    if name_or_path in synthetic.SYNTHETIC_NAMES:
        return synthetic.named(name_or_path)
    if name_or_path.startswith(f"{suite.SUITE}/") and not Path(name_or_path).exists():
        return suite.suite_instance(name_or_path)
    if Path(name_or_path).exists():
        return load_instance(name_or_path)
    raise InputFileError(
        f"{name_or_path}: neither a bundled workload (see 'mallocgame list') nor an instance file"
    )
