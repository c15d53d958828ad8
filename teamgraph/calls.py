"""Model calls in flight: the one part of an agent's step that may outlive a superstep.

The router issues a step (a *dispatch*, numbered) and records it in the state
(``team["in_flight"]``); the same pass starts the step's model call here, on the state its
checkpoint holds. The router then waits for the next calls to finish and sends each to its
agent's node, where the step is taken: the answer, the tools, the history, the effects
(``teamgraph/nodes/role_graph.py``). So nobody waits for another member's call, and
everything else of a step happens in a graph task.

A call is held for the dispatch the state records; a dispatch the pool does not hold (a
new process after a crash) is called again from the state that records it.

``VirtualCallPool`` is the same contract in virtual time, for tests: calls finish in an
order their latencies fix, so an out-of-order interleaving can be pinned and replayed.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Protocol

from langchain_core.messages import BaseMessage

from teamgraph.workers import DaemonExecutor

Answer = Sequence[BaseMessage] | None
"""What a call gives the step: its messages (notices, compaction markers, the answer last), or
None for a step that makes no call (its loop guard stopped the turn)."""

DRAIN_CHECK_SECONDS = 0.1
"""How often a wait looks whether its run started draining."""


class Calls(Protocol):
    """What the scheduler and the agents' nodes need of a pool of calls (``CallPool``, ``VirtualCallPool``)."""

    draining: set[str]

    def start(self, run: str, agent: str, seq: int, call: Callable[[], Answer]) -> None: ...

    def running(self, run: str, dispatches: Mapping[str, int]) -> dict[str, int]: ...

    def wait(self, run: str, dispatches: Mapping[str, int], *, every: bool, timeout: float | None) -> None: ...

    def finished(self, run: str, dispatches: Mapping[str, int]) -> dict[str, int]: ...

    def take(self, run: str, agent: str, seq: int) -> Future[Answer] | None: ...

    def forget(self, run: str) -> None: ...


class CallPool:
    """A team's model calls in flight, by (run, agent): ``run`` is the run's key (``teamgraph/runs.py``).

    Each run has workers of its own (``workers``: ``Policy.max_parallel`` + 1), so
    ``max_parallel`` limits one team's run, not every run the process serves.

    Attributes:
        draining: Runs that are stopping (the CLI's first Ctrl-C): no new call is started
            for them, and the scheduler waits for the ones running.
    """

    def __init__(self, *, workers: int) -> None:
        self._workers = workers
        self.draining: set[str] = set()
        self._start()
        _POOLS.add(self)

    def _start(self) -> None:
        # NOTE: daemon threads: an interpreter that exits (a Ctrl-C) does not wait for the
        # model calls in flight (teamgraph/workers.py). One executor per run: concurrent teams
        # (threads) in one process never wait for each other's calls; idle threads end.
        self._executors: dict[str, DaemonExecutor] = {}
        self._futures: dict[tuple[str, str], tuple[int, Future[Answer]]] = {}
        self._lock = threading.Lock()

    def start(self, run: str, agent: str, seq: int, call: Callable[[], Answer]) -> None:
        """Start dispatch ``seq`` of ``agent``'s call unless the pool holds it already.

        NOTE: the call runs in a copy of the issuing task's context, so its callbacks and
        stream (``stream_mode="messages"``) are the run's.
        """
        key = (run, agent)
        with self._lock:
            held = self._futures.get(key)
            if held is not None and held[0] == seq:
                return
            context = contextvars.copy_context()
            executor = self._executors.get(run)
            if executor is None:
                executor = self._executors[run] = DaemonExecutor(workers=self._workers, name="teamgraph-call")
            self._futures[key] = (seq, executor.submit(context.run, call))

    def running(self, run: str, dispatches: Mapping[str, int]) -> dict[str, int]:
        """The dispatches whose call the pool holds (running or finished, not taken yet)."""
        return {agent: seq for agent, seq in dispatches.items() if self._future(run, agent, seq) is not None}

    def wait(self, run: str, dispatches: Mapping[str, int], *, every: bool, timeout: float | None) -> None:
        """Wait until one (or, with ``every``, each) of ``dispatches``' calls is done, at most ``timeout`` s."""
        futures = [f for agent, seq in dispatches.items() if (f := self._future(run, agent, seq)) is not None]
        deadline = None if timeout is None else time.monotonic() + timeout
        while futures:
            # NOTE: in short slices, so a drain (Ctrl-C) turns "the first" into "every one".
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            slice_ = DRAIN_CHECK_SECONDS if left is None else min(left, DRAIN_CHECK_SECONDS)
            done, pending = wait(futures, timeout=slice_, return_when=FIRST_COMPLETED)
            if not pending or (done and not every and run not in self.draining):
                return
            futures = list(pending)

    def finished(self, run: str, dispatches: Mapping[str, int]) -> dict[str, int]:
        """The dispatches whose call is done (answered or failed): their steps can be taken."""
        return {
            agent: seq
            for agent, seq in dispatches.items()
            if (future := self._future(run, agent, seq)) is not None and future.done()
        }

    def take(self, run: str, agent: str, seq: int) -> Future[Answer] | None:
        """Dispatch ``seq``'s call (it leaves the pool), or None when the pool does not hold it."""
        with self._lock:
            held = self._futures.get((run, agent))
            if held is None or held[0] != seq:
                return None
            del self._futures[(run, agent)]
        return held[1]

    def forget(self, run: str) -> None:
        """The run ``run`` ended and nothing can resume it: its calls leave the pool.

        NOTE: a run without a thread id, or a team inside a parent graph that saves nothing,
        has a key no later run has: kept, what it left in the pool would pile up run after run.
        """
        with self._lock:
            futures = [self._futures.pop(key)[1] for key in [k for k in self._futures if k[0] == run]]
            self._executors.pop(run, None)
        for future in futures:
            future.cancel()  # NOTE: one not started yet is never made; a running one ends unused

    def _after_fork(self) -> None:
        """In a forked child: the parent's workers do not exist there; its dispatches are called again."""
        self._start()

    def _future(self, run: str, agent: str, seq: int) -> Future[Answer] | None:
        with self._lock:
            held = self._futures.get((run, agent))
        return held[1] if held is not None and held[0] == seq else None


_POOLS: weakref.WeakSet[CallPool] = weakref.WeakSet()
"""Every live pool, so that a forked child gives each workers of its own."""


def _pools_after_fork() -> None:
    for pool in list(_POOLS):
        pool._after_fork()


os.register_at_fork(after_in_child=_pools_after_fork)


class VirtualCallPool:
    """Calls that finish in virtual time, one after another: out-of-order completions, deterministic.

    A drop-in for ``CallPool`` in tests (``team.runtime.calls = VirtualCallPool(latency=...)``,
    before the first run). A call is made when the scheduler waits for it, in the order of
    its virtual finish time (issue time + ``latency(agent, n)``; ties by agent name), in
    the waiting thread. Its answer is the same as if it had been made when issued: a call
    reads only the state that issued it. So ``Policy.scheduling="completions"`` interleavings
    can be pinned and replayed, instead of depending on threads' timing.

    NOTE: virtual time is not the runtime's clock: a wait never ends at a request's
    deadline before the first call finishes, as the real pool's does. A time-out that
    races an answer is tested with a ``FakeClock`` and the real pool.

    Args:
        latency: ``(agent, n) -> seconds`` of the agent's ``n``-th call in a thread (0: its first).

    Attributes:
        now: The virtual time (seconds) of the last completion.
        draining: As ``CallPool.draining``.
    """

    def __init__(self, *, latency: Callable[[str, int], float]) -> None:
        self._latency = latency
        self._issued: dict[tuple[str, str], tuple[int, float, contextvars.Context, Callable[[], Answer]]] = {}
        self._finished: dict[tuple[str, str], tuple[int, Future[Answer]]] = {}
        self._counts: dict[tuple[str, str], int] = {}
        self.now = 0.0
        self.draining: set[str] = set()

    def start(self, run: str, agent: str, seq: int, call: Callable[[], Answer]) -> None:
        """Issue dispatch ``seq``'s call at the current virtual time, unless held already."""
        if self._holds(run, agent, seq):
            return
        key = (run, agent)
        self._finished.pop(key, None)
        n = self._counts[key] = self._counts.get(key, -1) + 1
        self._issued[key] = (seq, self.now + self._latency(agent, n), contextvars.copy_context(), call)

    def running(self, run: str, dispatches: Mapping[str, int]) -> dict[str, int]:
        """The dispatches whose call the pool holds (issued or finished, not taken yet)."""
        return {agent: seq for agent, seq in dispatches.items() if self._holds(run, agent, seq)}

    def wait(self, run: str, dispatches: Mapping[str, int], *, every: bool, timeout: float | None) -> None:
        """Make the first of ``dispatches``' calls to finish (and any finishing at the same time), or every one."""
        del timeout  # NOTE: virtual time never waits on the clock
        keys = sorted(
            (finish, agent)
            for agent, seq in dispatches.items()
            if (held := self._issued.get((run, agent))) is not None and held[0] == seq
            for finish in (held[1],)
        )
        if not keys:
            return
        last = keys[-1][0] if every or run in self.draining else keys[0][0]
        for finish, agent in keys:
            if finish > last:
                break
            seq, _, context, call = self._issued.pop((run, agent))
            future: Future[Answer] = Future()
            try:
                future.set_result(context.run(call))
            except Exception as exc:
                future.set_exception(exc)
            self._finished[(run, agent)] = (seq, future)
            self.now = max(self.now, finish)

    def finished(self, run: str, dispatches: Mapping[str, int]) -> dict[str, int]:
        """The dispatches whose call was made (answered or failed)."""
        return {
            agent: seq
            for agent, seq in dispatches.items()
            if (held := self._finished.get((run, agent))) is not None and held[0] == seq
        }

    def take(self, run: str, agent: str, seq: int) -> Future[Answer] | None:
        """Dispatch ``seq``'s made call (it leaves the pool), or None."""
        held = self._finished.get((run, agent))
        if held is None or held[0] != seq:
            return None
        del self._finished[(run, agent)]
        return held[1]

    def forget(self, run: str) -> None:
        """The run ``run`` ended and nothing can resume it: its calls leave the pool."""
        for held in (self._issued, self._finished, self._counts):
            for key in [k for k in held if k[0] == run]:
                del held[key]

    def _holds(self, run: str, agent: str, seq: int) -> bool:
        key = (run, agent)
        return any(held is not None and held[0] == seq for held in (self._issued.get(key), self._finished.get(key)))
