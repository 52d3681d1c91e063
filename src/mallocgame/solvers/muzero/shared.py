"""One MMap-MuZero agent trained on many programs: :class:`SharedTrainer`.

The networks see a program only through its observation, so one network can learn
from games of many programs and then start a run on a program it never saw
(``--option init=DIR``: :mod:`~mallocgame.solvers.muzero.agent`). A shared run holds
one network, one optimizer and one replay; each program has its own
:class:`~mallocgame.solvers.muzero.train.Trainer` for what is the program's own: its
self-play batch, its demonstrations and Reanalyse's kept games, its best answer and
its counters. Self-play moves go round-robin over the programs (move ``m`` plays
program ``m mod P``; on Ray, actors play them: :mod:`~.distributed`); a learner step
every ``train_every`` moves draws ``reanalyse_fraction`` of its batch from the kept
games of every program (one program's refreshed per step, round-robin) and the rest
from the shared replay. Rewards and values are in units of each program's own
normalizer (``value_scale / R``), so the targets of different programs are comparable.

Budgets: a work budget counts self-play games over all programs; a wall-clock budget
this call's seconds, of which each program's demonstrations take at most
``es_share / P``. With a work budget the same seed gives the same run (one process).

The checkpoint (``checkpoint_dir``) is the network, optimizer, replay, counters and
every program's own state, under the trainer name :data:`SHARED_TRAINER`; a shared run
resumes from it. Beside it, ``agent.msgpack`` holds the network alone (with the same
fingerprint): what ``init=DIR`` reads, and what to copy elsewhere. A folder that holds
an agent but no checkpoint (one copied there) is refused: a new run would replace it
(:func:`check_agent_folder`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

from mallocgame.errors import SolverError
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers import checkpoint
from mallocgame.solvers.base import Stopwatch
from mallocgame.solvers.muzero.agent import AGENT_NAME, write_agent
from mallocgame.solvers.muzero.config import DEFAULT_ACTORS, WHERE_FIELDS, MuZeroConfig
from mallocgame.solvers.muzero.distributed import ActorMoves, RayActorsOwner, SelfPlayActors
from mallocgame.solvers.muzero.replay import GameRecord, Replay
from mallocgame.solvers.muzero.search import fold_key
from mallocgame.solvers.muzero.selfplay import FinishedGame
from mallocgame.solvers.muzero.streams import LEARNER, SELFPLAY, jax_key, stream
from mallocgame.solvers.muzero.train import (
    RunPace,
    Trainer,
    fingerprint_settings,
    learner_batch,
    learner_steps_due,
    network_state,
    take_learner_step,
    visit_temperature,
)

__all__ = [
    "SharedTrainer",
    "SHARED_TRAINER",
    "SHARED_CHECKPOINT",
    "SharedCounters",
    "check_programs",
    "check_agent_folder",
]

SHARED_TRAINER = "muzero-shared"
SHARED_CHECKPOINT = checkpoint.CheckpointFormat(SHARED_TRAINER, 1, "config", WHERE_FIELDS)
"""A shared run's checkpoints: the programs' hashes as one, the settings, the seed."""


@dataclass
class SharedCounters:
    """A shared run's work over all programs (and all runs resumed from one checkpoint)."""

    moves: int = 0  # batched self-play moves, all programs
    games: int = 0  # completed self-play games, all programs
    learner_steps: int = 0
    seconds: float = 0.0


class SharedTrainer(RayActorsOwner):
    """Trains one MMap-MuZero agent on ``instances`` and keeps each one's best answer.

    Args:
        instances: the programs (at least one, no two the same, each with a buffer:
            :func:`check_programs`).
        config: hyperparameters (one network for all).
        seed: every random draw derives from it.
        checkpoint_dir: where to checkpoint and resume (``None``: no checkpoints); one
            holding an agent but no checkpoint is refused (:func:`check_agent_folder`).
        log: where progress lines go (``None``: silent).
    """

    def __init__(
        self,
        instances: Sequence[Instance],
        config: MuZeroConfig = MuZeroConfig(),
        *,
        seed: int = 0,
        checkpoint_dir: str | Path | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        check_programs(instances)
        self.instances = list(instances)
        self.config = config
        self.seed = seed
        self.log = log or (lambda _line: None)
        self.dir = (
            checkpoint.checkpoint_directory(checkpoint_dir) if checkpoint_dir is not None else None
        )
        if self.dir is not None:
            check_agent_folder(self.dir, f"start from it with init={self.dir}, in another folder")
        resumed = self.dir is not None and (self.dir / checkpoint.CHECKPOINT_NAME).exists()
        # the programs' trainers never write, report or start actors: the shared run does
        own = dataclasses.replace(
            config, checkpoint_dir=None, progress=False, ray=None, actors=DEFAULT_ACTORS
        )
        rest = dataclasses.replace(own, init=None)  # the agent is read once, by the first
        if resumed:  # the network is the checkpoint's: the agent it started from is not read
            own = rest
        self.trainers = [
            Trainer(
                inst,
                own if p == 0 else rest,
                seed=seed,
                answer="search",
                log=self._program_log(inst.name),
            )
            for p, inst in enumerate(self.instances)
        ]
        for p, trainer in enumerate(self.trainers):  # each program its own stream of keys
            trainer._play_key = jax.random.fold_in(jax_key(seed), p)
        lead = self.trainers[0]
        self.params, self.opt_state = lead.params, lead.opt_state
        self._train_step = lead._train_step
        self.replay = Replay(config.replay_size, config.discount, config.td_steps)
        for trainer in self.trainers:
            trainer.replay = self.replay
        self.counters = SharedCounters()
        self.losses: dict[str, float] = {}
        self.actors: SelfPlayActors | None = None
        self._learned_through = 0
        self.resumed = resumed
        if self.resumed:
            self._load()

    def _program_log(self, name: str) -> Callable[[str], None]:
        return lambda line: self.log(f"{name}: {line}")

    # ------------------------------------------------------------------ the loop

    def run(
        self,
        *,
        seconds: float | None = None,
        games: int | None = None,
        clock: Stopwatch | None = None,
    ) -> list[Solution]:
        """Train until ``games`` self-play games (over all programs, in total) are complete
        or ``seconds`` pass; returns each program's best answer, in order, its ``work`` its
        program's games and moves and the shared learner's steps (``info.train_seconds``:
        the whole run's). With neither budget, plays until every program could have
        finished one game."""
        clock = clock if clock is not None else Stopwatch(seconds)
        cfg, c = self.config, self.counters
        programs = len(self.trainers)
        target = games if games is not None else (None if clock.seconds else c.games + programs)
        if self.resumed:
            assert self.dir is not None  # what it resumed from
            self.log(
                f"resumed from {self.dir / checkpoint.CHECKPOINT_NAME}: {c.games} games, "
                f"{c.learner_steps} learner steps"
            )
        elif self.dir is not None and c.games == 0:
            self.log(f"no checkpoint in {self.dir}: a new run")
        actors = self.self_play_actors()  # first: they start while the demonstrations are built
        share = None if clock.seconds is None else clock.seconds / programs
        for trainer in self.trainers:
            trainer.params = self.params
            trainer.add_demonstrations(Stopwatch(share))
            trainer.begin(clock, None)
        self._learned_through = c.moves - c.moves % cfg.train_every
        pace = RunPace(cfg, c, self.progress_line, self.save if self.dir is not None else None)
        while (target is None or c.games < target) and not clock.expired():
            if actors is not None:
                got = actors.collect(self.params, c.learner_steps, self.temperature())
                for moves in got:
                    self._take(moves, clock)
                self._learn_if_due(at_most=1)
            else:
                p = c.moves % programs
                trainer = self.trainers[p]
                key = fold_key(trainer._play_key, trainer.counters.moves)
                rng = (
                    stream(self.seed, SELFPLAY, p, trainer.counters.moves)
                    if cfg.restart_fraction > 0
                    else None
                )
                finished = trainer.selfplay.step(self.params, key, self.temperature(), rng)
                played_out, trainer.selfplay.played_out_steps = trainer.selfplay.played_out_steps, 0
                self._take(ActorMoves(p, finished, 1, played_out), clock)
                self._learn_if_due()
            pace.tick(clock, self.log)
        answers = []
        for trainer in self.trainers:
            trainer.params = self.params
            silent = RunPace(cfg, trainer.counters, _summary(trainer), None)
            answers.append(trainer.finish(clock, None, silent))
        pace.end(clock, self.log)
        # the network every answer comes from, and its training time: the shared run's
        return [
            dataclasses.replace(
                answer,
                work={**answer.work, "learner_steps": c.learner_steps},
                info={**answer.info, "train_seconds": round(c.seconds, 3)},
            )
            for answer in answers
        ]

    def _take(self, moves: ActorMoves, clock: Stopwatch) -> None:
        trainer = self.trainers[moves.program]
        trainer.params = self.params  # Reanalyse searches a newly kept game with them
        finished: list[FinishedGame] = moves.finished
        trainer.take_move(finished, clock, None, None, moves.played_out_steps, moves.moves)
        self.counters.moves += moves.moves
        self.counters.games += len(finished)

    def temperature(self) -> float:
        """The search's visit-count temperature (see :func:`~.train.visit_temperature`)."""
        return visit_temperature(self.config, self.counters.learner_steps)

    def _learn_if_due(self, at_most: int | None = None) -> None:
        """As :meth:`Trainer.learn_if_due`, over the moves of all programs."""
        steps, self._learned_through = learner_steps_due(
            self.config, self.counters.moves, self._learned_through, self.replay.positions, at_most
        )
        for _ in range(steps):
            self._learn()

    def _learn(self) -> None:
        c = self.counters
        rng = stream(self.seed, LEARNER, c.learner_steps)
        keeping = [t.reanalyser for t in self.trainers if t.reanalyser and t.reanalyser.positions]
        kept: list[GameRecord] = []
        if keeping:
            refreshed = keeping[c.learner_steps % len(keeping)]
            if self.actors is not None:  # on the Reanalyse actor, not waited for
                self.actors.reanalyse(refreshed, self.params, c.learner_steps)
            else:
                refreshed.refresh(self.params)
            kept = [game for reanalyser in keeping for game in reanalyser.games]
        batch = learner_batch(self.config, self.replay, kept, rng)
        take_learner_step(self, batch)

    def _start_actors(self) -> SelfPlayActors:
        return SelfPlayActors(
            self.instances,
            self.config,
            self.seed,
            lambda p: self.trainers[p].selfplay.restart_actions,
            self.log,
        )

    # ----------------------------------------------------------------- reporting

    def best_rewards(self) -> list[float]:
        """Each program's best normalized reward so far (NaN before its first game)."""
        return [t._normalized(t.best_return) for t in self.trainers]

    def progress_line(self) -> str:
        c = self.counters
        best = np.array(self.best_rewards())
        recent = [r for t in self.trainers for r in t.recent_returns]
        loss = " ".join(f"{k} {v:.3f}" for k, v in self.losses.items())
        mean_best = float(np.nanmean(best)) if np.isfinite(best).any() else float("nan")
        return (
            f"{c.seconds:8.1f} s  programs {len(self.trainers)}  games {c.games}  learner "
            f"{c.learner_steps}  replay {self.replay.positions}  mean best {mean_best:.4f}"
            + (f"  mean recent {np.mean(recent):.4f}" if recent else "")
            + (f"  loss {loss}" if loss else "")
        )

    # --------------------------------------------------------------- checkpoints

    def _fingerprint(self) -> dict[str, Any]:
        return shared_fingerprint(self.instances, self.config, self.seed)

    def save(self) -> None:
        """Write the checkpoint atomically."""
        assert self.dir is not None
        for trainer in self.trainers:  # a program's seconds are the whole shared run's
            trainer.counters.seconds = self.counters.seconds
        state = {
            "fingerprint": SHARED_CHECKPOINT.written(self._fingerprint()),
            **network_state(self.params, self.opt_state),
            "replay": self.replay.state_dict(),
            "counters": dataclasses.asdict(self.counters),
            "programs": {str(p): t.program_state() for p, t in enumerate(self.trainers)},
        }
        checkpoint.write_checkpoint(self.dir, state)
        write_agent(self.dir, state["fingerprint"], state["params"])

    def _load(self) -> None:
        assert self.dir is not None
        state = SHARED_CHECKPOINT.restore(self.dir, self._fingerprint())
        lead = self.trainers[0]
        lead.load_network(state)
        self.params, self.opt_state = lead.params, lead.opt_state
        self.replay.load_state_dict(state["replay"])
        self.counters = SharedCounters(**state["counters"])
        for p, trainer in enumerate(self.trainers):
            trainer.params = self.params
            trainer.load_program_state(state["programs"][str(p)])


def check_programs(instances: Sequence[Instance]) -> None:
    """Refuse, with a :class:`SolverError`, programs a shared agent cannot train on: none,
    one given twice, or one without buffers (no move to decide, no game to play)."""
    if not instances:
        raise SolverError("a shared agent needs at least one program")
    hashes = [inst.sha256 for inst in instances]
    if len(set(hashes)) != len(hashes):
        raise SolverError("a shared agent's programs must differ (one is given twice)")
    empty = [inst.name for inst in instances if inst.num_buffers == 0]
    if empty:
        raise SolverError(f"{', '.join(empty)}: no buffers to place, nothing to train on")


def check_agent_folder(folder: Path, remedy: str) -> None:
    """Refuse, with a :class:`SolverError` ending in ``remedy``, a shared run's folder that
    holds an agent (:data:`~.agent.AGENT_NAME`) but no checkpoint to resume: a new run
    would replace that agent."""
    if (folder / AGENT_NAME).exists() and not (folder / checkpoint.CHECKPOINT_NAME).exists():
        raise SolverError(
            f"{folder}: holds an agent ({AGENT_NAME}) but no checkpoint to resume, and a new "
            f"run would replace it: {remedy}"
        )


def _summary(trainer: Trainer) -> Callable[[], str]:
    """A program's last line in a shared run: its games and its best."""
    return lambda: (
        f"games {trainer.counters.games}  restarts {trainer.counters.restarts}  "
        f"best {trainer._normalized(trainer.best_return):.4f}"
    )


def shared_fingerprint(
    instances: Sequence[Instance], config: MuZeroConfig, seed: int
) -> dict[str, Any]:
    """What a shared checkpoint must match to be resumed: the programs (in order), the
    settings (but :data:`~.config.WHERE_FIELDS`) and the seed."""
    joined = hashlib.sha256("\n".join(inst.sha256 for inst in instances).encode()).hexdigest()
    return SHARED_CHECKPOINT.fingerprint_of(
        joined, fingerprint_settings(config), seed, programs=len(instances)
    )
