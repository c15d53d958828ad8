"""Steps in flight: agents' model steps run in a pool and outlive the superstep that issued them.

The router issues a step (a *dispatch*, numbered) and records it in the state
(``team["in_flight"]``); the pool runs it; a later router pass takes its result.
A result is taken only for the dispatch the state still records, so a stale one
(a resumed or rewound thread) is dropped, and a dispatch the pool does not hold
(a new process after a crash) is issued again from the same state.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

StepResult = dict[str, Any]

DRAIN_CHECK_SECONDS = 0.1
"""How often a wait looks whether its thread started draining."""


class StepPool:
    """A team's steps in flight, by (thread id, agent).

    Attributes:
        draining: Threads whose run is stopping (the CLI's first Ctrl-C): no new step
            is started for them, and the scheduler waits for the ones running.
    """

    def __init__(self, *, workers: int) -> None:
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="teamgraph-step")
        self._futures: dict[tuple[str, str], tuple[int, Future[StepResult]]] = {}
        self._lock = threading.Lock()
        self.draining: set[str] = set()

    def running(self, thread_id: str, dispatches: Mapping[str, int]) -> dict[str, int]:
        """The dispatches the pool holds (running or finished, not taken yet)."""
        return {agent: seq for agent, seq in dispatches.items() if self._future(thread_id, agent, seq) is not None}

    def ensure(self, thread_id: str, agent: str, seq: int, step: Callable[[], StepResult]) -> None:
        """Run dispatch ``seq`` of ``agent`` unless the pool already runs (or ran) it.

        NOTE: the step runs in a copy of the issuing task's context, so its config,
        callbacks and stream writer (``stream_mode`` messages and custom) are that task's.
        """
        key = (thread_id, agent)
        with self._lock:
            held = self._futures.get(key)
            if held is not None and held[0] == seq:
                return
            context = contextvars.copy_context()
            self._futures[key] = (seq, self._executor.submit(context.run, step))

    def wait(self, thread_id: str, dispatches: Mapping[str, int], *, every: bool, timeout: float | None) -> None:
        """Wait until one (or, with ``every``, each) of ``dispatches`` is done, at most ``timeout`` s."""
        futures = [f for agent, seq in dispatches.items() if (f := self._future(thread_id, agent, seq)) is not None]
        deadline = None if timeout is None else time.monotonic() + timeout
        while futures:
            # NOTE: in short slices, so a drain (Ctrl-C) turns "the first" into "every one".
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            slice_ = DRAIN_CHECK_SECONDS if left is None else min(left, DRAIN_CHECK_SECONDS)
            done, pending = wait(futures, timeout=slice_, return_when=FIRST_COMPLETED)
            if not pending or (done and not every and thread_id not in self.draining):
                return
            futures = list(pending)

    def take_done(self, thread_id: str, dispatches: Mapping[str, int]) -> dict[str, StepResult]:
        """The results of ``dispatches`` that are done (removed from the pool); errors re-raise."""
        done: dict[str, StepResult] = {}
        for agent, seq in dispatches.items():
            future = self._future(thread_id, agent, seq)
            if future is not None and future.done():
                with self._lock:
                    self._futures.pop((thread_id, agent), None)
                done[agent] = future.result()
        return done

    def _future(self, thread_id: str, agent: str, seq: int) -> Future[StepResult] | None:
        with self._lock:
            held = self._futures.get((thread_id, agent))
        return held[1] if held is not None and held[0] == seq else None
