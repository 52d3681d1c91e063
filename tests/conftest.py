"""Fixtures shared by the test modules (plain helpers are in :mod:`tests.builders`).

The bundled workloads are session-scoped: an :class:`~mallocgame.instance.Instance` is
immutable, so every module that asks for one shares a single load.
"""

from __future__ import annotations

import gc
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

# A test process keeps much alive for the tests that share it (every bundled program's
# instance, the heuristic's answers, compiled networks), and Python's automatic collections
# of the older generations walk all of it: collect the young generation a hundred times
# less often, the older ones five times less (measured side by side, two runs each: 9 to 13 %
# off the heuristic's, suite answers' and MuZero training's tests together, 2 to 3 % off
# MuZero's and muzero-prod's). A test that needs a collection calls gc.collect().
gc.set_threshold(100_000, 50, 50)


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


# ------------------------------------------------------------------ pytest -n (xdist)

PROCESS_GROUPS: dict[str, str] = {
    # nodeid prefix -> group: the tests of a group run in one worker process, because they
    # share what is costly to build there (a module fixture, a cache, compiled networks)
    "tests/workloads/test_models.py::": "models",  # every program lowered, six compiled
    "tests/solvers/test_exact.py::test_exact_reaches_the_game_optimum[": "exact-conformance",
    "tests/solvers/test_exact.py::test_exact_never_exceeds_its_bounds[": "exact-conformance",
    # tests.builders.heuristic_answer: the heuristic's answer of every bundled program
    "tests/solvers/test_heuristic.py::test_bundled_workloads_valid": "heuristic-answers",
    "tests/solvers/test_heuristic.py::test_heuristic_beats_drop": "heuristic-answers",
    "tests/solvers/test_projection.py::test_heuristic_mappings_project": "heuristic-answers",
    "tests/solvers/test_projection.py::test_repair_raises": "heuristic-answers",
    "tests/solvers/muzero/test_prod.py::test_never_slower": "heuristic-answers",
    "tests/workloads/test_listing.py::test_every_row": "heuristic-answers",  # its instances
    # one local Ray cluster for the module (its fixture), not one per worker
    "tests/solvers/muzero/test_muzero_distributed.py::": "ray-cluster",
    # egrl's networks compiled once (the modules share their tiny settings and program)
    "tests/solvers/egrl/test_egrl_sac.py::": "egrl-networks",
    "tests/solvers/egrl/test_egrl_solver.py::": "egrl-networks",
}
"""The tests ``pytest -n`` keeps in one process (the first matching prefix); every other
test is scheduled on its own, as xdist's ``load`` does. (xdist's own ``--dist loadgroup``
and ``xdist_group`` marks do not group under pytest 9.2: pytest-xdist issue #1386.)"""


def _process_group(nodeid: str) -> str:
    """The scheduling unit of ``nodeid``: its group in :data:`PROCESS_GROUPS`, or itself."""
    return next((g for p, g in PROCESS_GROUPS.items() if nodeid.startswith(p)), nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``pytest -n``'s default distribution (``load``), with :data:`PROCESS_GROUPS` kept
    together: each group goes to one worker as a whole (the largest first), the other
    tests one at a time to whichever worker is free."""
    if config.getvalue("dist") != "load":
        return None  # another --dist asked for
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _process_group(nodeid)

    return GroupScheduling(config, log)
