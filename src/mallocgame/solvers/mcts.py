"""``mcts``: Monte-Carlo tree search with the true game, no learning.

The paper's "search only" ablation (section 5.3). :class:`MctsSolver` plays ONE game of
an :class:`~mallocgame.instance.Instance`, move by move, through
:class:`~mallocgame.game.backup.DropBackup`, so the game always completes and the answer
is a valid trajectory. At each decision with a choice it runs UCT simulations from the
current state on the real game (stepped, then undone), each valued by a truncated greedy
rollout as an estimate of the final normalized return, and commits the most visited
action; the chosen subtree is kept for the next move.

Budgets: work in simulations (``work_unit = "simulations"``), spread over the decisions
left, deterministic for a seed; or wall clock: the solver keeps back the time to finish
the game by a cheap rule and returns within about one simulation of its budget, so on
large programs with short budgets many moves are played by the default policy or by
that rule (``Solution.work`` counts them: ``default_moves``, ``fallback_moves``). With
no budget, ``DEFAULT_SIMULATIONS`` per searched move.

The search, its values, the budget rule and known weaknesses: docs/search-baselines.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mallocgame.game.backup import DropBackup
from mallocgame.game.state import DROP, Game
from mallocgame.game.tables import X_DEF_BUFFER
from mallocgame.instance import Instance
from mallocgame.options import check_ranges, setting
from mallocgame.solution import Solution
from mallocgame.solvers.base import Run, Solver

__all__ = ["MctsSolver", "MctsConfig", "DEFAULT_SIMULATIONS"]

DEFAULT_SIMULATIONS = 32
"""Simulations per searched move when the request has no budget and sets none."""

FINISH_S_PER_MOVE = 50e-6
"""Initial estimate of the seconds one plain move of the real game takes (then measured)."""

FINISH_MARGIN = 1.5
"""Safety factor on the estimated time to finish the game with the cheapest rule."""


@dataclass(frozen=True)
class MctsConfig:
    """The settings of ``mcts``."""

    simulations: int | None = setting(
        None,
        "simulations per searched move (none: 32 with no budget, uncapped under a budget)",
        within="[0, 1000000000]",
    )
    rollout_depth: int = setting(
        256, "moves of a rollout before its value is extrapolated", within="[0, 1000000000]"
    )
    c: float = setting(0.5, "UCT exploration constant", within="[0, 1e6]")
    epsilon: float = setting(
        0.0, "probability that the default policy plays a random allowed action", within="[0, 1]"
    )
    reuse: bool = setting(True, "keep the chosen child's subtree as the next root")
    reserve: float = setting(
        0.02, "share of a wall-clock budget kept back to finish the game", within="[0, 1)"
    )

    def __post_init__(self) -> None:
        check_ranges(self)


class _Node:
    """A state in the tree: its allowed actions and per-action visit counts and value sums.

    ``terminal`` is None for a state with moves to make, else its exact value (a
    complete game) or its low value (no allowed action).
    """

    __slots__ = ("actions", "children", "n", "terminal", "visits", "w")

    def __init__(self, actions: tuple[int, ...], terminal: float | None = None) -> None:
        self.actions = actions
        self.children: list[_Node | None] = [None, None, None]
        self.n = [0, 0, 0]
        self.w = [0.0, 0.0, 0.0]
        self.visits = 0
        self.terminal = terminal


class _Search:
    """UCT over one game: the driver's game is stepped and restored in place."""

    def __init__(self, driver: DropBackup, cfg: MctsConfig, rng: np.random.Generator) -> None:
        self.driver = driver
        self.game = driver.game
        self.cfg = cfg
        self.rng = rng
        self.num_b = self.game.num_buffers
        r = self.game.tables.normalizer_s
        # returns in units of |R|: selection min-max normalizes values, so the scale is
        # free, but R < 0 (table latencies) must not reverse the objective nor R = 0 erase it
        self.inv_r = 1.0 / abs(r) if r != 0 else 1.0
        self.vmin = math.inf
        self.vmax = -math.inf
        self.rollout_moves = 0
        # Random draws in chunks (a Generator call per move is slow).
        self._draws = rng.random(4096)
        self._next = 0

    # ------------------------------------------------------------------ helpers

    def _uniform(self) -> float:
        if self._next == len(self._draws):
            self._draws = self.rng.random(4096)
            self._next = 0
        u = self._draws[self._next]
        self._next += 1
        return float(u)

    def allowed_actions(self) -> tuple[int, ...]:
        a0, a1, a2 = self.driver.allowed().tolist()
        return tuple(a for a, ok in ((0, a0), (1, a1), (2, a2)) if ok)

    def default_action(self, actions: tuple[int, ...]) -> int:
        """Greedy Copy > NoCopy > Drop; with probability epsilon a uniform choice."""
        if len(actions) > 1 and self.cfg.epsilon > 0.0 and self._uniform() < self.cfg.epsilon:
            return actions[int(self._uniform() * len(actions))]
        return actions[0]

    def make_node(self, bp_return: float) -> _Node:
        game = self.game
        if game.complete:
            return _Node((), game.return_s * self.inv_r)
        actions = self.allowed_actions()
        if not actions:
            return _Node((), bp_return * self.inv_r)
        return _Node(actions)

    def _cut_value(self) -> float:
        k = self.game.current_buffer
        ret = self.game.return_s
        if k >= self.num_b or k == 0:
            return ret * self.inv_r
        return ret * self.num_b / k * self.inv_r

    # ---------------------------------------------------------------- simulation

    def reset_bounds(self, root: _Node) -> None:
        """Min-max bounds for a new search, seeded from the reused root's statistics."""
        self.vmin, self.vmax = math.inf, -math.inf
        for a in root.actions:
            if root.n[a]:
                q = root.w[a] / root.n[a]
                self.vmin = min(self.vmin, q)
                self.vmax = max(self.vmax, q)

    def select(self, node: _Node) -> int:
        best_a, best_s = node.actions[0], -math.inf
        log_n = math.log(max(node.visits, 1))
        span = self.vmax - self.vmin
        c = self.cfg.c
        for a in node.actions:
            n = node.n[a]
            if n == 0:
                return a  # untried actions first, in preference order
            q = node.w[a] / n
            qn = (q - self.vmin) / span if span > 0 else 0.5
            s = qn + c * math.sqrt(log_n / n)
            if s > best_s:
                best_a, best_s = a, s
        return best_a

    def simulate(
        self, root: _Node, root_mark: int, root_bp_return: float, root_bp_mark: int
    ) -> None:
        game = self.game
        node = root
        path: list[tuple[_Node, int]] = []
        bp_return, bp_mark = root_bp_return, root_bp_mark
        while True:
            if node.terminal is not None:
                value = node.terminal
                break
            a = self.select(node)
            game.step(a)
            path.append((node, a))
            if game.is_backup_point:
                bp_return, bp_mark = game.return_s, game.current_buffer
            child = node.children[a]
            if child is None:
                child = self.make_node(bp_return)
                node.children[a] = child
                if child.terminal is not None:
                    value = child.terminal
                else:
                    value = self.rollout(bp_return, bp_mark, game.current_buffer)
                break
            node = child
        for nd, a in path:
            nd.n[a] += 1
            nd.w[a] += value
            nd.visits += 1
        if value < self.vmin:
            self.vmin = value
        if value > self.vmax:
            self.vmax = value
        game.undo_to(root_mark)

    def rollout(self, bp_return: float, bp_mark: int, leaf_mark: int) -> float:
        """Default policy for at most ``rollout_depth`` moves; the value at the cutoff."""
        game = self.game
        depth = self.cfg.rollout_depth
        moves = 0
        forced: set[int] = set()
        backups = 0
        actions = self.rollout_actions(forced)
        while moves < depth and not game.complete:
            if not actions:
                # Drop-backup inside the rollout: back to the latest backup point (not
                # before the leaf), the offending groups forced to Drop.
                b = game.current_buffer
                groups = {game.group_of(b)}
                x = game.reads_fast_resident(b)
                if x >= 0:
                    groups.add(game.group_of(int(game.tables.ten_int[x, X_DEF_BUFFER])))
                if groups <= forced or backups >= 8:
                    self.rollout_moves += moves
                    return bp_return * self.inv_r
                forced |= groups
                backups += 1
                target = max(bp_mark, leaf_mark)
                game.undo_to(target)
                actions = self.rollout_actions(forced)
                continue
            first = self.default_action(actions)
            order = (first,) + tuple(a for a in actions if a != first)
            nxt: tuple[int, ...] = ()
            for a in order:
                game.step(a)
                moves += 1
                if game.complete:
                    break
                nxt = self.rollout_actions(forced)
                if nxt:
                    break
                game.undo()
            else:
                game.step(first)  # every action leads to a dead end
                moves += 1
                nxt = ()
            if game.is_backup_point:
                bp_return, bp_mark = game.return_s, game.current_buffer
            actions = nxt
        self.rollout_moves += moves
        return self._cut_value()

    def rollout_actions(self, forced: set[int]) -> tuple[int, ...]:
        actions = self.allowed_actions()
        if forced and actions and self.game.group_of(self.game.current_buffer) in forced:
            return (2,) if 2 in actions else ()
        return actions


class MctsSolver(Solver, name="mcts", work_unit="simulations", config=MctsConfig):
    """UCT with the true game and truncated greedy rollouts; one game, Drop-backup."""

    def search(self, instance: Instance, cfg: MctsConfig, run: Run) -> Solution:
        request, clock = run.request, run.clock
        rng = np.random.default_rng(request.seed)
        game = Game(instance)
        driver = DropBackup(game)
        search = _Search(driver, cfg, rng)
        num_b = game.num_buffers

        work_left = run.work_budget  # total simulations (mcts has no default work)
        per_move_cap = cfg.simulations
        if per_move_cap is None and request.work is None and request.seconds is None:
            per_move_cap = DEFAULT_SIMULATIONS
        budget_s = request.seconds
        usable_s = None if budget_s is None else budget_s * (1.0 - cfg.reserve)
        counts = dict(
            simulations=0, searched_moves=0, default_moves=0, fallback_moves=0, forced_moves=0
        )
        sim_cost = 0.0  # running mean seconds per simulation (wall-clock mode)
        move_cost = FINISH_S_PER_MOVE  # running mean seconds per plain real move

        root: _Node | None = None
        bp_return = game.return_s
        if not game.complete and search.allowed_actions():
            # Warm up the compiled kernels' dispatch so the first simulation's time is
            # representative (the time-slice rule relies on measured simulation costs).
            mark = game.mark()
            game.step(search.allowed_actions()[0])
            game.undo_to(mark)
        while not game.complete:
            actions = search.allowed_actions()
            before = game.current_buffer
            t_move = clock.elapsed
            plain = True  # no search this move: its time measures a plain move
            finishing = False
            if usable_s is not None:
                # Finish with the cheapest rule while the time left would not cover
                # finishing every remaining move that way (with a margin). Re-checked at
                # every move, so a pessimistic estimate corrects itself.
                finish_s = FINISH_MARGIN * move_cost * (num_b - before) + 0.01
                finishing = usable_s - t_move <= finish_s
            if len(actions) == 1:
                action = actions[0]
                counts["forced_moves"] += 1
            elif finishing:
                # the default policy (as cheap a move as Drop) until the whole budget is
                # spent, Drop after: a Drop-backup late in the game then replays its moves
                # as well as the default policy plays them, not all as Drop
                if budget_s is not None and clock.elapsed >= budget_s:
                    action = DROP if DROP in actions else actions[0]
                else:
                    action = search.default_action(actions)
                counts["fallback_moves"] += 1
            else:
                # Decisions still to come, estimated from the share of them with a
                # choice so far (forced moves need no search).
                choices = counts["searched_moves"] + counts["default_moves"] + 1
                share_choice = choices / (choices + counts["forced_moves"])
                moves_left = max(1.0, (num_b - before) * share_choice)
                sims = per_move_cap
                slice_s = None
                if work_left is not None:
                    share = int(work_left // moves_left)
                    sims = share if sims is None else min(sims, share)
                if usable_s is not None:
                    spare = usable_s - t_move - FINISH_MARGIN * move_cost * (num_b - before)
                    slice_s = spare / moves_left
                    if slice_s <= 0 or slice_s < 0.5 * sim_cost:
                        sims = 0
                        sim_cost *= 0.98  # let a stale, high estimate recover
                if sims == 0:
                    action = search.default_action(actions)
                    counts["default_moves"] += 1
                else:
                    plain = False
                    if root is None or root.actions != actions:
                        root = _Node(actions)
                    search.reset_bounds(root)
                    mark = game.mark()
                    done = 0
                    while True:
                        search.simulate(root, mark, bp_return, driver.backup_mark)
                        done += 1
                        if sims is not None and done >= sims:
                            break
                        if slice_s is not None and clock.elapsed - t_move >= slice_s:
                            break
                        if clock.expired():
                            break
                    if slice_s is not None:
                        cost = (clock.elapsed - t_move) / done
                        sim_cost = cost if sim_cost == 0 else 0.9 * sim_cost + 0.1 * cost
                    counts["simulations"] += done
                    counts["searched_moves"] += 1
                    if work_left is not None:
                        work_left -= done
                    visits, values = root.n, root.w
                    action = max(
                        root.actions, key=lambda a: (visits[a], values[a] / max(visits[a], 1))
                    )
            child = root.children[action] if root is not None else None
            driver.step(action)
            if game.current_buffer != before + 1 or not cfg.reuse:
                root = None  # a Drop-backup undid moves (or no reuse): start afresh
            else:
                root = child
                if plain and usable_s is not None:
                    move_cost = 0.98 * move_cost + 0.02 * (clock.elapsed - t_move)
            if game.mark() == driver.backup_mark:
                bp_return = game.return_s

        answer = run.game_answer(
            game, {**counts, "rollout_moves": search.rollout_moves, "backups": driver.backups}
        )
        run.improve(answer)
        return answer
