"""The progress bar: its line, in place on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io
import time

from mallocgame import progress
from mallocgame.progress import BestSoFar, ProgressBar, bar_line


def test_bar_line() -> None:
    assert bar_line("run", 15.0, 60.0, "best 0.5", width=8) == "run [##------] 15/60 s  best 0.5"
    assert bar_line("run", 90.0, 60.0, "", width=4) == "run [####] 60/60 s"  # past the budget: full
    assert bar_line("run", 12.4, None, "3 games") == "run 12 s  3 games"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_one_line_redrawn_in_place(monkeypatch) -> None:
    monkeypatch.setattr(progress, "REDRAW_S", 0.01)
    stream = _Terminal()
    with ProgressBar("run", 10.0, stream=stream) as bar:
        bar.update("a longer status than the next one")
        time.sleep(0.1)
        bar.update("short")
        time.sleep(0.1)
    text = stream.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n") and text.count("\r") >= 3
    last = text.rsplit("\r", 1)[1]
    assert last.startswith("run [") and "short" in last and "longer" not in last


def test_a_log_gets_plain_lines() -> None:
    stream = io.StringIO()  # not a terminal
    with ProgressBar("run", None, stream=stream, line_every_s=0.02) as bar:
        bar.update("working")
        time.sleep(0.15)
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue() and len(lines) >= 2
    assert all(line.startswith("run ") for line in lines) and lines[-1].endswith("working")


def test_best_so_far_counts_the_games_played_not_those_of_the_last_best() -> None:
    status = BestSoFar()
    assert status.played(None) == ""
    assert status.improved("heuristic", 0.262) == "heuristic 0.2620"  # it counts no games
    assert status.improved("muzero", 0.5, 1) == "heuristic 0.2620  muzero 0.5000 (1 game)"
    assert status.improved("muzero", 0.6275, 3) == "heuristic 0.2620  muzero 0.6275 (3 games)"
    # no new best since game 3, and 16 played
    assert status.played(16) == "heuristic 0.2620  muzero 0.6275 (16 games)"
    # an older count never replaces a newer one
    assert status.improved("heuristic", 0.3, 2) == "heuristic 0.3000  muzero 0.6275 (16 games)"
    assert BestSoFar().played(0) == "(0 games)"


def test_the_last_line_counts_every_game_played() -> None:
    stream = io.StringIO()
    status = BestSoFar()
    with ProgressBar("optimize p", 60.0, stream=stream) as bar:
        bar.update(status.improved("heuristic", 0.25))
        bar.update(status.improved("muzero", 0.5, 1))  # the agent's last new best: its first game
        bar.update(status.played(16))  # the run's end: 16 games in all
    last = stream.getvalue().splitlines()[-1]
    assert last.endswith("heuristic 0.2500  muzero 0.5000 (16 games)")
