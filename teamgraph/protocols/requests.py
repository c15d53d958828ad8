"""The request tracker: one record per question, approval or protocol request.

A request has a deterministic id (``ask_1``, ``plan_2``, ...: its kind's prefix,
then one counter shared by every kind in the thread), a status that moves from
``pending`` to a closed status once, who asked, who must answer, and the answer.
"""

from __future__ import annotations

from typing import Any, cast

from teamgraph.records import Request

PENDING = "pending"
ANSWERED = "answered"
APPROVED = "approved"
REJECTED = "rejected"
EXPIRED = "expired"
CANCELLED = "cancelled"
CLOSED_STATUSES = frozenset({ANSWERED, APPROVED, REJECTED, EXPIRED, CANCELLED})

# Request kinds.
ASK = "ask"  # a member asks the master; the leader asks the user (ask_user)
QUESTION = "question"  # one agent asks another
PLAN = "plan"  # the leader's plan
MEMBER_PLAN = "member_plan"  # a member's plan (docs/protocols.md, "Plans")
SHUTDOWN = "shutdown"  # the leader asks a member to shut down (docs/protocols.md, "Shutdown")
APPROVAL = "approval"  # a sensitive operation waits for approval
RUN = "run"  # background delegation (sessions_spawn): the result is pushed back

# The id prefix of each request kind.
ID_PREFIX = {QUESTION: "ask"}

HUMAN = "human"
"""The ``route`` of a request that waits for a person."""

APPROVAL_KINDS = frozenset({PLAN, MEMBER_PLAN, APPROVAL})
"""Kinds decided with ``{"approve": bool, "feedback": str}``."""

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
) -> Request:
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
    record = {
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
    return cast(Request, record)


def close(record: Request, *, status: str, answer: Any, closed_at: str) -> Request:
    """Return a closed copy of a pending request (records are never mutated)."""
    return {**record, "status": status, "answer": answer, "closed_at": closed_at}


def is_pending(record: Request | None) -> bool:
    """Whether a request exists and still waits for its answer."""
    return record is not None and record["status"] == PENDING


def expected_answer(kind: str, *, leader_decided: bool = False) -> str:
    """What a person's resume value for a request of ``kind`` must look like."""
    if kind in APPROVAL_KINDS:
        return '{"approve": true or false, "feedback": "..."}'
    if leader_decided:
        return 'a string (your own answer), or {"approve": true} to confirm the leader\'s answer'
    return "a string (your answer)"


def check_human_answer(record: Request | None, request_id: str, value: Any) -> str | None:
    """Why ``value`` cannot answer ``request_id``, or None if it can.

    Args:
        record: The request, or None if there is no such id.
        request_id: The id the person answered.
        value: The resume value given for it.
    """
    if record is None:
        return f"unknown request id '{request_id}'"
    if record["status"] != PENDING or record.get("route") != HUMAN:
        return f"request '{request_id}' is not waiting for a person (it is {record['status']})"
    if record["kind"] in APPROVAL_KINDS or record.get("leader_decision") is not None:
        return _check_decision(record, request_id, value)
    if isinstance(value, str) and value.strip():
        return None
    return f"request '{request_id}' takes {expected_answer(record['kind'])}, got {value!r}"


def _is_decision(value: Any) -> bool:
    """``{"approve": bool, "feedback": str}`` (feedback optional)."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("approve"), bool)
        and set(value) <= {"approve", "feedback"}
        and isinstance(value.get("feedback", ""), str)
    )


def _check_decision(record: Request, request_id: str, value: Any) -> str | None:
    """A plan or approval, or a question the leader answered first (a person confirms or overrides it)."""
    question = record["kind"] not in APPROVAL_KINDS
    if _is_decision(value):
        if question and not value["approve"] and not value.get("feedback", "").strip():
            fix = 'give yours as "feedback" (or send a string)'
            return f"request '{request_id}': to reject the leader's answer, {fix}"
        return None
    if question and isinstance(value, str) and value.strip():
        return None  # a question the leader answered first: a string overrides it
    return f"request '{request_id}' takes {expected_answer(record['kind'], leader_decided=True)}, got {value!r}"


def public_view(record: Request) -> dict[str, Any]:
    """What a person sees of a request in the interrupt (no internal fields)."""
    view: dict[str, Any] = {"type": record["kind"], "from": record["from"]}
    view.update(record.get("details") or {})
    if record["kind"] in (ASK, QUESTION):
        view["question"] = record["body"]
    if record.get("leader_decision") is not None:
        view["leader_decision"] = record["leader_decision"]
    if record.get("note"):
        view["note"] = record["note"]
    view["expects"] = expected_answer(record["kind"], leader_decided=record.get("leader_decision") is not None)
    view["opened_at"] = record["opened_at"]
    return view
