"""A progress bar for long runs: elapsed time against the budget, and a status text.

On a terminal the line is redrawn in place twice a second; on anything else (a log
file, a pipe) a plain line is written every ``line_every_s`` seconds, so logs stay
readable. The status text is set from any thread with :meth:`ProgressBar.update`.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TextIO

__all__ = ["ProgressBar", "bar_line"]

REDRAW_S = 0.5  # seconds between redraws on a terminal


def bar_line(label: str, elapsed_s: float, total_s: float | None, status: str, width: int = 24) -> str:
    """``label [#####-----] 12/60 s  status``; without a total, the elapsed time alone."""
    if total_s is None or total_s <= 0:
        return f"{label} {elapsed_s:.0f} s  {status}".rstrip()
    done = min(max(elapsed_s / total_s, 0.0), 1.0)
    filled = int(round(done * width))
    return f"{label} [{'#' * filled}{'-' * (width - filled)}] {min(elapsed_s, total_s):.0f}/{total_s:g} s  {status}".rstrip()


class ProgressBar:
    """Shows ``label``, the time elapsed of ``total_s`` and the latest status on ``stream``
    while used as a context manager."""

    def __init__(
        self, label: str, total_s: float | None, *, stream: TextIO | None = None, line_every_s: float = 30.0,
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
            line = bar_line(self.label, time.perf_counter() - self._start, self.total_s, self._status)
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
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._draw(final=True)
