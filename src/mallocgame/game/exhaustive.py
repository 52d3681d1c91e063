"""Exhaustive search over every complete legal game (tiny instances only).

A depth-first search with the game's own undo, compiled; it is the ground truth the
tests compare other solvers with (the conformance vectors' ``optimal_reward_s``).
"""

from __future__ import annotations

import numpy as np

from mallocgame.errors import SolverError
from mallocgame.game import kernels as K
from mallocgame.game.state import Game
from mallocgame.game.tables import I_COUNT
from mallocgame.jit import jit

__all__ = ["exhaustive_search"]


@jit
def _search(
    buf_int, buf_demand, ins_int, ins_float, ins_buf, table_s, ten_int,
    capacity, alignment, fast_bw, slow_bw,
    supply_left, pair_used, alloc, group_state, group_left, ten_state, active, block_end,
    trail_t, trail_w, record, record_return, ctr, ret, out, lo, hi,
    max_nodes, best_actions,
):
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
            return best, nodes
        K.apply(
            buf_int, buf_demand, ins_int, ins_float, ins_buf, table_s, ten_int,
            capacity, alignment, fast_bw, slow_bw,
            supply_left, pair_used, alloc, group_state, group_left, ten_state, active, block_end,
            trail_t, trail_w, record, record_return, ctr, ret, out, lo, hi,
            action,
        )
        depth += 1
        next_action[depth] = 0
    return best, nodes


def exhaustive_search(game: Game, max_nodes: int = 20_000_000) -> tuple[float, list[int], int]:
    """The best reward over every complete legal continuation of ``game``.

    Each complete game is scored as its mapping's reward, ``sum_t count_t * (L_t(empty) -
    L_t(S_t))`` in float64 instruction by instruction, not as the game's running sum of
    step rewards (which large cancelling latencies can leave far from it).
    Returns ``(best_reward_s, actions, nodes)``: ``actions`` is the first best game
    (Copy before NoCopy before Drop), from the start. The game is left as it was.
    Raises :class:`SolverError` past ``max_nodes`` actions tried (a whole number of at
    least 1) or if no continuation completes.
    """
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, (int, np.integer)) or max_nodes < 1:
        raise SolverError(f"max_nodes must be a whole number of at least 1, not {max_nodes!r:.40}")
    best_actions = np.full(game.num_buffers, -1, dtype=np.int64)
    work = game.clone()
    # (an int64 to the compiled search: past it, as good as no limit)
    best, nodes = _search(*work._apply_args, min(int(max_nodes), 2**63 - 1), best_actions)
    if nodes > max_nodes:
        raise SolverError(
            f"exhaustive search gave up after {max_nodes} moves; the instance is too large"
        )
    if best == -np.inf:
        raise SolverError("no complete legal game exists from this state")
    return float(best), [int(a) for a in best_actions], int(nodes)
