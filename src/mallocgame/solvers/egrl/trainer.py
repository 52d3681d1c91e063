"""The EGRL loop (MARL Algorithm 1): generations, the learner, budgets, checkpoints.

A generation (mode ``both``; ``evolution`` leaves out the learner, ``pg`` the population):

1. **Evaluate**: every individual proposes and its proposal is played
   (:mod:`~.proposals`): the chromosomes first (they need no network), then the graph
   policies, then ``learner_rollouts`` proposals sampled from the learner's actor.
   Each is one unit of work ("proposals"); every (proposal, fitness) goes into the
   shared replay buffer; the best game so far is the answer.
2. **Evolve** (:func:`~.population.next_generation`): rank, keep the elites,
   tournament selection, crossover within and across encodings, mutation; one slot
   is left for the learner.
3. **Learn**: ``round(updates_per_proposal · proposals this generation)`` SAC updates
   (:mod:`~.sac`; none until the replay holds ``min_replay``).
4. **Copy** the learner's actor into the reserved slot ("over the weakest").

Randomness is counter-based: every draw uses a ``numpy`` generator or JAX key made
from the seed and a counter (generation and individual, update number), never from
time or from the order in which the process ran things. So the same seed and work
budget give the same answer, and a resumed run continues exactly as the
uninterrupted run would have: the state between two steps (an evaluation, the
evolution, one update) is the checkpoint's content.

Budgets: a work budget counts proposals over all runs resumed from one checkpoint;
a wall-clock budget counts this call's seconds and is checked between steps (a
proposal or an update in flight finishes; so does a first-use JIT compilation of the
networks, 1-6 s on a 2-core CPU, cached on disk by JAX afterwards). The first
proposal is always played, so there is always an answer. With neither budget,
:data:`DEFAULT_GENERATIONS` generations.

Checkpoints (``checkpoint_dir``): ``checkpoint.msgpack`` (population, this generation's
fitness so far, replay, learner and optimizer states, counters, the best answer's
actions, unless a game the budget ended in, which only the call it ended answers: then
the best game before it; flax msgpack, written atomically) every ``checkpoint_seconds``
and at the end, and ``best.solution.json`` at every improvement that beats the file on
disk (:class:`~mallocgame.solvers.checkpoint.BestAnswerFile`, by the run's fitness: a
run resumed from an older checkpoint never makes it worse). A run on a folder with a
checkpoint resumes from it if the checkpoint is of the same instance, seed and settings
(the settings of :data:`~.config.WHERE_FIELDS` aside), and refuses with a
:class:`~mallocgame.errors.SolverError` otherwise. So does a checkpoint that matches but
does not fit the run (damaged, or edited): every field a resumed run reads is checked
first (kinds, array shapes and ranges, the learner's arrays against a fresh learner's),
and the :class:`~mallocgame.errors.SolverError` names the file.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization

from mallocgame.errors import GameOverError, IllegalActionError, SolverError
from mallocgame.game.state import Game
from mallocgame.game.state import replay as replay_actions
from mallocgame.game.tables import build_tables
from mallocgame.instance import Instance
from mallocgame.options import json_settings
from mallocgame.solution import Solution
from mallocgame.solvers import checkpoint
from mallocgame.solvers.base import Improvement, Stopwatch
from mallocgame.solvers.egrl.config import WHERE_FIELDS, EgrlConfig
from mallocgame.solvers.egrl.graph import build_graph, pad_graph
from mallocgame.solvers.egrl.population import (
    Chromosome,
    Individual,
    PolicyGenes,
    initial_chromosome,
    next_generation,
    sample_chromosome,
    seed_chromosome,
)
from mallocgame.solvers.egrl.proposals import (
    FitnessFn,
    ProposalPlayer,
    reward_fitness,
    speedup_fitness,
)
from mallocgame.solvers.egrl.replay import Replay
from mallocgame.solvers.egrl.sac import (
    LEARNER_METRICS,
    LearnerState,
    NetShape,
    init_actor_params,
    init_learner,
    learner_functions,
)

__all__ = [
    "EgrlTrainer",
    "Counters",
    "DEFAULT_GENERATIONS",
    "TRAINER",
    "CHECKPOINT",
    "checkpoint_fingerprint",
]

CHECKPOINT_VERSION = 1
TRAINER = "egrl"  # the checkpoint's TRAINER_KEY: what wrote it
CHECKPOINT = checkpoint.CheckpointFormat(TRAINER, CHECKPOINT_VERSION, "settings", WHERE_FIELDS)
"""EGRL's checkpoints: its settings under ``"settings"``, :data:`~.config.WHERE_FIELDS` aside."""
DEFAULT_GENERATIONS = 3
"""Generations run when the request has neither a work nor a wall-clock budget."""

DEMONSTRATION_PRIOR = 5.0
"""A demonstration-seeded chromosome's prior logit on the demonstrated action (0 on the others)."""
DEMONSTRATION_TEMPERATURE = 0.25
"""... and its temperature: it samples the demonstration at all but ~1e-8 of the units."""

# Random streams: numpy generators are seeded with [seed, STREAM, ...counters].
_INIT, _POPULATION, _LEARNER_ROLLOUT, _EVOLVE, _REPLAY, _INIT_POLICY, _INIT_LEARNER = range(7)


@dataclass
class Counters:
    """Work done so far, over all resumed runs."""

    proposals: int = 0  # proposals evaluated (the work unit)
    generations: int = 0  # generations completed
    updates: int = 0  # SAC updates
    backups: int = 0  # Drop-backups taken while playing proposals
    overridden: int = 0  # units played otherwise than proposed (nearest-allowed rule)
    seconds: float = 0.0  # wall-clock of all runs


class EgrlTrainer:
    """EGRL on one instance: the population, the learner, the best answer.

    Args:
        instance: the program.
        config: the settings.
        seed: every random draw derives from it.
        solver_name: the name the answers carry.
        demonstrations: solutions of this instance; the best one with actions (by
            reward) seeds a chromosome of a new run's first generation where the mode
            has chromosomes. Where it cannot (a resumed run, mode ``pg``, no
            chromosomes), :meth:`run` plays it once as a candidate answer instead
            (:meth:`_offer_demonstration`), so the answer is never worse than it.
        log: where progress lines go (``None``: silent).
    """

    def __init__(
        self,
        instance: Instance,
        config: EgrlConfig,
        *,
        seed: int = 0,
        solver_name: str = "egrl",
        demonstrations: Sequence[Solution] = (),
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.instance = instance
        self.config = config
        self.seed = int(seed)
        self._seed = self.seed  # every draw's generator: numpy's takes any seed >= 0 whole
        self.solver_name = solver_name
        self.log = log or (lambda _line: None)
        where = config.checkpoint_dir
        self.dir = None if where is None else checkpoint.checkpoint_directory(where)
        self._answer = checkpoint.BestAnswer(
            instance,
            solver=solver_name,
            seed=self.seed,
            folder=self.dir,
            score=self._answer_fitness,
            log=self.log,
        )
        self.tables = build_tables(instance)
        self.num_units = instance.num_buffers
        self.player = ProposalPlayer(instance, self.tables)
        self.fitness_fn = FitnessFn(instance, config.fitness)
        self.graph = build_graph(instance, self.tables)
        self.shape = NetShape(config.hidden, config.layers, config.pool_levels, config.pool_ratio)
        self.replay = Replay(config.replay_size, self.num_units)
        self.counters = Counters()
        # The generation in progress.
        # "evaluate", then "learn" (after the evolution), then the next generation
        self.phase = "evaluate"
        self.index = 0  # next position in evaluation_order()
        self.fitness: list[float | None] = []  # per individual, this generation
        self.learner_fitness: list[float] = []  # the learner's rollouts this generation
        self.updates_left = 0  # SAC updates left in this generation's learning phase
        self.reserved: int | None = None  # population slot waiting for the learner's actor
        # The best answer (and self.best, its solution): its fitness (of its exact reward,
        # :meth:`_answer_fitness`) and where it came from. What a checkpoint keeps (a game
        # the budget ended in aside, :meth:`_offer`): the highest fitness of a game played
        # (of its float running sum), by which games are ranked one with another, and the
        # best of those games: its actions, where it came from, its fitness
        self.best_fitness = -math.inf
        self.best_from = ""
        self.best_played = -math.inf
        self.kept_actions: tuple[int, ...] = ()
        self.kept_from = ""
        self.kept_fitness = -math.inf
        self.metrics: dict[str, float] = {}
        # JAX parts, built on first need (chromosomes are played without them).
        self._fns: Any = None
        self._graph_dev: Any = None
        self.learner: LearnerState | None = None
        # the actor's logits, cached for a generation
        self._learner_logits: np.ndarray | None = None
        demonstration = self._best_demonstration(demonstrations)
        self.population: list[Individual | None] = self._initial_population(demonstration)
        self.fitness = [None] * len(self.population)
        self.resumed = self.dir is not None and (self.dir / checkpoint.CHECKPOINT_NAME).exists()
        if self.resumed:
            self._load()
        seeded = config.evolves and config.chromosomes > 0 and not self.resumed
        # the demonstration run() plays once as a candidate answer (where none was seeded)
        self._demonstration = None if seeded else demonstration

    # ------------------------------------------------------------- the population

    def _initial_population(self, demo: tuple[int, ...] | None) -> list[Individual | None]:
        """Chromosomes drawn now, the first one seeded from ``demo`` (actions) where given;
        graph-policy slots (``None``) are drawn with JAX when first needed (their keys
        depend only on the seed and the slot)."""
        cfg = self.config
        if not cfg.evolves:
            return []
        rng = np.random.default_rng([self._seed, _INIT])
        population: list[Individual | None] = [None] * cfg.policies
        for _ in range(cfg.chromosomes):
            population.append(
                initial_chromosome(
                    self.num_units, cfg.prior_bias, cfg.init_scale, cfg.temperature, rng
                )
            )
        if demo is not None and cfg.chromosomes > 0:
            prior = np.zeros((self.num_units, 3), dtype=np.float32)
            prior[np.arange(self.num_units), np.asarray(demo, dtype=np.int64)] = DEMONSTRATION_PRIOR
            temperature = np.full(self.num_units, DEMONSTRATION_TEMPERATURE, dtype=np.float32)
            population[cfg.policies] = Chromosome(prior, temperature)
        return population

    def _best_demonstration(self, demonstrations: Sequence[Solution]) -> tuple[int, ...] | None:
        """The actions of the best (by ``reward_s``) of ``demonstrations`` that answer this
        instance with one action 0-2 per unit; ``None`` where none does."""
        usable = [
            d
            for d in demonstrations
            if d.actions is not None
            and len(d.actions) == self.num_units
            and d.instance_sha256 == self.instance.sha256
            and all(0 <= a <= 2 for a in d.actions)
        ]
        if not usable:
            return None
        return tuple(max(usable, key=lambda d: d.reward_s).actions)  # type: ignore[arg-type]

    def evaluation_order(self) -> list[int]:
        """This generation's evaluations: population indices (chromosomes, then
        policies), then ``-1 - j`` for the learner's rollout ``j``."""
        chromosomes = [i for i, ind in enumerate(self.population) if isinstance(ind, Chromosome)]
        policies = [i for i, ind in enumerate(self.population) if not isinstance(ind, Chromosome)]
        learner = (
            [-1 - j for j in range(self.config.learner_rollouts)] if self.config.learns else []
        )
        return chromosomes + policies + learner

    # ------------------------------------------------------------------ JAX parts

    def _ensure_jax(self) -> None:
        if self._fns is not None:
            return
        checkpoint.enable_compilation_cache()
        self._fns = learner_functions(self.shape)
        self._graph_dev = {k: jnp.asarray(v) for k, v in pad_graph(self.graph).items()}
        for i, ind in enumerate(self.population):
            if ind is None and (self.reserved is None or i != self.reserved):
                params = init_actor_params(
                    self._fns,
                    np.random.default_rng([self._seed, _INIT_POLICY, i]),
                    self.config.prior_bias,
                )
                self.population[i] = PolicyGenes(self._fns.ravel(params))
        if self.config.learns and self.learner is None:
            cfg = self.config
            self.learner = init_learner(
                self._fns,
                np.random.default_rng([self._seed, _INIT_LEARNER]),
                prior_bias=cfg.prior_bias,
                learning_rate=cfg.learning_rate,
                alpha=cfg.alpha,
                target_entropy=cfg.target_entropy,
            )

    def _policy_logits(self, genes: PolicyGenes) -> np.ndarray:
        self._ensure_jax()
        logits = self._fns.flat_logits(jnp.asarray(genes.theta), self._graph_dev)
        return np.asarray(logits, dtype=np.float64)[: self.num_units]

    def _policy_probs(self, genes: PolicyGenes) -> np.ndarray:
        return _softmax(self._policy_logits(genes))

    def _actor_logits(self) -> np.ndarray:
        self._ensure_jax()
        if self._learner_logits is None:
            assert self.learner is not None
            logits = self._fns.logits(self.learner.actor, self._graph_dev)
            self._learner_logits = np.asarray(logits, dtype=np.float64)[: self.num_units]
        return self._learner_logits

    # ------------------------------------------------------------------ the loop

    def run(
        self,
        *,
        proposals: int | None = None,
        clock: Stopwatch | None = None,
        callback: Callable[[Improvement], None] | None = None,
    ) -> Solution:
        """Run until ``proposals`` proposals are evaluated in total (over resumed runs)
        or ``clock`` expires; return the best answer (module docstring for the budgets)."""
        cfg, c = self.config, self.counters
        clock = clock if clock is not None else Stopwatch(None)
        if proposals is None and clock.seconds is None:
            proposals = c.proposals + DEFAULT_GENERATIONS * len(self.evaluation_order())
        start_seconds = c.seconds
        next_checkpoint = cfg.checkpoint_seconds
        next_log = cfg.progress_seconds
        if self.resumed:
            assert self.dir is not None  # what it resumed from
            self.log(
                f"resumed from {self.dir / checkpoint.CHECKPOINT_NAME}: {c.proposals} proposals, "
                f"{c.generations} generations, best {self.best_fitness:.4f}"
            )
            self._answer.report(clock.elapsed, callback)
        elif self.dir is not None:
            self.log(f"no checkpoint in {self.dir}: a new run")
        if self._demonstration is not None:
            self._offer_demonstration(self._demonstration, clock, callback)
            self._demonstration = None
        while True:
            if proposals is not None and c.proposals >= proposals:
                break
            if self.best is not None and clock.expired():
                break
            self.step(clock, callback)
            c.seconds = start_seconds + clock.elapsed
            if clock.elapsed >= next_log:
                next_log = clock.elapsed + cfg.progress_seconds
                self.log(self.progress_line())
            if self.dir is not None and clock.elapsed >= next_checkpoint:
                next_checkpoint = clock.elapsed + cfg.checkpoint_seconds
                self.save()
        c.seconds = start_seconds + clock.elapsed
        self.log(self.progress_line())
        if self.dir is not None:
            self.save()
        assert self.best is not None
        return dataclasses.replace(
            self.best, wall_s=clock.elapsed, work=self.work(), info=self.info()
        )

    def step(
        self, clock: Stopwatch | None = None, callback: Callable[[Improvement], None] | None = None
    ) -> None:
        """One step: an evaluation, the evolution, one SAC update, or closing the
        generation (:meth:`run` takes them until the budget is spent; between two, the
        state is what a checkpoint holds)."""
        clock = clock if clock is not None else Stopwatch(None)
        order = self.evaluation_order()
        if self.phase == "evaluate" and self.index < len(order):
            if self._evaluate(order[self.index], clock, callback):
                self.index += 1  # else the budget ended in its game: evaluated again next run
        elif self.phase == "evaluate":
            self._evolve(len(order))
        elif self.updates_left > 0:
            self._update()
        else:
            self._close_generation()

    def _evaluate(
        self, slot: int, clock: Stopwatch, callback: Callable[[Improvement], None] | None
    ) -> bool:
        """Evaluate the proposal of population ``slot`` (negative: a learner rollout) and
        keep it if it is the best; ``False`` where ``clock`` ran out during its game: then
        the game, completed Drop first, is a candidate answer but no evaluation (no
        fitness, replay entry or count), and the slot is evaluated again by a later run."""
        g = self.counters.generations
        if slot >= 0:
            ind = self.population[slot]
            rng = np.random.default_rng([self._seed, _POPULATION, g, slot])
            if isinstance(ind, Chromosome):
                proposal, source = sample_chromosome(ind, rng), "chromosome"
            else:
                if ind is None:
                    self._ensure_jax()
                    ind = self.population[slot]
                assert isinstance(ind, PolicyGenes)
                logits = self._policy_logits(ind)
                proposal = _sample(logits, rng) if self.config.policy_sample else _argmax(logits)
                source = "policy"
        else:
            rng = np.random.default_rng([self._seed, _LEARNER_ROLLOUT, g, -1 - slot])
            proposal, source = _sample(self._actor_logits(), rng), "learner"
        played = self.player.play(proposal, clock.expired if clock.seconds is not None else None)
        fitness = self.fitness_fn(played, self.player.game)
        if played.cut_at is not None:  # the budget ended in its game: an answer, not an evaluation
            source = f"{source}, Drop first from buffer {played.cut_at}"
            self._offer(self.player.game, fitness, source, clock, callback, kept=False)
            return False
        c = self.counters
        c.proposals += 1
        c.backups += played.backups
        c.overridden += played.overridden
        self.replay.add(proposal, fitness)
        if slot >= 0:
            self.fitness[slot] = fitness
        else:
            self.learner_fitness.append(fitness)
        self._offer(self.player.game, fitness, source, clock, callback)
        return True

    def _offer_demonstration(
        self,
        demo: tuple[int, ...],
        clock: Stopwatch,
        callback: Callable[[Improvement], None] | None,
    ) -> None:
        """Play the demonstration ``demo`` once, as a proposal (nearest-allowed rule and
        Drop-backup: the demonstration's own game where it is legal), and make its game the
        best answer (``best_from`` ``"demonstration"``) where it beats the best so far or
        there is none. A candidate answer, not an evaluation: no fitness in the
        generation, no replay entry, not counted as work, no random draw; so the search
        (population, replay, learner) is the one the run makes without it."""
        played = self.player.play(np.asarray(demo, dtype=np.int8))
        fitness = self.fitness_fn(played, self.player.game)
        self.log(f"the demonstration, played as a candidate answer: fitness {fitness:.4f}")
        self._offer(self.player.game, fitness, "demonstration", clock, callback)

    def _evolve(self, evaluated: int) -> None:
        cfg = self.config
        if cfg.evolves:
            rng = np.random.default_rng([self._seed, _EVOLVE, self.counters.generations])
            fitness = [f if f is not None else -math.inf for f in self.fitness]
            offspring = next_generation(
                self.population,  # type: ignore[arg-type]
                fitness,
                num_elites=cfg.elites,
                tournament_size=cfg.tournament,
                crossover=cfg.crossover,
                mutation=cfg.mutation,
                mutation_rate=cfg.mutation_rate,
                sigma=cfg.sigma,
                prior_sigma=cfg.prior_sigma,
                policy_probs=self._policy_probs,
                rng=rng,
                reserve=cfg.learns,
            )
            self.population = offspring.population
            self.reserved = offspring.reserved
        if cfg.learns and self.replay.size >= cfg.min_replay:
            self.updates_left = int(round(cfg.updates_per_proposal * evaluated))
        self.phase = "learn"

    def _update(self) -> None:
        self._ensure_jax()
        assert self.learner is not None
        cfg = self.config
        rng = np.random.default_rng([self._seed, _REPLAY, self.counters.updates])
        actions, fitness = self.replay.sample(cfg.batch_size, rng)
        mean, std = self.replay.fitness_scale()
        padded = np.zeros((cfg.batch_size, self._graph_dev["units"].shape[0]), dtype=np.int32)
        padded[:, : self.num_units] = actions
        targets = ((fitness - mean) / std).astype(np.float32)
        self.learner, metrics = self._fns.update(
            self.learner, self._graph_dev, jnp.asarray(padded), jnp.asarray(targets)
        )
        self._learner_logits = None
        self.metrics = {k: float(v) for k, v in metrics.items()}
        self.counters.updates += 1
        self.updates_left -= 1

    def _close_generation(self) -> None:
        if self.reserved is not None:
            self._ensure_jax()
            assert self.learner is not None
            if self.reserved < len(self.population) and self.population[self.reserved] is None:
                if self.config.policies > 0 and self._reserved_is_policy():
                    self.population[self.reserved] = PolicyGenes(
                        self._fns.ravel(self.learner.actor)
                    )
                else:
                    probs = _softmax(self._actor_logits())
                    self.population[self.reserved] = seed_chromosome(
                        probs, np.ones(self.num_units, np.float32)
                    )
        self.reserved = None
        self.counters.generations += 1
        self.phase, self.index = "evaluate", 0
        self.fitness = [None] * len(self.population)
        self.learner_fitness = []

    def _reserved_is_policy(self) -> bool:
        """Whether the reserved slot is a policy slot: the population keeps its count of
        graph policies, so it is one when the others hold fewer than ``policies``."""
        others = sum(
            isinstance(ind, PolicyGenes)
            for i, ind in enumerate(self.population)
            if i != self.reserved
        )
        return others < self.config.policies

    def _offer(
        self,
        game: Game,
        fitness: float,
        source: str,
        clock: Stopwatch,
        callback: Callable[[Improvement], None] | None,
        *,
        kept: bool = True,
    ) -> None:
        """Offer the complete ``game``, of fitness ``fitness`` (:class:`FitnessFn`'s: of
        its float running sum, for ``"reward"``) and from ``source``, as the answer.

        Games are ranked by that fitness one with another; a game above the highest so far
        (:attr:`best_played`) becomes the answer, written and reported, where its answer's
        fitness (:meth:`_answer_fitness`: of its exact reward, which a sum of cancelling
        latencies can be far from) is higher than the answer's, so the answer and what
        the callback hears only ever improve; the first game offered always does.

        ``kept``: whether the checkpoint keeps the game (raises :attr:`best_played` and may
        be the best kept, :attr:`kept_actions`). A game the budget ended in is not: it may
        be the answer of the call it ended (and stay in the best answer's file), but a run
        resumed from the checkpoint continues as the uninterrupted one, which never
        played it."""
        if self.best is not None and not fitness > self.best_played:
            return
        answer = self._answer.answer_of(game, clock.elapsed, work=self.work())
        # a speedup fitness is the answer's already (it simulates the game's allocations)
        exact = fitness if self.config.fitness == "speedup" else self._answer_fitness(answer)
        if kept:
            self.best_played = fitness
            if not exact > self.kept_fitness:
                return
            self.kept_actions = answer.actions or ()
            self.kept_from = source
            self.kept_fitness = exact
        if self.best is not None and not exact > self.best_fitness:
            return
        self.best_fitness = exact
        self.best_from = source
        self._answer.take(dataclasses.replace(answer, info=self.info()), clock.elapsed, callback)

    @property
    def best(self) -> Solution | None:
        """The best answer so far (``None`` before the first)."""
        return self._answer.solution

    # ----------------------------------------------------------------- reporting

    def work(self) -> dict[str, int]:
        c = self.counters
        return {
            "proposals": c.proposals,
            "generations": c.generations,
            "updates": c.updates,
            "backups": c.backups,
            "overridden": c.overridden,
        }

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mode": self.config.mode,
            "fitness": self.config.fitness,
            "best_fitness": round(float(self.best_fitness), 9)
            if math.isfinite(self.best_fitness)
            else None,
            "best_from": self.best_from,
            "train_seconds": round(self.counters.seconds, 3),
        }
        out.update({k: round(v, 6) for k, v in self.metrics.items()})
        return out

    def progress_line(self) -> str:
        c = self.counters
        current = [f for f in self.fitness if f is not None] + self.learner_fitness
        mean = f"  generation mean {np.mean(current):.4f}" if current else ""
        learner = ""
        if self.metrics:
            learner = (
                f"  critic {self.metrics['critic_loss']:.3f}  entropy {self.metrics['entropy']:.3f}"
                f"  alpha {self.metrics['alpha']:.3g}"
            )
        return (
            f"{c.seconds:8.1f} s  generation {c.generations}  proposals {c.proposals}  updates {c.updates}"
            f"  best {self.best_fitness:.4f} ({self.config.fitness}){mean}{learner}"
        )

    # --------------------------------------------------------------- checkpoints

    def _fingerprint(self) -> dict[str, Any]:
        return checkpoint_fingerprint(self.instance, self.config, self.seed)

    def _answer_fitness(self, solution: Solution) -> float:
        """``solution``'s fitness (the run's measure of an answer, higher is better):
        its reward (:func:`~mallocgame.solvers.egrl.proposals.reward_fitness`), or its
        simulated speedup (``fitness="speedup"``)."""
        if self.config.fitness == "reward":
            return reward_fitness(
                solution.normalized_reward, solution.reward_s, self.tables.normalizer_s
            )
        return speedup_fitness(self.instance, solution)

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs (JSON-like, numpy arrays inside)."""
        population: dict[str, Any] = {}
        for i, ind in enumerate(self.population):
            if isinstance(ind, PolicyGenes):
                population[str(i)] = {"kind": "policy", "theta": ind.theta}
            elif isinstance(ind, Chromosome):
                population[str(i)] = {
                    "kind": "chromosome",
                    "prior": ind.prior,
                    "temperature": ind.temperature,
                }
            else:
                population[str(i)] = {"kind": "empty"}
        state: dict[str, Any] = {
            "fingerprint": CHECKPOINT.written(self._fingerprint()),
            "counters": dataclasses.asdict(self.counters),
            "generation": {
                "phase": self.phase,
                "index": self.index,
                "updates_left": self.updates_left,
                "reserved": -1 if self.reserved is None else self.reserved,
                "fitness": np.asarray(
                    [np.nan if f is None else f for f in self.fitness], dtype=np.float64
                ),
                "learner_fitness": np.asarray(self.learner_fitness, dtype=np.float64),
            },
            "population": population,
            "replay": self.replay.state_dict(),
            "best": {  # the best game kept (_offer), not one the budget ended in
                "actions": np.asarray(self.kept_actions, dtype=np.int8),
                # the highest fitness played (best_played; the game's may be lower, of its
                # exact reward, and is recomputed from the actions); -inf: none yet
                "fitness": float(self.best_played),
                "from": self.kept_from,
            },
            "metrics": dict(self.metrics),
        }
        if self.learner is not None:
            state["learner"] = serialization.to_state_dict(jax.device_get(self.learner))
        return state

    def save(self) -> None:
        """Write the checkpoint atomically."""
        assert self.dir is not None
        checkpoint.write_checkpoint(self.dir, self.state_dict())

    def _load(self) -> None:
        """Resume from the checkpoint; a :class:`SolverError` naming it if it is another
        run's (:meth:`CheckpointFormat.restore`) or does not fit this one (:meth:`_restore`)."""
        assert self.dir is not None
        state = CHECKPOINT.restore(self.dir, self._fingerprint())
        try:
            self._restore(state)
        except (
            KeyError,
            ValueError,
            TypeError,
            AttributeError,
            IndexError,
            OverflowError,
            IllegalActionError,
            GameOverError,
        ) as exc:
            path = self.dir / checkpoint.CHECKPOINT_NAME
            raise SolverError(
                f"{path}: not a readable checkpoint ({type(exc).__name__}: {exc})"
            ) from None

    def _restore(self, state: dict[str, Any]) -> None:
        """Take over ``state`` (:meth:`state_dict`'s), checking every field this run reads:
        the counters (whole, not negative), the phase, the position in the generation
        (whole, ``0 <= index <=`` its evaluations), the updates left, the reserved slot
        (whole, ``-1`` for none), this
        generation's fitness (one per individual, at most ``learner_rollouts`` of the
        learner), the population (``policies + chromosomes`` individuals in the modes
        with one, none in ``pg``; a policy's ``theta`` of the actor's parameter count, a
        chromosome's prior ``[U, 3]`` and temperatures ``[U]`` positive), the replay, the
        metrics, the learner (in the modes that learn, every array of a fresh learner's
        shape and type) and the best answer: one exists where its fitness is above
        ``-inf`` (:meth:`state_dict`'s mark for none, which takes no actions and no
        proposals evaluated), and then it has ``U`` actions (none only where ``U`` is 0)
        that the game plays. Raises ``KeyError``, ``ValueError``, ``TypeError`` or
        ``OverflowError`` (:meth:`_load` names the file), or the game's error for a best answer it refuses."""
        cfg = self.config
        counters = state["counters"]
        names = [f.name for f in dataclasses.fields(Counters)]
        if sorted(counters) != sorted(names):
            raise ValueError(f"counters {sorted(counters)}, expected {sorted(names)}")
        self.counters = Counters(
            **{k: _count(counters[k], f"counter {k}") for k in names if k != "seconds"},
            seconds=_number(counters["seconds"], "counter seconds", low=0.0),
        )
        gen = state["generation"]
        self.phase = str(gen["phase"])
        if self.phase not in ("evaluate", "learn"):
            raise ValueError(f"phase {self.phase!r}, expected 'evaluate' or 'learn'")
        self.updates_left = _count(gen["updates_left"], "updates_left")
        if self.updates_left and not cfg.learns:
            raise ValueError(f"{self.updates_left} updates left in mode {cfg.mode}")
        self.fitness = [
            None if np.isnan(f) else float(f)
            for f in _array(gen["fitness"], np.float64, "fitness", ndim=1)
        ]
        learner_fitness = _array(gen["learner_fitness"], np.float64, "learner fitness", ndim=1)
        if learner_fitness.size > (cfg.learner_rollouts if cfg.learns else 0):
            raise ValueError(f"{learner_fitness.size} learner rollouts' fitness in one generation")
        self.learner_fitness = [float(f) for f in learner_fitness]
        entries = state["population"]
        if len(entries) != cfg.population:
            raise ValueError(f"a population of {len(entries)}, expected {cfg.population}")
        self.population = [self._individual(entries[str(i)], i) for i in range(len(entries))]
        if len(self.fitness) != len(self.population):
            raise ValueError("fitness and population of different sizes")
        reserved = _count(gen["reserved"], "reserved slot", low=-1)  # -1: none
        if not -1 <= reserved < len(self.population):
            raise ValueError(f"reserved slot {reserved} of a population of {len(self.population)}")
        self.reserved = None if reserved < 0 else reserved
        self.index = _count(gen["index"], "index")
        if not 0 <= self.index <= len(self.evaluation_order()):
            raise ValueError(
                f"index {self.index} in a generation of {len(self.evaluation_order())} evaluations"
            )
        self.replay.load_state_dict(state["replay"])
        metrics = {str(k): float(v) for k, v in state.get("metrics", {}).items()}
        if metrics and sorted(metrics) != sorted(LEARNER_METRICS):
            raise ValueError(f"metrics {sorted(metrics)}, expected {sorted(LEARNER_METRICS)}")
        self.metrics = metrics
        if "learner" in state:
            if not cfg.learns:
                raise ValueError(f"a learner in mode {cfg.mode}")
            self._ensure_jax()
            assert self.learner is not None
            self.learner = self._restored_learner(state["learner"])
        best = state["best"]
        actions = tuple(int(a) for a in _actions(best["actions"], "the best answer's actions"))
        fitness = _number(best["fitness"], "the best answer's fitness")
        if fitness == -math.inf:  # what state_dict writes before the first answer
            if actions or self.counters.proposals:
                raise ValueError(
                    f"no best answer (fitness -inf) but {len(actions)} best actions "
                    f"after {self.counters.proposals} proposals"
                )
            return
        if len(actions) != self.num_units:  # none (and no other count) fits a program of units
            raise ValueError(f"a best answer of {len(actions)} actions, expected {self.num_units}")
        game = replay_actions(self.instance, actions, self.tables)
        self._offer(game, fitness, str(best["from"]), Stopwatch(None), None)

    def _individual(self, entry: dict[str, Any], slot: int) -> Individual | None:
        """Population ``slot`` of a checkpoint, checked (:meth:`_restore`)."""
        kind = entry["kind"]
        if kind == "policy":
            theta = _array(entry["theta"], np.float32, f"slot {slot}'s theta", ndim=1)
            expected = learner_functions(self.shape).num_params
            if theta.size != expected:
                raise ValueError(
                    f"slot {slot}: {theta.size} policy parameters, expected {expected}"
                )
            return PolicyGenes(theta)
        if kind == "chromosome":
            units = self.num_units
            prior = _array(entry["prior"], np.float32, f"slot {slot}'s prior", shape=(units, 3))
            temperature = _array(
                entry["temperature"], np.float32, f"slot {slot}'s temperature", shape=(units,)
            )
            if not (np.isfinite(prior).all() and np.isfinite(temperature).all()):
                raise ValueError(f"slot {slot}: a chromosome that is not finite")
            if not (temperature > 0).all():
                raise ValueError(f"slot {slot}: a temperature that is not positive")
            return Chromosome(prior, temperature)
        if kind == "empty":
            return None
        raise ValueError(f"slot {slot} of an unknown kind {kind!r}")

    def _restored_learner(self, saved: Any) -> LearnerState:
        """The learner of a checkpoint (its layout, shapes and types those of this run's
        fresh learner, :attr:`learner`). A checkpoint written before ``fixed_alpha``
        existed gets the setting's (that run's fixed α was ``log_alpha``, clipped)."""
        assert self.learner is not None
        if isinstance(saved, dict) and "fixed_alpha" not in saved:
            alpha = 0.0 if self.config.alpha is None else self.config.alpha
            saved = {**saved, "fixed_alpha": np.asarray(alpha, np.float32)}
        restored = serialization.from_state_dict(self.learner, saved)
        fresh, layout = jax.tree_util.tree_flatten(self.learner)
        leaves, theirs = jax.tree_util.tree_flatten(restored)
        if str(theirs) != str(layout):
            raise ValueError("a learner of another layout")
        out = []
        for i, (want, got) in enumerate(zip(fresh, leaves, strict=True)):
            got = np.asarray(got)
            if got.shape != want.shape or got.dtype != want.dtype:
                raise ValueError(
                    f"learner array {i}: {got.dtype}{list(got.shape)}, "
                    f"expected {want.dtype}{list(want.shape)}"
                )
            out.append(jnp.asarray(got))
        return jax.tree_util.tree_unflatten(layout, out)


def checkpoint_fingerprint(instance: Instance, config: EgrlConfig, seed: int) -> dict[str, Any]:
    """What a checkpoint must match to be resumed by an :class:`EgrlTrainer` of
    ``instance``, ``config`` (its :data:`~.config.WHERE_FIELDS` aside) and ``seed``."""
    return CHECKPOINT.fingerprint(instance, json_settings(config), seed)


def _count(value: Any, what: str, low: int = 0) -> int:
    """``value`` as a whole number ``>= low`` (a checkpoint's counter or position), else
    ``ValueError`` (also for an infinite one or one with a fraction, never rounded)."""
    number = _number(value, what, low=float(low))
    if not math.isfinite(number) or number != int(number):
        raise ValueError(f"{what} {value!r} is not a whole number")
    return int(number)


def _number(value: Any, what: str, low: float | None = None) -> float:
    """``value`` as a float, not NaN and ``>= low`` where given, else ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{what} {value!r} is not a number")
    number = float(value)
    if math.isnan(number) or (low is not None and not number >= low):
        raise ValueError(f"{what} {value!r} is out of range")
    return number


def _array(
    value: Any,
    dtype: Any,
    what: str,
    *,
    ndim: int | None = None,
    shape: tuple[int, ...] | None = None,
) -> np.ndarray:
    """``value`` as a numpy array of ``dtype`` (a copy), of ``ndim`` dimensions or of
    ``shape`` where given, else ``ValueError``."""
    array = np.array(value, dtype=dtype)
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{what}: {array.ndim} dimensions, expected {ndim}")
    if shape is not None and array.shape != shape:
        raise ValueError(f"{what}: shape {array.shape}, expected {shape}")
    return array


def _actions(value: Any, what: str) -> np.ndarray:
    """``value`` as a 1-D int8 array of actions 0-2 (Copy, NoCopy, Drop), else ``ValueError``."""
    actions = np.asarray(value)
    if actions.ndim != 1 or actions.dtype.kind not in "iu":
        raise ValueError(f"{what}: not a list of whole numbers")
    if actions.size and not ((actions >= 0) & (actions <= 2)).all():
        raise ValueError(f"{what}: an action outside 0-2")
    return actions.astype(np.int8)


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _argmax(logits: np.ndarray) -> np.ndarray:
    return np.argmax(logits, axis=1).astype(np.int8)


def _sample(logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per unit from ``softmax(logits)`` (Gumbel-max): int8 [U]."""
    return np.argmax(logits + rng.gumbel(size=logits.shape), axis=1).astype(np.int8)
