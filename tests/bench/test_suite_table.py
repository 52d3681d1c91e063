"""The hardness table."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from mallocgame.bench.suite_table import format_suite_table, suite_row
from mallocgame.errors import MallocGameError, SolverError
from mallocgame.solvers import get_solver


def test_suite_row_measures_a_program(monkeypatch) -> None:
    """Every measure of a row; ``exact`` starts from the heuristic's answer where its
    budget has time for it, so it is at least the heuristic's. On a fake clock (the exact
    solver's heuristic taking 0.02 s; its warm-start games, the three played without a
    clock, taking their share) a process held up does not take that start away."""
    from mallocgame.solvers import base, exact

    now = [0.0]  # the clock every stopwatch reads, seconds
    monkeypatch.setattr(base, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    heuristic, games = exact._heuristic_mapping, exact.warm_start

    def timed_heuristic(instance, seed):
        now[0] += 0.02
        return heuristic(instance, seed)

    def timed_games(instance, seconds, seed, **kwargs):  # the games spend their share
        played = games(instance, None, seed, **kwargs)
        now[0] += seconds
        return played

    monkeypatch.setattr(exact, "_heuristic_mapping", timed_heuristic)
    monkeypatch.setattr(exact, "warm_start", timed_games)
    row = suite_row("xla-v1/lstm_infer", random_games=3, exact_seconds=2.0)
    assert row.loops >= 1 and row.buffers > row.instructions > 0
    assert row.peak_live_bytes > row.fast_memory_bytes > 0
    assert 0.0 <= row.larger_than_fast < 1.0
    assert 0.0 < row.random <= row.bound and 0.0 < row.greedy <= row.bound <= 1.0
    assert row.exact is not None and row.heuristic <= row.exact + 1e-9 <= row.bound + 1e-9
    line = format_suite_table([row]).splitlines()[-1]
    assert line.startswith("| `xla-v1/lstm_infer` |") and line.count("|") == 15


def test_exact_left_out() -> None:
    row = suite_row("xla-v2/gru_infer_b512", random_games=1, exact_seconds=0.0)
    assert row.exact is None
    assert row.larger_than_fast > 0  # a buffer of the GRU's output sequence exceeds the CMEM
    cells = format_suite_table([row]).splitlines()[-1].split("|")
    assert cells[13].strip() == ""  # the exact column


@pytest.mark.parametrize("seconds", [float("nan"), -5.0])
def test_an_exact_budget_that_is_not_a_time_is_refused(seconds: float) -> None:
    with pytest.raises(MallocGameError, match="exact_seconds must be a finite number"):
        suite_row("xla-v1/lstm_infer", random_games=1, exact_seconds=seconds)


def test_the_cli_checks_every_name_before_the_first_program(monkeypatch, capsys) -> None:
    import mallocgame.bench.suite_table as suite_table
    from mallocgame.cli import main

    measured: list[str] = []
    monkeypatch.setattr(suite_table, "suite_row", lambda name, **_: measured.append(name))
    assert main(["bench", "suite", "--programs", "xla-v1/lstm_infer", "nosuch/x"]) == 2
    assert "nosuch/x: neither a bundled workload" in capsys.readouterr().err
    assert measured == []


def test_an_answer_that_fails_check_makes_no_row(monkeypatch) -> None:
    greedy = type(get_solver("greedy"))
    honest = greedy.solve

    def inflated(self, inst, request):  # a reward the mapping does not earn
        solution = honest(self, inst, request)
        return dataclasses.replace(solution, reward_s=2 * solution.reward_s)

    monkeypatch.setattr(greedy, "solve", inflated)
    with pytest.raises(SolverError, match="greedy's answer fails check"):
        suite_row("xla-v1/lstm_infer", random_games=1, exact_seconds=0.0)
