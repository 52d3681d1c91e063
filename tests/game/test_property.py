"""Property tests: random valid instances x random legal games.

Two independent witnesses of the game's correctness:

- the physical check of :mod:`mallocgame.check` (SPEC section 7) and the reward of
  the mapping (:func:`mallocgame.latency.mapping_reward`) on every completed game;
- :class:`Reference`, a deliberately plain re-reading of SPEC sections 3-5 written
  for these tests (no shared code with the game), compared with the game at every
  decision: the legality and outcome of each action, the remaining supply, the
  backup-point flag and the reward.
"""

from __future__ import annotations

import math
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mallocgame.game.backup import play
from mallocgame.game.state import COPY, DROP, NOCOPY, Game, replay
from mallocgame.instance import Instance, RooflineLatency
from mallocgame.latency import mapping_reward
from tests.builders import (
    CONFORMANCE_NAMES,
    B,
    I,
    X,
    build,
    conformance_instance,
    conformance_vector,
    random_policy,
    roofline,
    table,
)

EPS = 1e-12  # SPEC section 4: a copy walk stops once need <= 1e-12 * d
NONE5 = (-1, -1, -1, -1, -1)
SLOW = "slow"


# ================================================================== reference model


class Reference:
    """SPEC sections 3-5 read literally: slow, simple, and independent of the game."""

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        self.T = inst.num_instructions
        self.cap = inst.hardware.fast_memory_bytes
        self.align = inst.hardware.alignment_bytes
        self.W = [ins.supply_s for ins in inst.instructions]
        self.pair = [False] * self.T  # pair[t]: steps t and t+1 lie in one copy interval
        self.alloc: dict[int, tuple[int, int, int, int, int, int]] = {}  # b -> action, outcome
        self.decided: list[int] = []  # buffers placed in fast memory, in decision order
        self.group: dict[int, object] = {}  # alias_id -> SLOW or offset (absent: undecided)
        self.resident: set[int] = set()
        self.cur = 0
        self.ret = 0.0

    # ----------------------------------------------------------------------- helpers

    def z(self, b: int) -> int:
        size = self.inst.buffers[b].size
        return -(-size // self.align) * self.align

    def fits(self, off: int, z: int, start: int, end: int, alias: int) -> bool:
        if off + z > self.cap:
            return False
        if z == 0:
            return True  # an empty byte range overlaps nothing
        for c, (action, o, s, e, _, _) in self.alloc.items():
            if action == DROP or s < 0 or self.inst.buffers[c].alias_id == alias:
                continue
            if e < start or s > end or self.z(c) == 0:
                continue  # apart in time, or no bytes at all
            if o < off + z and off < o + self.z(c):
                return False
        return True

    def place(self, gs: object, z: int, start: int, end: int, alias: int) -> int | None:
        if isinstance(gs, int):
            return gs if self.fits(gs, z, start, end, alias) else None
        # The lowest fitting multiple of the alignment is 0 or the aligned end of a
        # range in the way; try those in increasing order.
        ranges = [
            (o, o + self.z(c))
            for c, (action, o, s, e, _, _) in self.alloc.items()
            if action != DROP
            and s >= 0
            and not (e < start or s > end)
            and self.inst.buffers[c].alias_id != alias
            and self.z(c) > 0
        ]
        cands = sorted({0} | {-(-hi // self.align) * self.align for _, hi in ranges})
        for off in cands:
            if off + z <= self.cap and (
                z == 0 or all(not (lo < off + z and off < hi) for lo, hi in ranges)
            ):
                return off
        return None

    def latency(self, t: int, fast: set[int]) -> float:
        ins = self.inst.instructions[t]
        lat = ins.latency
        if isinstance(lat, RooflineLatency):
            hw = self.inst.hardware
            mem = sum(
                self.inst.buffers[b].size / (hw.fast_bandwidth if b in fast else hw.slow_bandwidth)
                for b in ins.buffers
            )
            one = lat.fixed_s + max(lat.compute_s, mem)
        else:
            index = sum(1 << i for i, b in enumerate(lat.varied) if b in fast)
            one = lat.latency_s[index]
        return ins.count * one

    # ----------------------------------------------------------------------- the rules

    def options(self) -> dict[int, tuple[int, ...] | None]:
        """For each action, its outcome (offset, start, end, copy_start, copy_end) or None."""
        inst = self.inst
        b = self.cur
        buf = inst.buffers[b]
        tau, x, d, alias = buf.instruction, buf.tensor_id, buf.demand_s, buf.alias_id
        ten = inst.tensors[x]
        gs = self.group.get(alias)
        z = self.z(b)
        res: dict[int, tuple[int, ...] | None] = {COPY: None, NOCOPY: None, DROP: None}

        if gs != SLOW and x not in self.resident:
            ok, cs, ce = True, -1, -1
            if d == 0:
                s = e = tau
            elif not buf.is_output:
                need, t = d, tau - 1
                while True:
                    if t <= ten.def_time or t < 0 or (t < tau - 1 and self.pair[t]):
                        ok = False
                        break
                    need -= min(self.W[t], need)
                    if need <= EPS * d:
                        break
                    t -= 1
                s, e, cs, ce = t, tau, t, tau - 1
            else:
                need, t = d, tau + 1
                while True:
                    if t > self.T - 1 or (t > tau + 1 and self.pair[t - 1]):
                        ok = False
                        break
                    need -= min(self.W[t], need)
                    if need <= EPS * d:
                        break
                    t += 1
                s, e, cs, ce = tau, t, tau + 1, t
            if ok:
                off = self.place(gs, z, s, e, alias)
                if off is not None:
                    res[COPY] = (off, s, e, cs, ce)

        if gs != SLOW:
            if buf.is_output:
                if not ten.live_out:
                    s, e = tau, ten.last_use_time
                    off = self.place(gs, z, s, e, alias)
                    if off is not None:
                        res[NOCOPY] = (off, s, e, -1, -1)
            else:
                a = None
                for c in self.decided:
                    _, _, s, e, _, _ = self.alloc[c]
                    if (
                        inst.buffers[c].tensor_id == x
                        and s >= 0
                        and (a is None or e > self.alloc[a][3])
                    ):
                        a = c
                if a is not None:
                    _, o, _, a_end, _, _ = self.alloc[a]
                    if not isinstance(gs, int) or gs == o:
                        if a_end >= tau:  # resident: an empty interval, which fits
                            if o + z <= self.cap:  # where it ends inside the memory
                                res[NOCOPY] = (o, -1, -1, -1, -1)
                        elif self.fits(o, z, a_end + 1, tau, alias):
                            res[NOCOPY] = (o, a_end + 1, tau, -1, -1)

        if not isinstance(gs, int) and (buf.is_output or x not in self.resident):
            res[DROP] = NONE5
        return res

    def is_backup_point(self) -> bool:
        for c in range(self.cur, self.inst.num_buffers):
            buf = self.inst.buffers[c]
            if isinstance(self.group.get(buf.alias_id), int):
                return False
            if not buf.is_output and buf.tensor_id in self.resident:
                return False
        return True

    def step(self, action: int) -> float:
        out = self.options()[action]
        assert out is not None, "reference: illegal action"
        b = self.cur
        buf = self.inst.buffers[b]
        alias = buf.alias_id
        reward = 0.0
        if action == DROP:
            self.group.setdefault(alias, SLOW)
            self.alloc[b] = (DROP, *NONE5)
        else:
            t = buf.instruction
            fast = {c for c in self.decided if self.inst.buffers[c].instruction == t}
            reward = self.latency(t, fast) - self.latency(t, fast | {b})
            off, s, e, cs, ce = out
            self.alloc[b] = (action, off, s, e, cs, ce)
            if cs >= 0:
                need = buf.demand_s
                steps = range(cs, ce + 1) if buf.is_output else range(ce, cs - 1, -1)
                for u in steps:
                    take = min(self.W[u], need)
                    self.W[u] -= take
                    need -= take
                for u in range(cs, ce):
                    self.pair[u] = True
            self.group[alias] = off
            if buf.is_output and action == NOCOPY:
                self.resident.add(buf.tensor_id)
            self.decided.append(b)
        self.cur += 1
        self.ret += reward
        return reward


# ====================================================================== instances


@st.composite
def instances(draw) -> Instance:
    """Random valid instances: inputs, results, in-place alias groups (an operand and an
    output of one instruction, sometimes carried on to the output's later reads), reads
    of another size than their tensor's (empty, or larger than its allocation), counts
    > 1, roofline and table latencies (up to 3 varied buffers), zero sizes, alignment
    1..512, and a capacity from hopeless to roomy."""
    num_t = draw(st.integers(1, 8))
    alignment = draw(st.one_of(st.sampled_from([1, 8, 256, 512]), st.integers(1, 512)))
    sizes = st.one_of(st.just(0), st.integers(1, 2000), st.integers(1, 2000))
    factor = st.sampled_from([0.1, 0.0, 0.02, 0.5, 1.0, 2.0])
    tensors: list[X] = []
    available: list[int] = []
    carried: dict[int, str] = {}  # tensor -> alias key its reads join
    keys = iter(range(10**6))

    def demand(size: int) -> float:
        return size / 100.0 * draw(factor)

    for _ in range(draw(st.integers(0, 3))):
        available.append(len(tensors))
        tensors.append(X(draw(sizes), live_out=draw(st.booleans()) and draw(st.booleans())))

    instructions: list[I] = []
    for _t in range(num_t):
        reads: list[B] = []
        for _ in range(draw(st.integers(0, min(3, len(available))))):
            x = draw(st.sampled_from(available))
            key = carried.get(x) if draw(st.booleans()) else None
            # a read of another size than its tensor's (a slice, a padded view) at times
            size = draw(st.sampled_from([None, None, None, 0, tensors[x].size * 2 + 1]))
            size_read = tensors[x].size if size is None else size
            reads.append(B(x, alias=key, size=size, demand=demand(size_read)))
        writes: list[B] = []
        for _ in range(draw(st.integers(0, 2))):
            x = len(tensors)
            tensors.append(X(draw(sizes), live_out=draw(st.integers(0, 3)) == 0))
            writes.append(B(x, demand=demand(tensors[x].size)))
        if reads and writes and draw(st.booleans()):  # an in-place update
            r = reads[draw(st.integers(0, len(reads) - 1))]
            w = writes[draw(st.integers(0, len(writes) - 1))]
            key = r.alias if r.alias is not None else f"k{next(keys)}"
            r.alias = w.alias = key
            if draw(st.booleans()):
                carried[w.tensor] = key
        n = len(reads) + len(writes)
        if draw(st.booleans()):
            lat = roofline(
                draw(st.sampled_from([0.0, 1.0, 5.0, 20.0])), draw(st.sampled_from([0.0, 0.5]))
            )
        else:
            k = draw(st.integers(0, min(3, n)))
            varied = draw(st.permutations(range(n)))[:k] if n else []
            values = draw(
                st.lists(st.floats(0.0, 50.0, allow_nan=False), min_size=1 << k, max_size=1 << k)
            )
            lat = table(varied, values)
        instructions.append(
            I(
                reads=reads,
                writes=writes,
                supply=draw(st.sampled_from([2.0, 0.0, 0.5, 5.0, 20.0])),
                count=draw(st.integers(1, 4)),
                latency=lat,
            )
        )
        available.extend(w.tensor for w in writes)

    # Some tensors live on past their last read (as in a loop).
    for x in tensors:
        if draw(st.integers(0, 3)) == 0:
            x.last_use = num_t - 1 if draw(st.booleans()) else None
    # Capacity from 0.6 to 3 of the largest tensor (tight); a larger read may not fit at all.
    max_z = max((-(-x.size // alignment) * alignment for x in tensors), default=0)
    capacity = int(max_z * draw(st.sampled_from([1.5, 0.6, 1.0, 2.0, 3.0])))
    return build(tensors, instructions, alignment=alignment, capacity=capacity)


def _scale(inst: Instance) -> float:
    """A size for absolute reward tolerances: sum over t of count * its largest latency."""
    total = 0.0
    hw = inst.hardware
    for ins in inst.instructions:
        lat = ins.latency
        if isinstance(lat, RooflineLatency):
            one = lat.fixed_s + max(
                lat.compute_s, sum(inst.buffers[b].size for b in ins.buffers) / hw.slow_bandwidth
            )
        else:
            one = max(abs(v) for v in lat.latency_s)
        total += ins.count * one
    return total


def _compare(game: Game, ref: Reference) -> None:
    opts = ref.options() if not game.complete else None
    if game.complete:
        assert ref.cur == game.num_buffers
        return
    assert game.current_buffer == ref.cur
    for a in range(3):
        assert game.outcome(a) == opts[a], (
            f"buffer {ref.cur} action {a}: game {game.outcome(a)} vs SPEC {opts[a]}"
        )
    assert game.legal_mask().tolist() == [opts[a] is not None for a in range(3)]
    assert game.infeasible == all(opts[a] is None for a in range(3))
    assert game.supply_left().tolist() == ref.W
    assert game.is_backup_point == ref.is_backup_point()


# ========================================================================== properties


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances(), seed=st.integers(0, 2**32 - 1))
def test_drop_backup_games_are_valid(inst: Instance, seed: int) -> None:
    from mallocgame.check import physical_check

    game = Game(inst)
    play(game, random_policy(seed))
    assert game.complete and not game.infeasible
    allocations = game.allocations()
    assert physical_check(inst, allocations) == []
    fast = [a.buffer for a in allocations]
    assert math.isclose(
        mapping_reward(inst, fast), game.return_s, rel_tol=1e-9, abs_tol=1e-12 * _scale(inst)
    )
    actions = game.actions()
    assert len(actions) == inst.num_buffers
    again = replay(inst, actions)
    assert again.complete
    assert again.allocations() == allocations
    assert math.isclose(again.return_s, game.return_s, rel_tol=1e-12, abs_tol=1e-15)

    # The same trajectory against the reference, decision by decision.
    ref = Reference(inst)
    step = Game(inst)
    for a in actions:
        _compare(step, ref)
        got = step.step(a)
        want = ref.step(a)
        assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12 * _scale(inst))
    _compare(step, ref)
    assert math.isclose(step.return_s, ref.ret, rel_tol=1e-9, abs_tol=1e-12 * _scale(inst))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances(), seed=st.integers(0, 2**32 - 1))
def test_raw_random_games_match_the_reference(inst: Instance, seed: int) -> None:
    # Uniform legal play without Drop-backup, to the end (complete or infeasible).
    rng = random.Random(seed)
    game, ref = Game(inst), Reference(inst)
    while True:
        _compare(game, ref)
        if game.done:
            break
        a = rng.choice([a for a in range(3) if game.legal_mask()[a]])
        game.step(a)
        ref.step(a)
    if game.complete:
        from mallocgame.check import physical_check

        assert physical_check(inst, game.allocations()) == []


def test_reference_reproduces_the_conformance_vectors():
    # The oracle above is itself checked against the independent conformance vectors
    # (tests/data/conformance): every legal list, allocation and reward.
    assert CONFORMANCE_NAMES
    for name in CONFORMANCE_NAMES:
        vec = conformance_vector(name)
        inst = conformance_instance(name)
        for traj in vec["trajectories"]:
            ref = Reference(inst)
            for step in traj["steps"]:
                assert step["buffer"] == ref.cur
                opts = ref.options()
                assert [a for a in range(3) if opts[a] is not None] == step["legal"], name
                ref.step(step["action"])
            allocs = []
            for b in sorted(ref.decided):
                action, o, s, e, cs, ce = ref.alloc[b]
                allocs.append(
                    {
                        "buffer": b,
                        "action": "Copy" if action == COPY else "NoCopy",
                        "offset": o,
                        "start": None if s < 0 else s,
                        "end": None if s < 0 else e,
                        "copy": None if cs < 0 else [cs, ce],
                    }
                )
            assert allocs == traj["allocations"], name
            assert math.isclose(ref.ret, traj["reward_s"], rel_tol=1e-9, abs_tol=1e-15)
        prefix = vec.get("infeasible_prefix")
        if prefix:
            ref = Reference(inst)
            for a in prefix["actions"]:
                ref.step(a)
            assert ref.cur == prefix["stuck_at_buffer"]
            assert all(v is None for v in ref.options().values())


def _wide_instance(seed: int) -> Instance:
    """Many allocations alive at once (more than the game's offset-search blocks and its
    small-sort threshold): 48 steps, three long-lived outputs each, inputs read again and again,
    a few in-place groups, alignment 8, a capacity for about 150 live buffers."""
    rng = random.Random(seed)
    num_t = 48
    tensors = [X(rng.randint(1, 64)) for _ in range(12)]
    available = list(range(12))
    instructions = []
    for t in range(num_t):
        alive = [x for x in available if tensors[x].last_use is None or tensors[x].last_use >= t]
        reads = [
            B(x, demand=tensors[x].size / 100.0 * rng.choice([0.0, 0.5, 1.0]))
            for x in rng.sample(alive, min(3, len(alive)))
        ]
        writes = []
        for _ in range(3):
            x = len(tensors)
            tensors.append(X(rng.randint(0, 64), last_use=min(num_t - 1, t + rng.randint(0, 47))))
            writes.append(B(x, demand=tensors[x].size / 100.0 * rng.choice([0.0, 1.0])))
        if reads and rng.random() < 0.2:
            key = f"g{t}"
            reads[0].alias = writes[0].alias = key
        instructions.append(
            I(
                reads=reads,
                writes=writes,
                supply=rng.choice([0.0, 0.3, 1.0]),
                count=rng.randint(1, 3),
                latency=roofline(rng.choice([0.0, 0.5])),
            )
        )
        available.extend(w.tensor for w in writes)
    return build(tensors, instructions, alignment=8, capacity=6000)


def _fast_first(rng: random.Random, legal) -> int:
    """Mostly NoCopy (long-lived outputs), else Copy, rarely Drop."""
    choices = [a for a in range(3) if legal[a]]
    if legal[NOCOPY] and rng.random() < 0.7:
        return NOCOPY
    fast = [a for a in choices if a != DROP]
    return rng.choice(fast) if fast and rng.random() < 0.9 else rng.choice(choices)


def test_many_live_allocations_match_the_reference():
    from mallocgame.check import physical_check

    for seed in range(3):
        inst = _wide_instance(seed)
        rng = random.Random(seed)
        game = Game(inst)
        driver = play(game, lambda g, allowed, rng=rng: _fast_first(rng, allowed))
        assert game.complete and driver.backups > 0
        assert physical_check(inst, game.allocations()) == []
        actions = game.actions()
        # The completed trajectory, step by step, against the reference.
        check, ref = Game(inst), Reference(inst)
        most_live = 0
        for a in actions:
            _compare(check, ref)
            assert math.isclose(check.step(a), ref.step(a), rel_tol=1e-9, abs_tol=1e-12)
            t = inst.buffers[ref.cur - 1].instruction
            live = sum(
                1 for r in ref.alloc.values() if r[0] != DROP and r[2] >= 0 and r[2] <= t <= r[3]
            )
            most_live = max(most_live, live)
        _compare(check, ref)
        # the point of this test: more live ranges than the small sort, more placed
        # allocations than two blocks of the offset search
        assert most_live > 40 and len(game.allocations()) > 130, (
            most_live,
            len(game.allocations()),
        )
        # Undo to several depths and play on differently (without Drop-backup): the game
        # against a reference replayed to the same prefix.
        for k in sorted(rng.sample(range(len(actions)), 4), reverse=True):
            game.undo_to(k)
            ref = Reference(inst)
            for a in actions[:k]:
                ref.step(a)
            while not game.done:
                _compare(game, ref)
                a = _fast_first(rng, game.legal_mask())
                game.step(a)
                ref.step(a)
            _compare(game, ref)
