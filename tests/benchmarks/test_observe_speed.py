"""The observation speed benchmark: no game, or an unknown workload, is refused before
the warm-up."""

from __future__ import annotations

import sys

import pytest

from tests.benchmarks import load_benchmark

observe_speed = load_benchmark("observe_speed")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--games", "0"], "argument --games: must be at least 1, not 0"),
        (["--workloads", "xla-v1/nosuch"], "xla-v1/nosuch: neither a bundled workload"),
    ],
)
def test_a_bad_argument_is_a_usage_error(argv, said, monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["observe_speed.py", *argv])
    monkeypatch.setattr(observe_speed, "play_and_observe", lambda *args: pytest.fail("played"))
    with pytest.raises(SystemExit) as stop:
        observe_speed.main()
    assert stop.value.code == 2 and said in capsys.readouterr().err
