"""The MMap-MuZero training loop: self-play, replay, learner, checkpoints, the best answer.

One process by default (several JAX processes would oversubscribe a 2-core machine):
the loop alternates one batched self-play move (``parallel_games`` games) with one
learner step every ``train_every`` moves once the replay holds ``min_replay`` positions.
With ``ray`` set, Ray actors play the moves (:mod:`~mallocgame.solvers.muzero.distributed`)
and everything else stays here; the loop's parts (:meth:`Trainer.take_move`,
:meth:`Trainer.learn_if_due`, :class:`RunPace`) also serve the shared trainer of many
programs (:mod:`~mallocgame.solvers.muzero.shared`). ``init`` starts the network from a
trained agent (:mod:`~mallocgame.solvers.muzero.agent`); ``learning=false`` never trains it.
With ``reanalyse_fraction > 0`` each learner step first searches a batch of kept
positions again (:mod:`~mallocgame.solvers.muzero.reanalyse`: demonstrations and the
best self-play game) and draws that fraction of its batch from them.

Budgets: a work budget counts completed self-play games (over all runs resumed from
one checkpoint), checked after each move of the ``parallel_games`` games played side by
side, so every game that completes on the move that reaches it counts (and may be the
answer): up to ``parallel_games - 1`` more than the budget (on Ray actors, checked once a
collection round: up to about ``actors * train_every * parallel_games`` more). A
wall-clock budget counts this call's seconds (compilation included). With a work budget
and no wall-clock budget the same seed gives the same run (in one process): every random
draw is keyed by the seed and a counter (self-play: the move counter; replay sampling:
the learner-step counter), never by time.

Answers: ``answer="search"`` keeps the best complete self-play game (the ``muzero``
solver); ``answer="policy"`` keeps the best game played by the policy network alone
(argmax of the prior, no search: the paper's "learning only" ablation), played every
``eval_every`` learner steps and at the end; ``answer="both"`` keeps the best of the two
kinds (``muzero-prod``'s agent), the policy's played every ``eval_every`` learner steps.

Checkpoints (``checkpoint_dir``): ``checkpoint.msgpack`` (network, optimizer state,
replay, counters, best answers; flax msgpack, written atomically) every
``checkpoint_seconds`` and at the end, and ``best.solution.json`` rewritten at every
improvement that beats the file on disk (:class:`~mallocgame.solvers.checkpoint.
BestAnswerFile`: a run resumed from an older checkpoint never makes it worse). A new
:class:`Trainer` on the same directory resumes from the checkpoint; games in flight at
a kill are lost (their moves are not in the replay), and so is a windowed restart's
game waiting to be kept for Reanalyse (the answer has it).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import serialization

from mallocgame.errors import SolverError
from mallocgame.fileio import canonical_sha256
from mallocgame.game.observe import empty_batch
from mallocgame.game.state import replay as replay_actions
from mallocgame.game.tables import build_tables
from mallocgame.instance import Instance
from mallocgame.solution import Solution
from mallocgame.solvers import checkpoint
from mallocgame.solvers.base import Improvement, Stopwatch
from mallocgame.solvers.muzero.agent import load_agent_params
from mallocgame.solvers.muzero.config import DEMONSTRATION_SOURCES, WHERE_FIELDS, MuZeroConfig
from mallocgame.solvers.muzero.distributed import RayActorsOwner, SelfPlayActors
from mallocgame.solvers.muzero.learner import batch_to_device, make_optimizer, make_train_step
from mallocgame.solvers.muzero.networks import MuZeroNet, init_params
from mallocgame.solvers.muzero.reanalyse import Reanalyser, demonstration, trajectory_record
from mallocgame.solvers.muzero.replay import Batch, GameRecord, Replay, draw
from mallocgame.solvers.muzero.search import fold_key, make_policy, make_search
from mallocgame.solvers.muzero.selfplay import FinishedGame, SelfPlay, play_policy
from mallocgame.solvers.muzero.streams import LEARNER, RESTARTS, SELFPLAY, jax_key, stream

__all__ = [
    "Trainer",
    "network_state",
    "TRAINER",
    "CHECKPOINT",
    "compiled_functions",
    "checkpoint_fingerprint",
]

CHECKPOINT_VERSION = 2  # 2: records carry allowed actions; Reanalyse's kept games
TRAINER = "muzero"  # the checkpoint's TRAINER_KEY: what wrote it
CHECKPOINT = checkpoint.CheckpointFormat(TRAINER, CHECKPOINT_VERSION, "config", WHERE_FIELDS)
"""MuZero's checkpoints: its settings under ``"config"``, :data:`~.config.WHERE_FIELDS` aside."""
RECENT_GAMES = 64  # the progress line's mean self-play reward is over this many last games


ANSWERS = ("search", "policy", "both")  # which games a Trainer's answer is the best of

RUN_ONLY_FIELDS = (
    "parallel_games",
    "greedy_games",
    "restart_fraction",
    "restart_window",
    "window_records",
    "q_scale",
    "q_scale_per_buffer",
    "value_scale",
    "td_steps",
    "init_temperature",
    "final_temperature",
    "temperature_decay_steps",
    "batch_size",
    "replay_size",
    "min_replay",
    "train_every",
    "reanalyse_fraction",
    "demonstrations",
    "reanalyse_best",
    "imitation",
    "es_share",
    "es_games",
    "es_workers",
    "checkpoint_seconds",
    "progress_seconds",
    "eval_every",
    "checkpoint_dir",
    "progress",
    "init",
    "learning",
    "ray",
    "actors",
)
"""Config fields the compiled functions never read (they are run-time arguments, array
shapes, or the loop's own settings): configs differing only in these share one compilation."""


def compiled_functions(config: MuZeroConfig) -> tuple[MuZeroNet, Any, Any, Any, Any]:
    """(network, optimizer, search, policy, train step) for ``config``, built once per
    process: trainers whose configs differ at most in :data:`RUN_ONLY_FIELDS` (a sweep
    of many programs or options, the tests) share the jitted functions, so XLA compiles
    each shape once per process."""
    defaults = MuZeroConfig()
    return _compiled(
        MuZeroConfig(
            **{
                f.name: getattr(defaults if f.name in RUN_ONLY_FIELDS else config, f.name)
                for f in dataclasses.fields(MuZeroConfig)
            }
        )
    )


@functools.lru_cache(maxsize=8)
def _compiled(config: MuZeroConfig) -> tuple[MuZeroNet, Any, Any, Any, Any]:
    net = MuZeroNet(config)
    optimizer = make_optimizer(config)
    return (
        net,
        optimizer,
        make_search(net, config),
        make_policy(net),
        make_train_step(net, config, optimizer),
    )


@dataclass
class Counters:
    """Work done so far (over all resumed runs)."""

    moves: int = 0  # batched self-play moves (each plays parallel_games game steps)
    steps: int = 0  # game steps played in self-play (windowed restarts' play-outs included)
    games: int = 0  # completed self-play games
    learner_steps: int = 0
    eval_games: int = 0
    backups: int = 0
    # self-play games started inside the best game (restart_fraction; windowed or not)
    restarts: int = 0
    demonstration_games: int = 0  # games played to build the demonstrations (greedy's one, es's)
    seconds: float = 0.0  # wall-clock of all runs


def visit_temperature(config: MuZeroConfig, learner_steps: int) -> float:
    """The ``muzero_policy`` search's visit-count temperature after ``learner_steps``:
    ``init_temperature`` to ``final_temperature`` linearly over ``temperature_decay_steps``."""
    frac = min(1.0, learner_steps / max(config.temperature_decay_steps, 1))
    return config.init_temperature + frac * (config.final_temperature - config.init_temperature)


def learner_batch(
    config: MuZeroConfig,
    replay: Replay,
    kept: Sequence[GameRecord],
    rng: np.random.Generator,
) -> Batch:
    """One learner step's ``batch_size`` positions: ``reanalyse_fraction`` of them drawn
    from the reanalysed ``kept`` games (when they have positions), the rest from ``replay``."""
    cfg = config
    n_kept = int(round(cfg.reanalyse_fraction * cfg.batch_size)) if kept else 0
    batch = replay.sample(cfg.batch_size - n_kept, cfg.unroll_steps, rng)
    if n_kept:
        drawn = draw(kept, n_kept, cfg.unroll_steps, rng, cfg.discount, cfg.td_steps)
        batch = Batch.concatenate([batch, drawn])
    return batch


def learner_steps_due(
    config: MuZeroConfig,
    moves: int,
    learned_through: int,
    replay_positions: int,
    at_most: int | None = None,
) -> tuple[int, int]:
    """(learner steps to take now, the moves accounted for after them): one step per
    ``train_every`` moves since ``learned_through``, none while the replay holds fewer
    than ``min_replay`` positions or ``learning`` is off, at most ``at_most``; the moves
    of the steps not taken are accounted for all the same (skipped, not owed)."""
    due = (moves - learned_through) // config.train_every
    ready = config.learning and replay_positions >= config.min_replay
    steps = due if ready else 0
    if at_most is not None:
        steps = min(steps, at_most)
    return max(steps, 0), learned_through + max(due, 0) * config.train_every


class RunPace:
    """When a run writes its progress lines and checkpoints, on its clock: a line every
    ``progress_seconds``, a checkpoint every ``checkpoint_seconds`` and as soon as its
    first game is complete (a run killed later resumes with it), both at the end.

    ``counters`` must have ``games`` and ``seconds`` (the latter is kept current: the
    seconds of all runs resumed from one checkpoint); ``save`` is ``None`` for a run
    without checkpoints."""

    def __init__(
        self,
        config: MuZeroConfig,
        counters: Any,
        progress_line: Callable[[], str],
        save: Callable[[], None] | None,
    ) -> None:
        self.config = config
        self.counters = counters
        self.progress_line = progress_line
        self.save = save
        self.start_seconds = counters.seconds
        self.next_checkpoint = config.checkpoint_seconds
        self.next_line = config.progress_seconds
        self.saved_a_game = counters.games > 0  # a resumed run's checkpoint holds its games

    def tick(self, clock: Stopwatch, log: Callable[[str], None]) -> None:
        """After each move: the counters' seconds, and a line or a checkpoint when due."""
        c = self.counters
        c.seconds = self.start_seconds + clock.elapsed
        if clock.elapsed >= self.next_line:
            self.next_line = clock.elapsed + self.config.progress_seconds
            log(self.progress_line())
        first_games = c.games > 0 and not self.saved_a_game
        if self.save is not None and (clock.elapsed >= self.next_checkpoint or first_games):
            self.next_checkpoint = clock.elapsed + self.config.checkpoint_seconds
            self.save()
            self.saved_a_game = c.games > 0

    def end(self, clock: Stopwatch, log: Callable[[str], None]) -> None:
        """At the end of a run: the counters' seconds, a last line and checkpoint."""
        self.counters.seconds = self.start_seconds + clock.elapsed
        log(self.progress_line())
        if self.save is not None:
            self.save()


def network_state(params: Any, opt_state: Any) -> dict[str, Any]:
    """A checkpoint's network and optimizer state, on the host as state dicts (read back by
    :meth:`Trainer.load_network`)."""
    return {
        "params": serialization.to_state_dict(jax.device_get(params)),
        "opt_state": serialization.to_state_dict(jax.device_get(opt_state)),
    }


def take_learner_step(trainer: Any, batch: Any) -> None:
    """One learner step of ``trainer`` (a :class:`Trainer` or a shared trainer) on ``batch``:
    its ``params`` and ``opt_state`` updated, ``counters.learner_steps`` counted, and every
    50th step its ``losses`` kept (floats)."""
    trainer.params, trainer.opt_state, info = trainer._train_step(
        trainer.params, trainer.opt_state, batch_to_device(batch)
    )
    trainer.counters.learner_steps += 1
    if trainer.counters.learner_steps % 50 == 0:
        trainer.losses = {k: float(v) for k, v in info._asdict().items()}


class Trainer(RayActorsOwner):
    """Trains MMap-MuZero on one instance and keeps the best answer.

    Args:
        instance: the instance (one agent per program, as in the paper).
        config: hyperparameters.
        seed: every random draw derives from it.
        answer: ``"search"`` (self-play games), ``"policy"`` (no-search games) or
            ``"both"`` (the best of either kind).
        checkpoint_dir: where to checkpoint and resume (``None``: no checkpoints).
        log: where progress lines go (``None``: silent).
        solver_name: the name its answers carry.
        given_demonstrations: answers of demonstration sources computed already (a
            request's ``demonstrations``; ``muzero-prod`` gives the heuristic's), each used
            for the source of its solver's name instead of solving again
            (:func:`~mallocgame.solvers.muzero.reanalyse.demonstration`); others are ignored.
    """

    def __init__(
        self,
        instance: Instance,
        config: MuZeroConfig = MuZeroConfig(),
        *,
        seed: int = 0,
        answer: str = "search",
        checkpoint_dir: str | Path | None = None,
        log: Callable[[str], None] | None = None,
        solver_name: str = "muzero",
        given_demonstrations: Sequence[Solution] = (),
    ) -> None:
        if answer not in ANSWERS:
            raise SolverError(f"answer must be one of {', '.join(ANSWERS)}, not {answer!r}")
        self.instance = instance
        self.config = config
        self.seed = seed
        self.answer = answer
        self.solver_name = solver_name
        self._given = {
            s.solver: s for s in given_demonstrations if s.solver in DEMONSTRATION_SOURCES
        }
        self.dir = (
            checkpoint.checkpoint_directory(checkpoint_dir) if checkpoint_dir is not None else None
        )
        self.log = log or (lambda _line: None)
        self._answer = checkpoint.BestAnswer(
            instance, solver=solver_name, seed=seed, folder=self.dir, log=self.log
        )
        checkpoint.enable_compilation_cache()
        self.tables = build_tables(instance)
        self.net, self.optimizer, self._search, self._policy, self._train_step = compiled_functions(
            config
        )
        self._play_key = jax_key(seed)
        self.params = init_params(self.net, seed, empty_batch(config.observation, 1))
        self.resumed = self.dir is not None and (self.dir / checkpoint.CHECKPOINT_NAME).exists()
        if config.init is not None and not self.resumed:
            self.params = load_agent_params(config.init, config, self.params)
        self.opt_state = jax.jit(self.optimizer.init)(self.params)  # one program, not one a leaf
        self.replay = Replay(config.replay_size, config.discount, config.td_steps)
        self.counters = Counters()
        self.best_actions: tuple[int, ...] = ()
        self.best_return = -np.inf  # the answer's game's return
        self.highest_return = -np.inf  # of every game offered as an answer (_improve)
        self.losses: dict[str, float] = {}
        self.recent_returns: collections.deque[float] = collections.deque(maxlen=RECENT_GAMES)
        self.selfplay = SelfPlay(instance, self.tables, config, self._search)
        self.reanalyser: Reanalyser | None = None
        self.demonstration_rewards: dict[str, float] = {}  # normalized reward of each demonstration
        # source, return, actions
        self.best_demonstration: tuple[str, float, tuple[int, ...]] | None = None
        # the demonstration answering for a run that completed no game
        self.fallback: str | None = None
        self.restart_return = -np.inf  # return of SelfPlay.restart_actions, seconds
        self._kept_return_s = (
            -np.inf
        )  # return of Reanalyse's best game, seconds (-inf: unknown, after a resume)
        # a windowed restart's best game, not yet kept
        self._windowed_best: FinishedGame | None = None
        # the self-play move from which a windowed restart's game may be kept
        self._next_windowed_keep = 0
        self._learned_through = 0  # moves the learner's steps so far account for
        self.actors: SelfPlayActors | None = None  # with config.ray: the self-play actors
        if config.reanalyse_fraction > 0:
            reanalyse_key = jax.random.split(jax_key(seed))[1]  # a stream apart from self-play's
            self.reanalyser = Reanalyser(config, self._search, self.selfplay.q_scale, reanalyse_key)
        if self.resumed:
            self._load()
        self._demonstrations_pending = self.reanalyser is not None and not self.resumed

    def add_demonstrations(self, clock: Stopwatch | None = None) -> None:
        """Build the configured demonstrations (:meth:`run` does, once, before its first
        move; a resumed run has them from its checkpoint). Each source, in the order
        of ``demonstration_sources``, is given at most ``es_share`` of ``clock``'s budget
        (what is left, if less): the heuristic's projection repair starts no replay past
        it, ``es`` plays until it (``es_games`` games without a budget); ``greedy``
        takes one game. Once the budget is spent no further source starts (the first
        always does: its game answers a run that completes none); those left out are
        not built later in this trainer either."""
        if self.reanalyser is None or not self._demonstrations_pending:
            return
        clock = clock if clock is not None else Stopwatch(None)
        cfg = self.config
        for i, source in enumerate(cfg.demonstration_sources):
            if i > 0 and clock.expired():
                left_out = ", ".join(cfg.demonstration_sources[i:])
                self.log(f"demonstrations {left_out}: left out, the budget is spent")
                break
            seconds = None
            if clock.seconds is not None:
                seconds = max(0.0, min(cfg.es_share * clock.seconds, clock.seconds - clock.elapsed))
            solution = demonstration(
                self.instance,
                source,
                self.seed,
                seconds=seconds,
                es_games=cfg.es_games,
                es_workers=cfg.es_workers,
                given=self._given.get(source),
            )
            assert solution.actions is not None
            games = 0 if source in self._given else int(solution.work.get("games", 0))
            self.counters.demonstration_games += games
            self.demonstration_rewards[source] = round(float(solution.normalized_reward), 6)
            if self.best_demonstration is None or solution.reward_s > self.best_demonstration[1]:
                self.best_demonstration = (source, solution.reward_s, tuple(solution.actions))
            record = trajectory_record(
                self.instance, self.tables, cfg, solution.actions, self.selfplay.scale
            )
            self.reanalyser.add_demonstration(record, self._search_kept_with(), clock.expired)
            self.log(
                f"demonstration {source}{' (given)' if source in self._given else ''}: "
                f"normalized reward {solution.normalized_reward:.4f}"
                + (f" ({games} game{'s' if games != 1 else ''})" if games else "")
            )
        self._demonstrations_pending = False

    # ------------------------------------------------------------------ the loop

    def temperature(self) -> float:
        """Visit-count temperature (``muzero_policy`` search): linear decay by learner steps."""
        return visit_temperature(self.config, self.counters.learner_steps)

    def run(
        self,
        *,
        seconds: float | None = None,
        games: int | None = None,
        callback: Callable[[Improvement], None] | None = None,
        clock: Stopwatch | None = None,
        on_game: Callable[[FinishedGame, float], None] | None = None,
    ) -> Solution:
        """Train until ``games`` self-play games are complete (in total) or ``seconds``
        pass; returns the best answer. With neither budget, plays until one game is done.

        ``clock``: a stopwatch started earlier (the solver starts it before building the
        trainer, so the budget covers setup and compilation); ``seconds`` is ignored then.
        If the budget ends before any self-play game is complete, the answer is the best
        demonstration's game (``info["fallback"]`` names it), or without demonstrations
        one no-search game of the current network, so there is always an answer; a run
        resumed from a demonstration's answer keeps it until a self-play game beats it. (A game
        of a program with few backup points can take far longer than its buffers suggest:
        every Drop-backup replays the moves since the last one.)
        ``callback`` sees every new best answer; a resumed run's best is reported first.
        ``on_game`` sees every complete self-play game and the seconds elapsed on ``clock``.
        """
        clock = clock if clock is not None else Stopwatch(seconds)
        c = self.counters
        target = (
            games if games is not None else (None if clock.seconds is not None else c.games + 1)
        )
        actors = self.self_play_actors()  # first: they start while the demonstrations are built
        pace = self.begin(clock, callback)
        while (target is None or c.games < target) and not clock.expired():
            if actors is not None:
                for got in actors.collect(self.params, c.learner_steps, self.temperature()):
                    self.take_move(
                        got.finished, clock, callback, on_game, got.played_out_steps, got.moves
                    )
                self.learn_if_due(clock, callback, at_most=1)
                pace.tick(clock, self.log)
                continue
            key = fold_key(self._play_key, c.moves)
            rng = stream(self.seed, SELFPLAY, c.moves) if self.config.restart_fraction > 0 else None
            finished = self.selfplay.step(self.params, key, self.temperature(), rng)
            self.take_move(finished, clock, callback, on_game, self.selfplay.played_out_steps)
            self.selfplay.played_out_steps = 0
            self.learn_if_due(clock, callback)
            pace.tick(clock, self.log)
        return self.finish(clock, callback, pace)

    def begin(self, clock: Stopwatch, callback: Callable[[Improvement], None] | None) -> RunPace:
        """What a run does before its first move: say whether it resumed (reporting the
        best so far to ``callback``), build the demonstrations, and (unless the budget
        is spent) start restarts inside the best demonstration's game; returns the run's
        progress and checkpoint timer."""
        cfg, c = self.config, self.counters
        if self.resumed:
            assert self.dir is not None  # what it resumed from
            self.log(
                f"resumed from {self.dir / checkpoint.CHECKPOINT_NAME}: {c.games} games, "
                f"{c.learner_steps} learner steps, best {self._normalized(self.best_return):.4f}"
            )
            self._answer.report(clock.elapsed, callback)  # the best so far is new to this caller
        elif self.dir is not None and c.games == 0:
            self.log(f"no checkpoint in {self.dir}: a new run")
        self.add_demonstrations(clock)
        demo = self.best_demonstration
        # restarts start now, not after a whole fresh game (unless the clock is spent: then
        # no move is played and a later run() starts them), inside the best demonstration
        # until a self-play game beats it, or inside a resumed run's best game
        if cfg.restart_fraction > 0 and not clock.expired():
            if demo is not None and demo[1] > self.restart_return:
                _, self.restart_return, self.selfplay.restart_actions = demo
            if self.selfplay.restart_actions:
                self.selfplay.restart_unplayed(stream(self.seed, RESTARTS))
        self._learned_through = c.moves - c.moves % cfg.train_every
        return RunPace(cfg, c, self.progress_line, self.save if self.dir is not None else None)

    def take_move(
        self,
        finished: Sequence[FinishedGame],
        clock: Stopwatch,
        callback: Callable[[Improvement], None] | None,
        on_game: Callable[[FinishedGame, float], None] | None = None,
        played_out_steps: int = 0,
        moves: int = 1,
    ) -> None:
        """Account for ``moves`` batched self-play moves whose finished games are
        ``finished`` (played here, or by a self-play actor of a distributed run): each
        game goes to the replay, the counters, Reanalyse's best and the answer."""
        cfg, c = self.config, self.counters
        for done in finished:
            if not done.played_out or cfg.window_records:
                self.replay.add(done.record)
            c.games += 1
            c.backups += done.backups
            if done.start:
                c.restarts += 1
            else:  # what the agent plays from the start; restarts begin inside its best game
                self.recent_returns.append(self._normalized(done.return_s))
            if self.reanalyser is not None and cfg.reanalyse_best:
                self._keep_best(done, clock)
            if self.answer != "policy" and done.return_s > self.highest_return:
                self._improve(done.actions, clock, callback)
            if on_game is not None:
                on_game(done, clock.elapsed)
        if self._windowed_best is not None and c.moves >= self._next_windowed_keep:
            self._keep_windowed_best(clock)
        c.moves += moves
        c.steps += moves * cfg.parallel_games + played_out_steps

    def learn_if_due(
        self,
        clock: Stopwatch,
        callback: Callable[[Improvement], None] | None,
        at_most: int | None = None,
    ) -> None:
        """One learner step per ``train_every`` moves, counted from the run's start, once
        the replay holds ``min_replay`` positions (none with ``learning`` off); with
        ``answer`` other than ``"search"``, a policy game every ``eval_every`` steps.
        ``at_most``: the steps taken now; those due beyond it are skipped, not owed."""
        cfg, c = self.config, self.counters
        steps, self._learned_through = learner_steps_due(
            cfg, c.moves, self._learned_through, self.replay.positions, at_most
        )
        for _ in range(steps):
            self._learn()
            if self.answer != "search" and c.learner_steps % cfg.eval_every == 0:
                self._evaluate(clock, callback, stop=clock.expired)  # not past the budget

    def finish(
        self,
        clock: Stopwatch,
        callback: Callable[[Improvement], None] | None,
        pace: RunPace,
    ) -> Solution:
        """The end of a run: an answer even without a complete game, the last progress
        line and checkpoint; returns the best answer."""
        if self.best is None and self.answer != "policy" and self.best_demonstration is not None:
            source, _, actions = self.best_demonstration
            self.log(
                f"no self-play game was complete within the budget: the answer is the "
                f"{source} demonstration's game"
            )
            self._improve(actions, clock, callback, fallback=source)
        elif self.answer == "policy" or self.best is None:
            # the final network's game; once there is an answer, not past the budget (a
            # policy game of a large program takes seconds)
            self._evaluate(clock, callback, None if self.best is None else clock.expired)
        pace.end(clock, self.log)
        assert self.best is not None
        return dataclasses.replace(self.best, wall_s=clock.elapsed, **self.work())

    def _start_actors(self) -> SelfPlayActors:
        return SelfPlayActors(
            [self.instance],
            self.config,
            self.seed,
            lambda _program: self.selfplay.restart_actions,
            self.log,
        )

    def _keep_best(self, done: FinishedGame, clock: Stopwatch) -> None:
        """Keep ``done`` as Reanalyse's best game if it beats the kept one; a restarted
        game's record lacks its replayed prefix, so the whole game is replayed into a
        record and searched (``B / parallel_games`` batched searches for ``B`` buffers).

        A game is compared with the kept one by its return in seconds: a restart that
        plays the kept game again is not replayed (the kept record's sum of float32
        rewards can fall short of the same game's return by a rounding).

        Windowed restarts can improve the best every few batched moves: the best of
        their played-out games waits in :attr:`_windowed_best` for
        :meth:`_keep_windowed_best`."""
        assert self.reanalyser is not None
        if not done.start:  # a fresh game is the agent's from its first move: its record is whole
            if self.reanalyser.keep_best(done.record):
                self._kept_return_s = done.return_s
        elif done.return_s <= self._kept_return_s:
            return
        elif done.played_out:
            if self._windowed_best is None or done.return_s > self._windowed_best.return_s:
                self._windowed_best = done
        else:
            self._keep_replayed(done, clock)

    def _keep_windowed_best(self, clock: Stopwatch) -> None:
        """Keep the waiting windowed restart's game if it still beats the kept one; then
        none is kept for ``B / parallel_games`` self-play moves (as many batched searches
        as keeping it took), so keeping takes at most about half of self-play's time."""
        assert self.reanalyser is not None and self._windowed_best is not None
        done, self._windowed_best = self._windowed_best, None
        if done.return_s > self._kept_return_s:
            self._keep_replayed(done, clock)
            batched = -(-self.instance.num_buffers // self.config.parallel_games)
            self._next_windowed_keep = self.counters.moves + batched

    def _keep_replayed(self, done: FinishedGame, clock: Stopwatch) -> None:
        """Replay ``done``'s actions into a record; if it beats the kept game, search it
        (until ``clock``'s budget is spent) and keep it as the best."""
        assert self.reanalyser is not None
        record = trajectory_record(
            self.instance, self.tables, self.config, done.actions, self.selfplay.scale
        )
        kept = self.reanalyser.keep_best(
            record, search_with=self._search_kept_with(), stop=clock.expired
        )
        if kept:
            self._kept_return_s = done.return_s

    def _search_kept_with(self) -> dict | None:
        """The parameters to search a game with when Reanalyse keeps it; None with
        ``learning`` off, where no learner step reads a kept game's targets."""
        return self.params if self.config.learning else None

    def _learn(self) -> None:
        c = self.counters
        rng = stream(self.seed, LEARNER, c.learner_steps)
        kept: list[GameRecord] = []
        if self.reanalyser is not None and self.reanalyser.positions > 0:
            if self.actors is not None:  # on the Reanalyse actor, not waited for
                self.actors.reanalyse(self.reanalyser, self.params, c.learner_steps)
            else:
                self.reanalyser.refresh(self.params)
            kept = self.reanalyser.games
        batch = learner_batch(self.config, self.replay, kept, rng)
        take_learner_step(self, batch)

    def _evaluate(
        self,
        clock: Stopwatch,
        callback: Callable[[Improvement], None] | None,
        stop: Callable[[], bool] | None = None,
    ) -> None:
        """One no-search game of the current policy (an answer candidate unless
        answer="search"); none where ``stop()`` ends it before it is complete."""
        game = play_policy(self.instance, self.tables, self.config, self.params, self._policy, stop)
        if game is None:
            return
        self.counters.eval_games += 1
        if game.return_s > self.highest_return or self.best is None:
            self._improve(tuple(game.actions()), clock, callback)

    def _improve(
        self,
        actions: tuple[int, ...],
        clock: Stopwatch,
        callback: Callable[[Improvement], None] | None,
        fallback: str | None = None,
    ) -> None:
        """Make the game of ``actions`` the best answer (``fallback``: the demonstration
        source whose game it is, where no self-play game was complete) where its exact
        reward is higher than the answer's: a game whose float running sum of rewards
        cancels above the best one's is no answer (its return still ranks it for
        restarts, as self-play plays by returns)."""
        game = replay_actions(self.instance, actions, self.tables)
        self.highest_return = max(self.highest_return, game.return_s)  # looked at once
        if self.answer != "policy" and game.return_s > self.restart_return:
            self.selfplay.restart_actions = actions
            self.restart_return = game.return_s
        kept_fallback, self.fallback = self.fallback, fallback  # the candidate's info names it
        solution = self._answer.answer_of(game, clock.elapsed, **self.work())
        if self.best is not None and not solution.reward_s > self.best.reward_s:
            self.fallback = kept_fallback
            return
        self.best_actions = actions
        self.best_return = game.return_s
        self._answer.take(solution, clock.elapsed, callback)

    @property
    def best(self) -> Solution | None:
        """The best answer so far (``None`` before the first)."""
        return self._answer.solution

    # ----------------------------------------------------------------- reporting

    def _normalized(self, return_s: float) -> float:
        r = self.tables.normalizer_s
        return return_s / r if r and np.isfinite(return_s) else float("nan")

    def work(self) -> dict[str, Any]:
        """The work done and the run's diagnostics: a solution's ``work`` and ``info``."""
        c = self.counters
        return {
            "work": {
                "games": c.games,
                "steps": c.steps,
                "learner_steps": c.learner_steps,
                "eval_games": c.eval_games,
                "backups": c.backups,
                "restarts": c.restarts,
                "reanalysed": self.reanalyser.positions_searched if self.reanalyser else 0,
                "demonstration_games": c.demonstration_games,
            },
            "info": {
                "train_seconds": round(c.seconds, 3),
                "answer": self.answer,
                "recent_mean": self.recent_mean(),
                "demonstrations": dict(self.demonstration_rewards),
                **({"fallback": self.fallback} if self.fallback else {}),
                **({"run": self.run_id} if self.dir is not None else {}),
            },
        }

    @property
    def run_id(self) -> str:
        """The hash of the run's checkpoint fingerprint (instance, settings, seed): in the
        folder's best file, so that a resumed run takes only its own game from it."""
        return canonical_sha256(self._fingerprint())[:16]

    def recent_mean(self) -> float | None:
        """Mean normalized reward of the last :data:`RECENT_GAMES` self-play games
        (``None`` before the first): what the agent plays now, not its best find."""
        if not self.recent_returns:
            return None
        return round(float(np.mean(self.recent_returns)), 6)

    def progress_line(self) -> str:
        c = self.counters
        rate = c.steps / c.seconds if c.seconds > 0 else 0.0
        loss = " ".join(f"{k} {v:.3f}" for k, v in self.losses.items())
        recent = f"  mean {np.mean(self.recent_returns):.4f}" if self.recent_returns else ""
        return (
            f"{c.seconds:8.1f} s  games {c.games}  steps {c.steps} ({rate:.0f}/s)  learner "
            f"{c.learner_steps}  replay {self.replay.positions}  best "
            f"{self._normalized(self.best_return):.4f}{recent}" + (f"  loss {loss}" if loss else "")
        )

    # --------------------------------------------------------------- checkpoints

    def _fingerprint(self) -> dict[str, Any]:
        return checkpoint_fingerprint(self.instance, self.config, self.seed, self.answer)

    def save(self) -> None:
        """Write the checkpoint atomically."""
        assert self.dir is not None
        state = {
            "fingerprint": CHECKPOINT.written(self._fingerprint()),
            **network_state(self.params, self.opt_state),
            "replay": self.replay.state_dict(),
            **self.program_state(),
        }
        checkpoint.write_checkpoint(self.dir, state)

    def program_state(self) -> dict[str, Any]:
        """What a checkpoint holds of this program's run beside the network, its
        optimizer and the replay: counters, the best answer, the normalized rewards of the
        last self-play games (``info["recent_mean"]``), Reanalyse's kept games, the
        demonstrations."""
        state: dict[str, Any] = {
            "counters": dataclasses.asdict(self.counters),
            "best_actions": np.asarray(self.best_actions, dtype=np.int8),
            "recent_returns": np.asarray(self.recent_returns, dtype=np.float64),
        }
        if self.fallback is not None:  # the best answer is this demonstration's game
            state["fallback"] = self.fallback
        if self.reanalyser is not None:
            state["reanalyse"] = self.reanalyser.state_dict()
            state["demonstration_rewards"] = dict(self.demonstration_rewards)
        if self.best_demonstration is not None:  # the fallback answer and the first restarts' game
            source, return_s, actions = self.best_demonstration
            state["best_demonstration"] = {
                "source": source,
                "return_s": return_s,
                "actions": np.asarray(actions, dtype=np.int8),
            }
        return state

    def _load(self) -> None:
        assert self.dir is not None
        state = CHECKPOINT.restore(self.dir, self._fingerprint())
        self.load_network(state)
        self.replay.load_state_dict(state["replay"])
        self.load_program_state(state)
        self._adopt_best_file()

    def _adopt_best_file(self) -> None:
        """Where the run was stopped after a new best game but before its next checkpoint,
        that game (in the folder's best file, checked) is the best again, not lost; a file
        another run wrote (another ``run`` in its info: other settings, before this
        checkpoint was started again) is left to that run."""
        assert self._answer.file is not None
        found = self._answer.file.solution_on_disk()
        if found is None or found.actions is None or found.seed != self.seed:
            return
        if found.info.get("run") != self.run_id:
            return
        if found.solver != self.solver_name or len(found.actions) != self.instance.num_buffers:
            return
        actions = tuple(int(a) for a in found.actions)
        if replay_actions(self.instance, actions, self.tables).return_s > self.highest_return:
            fallback = found.info.get("fallback")
            self._improve(
                actions, Stopwatch(None), None, None if fallback is None else str(fallback)
            )

    def load_network(self, state: dict[str, Any]) -> None:
        """The network and the optimizer state of a checkpoint's ``state`` (as
        :func:`network_state` wrote them)."""
        self.params = serialization.from_state_dict(self.params, state["params"])
        self.opt_state = serialization.from_state_dict(self.opt_state, state["opt_state"])
        self.params = checkpoint.device_arrays(self.params)
        self.opt_state = checkpoint.device_arrays(self.opt_state)

    def load_program_state(self, state: dict[str, Any]) -> None:
        """What :meth:`program_state` wrote; the best answer is replayed and offered."""
        if self.reanalyser is not None:
            self.reanalyser.load_state_dict(state["reanalyse"])
            self.demonstration_rewards = {
                str(k): float(v) for k, v in state.get("demonstration_rewards", {}).items()
            }
            self._demonstrations_pending = False
        self.counters = Counters(**state["counters"])
        # (absent from checkpoints written before it was kept: the mean restarts)
        recent = np.asarray(state.get("recent_returns", ()), dtype=np.float64).ravel()
        self.recent_returns.clear()
        self.recent_returns.extend(float(r) for r in recent)
        if "best_demonstration" in state:
            kept = state["best_demonstration"]
            self.best_demonstration = (
                str(kept["source"]),
                float(kept["return_s"]),
                tuple(int(a) for a in np.asarray(kept["actions"])),
            )
        actions = tuple(int(a) for a in np.asarray(state["best_actions"]))
        if actions:
            fallback = state.get("fallback")
            self._improve(
                actions, Stopwatch(None), None, None if fallback is None else str(fallback)
            )


def checkpoint_fingerprint(
    instance: Instance,
    config: MuZeroConfig,
    seed: int,
    answer: str,
) -> dict[str, Any]:
    """What a checkpoint must match to be resumed by a :class:`Trainer` of ``instance``,
    ``config`` (its :data:`~.config.WHERE_FIELDS` aside), ``seed`` and ``answer``."""
    return CHECKPOINT.fingerprint(instance, fingerprint_settings(config), seed, answer=answer)


NEW_SETTINGS = {
    "init": None,
    "learning": True,
    "order_search_patience": 0.0,
    "agent_min_seconds": 10.0,
}
"""Settings newer than the checkpoint format, left out of a fingerprint at these values
(their defaults), so that a checkpoint written before them still resumes."""


def fingerprint_settings(config: MuZeroConfig) -> dict[str, Any]:
    """``config``'s settings as a fingerprint holds them (see :data:`NEW_SETTINGS`)."""
    settings = dataclasses.asdict(config)
    for name, default in NEW_SETTINGS.items():
        if settings.get(name) == default:
            del settings[name]
    return settings
