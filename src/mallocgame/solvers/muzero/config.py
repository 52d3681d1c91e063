"""The settings of MMap-MuZero: :class:`MuZeroConfig`, one frozen dataclass.

Every field is a setting of the ``muzero`` and ``muzero-nosearch`` solvers, given as
``--option KEY=VALUE`` (the observation's fields, an
:class:`~mallocgame.game.observe.ObservationConfig`, as ``observation.FIELD``), with a
default and a one-line doc; ``mallocgame solvers muzero`` prints them all. The defaults
are the paper's (appendix C, Table 6) where they fit a 2-core CPU and smaller where they
do not; the settings beyond Table 6 were each measured before they became defaults.
:data:`DEMONSTRATION_SOURCES` names the solvers that can be demonstrations;
:data:`WHERE_FIELDS` the settings of where and how often a run saves and reports, which
do not change what it computes.

Table 6 against the defaults, and the agent's design: docs/muzero.md. How each default
was chosen, with the measurements: docs/muzero-experiments.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mallocgame.game.observe import ObservationConfig
from mallocgame.options import check_ranges, setting

__all__ = [
    "MuZeroConfig",
    "MuZeroProdConfig",
    "DEFAULT_ACTORS",
    "DEMONSTRATION_SOURCES",
    "WHERE_FIELDS",
]

DEMONSTRATION_SOURCES = ("heuristic", "greedy", "es")
"""Solvers whose trajectories can be demonstrations (see ``reanalyse.py``)."""

WHERE_FIELDS = (
    "checkpoint_dir",
    "progress",
    "checkpoint_seconds",
    "progress_seconds",
    "ray",
    "actors",
)
"""Settings of where and how a run saves, reports and plays, not of what it learns: a
checkpoint resumes under other values of these (a one-process run's on a Ray cluster,
and back), and a sweep record leaves them out."""


DEFAULT_ACTORS = 2
"""Ray self-play actors when ``actors`` is not given (without ``ray``: the only value taken)."""


@dataclass(frozen=True)
class MuZeroConfig:
    """Everything that shapes an MMap-MuZero run (paper Table 6; docs/muzero.md)."""

    # --- self-play and search
    parallel_games: int = setting(
        16, "games played in one batch (one search call per move)", within="[1, 4096]"
    )
    search: Literal["gumbel", "muzero"] = setting(
        "gumbel", "the search: mctx.gumbel_muzero_policy or mctx.muzero_policy"
    )
    num_simulations: int = setting(
        16, "search simulations per move (paper: 400)", within="[1, 10000]"
    )
    discount: float = setting(0.9999, "reward discount per move", within="(0, 1]")
    init_temperature: float = setting(
        1.0, "muzero search: visit-count temperature at the start", within="[1e-3, 1e3]"
    )
    final_temperature: float = setting(
        0.2, "muzero search: visit-count temperature after the decay", within="[1e-3, 1e3]"
    )
    temperature_decay_steps: int = setting(
        400_000, "learner steps from the initial to the final temperature", within="[1, 1000000000]"
    )
    noise_fraction: float = setting(
        0.25, "muzero search: share of Dirichlet noise in the root prior", within="[0, 1]"
    )
    noise_alpha: float = setting(
        0.03, "muzero search: Dirichlet concentration of the root noise", within="[1e-3, 1e3]"
    )
    gumbel_scale: float = setting(
        1.0, "gumbel search: scale of the Gumbel noise (0: the top action)", within="[0, 100]"
    )
    rescale_q: bool = setting(
        False, "gumbel search: min-max normalize Q before sigma (mctx's default: true)"
    )
    greedy_games: int = setting(
        2, "games a batch that play the improved policy's argmax (no sampling)", within="[0, 4096]"
    )
    q_scale: float = setting(
        0.1, "gumbel search: c_scale of sigma(Q) = (50 + max N) c_scale Q", within="(0, 1e3]"
    )
    q_scale_per_buffer: float = setting(
        0.0,
        "> 0: c_scale is this times the program's buffers (replaces q_scale)",
        within="[0, 1e3]",
    )
    restart_fraction: float = setting(
        0.0,
        "share of sampled games started at a random state of the best game "
        "(self-play's, or a demonstration's until one beats it)",
        within="[0, 1]",
    )
    restart_window: int = setting(
        0,
        "> 0: a restarted game is searched for this many moves, then played out "
        "along the best game without search (needs restart_fraction > 0)",
        within="[0, 1000000000]",
    )
    window_records: bool = setting(
        False,
        "train on windowed restarts' searched moves too (records cut short, "
        "bootstrapped from the play-out's return; needs restart_window > 0)",
    )
    # --- targets
    value_scale: float = setting(
        10.0,
        "a whole game's return, in units of the reward normalizer, times this",
        within="(0, 1e6]",
    )
    td_steps: int = setting(100, "n of the n-step value targets, moves", within="[1, 1000000]")
    unroll_steps: int = setting(5, "K of the learned model's unroll, moves", within="[1, 100]")
    support_size: int = setting(
        41, "atoms of the categorical value and reward heads", within="[3, 10001]"
    )
    support_max: float = setting(
        20.0,
        "largest |scaled value| the atoms cover (before MuZero's transform)",
        within="(0, 1e6]",
    )
    # --- networks (the representation of paper Figure 4, CPU-sized)
    latent_size: int = setting(64, "width of the latent state", within="[1, 4096]")
    width: int = setting(
        128,
        "width of the hidden layers (half of it: the dynamics' inner layer)",
        within="[2, 8192]",
    )
    conv_channels: tuple[int, ...] = setting(
        (8, 16),
        "channels of the memory-map image's convolutions",
        within="[1, 1024]",
        length=(1, 8),
    )
    policy_init_bias: float = setting(
        0.0,
        "initial policy logits' bias: this times (1, 1/2, 0) for Copy, NoCopy, Drop",
        within="[-100, 100]",
    )
    observation: ObservationConfig = setting(
        factory=ObservationConfig, doc="sizes of the observation"
    )
    # --- learner
    batch_size: int = setting(64, "positions per learner step (paper: 512)", within="[1, 65536]")
    learning_rate: float = setting(1e-3, "AdamW learning rate (paper: 2e-4)", within="(0, 1]")
    weight_decay: float = setting(1e-4, "AdamW decoupled weight decay", within="[0, 1]")
    value_loss_weight: float = setting(0.25, "weight of the value loss", within="[0, 100]")
    replay_size: int = setting(
        20_000, "positions kept in the replay buffer", within="[1, 100000000]"
    )
    min_replay: int = setting(
        512, "positions in the replay buffer before the learner starts", within="[1, 100000000]"
    )
    train_every: int = setting(4, "self-play batch moves per learner step", within="[1, 1000000]")
    # --- Reanalyse (paper section 3, Table 6; see reanalyse.py)
    reanalyse_fraction: float = setting(
        0.5, "share of each batch drawn from the kept, reanalysed games (0: off)", within="[0, 1)"
    )
    demonstrations: tuple[str, ...] = setting(
        ("heuristic", "greedy", "es"),
        "solvers whose games are kept and reanalysed, never answers (empty: none)",
        length=(0, 3),
    )
    reanalyse_best: bool = setting(True, "keep and reanalyse the best self-play game")
    imitation: float = setting(
        0.5, "share of a kept game's policy target on the kept game's own action", within="[0, 1]"
    )
    es_share: float = setting(
        0.25,
        "demonstration es: its share of a wall-clock budget (played first); "
        "also the most the heuristic demonstration's repair may take",
        within="(0, 1)",
    )
    es_games: int = setting(
        2000,
        "demonstration es: its games when the run has no wall-clock budget",
        within="[1, 1000000000]",
    )
    es_workers: int = setting(2, "demonstration es: processes it plays on", within="[1, 256]")
    # --- a trained agent (docs/muzero.md, "One agent for many programs")
    init: str | None = setting(
        None,
        "start from a trained agent: a muzero checkpoint (file or folder, a shared "
        "agent's too) whose network settings match",
    )
    learning: bool = setting(
        True, "false: the network is never trained (an init agent plays zero-shot)"
    )
    # --- run control (never part of the compiled functions)
    ray: str | None = setting(
        None,
        "self-play on Ray actors (docs/muzero.md, 'Distributed training'): local "
        "(a one-node cluster started here), auto (the running cluster) or "
        "HOST:PORT; none: one process",
    )
    actors: int = setting(
        DEFAULT_ACTORS, "with ray: self-play actors, one CPU each", within="[1, 1024]"
    )
    checkpoint_seconds: float = setting(
        60.0, "seconds between checkpoints (and one at the end)", within="(0, 1e9]"
    )
    progress_seconds: float = setting(10.0, "seconds between progress lines", within="(0, 1e9]")
    eval_every: int = setting(
        200,
        "learner steps between no-search evaluation games (policy answer)",
        within="[1, 1000000000]",
    )
    checkpoint_dir: str | None = setting(
        None, "folder of checkpoints and best.solution.json; a run resumes from it"
    )
    progress: bool = setting(False, "print progress lines on stderr")

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.ray is None and self.actors != DEFAULT_ACTORS:
            raise ValueError(
                f"actors={self.actors} counts Ray's self-play actors: it needs ray (local, auto "
                "or HOST:PORT)"
            )
        if self.greedy_games > self.parallel_games:
            raise ValueError(
                f"greedy_games must be in [0, parallel_games], not {self.greedy_games}"
            )
        if self.restart_window > 0 and self.restart_fraction == 0:
            raise ValueError("restart_window windows restarts: it needs restart_fraction > 0")
        if self.window_records and self.restart_window == 0:
            raise ValueError(
                "window_records trains on windowed restarts: it needs restart_window > 0"
            )
        for name in self.demonstration_sources:
            if name not in DEMONSTRATION_SOURCES:
                raise ValueError(
                    f"unknown demonstration '{name}' (have: {', '.join(DEMONSTRATION_SOURCES)})"
                )
        if len(set(self.demonstration_sources)) < len(self.demonstration_sources):
            raise ValueError(
                f"demonstrations names one source twice: {','.join(self.demonstration_sources)}"
            )
        if self.min_replay > self.replay_size:
            raise ValueError(
                f"min_replay {self.min_replay} exceeds replay_size {self.replay_size}: the "
                "replay would never hold enough positions for the learner to start"
            )

    @property
    def demonstration_sources(self) -> tuple[str, ...]:
        """``demonstrations`` (empty when none). Demonstrations are trained on only
        through Reanalyse: with ``reanalyse_fraction`` 0 none is built."""
        return self.demonstrations

    def search_q_scale(self, num_buffers: int) -> float:
        """The ``c_scale`` of Gumbel MuZero's ``sigma(Q)`` for a program of ``num_buffers``."""
        if self.q_scale_per_buffer > 0:
            return self.q_scale_per_buffer * num_buffers
        return self.q_scale


@dataclass(frozen=True)
class MuZeroProdConfig(MuZeroConfig):
    """``muzero-prod``'s settings: :class:`MuZeroConfig`'s, with restarts inside the best
    game on by default (its agent only has to beat the heuristic's mapping, and on
    programs of thousands of buffers the restarted agent gets there where fresh games do
    not: docs/results.md, "muzero-prod at 60 s again"), and the heuristic's placement
    order searched after the agent (``order_search_*``: :mod:`mallocgame.solvers.order_search`)."""

    restart_fraction: float = setting(
        0.5,
        "share of sampled games started at a random state of the best game "
        "(self-play's, or a demonstration's until one beats it)",
        within="[0, 1]",
    )
    order_search_share: float = setting(
        0.25,
        "share of a wall-clock budget left, after the agent, to search the heuristic's "
        "placement order from its own and the agent's (msa-search; 0: none)",
        within="[0, 1)",
    )
    agent_min_seconds: float = setting(
        10.0,
        "with a wall-clock budget, the agent runs only where its share has this many seconds "
        "left (its setup, importing JAX and loading its compiled networks, takes seconds, and "
        "tens where they are compiled first): else the order search has its share (0: always)",
        within="[0, 1e6]",
    )
    order_search_evaluations: int = setting(
        200,
        "order-search evaluations after the agent when the run has no wall-clock budget (0: none)",
        within="[0, 1000000000]",
    )
    order_search_patience: float = setting(
        0.0,
        "> 0: with a wall-clock budget, the agent hands the rest of its share to the order "
        "search once its best answer has not improved for this share of the budget (0: the "
        "agent keeps its whole share; needs order_search_share > 0)",
        within="[0, 1]",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.order_search_patience > 0 and self.order_search_share == 0:
            raise ValueError(
                "order_search_patience hands the agent's rest to the order search: it needs "
                "order_search_share > 0"
            )
