"""Self-play on Ray actors: the moves of a distributed MMap-MuZero run.

A run with ``ray`` set (``local``: a one-node cluster started in this process, see
:func:`mallocgame.workers.start_local_ray`; ``auto``: the cluster already running;
``HOST:PORT``: that cluster's head) plays its self-play games on ``actors`` Ray actors
of one CPU each, and keeps everything else where the one-process trainer keeps it: the
learner (on the GPU when JAX sees one), the replay, Reanalyse, the answers and the checkpoints stay in the
driver, so a distributed run writes the one-process trainer's checkpoint and either
resumes the other's.

Each actor holds the :class:`~mallocgame.solvers.muzero.selfplay.SelfPlay` batches of
the programs it is given (program ``p`` of ``P`` to actor ``p mod actors``, and every
actor a program when there are fewer programs than actors); a call plays
``train_every`` batched moves of one of them with the parameters it is sent and returns
the finished games (:class:`ActorMoves`). :meth:`SelfPlayActors.collect` waits for at
least one call, sends that actor its next call at once with the newest parameters (put
into Ray's object store once per learner step: the broadcast), and hands the moves to
the trainer, which takes at most one learner step per collection so that self-play
never waits on the learner (when self-play outpaces the learner, a distributed run
takes fewer learner steps per game than one process does).

With Reanalyse on (``reanalyse_fraction`` > 0) one more actor runs its searches: each
learner step applies the targets of the search that has finished and sends the next
kept positions (:meth:`SelfPlayActors.reanalyse`), so the learner never waits on a
search either; a kept position's targets are then one search behind the parameters.

An actor that dies (killed, its node lost), or whose result is lost with its node, is
restarted by Ray (``max_restarts=-1``); the games it was playing are lost, as a
one-process run's games in flight are at a kill, and the run goes on. An actor whose
call raises (a bug, not a death) ends the run with a :class:`SolverError` that names it.
:meth:`SelfPlayActors.collect` waits at most :data:`WAIT_S` for a call, so a run whose
actors are all slow or unreachable still stops at its budget. A distributed run is not
reproducible from its seed: which actor's games arrive first depends on timing.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mallocgame.errors import SolverError, one_line
from mallocgame.instance import Instance
from mallocgame.solvers.muzero.config import MuZeroConfig
from mallocgame.solvers.muzero.reanalyse import Reanalyser
from mallocgame.solvers.muzero.replay import GameRecord
from mallocgame.solvers.muzero.selfplay import FinishedGame
from mallocgame.solvers.muzero.streams import ACTOR, jax_key, stream
from mallocgame.workers import check_ray_address, start_local_ray

__all__ = [
    "ActorMoves",
    "SelfPlayActor",
    "ReanalyseActor",
    "SelfPlayActors",
    "RayActorsOwner",
    "connect",
    "ACTOR_ENV",
]

ACTOR_ENV = {
    "JAX_PLATFORMS": "cpu",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
}
"""An actor's environment: JAX on its one CPU (the GPU is the learner's)."""

WAIT_S = 1.0
"""Seconds :meth:`SelfPlayActors.collect` waits for a call at most, so that the trainer
looks at its clock at least this often."""

LOCAL = "local"


def connect(address: str, actors: int) -> None:
    """Join the Ray cluster ``address`` (``local``: start one here with at least ``actors``
    CPUs, :func:`~mallocgame.workers.start_local_ray`, whatever cluster ``RAY_ADDRESS``
    names) unless this process is in one already; a cluster Ray cannot start or join,
    and one with fewer CPUs than ``actors`` (the actors of one CPU to start), are a
    :class:`SolverError`."""
    try:
        import ray
    except ImportError:
        raise SolverError("ray needs Ray: pip install 'mallocgame[ray]'") from None
    # Ray starts its processes with fork and exec, which JAX's fork warning cannot tell apart
    warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
    if address not in (LOCAL, "auto"):
        check_ray_address(address, error=SolverError)
    if not ray.is_initialized():
        try:
            if address == LOCAL:
                start_local_ray(max(actors, os.cpu_count() or 1), object_store_bytes=256 * 2**20)
            else:
                ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            what = "cannot start a cluster here" if address == LOCAL else "cannot join the cluster"
            raise SolverError(f"ray {address}: {what} ({one_line(exc)})") from None
    cpus = ray.cluster_resources().get("CPU", 0)
    if cpus < actors:
        raise SolverError(
            f"ray: the cluster has {cpus:g} CPUs, fewer than the {actors} actors of one CPU "
            "this run starts"
        )


@dataclass(frozen=True)
class ActorMoves:
    """What one actor call played: ``moves`` batched moves of program ``program``."""

    program: int
    finished: list[FinishedGame]
    moves: int
    played_out_steps: int  # game steps played without search (windowed restarts)


class SelfPlayActor:
    """One self-play actor's state (a Ray actor class once :class:`SelfPlayActors`
    wraps it): a :class:`SelfPlay` per program it plays, built at its first call."""

    def __init__(
        self, instances: Sequence[Instance], config: MuZeroConfig, seed: int, index: int
    ) -> None:
        import jax

        self.instances = list(instances)
        self.config = config
        self.seed = seed
        self.index = index
        # a restarted actor draws other keys than the one it replaces: the pid is in them
        base = jax.random.fold_in(jax_key(seed), 1 + index)
        self.key = jax.random.fold_in(base, os.getpid())
        self.calls = 0
        self.selfplay: dict[int, Any] = {}

    def _selfplay(self, program: int) -> Any:
        if program not in self.selfplay:
            from mallocgame.game.tables import build_tables
            from mallocgame.solvers.checkpoint import enable_compilation_cache
            from mallocgame.solvers.muzero.selfplay import SelfPlay
            from mallocgame.solvers.muzero.train import compiled_functions

            enable_compilation_cache()
            instance = self.instances[program]
            search = compiled_functions(self.config)[2]
            self.selfplay[program] = SelfPlay(instance, build_tables(instance), self.config, search)
        return self.selfplay[program]

    def play(
        self,
        params: Any,
        program: int,
        moves: int,
        temperature: float,
        restart_actions: tuple[int, ...],
    ) -> ActorMoves:
        """Play ``moves`` batched moves of ``program`` with ``params``; new games restart
        inside ``restart_actions`` as the one-process trainer's do."""
        from mallocgame.solvers.muzero.search import fold_key

        selfplay = self._selfplay(program)
        rng = (
            stream(self.seed, ACTOR, self.index, os.getpid(), self.calls)
            if self.config.restart_fraction > 0
            else None
        )
        if restart_actions != selfplay.restart_actions:
            first = not selfplay.restart_actions
            selfplay.restart_actions = restart_actions
            if first and rng is not None:
                selfplay.restart_unplayed(rng)
        finished: list[FinishedGame] = []
        for _ in range(moves):
            key = fold_key(self.key, self.calls)
            self.calls += 1
            finished.extend(selfplay.step(params, key, temperature, rng))
        played_out, selfplay.played_out_steps = selfplay.played_out_steps, 0
        return ActorMoves(program, finished, moves, played_out)


class ReanalyseActor:
    """The Reanalyse searches of a distributed run (a Ray actor once
    :class:`SelfPlayActors` wraps it): the self-play search, compiled at the first call."""

    def __init__(self, config: MuZeroConfig) -> None:
        self.config = config
        self._search: Any = None

    def search(
        self,
        params: Any,
        key: np.ndarray,
        obs: dict[str, np.ndarray],
        allowed: np.ndarray,
        q_scale: np.float32,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The improved policies and root values of one batch of kept positions."""
        if self._search is None:
            from mallocgame.solvers.checkpoint import enable_compilation_cache
            from mallocgame.solvers.muzero.train import compiled_functions

            enable_compilation_cache()
            self._search = compiled_functions(self.config)[2]
        result = self._search(params, key, obs, allowed, np.float32(1.0), q_scale)
        return np.asarray(result.policy), np.asarray(result.root_value)


class SelfPlayActors:
    """The self-play actors of one run, over the programs ``instances``.

    ``restart_actions(p)`` gives program ``p``'s current restart game (the trainer's best).
    """

    def __init__(
        self,
        instances: Sequence[Instance],
        config: MuZeroConfig,
        seed: int,
        restart_actions: Callable[[int], tuple[int, ...]],
        log: Callable[[str], None],
    ) -> None:
        import ray

        assert config.ray is not None
        reanalysing = config.reanalyse_fraction > 0
        connect(config.ray, config.actors + int(reanalysing))
        self._ray = ray
        self.config = config
        self.restart_actions = restart_actions
        self.log = log
        remote = ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=0)(SelfPlayActor)
        options = {"runtime_env": {"env_vars": ACTOR_ENV}}
        count = config.actors
        self.programs = [
            [p for p in range(len(instances)) if p % count == a] or [a % len(instances)]
            for a in range(count)
        ]
        # Ray's stubs type an actor handle's methods without their .remote: Any
        self.actors: list[Any] = [
            remote.options(**options).remote(list(instances), config, seed, a) for a in range(count)
        ]
        self.reanalyse_actor: Any = (
            ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=0)(ReanalyseActor)
            .options(**options)
            .remote(config)
            if reanalysing
            else None
        )
        # the Reanalyse search in flight: its result, whose kept positions, which ones
        self._reanalysis: tuple[Any, Reanalyser, list[tuple[GameRecord, int]]] | None = None
        self.calls = [0] * count  # calls sent to each actor (picks its next program)
        self.reanalysed = 0  # Reanalyse searches of the actor applied
        self.deaths = 0  # times an actor died
        self._down: set[int] = set()  # actors that died and have not answered since
        self._pending: dict[Any, int] = {}
        self._params_ref: Any = None
        self._params_version = -1
        log(f"self-play on {count} Ray actors ({config.ray})")

    def _send(self, actor: int, temperature: float) -> None:
        programs = self.programs[actor]
        program = programs[self.calls[actor] % len(programs)]
        self.calls[actor] += 1
        ref = self.actors[actor].play.remote(
            self._params_ref,
            program,
            self.config.train_every,
            temperature,
            tuple(self.restart_actions(program)),
        )
        self._pending[ref] = actor

    def broadcast(self, params: Any, version: int) -> None:
        """Put ``params`` (learner step ``version``) into the object store once."""
        if version != self._params_version:
            import jax

            self._params_ref = self._ray.put(jax.device_get(params))
            self._params_version = version

    def collect(self, params: Any, version: int, temperature: float) -> list[ActorMoves]:
        """Every call finished now (waiting for one at least); each of their actors is
        sent its next call at once, with ``params`` (learner step ``version``)."""
        ray = self._ray
        self.broadcast(params, version)
        for actor in range(len(self.actors)):
            if actor not in self._pending.values():
                self._send(actor, temperature)
        ready, _ = ray.wait(list(self._pending), num_returns=1, timeout=WAIT_S)
        if ready:
            ready, _ = ray.wait(list(self._pending), num_returns=len(self._pending), timeout=0)
        got: list[ActorMoves] = []
        for ref in ready:
            actor = self._pending.pop(ref)
            try:
                got.append(self._result(ref, f"self-play actor {actor}"))
                self._down.discard(actor)
            except _lost(ray) as exc:
                if actor not in self._down:  # calls fail fast until Ray has restarted it
                    self._down.add(actor)
                    self.deaths += 1
                    self.log(
                        f"self-play actor {actor} died ({type(exc).__name__}); Ray restarts "
                        "it, the games it was playing are lost"
                    )
                time.sleep(0.05)
            self._send(actor, temperature)
        return got

    def reanalyse(self, reanalyser: Reanalyser, params: Any, version: int) -> None:
        """Reanalyse on its actor, one search at a time: the finished search's targets
        are applied, then ``reanalyser``'s next kept positions are sent with ``params``
        (learner step ``version``); a search still running is left to run."""
        ray = self._ray
        assert self.reanalyse_actor is not None
        if self._reanalysis is not None:
            ref, target, rows = self._reanalysis
            if not ray.wait([ref], timeout=0)[0]:
                return
            self._reanalysis = None
            try:
                target.apply(rows, *self._result(ref, "the Reanalyse actor"))
                self.reanalysed += 1
            except _lost(ray) as exc:
                self.log(f"the Reanalyse actor died ({type(exc).__name__}); Ray restarts it")
                time.sleep(0.05)
        rows = reanalyser.next_rows()
        if rows:
            obs, allowed, key = reanalyser.search_inputs(rows)
            self.broadcast(params, version)
            ref = self.reanalyse_actor.search.remote(
                self._params_ref, np.asarray(key), obs, allowed, reanalyser.q_scale
            )
            self._reanalysis = (ref, reanalyser, rows)

    def _result(self, ref: Any, who: str) -> Any:
        """The result of the finished call ``ref`` of ``who``; an exception it raised is a
        :class:`SolverError` naming ``who`` (Ray's errors of a lost actor pass through)."""
        try:
            return self._ray.get(ref)
        except self._ray.exceptions.RayTaskError as exc:
            cause = exc.cause if exc.cause is not None else exc
            raise SolverError(f"{who} failed: {one_line(cause)}") from exc

    def close(self) -> None:
        """End the actors (their calls in flight are dropped)."""
        for actor in self.actors:
            self._ray.kill(actor, no_restart=True)
        if self.reanalyse_actor is not None:
            self._ray.kill(self.reanalyse_actor, no_restart=True)
            self.reanalyse_actor = None
        self.actors = []
        self._pending = {}
        self._reanalysis = None


def _lost(ray: Any) -> tuple[type[Exception], ...]:
    """Ray's errors of a call whose actor died or whose result was lost with its node."""
    return (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError)


class RayActorsOwner:
    """A trainer's Ray self-play actors: started at the first :meth:`self_play_actors`
    (never without ``config.ray``), kept for the trainer's later runs, ended by
    :meth:`close`. A subclass says how to start them (:meth:`_start_actors`)."""

    config: MuZeroConfig
    actors: SelfPlayActors | None = None

    def _start_actors(self) -> SelfPlayActors:
        raise NotImplementedError

    def self_play_actors(self) -> SelfPlayActors | None:
        """The run's Ray self-play actors (``None`` without ``ray``)."""
        if self.config.ray is None:
            return None
        if self.actors is None:
            self.actors = self._start_actors()
        return self.actors

    def close(self) -> None:
        """End the run's Ray actors, if any."""
        if self.actors is not None:
            self.actors.close()
            self.actors = None
