"""EGRL's graph networks in flax: a small Graph U-Net, the actor, the twin critics.

**Graph convolution** (:class:`RelationalConv`): for every node, the mean of its
neighbours' embeddings over each relation of :data:`~.graph.RELATIONS` separately
(``jax.ops.segment_sum`` over ``destination · R + relation``, divided by the count),
then ``h' = relu(LayerNorm(W_self h + W_rel [mean_1, ..., mean_R]))``: a relational
GraphSAGE layer with mean aggregation. Edges with mask 0 carry nothing.

**Graph U-Net** (:class:`GraphUNet`, Gao & Ji, ICML 2019, the network EGRL uses):
``layers`` convolutions at level 0; then for each of ``pool_levels`` levels a gPool
(project every node on a learned vector ``p``, keep the top ``k = ceil(ratio · n)``
nodes, gate their embeddings by ``sigmoid(score)``) and ``layers`` convolutions on
the kept nodes, whose edges are the graph's one-hop and two-hop edges with both ends
kept; then back up: gUnpool (the kept nodes' embeddings put back in place, zeros
elsewhere) plus the level's skip connection and ``layers`` convolutions. All shapes
are static: dropped nodes and edges are masked, not removed.

**Heads**: :class:`Actor` maps each decision unit's embedding to 3 logits (Copy,
NoCopy, Drop; output layer initialized small, its bias at ``prior_bias · (1, 1/2,
0)``); :class:`Critic` to 3 Q-values ``Q_i(s, a_i)``. Every call runs on the whole
(padded) graph of :func:`~.graph.pad_graph` and returns ``[U', 3]`` (units padded).

**Initialization** (:func:`init_params`): in numpy, from a seeded generator, with the
initializers the modules declare (flax's defaults: truncated-normal LeCun kernels, zero
biases, unit LayerNorm scales; ``N(0, 1)`` pooling projections; the actor's output
layer as above). The parameter shapes come from ``jax.eval_shape`` on a tiny graph
(:func:`dummy_graph`), so no JAX computation is compiled to draw them: flax's own
``init`` compiles every operation of the network once per process (5 s on a 2-core
CPU), longer than a whole small run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from mallocgame.solvers.egrl.graph import NUM_FEATURES, NUM_RELATIONS

__all__ = [
    "RelationalConv",
    "GraphUNet",
    "Actor",
    "Critic",
    "NUM_ACTIONS",
    "init_params",
    "dummy_graph",
]

NUM_ACTIONS = 3
LOGITS_INIT_STD = 0.1
"""Standard deviation of the actor's output-layer kernel at initialization: the initial
logits stay near the bias ``prior_bias · (1, 1/2, 0)``, varying by unit."""
_TRUNCATED_STD = 0.87962566103423978  # std of N(0, 1) truncated to [-2, 2]

Graph = Mapping[str, jnp.ndarray]
Edges = tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray, jnp.ndarray]
"""A graph's edges as :class:`RelationalConv` takes them: source, destination, relation
and mask, each ``[E]``."""


class RelationalConv(nn.Module):
    """One relational mean-aggregation graph convolution: ``[n, H] → [n, H]``."""

    hidden: int

    @nn.compact
    def __call__(
        self,
        h: jnp.ndarray,
        src: jnp.ndarray,
        dst: jnp.ndarray,
        rel: jnp.ndarray,
        mask: jnp.ndarray,
    ) -> jnp.ndarray:
        """``h`` [n, H]; edges ``src``, ``dst`` (in ``0 .. n``; ``n`` is a dropped
        node), ``rel`` int [E] and ``mask`` float [E]."""
        n = h.shape[0]
        padded = jnp.concatenate([h, jnp.zeros((1, h.shape[1]), h.dtype)])  # row n: a dropped node
        segment = dst * NUM_RELATIONS + rel
        total = jax.ops.segment_sum(
            padded[src] * mask[:, None], segment, num_segments=(n + 1) * NUM_RELATIONS
        )
        count = jax.ops.segment_sum(mask, segment, num_segments=(n + 1) * NUM_RELATIONS)
        mean = (total / jnp.maximum(count, 1.0)[:, None])[: n * NUM_RELATIONS].reshape(n, -1)
        out = nn.Dense(self.hidden, name="self")(h) + nn.Dense(
            self.hidden, use_bias=False, name="neighbours"
        )(mean)
        return nn.relu(nn.LayerNorm(name="norm")(out))


class _GraphNetwork(nn.Module):
    """The graph U-Net's shape: ``hidden`` features, ``layers`` convolutions a level,
    ``pool_levels`` poolings each keeping ``pool_ratio`` of the nodes."""

    hidden: int
    layers: int
    pool_levels: int
    pool_ratio: float


class GraphUNet(_GraphNetwork):
    """Node embeddings ``[N', hidden]`` of a padded graph (module docstring)."""

    @nn.compact
    def __call__(self, g: Graph) -> jnp.ndarray:
        node_mask = g["node_mask"]
        h = nn.relu(nn.Dense(self.hidden, name="embed")(g["x"])) * node_mask[:, None]
        n0 = h.shape[0]
        edges = (g["src"], g["dst"], g["rel"], g["mask"])
        for i in range(self.layers):
            h = RelationalConv(self.hidden, name=f"down0_{i}")(h, *edges) * node_mask[:, None]
        # each level's (embeddings, edges, mask, size) before pooling, and the nodes it kept
        skips: list[tuple[jnp.ndarray, Edges, jnp.ndarray, int, jnp.ndarray]] = []
        # the node id at the current level of every original node (n: dropped)
        level_of = jnp.arange(n0)
        mask, size = node_mask, n0
        for level in range(1, self.pool_levels + 1):
            before = (h, edges, mask, size)
            k = max(1, int(math.ceil(self.pool_ratio * size)))
            p = self.param(f"pool{level}", nn.initializers.normal(1.0), (self.hidden,))
            score = h @ p / (jnp.linalg.norm(p) + 1e-8)
            _, keep = jax.lax.top_k(jnp.where(mask > 0, score, -jnp.inf), k)
            h = h[keep] * jax.nn.sigmoid(score[keep])[:, None]
            mask = mask[keep]
            new_id = (
                jnp.full(size + 1, k, dtype=jnp.int32).at[keep].set(jnp.arange(k, dtype=jnp.int32))
            )
            level_of = new_id[level_of]
            src, dst = level_of[g["all_src"]], level_of[g["all_dst"]]
            emask = g["all_mask"] * (src < k) * (dst < k)
            edges = (src, dst, g["all_rel"], emask)
            h = h * mask[:, None]
            for i in range(self.layers):
                h = RelationalConv(self.hidden, name=f"down{level}_{i}")(h, *edges) * mask[:, None]
            skips.append((*before, keep))
            size = k
        for level in range(self.pool_levels, 0, -1):
            h_skip, edges, mask, size, keep = skips[level - 1]
            h = jnp.zeros((size, self.hidden), h.dtype).at[keep].set(h) + h_skip
            for i in range(self.layers):
                h = (
                    RelationalConv(self.hidden, name=f"up{level - 1}_{i}")(h, *edges)
                    * mask[:, None]
                )
        return h


class _UnitHead(_GraphNetwork):
    """A head over the graph U-Net's embeddings of the decision units."""

    def unit_embeddings(self, g: Graph) -> jnp.ndarray:
        """``[U', hidden]``: the U-Net (named ``gnn``) on ``g``, its first ``U'`` nodes."""
        h = GraphUNet(self.hidden, self.layers, self.pool_levels, self.pool_ratio, name="gnn")(g)
        return h[: g["units"].shape[0]]


class Actor(_UnitHead):
    """Logits ``[U', 3]`` of Copy, NoCopy, Drop for every (padded) decision unit.
    ``prior_bias`` is read only by flax's ``init`` (:func:`init_params` takes its own)."""

    prior_bias: float = 0.0

    @nn.compact
    def __call__(self, g: Graph) -> jnp.ndarray:
        h = self.unit_embeddings(g)
        bias = self.prior_bias * jnp.array([1.0, 0.5, 0.0])
        return nn.Dense(
            NUM_ACTIONS,
            kernel_init=nn.initializers.normal(LOGITS_INIT_STD),
            bias_init=lambda *_: bias,
            name="logits",
        )(h)


class Critic(_UnitHead):
    """``Q_i(s, a_i)`` ``[U', 3]``: each unit's value of each action, given the graph."""

    @nn.compact
    def __call__(self, g: Graph) -> jnp.ndarray:
        h = self.unit_embeddings(g)
        h = nn.relu(nn.Dense(self.hidden, name="head")(h))
        return nn.Dense(NUM_ACTIONS, name="q")(h)


def dummy_graph() -> dict[str, np.ndarray]:
    """A tiny padded graph: the parameter shapes do not depend on the graph's size."""
    n, e = 8, 8
    zeros_i = np.zeros(e, np.int32)
    return {
        "x": np.zeros((n, NUM_FEATURES), np.float32),
        "node_mask": np.ones(n, np.float32),
        "units": np.ones(4, np.float32),
        "src": zeros_i,
        "dst": zeros_i,
        "rel": zeros_i,
        "mask": np.zeros(e, np.float32),
        "all_src": zeros_i,
        "all_dst": zeros_i,
        "all_rel": zeros_i,
        "all_mask": np.zeros(e, np.float32),
    }


def _truncated_normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """``N(0, 1)`` restricted to ``[-2, 2]`` (by redrawing), float64."""
    out = rng.standard_normal(shape)
    bad = np.abs(out) > 2.0
    while bad.any():
        out[bad] = rng.standard_normal(int(bad.sum()))
        bad = np.abs(out) > 2.0
    return out


def init_params(module: nn.Module, rng: np.random.Generator, prior_bias: float = 0.0) -> dict:
    """Parameters of ``module`` (an :class:`Actor` or :class:`Critic`) drawn in numpy
    from ``rng`` (module docstring): a pytree of float32 arrays, leaves in flax's order."""
    shapes = jax.eval_shape(module.init, jax.random.PRNGKey(0), dummy_graph())

    def leaf(path: tuple, spec: jax.ShapeDtypeStruct) -> np.ndarray:
        names = [getattr(k, "key", str(k)) for k in path]
        name, owner = names[-1], names[-2] if len(names) > 1 else ""
        shape = tuple(spec.shape)
        if name == "kernel" and owner == "logits":
            value = LOGITS_INIT_STD * rng.standard_normal(shape)
        elif name == "kernel":  # flax's default: lecun_normal, a truncated normal
            value = _truncated_normal(rng, shape) * (1.0 / math.sqrt(shape[0])) / _TRUNCATED_STD
        elif name == "bias" and owner == "logits":
            value = prior_bias * np.array([1.0, 0.5, 0.0])
        elif name == "bias":
            value = np.zeros(shape)
        elif name == "scale":
            value = np.ones(shape)
        elif name.startswith("pool"):
            value = rng.standard_normal(shape)
        else:  # a parameter this function does not know: a bug in the networks, not input
            raise TypeError(f"no initializer for parameter {'/'.join(names)}")
        return np.asarray(value, dtype=np.float32)

    return jax.tree_util.tree_map_with_path(leaf, shapes)
