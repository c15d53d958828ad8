"""Pausing Python's garbage collector while a load builds objects that all survive it.

NOTE: decoding a stored thread makes tens of thousands of objects at once (rows,
batches, records, messages), and every one of them is kept. CPython's collector runs a
young collection every 700 allocations; during a load those find nothing to free, and
each promotes what it scanned, so a long thread's load pushes the process into full
collections. With LangGraph and LangChain imported a full collection scans ~130 000
objects (80-100 ms here): at 5 000 messages a resume took one or two of them, at 500
none. msgpack's documentation gives the same advice for large unpacks.

The pause sets the young generation's threshold to 0 (which turns automatic collection
off) and puts the thresholds back when the last paused block ends: ``gc.enable()`` and
``gc.disable()`` stay the user's, whenever they call them. A process forked during a
pause gets its thresholds back at once (the pausing thread does not exist in it).
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import ParamSpec, TypeVar

__all__ = ["collector_paused", "with_collector_paused"]

P = ParamSpec("P")
R = TypeVar("R")


class _Pause:
    """The loads running with the collector paused (several threads' may overlap)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holders = 0
        self.thresholds: tuple[int, ...] | None = None

    def begin(self) -> None:
        with self.lock:
            if self.holders == 0:
                self.thresholds = gc.get_threshold()
                gc.set_threshold(0)
            self.holders += 1

    def end(self) -> None:
        with self.lock:
            self.holders -= 1
            if self.holders == 0:
                self._restore()

    def _restore(self) -> None:
        if self.thresholds is not None:
            gc.set_threshold(*self.thresholds)
            self.thresholds = None

    def after_fork(self) -> None:
        # NOTE: only the forking thread lives on in the child: its lock may be held by a
        # thread that is gone, and its count by loads that will never end.
        self.lock = threading.Lock()
        self.holders = 0
        self._restore()


_PAUSE = _Pause()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_PAUSE.after_fork)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause automatic garbage collection for the block (nested and threaded uses count).

    The thresholds the collector had when the first paused block began are put back
    when the last one ends; the collector's on/off switch is never touched.
    """
    _PAUSE.begin()
    try:
        yield
    finally:
        _PAUSE.end()


def with_collector_paused(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run inside :func:`collector_paused`."""

    @wraps(fn)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        with collector_paused():
            return fn(*args, **kwargs)

    return paused
