"""Thought-ahead calls: a step's first model call, started by the pass that issues the step.

The pool (``teamgraph/steps.py``) holds them; the scheduler starts them
(``teamgraph/graph/scheduler.py::think_ahead``); a step claims one only if it reads what
the call was made on (``Ahead.claim``). A call no step uses is dropped, and what was
opened for it (its traced run) ends with the reason.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

AHEAD_STARTED = "started"
AHEAD_CLAIMED = "claimed"
AHEAD_DROPPED = "dropped"
AHEAD_LATE = "late"
"""Outcomes of thought-ahead calls, counted in ``StepPool.ahead_counts`` (late: not started
when its step came, so never made: the step made the call itself, in the run opened for it)."""


class CallDropped(Exception):
    """A call thought ahead that no step used (its traced run ends with this error)."""


@dataclass(frozen=True)
class Prepared:
    """A first model call ready to make.

    Attributes:
        start: What the step computed before the call, for the step to go on from.
        call: The call.
        end: Ends what was opened for the call (its traced run) when no step runs in it.
    """

    start: Any
    call: Callable[[], Any]
    end: Callable[[BaseException], None]


@dataclass
class Ahead:
    """A step's first model call, started before the step (``StepPool.think_ahead``).

    Attributes:
        reads: What the step read to make it: a step that reads an equal value makes the same call.
        prepared: The call.
        answer: The call's result.
        counts: The pool's outcome counts (under ``lock``).
        lock: The pool's lock.
        claimed: Whether a step asked for it already (an answer serves one attempt only).
        open: Whether what was opened for the call is still open, for the step that uses it.
    """

    reads: tuple[Any, ...]
    prepared: Prepared
    answer: Future[Any]
    counts: Counter[str]
    lock: threading.Lock
    claimed: bool = False
    open: bool = True

    def claim(self, reads: tuple[Any, ...]) -> tuple[Any, Future[Any] | None, bool] | None:
        """``(start, answer, owns)`` for the step that ``reads`` this, the first time; else None.

        ``answer`` is None when the call had not started (it is then never made, and the
        step makes it itself: not waited for, it may queue behind a stale call that hangs).
        ``owns``: what was opened for the call is still open, and that step ends it.
        NOTE: equal, not merely alike: a state that was never committed (a superstep that
        failed after its pass) reads otherwise, and its call is dropped. A retried step
        (the leader's, after a provider error) makes its own.
        """
        with self.lock:
            first, self.claimed = not self.claimed, True
        if not first:
            return None
        same = reads == self.reads
        late = same and self.answer.cancel()
        with self.lock:
            self.counts[AHEAD_LATE if late else AHEAD_CLAIMED if same else AHEAD_DROPPED] += 1
            owns, self.open = same and self.open, self.open and not same
        if not same:
            self.drop()
            return None
        return self.prepared.start, None if late else self.answer, owns

    def drop(self) -> None:
        """No step uses the call: not made if it has not started; what was opened for it ends."""
        self.answer.cancel()
        self.close(CallDropped("no step used this call (another state, a newer call, or an older dispatch)"))

    def close(self, reason: BaseException) -> None:
        """End what was opened for the call, once it is done (a step may still use its answer)."""
        with self.lock:
            was_open, self.open = self.open, False
        if was_open:
            self.answer.add_done_callback(lambda answer: self.prepared.end(_error_of(answer) or reason))


def _error_of(answer: Future[Any]) -> BaseException | None:
    return None if answer.cancelled() else answer.exception()
