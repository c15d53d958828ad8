"""Ctrl-C while a team runs: finish the model calls in flight, then stop; twice: quit now.

NOTE: workaround of an upstream behaviour (langgraph 1.x, Ctrl-C mid-superstep).
LangGraph runs a superstep's tasks (model calls) in worker threads. A
KeyboardInterrupt in the middle of a superstep shuts the thread pool down
under them: the calls in flight finish, cannot save their writes, and print
tracebacks. :class:`GracefulStop` takes over SIGINT while a thread streams:

- the first Ctrl-C prints "stopping: waiting for N model calls in flight…"; the
  stream is stopped once every task of the current superstep has finished (its
  writes are saved), so ``teamgraph resume`` continues without redoing them;
- a second Ctrl-C leaves at once, quietly (the calls in flight are lost, as
  with a crash: the checkpoint keeps everything before them).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

from rich.console import Console
from rich.text import Text

from teamgraph.cli.errors import EXIT_INTERRUPTED

# Graph nodes that make no model call (the router and the human gate).
_NOT_MODEL_NODES = frozenset({"router", "human"})


class StopRequested(Exception):
    """The person pressed Ctrl-C and the calls in flight have finished."""


class GracefulStop:
    """A SIGINT handler for the time a thread streams (a context manager).

    Feed it every ``"tasks"`` stream event (:meth:`track`) and call
    :meth:`check` after each chunk: it raises :class:`StopRequested` once a
    stop was asked for and no task is in flight.
    """

    def __init__(
        self, out: Console, *, drain: Callable[[], None] | None = None, calls: Callable[[], int] | None = None
    ) -> None:
        """Args:
        out: Where the "stopping" line goes.
        drain: Called at the first Ctrl-C: no new model call may start.
        calls: How many model calls are in flight (the scheduler's steps).
        """
        self.out = out
        self._drain = drain
        self._calls = calls
        self.requested = False
        self.in_flight: dict[str, str] = {}
        self._previous: Any = None

    def __enter__(self) -> GracefulStop:
        # NOTE: signal handlers can only be set from the main thread (tests may drive
        # a session from another one); there Ctrl-C keeps its default behaviour.
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def model_calls(self) -> int:
        """How many agent steps (model calls) are running now."""
        if self._calls is not None:
            return self._calls()
        return sum(1 for name in self.in_flight.values() if name not in _NOT_MODEL_NODES)

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            # NOTE: os._exit skips the interpreter's shutdown, which would wait for the
            # worker threads and print their tracebacks; SQLite rolls back any
            # half-written transaction, so the last checkpoint stays intact.
            sys.stdout.flush()
            os._exit(EXIT_INTERRUPTED)
        self.requested = True
        if self._drain is not None:
            self._drain()
        calls = self.model_calls()
        noun = "model call" if calls == 1 else "model calls"
        self.out.print(
            Text(f"stopping: waiting for {calls} {noun} in flight… (Ctrl-C again to quit now)", style="yellow"),
            soft_wrap=True,
        )

    def track(self, event: Mapping[str, Any]) -> None:
        """Take one ``"tasks"`` stream event: a task started, or it finished."""
        task_id = str(event.get("id"))
        if "result" in event or "error" in event:
            self.in_flight.pop(task_id, None)
        else:
            self.in_flight[task_id] = str(event.get("name"))

    def check(self) -> None:
        """Raise :class:`StopRequested` if a stop was asked for and nothing is in flight."""
        if self.requested and not self.in_flight:
            raise StopRequested
