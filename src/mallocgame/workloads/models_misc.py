"""Other model programs: an AlphaTensor-style factorised matrix multiplication chain, a
message-passing graph network, a DLRM recommender training step and a diffusion
(DDIM) sampler.

Registered in :mod:`mallocgame.workloads.models` (see there for the conventions).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from mallocgame.workloads import models_common as mc

__all__ = [
    "PROGRAMS",
    "STRASSEN",
    "kron_factors",
    "GraphNetwork",
    "DLRM",
    "DDIMSampler",
]


# --------------------------------------------------------------------------- AlphaTensor

# Strassen's rank-7 factorisation of the 2x2 matrix multiplication tensor, in the
# (U, V, W) form AlphaTensor outputs: block i of A is row-major (A11, A12, A21, A22),
# product r is (sum_i U[i, r] A_i) @ (sum_j V[j, r] B_j), C_k = sum_r W[k, r] M_r.
STRASSEN = (
    np.array(
        [
            [1, 0, 1, 0, 1, -1, 0],
            [0, 0, 0, 0, 1, 0, 1],
            [0, 1, 0, 0, 0, 1, 0],
            [1, 1, 0, 1, 0, 0, -1],
        ]
    ),
    np.array(
        [
            [1, 1, 0, -1, 0, 1, 0],
            [0, 0, 1, 0, 0, 1, 0],
            [0, 0, 0, 1, 0, 0, 1],
            [1, 0, -1, 0, 1, 0, 1],
        ]
    ),
    np.array(
        [
            [1, 0, 0, 1, -1, 0, 1],
            [0, 0, 1, 0, 1, 0, 0],
            [0, 1, 0, 1, 0, 0, 0],
            [1, -1, 1, 0, 0, 1, 0],
        ]
    ),
)


def kron_factors(
    f: tuple[np.ndarray, ...], g: tuple[np.ndarray, ...], n: int = 2, m: int = 2
) -> tuple[np.ndarray, ...]:
    """The factorisation of the (n*m)x(n*m) product from those of n x n (``f``) and m x m (``g``).

    Block (r, c) of the big matrix, r = r1*m + r2, is inner block (r2, c2) of outer
    block (r1, c1); its factor row is the outer row times the inner row (Kronecker).
    """
    size = n * m
    out = []
    for a, b in zip(f, g):
        k = np.zeros((size * size, a.shape[1] * b.shape[1]), a.dtype)
        for r in range(size):
            for c in range(size):
                outer, inner = (r // m) * n + c // m, (r % m) * m + c % m
                k[r * size + c] = np.kron(a[outer], b[inner])
        out.append(k)
    return tuple(out)


def factorized_matmul(a: jax.Array, b: jax.Array, factors: tuple[np.ndarray, ...]) -> jax.Array:
    """``a @ b`` by a tensor factorisation (U, V, W) of the n x n block product (rank R: R matmuls)."""
    u, v, w = factors
    n = int(round(np.sqrt(u.shape[0])))
    bs = a.shape[0] // n

    def blocks(x: jax.Array) -> list[jax.Array]:
        return [x[i * bs : (i + 1) * bs, j * bs : (j + 1) * bs] for i in range(n) for j in range(n)]

    a_blocks, b_blocks = blocks(a), blocks(b)

    def combine(coeffs: np.ndarray, parts: list[jax.Array]) -> jax.Array:
        terms = [float(c) * p for c, p in zip(coeffs, parts) if c != 0]
        return sum(terms[1:], terms[0])

    products = [combine(u[:, r], a_blocks) @ combine(v[:, r], b_blocks) for r in range(u.shape[1])]
    c_blocks = [combine(w[k], products) for k in range(n * n)]
    rows = [jnp.concatenate(c_blocks[i * n : (i + 1) * n], axis=1) for i in range(n)]
    return jnp.concatenate(rows, axis=0)


def _factorized_chain(size: int, concrete: bool, divisor: float = 1.0) -> mc.Built:
    """``M0 @ M1 @ M2 @ M3`` of ``size`` x ``size`` matrices by the rank-49 factorisation of the 4x4
    block product, with the plain chain and the relative error: ``mats -> (product, error)``.

    Concrete matrices are standard normal divided by ``divisor``.
    """
    factors = kron_factors(STRASSEN, STRASSEN)  # rank 49 for 4x4 blocks (Strassen squared)
    rng = np.random.default_rng(mc.SEED)
    mats = mc._floats(rng, (4, size, size), concrete)
    if concrete and divisor != 1.0:
        mats = mats / divisor

    def chain(mats):
        """``M0 @ M1 @ M2 @ M3`` by the rank-49 algorithm (3 x 49 block matmuls), and its error."""
        out, ref = mats[0], mats[0]
        for i in range(1, mats.shape[0]):
            out = factorized_matmul(out, mats[i], factors)
            ref = ref @ mats[i]
        return out, jnp.sqrt(jnp.sum((out - ref) ** 2) / jnp.sum(ref**2))

    return chain, (mats,), {}


def _alphatensor_matmul(concrete: bool) -> mc.Built:
    return _factorized_chain(256, concrete, divisor=16.0)


# --------------------------------------------------------------------------- graph network


class _MLP(nn.Module):
    sizes: tuple[int, ...]
    layer_norm: bool = True

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for i, s in enumerate(self.sizes):
            x = nn.Dense(s)(x)
            if i + 1 < len(self.sizes):
                x = nn.relu(x)
        return nn.LayerNorm()(x) if self.layer_norm else x


class _MessagePassing(nn.Module):
    """One interaction-network round: edge update from (edge, sender, receiver), sum to nodes."""

    hidden: int

    @nn.compact
    def __call__(
        self, carry: tuple[jax.Array, jax.Array], graph: tuple[jax.Array, jax.Array]
    ) -> tuple[tuple[jax.Array, jax.Array], None]:
        nodes, edges = carry
        senders, receivers = graph
        msg = jnp.concatenate(
            [edges, jnp.take(nodes, senders, axis=0), jnp.take(nodes, receivers, axis=0)], -1
        )
        edges = edges + _MLP((self.hidden, self.hidden), name="edge")(msg)
        agg = jax.ops.segment_sum(edges, receivers, num_segments=nodes.shape[0])
        nodes = nodes + _MLP((self.hidden, self.hidden), name="node")(
            jnp.concatenate([nodes, agg], -1)
        )
        return (nodes, edges), None


class GraphNetwork(nn.Module):
    """Encode-process-decode graph network; the process rounds are a scan with per-round weights."""

    hidden: int = 64
    rounds: int = 10
    num_graphs: int = 16
    outputs: int = 4

    @nn.compact
    def __call__(self, nodes, edges, senders, receivers, graph_ids):
        nodes = _MLP((self.hidden, self.hidden), name="node_encoder")(nodes)
        edges = _MLP((self.hidden, self.hidden), name="edge_encoder")(edges)
        process = nn.scan(
            _MessagePassing,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            in_axes=nn.broadcast,
            length=self.rounds,
        )
        (nodes, _), _ = process(self.hidden, name="processor")((nodes, edges), (senders, receivers))
        per_node = _MLP((self.hidden, self.outputs), layer_norm=False, name="node_decoder")(nodes)
        pooled = jax.ops.segment_sum(nodes, graph_ids, num_segments=self.num_graphs)
        counts = jax.ops.segment_sum(
            jnp.ones_like(graph_ids, nodes.dtype), graph_ids, num_segments=self.num_graphs
        )
        per_graph = _MLP((self.hidden, 1), layer_norm=False, name="graph_decoder")(
            pooled / counts[:, None]
        )
        return per_node, per_graph[:, 0]


def _graph_infer(
    model: GraphNetwork,
    n_nodes: int,
    n_edges: int,
    node_features: int,
    edge_features: int,
    concrete: bool,
    *,
    contiguous_graphs: bool = True,
) -> mc.Built:
    """``model`` on one batch of ``model.num_graphs`` graphs: ``n_nodes`` nodes and ``n_edges``
    random edges, float32 node and edge features, and each node's graph id.

    ``contiguous_graphs``: concrete graph ids split the nodes into equal contiguous graphs;
    else they are drawn at random.
    """
    rng = np.random.default_rng(mc.SEED)
    nodes = mc._floats(rng, (n_nodes, node_features), concrete)
    edges = mc._floats(rng, (n_edges, edge_features), concrete)
    senders = mc._ints(rng, (n_edges,), n_nodes, concrete)
    receivers = mc._ints(rng, (n_edges,), n_nodes, concrete)
    if concrete and contiguous_graphs:
        graph_ids = jax.device_put(
            np.arange(n_nodes, dtype=np.int32) // (n_nodes // model.num_graphs)
        )
    else:
        graph_ids = mc._ints(rng, (n_nodes,), model.num_graphs, concrete)
    inputs = (nodes, edges, senders, receivers, graph_ids)
    examples = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in inputs)
    params = mc._model_params(model, examples, concrete, rng)

    def infer(params, nodes, edges, senders, receivers, graph_ids):
        return mc._forward(model, {"params": params}, nodes, edges, senders, receivers, graph_ids)

    return infer, (params, *inputs), {}


def _gnn_infer(concrete: bool) -> mc.Built:
    return _graph_infer(GraphNetwork(), 1024, 4096, 16, 8, concrete)


# --------------------------------------------------------------------------- DLRM


class DLRM(nn.Module):
    """DLRM: bottom MLP on dense features, summed embedding bags, pairwise dot interaction, top MLP."""

    table_sizes: tuple[int, ...] = (4096, 2048, 8192, 1024, 4096, 512, 16384, 2048)
    dim: int = 32
    bottom: tuple[int, ...] = (64,)  # hidden widths of the bottom MLP (its output is ``dim``)
    top: tuple[int, ...] = (128, 64)  # hidden widths of the top MLP (its output is 1)

    @nn.compact
    def __call__(
        self, dense: jax.Array, sparse: jax.Array
    ) -> jax.Array:  # sparse: [batch, tables, bag]
        x = _MLP((*self.bottom, self.dim), layer_norm=False, name="bottom")(dense)
        x = nn.relu(x)
        bags = [
            jnp.sum(nn.Embed(n, self.dim, name=f"table{t}")(sparse[:, t]), axis=1)
            for t, n in enumerate(self.table_sizes)
        ]
        feats = jnp.stack([x, *bags], axis=1)  # [batch, 1 + tables, dim]
        z = jnp.einsum("bid,bjd->bij", feats, feats)
        i, j = np.triu_indices(feats.shape[1], k=1)
        top_in = jnp.concatenate([x, z[:, i, j]], axis=-1)
        return _MLP((*self.top, 1), layer_norm=False, name="top")(top_in)[:, 0]


def _dlrm_program(model: DLRM, batch: int, bag: int, concrete: bool) -> mc.Built:
    """A DLRM training step at ``batch``: 13 dense features and ``bag`` ids a table, binary
    cross-entropy, Adagrad; params and optimizer state donated (``donate_argnums=(0, 1)``)."""
    tx = optax.adagrad(0.01)
    rng = np.random.default_rng(mc.SEED)
    dense = mc._floats(rng, (batch, 13), concrete)
    sparse = mc._ints(rng, (batch, len(model.table_sizes), bag), min(model.table_sizes), concrete)
    labels = mc._ints(rng, (batch,), 2, concrete)
    examples = (
        jax.ShapeDtypeStruct((1, 13), jnp.float32),
        jax.ShapeDtypeStruct((1, len(model.table_sizes), bag), jnp.int32),
    )
    params = mc._model_params(model, examples, concrete, rng)
    opt_state = mc._opt_state(tx, params, concrete)

    def train_step(params, opt_state, dense, sparse, labels):
        def loss_fn(p):
            logits = mc._forward(model, {"params": p}, dense, sparse)
            return optax.sigmoid_binary_cross_entropy(logits, labels.astype(jnp.float32)).mean()

        return mc._gradient_step(tx, loss_fn, params, opt_state)

    return train_step, (params, opt_state, dense, sparse, labels), {"donate_argnums": (0, 1)}


def _dlrm_train(concrete: bool) -> mc.Built:
    return _dlrm_program(DLRM(), 256, 4, concrete)


# --------------------------------------------------------------------------- diffusion


class _Denoiser(nn.Module):
    """Conv U-Net (two levels, ``width`` and ``2 * width`` channels) predicting the noise,
    with a sinusoidal time embedding."""

    width: int = 32

    @nn.compact
    def __call__(self, x: jax.Array, t: jax.Array) -> jax.Array:
        w = self.width
        freqs = jnp.exp(-jnp.log(10_000.0) * jnp.arange(16) / 16)
        emb = jnp.concatenate([jnp.sin(t * freqs), jnp.cos(t * freqs)])[None]
        emb = nn.Dense(2 * w)(nn.silu(nn.Dense(2 * w)(emb)))
        h1 = nn.silu(nn.Conv(w, (3, 3), padding="SAME")(x))
        h2 = nn.silu(
            nn.Conv(2 * w, (3, 3), strides=(2, 2), padding="SAME")(h1) + emb[:, None, None]
        )
        h2 = nn.silu(nn.GroupNorm(8)(nn.Conv(2 * w, (3, 3), padding="SAME")(h2)))
        up = nn.ConvTranspose(w, (2, 2), strides=(2, 2))(h2)
        h = nn.silu(nn.Conv(w, (3, 3), padding="SAME")(jnp.concatenate([up, h1], -1)))
        return nn.Conv(x.shape[-1], (3, 3), padding="SAME")(h)


class _DDIMStep(nn.Module):
    width: int = 32

    @nn.compact
    def __call__(
        self, x: jax.Array, step: tuple[jax.Array, jax.Array, jax.Array]
    ) -> tuple[jax.Array, None]:
        t, a, a_prev = step
        eps = _Denoiser(self.width, name="denoiser")(x, t)
        x0 = jnp.clip((x - jnp.sqrt(1 - a) * eps) / jnp.sqrt(a), -1.0, 1.0)
        return jnp.sqrt(a_prev) * x0 + jnp.sqrt(1 - a_prev) * eps, None


class DDIMSampler(nn.Module):
    """Deterministic DDIM sampling (eta 0) over a fixed schedule: one scan of denoiser calls."""

    steps: int = 20
    train_steps: int = 1000
    width: int = 32  # the denoiser's channels at full resolution

    @nn.compact
    def __call__(self, noise: jax.Array) -> jax.Array:
        betas = np.linspace(1e-4, 0.02, self.train_steps)
        alpha_bar = np.cumprod(1 - betas)
        ts = np.linspace(self.train_steps - 1, 0, self.steps).round().astype(int)
        prev = np.append(alpha_bar[ts[1:]], 1.0)
        schedule = (
            jnp.asarray(ts, jnp.float32),
            jnp.asarray(alpha_bar[ts], jnp.float32),
            jnp.asarray(prev, jnp.float32),
        )
        sample = nn.scan(_DDIMStep, variable_broadcast="params", split_rngs={"params": False})
        x, _ = sample(self.width, name="ddim")(noise, schedule)
        return x


def _sampler(model: DDIMSampler, noise_shape: tuple[int, ...], concrete: bool) -> mc.Built:
    """Sampling from float32 noise of ``noise_shape`` (batch first): ``(params, noise) -> samples``."""
    rng = np.random.default_rng(mc.SEED)
    x0 = jax.ShapeDtypeStruct((1, *noise_shape[1:]), jnp.float32)
    params = mc._model_params(model, (x0,), concrete, rng)
    noise = mc._floats(rng, noise_shape, concrete)

    def sample(params, noise):
        return mc._forward(model, {"params": params}, noise)

    return sample, (params, noise), {}


def _diffusion_sampler(concrete: bool) -> mc.Built:
    return _sampler(DDIMSampler(), (8, 32, 32, 3), concrete)


PROGRAMS = [
    mc.ModelProgram(
        "alphatensor_matmul",
        "AlphaTensor-style matrix multiplication: the chain M0 @ M1 @ M2 @ M3 of "
        "256x256 matrices, each product by a rank-49 factorisation (U, V, W) of the "
        "4x4 block product (Strassen squared: 49 block matmuls of 64x64 on linear "
        "combinations of blocks, outputs recombined), plus the plain chain and the "
        "relative error",
        _alphatensor_matmul,
    ),
    mc.ModelProgram(
        "gnn_infer",
        "encode-process-decode graph network (1024 nodes, 4096 edges, hidden 64): "
        "10 message-passing rounds as a scan with per-round weights (gather of "
        "sender/receiver features, edge MLP, segment_sum to receivers, node MLP, "
        "residuals and LayerNorm), per-node outputs and a segment-mean readout "
        "over 16 graphs",
        _gnn_infer,
        loops=True,
    ),
    mc.ModelProgram(
        "dlrm_train",
        "DLRM recommender training step at batch 256: bottom MLP (13-64-32) on "
        "dense features, 8 embedding tables (512 to 16384 rows, dim 32) summed over "
        "bags of 4 ids, pairwise dot interaction, top MLP (128-64-1), binary "
        "cross-entropy, Adagrad; params and optimizer state donated "
        "(donate_argnums=(0, 1)), so the tables update in place",
        _dlrm_train,
        training=True,
    ),
    mc.ModelProgram(
        "diffusion_sampler",
        "DDIM diffusion sampling (20 deterministic steps as a scan over the "
        "schedule) with a small conv U-Net denoiser (32/64 channels, GroupNorm, "
        "transposed-conv up path, sinusoidal time embedding) on 8 x 32x32x3 noise",
        _diffusion_sampler,
        loops=True,
    ),
]
