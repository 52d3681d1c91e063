"""A progress bar for long runs: elapsed time against the budget, and a status text.

On a terminal the line is redrawn in place twice a second; on anything else (a log
file, a pipe) a plain line is written every ``line_every_s`` seconds, so logs stay
readable. The status text is set from any thread with :meth:`ProgressBar.update`;
:class:`BestSoFar` makes it for a run of several candidates: each one's best reward and
the games played, counted up to the end of the run rather than to its last new best.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TextIO

__all__ = ["ProgressBar", "BestSoFar", "bar_line"]

REDRAW_S = 0.5  # seconds between redraws on a terminal


def bar_line(
    label: str, elapsed_s: float, total_s: float | None, status: str, width: int = 24
) -> str:
    """``label [#####-----] 12/60 s  status``; without a total, the elapsed time alone."""
    if total_s is None or total_s <= 0:
        return f"{label} {elapsed_s:.0f} s  {status}".rstrip()
    done = min(max(elapsed_s / total_s, 0.0), 1.0)
    filled = int(round(done * width))
    bar = f"[{'#' * filled}{'-' * (width - filled)}]"
    return f"{label} {bar} {min(elapsed_s, total_s):.0f}/{total_s:g} s  {status}".rstrip()


class BestSoFar:
    """The status text of a run that reports new bests of several candidates:
    ``heuristic 0.2620  muzero 0.6275 (16 games)``, each candidate's best normalized
    reward in the order first reported, then the games played so far.

    A new best carries the games played when it was found, so the count is also given
    where no new best comes: :meth:`played` (at the end of the run, the run's total).
    The count shown is the largest given, so an older count never replaces a newer one.
    """

    def __init__(self) -> None:
        self._best: dict[str, float] = {}
        self._games: int | None = None
        self._lock = threading.Lock()

    def improved(self, candidate: str, normalized_reward: float, games: float | None = None) -> str:
        """Record ``candidate``'s new best (``games``: played by then, ``None`` if not
        counted) and return the status text."""
        with self._lock:
            self._best[candidate] = normalized_reward
        return self.played(games)

    def played(self, games: float | None) -> str:
        """Record that ``games`` games have been played (``None``: no count) and return
        the status text."""
        with self._lock:
            if games is not None and (self._games is None or games > self._games):
                self._games = int(games)
            return self._text()

    def _text(self) -> str:
        rewards = "  ".join(f"{name} {reward:.4f}" for name, reward in self._best.items())
        if self._games is None:
            return rewards
        count = f"({self._games} game{'' if self._games == 1 else 's'})"
        return f"{rewards} {count}" if rewards else count


class ProgressBar:
    """Shows ``label``, the time elapsed of ``total_s`` and the latest status on ``stream``
    while used as a context manager."""

    def __init__(
        self,
        label: str,
        total_s: float | None,
        *,
        stream: TextIO | None = None,
        line_every_s: float = 30.0,
    ) -> None:
        self.label = label
        self.total_s = total_s
        self.stream = stream if stream is not None else sys.stderr
        self.line_every_s = line_every_s
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self._status = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = time.perf_counter()
        self._width = 0  # characters of the last in-place line

    def update(self, status: str) -> None:
        """Set the status text shown after the bar."""
        with self._lock:
            self._status = status

    def _draw(self, final: bool = False) -> None:
        with self._lock:
            line = bar_line(
                self.label, time.perf_counter() - self._start, self.total_s, self._status
            )
        if self.interactive:
            self.stream.write("\r" + line.ljust(self._width) + ("\n" if final else ""))
            self._width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def _loop(self) -> None:
        wait = REDRAW_S if self.interactive else self.line_every_s
        while not self._stop.wait(wait):
            self._draw()

    def __enter__(self) -> ProgressBar:
        self._start = time.perf_counter()
        self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._draw(final=True)
