"""Steps in flight: agents' model steps run in a pool and outlive the superstep that issued them.

The router issues a step (a *dispatch*, numbered) and records it in the state
(``team["in_flight"]``); the pool runs it; a later router pass takes its result.
A result is taken only for the dispatch the state still records, so a stale one
(a resumed or rewound thread) is dropped, and a dispatch the pool does not hold
(a new process after a crash) is issued again from the same state.

``VirtualStepPool`` is the same contract in virtual time, for tests: steps finish in
an order their latencies fix, so an out-of-order interleaving can be pinned.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Protocol

StepResult = dict[str, Any]

DRAIN_CHECK_SECONDS = 0.1
"""How often a wait looks whether its thread started draining."""


def take(finished: Mapping[str, Future[StepResult]], remove: Callable[[str], object]) -> dict[str, StepResult]:
    """The results of ``finished`` steps, each ``remove``d from its pool; a failure re-raises.

    NOTE: a failed step (or a cancelled one) leaves the pool alone: the others stay for the
    retried pass (taken and dropped, they would be issued again, their calls run twice).
    """
    for agent, future in finished.items():
        try:
            future.result()
        except BaseException:
            remove(agent)
            raise
    for agent in finished:
        remove(agent)
    return {agent: future.result() for agent, future in finished.items()}


class Steps(Protocol):
    """What the scheduler needs of a pool of steps (``StepPool``, ``VirtualStepPool``)."""

    draining: set[str]

    def running(self, thread_id: str, dispatches: Mapping[str, int]) -> dict[str, int]: ...

    def ensure(self, thread_id: str, agent: str, seq: int, step: Callable[[], StepResult]) -> None: ...

    def wait(self, thread_id: str, dispatches: Mapping[str, int], *, every: bool, timeout: float | None) -> None: ...

    def take_done(self, thread_id: str, dispatches: Mapping[str, int]) -> dict[str, StepResult]: ...


class StepPool:
    """A team's steps in flight, by (thread id, agent).

    Attributes:
        draining: Threads whose run is stopping (the CLI's first Ctrl-C): no new step
            is started for them, and the scheduler waits for the ones running.
    """

    def __init__(self, *, workers: int) -> None:
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="teamgraph-step")
        self._futures: dict[tuple[str, str], tuple[int, Future[StepResult]]] = {}
        self._workers = workers
        self._lock = threading.Lock()
        self.draining: set[str] = set()
        _POOLS.add(self)

    def _after_fork(self) -> None:
        """In a forked child: the parent's workers do not exist there; its dispatches are issued again."""
        self._executor = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="teamgraph-step")
        self._futures = {}
        self._lock = threading.Lock()

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
        """The results of ``dispatches`` that are done (removed from the pool); errors re-raise (``take``)."""
        finished = {
            agent: future
            for agent, seq in dispatches.items()
            if (future := self._future(thread_id, agent, seq)) is not None and future.done()
        }

        def remove(agent: str) -> None:
            with self._lock:
                self._futures.pop((thread_id, agent), None)

        return take(finished, remove)

    def _future(self, thread_id: str, agent: str, seq: int) -> Future[StepResult] | None:
        with self._lock:
            held = self._futures.get((thread_id, agent))
        return held[1] if held is not None and held[0] == seq else None


_POOLS: weakref.WeakSet[StepPool] = weakref.WeakSet()
"""Every live pool, so that a forked child gives each workers of its own."""


def _pools_after_fork() -> None:
    for pool in list(_POOLS):
        pool._after_fork()


os.register_at_fork(after_in_child=_pools_after_fork)


class VirtualStepPool:
    """Steps that finish in virtual time, one after another: out-of-order completions, deterministic.

    A drop-in for ``StepPool`` in tests (``team.runtime.steps = VirtualStepPool(latency=...)``,
    before the first run). A step is run when the scheduler waits for it, in the order of
    its virtual finish time (issue time + ``latency(agent, seq)``; ties by agent name), in
    the waiting thread. Its result is the same as if it had run when issued: a step reads
    only the state that issued it. So ``Policy.scheduling="completions"`` interleavings can
    be pinned and replayed, instead of depending on threads' timing.

    NOTE: virtual time is not the runtime's clock: a wait never ends at a request's
    deadline before the first step finishes, as the real pool's does. A time-out that
    races an answer is tested with a ``FakeClock`` and the real pool.

    Args:
        latency: ``(agent, n) -> seconds`` of the agent's ``n``-th step in a thread (0: its first).

    Attributes:
        now: The virtual time (seconds) of the last completion.
        draining: As ``StepPool.draining``.
    """

    def __init__(self, *, latency: Callable[[str, int], float]) -> None:
        self._latency = latency
        self._issued: dict[tuple[str, str], tuple[int, float, contextvars.Context, Callable[[], StepResult]]] = {}
        self._finished: dict[tuple[str, str], tuple[int, Future[StepResult]]] = {}
        self._counts: dict[tuple[str, str], int] = {}
        self.now = 0.0
        self.draining: set[str] = set()

    def running(self, thread_id: str, dispatches: Mapping[str, int]) -> dict[str, int]:
        """The dispatches the pool holds (issued or finished, not taken yet)."""
        return {agent: seq for agent, seq in dispatches.items() if self._holds(thread_id, agent, seq)}

    def ensure(self, thread_id: str, agent: str, seq: int, step: Callable[[], StepResult]) -> None:
        """Issue dispatch ``seq`` of ``agent`` at the current virtual time, unless held already."""
        if self._holds(thread_id, agent, seq):
            return
        key = (thread_id, agent)
        self._finished.pop(key, None)
        n = self._counts[key] = self._counts.get(key, -1) + 1
        self._issued[key] = (seq, self.now + self._latency(agent, n), contextvars.copy_context(), step)

    def wait(self, thread_id: str, dispatches: Mapping[str, int], *, every: bool, timeout: float | None) -> None:
        """Run the first of ``dispatches`` to finish (and any finishing at the same time), or every one."""
        del timeout  # NOTE: virtual time never waits on the clock
        keys = sorted(
            (finish, agent)
            for agent, seq in dispatches.items()
            if (held := self._issued.get((thread_id, agent))) is not None and held[0] == seq
            for finish in (held[1],)
        )
        if not keys:
            return
        last = keys[-1][0] if every or thread_id in self.draining else keys[0][0]
        for finish, agent in keys:
            if finish > last:
                break
            seq, _, context, step = self._issued.pop((thread_id, agent))
            future: Future[StepResult] = Future()
            try:
                future.set_result(context.run(step))
            except Exception as exc:
                future.set_exception(exc)
            self._finished[(thread_id, agent)] = (seq, future)
            self.now = max(self.now, finish)

    def take_done(self, thread_id: str, dispatches: Mapping[str, int]) -> dict[str, StepResult]:
        """The results of ``dispatches`` that finished (removed from the pool); errors re-raise (``take``)."""
        finished = {
            agent: held[1]
            for agent, seq in dispatches.items()
            if (held := self._finished.get((thread_id, agent))) is not None and held[0] == seq
        }
        return take(finished, lambda agent: self._finished.pop((thread_id, agent), None))

    def _holds(self, thread_id: str, agent: str, seq: int) -> bool:
        key = (thread_id, agent)
        return any(held is not None and held[0] == seq for held in (self._issued.get(key), self._finished.get(key)))
