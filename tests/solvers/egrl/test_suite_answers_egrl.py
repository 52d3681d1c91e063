"""Bundled suite programs: ``egrl``'s answer passes check, and its graph is well formed.

Each program of :func:`mallocgame.workloads.suite.suite_names` (xla-v1, xla-v2,
torch-v1, holdout-v1: 70 programs, 67 to 26,915 buffers; tpu-v1 and tpu-v2 as
:func:`tests.builders.suite_wide` samples them) but the larger ones of
:data:`tests.builders.LARGE_LEFT_OUT` (nine of the thirteen of 5,000 buffers or more)
is solved by ``egrl`` with a work budget
of one proposal, and :func:`mallocgame.check.check_solution` must accept the answer
(it replays the actions and recomputes the reward). The case is mode ``evolution``
with one Boltzmann chromosome and no graph policy: the graph networks compile once
per padded graph size (37 sizes in the suite, about a second each on a 2-core CPU),
which would take this file past its time; proposals from the networks go through the
same player (``tests/solvers/egrl/test_egrl_solver.py`` runs them, the largest suite
program included). The chromosome's proposal is random (temperature 1, no prior
bias), so the nearest-allowed rule and Drop-backup are exercised on all those programs.

The program's graph (numpy only) is built and checked on every program: node and
edge counts, edges inside the node range, finite features, padding.

Runtime: about 18 s on the reference 2-core machine (loading the programs is 3 s).
"""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.check import check_solution
from mallocgame.game.tables import build_tables
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.solvers.egrl.graph import NUM_FEATURES, bucket, build_graph, pad_graph
from mallocgame.workloads.suite import suite_instance, suite_names
from tests.builders import LARGE_LEFT_OUT, suite_wide

NAMES = suite_wide(suite_names())
OPTIONS = {
    "mode": "evolution",
    "policies": 0,
    "chromosomes": 1,
    "elites": 0,
    "temperature": 1.0,
    "prior_bias": 0.0,
}


@pytest.mark.parametrize("name", [n for n in NAMES if n not in LARGE_LEFT_OUT])
def test_answer_passes_check(name: str) -> None:
    inst = suite_instance(name)  # cached by the suite
    solution = get_solver("egrl").solve(inst, SolveRequest(seed=0, work=1, options=OPTIONS))
    report = check_solution(inst, solution)
    assert report.ok, f"egrl on {name}:\n{report.summary()}"
    assert solution.solver == "egrl" and solution.instance == inst.name
    assert solution.work["proposals"] == 1 and solution.info["best_from"] == "chromosome"
    assert len(solution.actions) == inst.num_buffers


@pytest.mark.parametrize("name", NAMES)
def test_graph_is_well_formed(name: str) -> None:
    inst = suite_instance(name)
    tables = build_tables(inst)
    graph = build_graph(inst, tables)
    multi_groups = int((tables.group_size > 1).sum())
    assert graph.num_units == inst.num_buffers
    assert (
        graph.num_nodes
        == inst.num_buffers + inst.num_instructions + len(inst.tensors) + multi_groups
    )
    in_groups = int(tables.group_size[tables.group_size > 1].sum())
    assert graph.num_edges == 2 * (
        2 * inst.num_buffers + in_groups + max(inst.num_instructions - 1, 0)
    )
    for src, dst in ((graph.src, graph.dst), (graph.src2, graph.dst2)):
        assert src.min() >= 0 and max(src.max(), dst.max()) < graph.num_nodes
    assert np.isfinite(graph.features).all() and graph.features.shape == (
        graph.num_nodes,
        NUM_FEATURES,
    )
    padded = pad_graph(graph)
    assert (
        padded["x"].shape[0] == bucket(graph.num_nodes + 1)
        and padded["node_mask"].sum() == graph.num_nodes
    )
    assert padded["units"].sum() == inst.num_buffers and padded["mask"].sum() == graph.num_edges


def test_the_suite_is_there() -> None:
    assert len(NAMES) > 50
