"""The program graph of ``egrl``: nodes, edges, features and padding on a hand-made program."""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.game.tables import build_tables
from mallocgame.solvers.egrl.graph import (
    BUF_GRP,
    BUF_INS,
    BUF_TEN,
    BUFFER_FEATURES,
    GRP_BUF,
    INS_BUF,
    NEXT,
    NODE_TYPES,
    NUM_FEATURES,
    PREV,
    TEN_BUF,
    bucket,
    build_graph,
    pad_graph,
)
from tests.solvers.egrl.programs import alias_program


def _edges(graph, relation: int) -> set[tuple[int, int]]:
    keep = graph.rel == relation
    return set(zip(graph.src[keep].tolist(), graph.dst[keep].tolist()))


def test_nodes_and_edges_of_a_small_program() -> None:
    inst = alias_program()
    graph = build_graph(inst, build_tables(inst))
    # 5 buffers, 2 instructions (5, 6), 3 tensors (7, 8, 9), one group of two (10).
    assert graph.num_units == 5 and graph.num_nodes == 11
    assert graph.node_type.tolist() == [0] * 5 + [1] * 2 + [2] * 3 + [3]
    assert _edges(graph, BUF_INS) == {(0, 5), (1, 5), (2, 6), (3, 6), (4, 6)}
    assert _edges(graph, INS_BUF) == {(d, s) for s, d in _edges(graph, BUF_INS)}
    assert _edges(graph, BUF_TEN) == {(0, 7), (1, 8), (2, 8), (3, 7), (4, 9)}
    assert _edges(graph, TEN_BUF) == {(d, s) for s, d in _edges(graph, BUF_TEN)}
    assert _edges(graph, BUF_GRP) == {(0, 10), (3, 10)} and _edges(graph, GRP_BUF) == {
        (10, 0),
        (10, 3),
    }
    assert _edges(graph, NEXT) == {(5, 6)} and _edges(graph, PREV) == {(6, 5)}
    assert graph.num_edges == 26


def test_two_hop_edges_chain_each_nodes_neighbours() -> None:
    inst = alias_program()
    graph = build_graph(inst, build_tables(inst))
    pairs = set(zip(graph.src2.tolist(), graph.dst2.tolist()))
    assert all((b, a) in pairs for a, b in pairs) and all(a != b for a, b in pairs)
    # Instruction 6's neighbours 2, 3, 4, 5 in id order: chained 2-3, 3-4, 4-5.
    assert {(2, 3), (3, 4), (4, 5)} <= pairs
    # Tensor 7 joins buffers 0 and 3; the group node joins the same two.
    assert (0, 3) in pairs
    # Buffer 0's neighbours: instruction 5, tensor 7, group 10.
    assert {(5, 7), (7, 10)} <= pairs
    assert (0, 4) not in pairs  # not two hops apart


def test_features_are_standardized_per_type_with_the_type_one_hot() -> None:
    inst = alias_program()
    graph = build_graph(inst, build_tables(inst))
    x = graph.features
    assert x.shape == (11, NUM_FEATURES) and x.dtype == np.float32 and np.isfinite(x).all()
    width = NUM_FEATURES - len(NODE_TYPES)
    assert (x[:, width:].argmax(1) == graph.node_type).all() and (x[:, width:].sum(1) == 1).all()
    buffers = x[:5, :width]
    assert np.allclose(buffers.mean(0), 0.0, atol=1e-5)
    std = buffers.std(0)
    assert np.all(np.isclose(std, 1.0, atol=1e-4) | np.isclose(std, 0.0))
    assert (np.abs(x) <= 5.0).all()
    # is_output (column 2) separates the two outputs from the three reads.
    assert (x[[1, 4], 2] > 0).all() and (x[[0, 2, 3], 2] < 0).all()


def test_padding() -> None:
    inst = alias_program()
    graph = build_graph(inst, build_tables(inst))
    padded = pad_graph(graph)
    n_pad = padded["x"].shape[0]
    assert n_pad == 64 and padded["units"].shape == (64,) and padded["src"].shape == (64,)
    assert padded["node_mask"].tolist() == [1.0] * 11 + [0.0] * 53
    assert padded["units"].sum() == 5 and padded["mask"].sum() == 26
    assert (padded["src"][26:] == n_pad - 1).all() and (padded["dst"][26:] == n_pad - 1).all()
    assert padded["all_mask"].sum() == 26 + len(graph.src2)
    assert not padded["x"][11:].any()


@pytest.mark.parametrize(
    "n, expected",
    [
        (0, 64),
        (64, 64),
        (65, 96),
        (96, 96),
        (97, 128),
        (129, 192),
        (193, 256),
        (26916, 32768),
        (32769, 49152),
    ],
)
def test_bucket(n: int, expected: int) -> None:
    assert bucket(n) == expected


def test_a_column_that_varies_at_any_scale_is_standardized() -> None:
    """Sizes over a 2**50-byte capacity differ by 1e-12: still z-scores, not zeros."""
    from tests.builders import I, X, build

    inst = build(
        [X(1000), X(2000), X(4000)],
        [I(writes=[0]), I(reads=[0], writes=[1]), I(reads=[1], writes=[2]), I(reads=[2])],
        capacity=2**50,
    )
    graph = build_graph(inst, build_tables(inst))
    column = graph.features[: inst.num_buffers, BUFFER_FEATURES.index("size_over_capacity")]
    assert np.ptp(column) > 1.0


def test_a_subnormal_copy_supply_gives_finite_ordered_demands() -> None:
    import warnings

    from mallocgame.instance import instance_from_dict
    from tests.builders import I, X, build_doc

    tiny = 5e-324
    doc = build_doc(
        [X(100), X(300)],
        [
            I(writes=[0], supply=tiny),
            I(reads=[0], writes=[1], supply=tiny),
            I(reads=[1], supply=tiny),
        ],
    )
    inst = instance_from_dict(doc)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph = build_graph(inst, build_tables(inst))
    demand = graph.features[: inst.num_buffers, BUFFER_FEATURES.index("log_demand")]
    sizes = [b.size for b in inst.buffers]
    assert np.isfinite(demand).all() and np.ptp(demand) > 0
    assert np.argsort(demand, kind="stable").tolist() == np.argsort(sizes, kind="stable").tolist()
