"""The best-of solver keeps the candidate with the lowest simulated latency."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from mallocgame.check import check_solution
from mallocgame.errors import SolverError
from mallocgame.instance import instance_from_dict
from mallocgame.simulate import simulate
from mallocgame.solvers import SolveRequest, get_solver
from mallocgame.solvers.hybrid import BestOfSolver, fastest, judge
from mallocgame.workloads.registry import load_workload


def test_best_of_keeps_the_fastest_valid_candidate() -> None:
    inst = load_workload("xla-v1/resnet_infer")
    solution = BestOfSolver().solve(
        inst, SolveRequest(seed=0, work=2, options={"solvers": ("drop", "random")})
    )
    record = solution.info["candidates"]
    assert set(record) == {"drop", "random"} and all(c["valid"] for c in record.values())
    chosen = min(record, key=lambda n: record[n]["latency_s"])
    assert solution.info["chosen"] == chosen == "random"
    assert solution.solver == "best-of"
    assert check_solution(inst, solution).ok
    assert simulate(inst, solution).latency_s == record["random"]["latency_s"]


def test_best_of_work_and_progress_count_its_candidates() -> None:
    """Progress heard each candidate's own counts (games 1..4, then games 1..4 again, then
    the heuristic's counters), and the answer's work was the winner's alone."""
    inst = load_workload("xla-v1/lstm_infer")
    heard: list[dict] = []
    solution = BestOfSolver().solve(
        inst,
        SolveRequest(
            seed=0, work=4, progress=heard.append, options={"solvers": "es,random,heuristic"}
        ),
    )
    assert heard == [{"candidates": 1}, {"candidates": 2}, {"candidates": 3}]
    work = solution.work
    assert work["candidates"] == 3
    assert work["es.games"] == work["random.games"] == 4
    assert work["heuristic.passes"] >= 1


def test_best_of_options_name_known_solvers() -> None:
    solver = BestOfSolver()
    solver.check_options({})
    solver.check_options({"solvers": ["drop", "greedy"]})
    solver.check_options({"solvers": "drop, greedy"})  # as --option solvers=drop,greedy gives it
    for bad, needle in [
        ({"solvers": ["drop", "nope"]}, "unknown solver 'nope'"),
        ({"solvers": "drop,egrll"}, "unknown solver 'egrll'"),
        ({"solvers": "random,drop,random"}, "'random' is given twice"),  # one name, one entry
        ({"solvers": ""}, r"option solvers must hold 1 to 32 items, not 0"),
        ({"solvers": 3}, "must be a list of str"),
        ({"solver": "drop"}, r"best-of: unknown option 'solver' \(valid: solvers\)"),
    ]:
        with pytest.raises(SolverError, match=needle):
            solver.check_options(bad)
    inst = load_workload("synthetic-v1/small")
    with pytest.raises(SolverError, match="unknown solver 'nope'"):
        solver.solve(inst, SolveRequest(options={"solvers": "drop,nope"}))
    solution = solver.solve(inst, SolveRequest(seed=0, options={"solvers": "drop,greedy"}))
    assert set(solution.info["candidates"]) == {"drop", "greedy"}


def test_a_candidate_that_refuses_is_reported_and_skipped() -> None:
    inst = load_workload("xla-v1/gru_infer")  # far too large for exhaustive within 3 moves
    request = SolveRequest(seed=0, work=3, options={"solvers": "exhaustive,greedy"})
    solution = BestOfSolver().solve(inst, request)
    assert solution.info["chosen"] == "greedy" and set(solution.info["candidates"]) == {"greedy"}
    reason = "exhaustive search gave up after 3 moves; the instance is too large"
    assert solution.info["refused"] == {"exhaustive": reason}
    assert check_solution(inst, solution).ok
    plain = BestOfSolver().solve(inst, SolveRequest(seed=0, work=3, options={"solvers": "greedy"}))
    assert "refused" not in plain.info  # nothing refused, nothing reported


def test_every_candidate_refusing_is_one_error_with_every_reason() -> None:
    inst = load_workload("xla-v1/gru_infer")
    with pytest.raises(
        SolverError,
        match=r"^best-of: every candidate refused \(exhaustive: "
        r"exhaustive search gave up after 3 moves; "
        r"the instance is too large\)$",
    ):
        BestOfSolver().solve(inst, SolveRequest(seed=0, work=3, options={"solvers": "exhaustive"}))


def test_judged_candidates_the_fastest_valid_first_of_a_tie_never_an_invalid_one(lstm) -> None:
    heuristic = get_solver("heuristic").solve(lstm)
    drop = get_solver("drop").solve(lstm)
    broken = dataclasses.replace(heuristic, solver="broken", reward_s=heuristic.reward_s + 1.0)
    judged = [judge(lstm, s) for s in (drop, broken, heuristic, heuristic)]
    assert [j.candidate.valid for j in judged] == [True, False, True, True]
    assert judged[1].candidate.latency_s == float("inf")  # not simulated
    assert judged[2].candidate.latency_s == simulate(lstm, heuristic).latency_s
    choice = fastest(judged)
    assert choice.solution is heuristic and choice.latency_s == judged[2].candidate.latency_s
    assert choice.candidates == tuple(j.candidate for j in judged)
    with pytest.raises(SolverError, match=r"no candidate of \['broken'\] produced a valid"):
        fastest([judged[1]])


def test_a_wall_clock_budget_is_split_as_the_candidates_spend_it(monkeypatch) -> None:
    """Each candidate's share is what is left of the budget, less as long for each judging
    still to come as the judgings so far took, split evenly between it and those after it:
    on a fake clock, with each candidate (its answer made beforehand) and each judging
    taking the time given here, the shares are exact."""
    import mallocgame.solvers.base as base
    import mallocgame.solvers.hybrid as hybrid

    inst = load_workload("synthetic-v2/small")
    names = ("drop", "greedy", "random")
    answers = {n: get_solver(n).solve(inst, SolveRequest(seed=0, work=1)) for n in names}
    now = [0.0]  # the clock every stopwatch reads, seconds
    monkeypatch.setattr(base, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    spent = {"drop": 0.3, "greedy": 0.01}  # seconds; random spends all its share
    shares: list = []
    solve, judge = hybrid.Solver.solve, hybrid.judge

    def candidate(self, instance, request):  # each candidate's share as it starts
        if self.name == "best-of":
            return solve(self, instance, request)
        shares.append((self.name, request.seconds))
        now[0] += spent.get(self.name, request.seconds)
        return answers[self.name]

    def judging(instance, solution):  # each judging takes 0.01 s
        now[0] += 0.01
        return judge(instance, solution)

    monkeypatch.setattr(hybrid.Solver, "solve", candidate)
    monkeypatch.setattr(hybrid, "judge", judging)
    request = SolveRequest(seed=0, seconds=0.6, options={"solvers": ",".join(names)})
    solution = BestOfSolver().solve(inst, request)
    assert [name for name, _ in shares] == list(names)
    first, second, third = (share for _, share in shares)
    assert first == pytest.approx(0.6 / 3)  # a third of the budget, no judging timed yet
    # drop overran its share (0.3 s, judged in 0.01 s): greedy's is what is left, less a
    # judging for each of the two still to come, split evenly
    assert second == pytest.approx((0.6 - 0.31 - 2 * 0.01) / 2)
    # greedy answered at once (0.01 s, judged in 0.01 s) and left its time to random, which
    # has all that is left but the time of its own judging
    assert third == pytest.approx(0.6 - (0.31 + 0.02) - 0.01)
    assert solution.wall_s == pytest.approx(0.6)  # random spent its share: the budget, judged
    assert solution.info["chosen"] in names and check_solution(inst, solution).ok


def test_each_candidate_is_judged_as_it_returns_inside_the_budget(monkeypatch) -> None:
    import mallocgame.solvers.hybrid as hybrid

    events: list = []
    solve, judge = hybrid.Solver.solve, hybrid.judge

    def recording_solve(self, instance, request):
        if self.name != "best-of":
            events.append(("solve", self.name))
        return solve(self, instance, request)

    def recording_judge(instance, solution):
        events.append(("judge", solution.solver))
        return judge(instance, solution)

    monkeypatch.setattr(hybrid.Solver, "solve", recording_solve)
    monkeypatch.setattr(hybrid, "judge", recording_judge)
    inst = load_workload("synthetic-v2/small")
    BestOfSolver().solve(inst, SolveRequest(seed=0, options={"solvers": "drop,greedy"}))
    assert events == [
        ("solve", "drop"),
        ("judge", "drop"),
        ("solve", "greedy"),
        ("judge", "greedy"),
    ]


def test_a_program_the_simulator_cannot_judge_is_refused_before_any_candidate(
    monkeypatch,
) -> None:
    import mallocgame.solvers.hybrid as hybrid
    from tests.builders import I, X, build_doc

    doc = build_doc([X(8)], [I(writes=[0]), I(reads=[0]), I(), I()])
    doc["loops"] = [
        {"first": 0, "last": 1, "trip_count": 2},
        {"first": 1, "last": 2, "trip_count": 2},
    ]
    inst = instance_from_dict(doc)  # loops that overlap without nesting: a valid instance
    ran: list = []
    solve = hybrid.Solver.solve
    monkeypatch.setattr(
        hybrid.Solver, "solve", lambda self, i, r: ran.append(self.name) or solve(self, i, r)
    )
    with pytest.raises(SolverError, match="best-of: the simulator cannot judge this program"):
        BestOfSolver().solve(inst, SolveRequest(seed=0, seconds=1.0))
    assert ran == ["best-of"]
