"""Drop-backup (SPEC section 6) on instances whose greedy play goes infeasible, by hand.

Builder conventions (:mod:`tests.builders`): fast 1000 B/s, slow 100 B/s, copy 100 B/s
(demand = size / 100 s), supply 1.0 s per step, roofline latency with compute 0, so
a buffer of ``n`` bytes saves ``n / 100 - n / 1000`` seconds when fast.
"""

from __future__ import annotations

import numpy as np
import pytest

from mallocgame.errors import IllegalActionError
from mallocgame.game.backup import DropBackup, play
from mallocgame.game.state import COPY, DROP, NOCOPY, Game, replay
from mallocgame.workloads.registry import load_workload
from tests.builders import B, I, X, build

C, N, D = COPY, NOCOPY, DROP


def greedy(game: Game, allowed: np.ndarray) -> int:
    """Prefer Copy, then NoCopy, then Drop."""
    return int(np.flatnonzero(allowed)[0])


def _alias_overflow():
    # capacity 200, T = 4, W = 1 each.
    #   buffer 0: P (100 B, live_out) defined at 0, d = 0.5.
    #   buffer 1: Q (program input, 100 B, d = 0.5) read at 1 in group g,
    #   buffer 2: R (150 B, d = 0.5) written in place at 1 in group g,
    #   buffer 3: S (program input, 50 B, d = 0.5) read at 2,
    #   buffer 4: R read at 3 in group g.
    return build(
        tensors=[X(100, live_out=True), X(100), X(150), X(50)],
        instructions=[
            I(writes=[B(0, demand=0.5)]),
            I(reads=[B(1, alias="g", demand=0.5)], writes=[B(2, alias="g", demand=0.5)]),
            I(reads=[B(3, demand=0.5)]),
            I(reads=[B(2, alias="g")]),
        ],
        capacity=200,
    )


def test_greedy_play_goes_infeasible_without_backup():
    # buffer 0: Copy, copy-out t = 1 takes 0.5 -> [1, 1], memory [0, 1] at 0.
    # buffer 1: Copy, t = 0 takes 0.5 -> memory [0, 1]; P holds [0, 100) -> offset 100,
    #           g = fast(100).
    # buffer 2: g's offset 100 + 150 B > 200 -> Copy and NoCopy illegal; Drop illegal
    #           (g is fast) -> infeasible at buffer 2.
    g = Game(_alias_overflow())
    for expected in ([True, False, True], [True, False, True]):
        assert g.legal_mask().tolist() == expected
        g.step(greedy(g, g.legal_mask()))
    assert g.current_buffer == 2 and g.infeasible


def test_drop_backup_forces_the_stuck_group_and_completes():
    # Backup points of the greedy play: the start (mark 0), after buffer 0 (P copied out:
    # a singleton group, nothing resident) -> mark 1. After buffer 1 g is fast with
    # buffers 2 and 4 undecided: not a backup point. Stuck at buffer 2 (group g, an
    # output, reads nothing): back to mark 1 and force Drop on g only.
    # Replay: buffer 1 Drop, buffer 2 Drop, buffer 3 (S) Copy: t = 1 takes 0.5 (W[1] was
    # left at 0.5 by P's copy-out) -> memory [1, 2]; P holds [0, 100) at step 1 -> 100.
    # Buffer 4 Drop (forced). Return: P 1 - 0.1 = 0.9, S 0.5 - 0.05 = 0.45 -> 1.35.
    inst = _alias_overflow()
    game = Game(inst)
    driver = play(game, greedy)
    assert game.complete and not game.infeasible
    assert driver.backups == 1
    forced = {b for b in range(inst.num_buffers) if driver.forced_drop[game.group_of(b)]}
    assert forced == {1, 2, 4}
    assert game.actions() == [C, D, D, C, D]
    allocs = [(a.buffer, a.action, a.offset, a.start, a.end, a.copy) for a in game.allocations()]
    assert allocs == [(0, "Copy", 0, 0, 1, (1, 1)), (3, "Copy", 100, 1, 2, (1, 1))]
    assert game.return_s == pytest.approx(1.35, rel=1e-12)
    again = replay(inst, game.actions())
    assert again.complete
    assert again.allocations() == game.allocations()
    assert again.return_s == pytest.approx(game.return_s, rel=1e-12)


def _resident_conflict():
    # T = 3, W = 1 each; huge demands where only NoCopy should place a buffer.
    #   buffer 0: X (100 B) defined at 0, read at 2 (Copy-out impossible: d = 1e6).
    #   buffer 1: P (program input, 50 B, d = 0.5) read at 1.
    #   buffer 2: Z (100 B, d = 1e6) defined at 1 in group g (never read).
    #   buffer 3: X read at 2 in group g.
    return build(
        tensors=[X(100), X(50), X(100)],
        instructions=[
            I(writes=[B(0, demand=1e6)]),
            I(reads=[B(1, demand=0.5)], writes=[B(2, alias="g", demand=1e6)]),
            I(reads=[B(0, alias="g")]),
        ],
    )


def test_forced_groups_of_a_fast_resident_read_include_the_producer():
    # Greedy: buffer 0: Copy illegal (walk past T-1) -> NoCopy [0, 2] at 0, X resident
    # (its read pending: not a backup point). Buffer 1: Copy t = 0 -> [0, 1] at 100.
    # Buffer 2: Copy illegal -> NoCopy [1, 1]: [0, 150) taken at step 1 -> 150, g = fast(150).
    # Buffer 3 (X's read, group g): NoCopy at X's offset 0 != 150 illegal, Copy and Drop
    # illegal (X resident) -> stuck. The latest backup point is the start (X became
    # resident at the first step); forced: g and the group of X's defining output (buffer 0).
    # Replay: buffer 0 Drop; buffer 1 Copy at 0 ([0, 1], t = 0); buffer 2 Drop (forced);
    # buffer 3 Drop. Return: P 0.5 - 0.05 = 0.45.
    inst = _resident_conflict()
    g = Game(inst)
    for a in (N, C, N):
        assert g.legal_mask()[a]
        g.step(a)
    assert g.infeasible and g.reads_fast_resident(3) == 0

    game = Game(inst)
    driver = play(game, greedy)
    assert game.complete
    assert driver.backups == 1
    forced = {b for b in range(inst.num_buffers) if driver.forced_drop[game.group_of(b)]}
    assert forced == {0, 2, 3}
    assert game.actions() == [D, C, D, D]
    allocs = [(a.buffer, a.action, a.offset, a.start, a.end, a.copy) for a in game.allocations()]
    assert allocs == [(1, "Copy", 0, 0, 1, (0, 0))]
    assert game.return_s == pytest.approx(0.45, rel=1e-12)
    assert replay(inst, game.actions()).allocations() == game.allocations()


def test_backup_returns_to_the_latest_backup_point():
    # Alias-overflow program: after buffer 0 (P copied out) the state is a backup point
    # (mark 1). Copying buffer 1 makes buffer 2 stuck, so the driver backs up at once --
    # to mark 1, keeping P's Copy, not to the start -- and allows only Drop for group g.
    inst = _alias_overflow()
    game = Game(inst)
    driver = DropBackup(game)
    driver.step(C)
    assert driver.backup_mark == 1
    driver.step(C)  # g fast: not a backup point; buffer 2 is stuck -> back-up at once
    assert driver.backups == 1
    assert game.current_buffer == 1 and game.actions() == [C]
    assert driver.allowed().tolist() == [False, False, True]
    with pytest.raises(IllegalActionError, match="Drop-backup allows only Drop here"):
        driver.step(C)  # legal in the game, but Drop-backup forbids it
    for not_an_action in (5, -1, 1.0, True, None):
        with pytest.raises(IllegalActionError, match="not an action|is illegal"):
            driver.step(not_an_action)  # type: ignore[arg-type]


def test_drop_backup_must_start_at_a_backup_point():
    g = Game(_resident_conflict())
    g.step(N)
    with pytest.raises(ValueError):
        DropBackup(g)


def test_advance_returns_the_reward_and_what_allowed_gives_after_the_move():
    backups = 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        for inst in (_alias_overflow(), _resident_conflict()):
            game = Game(inst)
            driver = DropBackup(game)
            while not game.complete:
                action = int(rng.choice(np.flatnonzero(driver.allowed())))
                before, backed_up = game.return_s, driver.backups
                reward, allowed = driver.advance(action)
                assert np.array_equal(allowed, driver.allowed())
                if driver.backups == backed_up:
                    assert game.return_s == pytest.approx(before + reward)
            backups += driver.backups
    assert backups > 0  # some of the moves backed up


@pytest.mark.parametrize("seed", range(25))
def test_random_play_with_backup_always_completes(seed):
    rng = np.random.default_rng(seed)

    def policy(game: Game, allowed: np.ndarray) -> int:
        return int(rng.choice(np.flatnonzero(allowed)))

    for inst in (_alias_overflow(), _resident_conflict()):
        game = Game(inst)
        play(game, policy)
        assert game.complete
        again = replay(inst, game.actions())
        assert again.allocations() == game.allocations()
        assert again.return_s == game.return_s


def test_forced_read_of_a_resident_tensor_forces_its_producer_too():
    # X (100 B, d = 1e6: never copied out) defined at 0 in its own group; instruction 1
    # reads X in group g and writes Y in place (group g), Y read at 2 (group g).
    # Greedy: buffer 0 NoCopy ([0, 1] at 0, X resident: no backup point). Buffer 1 (X's read)
    # NoCopy: resident, empty interval at 0, g = fast(0). Buffer 2 (Y) must sit at 0 over
    # [1, 2], on top of X's [0, 1] (another group): stuck. Back to the start, g forced.
    # Greedy again puts X in fast memory (NoCopy); buffer 1 must now Drop -- illegal, X is
    # resident -- while NoCopy is legal but forbidden. SPEC section 6 does not say what
    # happens when a forced Drop is illegal; the only way to complete is to force X's
    # producer as well (the rule for a stuck read of a fast-resident tensor), which
    # leaves every buffer dropped: actions [Drop, Drop, Drop, Drop].
    inst = build(
        tensors=[X(100), X(100)],
        instructions=[
            I(writes=[B(0, demand=1e6)]),
            I(reads=[B(0, alias="g")], writes=[B(1, alias="g")]),
            I(reads=[B(1, alias="g")]),
        ],
    )
    game = Game(inst)
    driver = play(game, greedy)
    assert game.complete
    assert game.actions() == [D, D, D, D]
    assert driver.backups >= 2
    assert all(driver.forced_drop[game.group_of(b)] for b in range(4))


@pytest.mark.parametrize(
    "name", ["xla-v1/alexnet_train_b32", "xla-v1/lstm_infer", "synthetic-v1/1k"]
)
def test_deterministic_shortcut_gives_the_same_trajectory(name: str) -> None:
    inst = load_workload(name)
    plain, short = Game(inst), Game(inst)
    a = DropBackup(plain)
    a.play(greedy)
    b = DropBackup(short, deterministic=True)
    b.play(greedy)
    assert plain.actions() == short.actions() and a.backups == b.backups
    assert plain.return_s == short.return_s


def _play_forced(driver: DropBackup, policy) -> list[int]:
    """Complete the driver's game, the moves without a choice by ``play_forced`` and
    ``step_to_choice``; return
    the number of allowed actions at each decision the policy was asked."""
    game, choices = driver.game, []
    allowed = driver.play_forced()
    while not game.complete:
        choices.append(int(allowed.sum()))
        allowed = driver.step_to_choice(policy(game, allowed))
    return choices


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("deterministic", [False, True])
def test_the_forced_loop_plays_what_one_step_at_a_time_plays(seed, deterministic) -> None:
    # random choices, and the same choice at the same decision in both games
    def policy_of(seed):
        rng = np.random.default_rng(seed)
        return lambda game, allowed: int(rng.choice(np.flatnonzero(allowed)))

    backups = 0
    for inst in (_alias_overflow(), _resident_conflict(), load_workload("xla-v1/lstm_lm_train")):
        one, fast = Game(inst), Game(inst)
        step_by_step = DropBackup(one, deterministic=deterministic)
        forced = DropBackup(fast, deterministic=deterministic)
        policy = policy_of(seed)

        def asked_only_at_a_choice(game, allowed, policy=policy):
            return int(np.flatnonzero(allowed)[0]) if allowed.sum() == 1 else policy(game, allowed)

        step_by_step.play(asked_only_at_a_choice)
        choices = _play_forced(forced, policy_of(seed))
        assert all(n >= 2 for n in choices)  # the policy is asked only where it chooses
        assert fast.actions() == one.actions() and fast.return_s == one.return_s
        assert forced.backups == step_by_step.backups
        assert forced.backup_mark == step_by_step.backup_mark
        backups += forced.backups
    assert backups > 0


def test_the_forced_loop_stops_at_a_choice_and_reports_the_latest_backup_point() -> None:
    inst = load_workload("xla-v1/lstm_infer")
    game, one = Game(inst), Game(inst)
    none_forced = np.zeros(game.num_buffers + 1, dtype=bool)
    played, mark = game.step_forced(none_forced)
    expected_mark = -1
    for _ in range(played):  # the same decisions one by one: each had one legal action
        (action,) = np.flatnonzero(one.legal_mask())
        one.step(int(action))
        if one.is_backup_point:
            expected_mark = one.mark()
    assert game.actions() == one.actions() and mark == expected_mark
    assert game.complete or game.legal_mask().sum() != 1  # stopped where there is a choice
    with pytest.raises(ValueError, match="drop_only must be bool"):
        game.step_forced(none_forced[:-1])
    with pytest.raises(ValueError, match="drop_only must be bool"):
        game.step_forced(none_forced.astype(np.int8))


def test_on_back_up_sees_each_stuck_state_before_the_undo():
    # The greedy play of _alias_overflow is stuck once, at buffer 2 (group g fast at 100).
    seen = []

    def look(game: Game) -> None:
        seen.append(
            (game.current_buffer, game.legal_mask().tolist(), game.group_offset(game.group_of(2)))
        )

    game = Game(_alias_overflow())
    driver = DropBackup(game, on_back_up=look)
    driver.play(greedy)
    assert driver.backups == 1 and game.complete
    assert seen == [(2, [False, False, False], 100)]


def test_a_driver_goes_on_from_a_given_backup_mark():
    # _alias_overflow: after buffer 1 (g fast) the game is not at a backup point; given the
    # latest one (mark 1), a new driver backs up there exactly as the first one would.
    inst = _alias_overflow()
    game = Game(inst)
    game.step(C)
    game.step(C)
    with pytest.raises(ValueError, match="backup point"):
        DropBackup(game)
    with pytest.raises(ValueError, match="not among the 2 decisions"):
        DropBackup(game, backup_mark=3)
    with pytest.raises(ValueError, match="current state, which is not a backup point"):
        DropBackup(game, backup_mark=2)
    for mark in (0.5, True, "1"):  # passed, then the first back-up raised UndoError/TypeError
        with pytest.raises(ValueError, match="not among the 2 decisions"):
            DropBackup(game, backup_mark=mark)
    driver = DropBackup(game, backup_mark=1)
    driver.play(greedy)
    assert driver.backups == 1 and game.actions() == [C, D, D, C, D]


def test_a_driver_given_a_stuck_state_backs_up_at_once():
    # _alias_overflow after Copy, Copy is stuck at buffer 2; a driver that goes on from
    # backup mark 1 backs up in its constructor, telling on_back_up, and then completes
    # as the first driver would.
    game = Game(_alias_overflow())
    game.step(C)
    game.step(C)
    assert not game.legal_mask().any()
    seen = []
    driver = DropBackup(game, backup_mark=1, on_back_up=lambda g: seen.append(g.current_buffer))
    assert driver.backups == 1 and seen == [2] and game.mark() == 1
    driver.play(greedy)
    assert game.actions() == [C, D, D, C, D]
