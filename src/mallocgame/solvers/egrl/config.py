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

from mallocgame.options import setting

__all__ = ["EgrlConfig", "WHERE_FIELDS", "MODES", "FITNESSES"]

MODES = ("both", "evolution", "pg")
"""EGRL's ablation: evolution and the learner, evolution alone, the learner alone."""

FITNESSES = ("reward", "speedup")
"""What a proposal's fitness is: its normalized reward, or its simulated speedup."""

WHERE_FIELDS = ("checkpoint_dir", "checkpoint_seconds", "progress", "progress_seconds")
"""Settings of where and how often a run saves and reports, not of what it computes."""


@dataclass(frozen=True)
class EgrlConfig:
    """Everything that shapes an EGRL run (docs/egrl.md)."""

    # --- what runs
    mode: Literal["both", "evolution", "pg"] = setting(
        "both", "both: the population and the SAC learner; evolution: the population alone; pg: the learner alone")
    fitness: Literal["reward", "speedup"] = setting(
        "reward", "a proposal's fitness: its normalized reward, or its simulated speedup (mallocgame.simulate)")
    # --- the population (modes both and evolution)
    policies: int = setting(2, "graph-policy individuals in the population")
    chromosomes: int = setting(8, "Boltzmann-chromosome individuals in the population")
    elites: int = setting(2, "best individuals carried unchanged into the next generation")
    tournament: int = setting(3, "individuals drawn (with replacement) per tournament selection")
    crossover: float = setting(0.5, "probability that an offspring is a crossover with an elite, in [0, 1]")
    mutation: float = setting(0.9, "probability that an offspring is mutated, in [0, 1]")
    mutation_rate: float = setting(
        0.1, "share of an offspring's genes mutated: policy weights, or chromosome units, in (0, 1]")
    sigma: float = setting(0.1, "policy mutation: std of the noise, relative to each weight's magnitude")
    prior_sigma: float = setting(
        1.0, "chromosome mutation: std of the noise on a unit's prior logits and log temperature")
    temperature: float = setting(0.5, "initial temperature of every chromosome unit (> 0)")
    prior_bias: float = setting(
        1.0, "initial logits = this times (1, 1/2, 0) for Copy, NoCopy, Drop (chromosome priors, policy output bias)")
    init_scale: float = setting(0.5, "std of the random part of the initial chromosome priors")
    policy_sample: bool = setting(False, "population graph policies sample their proposals (false: the argmax)")
    # --- the graph networks
    hidden: int = setting(32, "width of the graph networks' node embeddings")
    layers: int = setting(1, "graph convolutions per level of the graph U-Net, on the way down and up")
    pool_levels: int = setting(1, "top-k pooling levels of the graph U-Net (0: a plain relational GCN)")
    pool_ratio: float = setting(0.5, "share of a level's nodes that top-k pooling keeps, in (0, 1)")
    # --- the learner (modes both and pg): discrete soft actor-critic on a one-step MDP
    learner_rollouts: int = setting(1, "proposals the learner's actor samples each generation")
    updates_per_proposal: float = setting(
        1.0, "SAC updates per proposal evaluated in the generation (Algorithm 1: one per environment step)")
    batch_size: int = setting(32, "proposals per SAC update")
    min_replay: int = setting(8, "proposals in the replay buffer before the first SAC update")
    replay_size: int = setting(2000, "proposals the shared replay buffer keeps (oldest dropped first)")
    learning_rate: float = setting(1e-3, "Adam learning rate of the actor, the critics and log alpha")
    alpha: float | None = setting(None, "entropy temperature; none: tuned automatically toward target_entropy")
    target_entropy: float = setting(0.3, "auto alpha: target mean entropy per unit, as a share of log 3, in (0, 1)")
    # --- run control (never changes what is computed)
    checkpoint_dir: str | None = setting(
        None, "folder of checkpoint.msgpack and best.solution.json; a run resumes from it")
    checkpoint_seconds: float = setting(60.0, "seconds between checkpoints (and one at the end)")
    progress: bool = setting(False, "print progress lines on stderr")
    progress_seconds: float = setting(10.0, "seconds between progress lines")

    def __post_init__(self) -> None:
        if self.policies < 0 or self.chromosomes < 0:
            raise ValueError("policies and chromosomes must be non-negative")
        if self.mode != "pg" and self.policies + self.chromosomes < 1:
            raise ValueError(f"mode {self.mode} needs a population: policies + chromosomes must be at least 1")
        if not 0 <= self.elites < max(self.policies + self.chromosomes, 1):
            raise ValueError("elites must be in [0, policies + chromosomes)")
        if self.tournament < 1:
            raise ValueError("tournament must be at least 1")
        for name in ("crossover", "mutation"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], not {getattr(self, name)}")
        if not 0.0 < self.mutation_rate <= 1.0:
            raise ValueError(f"mutation_rate must be in (0, 1], not {self.mutation_rate}")
        if self.sigma < 0 or self.prior_sigma < 0 or self.init_scale < 0:
            raise ValueError("sigma, prior_sigma and init_scale must be non-negative")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be positive, not {self.temperature}")
        if self.hidden < 1 or self.layers < 1 or self.pool_levels < 0:
            raise ValueError("hidden and layers must be at least 1, pool_levels at least 0")
        if not 0.0 < self.pool_ratio < 1.0:
            raise ValueError(f"pool_ratio must be in (0, 1), not {self.pool_ratio}")
        if self.mode != "evolution" and self.learner_rollouts < 1:
            raise ValueError(f"mode {self.mode} needs learner_rollouts of at least 1")
        if self.learner_rollouts < 0 or self.updates_per_proposal < 0:
            raise ValueError("learner_rollouts and updates_per_proposal must be non-negative")
        if self.batch_size < 1 or self.min_replay < 1 or self.replay_size < 1:
            raise ValueError("batch_size, min_replay and replay_size must be at least 1")
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be positive, not {self.learning_rate}")
        if self.alpha is not None and self.alpha < 0:
            raise ValueError(f"alpha must be non-negative or none, not {self.alpha}")
        if not 0.0 < self.target_entropy < 1.0:
            raise ValueError(f"target_entropy must be in (0, 1), not {self.target_entropy}")
        if self.checkpoint_seconds <= 0 or self.progress_seconds <= 0:
            raise ValueError("checkpoint_seconds and progress_seconds must be positive")

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
