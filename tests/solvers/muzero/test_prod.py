"""muzero-prod: the faster of the heuristic's and the agent's mapping, never slower than
the heuristic in simulation, on programs of every bundled suite."""

from __future__ import annotations

import pickle
from dataclasses import replace
from types import SimpleNamespace

import pytest

from mallocgame.check import check_solution
from mallocgame.errors import SolverError
from mallocgame.simulate import simulate
from mallocgame.solution import load_solution, save_solution
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.solvers.hybrid import choose_fastest
from mallocgame.workloads.registry import load_workload, workload_names
from tests.builders import I, build, heuristic_answer
from tests.solvers.muzero.test_muzero_train import TINY

ONE_GAME = {
    **TINY,
    "demonstrations": "greedy",
    "parallel_games": 1,
    "greedy_games": 1,
    "num_simulations": 2,
    "agent_min_seconds": 0,
}
"""The cheapest agent: one game of two simulations per move, started in any budget; the
greedy game as its demonstration, which answers where the agent's game is not complete within the budget
(one game of synthetic-v1/16k takes far longer: docs/muzero-experiments.md). The test's
3 s: the agent's game ends within them on the smaller programs (on the 2-core machine,
loaded: torch-v1/wrn101_2_infer_b256's and holdout-v1/decoder_lm_scan_train's in under
2 s); the larger ones fall back in any budget of seconds, and spend all of it, or, where
the heuristic alone takes the agent's share of the budget, leave the agent out."""


SPREAD = (
    "xla-v1/gru_infer",
    "xla-v2/llama2_70b_decode",
    "xla-v2/resnet152_train_b16",
    "torch-v1/wrn101_2_infer_b256",
    "holdout-v1/decoder_lm_scan_train",
    "holdout-v1/moe_lm_train",
    "synthetic-v1/1k",
    "synthetic-v2/small",
    "tpu-v1/gru_infer_b512-v5e",
    "tpu-v2/bigru_tagger_infer_b512-v4",
    "hf-v1/gpt2_infer_b8_s1024",
)
"""Programs of every suite, the smallest to the largest (26,915 buffers). Where the agent's
game does not end within the 3 s (on most of these), its candidate is the greedy game: on
xla-v2/resnet152_train_b16 as it was on xla-v1/gpt_train_deep and synthetic-v1/16k, no
longer taken here. The rule the answer follows is the same on every program
(``choose_fastest``, tests/solvers/test_hybrid.py);
the heuristic's mapping, always a candidate, is checked valid and faster than Drop on
every bundled program (tests/solvers/test_heuristic.py)."""


def test_the_spread_covers_every_suite() -> None:
    suites = {name.split("/")[0] for name in workload_names()}
    assert {name.split("/")[0] for name in SPREAD} == suites
    assert set(SPREAD) <= set(workload_names())


@pytest.mark.parametrize("name", SPREAD)
def test_never_slower_than_the_heuristic(name: str) -> None:
    inst = load_workload(name)
    options = {**ONE_GAME, "order_search_share": 0}  # the order search: its own tests, below
    answer = get_solver("muzero-prod").solve(
        inst, SolveRequest(seed=0, work=1, seconds=3.0, options=options)
    )
    heuristic = heuristic_answer(name)[1]
    assert check_solution(inst, answer).ok
    latency = simulate(inst, answer).latency_s
    assert latency <= simulate(inst, heuristic).latency_s
    candidates = answer.info["candidates"]
    compiled_for_a_tpu = name.startswith(("tpu-v1/", "tpu-v2/"))  # XLA's answer: a candidate
    expected = {"heuristic", "muzero"} | ({"xla"} if compiled_for_a_tpu else set())
    left_out = set(answer.info.get("left_out", ()))  # the agent, where the heuristic spent
    assert left_out <= {"muzero"}  # its share of the 3 s (the largest programs, when loaded)
    assert set(candidates) == expected - left_out
    assert all(c["valid"] for c in candidates.values())
    if compiled_for_a_tpu:
        xla = get_solver("xla").solve(inst, SolveRequest(seed=0))
        assert latency <= simulate(inst, xla).latency_s
        assert candidates["xla"]["reward_s"] == xla.reward_s
    assert latency == answer.info["latency_s"] == min(c["latency_s"] for c in candidates.values())
    assert candidates["heuristic"]["reward_s"] == heuristic.reward_s


def test_a_budget_the_heuristic_spends_is_kept(lstm) -> None:
    answer = get_solver("muzero-prod").solve(lstm, SolveRequest(seed=0, seconds=1e-9))
    assert answer.info["left_out"] == ["muzero", "msa-search"]  # neither started
    assert set(answer.info["candidates"]) == {"heuristic"} and answer.work == {"games": 0}
    assert answer.info["chosen"] == "heuristic" and check_solution(lstm, answer).ok


def test_a_share_shorter_than_the_agents_setup_goes_to_the_order_search(lstm) -> None:
    """The default agent_min_seconds (10) is more than 0.75 of 4 s: the agent does not start
    (its setup alone would take the budget), and the order search has its share too."""
    answer = get_solver("muzero-prod").solve(lstm, SolveRequest(seed=0, seconds=4.0))
    assert answer.info["left_out"] == ["muzero"] and answer.work["games"] == 0
    assert set(answer.info["candidates"]) == {"heuristic", "msa-search"}
    assert answer.work["order_evaluations"] > 0
    assert check_solution(lstm, answer).ok


def test_a_bad_init_is_refused_where_the_agent_is_left_out(lstm, tmp_path, monkeypatch) -> None:
    """An init agent that is missing or of another network is refused before the heuristic
    runs, as the agent's run refuses it, also where the budget leaves the agent out (it was
    accepted then, and the heuristic's answer given); not where the run would not read it
    (a checkpoint to resume: the network is that checkpoint's)."""
    import json
    from dataclasses import asdict

    from flax import serialization

    import mallocgame.solvers.muzero.prod as prod
    from mallocgame.solvers.checkpoint import CHECKPOINT_NAME

    theirs = asdict(get_solver("muzero-prod").config({"width": 64}))
    other = tmp_path / "other.msgpack"  # an agent's fingerprint; its network is not read
    fingerprint = {"trainer": "muzero-shared", "config": json.dumps(theirs, sort_keys=True)}
    other.write_bytes(serialization.msgpack_serialize({"fingerprint": fingerprint, "params": {}}))
    solver = get_solver("muzero-prod")
    for init, message in ((tmp_path / "nothing", "no muzero checkpoint"), (other, "width 64")):
        request = SolveRequest(seed=0, seconds=1e-9, options={"init": str(init)})
        with monkeypatch.context() as patched:
            patched.setattr(prod, "heuristic_answer", lambda *a: pytest.fail("the heuristic ran"))
            with pytest.raises(SolverError, match=message):
                solver.solve(lstm, request)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / CHECKPOINT_NAME).write_bytes(b"")  # resumed, were the agent to start
    options = {"init": str(tmp_path / "nothing"), "checkpoint_dir": str(tmp_path / "run")}
    answer = solver.solve(lstm, SolveRequest(seed=0, seconds=1e-9, options=options))
    assert answer.info["left_out"] == ["muzero", "msa-search"]


def test_a_solver_that_requires_the_agent_refuses_before_the_order_search(
    lstm, monkeypatch
) -> None:
    """agent_required: where the agent would be left out (4 s: 3 of them its share, less
    than agent_min_seconds), AgentLeftOutError as soon as the heuristic has answered."""
    import mallocgame.solvers.muzero.prod as prod

    monkeypatch.setattr(prod, "search_order", lambda *a, **k: pytest.fail("the search ran"))
    monkeypatch.setattr(prod.MuZeroProdSolver, "train", lambda *a, **k: pytest.fail("trained"))
    seen: list[str] = []
    request = SolveRequest(
        seed=0, seconds=4.0, callback=lambda improvement: seen.append(improvement.solution.solver)
    )
    with pytest.raises(prod.AgentLeftOutError) as refused:
        prod.MuZeroProdSolver(agent_required=True).solve(lstm, request)
    assert isinstance(refused.value, SolverError) and seen == ["heuristic"]
    assert (refused.value.budget_s, refused.value.agent_min_seconds) == (4.0, 10.0)
    assert str(refused.value).startswith("the budget of 4 s left the agent no time to start")
    assert get_solver("muzero-prod").agent_required is False  # the registry's leaves it out
    again = pickle.loads(pickle.dumps(refused.value))  # as a pool's worker raises it
    assert type(again) is prod.AgentLeftOutError and str(again) == str(refused.value)
    assert (again.budget_s, again.heuristic_s) == (4.0, refused.value.heuristic_s)


def test_the_heuristic_runs_once_for_its_answer_the_agents_demonstration_and_the_search(
    lstm, monkeypatch
) -> None:
    import mallocgame.solvers.heuristic as heuristic

    runs: list[object] = []
    verified_run = heuristic._verified_run
    monkeypatch.setattr(
        heuristic, "_verified_run", lambda *a, **k: runs.append(a) or verified_run(*a, **k)
    )
    options = {**TINY, "demonstrations": "heuristic", "order_search_evaluations": 4}
    answer = get_solver("muzero-prod").solve(lstm, SolveRequest(seed=0, work=1, options=options))
    assert len(runs) == 1 and "left_out" not in answer.info
    assert answer.info["candidates"]["muzero"]["valid"]
    assert answer.work["order_evaluations"] == 4
    alone = get_solver("heuristic").solve(lstm, SolveRequest(seed=0))
    assert answer.info["candidates"]["heuristic"]["reward_s"] == alone.reward_s


def test_a_wall_clock_budget_gives_the_order_search_its_share(lstm, monkeypatch) -> None:
    """The agent has the budget but its last order_search_share (3 of 4 s); the order
    search has the rest, less the time judging its answer will take (as long as judging
    the heuristic's took). On a fake clock, with each judging taking 1/16 s, the agent (a
    stand-in answer) its whole share and each evaluation of the search 1/8 s, the search
    makes exactly the evaluations its share holds and the answer is judged as it ends."""
    import mallocgame.solvers.base as base
    import mallocgame.solvers.muzero.prod as prod

    now = [0.0]  # the clock every stopwatch reads, seconds
    fake = SimpleNamespace(perf_counter=lambda: now[0])
    monkeypatch.setattr(base, "time", fake)
    monkeypatch.setattr(prod, "time", fake)
    stand_in = replace(get_solver("greedy").solve(lstm, SolveRequest(seed=0)), solver="muzero")
    agent_shares: list = []
    judge, search_order = prod.judge, prod.search_order

    def judging(instance, solution):
        now[0] += 1 / 16
        return judge(instance, solution)

    def train(self, instance, config, run, solver_name):  # spends its whole share
        agent_shares.append(run.clock.seconds)
        now[0] = run.clock.start + run.clock.seconds
        return stand_in

    def timed_search(assignment, *, stop, **kwargs):  # each evaluation takes 1/8 s
        started = now[0]

        def timed_stop(evaluations: int) -> bool:
            now[0] = started + evaluations / 8
            return stop(evaluations)

        return search_order(assignment, stop=timed_stop, **kwargs)

    monkeypatch.setattr(prod, "judge", judging)
    monkeypatch.setattr(prod.MuZeroProdSolver, "train", train)
    monkeypatch.setattr(prod, "search_order", timed_search)
    answer = get_solver("muzero-prod").solve(
        lstm, SolveRequest(seed=0, seconds=4.0, options=ONE_GAME)
    )
    assert agent_shares == [3.0]  # the budget but its last quarter
    assert "left_out" not in answer.info
    # from 3 + 1/16 s (the agent's answer judged) to 4 - 1/16 s: 7 evaluations
    assert answer.work["order_evaluations"] == 7 and answer.wall_s == 4.0
    assert set(answer.info["candidates"]) == {"heuristic", "muzero", "msa-search"}
    assert check_solution(lstm, answer).ok


def test_a_stalled_agent_hands_its_share_to_the_order_search(lstm) -> None:
    # patience 1 % of 8 s: the agent stops at its first stretch of 0.08 s without a new
    # best, long before its share (6 s) ends; the order search has the rest
    options = {**ONE_GAME, "order_search_patience": 0.01}
    answer = get_solver("muzero-prod").solve(
        lstm, SolveRequest(seed=0, seconds=8.0, options=options)
    )
    assert answer.info["agent_ended_s"] < 0.75 * 8.0 - 1.0
    assert set(answer.info["candidates"]) == {"heuristic", "muzero", "msa-search"}
    assert answer.work["order_evaluations"] > 0 and check_solution(lstm, answer).ok
    patient = get_solver("muzero-prod").solve(
        lstm, SolveRequest(seed=0, seconds=4.0, options=ONE_GAME)
    )
    assert "agent_ended_s" not in patient.info  # off by default


def test_the_patient_stopwatch_ends_at_a_stall_after_its_grace(monkeypatch) -> None:
    import time

    from mallocgame.solvers.base import Improvement, Stopwatch
    from mallocgame.solvers.muzero.prod import PatientStopwatch

    now = [100.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    clock = PatientStopwatch(Stopwatch(10.0), patience_s=2.0, grace_s=1.0)
    seen: list = []
    noted = clock.watching(seen.append)
    now[0] = 100.5
    noted(Improvement(None, 0.5, {}))  # type: ignore[arg-type]  # within the grace: no change
    now[0] = 102.9  # within the grace and the patience after it
    assert not clock.expired()
    now[0] = 103.5
    noted(Improvement(None, 3.5, {}))  # type: ignore[arg-type]
    now[0] = 105.4
    assert not clock.expired() and len(seen) == 2 and clock.ended_s is None
    now[0] = 105.5  # 2 s without an improvement
    assert clock.expired() and clock.ended_s == 5.5
    noted(Improvement(None, 5.6, {}))  # type: ignore[arg-type]
    assert clock.expired() and clock.ended_s == 5.5  # ended for good
    budget = PatientStopwatch(Stopwatch(10.0), patience_s=60.0)
    now[0] = 115.4
    assert not budget.expired()
    now[0] = 115.5
    assert budget.expired() and budget.ended_s == 10.0  # the budget ends it too
    assert PatientStopwatch(Stopwatch(None), 1.0).watching(None)  # no callback to pass on
    silent = PatientStopwatch(Stopwatch(10.0), patience_s=0.5, grace_s=0.1)  # no report yet:
    now[0] = 117.0  # 1.5 s: setup, compilation and first games are no stall
    assert not silent.expired() and silent.ended_s is None


def test_patience_without_an_order_search_to_hand_to_is_refused() -> None:
    from mallocgame.errors import SolverError

    with pytest.raises(SolverError, match="needs order_search_share > 0"):
        get_solver("muzero-prod").config({"order_search_patience": 0.1, "order_search_share": 0})


def test_a_program_without_buffers_is_answered_without_training() -> None:
    empty = build([], [I()])
    for request in (SolveRequest(seed=0, work=3), SolveRequest(seed=0, seconds=5.0)):
        answer = get_solver("muzero-prod").solve(empty, request)
        assert check_solution(empty, answer).ok and answer.allocations == ()
        assert answer.work == {"games": 0, "order_evaluations": 0}


def test_the_answer_records_every_candidate_and_the_winner(lstm, tmp_path) -> None:
    seen: list = []
    request = SolveRequest(seed=0, work=8, options=TINY, callback=seen.append)
    answer = get_solver("muzero-prod").solve(lstm, request)
    assert answer.solver == "muzero-prod" and answer.seed == 0
    names = [imp.solution.solver for imp in seen]
    assert (
        names[0] == "heuristic" and "muzero" in names
    )  # the heuristic first, then the agent's bests
    assert set(names) <= {"heuristic", "muzero", "msa-search"}
    assert names == sorted(
        names, key=["heuristic", "muzero", "msa-search"].index
    )  # the order search last
    candidates = answer.info["candidates"]
    assert set(candidates) == {"heuristic", "muzero", "msa-search"}
    chosen = answer.info["chosen"]
    assert candidates[chosen]["latency_s"] == min(c["latency_s"] for c in candidates.values())
    assert answer.normalized_reward == candidates[chosen]["normalized_reward"]
    assert answer.work["games"] >= 8  # the agent's work
    assert answer.work["order_evaluations"] == 200  # the order search's, without a wall clock
    save_solution(answer, tmp_path / "a.json")
    assert load_solution(tmp_path / "a.json").info["candidates"] == candidates


def test_the_order_search_starts_from_the_agents_mapping_and_beats_both_to_be_reported(
    lstm,
) -> None:
    seen: list = []
    request = SolveRequest(
        seed=0, work=8, options={**TINY, "order_search_evaluations": 50}, callback=seen.append
    )
    answer = get_solver("muzero-prod").solve(lstm, request)
    assert answer.work["order_evaluations"] == 50
    searched = [imp.solution for imp in seen if imp.solution.solver == "msa-search"]
    others = min(answer.info["candidates"][c]["latency_s"] for c in ("heuristic", "muzero"))
    assert all(s.info["latency_s"] < others for s in searched)
    assert (
        answer.info["candidates"]["msa-search"]["latency_s"]
        <= answer.info["candidates"]["heuristic"]["latency_s"]
    )
    none = get_solver("muzero-prod").solve(
        lstm, SolveRequest(seed=0, work=8, options={**TINY, "order_search_evaluations": 0})
    )
    assert (
        set(none.info["candidates"]) == {"heuristic", "muzero"}
        and "order_evaluations" not in none.work
    )


def test_a_work_budget_gives_the_same_answer() -> None:
    inst = load_workload("xla-v1/gru_infer")
    runs = [
        get_solver("muzero-prod").solve(inst, SolveRequest(seed=3, work=4, options=TINY))
        for _ in range(2)
    ]
    assert (
        runs[0].allocations == runs[1].allocations
        and runs[0].info["chosen"] == runs[1].info["chosen"]
    )


def test_a_tie_goes_to_the_earlier_candidate(lstm) -> None:
    heuristic = get_solver("heuristic").solve(lstm)
    again = get_solver("heuristic").solve(lstm, SolveRequest(seed=1))
    choice = choose_fastest(lstm, [heuristic, again])
    assert choice.solution is heuristic
    assert [c.solver for c in choice.candidates] == ["heuristic", "heuristic"]


def test_muzero_settings_are_its_settings_with_restarts_on_and_the_order_search() -> None:
    prod = get_solver("muzero-prod").settings({"num_simulations": "8"})
    assert prod["restart_fraction"] == 0.5
    search = {
        "order_search_share": prod.pop("order_search_share"),
        "order_search_evaluations": prod.pop("order_search_evaluations"),
        "order_search_patience": prod.pop("order_search_patience"),
        "agent_min_seconds": prod.pop("agent_min_seconds"),
    }
    assert search == {
        "order_search_share": 0.25,
        "order_search_evaluations": 200,
        "order_search_patience": 0.0,
        "agent_min_seconds": 10.0,
    }
    assert prod == get_solver("muzero").settings(
        {"num_simulations": "8", "restart_fraction": "0.5"}
    )
    assert get_solver("muzero-prod").settings({"restart_fraction": "0"})["restart_fraction"] == 0.0


def test_prod_and_muzero_configs_share_one_compilation() -> None:
    from mallocgame.solvers.muzero.config import MuZeroConfig, MuZeroProdConfig
    from mallocgame.solvers.muzero.train import compiled_functions

    assert compiled_functions(MuZeroProdConfig()) is compiled_functions(MuZeroConfig())


def test_the_agents_candidate_is_its_best_game_with_search_or_its_policys_alone(lstm) -> None:
    seen: list = []
    request = SolveRequest(seed=0, work=8, options={**TINY, "eval_every": 1}, callback=seen.append)
    answer = get_solver("muzero-prod").solve(lstm, request)
    assert answer.work["eval_games"] > 0  # the policy network played alone too
    agent = max(
        (imp.solution for imp in seen if imp.solution.solver == "muzero"), key=lambda s: s.reward_s
    )
    assert answer.info["candidates"]["muzero"]["reward_s"] == agent.reward_s


def test_progress_sees_every_game_as_it_is_played(lstm) -> None:
    seen: list[dict] = []
    answer = get_solver("muzero-prod").solve(
        lstm,
        SolveRequest(
            seed=0,
            work=6,
            options={**TINY, "order_search_evaluations": 0},
            progress=lambda work: seen.append(dict(work)),
        ),
    )
    games = [w["games"] for w in seen]
    assert games == list(range(1, len(games) + 1)) and games[-1] == answer.work["games"] >= 6


def test_xlas_answer_given_by_the_caller_is_a_candidate(lstm) -> None:
    """A demonstration by ``xla`` (what ``optimize --target`` passes) answers second; one
    that fails the checker is refused in one line."""
    given = replace(heuristic_answer(lstm.name)[1], solver="xla")
    options = {**ONE_GAME, "order_search_share": 0}
    request = SolveRequest(seed=0, work=1, options=options, demonstrations=(given,))
    answer = get_solver("muzero-prod").solve(lstm, request)
    assert answer.info["candidates"]["xla"]["reward_s"] == given.reward_s
    broken = replace(given, allocations=given.allocations[:-1] + (given.allocations[0],))
    request = SolveRequest(seed=0, work=1, options=options, demonstrations=(broken,))
    with pytest.raises(SolverError, match="XLA's answer given to muzero-prod fails the check"):
        get_solver("muzero-prod").solve(lstm, request)


def test_the_order_search_reports_its_mappings_where_no_candidate_is_valid(lstm) -> None:
    from mallocgame.solvers.base import Run, Stopwatch
    from mallocgame.solvers.heuristic import OrderedAssignment
    from mallocgame.solvers.hybrid import Candidate, Judged
    from mallocgame.solvers.muzero.prod import MuZeroProdSolver

    heuristic = get_solver("heuristic").solve(lstm)
    invalid = Candidate("heuristic", heuristic.reward_s, heuristic.normalized_reward, 0.0, False)
    seen: list = []
    request = SolveRequest(seed=0, callback=seen.append)
    solver = MuZeroProdSolver()
    config = solver.config({**TINY, "order_search_evaluations": 5})
    run = Run("muzero-prod", lstm, request, Stopwatch(None))
    searched = solver.search_order(
        lstm,
        config,
        run,
        Stopwatch(None),
        [Judged(heuristic, invalid)],
        None,
        OrderedAssignment(lstm),
    )
    assert searched is not None and check_solution(lstm, searched).ok
    assert seen  # an invalid candidate's latency (here 0) is no bar to beat


def test_without_an_order_search_the_agent_leaves_time_to_judge_its_answer(
    lstm, monkeypatch
) -> None:
    from mallocgame.solvers.muzero.prod import MuZeroProdSolver

    budgets: list = []
    train = MuZeroProdSolver.train

    def recording(self, instance, config, run, **kwargs):
        budgets.append(run.clock.seconds)
        return train(self, instance, config, run, **kwargs)

    monkeypatch.setattr(MuZeroProdSolver, "train", recording)
    options = {**ONE_GAME, "order_search_share": 0}
    get_solver("muzero-prod").solve(lstm, SolveRequest(seed=0, seconds=3.0, options=options))
    (agent_budget,) = budgets
    assert agent_budget < 3.0  # the judging of its answer kept back, inside the budget
