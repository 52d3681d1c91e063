"""The exhaustive search (mallocgame.game.exhaustive): games ranked by their reward, not by
the running sum of their step rewards, and near ties by their exact reward; its move
budget checked."""

from __future__ import annotations

import pytest

from mallocgame.errors import SolverError
from mallocgame.game import Game, replay
from mallocgame.game.exhaustive import exhaustive_search
from mallocgame.latency import exact_mapping_reward
from tests.builders import I, X, build, cancelling_instance, table


def _fast(actions: list[int]) -> set[int]:
    return {b for b, a in enumerate(actions) if a in (0, 1)}


def test_games_are_ranked_by_their_reward_not_the_cancelling_running_sum() -> None:
    # count * 953923248486.9957 is about 1.2e21: the running sum of [0, 0, 2, 2] cancels
    # to 643039232.0, below [2, 2, 0, 2]'s 643093598.5, while its reward is 643286584.5.
    inst = build(
        [X(64), X(64), X(64), X(128)],
        [
            I(supply=1.0),
            I(supply=1.0),
            I(
                reads=[0, 1, 3],
                writes=[2],
                count=1286573169,
                supply=1.0,
                latency=table([0, 1, 2], [1.0, 953923248486.9957, 1.0, 0.5, 0.50015, 1, 1, 1]),
            ),
        ],
        capacity=128,
    )
    best, actions, _, bound = exhaustive_search(Game(inst))
    assert bound == best  # the optimum, certified
    assert replay(inst, [0, 0, 2, 2]).return_s == 643039232.0  # what the old ranking read
    assert float(exact_mapping_reward(inst, _fast([0, 0, 2, 2]))) == 643286584.5
    assert float(exact_mapping_reward(inst, _fast(actions))) == best == 643286584.5


def test_games_scored_near_the_best_are_ranked_by_their_exact_reward() -> None:
    # in instruction order the float64 score of [0, 0, 2, 0] is 0.000244140625, above the
    # optimum's 2.3e-4, where its reward is 1.9e-4 (cancelling_instance)
    inst = cancelling_instance()
    best, actions, _, bound = exhaustive_search(Game(inst))
    assert bound == best  # the optimum, certified
    assert actions == [0, 2, 0, 2]
    assert best == float(exact_mapping_reward(inst, _fast(actions))) == 2.3e-4


def test_the_best_reward_is_the_exact_one_rounded_once() -> None:
    from tests.builders import conformance_instance

    inst = conformance_instance("tiny_chain")  # its float64 score is 41.040000000000006
    best, actions, _, bound = exhaustive_search(Game(inst))
    assert bound == best  # the optimum, certified
    assert best == float(exact_mapping_reward(inst, _fast(actions))) == 41.04


@pytest.mark.parametrize("max_nodes", [0, -1, 2.5, None, True, "10"])
def test_a_move_budget_that_is_no_whole_number_is_refused(small, max_nodes) -> None:
    with pytest.raises(SolverError, match="max_nodes must be a whole number of at least 1"):
        exhaustive_search(Game(small), max_nodes=max_nodes)


def test_a_move_budget_past_int64_is_no_limit() -> None:
    """2**64 reached the compiled search as a Python object: numba's TypingError."""
    from tests.builders import conformance_instance

    inst = conformance_instance("tiny_alias")
    assert exhaustive_search(Game(inst), max_nodes=2**64) == exhaustive_search(Game(inst))


def test_many_games_of_one_score_keep_the_search_fast_and_the_bound_honest() -> None:
    """Placements that change no latency (compute-bound steps) tie every game: keeping each
    of them to rank by its exact reward made the search quadratic (5x slower at 17 buffers,
    growing with the games). Past KEPT_GAMES near the best, the first game of the best
    score is the answer and the bound is that score plus its rounding margin."""
    from mallocgame.game.exhaustive import KEPT_GAMES, score_margin
    from tests.builders import roofline

    n = 8
    steps = [I(writes=[0], latency=roofline(compute_s=1000.0))]
    steps += [I(reads=[t - 1], writes=[t], latency=roofline(compute_s=1000.0)) for t in range(1, n)]
    inst = build([100] * n, steps, capacity=10**6)
    reward, actions, nodes, bound = exhaustive_search(Game(inst))
    assert nodes > KEPT_GAMES and reward == 0.0
    assert replay(inst, actions).complete
    assert 0.0 <= bound <= score_margin(inst)


def test_games_near_a_lower_best_found_earlier_do_not_end_the_ranking() -> None:
    """Over KEPT_GAMES games near an early, lower best (a subtree where a costly fast
    buffer makes seven others tie) switched the exact ranking off for good, so the
    cancelling part's float order chose the answer ([0, 0, 2, ...], 12.70329 s) although
    only 192 games lie near the final best; the ranking now stands wherever the games left
    out for want of room are below the final best's window."""
    from tests.builders import B

    ties, tiny = 7, 5
    coupled = [
        101.0 if idx & 1 else 100.0 - sum(0.1 * 2**i for i in range(ties) if idx >> (i + 1) & 1)
        for idx in range(2 ** (ties + 1))
    ]
    tensors = [X(1), X(1), X(2)] + [X(0)] * (ties + 1)
    steps = [
        I(supply=1.0),
        I(reads=[0], latency=table([0], [1.9e-4, 0.0])),
        I(reads=[B(1, alias="g")], latency=table([0], [1e12, 0.0])),
        I(reads=[2], latency=table([0], [0.4e-4, 0.0])),
        I(reads=[B(1, alias="g")], latency=table([0], [0.0, 1e12])),
        I(reads=list(range(3, 3 + ties + 1)), latency=table(list(range(ties + 1)), coupled)),
    ]
    for i in range(tiny):
        tensors.append(X(0))
        steps.append(I(reads=[len(tensors) - 1], latency=table([0], [1e-4 * 2**i, 0.0])))
    inst = build(tensors, steps, capacity=2)
    best, actions, _, bound = exhaustive_search(Game(inst))
    assert actions[:4] == [0, 2, 0, 2]
    assert best == bound == float(exact_mapping_reward(inst, _fast(actions)))
