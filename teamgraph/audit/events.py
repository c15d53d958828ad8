"""Derive collaboration-log events from committed team state, incrementally.

Everything the log says is already in the state: tool calls and their results
in the histories, messages in ``deliveries``, questions and decisions in
``requests``, the task board in ``team["board"]``, statuses in ``agents``. A
``Cursor`` remembers how far each source was logged, so a pass looks only at
what is new (history tails, message and request ids above the last counter,
the few records still open) and the same state always gives the same events.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from teamgraph.audit.exceptions import (
    FILE_FAILURES,
    LOOP_STOP,
    LOOP_WARNING,
    RETRIES_KEY,
    SEND_TIMEOUTS,
    TIMED_OUT,
    triggered,
)
from teamgraph.audit.records import Kind, Level, LogEvent, log_time, one_line
from teamgraph.audit.redact import redact_value
from teamgraph.policy import Policy

LEADER = "Team Leader"
USER = "user"
FILES = "files"
SYSTEM = "system"
BOARD = "board"
ARG_LIMIT = 60

# The kind of each tool's log line; any other tool is a plain ``tool`` line.
TOOL_KINDS: dict[str, Kind] = {
    **dict.fromkeys(("read_file", "write_file", "list_files"), "file"),
    **dict.fromkeys(
        (
            "call_agent", "call_agents", "send_message_to_sub_agent", "ask_sub_agent",
            "answer_sub_agent_question", "ask_master", "ask_other_agent", "answer_other_agent",
            "send_message", "sessions_send", "sessions_spawn", "escalate_to_user", "ask_user",
            "request_approval", "shutdown_request", "shutdown_response",
        ),
        "call",
    ),
    **dict.fromkeys(
        (
            "create_sub_agent", "create_custom_agent", "terminate_sub_agent", "stop_sub_agent",
            "assign_agent_work", "update_task", "propose_plan", "review_plan", "submit_plan",
        ),
        "task",
    ),
}
FIXED_RECEIVERS = {
    "ask_master": LEADER, "submit_plan": LEADER, "request_approval": LEADER,
    "escalate_to_user": USER, "ask_user": USER, "propose_plan": USER,
}
"""Tools whose receiver is always the same."""
TARGET_ARGS = ("display_name", "receiver", "receivers", "recipient", "to", "target", "sessionKey", "agent")
"""Arguments that name the agent a call goes to, in the order they are looked for."""
ANSWER_ARGS = ("question_id", "request_id")
"""Arguments that name a request: the receiver is who opened it."""
FILE_TOOLS_RECEIVER = FILES

# Request ids are ``<prefix>_<n>`` with one counter for every kind (protocols/requests.py).
REQUEST_PREFIXES = ("ask", "plan", "member_plan", "shutdown", "approval", "run")
REQUEST_RESULTS = {
    "answered": ("success", "INFO", ""), "approved": ("success", "INFO", ""),
    "rejected": ("partial", "INFO", ""), "expired": ("failed", "WARN", "EXPIRED"),
    "cancelled": ("failed", "WARN", "CANCELLED"),
}
DELIVERED = frozenset({"delivered", "read"})
ENDED_STATUSES = {"stopped": "INFO", "terminated": "INFO", "shutdown": "INFO", "failed": "ERROR"}
BUDGET_WARN_SHARE = 0.8
"""A WARN line once an agent's turn has used this share of ``Policy.max_turn_steps``."""


class Cursor(TypedDict, total=False):
    """How far each source of the state has been logged (kept next to the log).

    Attributes:
        histories: Per agent, how many history messages were logged.
        user: How many user-facing messages were looked at.
        messages: The highest ``msg_N`` looked at.
        open_messages: Message ids looked at but not delivered or bounced yet.
        requests: The highest request number looked at.
        open_requests: Request ids logged as opened but not closed yet.
        board: Task id -> the status last logged.
        agents: Agent -> the last status logged (``"status:turn"``).
        budgets: Agent -> the last turn a budget warning was logged for.
    """

    histories: dict[str, int]
    user: int
    messages: int
    open_messages: list[str]
    requests: int
    open_requests: list[str]
    board: dict[str, str]
    agents: dict[str, str]
    budgets: dict[str, int]


def new_cursor() -> Cursor:
    """A cursor before anything was logged."""
    return Cursor(
        histories={}, user=0, messages=0, open_messages=[], requests=0, open_requests=[],
        board={}, agents={}, budgets={},
    )


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


def tool_event(agent: str, call: Mapping[str, Any], result: ToolMessage | None, *, now: str,
               requests: Mapping[str, Any]) -> LogEvent:
    """The log line of one tool call and its result."""
    name = str(call.get("name") or "unknown")
    content = f"{name}({_args_text(call.get('args'))})"
    base = LogEvent(
        time=now, sender=agent, receiver=_receiver(name, call.get("args"), requests),
        kind=TOOL_KINDS.get(name, "tool"), content=content,
    )
    text = str(result.content) if result is not None else "no result"
    retries = (result.additional_kwargs.get(RETRIES_KEY) if result is not None else None) or []
    if result is None or result.status == "error" or text.startswith("Error"):
        return _with(base, result="failed", level="ERROR", code="TOOL_ERROR", error=text.removeprefix("Error: "))
    if text.startswith(TIMED_OUT):
        return _with(base, result="failed", level="ERROR", code="TIMEOUT", error=text)
    if text.startswith("Cancelled"):
        return _with(base, result="partial", level="WARN", code="CANCELLED", error=text)
    if retries:
        return _with(base, level="WARN", code="RETRY", error=f"retried after {len(retries)} transient failure(s): "
                     + "; ".join(retries))
    return base


GUARD_LINES: dict[str, tuple[Level, str]] = {
    LOOP_WARNING: ("WARN", "LOOP"), LOOP_STOP: ("ERROR", "LOOP_STOPPED"),
    FILE_FAILURES: ("WARN", "FILE_FAILURES"), SEND_TIMEOUTS: ("WARN", "SEND_TIMEOUTS"),
}
"""The level and code of each exception-policy rule's line."""


def guard_events(agent: str, history: list[AnyMessage], end: int, *, now: str, policy: Policy) -> list[LogEvent]:
    """The lines of the exception-policy rules the newest turn of ``history[:end]`` triggers."""
    events = []
    for trigger in triggered(policy, agent, history, end):
        level, code = GUARD_LINES[trigger.kind]
        warned = trigger.kind == LOOP_WARNING
        events.append(LogEvent(
            time=now, sender=agent, receiver=agent if warned else LEADER, kind="call",
            content=f"exception policy: {trigger.kind} ({trigger.count} in a row); "
                    + ("agent warned" if warned else "Team Leader told"),
            result="partial", level=level, code=code, error=trigger.detail or f"{trigger.count} in a row",
        ))
    return events


def _with(event: LogEvent, **changes: Any) -> LogEvent:
    return LogEvent(**{**event.__dict__, **changes})


def history_events(agent: str, history: list[AnyMessage], start: int, *, now: str,
                   requests: Mapping[str, Any], policy: Policy) -> tuple[list[LogEvent], int]:
    """Events of ``history[start:]`` and the index up to which it is logged.

    An ``AIMessage`` whose tool calls are not all answered yet (a deferred call)
    is left for a later pass: its results are the next messages once they arrive.
    """
    events: list[LogEvent] = []
    index = start
    while index < len(history):
        message = history[index]
        if not isinstance(message, AIMessage):
            index += 1
            continue
        calls = [*message.tool_calls, *message.invalid_tool_calls]
        results: dict[str, ToolMessage] = {}
        after = index + 1
        while after < len(history) and isinstance(history[after], ToolMessage):
            results[history[after].tool_call_id] = history[after]  # type: ignore[union-attr]
            after += 1
        if any(call.get("id") not in results for call in calls):
            break  # NOTE: a deferred call is still open; log it with its result later
        events.extend(tool_event(agent, c, results.get(c.get("id") or ""), now=now, requests=requests) for c in calls)
        if not calls and message.text.strip():
            receiver = USER if agent == LEADER else LEADER
            events.append(LogEvent(time=now, sender=agent, receiver=receiver, kind="call",
                                   content=f"reply: {message.text.strip()}"))
        events.extend(guard_events(agent, history, after, now=now, policy=policy))
        index = after
    return events, index


def _request(requests: Mapping[str, Any], number: int) -> dict[str, Any] | None:
    for prefix in REQUEST_PREFIXES:
        if (record := requests.get(f"{prefix}_{number}")) is not None:
            return record
    return None


def request_opened(record: Mapping[str, Any], now: str) -> LogEvent:
    """The line of a request being opened (a question, a plan, an approval, ...)."""
    return LogEvent(
        time=log_time(record.get("opened_at"), now), sender=str(record["from"]),
        receiver=str(record.get("route") or record["to"]), kind="call",
        content=f"{record['id']} {record['kind']} opened: {record.get('body') or ''}",
    )


def request_closed(record: Mapping[str, Any], now: str) -> LogEvent:
    """The line of a request's decision or answer."""
    result, level, code = REQUEST_RESULTS.get(record["status"], ("success", "INFO", ""))
    answer = str(record.get("answer") or "")
    return LogEvent(
        time=log_time(record.get("closed_at"), now), sender=str(record.get("route") or record["to"]),
        receiver=str(record["from"]), kind="call",
        content=f"{record['id']} {record['status']}" + ("" if code else f": {answer}"),
        result=result, level=level, code=code, error=answer if code else "",  # type: ignore[arg-type]
    )


def delivery_event(record: Mapping[str, Any], now: str) -> LogEvent:
    """The line of a message that was delivered or bounced."""
    base = LogEvent(
        time=log_time(record.get("delivered_at") or record.get("sent_at"), now),
        sender=str(record.get("sender")), receiver=str(record.get("to")), kind="call",
        content=f"message {record['id']} {record['status']}",
    )
    if record["status"] == "bounced":
        return _with(base, result="failed", level="ERROR", code="BOUNCED",
                     error=f"{record.get('to')} could not receive {record['id']}")
    return base


class EventDeriver:
    """One pass over committed state: the new events and the advanced cursor."""

    def __init__(self, state: Mapping[str, Any], cursor: Cursor, *, now: str, policy: Policy) -> None:
        self.state = state
        self.cursor: Cursor = json.loads(json.dumps({**new_cursor(), **cursor}))
        self.now = now
        self.policy = policy
        self.max_turn_steps = policy.max_turn_steps
        self.requests: Mapping[str, Any] = state.get("requests") or {}
        self.team: Mapping[str, Any] = state.get("team") or {}

    def run(self) -> tuple[list[LogEvent], Cursor]:
        """Every source, in a fixed order; events sorted by time (stable)."""
        events = [*self.user(), *self.histories(), *self.request_events(), *self.deliveries(),
                  *self.board(), *self.registry()]
        events.sort(key=lambda e: e.time)
        return events, self.cursor

    def user(self) -> Iterator[LogEvent]:
        messages = self.state.get("messages") or []
        for message in messages[self.cursor["user"]:]:
            if isinstance(message, HumanMessage):
                yield LogEvent(time=self.now, sender=USER, receiver=LEADER, kind="task", content=f"task: {message.text}")
        self.cursor["user"] = len(messages)

    def histories(self) -> Iterator[LogEvent]:
        for agent, history in (self.state.get("histories") or {}).items():
            start = self.cursor["histories"].get(agent, 0)
            if start > len(history):
                # NOTE: the history is shorter than what was logged (a fork or lost data)
                yield LogEvent(time=self.now, sender=SYSTEM, receiver=agent, kind="call", result="failed",
                               content=f"history of {agent} has {len(history)} messages, {start} were logged",
                               level="CRITICAL", code="LOST_DATA", error="history shorter than the log")
                start = len(history)
            events, self.cursor["histories"][agent] = history_events(
                agent, history, start, now=self.now, requests=self.requests, policy=self.policy
            )
            yield from events

    def request_events(self) -> Iterator[LogEvent]:
        counter = int((self.team.get("counters") or {}).get("request", 0))
        still_open = []
        for rid in self.cursor["open_requests"]:
            record = self.requests.get(rid)
            if record is not None and record["status"] != "pending":
                yield request_closed(record, self.now)
            else:
                still_open.append(rid)
        for number in range(self.cursor["requests"] + 1, counter + 1):
            record = _request(self.requests, number)
            if record is None:
                continue
            yield request_opened(record, self.now)
            if record["status"] == "pending":
                still_open.append(record["id"])
            else:
                yield request_closed(record, self.now)
        self.cursor["requests"] = max(counter, self.cursor["requests"])
        self.cursor["open_requests"] = still_open

    def deliveries(self) -> Iterator[LogEvent]:
        records = self.state.get("deliveries") or {}
        counter = int((self.team.get("counters") or {}).get("message", 0))
        candidates = [*self.cursor["open_messages"],
                      *(f"msg_{n}" for n in range(self.cursor["messages"] + 1, counter + 1))]
        still_open = []
        for message_id in candidates:
            record = records.get(message_id)
            if record is None or record.get("status") not in (*DELIVERED, "bounced"):
                still_open.append(message_id)
                continue
            yield delivery_event(record, self.now)
        self.cursor["messages"] = max(counter, self.cursor["messages"])
        self.cursor["open_messages"] = still_open

    def board(self) -> Iterator[LogEvent]:
        for task in self.team.get("board") or []:
            status = str(task.get("status"))
            if self.cursor["board"].get(task["id"]) == status:
                continue
            self.cursor["board"][task["id"]] = status
            yield LogEvent(
                time=self.now, sender=str(task.get("updated_by") or LEADER),
                receiver=str(task.get("assignee") or task.get("role_id") or BOARD), kind="task",
                content=f"{task['id']} \"{task.get('title', '')}\": {status}",
            )

    def registry(self) -> Iterator[LogEvent]:
        for name, record in (self.state.get("agents") or {}).items():
            logged = self.cursor["agents"].get(name)
            if logged is None:
                self.cursor["agents"][name] = "created"
                if name != LEADER:
                    task = record.get("task")
                    yield LogEvent(
                        time=log_time(record.get("created_at"), self.now), sender=str(record.get("created_by") or SYSTEM),
                        receiver=name, kind="task", content=f"created {name} ({record['role']})" + (f": {task}" if task else ""),
                    )
            status = record.get("status")
            key = f"{status}:{record.get('turn', 0)}"
            if status in ENDED_STATUSES and logged != key:
                self.cursor["agents"][name] = key
                level = ENDED_STATUSES[status]
                failed = level == "ERROR"
                yield LogEvent(
                    time=self.now, sender=SYSTEM, receiver=name, kind="task", content=f"{name} is {status}",
                    result="failed" if failed else "success", level=level,  # type: ignore[arg-type]
                    code="AGENT_FAILED" if failed else "", error=str(record.get("last_action") or "") if failed else "",
                )
            yield from self.budget(name, record)

    def budget(self, name: str, record: Mapping[str, Any]) -> Iterator[LogEvent]:
        turn, used = int(record.get("turn", 0)), int(record.get("turn_steps", 0))
        if used < BUDGET_WARN_SHARE * self.max_turn_steps or self.cursor["budgets"].get(name) == turn:
            return
        self.cursor["budgets"][name] = turn
        yield LogEvent(
            time=self.now, sender=SYSTEM, receiver=name, kind="task", content=f"turn {turn}: {used} model calls",
            level="WARN", code="BUDGET", error=f"{used} of {self.max_turn_steps} model calls of this turn used",
        )


def derive_events(state: Mapping[str, Any], cursor: Cursor, *, now: str,
                  policy: Policy) -> tuple[list[LogEvent], Cursor]:
    """The events that ``state`` adds to what ``cursor`` says was logged.

    Args:
        state: Committed team state values.
        cursor: How far the log got (``new_cursor()`` at first).
        now: The time for events whose record carries none (``YYYY-MM-DD HH:mm:ss``).
        policy: The team's policy (the exception-policy thresholds, the turn budget).

    Returns:
        The new events (oldest first) and the advanced cursor (a new object).
    """
    return EventDeriver(state, cursor, now=now, policy=policy).run()
