"""Playing a whole ``egrl`` proposal: the nearest-allowed rule, alias groups, Drop-backup."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mallocgame.check import check_solution
from mallocgame.game.state import replay
from mallocgame.game.tables import build_tables
from mallocgame.simulate import speedup
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.solvers.base import solution_from_game
from mallocgame.solvers.egrl.proposals import NEAREST, FitnessFn, ProposalPlayer, nearest_allowed
from tests.solvers.egrl.programs import alias_program

COPY, NOCOPY, DROP = 0, 1, 2


def test_nearest_allowed_order() -> None:
    assert NEAREST == ((COPY, NOCOPY, DROP), (NOCOPY, COPY, DROP), (DROP, NOCOPY, COPY))
    for mask in itertools.product([False, True], repeat=3):
        allowed = np.array(mask)
        for proposed in range(3):
            if not allowed.any():
                with pytest.raises(ValueError):
                    nearest_allowed(proposed, allowed)
                continue
            action = nearest_allowed(proposed, allowed)
            assert allowed[action]
            assert action == proposed or not allowed[proposed]
            preferred = NEAREST[proposed][: NEAREST[proposed].index(action)]
            assert not any(allowed[a] for a in preferred)


def test_all_copy_is_the_greedy_game(lstm) -> None:
    player = ProposalPlayer(lstm, build_tables(lstm))
    played = player.play(np.zeros(lstm.num_buffers, dtype=np.int8))
    greedy = get_solver("greedy").solve(lstm, SolveRequest())
    assert tuple(played.actions.tolist()) == greedy.actions
    assert played.return_s == pytest.approx(greedy.reward_s, rel=1e-12)
    assert played.backups == greedy.work["backups"]
    assert played.overridden == int(np.count_nonzero(played.actions != COPY))


def test_once_stopped_the_rest_is_played_drop_first(lstm) -> None:
    player = ProposalPlayer(lstm, build_tables(lstm))
    copy = np.zeros(lstm.num_buffers, dtype=np.int8)
    never = player.play(copy, stop=lambda: False)
    assert never.cut_at is None and (never.actions == player.play(copy).actions).all()
    asked: list[int] = []
    stopped = player.play(copy, stop=lambda: asked.append(1) or len(asked) > 5)
    assert stopped.cut_at == 5 and (stopped.actions[:5] == never.actions[:5]).all()
    at_once = player.play(copy, stop=lambda: True)
    drop_first = get_solver("greedy").solve(lstm, SolveRequest(seconds=1e-9))
    assert at_once.cut_at == 0 and tuple(at_once.actions.tolist()) == drop_first.actions


def test_all_drop_places_nothing(lstm) -> None:
    player = ProposalPlayer(lstm, build_tables(lstm))
    played = player.play(np.full(lstm.num_buffers, DROP, dtype=np.int8))
    assert (played.actions == DROP).all() and played.return_s == 0.0 and played.overridden == 0


def test_alias_group_members_follow_the_first_decided() -> None:
    inst = alias_program()  # buffers 0 and 3 form one alias group
    player = ProposalPlayer(inst, build_tables(inst))
    slow = player.play(np.array([DROP, DROP, DROP, COPY, DROP], dtype=np.int8))
    assert slow.actions[3] == DROP and slow.overridden == 1
    fast = player.play(np.array([COPY, DROP, DROP, DROP, DROP], dtype=np.int8))
    assert fast.actions[0] == COPY and fast.actions[3] == NOCOPY  # Drop is illegal in a fast group
    assert fast.overridden == 1 and fast.return_s > 0


def test_random_proposals_give_valid_games(lstm) -> None:
    tables = build_tables(lstm)
    player = ProposalPlayer(lstm, tables)
    rng = np.random.default_rng(0)
    backups = 0
    for _ in range(5):
        played = player.play(rng.integers(0, 3, size=lstm.num_buffers))
        backups += played.backups
        game = replay(lstm, played.actions.tolist(), tables)
        assert game.complete and game.return_s == pytest.approx(played.return_s, rel=1e-12)
        solution = solution_from_game(lstm, player.game, solver="egrl", seed=0, wall_s=0.0)
        assert check_solution(lstm, solution).ok
    assert backups > 0  # random proposals do run into dead ends here


def test_a_proposal_of_the_wrong_length_is_refused(lstm) -> None:
    with pytest.raises(ValueError, match="names 3 actions"):
        ProposalPlayer(lstm, build_tables(lstm)).play(np.zeros(3, dtype=np.int8))


def test_fitness_reward_and_speedup(lstm) -> None:
    player = ProposalPlayer(lstm, build_tables(lstm))
    played = player.play(np.zeros(lstm.num_buffers, dtype=np.int8))
    assert FitnessFn(lstm, "reward")(played, player.game) == played.normalized
    fast = FitnessFn(lstm, "speedup")(played, player.game)
    assert fast == speedup(lstm, player.game.allocations()) and fast > 1.0
    with pytest.raises(ValueError):
        FitnessFn(lstm, "latency")
