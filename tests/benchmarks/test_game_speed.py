"""The game speed benchmark: its warm-up loads the forced loop's kernels too, its row, and
sizes it cannot go back 100 decisions in, and a repeat of no game, refused before any game."""

from __future__ import annotations

import sys

import pytest

from tests.benchmarks import load_benchmark

game_speed = load_benchmark("game_speed")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--sizes", "199"], "argument --sizes: must be at least 200, not 199"),
        (["--sizes", "1000", "-5"], "argument --sizes: must be at least 200, not -5"),
        (["--repeat", "0"], "argument --repeat: must be at least 1, not 0"),
    ],
)
def test_a_bad_argument_is_a_usage_error(argv, said, monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["game_speed.py", *argv])
    with pytest.raises(SystemExit) as stop:
        game_speed.main()
    assert stop.value.code == 2 and said in capsys.readouterr().err


def test_the_warm_up_plays_the_forced_loop(monkeypatch) -> None:
    driver = game_speed.DropBackup
    called: list[str] = []

    def spying(name: str):
        method = getattr(driver, name)

        def spy(self, *args):
            called.append(name)
            return method(self, *args)

        return spy

    for name in ("play_forced", "step_to_choice"):
        monkeypatch.setattr(driver, name, spying(name))
    game_speed.warm_up()
    assert {"play_forced", "step_to_choice"} <= set(called)


def test_a_row_at_the_smallest_size(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["game_speed.py", "--sizes", "200", "--repeat", "1"])
    game_speed.main()
    row = capsys.readouterr().out.splitlines()[-1].split()
    assert row[0] == "200" and len(row) == 7 and row[3].endswith("x")
