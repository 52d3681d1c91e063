"""The settings of ``egrl``: :class:`EgrlConfig`, one frozen dataclass.

Every field is a setting given as ``--option KEY=VALUE`` with a default and a one-line
doc (``mallocgame solvers egrl`` prints them). :data:`WHERE_FIELDS` names the settings
of where and how often a run saves and reports: they do not change what it computes,
so a checkpoint resumes under other values of them and a sweep record leaves them out.

The defaults are sized for a 2-core CPU (the papers ran populations of about 20 on
many cores with a GPU learner); docs/egrl.md gives the reasons for each choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mallocgame.options import check_ranges, setting

__all__ = ["EgrlConfig", "WHERE_FIELDS"]

WHERE_FIELDS = ("checkpoint_dir", "checkpoint_seconds", "progress", "progress_seconds")
"""Settings of where and how often a run saves and reports, not of what it computes."""


@dataclass(frozen=True)
class EgrlConfig:
    """Everything that shapes an EGRL run (docs/egrl.md)."""

    # --- what runs
    mode: Literal["both", "evolution", "pg"] = setting(
        "both",
        "both: the population and the SAC learner; evolution: the population alone; pg: the learner alone",
    )
    fitness: Literal["reward", "speedup"] = setting(
        "reward",
        "a proposal's fitness: its normalized reward, or its simulated speedup (mallocgame.simulate)",
    )
    # --- the population (modes both and evolution)
    policies: int = setting(2, "graph-policy individuals in the population", within="[0, 1024]")
    chromosomes: int = setting(
        8, "Boltzmann-chromosome individuals in the population", within="[0, 1024]"
    )
    elites: int = setting(
        2,
        "best individuals carried unchanged into the next generation, fewer than the population",
        within="[0, 1024]",
    )
    tournament: int = setting(
        3, "individuals drawn (with replacement) per tournament selection", within="[1, 1024]"
    )
    crossover: float = setting(
        0.5,
        "probability that an offspring is a crossover with an elite, in [0, 1]",
        within="[0, 1]",
    )
    mutation: float = setting(
        0.9, "probability that an offspring is mutated, in [0, 1]", within="[0, 1]"
    )
    mutation_rate: float = setting(
        0.1,
        "share of an offspring's genes mutated: policy weights, or chromosome units",
        within="(0, 1]",
    )
    sigma: float = setting(
        0.1,
        "policy mutation: std of the noise, relative to each weight's magnitude",
        within="[0, 10]",
    )
    prior_sigma: float = setting(
        1.0,
        "chromosome mutation: std of the noise on a unit's prior logits and log temperature",
        within="[0, 10]",
    )
    temperature: float = setting(
        0.5, "initial temperature of every chromosome unit", within="[1e-2, 1e2]"
    )
    prior_bias: float = setting(
        1.0,
        "initial logits = this times (1, 1/2, 0) for Copy, NoCopy, Drop "
        "(chromosome priors, policy output bias)",
        within="[-100, 100]",
    )
    init_scale: float = setting(
        0.5, "std of the random part of the initial chromosome priors", within="[0, 10]"
    )
    policy_sample: bool = setting(
        False, "population graph policies sample their proposals (false: the argmax)"
    )
    # --- the graph networks
    hidden: int = setting(32, "width of the graph networks' node embeddings", within="[1, 4096]")
    layers: int = setting(
        1,
        "graph convolutions per level of the graph U-Net, on the way down and up",
        within="[1, 64]",
    )
    pool_levels: int = setting(
        1, "top-k pooling levels of the graph U-Net (0: a plain relational GCN)", within="[0, 16]"
    )
    pool_ratio: float = setting(
        0.5, "share of a level's nodes that top-k pooling keeps, in (0, 1)", within="(0, 1)"
    )
    # --- the learner (modes both and pg): discrete soft actor-critic on a one-step MDP
    learner_rollouts: int = setting(
        1, "proposals the learner's actor samples each generation", within="[0, 4096]"
    )
    updates_per_proposal: float = setting(
        1.0,
        "SAC updates per proposal evaluated in the generation "
        "(Algorithm 1: one per environment step)",
        within="[0, 1000]",
    )
    batch_size: int = setting(32, "proposals per SAC update", within="[1, 65536]")
    min_replay: int = setting(
        8,
        "proposals in the replay buffer before the first SAC update, at most replay_size",
        within="[1, 100000000]",
    )
    replay_size: int = setting(
        2000,
        "proposals the shared replay buffer keeps (oldest dropped first)",
        within="[1, 100000000]",
    )
    learning_rate: float = setting(
        1e-3, "Adam learning rate of the actor, the critics and log alpha", within="(0, 1]"
    )
    alpha: float | None = setting(
        None,
        "entropy temperature, fixed at this value (0: no entropy term); "
        "none: tuned automatically toward target_entropy",
        within="[0, 1e3]",
    )
    target_entropy: float = setting(
        0.3,
        "auto alpha: target mean entropy per unit, as a share of log 3, in (0, 1)",
        within="(0, 1)",
    )
    # --- run control (never changes what is computed)
    checkpoint_dir: str | None = setting(
        None, "folder of checkpoint.msgpack and best.solution.json; a run resumes from it"
    )
    checkpoint_seconds: float = setting(
        60.0, "seconds between checkpoints (and one at the end)", within="(0, 1e9]"
    )
    progress: bool = setting(False, "print progress lines on stderr")
    progress_seconds: float = setting(10.0, "seconds between progress lines", within="(0, 1e9]")

    def __post_init__(self) -> None:
        """Check the ranges, then what a mode uses (and only that: ``pg`` has no
        population, ``evolution`` no learner): a population of at least 1 with
        ``elites`` fewer than it; ``learner_rollouts`` of at least 1 and ``min_replay``
        at most ``replay_size`` (a replay that never holds ``min_replay`` would never
        let the learner update). Raises ``ValueError`` (:func:`~mallocgame.options.parse_config`
        makes it a :class:`~mallocgame.errors.SolverError`)."""
        check_ranges(self)
        if self.evolves:
            if self.policies + self.chromosomes < 1:
                raise ValueError(
                    f"mode {self.mode} needs a population: policies + chromosomes must be at least 1"
                )
            if not self.elites < self.policies + self.chromosomes:
                raise ValueError("elites must be in [0, policies + chromosomes)")
        if self.learns:
            if self.learner_rollouts < 1:
                raise ValueError(f"mode {self.mode} needs learner_rollouts of at least 1")
            if self.min_replay > self.replay_size:
                raise ValueError(
                    f"min_replay {self.min_replay} exceeds replay_size {self.replay_size}: "
                    f"the replay would never hold enough for mode {self.mode}'s learner to update"
                )

    @property
    def evolves(self) -> bool:
        """Whether a population evolves (modes both and evolution)."""
        return self.mode != "pg"

    @property
    def learns(self) -> bool:
        """Whether the SAC learner runs (modes both and pg)."""
        return self.mode != "evolution"

    @property
    def population(self) -> int:
        """Individuals in the population (0 in mode pg)."""
        return self.policies + self.chromosomes if self.evolves else 0
