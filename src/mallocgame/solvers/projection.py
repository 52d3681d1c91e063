"""Project any mapping onto a game trajectory (so it can seed game-playing agents).

A mapping made outside the game (the ``heuristic`` solver's, or any valid set of
allocations) chooses offsets and intervals the game cannot express: the game places
at the lowest offset that fits and copies over the shortest interval that covers the
demand. :func:`project` replays the mapping's *decisions* instead: for each buffer in
game order it plays the legal action closest to what the mapping did, under
Drop-backup (:class:`~mallocgame.game.backup.DropBackup`), so the game always
completes:

- the mapping placed the buffer with Copy (NoCopy): play Copy (NoCopy) if allowed,
  else the other fast action if allowed, else Drop;
- the mapping left the buffer in slow memory: play Drop if allowed, else (its alias
  group is already fast, or it reads a fast-resident tensor) a fast action;
- an output the mapping copied out falls back to NoCopy (fast-resident) only when
  the mapping also has every read of its tensor in fast memory, so the fallback
  never forces reads into fast memory that the mapping left in slow memory.

**Repair** (``repairs`` > 0). Lowest-fit placement and nearest-first copy walks let an
early decision take the address range, the copy supply or the step pairs that a later
decision of the mapping needs; the later one falls back, and a failure inside a fast
alias group backs the game up and drops the whole group. After the plain replay, a
hill climb over the mapping's decisions: for each decision that lost its fast
placement (and each back-up), :func:`blockage` names the alias groups in the way in the
state where it failed; the game is replayed with those groups wanted in slow memory,
and the change is kept only if the return rises. Candidates go by the benefit at stake
(what the mapping loses without the buffer, or without the whole group for a back-up,
from the instance's latencies), largest first, and are
skipped where the groups to drop are worth more than ``MAX_COST_RATIO`` times it. Where
a candidate only moves an alias group's back-up to a later buffer of the group, it also
drops the groups in the way there (at most ``MAX_CHAIN`` replays) before it is judged. A
trial already replayed without a rise is not replayed again (the return only rises). The
climb ends after ``repairs`` replays, or when no candidate of the current trajectory
that was not tried before (a buffer and the groups in its way) raises the return.
Every kept change drops buffers the mapping had in fast memory, so the fast set stays a
subset of the mapping's. Deterministic without a time limit (``seconds=None``): the
same mapping and ``repairs`` give the same trajectory.

The result is a complete legal trajectory (a :class:`~mallocgame.solution.Solution`
with ``actions``) and ``kept_fraction`` = its reward / the mapping's reward (both exact,
:func:`~mallocgame.latency.mapping_reward`; 1.0 when the mapping's reward is 0). For a
valid mapping (one :func:`~mallocgame.check.physical_check` accepts) and roofline
latencies the projected fast set is a subset of the mapping's, so the fraction is at
most 1; an invalid mapping (XLA's own splits alias groups) can project onto more fast
buffers than it had, where a group or a resident tensor it left in part in slow memory
is fast, and keep more than all. A game trajectory's own allocations project back onto
the same trajectory (fraction 1 exactly).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np

from mallocgame.game import kernels as K
from mallocgame.game.backup import DropBackup
from mallocgame.game.state import COPY, DROP, NOCOPY, Game
from mallocgame.game.tables import (
    B_ALIGNED,
    B_GROUP,
    B_IS_OUT,
    B_TENSOR,
    B_TIME,
    X_DEF,
    X_LAST_USE,
    X_LIVE_OUT,
    GameTables,
)
from mallocgame.instance import Instance
from mallocgame.latency import instruction_latency, mapping_reward
from mallocgame.solution import Allocation, Solution
from mallocgame.solvers.base import solution_from_game

__all__ = [
    "project",
    "ProjectionPolicy",
    "Blockage",
    "blockage",
    "wanted_actions",
    "DEFAULT_REPAIRS",
]

DEFAULT_REPAIRS = 200
"""Replays the repair may spend by default (on ``xla-v2``'s largest programs about 0.1 to
0.5 s each; most programs stop well before, when no candidate helps)."""

MAX_CHAIN = 8
"""Replays one candidate may take: where dropping the groups in the way of a stuck alias
group only moves its collision to a later buffer of the group (a loop-carried group meets
other allocations at its offset all through the loop), the candidate also drops the
groups met there, up to this many times, before it is judged
(``xla-v1/inplace_update_loop`` keeps 0.99 of the heuristic's reward with it, 0.43
without)."""

MAX_COST_RATIO = 2.0
"""A candidate whose blocking groups are worth more than this many times the benefit at
stake is not tried (on five of ``xla-v2``'s large programs, measured with the first
version's stakes, it took 0.58 times the replays of trying every candidate and found
the same)."""


def wanted_actions(instance: Instance, allocations: Iterable[Allocation]) -> np.ndarray:
    """The mapping's action per buffer, int64 [B]: 0 Copy, 1 NoCopy, 2 Drop (not placed).

    Raises:
        ValueError: an allocation names a buffer the instance does not have.
    """
    n = instance.num_buffers
    wanted = np.full(n, DROP, dtype=np.int64)
    for a in allocations:
        if not 0 <= a.buffer < n:
            raise ValueError(f"allocation names unknown buffer {a.buffer}")
        wanted[a.buffer] = COPY if a.action == "Copy" else NOCOPY
    return wanted


class ProjectionPolicy:
    """A Drop-backup policy that follows wanted decisions, buffer by buffer.

    ``wanted[b]`` is the action wanted for buffer ``b`` (0 Copy, 1 NoCopy, 2 Drop; see
    :func:`wanted_actions`); ``fallbacks`` counts the calls where the wanted action was
    not allowed (the calls of a replay after a back-up included).
    """

    def __init__(self, instance: Instance, wanted: np.ndarray) -> None:
        self.wanted = np.asarray(wanted, dtype=np.int64)
        if self.wanted.shape != (instance.num_buffers,):
            raise ValueError(
                f"wanted has shape {self.wanted.shape}, the instance {instance.num_buffers} buffers"
            )
        # An output may fall back to NoCopy (fast-resident) only if every read of its
        # tensor is wanted in fast memory.
        reads_fast = np.ones(len(instance.tensors), dtype=bool)
        for b in instance.buffers:
            if not b.is_output and self.wanted[b.id] == DROP:
                reads_fast[b.tensor_id] = False
        self.resident_ok = np.array(
            [not b.is_output or reads_fast[b.tensor_id] for b in instance.buffers], dtype=bool
        )
        self.fallbacks = 0

    def __call__(self, game: Game, allowed: np.ndarray) -> int:
        b = game.current_buffer
        want = int(self.wanted[b])
        if allowed[want]:
            return want
        self.fallbacks += 1
        if want == DROP:
            order = (NOCOPY, COPY)
        elif want == COPY:
            order = (NOCOPY, DROP) if self.resident_ok[b] else (DROP, NOCOPY)
        else:
            order = (COPY, DROP)
        for action in order:
            if allowed[action]:
                return action
        raise AssertionError("Drop-backup offers at least one action")  # pragma: no cover


@dataclass(frozen=True)
class Blockage:
    """What stops ``buffer`` from taking the fast placement ``want`` (0 Copy, 1 NoCopy) in
    one game state.

    ``cause``: ``"address"`` (allocations of other alias groups over the address range
    it needs: the extension's own range for an operand NoCopy or a fast group's offset,
    else the candidate offset whose blockers are worth least, each group counted once),
    ``"supply"`` (its copy walk reaches its tensor's definition, or the program's end,
    before its demand is met), ``"pairs"`` (the walk would add a step pair that another
    copy interval holds) or ``"rule"`` (a rule that no other placement changes: its group
    is slow, a Copy of a fast-resident tensor, a NoCopy of a program result, an extension
    at another offset than its group's, or the extension already covers it).
    ``groups``: the alias groups whose slow placement would clear it (empty where
    nothing placed is to blame); ``gain_s``: the benefit at stake, seconds (orders the
    repairs).
    """

    buffer: int
    want: int
    cause: str
    groups: tuple[int, ...]
    gain_s: float


def blockage(game: Game, want: int, group_value: np.ndarray, gain_s: float) -> Blockage:
    """Why the current buffer of ``game`` cannot be placed with ``want`` (Copy or NoCopy).

    ``group_value`` [G] seconds: what each alias group's fast placement is worth (it
    chooses among candidate offsets). An operand NoCopy with nothing to extend is
    analysed as the Copy it falls back to. Reads the game, never changes it.
    """
    tb: GameTables = game.tables
    bi = tb.buf_int
    b = game.current_buffer
    tau, size, group = int(bi[b, B_TIME]), int(bi[b, B_ALIGNED]), int(bi[b, B_GROUP])
    tensor, is_out = int(bi[b, B_TENSOR]), bool(bi[b, B_IS_OUT])
    rows = game.placements()
    offset = game.group_offset(group)
    fixed = offset if offset >= 0 else None

    nothing = np.empty(0, dtype=np.int64)

    def found(cause: str, blockers: np.ndarray) -> Blockage:
        groups = tuple(sorted({int(g) for g in bi[blockers, B_GROUP]} - {group}))
        return Blockage(buffer=b, want=want, cause=cause, groups=groups, gain_s=gain_s)

    if (
        offset == K.SLOW
        or (want == COPY and game.reads_fast_resident(b) >= 0)
        or (want == NOCOPY and is_out and tb.ten_int[tensor, X_LIVE_OUT])
    ):
        return found("rule", nothing)
    latest = game.latest_allocation(tensor)
    if want == NOCOPY and not is_out and latest >= 0:
        extends = int(rows[latest, K.A_OFFSET])
        if (fixed is not None and fixed != extends) or rows[latest, K.A_END] >= tau:
            return found("rule", nothing)
        start, end, fixed = int(rows[latest, K.A_END]) + 1, tau, extends
    elif want == NOCOPY and is_out:
        start, end = tau, int(tb.ten_int[tensor, X_LAST_USE])
    else:
        walk = _copy_walk(game, b, group_value)
        if walk.cause is not None:
            assert walk.blockers is not None
            return found(walk.cause, walk.blockers)
        start, end = walk.start, walk.end
    if size == 0:  # fits anywhere
        return found("address", nothing)

    placed = np.flatnonzero(
        (rows[:, K.A_ACTION] != DROP)
        & (rows[:, K.A_START] >= 0)
        & (rows[:, K.A_START] <= end)
        & (rows[:, K.A_END] >= start)
        & (bi[: len(rows), B_GROUP] != group)
        & (bi[: len(rows), B_ALIGNED] > 0)
    )
    placed = placed[np.argsort(bi[placed, B_GROUP], kind="stable")]  # by group, for reduceat
    lo = rows[placed, K.A_OFFSET]
    hi = lo + bi[placed, B_ALIGNED]
    if fixed is not None:
        return found("address", placed[(lo < fixed + size) & (hi > fixed)])
    # The cheapest of the game's candidate offsets (0 and every end of a placed range).
    candidates = np.unique(np.concatenate([[0], hi]))
    candidates = candidates[candidates + size <= tb.capacity]
    if candidates.size == 0 or placed.size == 0:  # larger than the memory, or nothing in the way
        return found("address", nothing)
    placed_groups = bi[placed, B_GROUP]
    first_of_group = np.flatnonzero(np.r_[True, placed_groups[1:] != placed_groups[:-1]])
    value = group_value[placed_groups[first_of_group]]
    best, best_cost = nothing, np.inf
    for chunk in np.array_split(candidates, candidates.size * placed.size // 4_000_000 + 1):
        hit = (lo[None, :] < chunk[:, None] + size) & (
            hi[None, :] > chunk[:, None]
        )  # [offsets, placed]
        cost = np.logical_or.reduceat(hit, first_of_group, axis=1) @ value  # each group once
        i = int(np.argmin(cost))
        if cost[i] < best_cost:
            best, best_cost = placed[hit[i]], float(cost[i])
    return found("address", best)


@dataclass(frozen=True)
class _Walk:
    """A copy walk (SPEC section 4): the memory interval ``(start, end)`` it gives, or why
    it fails (``cause`` ``"supply"`` or ``"pairs"``) and the copies to blame (buffer ids)."""

    start: int = -1
    end: int = -1
    cause: str | None = None
    blockers: np.ndarray | None = None


def _copy_walk(game: Game, b: int, group_value: np.ndarray) -> _Walk:
    """The copy walk of the current buffer ``b``, step by step as the game's kernel takes it."""
    tb = game.tables
    bi = tb.buf_int
    tau, demand = int(bi[b, B_TIME]), float(tb.buf_demand[b])
    if demand <= 0.0:
        return _Walk(tau, tau)
    supply, pairs = game.supply_left(), game.pair_used()
    rows = game.placements()
    copies = np.flatnonzero((rows[:, K.A_ACTION] == COPY) & (rows[:, K.A_COPY_START] >= 0))
    out = bool(bi[b, B_IS_OUT])
    step = 1 if out else -1
    first = tau + step
    lowest = max(
        int(tb.ten_int[bi[b, B_TENSOR], X_DEF]) + 1, 0
    )  # an operand's walk stays after its definition
    need, threshold = demand, K.REL_EPS * demand
    t = first
    while True:
        if (out and t > tb.num_instructions - 1) or (not out and t < lowest):
            if t == first:  # no step to walk at all: no copy is to blame
                return _Walk(cause="supply", blockers=np.empty(0, dtype=np.int64))
            # Out of supply: the copies whose intervals share the walked steps, the least
            # value per second of supply first, until their demand covers what is missing.
            walked_lo, walked_hi = min(first, t - step), max(first, t - step)
            holders = copies[
                (rows[copies, K.A_COPY_START] <= walked_hi)
                & (rows[copies, K.A_COPY_END] >= walked_lo)
            ]
            per_second = group_value[bi[holders, B_GROUP]] / np.maximum(
                tb.buf_demand[holders], 1e-30
            )
            holders = holders[np.argsort(per_second, kind="stable")]
            holders = holders[np.cumsum(tb.buf_demand[holders]) - tb.buf_demand[holders] < need]
            return _Walk(cause="supply", blockers=holders)
        pair = t - 1 if out else t  # the pair (pair, pair + 1) that step t adds
        if t != first and pairs[pair]:
            holders = copies[
                (rows[copies, K.A_COPY_START] <= pair) & (rows[copies, K.A_COPY_END] >= pair + 1)
            ]
            return _Walk(cause="pairs", blockers=holders)
        need -= min(float(supply[t]), need)
        if need <= threshold:
            return _Walk(tau, t) if out else _Walk(t, tau)
        t += step


@dataclass(frozen=True)
class _Played:
    """One replay of wanted decisions: the policy it followed, its actions [B], return (s),
    back-ups, the blockages met at its back-ups (none without group values), the game
    (complete), and ``backup_points`` [B + 1] bool: the trajectory is at a backup point
    after that many decisions (kept only where the replay backed up nowhere, else ``None``)."""

    policy: ProjectionPolicy
    actions: np.ndarray
    return_s: float
    backups: int
    backup_blockages: tuple[Blockage, ...]
    game: Game
    backup_points: np.ndarray | None


def _play(
    instance: Instance,
    tables: GameTables,
    wanted: np.ndarray,
    group_value: np.ndarray | None,
    resume: _Played | None = None,
) -> _Played:
    """Replay ``wanted`` under Drop-backup, naming the blockage of each back-up (valued by
    ``group_value``; none without it). With ``resume`` (an earlier replay that backed
    up nowhere), start at the first buffer whose policy differs, with Drop-backup's latest
    backup point there: up to there a replay from the start would repeat it decision for
    decision."""
    policy = ProjectionPolicy(instance, wanted)
    start = mark = 0
    if resume is not None and resume.backup_points is not None:
        differs = (policy.wanted != resume.policy.wanted) | (
            policy.resident_ok != resume.policy.resident_ok
        )
        start = int(np.argmax(differs)) if differs.any() else instance.num_buffers
        mark = int(np.flatnonzero(resume.backup_points[: start + 1])[-1])
    if start > 0:
        assert resume is not None and resume.backup_points is not None
        game = resume.game.clone()
        game.undo_to(start)
        points = resume.backup_points.copy()
        points[start + 1 :] = False
    else:
        game = Game(instance, tables)
        points = np.zeros(instance.num_buffers + 1, dtype=bool)
        points[0] = True
    found: list[Blockage] = []
    group_of = tables.buf_int[:, B_GROUP]

    def on_back_up(g: Game) -> None:
        assert group_value is not None
        b = g.current_buffer
        want = int(wanted[b]) if wanted[b] != DROP else NOCOPY
        found.append(blockage(g, want, group_value, float(group_value[group_of[b]])))

    driver = DropBackup(
        game, on_back_up=on_back_up if group_value is not None else None, backup_mark=mark
    )
    while not game.complete:
        driver.step(policy(game, driver.allowed()))
        points[game.current_buffer] = game.is_backup_point
    return _Played(
        policy=policy,
        actions=np.asarray(game.actions(), dtype=np.int64),
        return_s=game.return_s,
        backups=driver.backups,
        backup_blockages=tuple(found),
        game=game,
        backup_points=points if driver.backups == 0 else None,
    )


def _failures(
    instance: Instance,
    tables: GameTables,
    played: _Played,
    wanted: np.ndarray,
    group_value: np.ndarray,
    benefit: np.ndarray,
) -> list[Blockage]:
    """The blockage of every decision of ``played`` that wanted fast memory and got Drop."""
    lost = np.flatnonzero((wanted != DROP) & (played.actions == DROP))
    if lost.size == 0:
        return []
    game = played.game.clone()
    result = []
    for b in lost[::-1]:  # undo back to each, the latest first
        game.undo_to(int(b))
        result.append(blockage(game, int(wanted[b]), group_value, float(benefit[b])))
    return result[::-1]


def _marginal_values(instance: Instance, wanted: np.ndarray) -> np.ndarray:
    """Seconds the mapping ``wanted`` loses without each of its fast buffers, float64 [B]:
    ``count * (L_t(S_t - {b}) - L_t(S_t))``, ``S_t`` its fast buffers of instruction ``t``
    (0 for a buffer it leaves in slow memory). Computed from the latencies, not from the
    instance's informational ``benefit_s``."""
    values = np.zeros(instance.num_buffers, dtype=np.float64)
    for t, ins in enumerate(instance.instructions):
        fast = frozenset(b for b in ins.buffers if wanted[b] != DROP)
        if fast:
            with_all = instruction_latency(instance, t, fast)
            for b in fast:
                values[b] = instruction_latency(instance, t, fast - {b}) - with_all
    return values


def _group_values(tables: GameTables, wanted: np.ndarray, benefit: np.ndarray) -> np.ndarray:
    """Seconds each alias group's wanted fast buffers are worth (sum of ``benefit``), [G]."""
    fast = np.where(wanted != DROP, benefit, 0.0)
    return np.bincount(tables.buf_int[:, B_GROUP], weights=fast, minlength=tables.num_groups)


def _repair(
    instance: Instance,
    tables: GameTables,
    wanted: np.ndarray,
    played: _Played,
    budget: int,
    deadline: float | None,
) -> tuple[np.ndarray, _Played, int, int]:
    """Hill-climb ``wanted`` (module docstring) for at most ``budget`` replays, and until
    ``time.perf_counter()`` passes ``deadline`` (``None``: no time limit). Returns (wanted,
    its replay, replays spent, changes kept)."""
    benefit = _marginal_values(instance, wanted)
    group_of = tables.buf_int[:, B_GROUP]
    # A rise smaller than this is the rounding of a reordered sum, not a better trajectory.
    noise = 1e-12 * max(abs(tables.normalizer_s), abs(played.return_s))
    spent = kept = 0
    tried: set[tuple[int, tuple[int, ...]]] = set()
    # Trials replayed without a rise, by digest: their back-ups. The return only rises, so
    # such a trial never rises later; two candidates, or two links of a chain (groups added
    # that were wanted slow already), can name the same trial. Valid while ``benefit`` is
    # fixed: a replay is then a function of its trial alone.
    rejected: dict[bytes, tuple[Blockage, ...]] = {}

    def out_of_budget() -> bool:
        return spent >= budget or (deadline is not None and time.perf_counter() >= deadline)

    while not out_of_budget():
        value = _group_values(tables, wanted, benefit)
        candidates = list(played.backup_blockages) + _failures(
            instance, tables, played, wanted, value, benefit
        )
        candidates.sort(key=lambda c: (-c.gain_s, c.buffer))
        improved = False
        for candidate in candidates:
            key = (candidate.buffer, candidate.groups)
            if not candidate.groups or key in tried:
                continue
            tried.add(key)
            if value[list(candidate.groups)].sum() > MAX_COST_RATIO * candidate.gain_s:
                continue
            drop, stuck_group = set(candidate.groups), group_of[candidate.buffer]
            trial, better, links = wanted, None, 0
            while links < MAX_CHAIN and not out_of_budget():
                trial = wanted.copy()
                trial[np.isin(group_of, sorted(drop))] = DROP
                if np.array_equal(trial, wanted):  # every group named is slow already
                    break
                digest = hashlib.blake2b(trial.tobytes(), digest_size=16).digest()
                blockages = rejected.get(digest)
                if blockages is None:  # (a trial replayed before cannot rise now: no replay)
                    spent += 1
                    links += 1
                    replay = _play(
                        instance,
                        tables,
                        trial,
                        _group_values(tables, trial, benefit),
                        resume=played,
                    )
                    if replay.return_s > played.return_s + noise:
                        better = replay
                        break
                    blockages = rejected[digest] = replay.backup_blockages
                # The same group stuck again, further on, by groups not yet dropped: drop those too.
                again = [
                    x
                    for x in blockages
                    if group_of[x.buffer] == stuck_group and not drop.issuperset(x.groups)
                ]
                if not again:
                    break
                drop.update(again[0].groups)
            if better is not None:
                wanted, played, improved = trial, better, True
                kept += 1
                break
            if out_of_budget():
                break
        if not improved:
            break
    return wanted, played, spent, kept


def project(
    instance: Instance,
    allocations: Iterable[Allocation] | Solution,
    *,
    solver: str | None = None,
    seed: int | None = None,
    repairs: int = DEFAULT_REPAIRS,
    seconds: float | None = None,
) -> tuple[Solution, float]:
    """The game trajectory closest to a mapping, and the fraction of its reward kept.

    Args:
        instance: the instance the mapping is for.
        allocations: the mapping's allocations, or a :class:`Solution` (its
            allocations; its solver name and seed are carried over).
        solver: the ``solver`` recorded in the result (default: the solution's solver,
            else ``"projection"``); ``seed`` likewise (default 0).
        repairs: at most this many replays of the repair (module docstring); 0 for the
            plain replay of the mapping's decisions.
        seconds: the repair starts no replay once this many seconds have passed
            since the call; the replay under way, the plain replay and the search for
            the current trajectory's failures are not cut, so the call can take longer
            (``None``: no limit, and the same mapping and ``repairs`` give the same
            trajectory; with a limit that binds, the machine's speed decides where it
            stops).

    Returns:
        ``(solution, kept_fraction)``: a complete trajectory (``actions`` set; it
        passes :func:`mallocgame.check.check_solution`) whose ``info`` records
        ``projected_from`` (the mapping's reward), ``kept_fraction``, ``fallbacks``
        (buffers whose action differs from the mapping's), ``backups``, and the
        repair's ``kept_before_repair`` (the plain replay's fraction),
        ``repair_replays``, ``repairs_kept`` and ``repair_dropped`` (buffers the
        repair wants in slow memory that the mapping had in fast memory).

    Raises:
        ValueError: ``repairs`` is negative, ``seconds`` is negative, or an allocation
            names an unknown buffer.
    """
    if repairs < 0:
        raise ValueError(f"repairs must be at least 0, not {repairs}")
    if seconds is not None and not seconds >= 0:
        raise ValueError(f"seconds must be at least 0, not {seconds}")
    start = time.perf_counter()
    if isinstance(allocations, Solution):
        source = allocations
        allocations = source.allocations
        solver = solver if solver is not None else source.solver
        seed = seed if seed is not None else source.seed
    allocations = list(allocations)
    solver = solver if solver is not None else "projection"
    seed = seed if seed is not None else 0

    game = Game(instance)
    tables = game.tables
    mapped = wanted_actions(instance, allocations)
    values = (
        _group_values(tables, mapped, _marginal_values(instance, mapped)) if repairs > 0 else None
    )
    played = _play(instance, tables, mapped, values)  # (the repair needs the back-ups' blockages)
    target = mapping_reward(instance, [a.buffer for a in allocations])

    def fraction(return_s: float) -> float:
        return return_s / target if target != 0 else 1.0

    before = None  # the plain replay's fraction, exact like the answer's
    wanted, spent, changes = mapped, 0, 0
    if repairs > 0:
        before = fraction(mapping_reward(instance, [a.buffer for a in played.game.allocations()]))
        deadline = None if seconds is None else start + seconds
        wanted, played, spent, changes = _repair(
            instance, tables, mapped, played, repairs, deadline
        )
    solution = solution_from_game(
        instance, played.game, solver=solver, seed=seed, wall_s=time.perf_counter() - start
    )
    kept = fraction(solution.reward_s)  # the exact reward, not the game's running sum
    solution = replace(
        solution,
        info={
            "projected_from": target,
            "kept_fraction": kept,
            "fallbacks": int(np.count_nonzero(played.actions != mapped)),
            "backups": played.backups,
            "kept_before_repair": kept if before is None else before,
            "repair_replays": spent,
            "repairs_kept": changes,
            "repair_dropped": int(np.count_nonzero(wanted != mapped)),
        },
    )
    return solution, kept
