"""Steps in flight: agents' model steps run in a pool and outlive the superstep that issued them.

The router issues a step (a *dispatch*, numbered) and records it in the state
(``team["in_flight"]``); the pool runs it; a later router pass takes its result.
A result is taken only for the dispatch the state still records, so a stale one
(a resumed or rewound thread) is dropped, and a dispatch the pool does not hold
(a new process after a crash) is issued again from the same state.

A step's first model call may be *thought ahead*: started by the pass that issues the
step, before the checkpoint recording it is written (``StepPool.think_ahead``). The
step, once started, uses that call only if it would have sent the very same prompt
(``teamgraph/ahead.py``); its tools run after the checkpoint, as always. A crash loses the
call like any call in flight.

``VirtualStepPool`` is the same contract in virtual time, for tests: steps finish in
an order their latencies fix, so an out-of-order interleaving can be pinned.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any, Protocol

from teamgraph.ahead import AHEAD_DROPPED, AHEAD_STARTED, Ahead, CallDropped, Prepared
from teamgraph.workers import DaemonExecutor

StepResult = dict[str, Any]

DRAIN_CHECK_SECONDS = 0.1
"""How often a wait looks whether its run started draining."""


def results(finished: Mapping[str, Future[StepResult]], remove: Callable[[str], object]) -> dict[str, StepResult]:
    """The results of ``finished`` steps (they stay in the pool); a failure is ``remove``d and re-raises.

    NOTE: a failed step (or a cancelled one) leaves the pool; the others stay for the
    retried pass (dropped, they would be issued again, their calls run twice).
    """
    for agent, future in finished.items():
        try:
            future.result()
        except BaseException:
            remove(agent)
            raise
    return {agent: future.result() for agent, future in finished.items()}


class Steps(Protocol):
    """What the scheduler needs of a pool of steps (``StepPool``, ``VirtualStepPool``)."""

    draining: set[str]
    thinks_ahead: bool

    def running(self, run: str, dispatches: Mapping[str, int]) -> dict[str, int]: ...

    def ensure(self, run: str, agent: str, seq: int, step: Callable[[], StepResult]) -> None: ...

    def wait(self, run: str, dispatches: Mapping[str, int], *, every: bool, timeout: float | None) -> None: ...

    def done(self, run: str, dispatches: Mapping[str, int]) -> dict[str, StepResult]: ...

    def release(self, run: str, dispatches: Mapping[str, int]) -> None: ...

    def holds_ahead(self, run: str, agent: str, seq: int, reads: tuple[Any, ...]) -> bool: ...

    def think_ahead(self, run: str, agent: str, seq: int, reads: tuple[Any, ...], prepared: Prepared) -> None: ...

    def close_ahead(self, run: str) -> None: ...

    def forget(self, run: str) -> None: ...

    def ahead_of(self, run: str, agent: str, seq: int) -> Ahead | None: ...


class StepPool:
    """A team's steps in flight, by (run, agent): ``run`` is the run's key (``teamgraph/graph/runs.py``).

    Attributes:
        draining: Runs that are stopping (the CLI's first Ctrl-C): no new step
            is started for them, and the scheduler waits for the ones running.
        ahead_counts: Thought-ahead calls started, claimed by their step, dropped (made on
            another state, replaced, or for a dispatch that was never started), and late.
        thinks_ahead: True: it starts the first model call of a step when the step is issued.
    """

    thinks_ahead = True

    def __init__(self, *, workers: int) -> None:
        self._workers = workers
        self.draining: set[str] = set()
        self.ahead_counts: Counter[str] = Counter()
        self._start()
        _POOLS.add(self)

    def _start(self) -> None:
        # NOTE: daemon threads: an interpreter that exits (a Ctrl-C) does not wait for the
        # model calls in flight (teamgraph/workers.py).
        self._executor = DaemonExecutor(workers=self._workers, name="teamgraph-step")
        # NOTE: thought-ahead calls have workers of their own: a step waiting for its call
        # must never hold the worker that call is queued for.
        self._thinking = DaemonExecutor(workers=self._workers, name="teamgraph-ahead")
        self._futures: dict[tuple[str, str], tuple[int, Future[StepResult]]] = {}
        self._ahead: dict[tuple[str, str], tuple[int, Ahead]] = {}
        self._lock = threading.Lock()

    def _after_fork(self) -> None:
        """In a forked child: the parent's workers do not exist there; its dispatches are issued again."""
        self._start()

    def running(self, run: str, dispatches: Mapping[str, int]) -> dict[str, int]:
        """The dispatches the pool holds (running or finished, not taken yet)."""
        return {agent: seq for agent, seq in dispatches.items() if self._future(run, agent, seq) is not None}

    def ensure(self, run: str, agent: str, seq: int, step: Callable[[], StepResult]) -> None:
        """Run dispatch ``seq`` of ``agent`` unless the pool already runs (or ran) it.

        NOTE: the step runs in a copy of the issuing task's context, so its config,
        callbacks and stream writer (``stream_mode`` messages and custom) are that task's.
        """
        key = (run, agent)
        with self._lock:
            held = self._futures.get(key)
            if held is not None and held[0] == seq:
                return
            context = contextvars.copy_context()
            self._futures[key] = (seq, self._executor.submit(context.run, step))

    def wait(self, run: str, dispatches: Mapping[str, int], *, every: bool, timeout: float | None) -> None:
        """Wait until one (or, with ``every``, each) of ``dispatches`` is done, at most ``timeout`` s."""
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

    def done(self, run: str, dispatches: Mapping[str, int]) -> dict[str, StepResult]:
        """The results of ``dispatches`` that are done, still held until ``release``; errors re-raise."""
        finished = {
            agent: future
            for agent, seq in dispatches.items()
            if (future := self._future(run, agent, seq)) is not None and future.done()
        }
        return results(finished, lambda agent: self.release(run, {agent: dispatches[agent]}))

    def release(self, run: str, dispatches: Mapping[str, int]) -> None:
        """Forget ``dispatches`` (taken by a pass whose state records them)."""
        with self._lock:
            for agent, seq in dispatches.items():
                held = self._futures.get((run, agent))
                if held is not None and held[0] == seq:
                    del self._futures[(run, agent)]

    def holds_ahead(self, run: str, agent: str, seq: int, reads: tuple[Any, ...]) -> bool:
        """Whether a call no step used yet is held for dispatch ``seq`` of ``agent``, made on ``reads``.

        NOTE: a pass retried after a failure issues the same dispatch again: that call serves.
        """
        with self._lock:
            held = self._ahead.get((run, agent))
        return held is not None and held[0] == seq and not held[1].claimed and held[1].reads == reads

    def think_ahead(self, run: str, agent: str, seq: int, reads: tuple[Any, ...], prepared: Prepared) -> None:
        """Start the first model call of dispatch ``seq`` of ``agent``, made on what it ``reads``.

        NOTE: it runs on a worker, in a copy of the issuing task's context (config,
        callbacks, stream writer), as a step does. Any other call held for the agent is dropped.
        """
        key = (run, agent)
        context = contextvars.copy_context()
        answer = self._thinking.submit(context.run, prepared.call)
        ahead = Ahead(reads=reads, prepared=prepared, answer=answer, counts=self.ahead_counts, lock=self._lock)
        with self._lock:
            replaced = self._ahead.get(key)
            self._ahead[key] = (seq, ahead)
            self.ahead_counts[AHEAD_STARTED] += 1
            self.ahead_counts[AHEAD_DROPPED] += replaced is not None
        if replaced is not None:
            replaced[1].drop()

    def close_ahead(self, run: str) -> None:
        """The run ``run`` ended: what was opened for its unused calls ends (their answers stay).

        NOTE: a run that stops after a pass (an error, a closed stream, the recursion limit,
        a drain) must not leave their traced runs open; a resumed run may still use the answers.
        """
        with self._lock:
            held = [ahead for (owner, _), (_, ahead) in self._ahead.items() if owner == run]
        for ahead in held:
            ahead.close(CallDropped("the run ended before a step used this call"))

    def forget(self, run: str) -> None:
        """The run ``run`` ended and nothing can resume it: its steps and calls leave the pool.

        NOTE: a run without a thread id, or a team inside a parent graph that saves nothing,
        has a key no later run has: kept, what it left in the pool would pile up run after run.
        """
        with self._lock:
            futures = [self._futures.pop(key)[1] for key in [k for k in self._futures if k[0] == run]]
            held = [self._ahead.pop(key)[1] for key in [k for k in self._ahead if k[0] == run]]
            self.ahead_counts[AHEAD_DROPPED] += len(held)
        for future in futures:
            future.cancel()  # NOTE: one not started yet is never run; a running one ends unused
        for ahead in held:
            ahead.drop()

    def ahead_of(self, run: str, agent: str, seq: int) -> Ahead | None:
        """The thought-ahead call of dispatch ``seq`` of ``agent`` (it leaves the pool), if any.

        NOTE: a call for an earlier dispatch is dropped; one for a later dispatch stays
        (each superstep starts every dispatch it records, the running ones too).
        """
        key = (run, agent)
        with self._lock:
            held = self._ahead.get(key)
            if held is None or held[0] > seq:
                return None
            del self._ahead[key]
            stale = held[0] < seq
            self.ahead_counts[AHEAD_DROPPED] += stale
        if stale:
            held[1].drop()
            return None
        return held[1]

    def _future(self, run: str, agent: str, seq: int) -> Future[StepResult] | None:
        with self._lock:
            held = self._futures.get((run, agent))
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
        thinks_ahead: False: a step's first call is made when the step runs, in virtual time.
    """

    thinks_ahead = False

    def __init__(self, *, latency: Callable[[str, int], float]) -> None:
        self._latency = latency
        self._issued: dict[tuple[str, str], tuple[int, float, contextvars.Context, Callable[[], StepResult]]] = {}
        self._finished: dict[tuple[str, str], tuple[int, Future[StepResult]]] = {}
        self._counts: dict[tuple[str, str], int] = {}
        self.now = 0.0
        self.draining: set[str] = set()

    def running(self, run: str, dispatches: Mapping[str, int]) -> dict[str, int]:
        """The dispatches the pool holds (issued or finished, not taken yet)."""
        return {agent: seq for agent, seq in dispatches.items() if self._holds(run, agent, seq)}

    def ensure(self, run: str, agent: str, seq: int, step: Callable[[], StepResult]) -> None:
        """Issue dispatch ``seq`` of ``agent`` at the current virtual time, unless held already."""
        if self._holds(run, agent, seq):
            return
        key = (run, agent)
        self._finished.pop(key, None)
        n = self._counts[key] = self._counts.get(key, -1) + 1
        self._issued[key] = (seq, self.now + self._latency(agent, n), contextvars.copy_context(), step)

    def wait(self, run: str, dispatches: Mapping[str, int], *, every: bool, timeout: float | None) -> None:
        """Run the first of ``dispatches`` to finish (and any finishing at the same time), or every one."""
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
            seq, _, context, step = self._issued.pop((run, agent))
            future: Future[StepResult] = Future()
            try:
                future.set_result(context.run(step))
            except Exception as exc:
                future.set_exception(exc)
            self._finished[(run, agent)] = (seq, future)
            self.now = max(self.now, finish)

    def done(self, run: str, dispatches: Mapping[str, int]) -> dict[str, StepResult]:
        """The results of ``dispatches`` that finished, still held until ``release``; errors re-raise."""
        finished = {
            agent: held[1]
            for agent, seq in dispatches.items()
            if (held := self._finished.get((run, agent))) is not None and held[0] == seq
        }
        return results(finished, lambda agent: self.release(run, {agent: dispatches[agent]}))

    def release(self, run: str, dispatches: Mapping[str, int]) -> None:
        """Forget ``dispatches`` (taken by a pass whose state records them)."""
        for agent, seq in dispatches.items():
            held = self._finished.get((run, agent))
            if held is not None and held[0] == seq:
                del self._finished[(run, agent)]

    def holds_ahead(self, run: str, agent: str, seq: int, reads: tuple[Any, ...]) -> bool:
        """False: no call is thought ahead in virtual time."""
        del run, agent, seq, reads
        return False

    def think_ahead(self, run: str, agent: str, seq: int, reads: tuple[Any, ...], prepared: Prepared) -> None:
        """Nothing: in virtual time a step's call is made when the step runs."""
        del run, agent, seq, reads, prepared

    def close_ahead(self, run: str) -> None:
        """Nothing is thought ahead in virtual time."""
        del run

    def forget(self, run: str) -> None:
        """The run ``run`` ended and nothing can resume it: its steps leave the pool."""
        for held in (self._issued, self._finished, self._counts):
            for key in [k for k in held if k[0] == run]:
                del held[key]

    def ahead_of(self, run: str, agent: str, seq: int) -> Ahead | None:
        """None: no call is thought ahead in virtual time."""
        del run, agent, seq
        return None

    def _holds(self, run: str, agent: str, seq: int) -> bool:
        key = (run, agent)
        return any(held is not None and held[0] == seq for held in (self._issued.get(key), self._finished.get(key)))
