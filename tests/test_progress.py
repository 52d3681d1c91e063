"""The progress bar: its line, in place on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io
import time

from mallocgame import progress
from mallocgame.progress import ProgressBar, bar_line


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
