"""Compiled kernels of the game rules (SPEC sections 3-5): analyze, apply (one move, or
every move without a choice in a row: apply_forced), undo.

These functions are the only code that reads or writes the game state arrays; the
:class:`~mallocgame.game.state.Game` class is their public face. Every function is
``numba.njit(cache=True)``, so the first call in a fresh environment compiles
them once (about 10 s on a 2-core machine: ``benchmarks/kernel_compile.py``) and later
processes load them from the cache.

State arrays (``B`` buffers, ``T`` steps, ``G`` alias groups, ``X`` tensors):

- ``supply_left`` [T] float64: ``W[t]``, seconds of copy time still free at step t.
- ``pair_used`` [T] int8: ``pair_used[t]`` for the step pair ``(t, t+1)``.
- ``alloc`` [B, 6] int64: action (-1 undecided, 0 Copy, 1 NoCopy, 2 Drop), offset,
  memory interval start/end (-1/-1 when empty), copy interval start/end (-1 if none).
- ``group_state`` [G] int64: ``UNDECIDED`` (-2), ``SLOW`` (-1) or the fast offset.
- ``group_left`` [G] int64: undecided buffers of the group.
- ``ten_state`` [X, 3] int64: fast-resident flag, buffer holding the tensor's
  latest-ending non-empty allocation (-1 if none), undecided reads left.
- ``active`` [B] int64: buffers whose allocation occupies space (non-empty memory
  interval, aligned size > 0), in the order they were placed; ``ctr[C_ACTIVE]`` long.
- ``block_end`` [B / BLOCK + 1] int64: latest memory-interval end in each block of
  ``BLOCK`` active entries (lets the offset search skip blocks long finished).
- ``trail_t`` / ``trail_w`` [T + B]: undo trail of overwritten ``supply_left`` values.
- ``record`` [B, 6] int64 and ``record_return`` [B] float64: what decision ``b``
  overwrote, so it can be undone exactly.
- ``ctr`` [5] int64: current buffer, active count, trail length, undecided buffers of
  fast groups, undecided reads of fast-resident tensors.
- ``ret`` [1] float64: the return so far (seconds).
- ``out`` [3, 6] int64: for the current buffer and each action: legal flag, offset,
  memory interval start/end, copy interval start/end (the analysis ``apply`` uses).
- ``scratch_lo`` / ``scratch_hi`` [B] int64: workspace of the offset search.
"""

from __future__ import annotations

from mallocgame.game.tables import (
    B_ALIGNED,
    B_BIT,
    B_GROUP,
    B_IS_OUT,
    B_SIZE,
    B_TENSOR,
    B_TIME,
    I_COMPUTE,
    I_COUNT,
    I_FIRST,
    I_FIXED,
    I_KIND,
    I_LAST,
    I_TABLE,
    X_DEF,
    X_LAST_USE,
    X_LIVE_OUT,
)
from mallocgame.jit import jit as _jit  # numba.njit(cache=True, nogil=True)

COPY, NOCOPY, DROP = 0, 1, 2
UNDECIDED, SLOW = -2, -1

# alloc columns
A_ACTION, A_OFFSET, A_START, A_END, A_COPY_START, A_COPY_END = range(6)
# out columns
O_LEGAL, O_OFFSET, O_START, O_END, O_COPY_START, O_COPY_END = range(6)
# ten_state columns
T_RESIDENT, T_LATEST, T_READS_LEFT = range(3)
# record columns
R_TRAIL, R_GROUP_STATE, R_LATEST, R_PENDING_FAST, R_PENDING_RESIDENT, R_ACTIVE = range(6)
# ctr entries
C_CURRENT, C_ACTIVE, C_TRAIL, C_PENDING_FAST, C_PENDING_RESIDENT = range(5)

REL_EPS = 1e-12  # a copy walk stops once need <= REL_EPS * demand (SPEC section 4)
BLOCK = 64  # active-list entries per block of the offset search


# ---------------------------------------------------------------------- offset search


@_jit
def _collect(buf_int, alloc, active, block_end, n_active, group, start, end, lo, hi):
    """Gather address ranges [lo, hi) of other groups' allocations overlapping [start, end] in time.

    Blocks of ``BLOCK`` active entries whose latest end is before ``start`` are skipped.
    """
    k = 0
    for blk in range((n_active + BLOCK - 1) // BLOCK):
        if block_end[blk] < start:
            continue
        for i in range(blk * BLOCK, min(n_active, (blk + 1) * BLOCK)):
            j = active[i]
            if alloc[j, A_END] < start or alloc[j, A_START] > end:
                continue
            if buf_int[j, B_GROUP] == group:
                continue
            lo[k] = alloc[j, A_OFFSET]
            hi[k] = alloc[j, A_OFFSET] + buf_int[j, B_ALIGNED]
            k += 1
    return k


@_jit
def _push_active(active, block_end, ctr, b, end):
    """Append buffer ``b`` (memory interval ending at ``end``) to the active list."""
    i = ctr[C_ACTIVE]
    active[i] = b
    blk = i // BLOCK
    if i % BLOCK == 0 or block_end[blk] < end:
        block_end[blk] = end
    ctr[C_ACTIVE] = i + 1


@_jit
def _truncate_active(alloc, active, block_end, ctr, n):
    """Shorten the active list to ``n`` entries, keeping its last block's latest end exact."""
    ctr[C_ACTIVE] = n
    if n % BLOCK != 0:
        blk = n // BLOCK
        latest = -1
        for i in range(blk * BLOCK, n):
            latest = max(latest, alloc[active[i], A_END])
        block_end[blk] = latest


@_jit
def _fits_at(offset, size, capacity, k, lo, hi):
    if offset + size > capacity:
        return False
    if size == 0:
        return True
    for i in range(k):
        if lo[i] < offset + size and offset < hi[i]:
            return False
    return True


@_jit
def _sift_down(lo, hi, root, end):
    """Heapsort's step: move range ``root`` down the max-heap (by start) of ranges ``< end``."""
    while True:
        child = 2 * root + 1
        if child >= end:
            return
        if child + 1 < end and lo[child + 1] > lo[child]:
            child += 1
        if lo[root] >= lo[child]:
            return
        lo[root], lo[child] = lo[child], lo[root]
        hi[root], hi[child] = hi[child], hi[root]
        root = child


@_jit
def sort_ranges(k, lo, hi):
    """Sort the first ``k`` ranges ``[lo, hi)`` by their start address, in place.

    Insertion sort up to 32 ranges, heapsort beyond. Ranges with the same start may end in
    any order: every caller's answer is the same for each order of them. Hand-written
    because ``np.argsort`` and fancy indexing add seconds to every kernel's first
    compilation (``benchmarks/kernel_compile.py``).
    """
    if k <= 32:
        for i in range(1, k):
            a, b = lo[i], hi[i]
            j = i - 1
            while j >= 0 and lo[j] > a:
                lo[j + 1] = lo[j]
                hi[j + 1] = hi[j]
                j -= 1
            lo[j + 1] = a
            hi[j + 1] = b
        return
    for root in range(k // 2 - 1, -1, -1):
        _sift_down(lo, hi, root, k)
    for end in range(k - 1, 0, -1):
        lo[0], lo[end] = lo[end], lo[0]
        hi[0], hi[end] = hi[end], hi[0]
        _sift_down(lo, hi, 0, end)


@_jit
def _lowest_offset(size, capacity, alignment, k, lo, hi):
    """Lowest multiple of ``alignment`` where ``size`` bytes fit beside the ranges, or -1."""
    if size == 0:
        return 0 if capacity >= 0 else -1
    sort_ranges(k, lo, hi)
    offset = 0
    for i in range(k):
        if lo[i] >= offset + size:
            break
        if hi[i] > offset:
            offset = -(-hi[i] // alignment) * alignment
    if offset + size <= capacity:
        return offset
    return -1


@_jit
def _place(buf_int, alloc, active, block_end, n_active, group, group_offset, size, capacity, alignment,
           start, end, lo, hi):
    """Offset for ``size`` bytes of ``group`` over steps ``[start, end]``, or -1 if none fits.

    The group's offset when it has one (``group_offset >= 0``), else the lowest free one.
    """
    k = _collect(buf_int, alloc, active, block_end, n_active, group, start, end, lo, hi)
    if group_offset >= 0:
        return group_offset if _fits_at(group_offset, size, capacity, k, lo, hi) else -1
    return _lowest_offset(size, capacity, alignment, k, lo, hi)


@_jit
def _mark_legal(out, action, offset, start, end):
    """Record in ``out`` that ``action`` is legal at ``offset`` with memory interval ``[start, end]``."""
    out[action, O_LEGAL] = 1
    out[action, O_OFFSET] = offset
    out[action, O_START] = start
    out[action, O_END] = end


# ------------------------------------------------------------------------ copy walks


@_jit
def walk_back(supply_left, pair_used, tau, def_time, demand):
    """First step ``s`` of an operand's copy interval ``[s, tau-1]``, or -1 if illegal.

    The game's copy walk (SPEC section 4), shared by every solver that places copies:
    from ``tau - 1`` down, each step gives ``min(supply_left[t], need)``; the walk stops
    once ``need <= REL_EPS * demand``, and fails past ``def_time`` or at a used pair.
    ``supply_left`` float64 [T] seconds, ``pair_used`` int8 [T]."""
    need = demand
    threshold = REL_EPS * demand
    t = tau - 1
    while True:
        if t <= def_time or t < 0:
            return -1
        if t < tau - 1 and pair_used[t] != 0:
            return -1
        need -= min(supply_left[t], need)
        if need <= threshold:
            return t
        t -= 1


@_jit
def walk_forward(supply_left, pair_used, tau, num_steps, demand):
    """Last step ``e`` of an output's copy interval ``[tau+1, e]``, or -1 if illegal: the
    walk of :func:`walk_back` forwards from ``tau + 1``, failing past ``num_steps - 1``."""
    need = demand
    threshold = REL_EPS * demand
    t = tau + 1
    while True:
        if t > num_steps - 1:
            return -1
        if t > tau + 1 and pair_used[t - 1] != 0:
            return -1
        need -= min(supply_left[t], need)
        if need <= threshold:
            return t
        t += 1


# ------------------------------------------------------------------------- latencies


@_jit
def _latency(buf_int, ins_int, ins_float, ins_buf, table_s, alloc, t, extra, fast_bw, slow_bw):
    """One execution of instruction ``t`` with its placed buffers (and ``extra``) fast (s)."""
    first = ins_int[t, I_FIRST]
    last = ins_int[t, I_LAST]
    if ins_int[t, I_KIND] == 0:
        mem = 0.0
        for i in range(first, last):
            j = ins_buf[i]
            action = alloc[j, A_ACTION]
            fast = action == COPY or action == NOCOPY or j == extra
            mem += buf_int[j, B_SIZE] / (fast_bw if fast else slow_bw)
        return ins_float[t, I_FIXED] + max(ins_float[t, I_COMPUTE], mem)
    mask = 0
    for i in range(first, last):
        j = ins_buf[i]
        bit = buf_int[j, B_BIT]
        if bit >= 0:
            action = alloc[j, A_ACTION]
            if action == COPY or action == NOCOPY or j == extra:
                mask |= 1 << bit
    return table_s[ins_int[t, I_TABLE] + mask]


# --------------------------------------------------------------------------- analyze


@_jit
def analyze(
    buf_int, buf_demand, ten_int, capacity, alignment,
    supply_left, pair_used, alloc, group_state, ten_state, active, block_end, ctr, out, lo, hi,
):
    """Fill ``out`` with the legality and outcome of each action for the current buffer."""
    for a in range(3):
        for c in range(6):
            out[a, c] = -1
        out[a, O_LEGAL] = 0
    b = ctr[C_CURRENT]
    if b >= buf_int.shape[0]:
        return
    tau = buf_int[b, B_TIME]
    is_out = buf_int[b, B_IS_OUT] != 0
    x = buf_int[b, B_TENSOR]
    g = buf_int[b, B_GROUP]
    size = buf_int[b, B_ALIGNED]
    gs = group_state[g]
    resident = ten_state[x, T_RESIDENT] != 0
    n_active = ctr[C_ACTIVE]
    num_steps = supply_left.shape[0]

    # Copy
    if gs != SLOW and not resident:
        demand = buf_demand[b]
        start = tau
        end = tau
        copy_start = -1
        copy_end = -1
        ok = True
        if demand > 0.0:
            if is_out:
                e = walk_forward(supply_left, pair_used, tau, num_steps, demand)
                ok = e >= 0
                end = e
                copy_start = tau + 1
                copy_end = e
            else:
                s = walk_back(supply_left, pair_used, tau, ten_int[x, X_DEF], demand)
                ok = s >= 0
                start = s
                copy_start = s
                copy_end = tau - 1
        if ok:
            offset = _place(buf_int, alloc, active, block_end, n_active, g, gs, size, capacity, alignment,
                            start, end, lo, hi)
            if offset >= 0:
                _mark_legal(out, COPY, offset, start, end)
                out[COPY, O_COPY_START] = copy_start
                out[COPY, O_COPY_END] = copy_end

    # NoCopy
    if gs != SLOW:
        if is_out:
            if ten_int[x, X_LIVE_OUT] == 0:
                end = ten_int[x, X_LAST_USE]
                offset = _place(buf_int, alloc, active, block_end, n_active, g, gs, size, capacity, alignment,
                                tau, end, lo, hi)
                if offset >= 0:
                    _mark_legal(out, NOCOPY, offset, tau, end)
        else:
            latest = ten_state[x, T_LATEST]
            if latest >= 0:
                offset = alloc[latest, A_OFFSET]
                if gs < 0 or gs == offset:
                    if alloc[latest, A_END] >= tau:
                        # covered up to tau already: an empty interval, inside the memory (rule 1)
                        if offset + size <= capacity:
                            _mark_legal(out, NOCOPY, offset, -1, -1)
                    else:
                        start = alloc[latest, A_END] + 1
                        k = _collect(buf_int, alloc, active, block_end, n_active, g, start, tau, lo, hi)
                        if _fits_at(offset, size, capacity, k, lo, hi):
                            _mark_legal(out, NOCOPY, offset, start, tau)

    # Drop
    if gs < 0 and (is_out or not resident):
        out[DROP, O_LEGAL] = 1


# ----------------------------------------------------------------------------- apply


@_jit
def apply(
    buf_int, buf_demand, ins_int, ins_float, ins_buf, table_s, ten_int,
    capacity, alignment, fast_bw, slow_bw,
    supply_left, pair_used, alloc, group_state, group_left, ten_state, active, block_end,
    trail_t, trail_w, record, record_return, ctr, ret, out, lo, hi,
    action,
):
    """Play ``action`` (legal per ``out``) for the current buffer, then analyze the next.

    Returns the reward in seconds (SPEC section 5).
    """
    b = ctr[C_CURRENT]
    tau = buf_int[b, B_TIME]
    is_out = buf_int[b, B_IS_OUT] != 0
    x = buf_int[b, B_TENSOR]
    g = buf_int[b, B_GROUP]
    gs = group_state[g]
    was_resident = ten_state[x, T_RESIDENT] != 0

    record[b, R_TRAIL] = ctr[C_TRAIL]
    record[b, R_GROUP_STATE] = gs
    record[b, R_LATEST] = ten_state[x, T_LATEST]
    record[b, R_PENDING_FAST] = ctr[C_PENDING_FAST]
    record[b, R_PENDING_RESIDENT] = ctr[C_PENDING_RESIDENT]
    record[b, R_ACTIVE] = ctr[C_ACTIVE]
    record_return[b] = ret[0]

    reward = 0.0
    if action == DROP:
        alloc[b, A_ACTION] = DROP
        if gs == UNDECIDED:
            group_state[g] = SLOW
    else:
        before = _latency(buf_int, ins_int, ins_float, ins_buf, table_s, alloc, tau, -1, fast_bw, slow_bw)
        after = _latency(buf_int, ins_int, ins_float, ins_buf, table_s, alloc, tau, b, fast_bw, slow_bw)
        reward = ins_float[tau, I_COUNT] * (before - after)
        offset = out[action, O_OFFSET]
        start = out[action, O_START]
        end = out[action, O_END]
        copy_start = out[action, O_COPY_START]
        copy_end = out[action, O_COPY_END]
        alloc[b, A_ACTION] = action
        alloc[b, A_OFFSET] = offset
        alloc[b, A_START] = start
        alloc[b, A_END] = end
        alloc[b, A_COPY_START] = copy_start
        alloc[b, A_COPY_END] = copy_end
        if copy_start >= 0:
            need = buf_demand[b]
            p = ctr[C_TRAIL]
            for i in range(copy_end - copy_start + 1):
                t = copy_start + i if is_out else copy_end - i
                take = min(supply_left[t], need)
                trail_t[p] = t
                trail_w[p] = supply_left[t]
                p += 1
                supply_left[t] -= take
                need -= take
            ctr[C_TRAIL] = p
            for t in range(copy_start, copy_end):
                pair_used[t] = 1
        if start >= 0:
            if buf_int[b, B_ALIGNED] > 0:
                _push_active(active, block_end, ctr, b, end)
            latest = ten_state[x, T_LATEST]
            if latest < 0 or alloc[latest, A_END] < end:
                ten_state[x, T_LATEST] = b
        group_state[g] = offset
        if is_out and action == NOCOPY:
            ten_state[x, T_RESIDENT] = 1
            ctr[C_PENDING_RESIDENT] += ten_state[x, T_READS_LEFT]

    group_left[g] -= 1
    if gs >= 0:
        ctr[C_PENDING_FAST] -= 1
    elif gs == UNDECIDED and action != DROP:
        ctr[C_PENDING_FAST] += group_left[g]
    if not is_out:
        ten_state[x, T_READS_LEFT] -= 1
        if was_resident:
            ctr[C_PENDING_RESIDENT] -= 1

    ret[0] += reward
    ctr[C_CURRENT] = b + 1
    analyze(
        buf_int, buf_demand, ten_int, capacity, alignment,
        supply_left, pair_used, alloc, group_state, ten_state, active, block_end, ctr, out, lo, hi,
    )
    return reward


@_jit
def apply_forced(
    buf_int, buf_demand, ins_int, ins_float, ins_buf, table_s, ten_int,
    capacity, alignment, fast_bw, slow_bw,
    supply_left, pair_used, alloc, group_state, group_left, ten_state, active, block_end,
    trail_t, trail_w, record, record_return, ctr, ret, out, lo, hi,
    drop_only,
):
    """Play, one after another, every decision that has exactly one allowed action:
    the legal ones per ``out``, only Drop where ``drop_only[b]`` (bool [B + 1], by
    buffer id). Stops at the end of the game, at a decision with two or more allowed
    actions, or at one with none (left for the caller, which backs up).

    Returns (decisions played, the decision count at the latest backup point reached
    after one of them, or -1 where none was).
    """
    num_buffers = buf_int.shape[0]
    played = 0
    mark = -1
    while True:
        b = ctr[C_CURRENT]
        if b >= num_buffers:
            break
        drop = out[DROP, O_LEGAL] != 0
        copy = out[COPY, O_LEGAL] != 0 and not drop_only[b]
        nocopy = out[NOCOPY, O_LEGAL] != 0 and not drop_only[b]
        if int(copy) + int(nocopy) + int(drop) != 1:
            break
        action = COPY if copy else (NOCOPY if nocopy else DROP)
        apply(
            buf_int, buf_demand, ins_int, ins_float, ins_buf, table_s, ten_int,
            capacity, alignment, fast_bw, slow_bw,
            supply_left, pair_used, alloc, group_state, group_left, ten_state, active, block_end,
            trail_t, trail_w, record, record_return, ctr, ret, out, lo, hi,
            action,
        )
        played += 1
        if ctr[C_PENDING_FAST] == 0 and ctr[C_PENDING_RESIDENT] == 0:
            mark = ctr[C_CURRENT]
    return played, mark


# ------------------------------------------------------------------------------ undo


@_jit
def undo_to(
    buf_int, buf_demand, ten_int, capacity, alignment,
    supply_left, pair_used, alloc, group_state, group_left, ten_state, active, block_end,
    trail_t, trail_w, record, record_return, ctr, ret, out, lo, hi,
    mark,
):
    """Undo decisions until ``mark`` buffers are decided, then analyze the current buffer."""
    while ctr[C_CURRENT] > mark:
        b = ctr[C_CURRENT] - 1
        x = buf_int[b, B_TENSOR]
        g = buf_int[b, B_GROUP]
        is_out = buf_int[b, B_IS_OUT] != 0
        action = alloc[b, A_ACTION]
        p0 = record[b, R_TRAIL]
        for p in range(ctr[C_TRAIL] - 1, p0 - 1, -1):
            supply_left[trail_t[p]] = trail_w[p]
        ctr[C_TRAIL] = p0
        if action != DROP:
            for t in range(alloc[b, A_COPY_START], alloc[b, A_COPY_END]):
                pair_used[t] = 0
            if is_out and action == NOCOPY:
                ten_state[x, T_RESIDENT] = 0
        if not is_out:
            ten_state[x, T_READS_LEFT] += 1
        ten_state[x, T_LATEST] = record[b, R_LATEST]
        group_left[g] += 1
        group_state[g] = record[b, R_GROUP_STATE]
        if ctr[C_ACTIVE] != record[b, R_ACTIVE]:
            _truncate_active(alloc, active, block_end, ctr, record[b, R_ACTIVE])
        ctr[C_PENDING_FAST] = record[b, R_PENDING_FAST]
        ctr[C_PENDING_RESIDENT] = record[b, R_PENDING_RESIDENT]
        ret[0] = record_return[b]
        for c in range(6):
            alloc[b, c] = -1
        ctr[C_CURRENT] = b
    analyze(
        buf_int, buf_demand, ten_int, capacity, alignment,
        supply_left, pair_used, alloc, group_state, ten_state, active, block_end, ctr, out, lo, hi,
    )
