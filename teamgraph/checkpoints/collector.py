"""Pausing Python's garbage collector while a load builds objects that all survive it.

NOTE: decoding a stored thread makes tens of thousands of objects at once (rows,
batches, records, messages), and every one of them is kept. CPython's collector runs a
young collection every 700 allocations; during a load those find nothing to free, and
each promotes what it scanned, so a long thread's load pushes the process into full
collections. With LangGraph and LangChain imported a full collection scans ~130 000
objects (80-100 ms here): at 5 000 messages a resume took one or two of them, at 500
none. msgpack's documentation gives the same advice for large unpacks. The collector is
paused only for the load itself, and left alone when the user has turned it off.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import ParamSpec, TypeVar

__all__ = ["collector_paused", "with_collector_paused"]

_LOCK = threading.Lock()
_holders = 0
"""Loads running with the collector paused (loads of several threads may overlap)."""
_paused_by_us = False

P = ParamSpec("P")
R = TypeVar("R")


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause automatic garbage collection for the block (nested and threaded uses count).

    The collector is turned on again when the last paused block ends, and only if it
    was on when the first one began.
    """
    global _holders, _paused_by_us
    with _LOCK:
        if _holders == 0:
            _paused_by_us = gc.isenabled()
            if _paused_by_us:
                gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _LOCK:
            _holders -= 1
            if _holders == 0 and _paused_by_us:
                _paused_by_us = False
                gc.enable()


def with_collector_paused(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run inside :func:`collector_paused`."""

    @wraps(fn)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        with collector_paused():
            return fn(*args, **kwargs)

    return paused
