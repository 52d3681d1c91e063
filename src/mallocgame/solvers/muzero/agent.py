"""A trained agent as the start of a run: the network of a ``muzero`` checkpoint.

The networks see a program only through its observation (fixed sizes, set by
``observation``) and the three actions, so the parameters trained on one program, or
on many (:mod:`~mallocgame.solvers.muzero.shared`), are a start for any other.
:func:`load_agent_params` reads them from a checkpoint (its file, or the folder that
holds it) written by the one-program trainer, the shared trainer or a distributed run,
and refuses, with a :class:`~mallocgame.errors.SolverError` naming the settings, an
agent whose network is another shape (:data:`NETWORK_FIELDS`); :func:`check_agent` does
the same from the fingerprint alone, without reading the network. Only the network
travels: the optimizer state, the replay and the answers stay with the run that wrote it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from mallocgame.errors import SolverError
from mallocgame.solvers import checkpoint
from mallocgame.solvers.muzero.config import MuZeroConfig

__all__ = [
    "NETWORK_FIELDS",
    "AGENT_TRAINERS",
    "AGENT_NAME",
    "agent_checkpoint",
    "check_agent",
    "load_agent_params",
    "write_agent",
]

AGENT_NAME = "agent.msgpack"
"""A shared run's network alone (about 1 MB with the default sizes) beside its checkpoint
(which holds the replay too: 100 MB and more): what to copy to start runs elsewhere."""

NETWORK_FIELDS = (
    "latent_size",
    "width",
    "conv_channels",
    "support_size",
    "support_max",
    "value_scale",
    "observation",
)
"""Settings an agent and the run it starts must share: the networks' shapes, and what
their value and reward atoms mean."""

AGENT_TRAINERS = ("muzero", "muzero-shared")
"""The trainers whose checkpoints hold an agent (:func:`~mallocgame.solvers.checkpoint.
written_by` their fingerprint)."""


def agent_checkpoint(path: str | Path) -> Path:
    """The file ``path`` names: itself, or in the folder its :data:`AGENT_NAME` where it
    has one, else its checkpoint."""
    found = Path(path)
    if found.is_dir():
        agent = found / AGENT_NAME
        found = agent if agent.is_file() else found / checkpoint.CHECKPOINT_NAME
    if not found.is_file():
        raise SolverError(f"init {path}: no muzero checkpoint there")
    return found


def write_agent(folder: Path, fingerprint: dict[str, Any], params: Any) -> None:
    """Write ``params`` with the ``fingerprint`` of the run that trained them (its
    trainer's name included) as ``folder``'s :data:`AGENT_NAME`, atomically."""
    from flax import serialization

    from mallocgame.fileio import write_bytes_atomic

    folder.mkdir(parents=True, exist_ok=True)
    state = {"fingerprint": fingerprint, "params": serialization.to_state_dict(params)}
    write_bytes_atomic(folder / AGENT_NAME, serialization.msgpack_serialize(state))


def _network_settings(settings: dict[str, Any]) -> dict[str, str]:
    return {name: json.dumps(settings.get(name), sort_keys=True) for name in NETWORK_FIELDS}


def _check_fingerprint(file: Path, fingerprint: Any, config: MuZeroConfig) -> None:
    """Refuse an agent whose ``fingerprint`` is not a muzero trainer's or whose network
    differs from ``config``'s (:func:`load_agent_params`' first checks)."""
    trainer = checkpoint.written_by(fingerprint)
    if trainer not in AGENT_TRAINERS:
        raise SolverError(f"init {file}: not a muzero agent's checkpoint (written by {trainer})")
    try:
        theirs = json.loads(fingerprint.get("config", "{}"))
    except (TypeError, ValueError):
        theirs = None
    if not isinstance(theirs, dict):
        raise SolverError(f"init {file}: its settings are unreadable (not a JSON object)")
    ours = _network_settings(json.loads(json.dumps(dataclasses.asdict(config))))
    differ = [
        f"{name} {json.loads(value)} (this run: {json.loads(ours[name])})"
        for name, value in _network_settings(theirs).items()
        if value != ours[name]
    ]
    if differ:
        raise SolverError(f"init {file}: the agent's network differs: " + "; ".join(differ))


def check_agent(path: str | Path, config: MuZeroConfig) -> Path:
    """The file of the agent at ``path`` (:func:`agent_checkpoint`), refused as
    :func:`load_agent_params` refuses a missing or unreadable file, a checkpoint of another
    trainer, unreadable settings or another network, from its fingerprint alone (the
    network is not read, nor JAX imported: its arrays are checked when it is loaded)."""
    file = agent_checkpoint(path)
    _check_fingerprint(file, checkpoint.read_fingerprint(file), config)
    return file


def load_agent_params(path: str | Path, config: MuZeroConfig, template: Any) -> Any:
    """The network parameters of the agent at ``path`` in the structure of ``template``
    (a freshly initialized network of ``config``), as JAX arrays.

    Raises :class:`SolverError` for a missing or unreadable file, a checkpoint of
    another trainer, settings that are not a JSON object, an agent whose
    :data:`NETWORK_FIELDS` differ from ``config``'s, or parameters that are not a mapping
    of floating-point arrays of ``template``'s structure and shapes (they are cast to
    ``template``'s dtypes).
    """
    import jax
    from flax import serialization

    file = agent_checkpoint(path)
    state = checkpoint.restore_checkpoint(file, {}, "", trainer=None)
    _check_fingerprint(file, state.get("fingerprint", {}), config)
    if "params" not in state:
        raise SolverError(f"init {file}: not a muzero agent's checkpoint (no network in it)")
    if not isinstance(state["params"], dict):
        raise SolverError(f"init {file}: its network is unreadable (not a mapping of arrays)")
    try:
        params = serialization.from_state_dict(template, state["params"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SolverError(f"init {file}: its network does not fit this run's ({exc})") from None
    wanted, structure = jax.tree_util.tree_flatten(template)
    leaves, found = jax.tree_util.tree_flatten(params)
    shapes = [np.shape(leaf) for leaf in leaves]
    if str(found) != str(structure) or shapes != [np.shape(like) for like in wanted]:
        raise SolverError(f"init {file}: its network's arrays are other shapes than this run's")
    for dtype in (np.asarray(leaf).dtype for leaf in leaves):
        if not np.issubdtype(dtype, np.floating):
            raise SolverError(f"init {file}: its network's arrays are {dtype}, not floating point")
    cast = [np.asarray(leaf, dtype=like.dtype) for leaf, like in zip(leaves, wanted)]
    return checkpoint.device_arrays(jax.tree_util.tree_unflatten(structure, cast))
