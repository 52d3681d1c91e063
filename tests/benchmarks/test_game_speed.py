"""The game speed benchmark: sizes it cannot go back 100 decisions in, and a repeat of
no game, are refused before any game."""

from __future__ import annotations

import sys

import pytest

from tests.benchmarks import load_benchmark

game_speed = load_benchmark("game_speed")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--sizes", "199"], "argument --sizes: 199 is below 200"),
        (["--sizes", "1000", "-5"], "argument --sizes: -5 is below 200"),
        (["--repeat", "0"], "argument --repeat: 0 is below 1"),
    ],
)
def test_a_bad_argument_is_a_usage_error(argv, said, monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["game_speed.py", *argv])
    with pytest.raises(SystemExit) as stop:
        game_speed.main()
    assert stop.value.code == 2 and said in capsys.readouterr().err
