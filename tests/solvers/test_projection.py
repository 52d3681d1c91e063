"""Projecting mappings onto game trajectories (demonstrations for game-playing agents)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from mallocgame.check import check_solution
from mallocgame.game.state import Game, replay
from mallocgame.instance import instance_from_dict
from mallocgame.latency import mapping_reward
from mallocgame.solution import Allocation, Solution
from mallocgame.solvers.base import SolveRequest
from mallocgame.solvers.heuristic import HeuristicSolver
from mallocgame.solvers.projection import DEFAULT_REPAIRS, blockage, project
from mallocgame.solvers.random import RandomSolver
from mallocgame.workloads.registry import load_workload, workload_names
from mallocgame.workloads.synthetic import generate
from tests.builders import LARGE_LEFT_OUT, B, I, X, build, heuristic_answer, suite_wide

CONFORMANCE = Path(__file__).parents[1] / "data" / "conformance"
KEPT_TOL = 1e-9


def _conformance(name: str):
    return instance_from_dict(json.loads((CONFORMANCE / f"{name}.json").read_text())["instance"])


@cache
def _projected(name: str) -> tuple[Solution, float]:
    """The projection of the heuristic's mapping of bundled program ``name``, computed once
    per process (the tests that share it run in one: tests/conftest.py): the whole repair budget,
    except a few replays on programs of 5,000 buffers or more (the whole budget costs up
    to about 50 s on the largest)."""
    inst, mapping = heuristic_answer(name)
    return project(inst, mapping, repairs=DEFAULT_REPAIRS if inst.num_buffers < 5_000 else 5)


def _assert_trajectory(inst, solution) -> None:
    report = check_solution(inst, solution)
    assert report.ok, report.summary()
    assert solution.actions is not None and len(solution.actions) == inst.num_buffers


PROJECTED = [
    n
    for n in suite_wide(workload_names())
    if not n.endswith("/16k") and n not in LARGE_LEFT_OUT  # synthetic-v1/16k, -v2/16k
]
"""The bundled programs whose heuristic mapping is projected: all those of under 5,000
buffers (the whole repair budget), four larger ones (a few replays each)."""


def test_the_projected_programs_keep_every_size() -> None:
    from mallocgame.workloads.suite import suite_program

    assert all(suite_program(n).num_buffers >= 5_000 for n in LARGE_LEFT_OUT)
    large = [n for n in PROJECTED if n.split("/")[0] in ("xla-v1", "xla-v2")]
    large = [n for n in large if suite_program(n).num_buffers >= 5_000]
    assert {n.split("/")[0] for n in large} == {"xla-v1", "xla-v2"} and len(large) >= 4


@pytest.mark.parametrize("name", PROJECTED)
def test_heuristic_mappings_project_to_legal_trajectories(name: str) -> None:
    inst, mapping = heuristic_answer(name)
    trajectory, kept = _projected(name)
    _assert_trajectory(inst, trajectory)
    assert trajectory.solver == "heuristic" and trajectory.seed == mapping.seed
    assert 0.0 <= kept <= 1.0 + KEPT_TOL
    assert kept == pytest.approx(trajectory.reward_s / mapping.reward_s, rel=1e-12)
    assert trajectory.info["kept_fraction"] == kept
    assert trajectory.info["projected_from"] == mapping.reward_s
    assert (
        kept >= trajectory.info["kept_before_repair"]
    )  # the repair keeps only what raises the return
    # The game's first-fit offsets lose some placements, most of the reward stays after
    # the repair (xla-v2/mixer_b16_infer_b64 keeps least, 0.82; before the repair
    # xla-v1/inplace_update_loop kept 0.385, its loop-carried groups lost to Drop-backup).
    assert kept >= 0.8
    if name.startswith("synthetic-v1/") and name != "synthetic-v1/small":
        assert kept >= 0.95
    # Every fast buffer of the trajectory was fast in the mapping.
    assert {a.buffer for a in trajectory.allocations} <= {a.buffer for a in mapping.allocations}


def _round_trip(inst, solution) -> None:
    back, kept = project(inst, solution.allocations, solver="again")
    assert back.actions == solution.actions
    assert back.allocations == solution.allocations
    assert back.reward_s == solution.reward_s
    assert kept == 1.0  # exactly: both rewards exact, not the game's running sum
    assert back.solver == "again" and back.info["fallbacks"] == 0 and back.info["backups"] == 0


@pytest.mark.parametrize("seed", range(4))
def test_a_trajectory_projects_onto_itself(seed: int) -> None:
    for inst in (
        generate(250, seed, capacity_fraction=0.1),
        _conformance("random104"),
        load_workload("xla-v1/lstm_infer"),
    ):
        solution = RandomSolver().solve(inst, SolveRequest(seed=seed, work=2))
        _round_trip(inst, solution)


def test_projected_trajectory_is_a_fixed_point() -> None:
    inst = load_workload("xla-v1/donated_sgd_step")
    trajectory, _ = project(inst, HeuristicSolver().solve(inst))
    _round_trip(inst, trajectory)


def test_empty_mapping_projects_to_all_drop() -> None:
    inst = generate(80, 1)
    trajectory, kept = project(inst, [])
    assert trajectory.actions == (2,) * inst.num_buffers and trajectory.reward_s == 0.0
    assert kept == 1.0 and trajectory.solver == "projection"


def test_fallback_to_the_other_fast_action() -> None:
    # Input P read at 1 and 3. The (invalid) mapping asks NoCopy for the read at 1,
    # which has nothing to extend: the projection copies it in instead, then keeps
    # it for the read at 3 as asked.
    inst = build(tensors=[X(100)], instructions=[I(), I(reads=[0]), I(), I(reads=[0])])
    mapping = [Allocation(0, "NoCopy", 0, 1, 1), Allocation(1, "NoCopy", 0, 2, 3)]
    trajectory, kept = project(inst, mapping)
    _assert_trajectory(inst, trajectory)
    assert trajectory.actions == (0, 1)
    assert trajectory.info["fallbacks"] == 1
    assert kept == pytest.approx(1.0)
    assert replay(inst, list(trajectory.actions)).return_s == mapping_reward(inst, [0, 1])


def test_unknown_buffer_is_rejected() -> None:
    inst = generate(20, 0)
    with pytest.raises(ValueError, match="unknown buffer"):
        project(inst, [Allocation(10_000, "Copy", 0, 0, 0)])


def _blocked_extension():
    # P (input, 50 B, d = 0.5) read at 1 and 5; R (input, 30 B, d = 0.3) read at 3;
    # capacity 60, no supply at steps 3 and 4. The mapping: Copy P at 1, Copy R, NoCopy P at 5.
    # Game: P@1 Copy [0, 1] at 0; R Copy [2, 3] at 0 (P's range is free again); P@5 NoCopy
    # would extend [2, 5] at 0 over R; its Copy walks 4, 3 (no supply) and 2 -> [2, 5],
    # where only offset 30 is free of R and 30 + 50 > 60: Drop. R is in P's way.
    inst = build(
        tensors=[X(50), X(30)],
        instructions=[
            I(),
            I(reads=[0]),
            I(),
            I(reads=[1], supply=0.0),
            I(supply=0.0),
            I(reads=[0]),
        ],
        capacity=60,
    )
    mapping = [
        Allocation(0, "Copy", 0, 0, 1, (0, 0)),
        Allocation(1, "Copy", 0, 2, 3, (2, 2)),
        Allocation(2, "NoCopy", 0, 2, 5),
    ]
    return inst, mapping


def test_repair_drops_what_blocks_a_more_valuable_decision() -> None:
    # Saved per fast read: P 0.5 - 0.05 = 0.45 s, R 0.3 - 0.03 = 0.27 s; the mapping 1.17 s.
    inst, mapping = _blocked_extension()
    plain, kept_plain = project(inst, mapping, repairs=0)
    assert plain.actions == (0, 0, 2) and kept_plain == pytest.approx(0.72 / 1.17)
    assert plain.info["repair_replays"] == 0 and plain.info["kept_before_repair"] == kept_plain
    repaired, kept = project(inst, mapping)
    _assert_trajectory(inst, repaired)
    assert repaired.actions == (0, 2, 1) and kept == pytest.approx(0.90 / 1.17)
    assert repaired.info["kept_before_repair"] == pytest.approx(kept_plain)
    assert repaired.info["repairs_kept"] == 1 and repaired.info["repair_replays"] >= 1
    assert repaired.info["repair_dropped"] == 1  # R
    assert repaired.info["fallbacks"] == 1 and plain.info["fallbacks"] == 1  # against the mapping


def test_repair_budget_and_its_bounds() -> None:
    inst, mapping = _blocked_extension()
    capped, _ = project(inst, mapping, repairs=1)
    assert capped.actions == (0, 2, 1) and capped.info["repair_replays"] == 1
    with pytest.raises(ValueError, match="repairs must be at least 0"):
        project(inst, mapping, repairs=-1)


def test_blockage_names_the_groups_in_the_way() -> None:
    inst, _mapping = _blocked_extension()
    game = Game(inst)
    game.step(0)
    game.step(0)
    value = np.ones(game.tables.num_groups)
    found = blockage(game, 1, value, 0.45)
    assert (found.buffer, found.want, found.cause, found.gain_s) == (2, 1, "address", 0.45)
    assert found.groups == (game.group_of(1),)


def test_blockage_of_a_copy_walk_names_supply_and_pairs() -> None:
    # Q (input, 100 B) read at 2 first; then P (input, 50 B, d = 0.5) at 2.
    # Pairs: Q's d = 1.5 takes steps 1 and 0 (pair (0, 1) used); P's walk finds step 1 empty
    # and may not add step 0.
    inst = build(tensors=[X(100), X(50)], instructions=[I(), I(), I(reads=[B(0, demand=1.5), 1])])
    game = Game(inst)
    game.step(0)
    assert not game.legal_mask()[0]
    found = blockage(game, 0, np.ones(game.tables.num_groups), 0.45)
    assert found.cause == "pairs" and found.groups == (game.group_of(0),)
    # Supply: Q's d = 1.0 takes all of step 1, step 0 has 0.2 left for P's 0.5.
    inst = build(
        tensors=[X(100), X(50)], instructions=[I(supply=0.2), I(), I(reads=[B(0, demand=1.0), 1])]
    )
    game = Game(inst)
    game.step(0)
    assert not game.legal_mask()[0]
    found = blockage(game, 0, np.ones(game.tables.num_groups), 0.45)
    assert found.cause == "supply" and found.groups == (game.group_of(0),)


@pytest.mark.parametrize(
    "name", ["xla-v2/tinyllama_generate_b8", "xla-v1/resnet_infer", "xla-v1/inplace_update_loop"]
)
def test_repair_raises_what_the_plain_projection_keeps(name: str) -> None:
    # Among the repair's largest gains on the bundled programs (docs/results.md): 0.55 -> 0.85,
    # 0.75 -> 0.94, 0.39 -> 0.99 of the heuristic's reward.
    inst, mapping = heuristic_answer(name)
    assert inst.num_buffers < 5_000  # _projected: the whole repair budget, project's default
    _plain, kept_plain = project(inst, mapping, repairs=0)
    repaired, kept = _projected(name)
    _assert_trajectory(inst, repaired)
    assert kept >= kept_plain + 0.1
    assert {a.buffer for a in repaired.allocations} <= {a.buffer for a in mapping.allocations}
    again, _ = project(inst, mapping)
    assert again.actions == repaired.actions  # deterministic: a second projection


@pytest.mark.parametrize("name", ["xla-v1/gnn_infer", "xla-v1/nmt_seq2seq_infer"])
def test_a_resumed_replay_equals_a_replay_from_the_start(name: str) -> None:
    # The repair replays from the first changed decision, with Drop-backup's latest backup
    # point there. Trials: one group dropped, or everything from a buffer on wanted as a
    # Copy (these back up, so the backup mark a resumed driver starts with is used).
    from mallocgame.game.tables import B_GROUP
    from mallocgame.solvers.projection import _group_values, _play, wanted_actions

    inst = load_workload(name)
    wanted = wanted_actions(inst, HeuristicSolver().solve(inst).allocations)
    game = Game(inst)
    value = _group_values(game.tables, wanted, np.ones(inst.num_buffers))
    before = _play(inst, game.tables, wanted, value)
    assert before.backups == 0 and before.backup_points is not None
    rng = np.random.default_rng(0)
    group = game.tables.buf_int[:, B_GROUP]
    trials = []
    for b in rng.choice(np.flatnonzero(wanted != 2), size=4, replace=False):
        trials.append(np.where(group == group[b], 2, wanted))
    for first in rng.integers(inst.num_buffers, size=8):
        trials.append(np.where(np.arange(inst.num_buffers) >= first, 0, wanted))
    backed_up = 0
    for trial in trials:
        resumed = _play(inst, game.tables, trial, value, resume=before)
        fresh = _play(inst, game.tables, trial, value)
        assert resumed.actions.tolist() == fresh.actions.tolist()
        assert resumed.return_s == fresh.return_s and resumed.backups == fresh.backups
        backed_up += fresh.backups > 0
    assert backed_up >= 2


def test_a_candidate_follows_a_loop_carried_group_further_on(monkeypatch) -> None:
    # xla-v1/inplace_update_loop: dropping what blocks a loop-carried group moves its back-up
    # to a later buffer of the group; judged only after following it, the repair keeps 0.99.
    import mallocgame.solvers.projection as projection

    inst = load_workload("xla-v1/inplace_update_loop")
    mapping = HeuristicSolver().solve(inst)
    followed, kept = project(inst, mapping)
    assert kept > 0.95 and followed.info["backups"] == 0
    monkeypatch.setattr(projection, "MAX_CHAIN", 1)
    _, kept_first_only = project(inst, mapping)
    assert kept_first_only < 0.5


def test_without_repairs_no_blockage_is_named(monkeypatch) -> None:
    # the plain projection backs up on xla-v1/inplace_update_loop; with repairs=0 nothing
    # asks what blocked it, and no latency is evaluated for the stakes
    import mallocgame.solvers.projection as projection

    inst = load_workload("xla-v1/inplace_update_loop")
    mapping = HeuristicSolver().solve(inst)
    expected, kept = project(inst, mapping, repairs=0)
    assert expected.info["backups"] > 0

    def refuse(*args, **kwargs):
        raise AssertionError("not needed without repairs")

    monkeypatch.setattr(projection, "blockage", refuse)
    monkeypatch.setattr(projection, "_marginal_values", refuse)
    solution, kept_again = project(inst, mapping, repairs=0)
    assert solution.actions == expected.actions and kept_again == kept


def test_a_chain_of_replays_keeps_to_the_budget() -> None:
    inst = load_workload("xla-v1/inplace_update_loop")
    mapping = HeuristicSolver().solve(inst)
    for repairs in (1, 2, 3):
        solution, _ = project(inst, mapping, repairs=repairs)
        assert solution.info["repair_replays"] <= repairs


def test_a_trial_is_replayed_once(monkeypatch) -> None:
    # xla-v1/lstm_lm_train: two candidates name the same groups to drop; the second is not
    # replayed again (it cannot rise where the first did not), and the repair still rises.
    import mallocgame.solvers.projection as projection

    real_play = projection._play
    trials: list[bytes] = []

    def play(instance, tables, wanted, group_value, resume=None):
        trials.append(wanted.tobytes())
        return real_play(instance, tables, wanted, group_value, resume=resume)

    inst = load_workload("xla-v1/lstm_lm_train")
    mapping = HeuristicSolver().solve(inst)
    monkeypatch.setattr(projection, "_play", play)
    solution, kept = project(inst, mapping)
    assert len(set(trials)) == len(trials) == solution.info["repair_replays"] + 1
    assert solution.info["repairs_kept"] >= 1 and kept > solution.info["kept_before_repair"]


def test_a_repair_worth_less_than_its_cost_is_not_tried(monkeypatch) -> None:
    import mallocgame.solvers.projection as projection

    inst, mapping = _blocked_extension()
    monkeypatch.setattr(
        projection, "MAX_COST_RATIO", 0.5
    )  # R's 0.27 s against P's 0.45 s: 0.6 times
    solution, _ = project(inst, mapping)
    assert solution.info["repair_replays"] == 0 and solution.actions == (0, 0, 2)
    monkeypatch.setattr(projection, "MAX_COST_RATIO", 0.7)
    solution, _ = project(inst, mapping)
    assert solution.info["repair_replays"] == 1 and solution.actions == (0, 2, 1)


def test_a_time_limit_stops_the_repair() -> None:
    inst, mapping = _blocked_extension()
    solution, kept = project(inst, mapping, seconds=0.0)
    assert solution.info["repair_replays"] == 0 and kept == solution.info["kept_before_repair"]
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="seconds must be at least 0"):
            project(inst, mapping, seconds=bad)


def test_blockage_of_what_no_other_placement_changes() -> None:
    # Inputs P and Q read at 1 and 2 in one alias group g: P's Drop makes g slow, so Q's Copy
    # is refused by a rule; so is the NoCopy of a program result (tensor 2, live-out).
    inst = build(
        tensors=[X(100), X(100), X(50, live_out=True)],
        instructions=[I(), I(reads=[B(0, alias="g")]), I(reads=[B(1, alias="g")], writes=[2])],
    )
    game = Game(inst)
    game.step(2)  # buffer 0: Drop, g slow
    value = np.ones(game.tables.num_groups)
    assert blockage(game, 0, value, 1.0).cause == "rule"
    game.step(2)  # buffer 1
    found = blockage(game, 1, value, 1.0)  # the live-out output
    assert (found.cause, found.groups) == ("rule", ())
