"""``es``: evolution strategies (Salimans et al., 2017), the paper's ES baseline.

:class:`EsSolver` searches the parameters of a small policy that scores Copy, NoCopy
and Drop from the 29 decision features of :mod:`mallocgame.game.features` and plays the
best-scoring *allowed* action (argmax; ties go to Copy, then NoCopy, then Drop): linear,
``[3, 29]`` weights, by default, starting from the greedy Copy > NoCopy > Drop rule, or a
one-hidden-layer MLP. Each generation plays antithetic Gaussian perturbations of the
mean; the fitness of a perturbation is the normalized return of one full game played
with Drop-backup, so every game is a valid solution; centered ranks and an Adam (or SGD)
step move the mean. The answer is the best game played; every improvement goes to the
request's callback.

Budgets: work in games (``work_unit = "games"``): the same seed gives the same solution,
also with several workers. Wall clock: a game still running at the deadline finishes by
a cheap fallback (Drop where allowed), so the solver returns promptly; ``Solution.work``
records games, generations and Drop-backups. With no budget, ``DEFAULT_GENERATIONS``
generations.

Workers: with more than one, each generation's games are played in a process pool
(:func:`mallocgame.workers.process_pool`, whose workers end with this process) started
with ``forkserver`` on Linux and ``spawn`` elsewhere, never ``fork`` (a process that has
imported JAX runs threads). A script that runs ``es`` with several workers must guard
its entry point with ``if __name__ == "__main__":``. The pool's start-up (about half a
second, seconds on a busy machine) counts against the wall-clock budget: games that
come back later than :data:`POOL_GRACE_S` past the budget are not waited for (where
none came back, one game is played in this process), and the pool is ended at once;
one worker, in this process, is the default.

The algorithm, the initializations and the pool in detail: docs/search-baselines.md.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Sequence
from concurrent.futures import TimeoutError as FuturesTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from mallocgame.errors import WorkerError
from mallocgame.game.backup import DropBackup
from mallocgame.game.features import NUM_FEATURES, FeatureExtractor
from mallocgame.game.state import DROP, Game, replay
from mallocgame.game.tables import GameTables, build_tables
from mallocgame.instance import Instance
from mallocgame.options import check_ranges, setting
from mallocgame.solution import Solution
from mallocgame.solvers.base import Run, Solver
from mallocgame.workers import WorkerPool, process_pool

__all__ = [
    "EsSolver",
    "EsConfig",
    "LinearPolicyShape",
    "centered_ranks",
    "play_policy",
    "DEFAULT_GENERATIONS",
]

DEFAULT_GENERATIONS = 10
"""Generations run when the request has neither a work nor a wall-clock budget."""

FINISH_S_PER_MOVE = 50e-6
"""Initial estimate of the seconds one plain move (no policy call) takes; then measured."""

FINISH_MARGIN = 1.5
"""Safety factor on the estimated time to finish a game with the fallback."""

_BIAS = NUM_FEATURES - 1  # index of the constant "bias" feature


@dataclass(frozen=True)
class EsConfig:
    """The settings of ``es`` (picked on lstm_infer, alexnet_train_b32 and
    transformer_train at 120-200 games; what matters is ``sigma`` and ``lr`` relative
    to ``init_scale``, since scaling every weight leaves the argmax policy as it is)."""

    population: int = setting(
        16, "perturbed games per generation (rounded up to even)", within="[2, 10000]"
    )
    sigma: float = setting(
        0.1, "standard deviation of the parameter perturbations", within="(0, 10]"
    )
    lr: float = setting(0.03, "step size of the parameter update", within="(0, 10]")
    optimizer: Literal["adam", "sgd"] = setting("adam", "the ascent step: Adam or plain SGD")
    l2: float = setting(0.005, "weight decay per step, as a fraction of lr", within="[0, 1]")
    hidden: int = setting(
        0, "hidden units of the policy: 0 linear, h > 0 a one-hidden-layer MLP", within="[0, 4096]"
    )
    init: Literal["greedy", "zeros", "random"] = setting(
        "greedy",
        "initial parameters: the greedy Copy > NoCopy > Drop rule, zeros, or N(0, init_scale^2)",
    )
    init_scale: float = setting(0.3, "scale of the initial parameters", within="[0, 100]")
    eval_mean: bool = setting(True, "also play the mean policy once per generation")
    workers: int = setting(
        1, "processes that play each generation's games (1: this process)", within="[1, 256]"
    )

    def __post_init__(self) -> None:
        check_ranges(self)
        object.__setattr__(self, "population", self.population + self.population % 2)


@dataclass(frozen=True)
class LinearPolicyShape:
    """Layout of the flat parameter vector: linear (``hidden`` 0) or one-hidden-layer MLP."""

    hidden: int = 0

    @property
    def size(self) -> int:
        if self.hidden == 0:
            return 3 * NUM_FEATURES
        return self.hidden * NUM_FEATURES + 3 * self.hidden

    def unpack(self, theta: np.ndarray) -> tuple[np.ndarray, ...]:
        """``(W,)`` for linear, ``(W1, W2)`` for an MLP; float64 views of ``theta``."""
        if self.hidden == 0:
            return (theta.reshape(3, NUM_FEATURES),)
        h = self.hidden
        w1 = theta[: h * NUM_FEATURES].reshape(h, NUM_FEATURES)
        w2 = theta[h * NUM_FEATURES :].reshape(3, h)
        return (w1, w2)

    def initial(self, cfg: EsConfig, rng: np.random.Generator) -> np.ndarray:
        theta = np.zeros(self.size, dtype=np.float64)
        s = float(cfg.init_scale)
        if cfg.init == "random":
            theta[:] = rng.normal(0.0, s, self.size)
        elif cfg.init == "greedy":
            greedy = np.array([s, s / 2.0, 0.0])
            if self.hidden == 0:
                theta.reshape(3, NUM_FEATURES)[:, _BIAS] = greedy
            else:
                w1, w2 = self.unpack(theta)
                w1[:] = rng.normal(0.0, s / 10.0, w1.shape)
                w2[:] = rng.normal(0.0, s / 10.0, w2.shape)
                w1[0, :] = 0.0
                w1[0, _BIAS] = 1.0  # hidden unit 0 = tanh(1), a constant
                w2[:, 0] = greedy / np.tanh(1.0)
        return theta


class _Player:
    """Plays full games of one instance with a parametric argmax policy and Drop-backup."""

    def __init__(
        self, instance: Instance, tables: GameTables | None, shape: LinearPolicyShape
    ) -> None:
        self.instance = instance
        self.game = Game(instance, tables)
        self.extract = FeatureExtractor(self.game)
        self.shape = shape
        self._feat32 = np.zeros(NUM_FEATURES, dtype=np.float32)
        self.move_cost = FINISH_S_PER_MOVE  # seconds per plain move, measured under a deadline

    def play(
        self, theta: np.ndarray, deadline: float | None = None
    ) -> tuple[float, np.ndarray, int, bool]:
        """One complete game; returns (return_s, actions int8 [B], backups, cut short).

        ``deadline`` is a :func:`time.monotonic` value. While the time left would not
        cover finishing every remaining move with the fallback (Drop where allowed, else
        the first allowed action; estimated from the measured cost of plain moves, with a
        margin), moves are played by the fallback and ``cut short`` is True.
        """
        game = self.game
        game.reset()
        # The argmax policy is a pure function of the state, so a back-up need not replay
        # the decisions it would make again (the same trajectory, DropBackup's docstring).
        # Once the deadline's fallback has taken over, a back-up keeps the decisions made
        # before it instead of replaying them with the fallback.
        driver = DropBackup(game, deterministic=True)
        params = self.shape.unpack(np.asarray(theta, dtype=np.float32))
        extract, feat = self.extract, self._feat32
        linear = len(params) == 1
        w = params[0]
        w2 = params[1] if not linear else None
        cut = False
        monotonic = time.monotonic
        num_b = game.num_buffers
        # Without a deadline, the moves without a choice are played in one compiled loop;
        # with one, one by one: their cost is measured, to finish the game in time.
        allowed = driver.play_forced() if deadline is None else driver.allowed()
        while not game.complete:
            a0, a1, a2 = allowed.tolist()
            plain = True
            if deadline is not None:
                t0 = monotonic()
                finish_s = FINISH_MARGIN * self.move_cost * (num_b - game.current_buffer) + 0.01
                finishing = deadline - t0 <= finish_s
            else:
                finishing = False
            if a0 + a1 + a2 == 1:
                action = 0 if a0 else (1 if a1 else 2)
            elif finishing:
                cut = True
                action = DROP if a2 else (0 if a0 else 1)
            else:
                plain = False
                extract(game, out=feat)
                scores = w @ feat if linear else w2 @ np.tanh(w @ feat)
                s0, s1, s2 = scores.tolist()
                action, best = -1, -np.inf
                if a0:
                    action, best = 0, s0
                if a1 and s1 > best:
                    action, best = 1, s1
                if a2 and s2 > best:
                    action = 2
            before = game.current_buffer
            if deadline is None:
                allowed = driver.step_to_choice(action)
            else:
                allowed = driver.advance(action)[1]
            if deadline is not None and plain and game.current_buffer == before + 1:
                self.move_cost = 0.98 * self.move_cost + 0.02 * (monotonic() - t0)
        actions = np.array(game.actions(), dtype=np.int8)
        return game.return_s, actions, driver.backups, cut

    def warm_up(self) -> None:
        """Load the compiled kernels a game uses (one move, the features), then reset."""
        game = self.game
        game.reset()
        if not game.complete:
            driver = DropBackup(game)
            allowed = driver.allowed()
            self.extract(game, out=self._feat32)
            if allowed.any():
                driver.step(int(np.flatnonzero(allowed)[0]))
            game.reset()


# ---------------------------------------------------------------- worker processes

_WORKER: _Player | None = None


def _worker_init(payload: bytes, hidden: int) -> None:
    """Worker initializer: ``payload`` is ``pickle.dumps((instance, tables))``."""
    global _WORKER
    instance, tables = pickle.loads(payload)
    _WORKER = _Player(instance, tables, LinearPolicyShape(hidden))
    _WORKER.warm_up()


def _worker_play(
    thetas: Sequence[np.ndarray], deadline: float | None
) -> list[tuple[float, bytes, int, bool]]:
    assert _WORKER is not None
    out = []
    for theta in thetas:
        ret, actions, backups, cut = _WORKER.play(theta, deadline)
        out.append((ret, actions.tobytes(), backups, cut))
    return out


def play_policy(instance: Instance, theta: np.ndarray, hidden: int = 0) -> Game:
    """Play one complete game of ``instance`` with parameters ``theta`` (for inspection)."""
    player = _Player(instance, None, LinearPolicyShape(hidden))
    player.play(theta)
    return player.game


# ---------------------------------------------------------------------- the solver

POOL_GRACE_S = 0.25
"""How long past a wall-clock budget's end the pool's games are waited for (seconds):
a game there ends at the deadline by its fallback; a pool still starting up does not
answer in time, and then one game is played here instead, at once."""


def centered_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks of ``values`` scaled to ``[-0.5, 0.5]`` (ties by position; deterministic)."""
    n = len(values)
    ranks = np.empty(n, dtype=np.float64)
    ranks[np.argsort(values, kind="stable")] = np.arange(n, dtype=np.float64)
    return ranks / max(n - 1, 1) - 0.5


class EsSolver(Solver, name="es", work_unit="games", config=EsConfig):
    """Evolution strategies over a linear (or tiny MLP) argmax policy; best game kept."""

    def default_work_for(self, config: EsConfig) -> int:
        """DEFAULT_GENERATIONS generations' games."""
        return DEFAULT_GENERATIONS * (config.population + (1 if config.eval_mean else 0))

    def search(self, instance: Instance, cfg: EsConfig, run: Run) -> Solution:
        es = _EsRun(instance, cfg, run)
        try:
            es.generations()
        except BaseException:
            es.terminate()  # Ctrl-C or an error: do not wait for the games in flight
            raise
        es.shutdown()
        assert es.best is not None
        run.spent(es.state["games"])  # the last games played, to the request's progress
        return replace(es.best, work=dict(es.state))


class _EsRun:
    """State of one ``es`` search: the mean parameters, the optimizer's moments, the
    budgets, where games are played (this process or a pool) and the best game so far."""

    def __init__(self, instance: Instance, cfg: EsConfig, run: Run) -> None:
        request, clock = run.request, run.clock
        self.instance, self.cfg, self.run = instance, cfg, run
        self.request, self.clock = request, clock
        self.rng = np.random.default_rng(request.seed)
        shape = LinearPolicyShape(cfg.hidden)
        self.tables = tables = build_tables(instance)
        self.theta = shape.initial(cfg, self.rng)
        self.pairs = cfg.population // 2
        self.deadline = (  # a time.monotonic() value
            None
            if request.seconds is None
            else time.monotonic() + (request.seconds - clock.elapsed)
        )

        self.player: _Player | None = None
        self.pool: WorkerPool | None = None
        self.pool_late = False  # the pool answered past the budget's end (and its grace)
        if cfg.workers > 1:
            payload = pickle.dumps((instance, tables), protocol=pickle.HIGHEST_PROTOCOL)
            self.pool = process_pool(
                cfg.workers,
                preload=[__name__],
                initializer=_worker_init,
                initargs=(payload, cfg.hidden),
            )
        else:
            self.player = _Player(instance, tables, shape)

        self.num_b = instance.num_buffers
        self.state = {"games": 0, "generations": 0, "backups": 0}
        self.best: Solution | None = None
        self.best_return = -np.inf  # the highest running sum of a game played
        self.adam_m = np.zeros_like(self.theta)
        self.adam_v = np.zeros_like(self.theta)

    # ------------------------------------------------------------------- budgets

    def budget_left(self) -> int | None:
        """Games left in the work budget (``None``: no game budget)."""
        return self.run.work_left(self.state["games"])

    def out_of_budget(self) -> bool:
        """Whether the game budget or the wall-clock budget is spent."""
        return self.run.spent(self.state["games"])

    # --------------------------------------------------------------------- games

    def record(
        self, ret: float, backups: int, game: Game | None, actions: np.ndarray | None
    ) -> None:
        """Count one finished game (return ``ret`` in seconds, its float running sum); keep
        it if it is the best so far (``game`` is the complete game itself, else it is rebuilt
        from ``actions``). Games are ranked by their running sums, one with another; a game
        above the highest so far is the answer where its exact reward is higher than the
        answer's (a sum of cancelling latencies can be far from it), so what the callback
        sees only ever improves."""
        state = self.state
        state["games"] += 1
        state["backups"] += backups
        if ret > self.best_return:
            self.best_return = ret
            if game is None:
                assert actions is not None
                game = replay(self.instance, actions[: self.num_b].tolist(), self.tables)
            answer = self.run.game_answer(game, dict(state))
            if self.best is None or answer.reward_s > self.best.reward_s:
                self.best = answer
                self.run.improve(self.best)

    def evaluate(self, thetas: list[np.ndarray]) -> list[float]:
        """Play one game per parameter vector (in order); keep the best; return fitnesses
        (returns in seconds; fewer than ``thetas`` if the clock ran out)."""
        if self.pool is None:
            return self._play_here(thetas)
        return self._play_in_pool(self.pool, thetas)

    def _play_here(self, thetas: list[np.ndarray]) -> list[float]:
        """:meth:`evaluate` in this process; stops early once the wall clock is spent."""
        player = self.player
        assert player is not None
        fitness = []
        for th in thetas:
            ret, _, backups, _ = player.play(th, self.deadline)
            self.record(ret, backups, player.game, None)
            fitness.append(ret)
            if self.request.seconds is not None and self.clock.expired():
                break  # the rest would only be cut-short games
        return fitness

    def _play_in_pool(self, pool: WorkerPool, thetas: list[np.ndarray]) -> list[float]:
        """:meth:`evaluate` in the worker pool, in contiguous chunks, one per worker;
        :class:`WorkerError` if a worker dies."""
        chunks = np.array_split(np.arange(len(thetas)), min(self.cfg.workers, len(thetas)))
        futures = [
            pool.submit(_worker_play, [thetas[i] for i in c], self.deadline)
            for c in chunks
            if len(c)
        ]
        fitness = []
        try:
            for fut in futures:
                wait = None
                if self.deadline is not None:
                    wait = max(0.0, self.deadline - time.monotonic()) + POOL_GRACE_S
                try:
                    games = fut.result(timeout=wait)
                except FuturesTimeout:
                    # the pool's start-up or a game outlasted the budget: what came back counts
                    self.pool_late = True
                    break
                for ret, raw, backups, _ in games:
                    self.record(ret, backups, None, np.frombuffer(raw, dtype=np.int8))
                    fitness.append(ret)
        except BrokenProcessPool as exc:
            raise WorkerError("es: a worker process ended before returning its games") from exc
        if self.best is None and self.pool_late:  # no game came back: one here, at once
            if self.player is None:
                self.player = _Player(
                    self.instance, self.tables, LinearPolicyShape(self.cfg.hidden)
                )
            return self._play_here(thetas[:1])
        return fitness

    # --------------------------------------------------------------- generations

    def generations(self) -> None:
        """Run generations until the budget is spent (at least one game)."""
        while self.best is None or not self.out_of_budget():
            if not self.generation():
                break

    def generation(self) -> bool:
        """One generation: the mean's game (if asked, or none played yet), the antithetic
        perturbations' games and the update; False when the budget ran out inside it."""
        cfg, rng, theta = self.cfg, self.rng, self.theta
        if cfg.eval_mean or self.best is None:
            self.evaluate([theta])
            if self.out_of_budget():
                return False
        left = self.budget_left()
        n_pairs = self.pairs if left is None else min(self.pairs, left // 2)
        if n_pairs == 0:
            if left:  # one game left, odd budget: play a single perturbation
                self.evaluate([theta + cfg.sigma * rng.standard_normal(theta.size)])
            return False
        eps = rng.standard_normal((n_pairs, theta.size))
        thetas = [theta + cfg.sigma * e for e in eps] + [theta - cfg.sigma * e for e in eps]
        fitness = self.evaluate(thetas)
        if len(fitness) < len(thetas):
            return False  # time ran out inside the generation
        self.update(eps, fitness)
        return True

    def update(self, eps: np.ndarray, fitness: list[float]) -> None:
        """Move the mean along the rank-weighted antithetic gradient estimate (Adam or SGD,
        with weight decay); ``eps`` holds the ``[pairs, size]`` perturbation directions."""
        cfg, theta = self.cfg, self.theta
        n_pairs = len(eps)
        ranks = centered_ranks(np.asarray(fitness))
        weights = ranks[:n_pairs] - ranks[n_pairs:]
        grad = weights @ eps / (2 * n_pairs * cfg.sigma)
        self.state["generations"] += 1
        t = self.state["generations"]
        if cfg.optimizer == "adam":
            b1, b2 = 0.9, 0.999
            self.adam_m = b1 * self.adam_m + (1 - b1) * grad
            self.adam_v = b2 * self.adam_v + (1 - b2) * grad * grad
            step = (self.adam_m / (1 - b1**t)) / (np.sqrt(self.adam_v / (1 - b2**t)) + 1e-8)
        else:
            step = grad
        self.theta = theta + cfg.lr * step - cfg.lr * cfg.l2 * theta

    # ---------------------------------------------------------------------- pool

    def terminate(self) -> None:
        """End the worker pool at once (if any), games in flight included."""
        if self.pool is not None:
            self.pool.terminate()

    def shutdown(self) -> None:
        """End the worker pool (if any) once its work is done; at once where it was late
        (its games past the budget are not waited for)."""
        if self.pool is not None:
            if self.pool_late:
                self.pool.terminate()
            else:
                self.pool.shutdown(wait=True, cancel_futures=True)
