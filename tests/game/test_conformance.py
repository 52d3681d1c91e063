"""The SPEC's conformance vectors (tests/data/conformance, from an independent
implementation): every legal set, allocation, reward and infeasible prefix reproduced,
and every known optimum matched by the exhaustive search."""

from __future__ import annotations

import pytest

from mallocgame.game import Game, replay
from mallocgame.game.exhaustive import exhaustive_search
from tests.builders import CONFORMANCE_NAMES, conformance_instance, conformance_vector

REL = 1e-12


def test_vectors_are_present() -> None:
    assert len(CONFORMANCE_NAMES) == 16


@pytest.mark.parametrize("name", CONFORMANCE_NAMES)
def test_trajectories_reproduced(name: str) -> None:
    doc, inst = conformance_vector(name), conformance_instance(name)
    for trajectory in doc["trajectories"]:
        game = Game(inst)
        for step in trajectory["steps"]:
            assert game.current_buffer == step["buffer"]
            legal = [a for a in range(3) if game.legal_mask()[a]]
            assert legal == step["legal"], (trajectory["kind"], step["buffer"])
            game.step(step["action"])
        assert game.complete
        assert game.actions() == trajectory["actions"]
        assert [a.to_dict() for a in game.allocations()] == trajectory["allocations"]
        assert game.return_s == pytest.approx(trajectory["reward_s"], rel=REL, abs=0)
        assert game.normalized_return == pytest.approx(
            trajectory["normalized_reward"], rel=REL, abs=1e-15
        )


@pytest.mark.parametrize("name", CONFORMANCE_NAMES)
def test_infeasible_prefix_sticks(name: str) -> None:
    doc, inst = conformance_vector(name), conformance_instance(name)
    prefix = doc.get("infeasible_prefix")
    if not prefix:
        pytest.skip("this vector has no infeasible prefix")
    game = replay(inst, prefix["actions"])
    assert game.infeasible
    assert game.current_buffer == prefix["stuck_at_buffer"]
    assert not game.legal_mask().any()


@pytest.mark.parametrize("name", CONFORMANCE_NAMES)
def test_exhaustive_search_matches_optimum(name: str) -> None:
    doc, inst = conformance_vector(name), conformance_instance(name)
    if doc["optimal_reward_s"] is None:
        pytest.skip("the reference did not search this vector exhaustively")
    best, actions, _, bound = exhaustive_search(Game(inst))
    assert bound == best
    assert best == pytest.approx(doc["optimal_reward_s"], rel=REL, abs=0)
    # the returned trajectory is a complete legal game with that return
    assert replay(inst, actions).return_s == pytest.approx(best, rel=REL, abs=0)
    optimal = [t for t in doc["trajectories"] if t["kind"] == "optimal"]
    assert optimal and all(t["reward_s"] <= best * (1 + REL) for t in doc["trajectories"])
