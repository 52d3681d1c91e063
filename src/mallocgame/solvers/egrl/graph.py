"""The program as a graph for EGRL's graph networks: nodes, edges, static features.

EGRL (Khadka et al., 2021) reads the compiled program as a graph whose nodes carry
static features and whose edges are featureless. Here the nodes are of four types, in
this order of node ids:

* ``B`` **buffers** (ids ``0 .. B-1``, in game order): the decision units;
* ``T`` **instructions** (ids ``B .. B+T-1``);
* ``X`` **tensors**: one hub node per tensor joins the buffers that read or write it;
* ``G`` **alias groups** of more than one buffer: a hub node joins the members (a
  group of one buffer has no node of its own).

Directed edges, each with a relation (:data:`RELATIONS`): buffer ↔ its instruction,
buffer ↔ its tensor, buffer ↔ its group, and instruction ``t`` ↔ ``t+1`` (program
order). Hubs keep the edge count linear: ``2 (3B + T)`` at most.

**Two-hop edges** (relation ``TWO_HOP``) stand in for the Graph U-Net's connectivity
augmentation (Gao & Ji, 2019: the pooled levels use ``A²`` so that dropping a node
does not cut its neighbours apart). ``A²`` itself has ``Σ_v deg(v)²`` edges (3.3
million at the largest bundled program, 20 times ``A``), so each node's neighbours are
instead joined in a chain in node-id order (for buffers: game order): ``2 (deg(v) - 1)``
edges per node, a connected stand-in for the clique ``A²`` would put there. They are
used only at pooled levels.

**Features** (static, from the instance; :data:`FEATURE_NAMES`): per type, sizes,
times, latencies and flops, benefits, demands, supply, alias-group sizes (see
:func:`node_features`); each column is standardized over the nodes of its type
(z-score, clipped to ``[-5, 5]``; a constant column is 0) and the node's type is
appended one-hot. The layout: ``[N, NUM_FEATURES]`` float32.

**Padding** (:func:`pad_graph`): node, edge and unit counts are rounded up to a
geometric grid (:func:`bucket`: ``2^k`` or ``1.5 · 2^k``), so the jitted networks
compile once per bucket, shared by every program of similar size in a process.
Padding nodes have zero features and mask 0; padding edges join the last padding node
to itself with mask 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mallocgame.game.tables import GameTables
from mallocgame.instance import Instance, RooflineLatency

__all__ = [
    "ProgramGraph",
    "build_graph",
    "pad_graph",
    "bucket",
    "node_features",
    "RELATIONS",
    "NUM_RELATIONS",
    "NODE_TYPES",
    "FEATURE_NAMES",
    "NUM_FEATURES",
]

RELATIONS = (
    "instruction->buffer",
    "buffer->instruction",
    "tensor->buffer",
    "buffer->tensor",
    "group->buffer",
    "buffer->group",
    "previous->next instruction",
    "next->previous instruction",
    "two-hop",
)
"""Edge relations; each has its own weights in a graph convolution."""
INS_BUF, BUF_INS, TEN_BUF, BUF_TEN, GRP_BUF, BUF_GRP, NEXT, PREV, TWO_HOP = range(len(RELATIONS))
NUM_RELATIONS = len(RELATIONS)

NODE_TYPES = ("buffer", "instruction", "tensor", "group")

BUFFER_FEATURES = (
    "log_size",
    "size_over_capacity",
    "is_output",
    "target_time",
    "def_time",
    "last_use",
    "live_length",
    "log_demand",
    "benefit_share",
    "benefit_rel",
    "live_out",
    "log_group_size",
    "program_input",
    "log_tensor_reads",
    "in_latency_table",
    "log_supply_here",
)
INSTRUCTION_FEATURES = (
    "log_latency_slow",
    "benefit_share",
    "time",
    "log_count",
    "log_flops",
    "log_supply",
    "log_buffers",
    "table_latency",
    "log_bytes",
)
TENSOR_FEATURES = (
    "log_size",
    "size_over_capacity",
    "def_time",
    "last_use",
    "live_length",
    "live_out",
    "program_input",
    "log_reads",
)
GROUP_FEATURES = ("log_size", "first_time", "last_time", "size_over_capacity", "log_tensors")
_WIDTH = max(
    len(BUFFER_FEATURES), len(INSTRUCTION_FEATURES), len(TENSOR_FEATURES), len(GROUP_FEATURES)
)
FEATURE_NAMES: tuple[str, ...] = tuple(f"f{i}" for i in range(_WIDTH)) + tuple(
    f"is_{t}" for t in NODE_TYPES
)
"""Columns: ``_WIDTH`` type-specific features (the ``*_FEATURES`` of the node's type,
zero-filled), then the type one-hot."""
NUM_FEATURES = len(FEATURE_NAMES)

MIN_BUCKET = 64


def bucket(n: int) -> int:
    """The smallest of ``64, 96, 128, 192, 256, ...`` (``2^k`` and ``1.5 · 2^k``) at least ``n``."""
    size = MIN_BUCKET
    while size < n:
        half = size // 2
        size = size + half if (size & (size - 1)) == 0 else size + size // 3
    return size


@dataclass(frozen=True)
class ProgramGraph:
    """The graph of one instance (unpadded).

    ``features`` float32 [N, NUM_FEATURES]; ``node_type`` int8 [N] (index into
    :data:`NODE_TYPES`); one-hop edges ``src``, ``dst``, ``rel`` int32 [E]; two-hop
    chain edges ``src2``, ``dst2`` int32 [E2] (relation ``TWO_HOP``).
    """

    num_units: int  # B: buffers, the decision units, node ids 0 .. B-1
    num_nodes: int  # N = B + T + X + G
    features: np.ndarray
    node_type: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    rel: np.ndarray
    src2: np.ndarray
    dst2: np.ndarray

    @property
    def num_edges(self) -> int:
        return int(self.src.shape[0])


def _log1p_rel(values: np.ndarray) -> np.ndarray:
    """``log1p(v / mean(|v|))``; 0 where the mean is 0."""
    values = np.asarray(values, dtype=np.float64)
    scale = float(np.abs(values).mean()) if values.size else 0.0
    if not (scale > 0.0 and math.isfinite(scale)):
        return np.zeros_like(values)
    return np.log1p(np.maximum(values, 0.0) / scale)


def _standardize(block: np.ndarray) -> np.ndarray:
    """Column z-scores clipped to [-5, 5]; a constant column (its spread below 1e-9 of its
    largest magnitude: rounding) becomes 0, whatever the column's scale."""
    if block.shape[0] == 0:
        return block.astype(np.float32)
    mean = block.mean(axis=0)
    std = block.std(axis=0)
    varies = std > 1e-9 * np.abs(block).max(axis=0)
    out = np.where(varies, (block - mean) / np.where(varies, std, 1.0), 0.0)
    return np.clip(out, -5.0, 5.0).astype(np.float32)


def _instruction_latencies(
    instance: Instance,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per instruction (count included): latency with every buffer slow, with every buffer
    fast, compute seconds (0 for a table), bytes touched."""
    hw = instance.hardware
    sizes = np.fromiter(
        (b.size for b in instance.buffers), dtype=np.float64, count=instance.num_buffers
    )
    num_t = instance.num_instructions
    slow, fast, flops, nbytes = (np.zeros(num_t) for _ in range(4))
    for t, ins in enumerate(instance.instructions):
        touched = float(sizes[list(ins.buffers)].sum()) if ins.buffers else 0.0
        lat = ins.latency
        if isinstance(lat, RooflineLatency):
            slow[t] = lat.fixed_s + max(lat.compute_s, touched / hw.slow_bandwidth)
            fast[t] = lat.fixed_s + max(lat.compute_s, touched / hw.fast_bandwidth)
            flops[t] = lat.compute_s
        else:
            slow[t] = lat.latency_s[0]
            fast[t] = lat.latency_s[-1]
        slow[t] *= ins.count
        fast[t] *= ins.count
        flops[t] *= ins.count
        nbytes[t] = touched * ins.count
    return slow, fast, flops, nbytes


def node_features(instance: Instance, tables: GameTables, groups: np.ndarray) -> np.ndarray:
    """Standardized static features of every node: float32 [N, NUM_FEATURES].

    ``groups``: the dense alias-group ids that get a node (more than one member), in
    node order. Times are divided by ``T``, sizes by their mean (log scale) or by the
    fast-memory capacity, demands and supply by the mean supply per step, benefits by
    the reward normalizer ``R`` (a buffer's ``benefit_s · B / R``: its benefit against
    an equal share of the best return).
    """
    tb = tables
    num_b, num_t, num_x = tb.num_buffers, tb.num_instructions, tb.num_tensors
    inv_t = 1.0 / max(num_t, 1)
    cap = float(max(tb.capacity, 1))
    target_time = tb.buffer_time
    tensor = tb.buffer_tensor
    is_out = tb.buffer_is_out
    aligned = tb.buffer_aligned.astype(np.float64)
    def_time = tb.tensor_def.astype(np.float64)
    last_use = tb.tensor_last_use.astype(np.float64)
    live_out = tb.tensor_live_out
    reads = np.bincount(tensor[~is_out], minlength=num_x).astype(np.float64)
    supply = tb.supply_s
    mean_supply = float(supply.mean()) if num_t else 0.0
    # a mean supply to divide by: above 0 and not so small (subnormal) that ratios overflow
    per_supply = mean_supply > 0 and math.isfinite(1.0 / mean_supply)
    norm = tb.normalizer_s
    benefit = np.nan_to_num(
        np.fromiter((b.benefit_s for b in instance.buffers), dtype=np.float64, count=num_b)
    )
    group_size = tb.group_size[tb.buffer_group].astype(np.float64)

    buf = np.zeros((num_b, len(BUFFER_FEATURES)))
    if num_b:
        buf[:, 0] = _log1p_rel(aligned)
        buf[:, 1] = np.minimum(aligned / cap, 10.0)
        buf[:, 2] = is_out
        buf[:, 3] = target_time * inv_t
        buf[:, 4] = def_time[tensor] * inv_t
        buf[:, 5] = last_use[tensor] * inv_t
        buf[:, 6] = (last_use[tensor] - def_time[tensor]) * inv_t
        demand = tb.buf_demand
        buf[:, 7] = np.log1p(demand / mean_supply) if per_supply else _log1p_rel(demand)
        if norm != 0.0 and math.isfinite(norm):
            buf[:, 8] = np.clip(benefit * (num_b / norm), -1.0, 10.0)
        top = float(np.abs(benefit).max())
        if top > 0.0:
            buf[:, 9] = benefit / top
        buf[:, 10] = live_out[tensor]
        buf[:, 11] = np.log2(group_size)
        buf[:, 12] = def_time[tensor] < 0
        buf[:, 13] = np.log1p(reads[tensor])
        buf[:, 14] = tb.buffer_has_bit
        buf[:, 15] = np.log1p(supply[target_time] / mean_supply) if per_supply else 0.0

    slow, fast, flops, nbytes = _instruction_latencies(instance)
    ins = np.zeros((num_t, len(INSTRUCTION_FEATURES)))
    if num_t:
        ins[:, 0] = _log1p_rel(slow)
        if norm != 0.0 and math.isfinite(norm):
            ins[:, 1] = np.clip((slow - fast) * (num_t / norm), -1.0, 10.0)
        ins[:, 2] = np.arange(num_t) * inv_t
        ins[:, 3] = np.log1p(tb.ins_float[:, 0])
        ins[:, 4] = _log1p_rel(flops)
        ins[:, 5] = _log1p_rel(supply)
        ins[:, 6] = np.log1p(np.diff(tb.ins_int[:, 1:3], axis=1)[:, 0])
        ins[:, 7] = tb.ins_int[:, 0] != 0
        ins[:, 8] = _log1p_rel(nbytes)

    ten = np.zeros((num_x, len(TENSOR_FEATURES)))
    if num_x:
        sizes = np.fromiter((x.size for x in instance.tensors), dtype=np.float64, count=num_x)
        align = float(max(tb.alignment, 1))
        ten[:, 0] = _log1p_rel(sizes)
        ten[:, 1] = np.minimum(np.ceil(sizes / align) * align / cap, 10.0)
        ten[:, 2] = def_time * inv_t
        ten[:, 3] = last_use * inv_t
        ten[:, 4] = (last_use - def_time) * inv_t
        ten[:, 5] = live_out
        ten[:, 6] = def_time < 0
        ten[:, 7] = np.log1p(reads)

    grp = np.zeros((len(groups), len(GROUP_FEATURES)))
    if len(groups):
        row = np.full(tb.num_groups, -1, dtype=np.int64)
        row[groups] = np.arange(len(groups))
        member_row = row[tb.buffer_group]
        has = member_row >= 0
        first = np.full(len(groups), np.inf)
        last = np.full(len(groups), -np.inf)
        biggest = np.zeros(len(groups))
        np.minimum.at(first, member_row[has], target_time[has])
        np.maximum.at(last, member_row[has], target_time[has])
        np.maximum.at(biggest, member_row[has], aligned[has])
        pairs = np.unique(np.stack([member_row[has], tensor[has]], axis=1), axis=0)
        grp[:, 0] = np.log2(tb.group_size[groups])
        grp[:, 1] = first * inv_t
        grp[:, 2] = last * inv_t
        grp[:, 3] = np.minimum(biggest / cap, 10.0)
        grp[:, 4] = np.log1p(np.bincount(pairs[:, 0], minlength=len(groups)))

    blocks = (buf, ins, ten, grp)
    out = np.zeros((sum(len(b) for b in blocks), NUM_FEATURES), dtype=np.float32)
    start = 0
    for kind, block in enumerate(blocks):
        stop = start + len(block)
        out[start:stop, : block.shape[1]] = _standardize(block)
        out[start:stop, _WIDTH + kind] = 1.0
        start = stop
    return out


def _chain_edges(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two-hop stand-in: each node's neighbours (by ``src → dst`` edges, read as
    undirected) joined consecutively in node-id order, both ways, duplicates dropped."""
    if src.size == 0:
        empty = np.zeros(0, dtype=np.int32)
        return empty, empty
    order = np.lexsort((dst, src))  # neighbours of each node, sorted
    hub, nbr = src[order], dst[order]
    same = hub[1:] == hub[:-1]
    a, b = nbr[:-1][same], nbr[1:][same]
    keep = a != b
    a, b = a[keep], b[keep]
    pairs = np.unique(np.concatenate([np.stack([a, b], 1), np.stack([b, a], 1)]), axis=0)
    return pairs[:, 0].astype(np.int32), pairs[:, 1].astype(np.int32)


def build_graph(instance: Instance, tables: GameTables) -> ProgramGraph:
    """The graph of ``instance`` (module docstring); O(B + T + X) plus sorting."""
    tb = tables
    num_b, num_t, num_x = tb.num_buffers, tb.num_instructions, tb.num_tensors
    groups = np.flatnonzero(tb.group_size > 1)
    group_node = np.full(tb.num_groups, -1, dtype=np.int64)
    group_node[groups] = num_b + num_t + num_x + np.arange(len(groups))
    num_nodes = num_b + num_t + num_x + len(groups)

    buffers = np.arange(num_b, dtype=np.int64)
    ins_node = num_b + tb.buffer_time
    ten_node = num_b + num_t + tb.buffer_tensor
    grp_node = group_node[tb.buffer_group]
    in_group = grp_node >= 0
    steps = np.arange(max(num_t - 1, 0), dtype=np.int64) + num_b
    parts = [
        (ins_node, buffers, INS_BUF),
        (buffers, ins_node, BUF_INS),
        (ten_node, buffers, TEN_BUF),
        (buffers, ten_node, BUF_TEN),
        (grp_node[in_group], buffers[in_group], GRP_BUF),
        (buffers[in_group], grp_node[in_group], BUF_GRP),
        (steps, steps + 1, NEXT),
        (steps + 1, steps, PREV),
    ]
    src = np.concatenate([p[0] for p in parts]).astype(np.int32)
    dst = np.concatenate([p[1] for p in parts]).astype(np.int32)
    rel = np.concatenate([np.full(len(p[0]), p[2], dtype=np.int32) for p in parts])
    src2, dst2 = _chain_edges(src, dst)
    features = node_features(instance, tables, groups)
    node_type = np.concatenate(
        [
            np.zeros(num_b, np.int8),
            np.ones(num_t, np.int8),
            np.full(num_x, 2, np.int8),
            np.full(len(groups), 3, np.int8),
        ]
    )
    return ProgramGraph(num_b, num_nodes, features, node_type, src, dst, rel, src2, dst2)


def _pad_edges(
    src: np.ndarray, dst: np.ndarray, rel: np.ndarray, size: int, sink: int
) -> dict[str, np.ndarray]:
    n = src.shape[0]
    out = {
        "src": np.full(size, sink, dtype=np.int32),
        "dst": np.full(size, sink, dtype=np.int32),
        "rel": np.zeros(size, dtype=np.int32),
        "mask": np.zeros(size, dtype=np.float32),
    }
    out["src"][:n], out["dst"][:n], out["rel"][:n], out["mask"][:n] = src, dst, rel, 1.0
    return out


def pad_graph(graph: ProgramGraph) -> dict[str, np.ndarray]:
    """The network input: ``graph`` padded to bucket sizes (module docstring).

    Keys: ``x`` float32 [N', F]; ``node_mask`` float32 [N']; ``units`` float32 [U']
    (1 for a real buffer); level-0 edges ``src``, ``dst``, ``rel``, ``mask`` [E'];
    edges of the pooled levels (one-hop and two-hop) ``all_src``, ``all_dst``,
    ``all_rel``, ``all_mask`` [E2']. ``N' > N`` (there is always a padding node to
    send padding edges to) and ``U' <= N'``.
    """
    n = graph.num_nodes
    n_pad = bucket(n + 1)
    u_pad = bucket(graph.num_units)
    sink = n_pad - 1
    x = np.zeros((n_pad, NUM_FEATURES), dtype=np.float32)
    x[:n] = graph.features
    node_mask = np.zeros(n_pad, dtype=np.float32)
    node_mask[:n] = 1.0
    units = np.zeros(u_pad, dtype=np.float32)
    units[: graph.num_units] = 1.0
    level0 = _pad_edges(graph.src, graph.dst, graph.rel, bucket(graph.num_edges), sink)
    all_src = np.concatenate([graph.src, graph.src2])
    all_dst = np.concatenate([graph.dst, graph.dst2])
    all_rel = np.concatenate([graph.rel, np.full(graph.src2.shape[0], TWO_HOP, dtype=np.int32)])
    pooled = _pad_edges(all_src, all_dst, all_rel, bucket(all_src.shape[0]), sink)
    return {
        "x": x,
        "node_mask": node_mask,
        "units": units,
        **level0,
        **{f"all_{k}": v for k, v in pooled.items()},
    }
