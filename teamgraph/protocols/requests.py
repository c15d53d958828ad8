"""The request tracker: one record per question, approval or protocol request.

A request has a deterministic id (``ask_1``, ``plan_2``, ...: its kind's prefix,
then one counter shared by every kind in the thread), a status that moves from
``pending`` to a closed status once, who asked, who must answer, and the answer.
"""

from __future__ import annotations

from typing import Any

PENDING = "pending"
ANSWERED = "answered"
CANCELLED = "cancelled"
CLOSED_STATUSES = frozenset({ANSWERED, CANCELLED, "approved", "rejected", "expired"})

# The id prefix of each request kind.
ID_PREFIX = {"ask": "ask", "question": "ask"}

# NOTE: the counter lives in the team's ``counters`` dict under this key, so ids
# stay unique across kinds and survive a resume in a new process.
COUNTER = "request"


def new_request(
    counters: dict[str, int],
    *,
    kind: str,
    sender: str,
    receiver: str,
    body: str,
    opened_at: str,
    **extra: Any,
) -> dict[str, Any]:
    """Open a request: take the next id and return its pending record.

    Args:
        counters: The team's counters; the request counter is advanced in place.
        kind: The request kind (``ask``, ``question``, ...).
        sender: Who asks.
        receiver: Who must answer.
        body: The question or the payload's text.
        opened_at: When it was opened (ISO time).
        **extra: Kind-specific fields (the asker's waiting tool call, ...).

    Returns:
        The new record, with its ``id``.
    """
    counters[COUNTER] = counters.get(COUNTER, 0) + 1
    request_id = f"{ID_PREFIX.get(kind, kind)}_{counters[COUNTER]}"
    return {
        "id": request_id,
        "kind": kind,
        "from": sender,
        "to": receiver,
        "body": body,
        "status": PENDING,
        "answer": None,
        "opened_at": opened_at,
        "closed_at": None,
        **extra,
    }


def close(
    record: dict[str, Any], *, status: str, answer: Any, closed_at: str
) -> dict[str, Any]:
    """Return a closed copy of a pending request (records are never mutated)."""
    return {**record, "status": status, "answer": answer, "closed_at": closed_at}


def is_pending(record: dict[str, Any] | None) -> bool:
    """Whether a request exists and still waits for its answer."""
    return record is not None and record["status"] == PENDING
