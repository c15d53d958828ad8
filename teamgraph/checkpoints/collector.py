"""Keeping Python's garbage collector off the objects that live as long as the process.

When a team graph is compiled, the modules a run uses (LangGraph, LangChain, pydantic:
~130 000 objects) are all imported. Left to the collector, the first full collection
after the imports scans them all (55-100 ms here) in the middle of the first run, and
every later full collection (a long thread's load makes several) scans them again.
:func:`freeze_long_lived` moves them to the permanent generation once per process, as
``gc.freeze``'s documentation advises for objects made at start-up; refcounting still
frees any of them that goes away. ``bench/NOTES.md`` has the figures with and without.
"""

from __future__ import annotations

import gc
import threading

__all__ = ["freeze_long_lived"]

_FREEZE_GUARD = threading.Lock()
_frozen = False


def freeze_long_lived() -> None:
    """Take the objects alive now out of every later collection, once per process.

    One collection first, so no garbage is frozen with them.
    """
    global _frozen
    with _FREEZE_GUARD:
        if _frozen:
            return
        _frozen = True
        gc.collect()
        gc.freeze()
