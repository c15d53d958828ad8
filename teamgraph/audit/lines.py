"""One collaboration-log line per record: a tool call, a request, a delivery, a rule.

Pure builders: the same record always gives the same line. ``events.py``
decides which records are new.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AnyMessage, ToolMessage

from teamgraph.audit.exceptions import (
    FILE_FAILURES,
    LOOP_STOP,
    LOOP_WARNING,
    RETRIES_KEY,
    SEND_TIMEOUTS,
    TIMED_OUT,
    TOOL_FAILURE,
    triggered,
)
from teamgraph.audit.records import Kind, Level, LogEvent, Result, log_time, one_line
from teamgraph.messaging.envelopes import LEADER
from teamgraph.messaging.results import TIMED_OUT as TIMED_OUT_OUTCOME
from teamgraph.messaging.results import outcome_of
from teamgraph.policy import Policy
from teamgraph.protocols.requests import (
    APPROVAL,
    ASK,
    ID_PREFIX,
    MEMBER_PLAN,
    PLAN,
    QUESTION,
    RUN,
    SHUTDOWN,
)
from teamgraph.records import Delivery, Request
from teamgraph.redaction import redact_value

REQUEST_KINDS = (ASK, QUESTION, PLAN, MEMBER_PLAN, SHUTDOWN, APPROVAL, RUN)

USER = "user"
FILES = "files"
SYSTEM = "system"
BOARD = "board"
ARG_LIMIT = 60

# The kind of each tool's log line; any other tool is a plain ``tool`` line.
TOOL_KINDS: dict[str, Kind] = {
    **dict.fromkeys(("read_file", "write_file", "edit_file", "list_files", "restore_file"), "file"),
    **dict.fromkeys(
        (
            "call_agent",
            "call_agents",
            "send_message_to_sub_agent",
            "ask_sub_agent",
            "answer_sub_agent_question",
            "ask_master",
            "ask_other_agent",
            "answer_other_agent",
            "send_message",
            "sessions_send",
            "sessions_spawn",
            "escalate_to_user",
            "ask_user",
            "request_approval",
            "shutdown_request",
            "shutdown_response",
        ),
        "call",
    ),
    **dict.fromkeys(
        (
            "create_sub_agent",
            "create_custom_agent",
            "terminate_sub_agent",
            "stop_sub_agent",
            "assign_agent_work",
            "update_task",
            "propose_plan",
            "review_plan",
            "submit_plan",
        ),
        "task",
    ),
}
FIXED_RECEIVERS = {
    "ask_master": LEADER,
    "submit_plan": LEADER,
    "request_approval": LEADER,
    "escalate_to_user": USER,
    "ask_user": USER,
    "propose_plan": USER,
}
"""Tools whose receiver is always the same."""
TARGET_ARGS = ("display_name", "receiver", "receivers", "recipient", "to", "target", "sessionKey", "agent")
"""Arguments that name the agent a call goes to, in the order they are looked for."""
ANSWER_ARGS = ("question_id", "request_id")
"""Arguments that name a request: the receiver is who opened it."""

# Request ids are ``<prefix>_<n>`` with one counter for every kind (protocols/requests.py).
REQUEST_PREFIXES = tuple(dict.fromkeys(ID_PREFIX.get(kind, kind) for kind in REQUEST_KINDS))
REQUEST_RESULTS: dict[str, tuple[Result, Level, str]] = {
    "answered": ("success", "INFO", ""),
    "approved": ("success", "INFO", ""),
    "rejected": ("partial", "INFO", ""),
    "expired": ("failed", "WARN", "EXPIRED"),
    "cancelled": ("failed", "WARN", "CANCELLED"),
}
DELIVERED = frozenset({"delivered", "read"})
ENDED_STATUSES: dict[str, Level] = {"stopped": "INFO", "terminated": "INFO", "shutdown": "INFO", "failed": "ERROR"}


def _args_text(args: Any) -> str:
    if not isinstance(args, Mapping):
        return ""
    clean = redact_value(dict(args))
    parts = []
    for key, value in clean.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        parts.append(f"{key}={one_line(text, ARG_LIMIT)}")
    return ", ".join(parts)


def _receiver(tool: str, args: Any, requests: Mapping[str, Any]) -> str:
    if tool in FIXED_RECEIVERS:
        return FIXED_RECEIVERS[tool]
    args = args if isinstance(args, Mapping) else {}
    for key in TARGET_ARGS:
        if args.get(key):
            value = args[key]
            return ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    for key in ANSWER_ARGS:
        if (record := requests.get(str(args.get(key)))) is not None:
            return str(record["from"])
    return FILES if TOOL_KINDS.get(tool) == "file" else SYSTEM


def tool_event(
    agent: str, call: Mapping[str, Any], result: ToolMessage | None, *, now: str, requests: Mapping[str, Any]
) -> LogEvent:
    """The log line of one tool call and its result."""
    name = str(call.get("name") or "unknown")
    content = f"{name}({_args_text(call.get('args'))})"
    base = LogEvent(
        time=now,
        sender=agent,
        receiver=_receiver(name, call.get("args"), requests),
        kind=TOOL_KINDS.get(name, "tool"),
        content=content,
    )
    text = str(result.content) if result is not None else "no result"
    retries = (result.additional_kwargs.get(RETRIES_KEY) if result is not None else None) or []
    if result is None or result.status == "error" or text.startswith("Error"):
        return _with(base, result="failed", level="ERROR", code="TOOL_ERROR", error=text.removeprefix("Error: "))
    if outcome_of(result) == TIMED_OUT_OUTCOME or text.startswith(TIMED_OUT):
        return _with(base, result="failed", level="ERROR", code="TIMEOUT", error=text)
    if text.startswith("Cancelled"):
        return _with(base, result="partial", level="WARN", code="CANCELLED", error=text)
    if retries:
        return _with(
            base,
            level="WARN",
            code="RETRY",
            error=f"retried after {len(retries)} transient failure(s): " + "; ".join(retries),
        )
    return base


GUARD_LINES: dict[str, tuple[Level, str]] = {
    LOOP_WARNING: ("WARN", "LOOP"),
    LOOP_STOP: ("ERROR", "LOOP_STOPPED"),
    FILE_FAILURES: ("WARN", "FILE_FAILURES"),
    SEND_TIMEOUTS: ("WARN", "SEND_TIMEOUTS"),
    TOOL_FAILURE: ("ERROR", "TOOL_FAILURE"),
}
"""The level and code of each exception-policy rule's line."""


def guard_events(agent: str, history: list[AnyMessage], end: int, *, now: str, policy: Policy) -> list[LogEvent]:
    """The lines of the exception-policy rules the newest turn of ``history[:end]`` triggers."""
    events = []
    for trigger in triggered(policy, agent, history, end):
        level, code = GUARD_LINES[trigger.kind]
        warned = trigger.kind == LOOP_WARNING
        events.append(
            LogEvent(
                time=now,
                sender=agent,
                receiver=agent if warned else LEADER,
                kind="call",
                content=f"exception policy: {trigger.kind} ({trigger.count} in a row); "
                + ("agent warned" if warned else "Team Leader told"),
                result="partial",
                level=level,
                code=code,
                error=trigger.detail or f"{trigger.count} in a row",
            )
        )
    return events


def _with(event: LogEvent, **changes: Any) -> LogEvent:
    return LogEvent(**{**event.__dict__, **changes})


def find_request(requests: Mapping[str, Request], number: int) -> Request | None:
    for prefix in REQUEST_PREFIXES:
        if (record := requests.get(f"{prefix}_{number}")) is not None:
            return record
    return None


def request_opened(record: Request, now: str) -> LogEvent:
    """The line of a request being opened (a question, a plan, an approval, ...)."""
    return LogEvent(
        time=log_time(record.get("opened_at"), now),
        sender=str(record["from"]),
        receiver=str(record.get("route") or record["to"]),
        kind="call",
        content=f"{record['id']} {record['kind']} opened: {record.get('body') or ''}",
    )


def request_closed(record: Request, now: str) -> LogEvent:
    """The line of a request's decision or answer."""
    result, level, code = REQUEST_RESULTS.get(record["status"], ("success", "INFO", ""))
    answer = str(record.get("answer") or "")
    return LogEvent(
        time=log_time(record.get("closed_at"), now),
        sender=str(record.get("route") or record["to"]),
        receiver=str(record["from"]),
        kind="call",
        content=f"{record['id']} {record['status']}" + ("" if code else f": {answer}"),
        result=result,
        level=level,
        code=code,
        error=answer if code else "",
    )


def delivery_event(record: Delivery, now: str) -> LogEvent:
    """The line of a message that was delivered or bounced."""
    base = LogEvent(
        time=log_time(record.get("delivered_at") or record.get("sent_at"), now),
        sender=str(record.get("sender")),
        receiver=str(record.get("to")),
        kind="call",
        content=f"message {record['id']} {record['status']}",
    )
    if record["status"] == "bounced":
        return _with(
            base,
            result="failed",
            level="ERROR",
            code="BOUNCED",
            error=f"{record.get('to')} could not receive {record['id']}",
        )
    return base
