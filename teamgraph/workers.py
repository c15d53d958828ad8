"""Worker threads an exiting interpreter does not wait for: where the agents' model steps run.

NOTE: ``ThreadPoolExecutor`` joins its workers when the interpreter exits. A Ctrl-C (or a
run the caller stops) left the process waiting for every model call still in flight,
whose answers nobody applies (a resumed run makes those calls again), and forever for a
provider that never answers (``ChatOpenAI`` has no timeout by default). Steps write
nothing themselves (the router's pass applies their results and the checkpointer saves
them), so abandoning one at exit loses only that call, as a crash would. The log's
writer and flusher threads stay ordinary pools: their writes must finish.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["LINGER_SECONDS", "DaemonExecutor"]

LINGER_SECONDS = 2.0
"""How long an idle worker waits for more work before its thread ends (a dropped team leaves none)."""

T = TypeVar("T")


@dataclass
class _Work:
    future: Future[Any]
    fn: Callable[..., Any]
    args: tuple[Any, ...]


class DaemonExecutor:
    """Up to ``workers`` daemon threads running what is submitted, in order, like ``ThreadPoolExecutor``.

    Args:
        workers: The most threads it starts (one more only when none is idle).
        name: The threads' name prefix.
        linger: Seconds an idle thread waits for work before it ends.
    """

    def __init__(self, *, workers: int, name: str, linger: float = LINGER_SECONDS) -> None:
        self._workers = workers
        self._linger = linger
        self._name = name
        self._queue: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._started = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]:
        """Run ``fn(*args)`` on a worker; its future has its result or its exception."""
        future: Future[T] = Future()
        self._queue.put(_Work(future, fn, args))
        if not self._idle.acquire(blocking=False):
            with self._lock:
                if self._started < self._workers:
                    name = f"{self._name}_{self._started}"
                    threading.Thread(target=self._work, name=name, daemon=True).start()
                    self._started += 1
        return future

    def _work(self) -> None:
        while True:
            try:
                work = self._queue.get(timeout=self._linger)
            except queue.Empty:
                with self._lock:
                    # NOTE: a thread still counted idle ends; one whose idle mark a submitter
                    # just took stays for the work that submitter queued.
                    if self._idle.acquire(blocking=False):
                        self._started -= 1
                        return
                continue
            if work.future.set_running_or_notify_cancel():
                try:
                    result = work.fn(*work.args)
                except BaseException as exc:  # noqa: BLE001 - the future carries it, as ThreadPoolExecutor's does
                    work.future.set_exception(exc)
                else:
                    work.future.set_result(result)
            del work  # NOTE: drop the finished work's references before waiting for the next
            self._idle.release()
