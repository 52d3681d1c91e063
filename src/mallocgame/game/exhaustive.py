"""Exhaustive search over every complete legal game (tiny instances only).

A depth-first search with the game's own undo, compiled; it is the ground truth the
tests compare other solvers with (the conformance vectors' ``optimal_reward_s``).
"""

from __future__ import annotations

import numpy as np

from mallocgame.errors import SolverError
from mallocgame.game import kernels as K
from mallocgame.game.state import NOCOPY, Game
from mallocgame.game.tables import I_COUNT
from mallocgame.instance import Instance, RooflineLatency
from mallocgame.jit import jit
from mallocgame.latency import mapping_reward

__all__ = ["exhaustive_search"]


KEPT_GAMES = 1024
"""Games scored near the best that the search keeps to rank by their exact rewards; past
them (many games of one score: placements that change no latency) it keeps the best
score's first game and bounds the optimum instead (:func:`exhaustive_search`)."""


@jit
def _keep(kept, kept_score, n_kept, alloc, score, floor):
    """Add the complete game ``alloc`` of ``score`` to ``kept[:n_kept]`` (its actions) and
    ``kept_score`` unless a game with its fast buffers is there (it scores the same);
    where they are full, first drop those scored below ``floor``. Returns the new count,
    or -1 where they are still full (``alloc`` is then left out)."""
    num_b = kept.shape[1]
    for i in range(n_kept):
        if kept_score[i] == score:
            same = True
            for b in range(num_b):
                if (kept[i, b] <= K.NOCOPY) != (alloc[b, K.A_ACTION] <= K.NOCOPY):
                    same = False
                    break
            if same:
                return n_kept
    if n_kept == kept.shape[0]:
        n = 0
        for i in range(n_kept):
            if kept_score[i] >= floor:
                kept[n] = kept[i]
                kept_score[n] = kept_score[i]
                n += 1
        n_kept = n
        if n_kept == kept.shape[0]:
            return -1
    for b in range(num_b):
        kept[n_kept, b] = alloc[b, K.A_ACTION]
    kept_score[n_kept] = score
    return n_kept + 1


@jit
def _search(
    buf_int, buf_demand, ins_int, ins_float, ins_buf, table_s, ten_int,
    capacity, alignment, fast_bw, slow_bw,
    supply_left, pair_used, alloc, group_state, group_left, ten_state, active, block_end,
    trail_t, trail_w, record, record_return, ctr, ret, out, lo, hi,
    max_nodes, margin,
):
    """Every complete game from the state given: returns ``(best score, nodes, n, kept,
    scores, best_actions, refused)``, ``kept[:n]`` the actions of games (one per set of
    fast buffers: those score the same) scored within ``2 * margin`` of the best score so
    far, in the order played, ``scores[:n]`` their scores, ``best_actions`` the first game
    of the best score, and ``refused`` the highest score of a game left out for want of
    room (:data:`KEPT_GAMES`; ``-inf`` if none): ``kept`` holds every game within
    ``2 * margin`` of the best score where ``refused`` is below that."""
    num_b = buf_int.shape[0]
    num_t = ins_int.shape[0]
    nothing_fast = np.full((max(num_b, 1), alloc.shape[1]), -1, dtype=np.int64)
    empty_s = np.empty(num_t)  # L_t(empty) of every instruction
    for t in range(num_t):
        empty_s[t] = K._latency(
            buf_int, ins_int, ins_float, ins_buf, table_s, nothing_fast, t, -1, fast_bw, slow_bw
        )
    root = ctr[K.C_CURRENT]
    next_action = np.zeros(num_b + 1, dtype=np.int64)
    best = -np.inf
    kept = np.empty((KEPT_GAMES, num_b), dtype=np.int8)
    kept_score = np.empty(KEPT_GAMES)
    n_kept = 0
    kept_min = -np.inf  # the lowest kept score when the list was last found full
    refused = -np.inf
    best_actions = np.full(num_b, -1, dtype=np.int8)
    nodes = 0
    depth = root
    while True:
        if depth == num_b:
            # scored instruction by instruction, not by the running sum ret[0], whose
            # partial rewards can cancel far from the game's reward (SPEC section 7)
            score = 0.0
            for t in range(num_t):
                gain = empty_s[t] - K._latency(
                    buf_int, ins_int, ins_float, ins_buf, table_s, alloc, t, -1, fast_bw, slow_bw
                )
                if gain != 0.0:
                    score += ins_float[t, I_COUNT] * gain
            if score > best:
                best = score
                for b in range(num_b):
                    best_actions[b] = alloc[b, K.A_ACTION]
            floor = best - 2.0 * margin
            if score >= floor:  # it may be the best game: kept, where there is room
                if n_kept == KEPT_GAMES and floor <= kept_min:  # full, none to drop
                    refused = max(refused, score)
                else:
                    grown = _keep(kept, kept_score, n_kept, alloc, score, floor)
                    if grown < 0:
                        refused = max(refused, score)
                        kept_min = kept_score[:n_kept].min()
                    else:
                        n_kept = grown
            action = 3
        else:
            action = next_action[depth]
            while action < 3 and out[action, K.O_LEGAL] == 0:
                action += 1
        if action == 3:
            if depth == root:
                break
            K.undo_to(
                buf_int, buf_demand, ten_int, capacity, alignment,
                supply_left, pair_used, alloc, group_state, group_left, ten_state, active, block_end,
                trail_t, trail_w, record, record_return, ctr, ret, out, lo, hi,
                depth - 1,
            )
            depth -= 1
            continue
        next_action[depth] = action + 1
        nodes += 1
        if nodes > max_nodes:
            return best, nodes, n_kept, kept, kept_score, best_actions, refused
        K.apply(
            buf_int, buf_demand, ins_int, ins_float, ins_buf, table_s, ten_int,
            capacity, alignment, fast_bw, slow_bw,
            supply_left, pair_used, alloc, group_state, group_left, ten_state, active, block_end,
            trail_t, trail_w, record, record_return, ctr, ret, out, lo, hi,
            action,
        )
        depth += 1
        next_action[depth] = 0
    return best, nodes, n_kept, kept, kept_score, best_actions, refused


def score_margin(instance: Instance) -> float:
    """A bound on how far the search's float64 score of any complete game of ``instance``
    can be from the game's exact reward (:func:`~mallocgame.latency.exact_mapping_reward`).

    The score sums ``count_t * (L_t(empty) - L_t(S_t))`` over ``n`` instructions, each
    latency ``L`` computed in float64 from ``k_t`` buffers (roofline) or read from a table:
    every term is within ``(2 k_t + 6) u count_t Lmax_t`` of its exact value and the sum
    adds ``2 (n - 1) u`` times the terms' sizes (``u = 2**-53``, ``Lmax_t`` a bound on
    ``|L_t|`` over every placement), so ``2**-51 (k + n + 4) sum_t count_t Lmax_t``, twice
    the first-order bound, holds; plus one subnormal step per operation."""
    hw = instance.hardware
    slowest = min(hw.fast_bandwidth, hw.slow_bandwidth)
    size = 0.0
    ops = 0
    most_buffers = 0
    for ins in instance.instructions:
        lat = ins.latency
        if isinstance(lat, RooflineLatency):
            mem = sum(instance.buffers[b].size for b in ins.buffers) / slowest
            top = abs(lat.fixed_s) + max(abs(lat.compute_s), mem)
        else:
            top = max((abs(v) for v in lat.latency_s), default=0.0)
        size += ins.count * top
        most_buffers = max(most_buffers, len(ins.buffers))
        ops += 2 * len(ins.buffers) + 6
    n = len(instance.instructions)
    return 2.0**-51 * (most_buffers + n + 4) * size + ops * 2.0**-1074


def exhaustive_search(
    game: Game, max_nodes: int = 20_000_000
) -> tuple[float, list[int], int, float]:
    """The best reward over every complete legal continuation of ``game``.

    Each complete game is scored as its mapping's reward, ``sum_t count_t * (L_t(empty) -
    L_t(S_t))`` in float64 instruction by instruction, not as the game's running sum of
    step rewards (which large cancelling latencies can leave far from it); the games
    scored within twice :func:`score_margin` of the best score (one of them is the
    optimum) are ranked again by their exact rewards
    (:func:`~mallocgame.latency.exact_mapping_reward`).
    Returns ``(best_reward_s, actions, nodes, bound_s)``: ``actions`` the first best game
    (Copy before NoCopy before Drop), from the start, ``best_reward_s`` its exact reward
    rounded once, and ``bound_s`` an upper bound on every game's reward: the optimum
    itself (``best_reward_s``), except where more than :data:`KEPT_GAMES` games scored
    near the best score (placements that change no latency; near a lower best found
    earlier does not count); then ``actions`` is the first game of the best score and
    ``bound_s`` that score plus :func:`score_margin`. The game is left as it was.
    Raises :class:`SolverError` past ``max_nodes`` actions tried (a whole number of at
    least 1) or if no continuation completes.
    """
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, (int, np.integer)) or max_nodes < 1:
        raise SolverError(f"max_nodes must be a whole number of at least 1, not {max_nodes!r:.40}")
    work = game.clone()
    margin = score_margin(game.instance)
    # (an int64 to the compiled search: past it, as good as no limit)
    best, nodes, n, kept, scores, best_actions, refused = _search(
        *work._apply_args, min(int(max_nodes), 2**63 - 1), margin
    )
    if nodes > max_nodes:
        raise SolverError(
            f"exhaustive search gave up after {max_nodes} moves; the instance is too large"
        )
    if best == -np.inf:
        raise SolverError("no complete legal game exists from this state")

    def exact(actions: np.ndarray) -> float:
        return mapping_reward(game.instance, np.flatnonzero(actions <= NOCOPY).tolist())

    if refused >= best - 2.0 * margin:  # too many games near the best to rank them all
        reward = exact(best_actions)
        return reward, [int(a) for a in best_actions], int(nodes), max(best + margin, reward)
    top = None  # (exact reward, index in kept) of the first best game
    for i in range(n):
        if scores[i] >= best - 2.0 * margin:
            reward = exact(kept[i])
            if top is None or reward > top[0]:
                top = (reward, i)
    assert top is not None  # the game of the best score is kept
    return float(top[0]), [int(a) for a in kept[top[1]]], int(nodes), float(top[0])
