"""Process pools whose workers end with their parent: ``mallocgame.workers``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pytest

from mallocgame.workers import WorkerPool, pool_context, process_pool

# A parent that starts a pool of two workers, prints their process ids once both
# have run a task, and then kills itself as a stopped sweep or the out-of-memory
# killer would.
PARENT = textwrap.dedent(
    """
    import os, signal, sys, time
    from mallocgame.workers import process_pool

    def pid_after(seconds):
        time.sleep(seconds)
        return os.getpid()

    if __name__ == "__main__":
        pool = process_pool(2)
        pids = set()
        for _ in range(20):
            pids |= set(pool.map(pid_after, [0.3, 0.3]))
            if len(pids) == 2:
                break
        print(*sorted(pids), flush=True)
        os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    """
)


def _running(pid: int) -> bool:
    """True while process ``pid`` runs (a zombie not yet reaped counts as ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = next(
        (line.split()[1] for line in status.splitlines() if line.startswith("State:")), "Z"
    )
    return state not in ("Z", "X")


def test_the_context_never_forks() -> None:
    expected = "forkserver" if sys.platform.startswith("linux") else "spawn"
    assert pool_context().get_start_method() == expected


def test_a_pool_runs_its_tasks_and_the_initializer_in_other_processes(tmp_path: Path) -> None:
    here = os.getcwd()
    with process_pool(1, initializer=os.chdir, initargs=(str(tmp_path),)) as pool:
        assert pool.submit(os.getcwd).result() == str(tmp_path)
        assert pool.submit(os.getpid).result() != os.getpid()
    assert os.getcwd() == here


def test_a_pool_is_returned_with_every_worker_started() -> None:
    """No worker starts later, inside a submit that Ctrl-C may interrupt (it would be out
    of the pool's reach, and print multiprocessing's own traceback as the parent goes):
    every worker is started, and so ended by terminate(), when the pool is returned."""
    with process_pool(3) as pool:
        processes = dict(pool._processes)  # (concurrent.futures' own table of its workers)
        assert len(processes) == 3 and all(p.is_alive() for p in processes.values())
        pids = {pool.submit(os.getpid).result() for _ in range(12)}
        assert pids <= set(processes)
        assert dict(pool._processes) == processes  # no worker started since


def test_every_worker_starts_even_when_the_parent_is_slow_between_submits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A parent held up between two submits (a busy machine) lets the first worker finish
    its task and turn idle; a start task that could finish then would be taken by that
    worker, and the pool would be returned one worker short."""
    submit = WorkerPool.submit

    def slow_submit(self: WorkerPool, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        future = submit(self, fn, *args, **kwargs)
        time.sleep(0.5)
        return future

    monkeypatch.setattr(WorkerPool, "submit", slow_submit)
    with process_pool(3) as pool:
        assert len(pool._processes) == 3


# A parent interrupted (Ctrl-C) in the second of the three submits that start its pool.
INTERRUPTED_START = textwrap.dedent(
    """
    import time
    from mallocgame.workers import WorkerPool, process_pool

    submit, calls = WorkerPool.submit, []

    def interrupted(self, fn, *args, **kwargs):
        future = submit(self, fn, *args, **kwargs)
        calls.append(fn)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return future

    if __name__ == "__main__":
        WorkerPool.submit = interrupted
        try:
            process_pool(3)
        except KeyboardInterrupt:
            time.sleep(2)  # the workers started take their start tasks meanwhile
            print("interrupted", flush=True)
    """
)


def test_a_parent_interrupted_while_its_pool_starts_exits(tmp_path: Path) -> None:
    """The start tasks given before the interrupt waited on a gate no one would open, and
    the parent's exit waited on them: it hung for good (two more Ctrl-C did nothing)."""
    script = tmp_path / "parent.py"
    script.write_text(INTERRUPTED_START)
    src = str(Path(__file__).parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0 and done.stdout == "interrupted\n", done.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="sends itself SIGINT")
@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="Ctrl-C is raised in the main thread only",
)
def test_ctrl_c_inside_a_workers_start_ends_that_worker_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C inside a worker's start (forked, not yet in the pool's table; the fork server
    answers slowly while it imports) left that worker out of terminate's reach: as the
    parent went, it failed to load the pool's start gate and printed multiprocessing's own
    traceback. Ctrl-C is held back until every worker is the pool's, then ends them all."""
    started: list[BaseProcess] = []
    start = BaseProcess.start

    def interrupted_start(self: BaseProcess) -> None:
        start(self)
        started.append(self)
        if len(started) == 1:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(BaseProcess, "start", interrupted_start)
    handler = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(KeyboardInterrupt):
            process_pool(2)
        for process in started:
            process.join(timeout=10)
        # Each ended by the pool (SIGTERM, or its sentinel after the gate opened), none left
        # running (None) or failed (1, with the traceback) for want of the gate's semaphore.
        exits = [process.exitcode for process in started]
        assert len(exits) == 2 and set(exits) <= {0, -signal.SIGTERM}, exits
    finally:
        for process in started:  # do not leave them behind when the test fails
            if process.is_alive():
                process.kill()
                process.join()
    assert signal.getsignal(signal.SIGINT) is handler


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGKILL"])
def test_workers_end_when_their_parent_is_killed(tmp_path: Path, signal_name: str) -> None:
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    src = str(Path(__file__).parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    # Files, not pipes: workers that outlive the parent would hold a pipe open.
    with out.open("w") as stdout, err.open("w") as stderr:
        done = subprocess.run(
            [sys.executable, str(script), signal_name],
            stdout=stdout,
            stderr=stderr,
            env=env,
            timeout=120,
        )
    assert done.returncode < 0, err.read_text()  # ended by the signal, not by a normal exit
    pids = [int(word) for word in out.read_text().split()]
    assert len(pids) == 2 and os.getpid() not in pids
    deadline = time.monotonic() + 30
    while any(map(_running, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in pids if _running(pid)]
    for pid in left:  # do not leave them behind when the test fails
        os.kill(pid, 9)
    assert not left, f"workers {left} outlived their parent"


def _server(reply: bytes | None) -> tuple[str, threading.Thread]:
    """A one-connection server on the loopback address that reads what it is sent and
    answers ``reply`` (``None``: says nothing and holds the connection a while)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        connection, _ = listener.accept()
        connection.recv(64)
        if reply is not None:
            connection.sendall(reply)
        else:
            time.sleep(1.0)
        connection.close()
        listener.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"127.0.0.1:{listener.getsockname()[1]}", thread


@pytest.mark.parametrize(
    "reply",
    [b"HTTP/1.0 505 Invalid HTTP version\r\n\r\n", None, b""],
    ids=["http1", "silent", "closes"],
)
def test_a_port_that_speaks_no_grpc_is_no_ray_cluster(reply: bytes | None) -> None:
    from mallocgame.errors import WorkerError
    from mallocgame.workers import check_ray_address

    address, thread = _server(reply)
    with pytest.raises(WorkerError, match="is not a Ray cluster"):
        check_ray_address(address, timeout_s=0.3)
    thread.join()


def test_a_port_that_answers_http2s_settings_passes() -> None:
    from mallocgame.workers import check_ray_address

    address, thread = _server(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))  # an empty SETTINGS frame
    check_ray_address(address, timeout_s=2.0)
    thread.join()
