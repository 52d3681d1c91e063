"""Process pools whose workers end when the process that started them ends.

A :class:`concurrent.futures.ProcessPoolExecutor` shuts its workers down when the
parent leaves through ``shutdown`` (or a ``with`` block). A parent that is killed
(``SIGTERM`` from a sweep being stopped, ``SIGKILL``, the out-of-memory killer)
never gets there, and its workers live on: they hold both ends of their task queue,
so they never see it close, finish the games they were given and then wait for
work forever. :func:`process_pool` gives every worker a daemon thread that waits
on :func:`multiprocessing.parent_process` (the process that asked for the worker,
also under ``forkserver``) and ends the worker with ``os._exit`` the moment it goes.

Ctrl-C reaches the parent alone (workers ignore SIGINT, so none prints a traceback);
a parent interrupted while its pool works ends the workers with :meth:`WorkerPool.terminate`.
:func:`process_pool` starts every worker at once (a pool would start them one task at a
time): a worker started later, inside a ``submit`` that Ctrl-C interrupts, would be out of
the pool's reach, and print multiprocessing's own traceback as the parent goes. It does so
through the public API: a pool starts a worker for each ``submit`` that finds none idle,
so it submits one task per worker that waits on a gate opened only after the last submit.
Ctrl-C while the workers start is held back until the last is the pool's (one interrupted
inside its own start, forked but not yet in the pool's table, would be out of reach too),
and then ends them all.
Workers start with ``forkserver`` on Linux and ``spawn`` elsewhere, never ``fork``:
a parent that has imported JAX (or any threaded library) must not fork its threads
into the workers.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing.context import BaseContext
from typing import Any

from mallocgame.errors import MallocGameError, WorkerError

#: A worker's exit status when it ends because its parent ended.
EXIT_PARENT_GONE = 1


def pool_context(preload: Sequence[str] = ()) -> BaseContext:
    """``forkserver`` on Linux, else ``spawn``; never ``fork``.

    ``preload``: modules the fork server imports once, so that each worker forks from
    a process that has them instead of importing them anew. Only read when this
    process's fork server starts; one already running keeps its own list.
    """
    if sys.platform.startswith("linux") and "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        if preload:
            ctx.set_forkserver_preload(list(preload))
        return ctx
    return multiprocessing.get_context("spawn")


def exit_with_parent() -> None:
    """In a worker process: end this process when its parent process ends.

    Starts a daemon thread that blocks on the parent's sentinel (no polling). Does
    nothing in a process that was not started by :mod:`multiprocessing`.
    """
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def wait_then_exit() -> None:
        parent.join()
        os._exit(EXIT_PARENT_GONE)

    threading.Thread(target=wait_then_exit, name="exit-with-parent", daemon=True).start()


_start_gate: Any = None
"""In a worker: the pool's start gate (a :class:`multiprocessing.Event`)."""


def _start_worker(
    gate: Any, initializer: Callable[..., None] | None, initargs: tuple[Any, ...]
) -> None:
    global _start_gate
    _start_gate = gate
    exit_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    if initializer is not None:
        initializer(*initargs)


def _pass_start_gate() -> None:
    _start_gate.wait()


@contextmanager
def _sigint_held() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) back while the block runs, and deliver it, to the handler in
    place before, as the block ends. Only in the main thread, where Python runs its signal
    handlers (elsewhere no KeyboardInterrupt can arise), and only over a handler set from
    Python. The signal is also blocked in this thread meanwhile, as :mod:`multiprocessing`
    does while it starts its resource tracker: a process started in the block (the fork
    server) inherits the mask, so a Ctrl-C to the whole terminal does not break its imports
    either. Blocking alone would not do: the kernel hands a signal blocked here to another
    of the process's threads (JAX's), and Python raises it in this one all the same."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is None
    ):
        yield
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    mask = hasattr(signal, "pthread_sigmask")  # not on Windows
    if mask:
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        if mask:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)  # runs the handler if held
        signal.signal(signal.SIGINT, previous)
        if held:
            signal.raise_signal(signal.SIGINT)


class WorkerPool(ProcessPoolExecutor):
    """A process pool that can also be started and ended at once."""

    def __init__(
        self,
        workers: int,
        mp_context: BaseContext,
        initializer: Callable[..., None] | None = None,
        initargs: tuple[Any, ...] = (),
    ) -> None:
        self._start_gate = mp_context.Event()
        self._workers = workers
        super().__init__(
            max_workers=workers,
            mp_context=mp_context,
            initializer=_start_worker,
            initargs=(self._start_gate, initializer, initargs),
        )

    def start_all(self) -> None:
        """Start every worker now, without waiting for them. A ``submit`` that finds no
        idle worker starts one; no worker is idle while each waits on the closed gate, so
        one such task per worker starts them all, and the gate then opens. Interrupted
        (Ctrl-C, held back until every worker is started: see :func:`_sigint_held`; or an
        error in a ``submit``), it opens the gate and ends the workers started so far."""
        try:
            with _sigint_held():
                for _ in range(self._workers):
                    self.submit(_pass_start_gate)
            self._start_gate.set()
        except BaseException:
            self._start_gate.set()  # else the tasks given wait, and the exit on them
            self.terminate()
            raise

    def terminate(self) -> None:
        """End every worker now (their running tasks are lost) and shut the pool down."""
        processes = list((getattr(self, "_processes", None) or {}).values())
        self.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(timeout=5)


def process_pool(
    workers: int,
    *,
    preload: Sequence[str] = (),
    initializer: Callable[..., None] | None = None,
    initargs: tuple[Any, ...] = (),
) -> WorkerPool:
    """A pool of ``workers`` processes (see :func:`pool_context`), all started (not
    waited for), that each end with this process; ``initializer(*initargs)`` runs in
    each worker as it starts."""
    pool = WorkerPool(workers, pool_context(preload), initializer, initargs)
    pool.start_all()
    return pool


def start_local_ray(cpus: int, object_store_bytes: int | None = None) -> None:
    """Start a new one-node Ray cluster in this process (``address="local"``, even where
    ``RAY_ADDRESS`` names a running one) with ``cpus`` CPUs, no dashboard and Ray's log
    lines at ERROR. Its servers listen where Ray's always do (on Linux, every interface
    of the machine, behind Ray's token authentication), so other drivers on the machine
    can join it at its ``gcs_address``. Ray's own errors pass through
    (``ConnectionError``, ``ValueError``, ``RuntimeError``)."""
    import ray

    ray.init(
        address="local",
        num_cpus=cpus,
        include_dashboard=False,
        logging_level=logging.ERROR,
        log_to_driver=False,
        object_store_memory=object_store_bytes,
    )


def check_ray_address(
    address: str, timeout_s: float = 10.0, error: type[MallocGameError] = WorkerError
) -> None:
    """Refuse, with ``error``, a Ray ``HOST:PORT`` that is malformed, where nothing
    accepts a connection within ``timeout_s``, or where what answers does not speak gRPC
    (HTTP/2), as a Ray cluster's address does: Ray itself would wait on any of them for
    minutes."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise error(f"ray {address!r}: give local, auto or HOST:PORT")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as s:
            grpc = _answers_http2(s, timeout_s)
    except OSError as exc:
        raise error(f"ray {address}: no Ray cluster answers there ({exc})") from None
    if not grpc:
        raise error(f"ray {address}: what answers there is not a Ray cluster (it speaks no gRPC)")


_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""HTTP/2's client connection preface and an empty SETTINGS frame (RFC 9113, 3.4)."""


def _answers_http2(connection: socket.socket, timeout_s: float) -> bool:
    """Whether the server at ``connection`` answers HTTP/2's preface with a frame of type
    SETTINGS (4) within ``timeout_s``, as every gRPC server, a Ray cluster's included, does
    first; another server answers otherwise, closes, or says nothing."""
    connection.settimeout(timeout_s)
    try:
        connection.sendall(_HTTP2_PREFACE)
        head = b""
        while len(head) < 9:
            chunk = connection.recv(9 - len(head))
            if not chunk:
                return False
            head += chunk
    except (TimeoutError, OSError):
        return False
    return head[3] == 4
