"""What an operating system does without a planner: ``first-touch`` and ``agnostic``.

The MARL report compares its agent with the placements a Linux machine makes when
DRAM and persistent memory are both main memory (papers/marl-heterogeneous-memory.txt,
sections 2.2 and 6.1). Neither plans ahead; each is one game played with Drop-backup:

``first-touch``
    Linux's default policy: a page goes to the fast memory if there is room when it is
    first touched, and is never moved after. In the game: an activation goes to fast
    memory where it is produced (output NoCopy: its whole live range), a program input
    at its first read (Copy: the game brings an input in just before it is read; then
    NoCopy reads keep it); a tensor first placed in slow memory stays there (Drop): at
    its first touch the first legal action in the order NoCopy, Copy, Drop, and later
    the same order while the tensor has a place in fast memory, Drop first where all its
    touches so far were Drop (the game would let a later read Copy it in; an OS does not
    move it). (A read whose in-place extension no longer fits may be a Copy at the same
    offset, which an OS would not do; Drop-backup drops the group where neither fits.)
``agnostic``
    The OS's memory-agnostic allocation as MARL ran it: "we randomly allocated objects
    over DRAM and PM". Each alias group is drawn once, fast with probability
    ``fast_share``, from the seed; a group drawn fast is placed first-touch (if there
    is room), one drawn slow is dropped. Different seeds are different placements: a
    study reports their mean, and the solver plays exactly one (its budget is not a
    search).

Both are deterministic given the seed (``work_unit = "placements"``: one). Without a
wall-clock budget the game is played to its end by the policy. Under one it still ends
complete, soon after the budget: once the clock is spent, the decisions left are Drop
first (then NoCopy, then Copy), which Drop-backup completes in one pass, as ``greedy``'s
are (on programs of many thousand buffers the game backs up often enough to take
minutes); ``info["first_touch_until"]`` (``agnostic``: ``info["agnostic_until"]``) says at
which buffer the policy changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mallocgame.game.backup import DropBackup
from mallocgame.game.state import COPY, DROP, NOCOPY, Game
from mallocgame.instance import Instance
from mallocgame.options import check_ranges, setting
from mallocgame.solution import Solution
from mallocgame.solvers.base import NoConfig, Run, Solver
from mallocgame.solvers.greedy import UntilExpired

__all__ = [
    "FirstTouchPolicy",
    "FirstTouchSolver",
    "AgnosticSolver",
    "AgnosticConfig",
]

_FIRST_TOUCH_ORDER = (NOCOPY, COPY, DROP)
_SLOW_ORDER = (DROP, NOCOPY, COPY)


def _first_allowed(order: tuple[int, int, int], allowed: np.ndarray) -> int:
    for action in order:
        if allowed[action]:
            return action
    raise ValueError("no allowed action")


class FirstTouchPolicy:
    """First-touch on ``game``'s instance: at a tensor's first buffer in game order the first
    allowed action in the order NoCopy, Copy, Drop; at a later one the same order while the
    tensor has a non-empty allocation, else (every touch so far was Drop) Drop first."""

    def __init__(self, game: Game) -> None:
        tensors = game.tables.buffer_tensor
        self.tensor = tensors.tolist()
        first = np.zeros(len(tensors), dtype=bool)
        first[np.unique(tensors, return_index=True)[1]] = True  # buffer ids are game order
        self.first_touch = first.tolist()

    def order(self, game: Game) -> tuple[int, int, int]:
        b = game.current_buffer
        if not self.first_touch[b] and game.latest_allocation(self.tensor[b]) < 0:
            return _SLOW_ORDER  # first touched in slow memory: it stays there
        return _FIRST_TOUCH_ORDER

    def __call__(self, game: Game, allowed: np.ndarray) -> int:
        return _first_allowed(self.order(game), allowed)


class _GroupCoinPolicy(FirstTouchPolicy):
    """First-touch for the alias groups drawn fast, Drop first for the others."""

    def __init__(self, game: Game, fast: np.ndarray) -> None:
        super().__init__(game)
        self.fast = fast  # bool [groups]

    def __call__(self, game: Game, allowed: np.ndarray) -> int:
        drawn_fast = self.fast[game.group_of(game.current_buffer)]
        return _first_allowed(self.order(game) if drawn_fast else _SLOW_ORDER, allowed)


def _play_once(
    game: Game, run: Run, policy: Callable[[Game, np.ndarray], int], info: dict, cut_key: str
) -> Solution:
    """``game`` (fresh) played by ``policy`` with Drop-backup, as the run's answer; Drop
    first once the run's clock is spent, the buffer where that began as ``info[cut_key]``."""
    driver = DropBackup(game, deterministic=True)
    timed = UntilExpired(policy, run)
    driver.play(timed)
    if timed.cut_at is not None:
        info = {**info, cut_key: timed.cut_at}
    answer = run.game_answer(game, {"placements": 1, "backups": driver.backups}, info=info)
    run.improve(answer)
    return answer


class FirstTouchSolver(Solver, name="first-touch", work_unit="placements"):
    """Fast memory for whatever is touched first while there is room; nothing ever moves."""

    def search(self, instance: Instance, config: NoConfig, run: Run) -> Solution:
        game = Game(instance)
        return _play_once(game, run, FirstTouchPolicy(game), {}, "first_touch_until")


@dataclass(frozen=True)
class AgnosticConfig:
    """The settings of ``agnostic``."""

    fast_share: float = setting(
        0.5, "the probability that an alias group is allocated in fast memory", within="[0, 1]"
    )

    def __post_init__(self) -> None:
        check_ranges(self)


class AgnosticSolver(Solver, name="agnostic", work_unit="placements", config=AgnosticConfig):
    """Each alias group in fast memory with probability ``fast_share`` (seeded), first-touch."""

    def search(self, instance: Instance, config: AgnosticConfig, run: Run) -> Solution:
        game = Game(instance)
        fast = np.random.default_rng(run.seed).random(game.tables.num_groups) < config.fast_share
        info = {"fast_share": config.fast_share, "groups_drawn_fast": int(fast.sum())}
        return _play_once(game, run, _GroupCoinPolicy(game, fast), info, "agnostic_until")
