"""Fixtures shared by the test modules (plain helpers are in :mod:`tests.builders`).

The bundled workloads are session-scoped: an :class:`~mallocgame.instance.Instance` is
immutable, so every module that asks for one shares a single load.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

# The tests mean the CPU: with libtpu installed (the tpu extra), JAX would look for a TPU
# first. libtpu's ahead-of-time TPU targets work under this setting (tests/frontends/test_tpu.py).
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest

from mallocgame.instance import Instance
from mallocgame.workloads.registry import load_workload
from tests.builders import conformance_vector


@pytest.fixture(scope="session")
def lstm() -> Instance:
    """The bundled ``xla-v1/lstm_infer`` workload (a small XLA program with a loop)."""
    return load_workload("xla-v1/lstm_infer")


@pytest.fixture(scope="session")
def small() -> Instance:
    """The bundled ``synthetic-v1/small`` workload."""
    return load_workload("synthetic-v1/small")


@pytest.fixture()
def instance_file(tmp_path: Path) -> Path:
    """Conformance vector random105's instance, written to ``tmp_path`` as
    ``random105.json.gz`` (the file a command line or ``make_env`` reads)."""
    path = tmp_path / "random105.json.gz"
    path.write_bytes(
        gzip.compress(json.dumps(conformance_vector("random105")["instance"]).encode())
    )
    return path
