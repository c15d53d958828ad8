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

from teamgraph.audit.lines import (
    BOARD,
    DELIVERED,
    ENDED_STATUSES,
    LEADER,
    SYSTEM,
    USER,
    delivery_event,
    find_request,
    guard_events,
    request_closed,
    request_opened,
    tool_event,
)
from teamgraph.audit.records import LogEvent, log_time
from teamgraph.policy import Policy
from teamgraph.records import Request, TeamBook

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
        histories={},
        user=0,
        messages=0,
        open_messages=[],
        requests=0,
        open_requests=[],
        board={},
        agents={},
        budgets={},
    )


def history_events(
    agent: str, history: list[AnyMessage], start: int, *, now: str, requests: Mapping[str, Any], policy: Policy
) -> tuple[list[LogEvent], int]:
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
        while after < len(history) and isinstance(result := history[after], ToolMessage):
            results[result.tool_call_id] = result
            after += 1
        if any(call.get("id") not in results for call in calls):
            break  # NOTE: a deferred call is still open; log it with its result later
        events.extend(tool_event(agent, c, results.get(c.get("id") or ""), now=now, requests=requests) for c in calls)
        if not calls and message.text.strip():
            receiver = USER if agent == LEADER else LEADER
            events.append(
                LogEvent(
                    time=now, sender=agent, receiver=receiver, kind="call", content=f"reply: {message.text.strip()}"
                )
            )
        events.extend(guard_events(agent, history, after, now=now, policy=policy))
        index = after
    return events, index


class EventDeriver:
    """One pass over committed state: the new events and the advanced cursor."""

    def __init__(self, state: Mapping[str, Any], cursor: Cursor, *, now: str, policy: Policy) -> None:
        self.state = state
        self.cursor: Cursor = json.loads(json.dumps({**new_cursor(), **cursor}))
        self.now = now
        self.policy = policy
        self.max_turn_steps = policy.max_turn_steps
        self.requests: Mapping[str, Request] = state.get("requests") or {}
        self.team: TeamBook = state.get("team") or TeamBook()

    def run(self) -> tuple[list[LogEvent], Cursor]:
        """Every source, in a fixed order; events sorted by time (stable).

        NOTE: the records (requests, messages, board, registry) were written by the
        router pass before the superstep whose steps the histories hold, so they come first.
        """
        events = [
            *self.user(),
            *self.request_events(),
            *self.deliveries(),
            *self.board(),
            *self.registry(),
            *self.histories(),
        ]
        events.sort(key=lambda e: e.time)
        return events, self.cursor

    def user(self) -> Iterator[LogEvent]:
        messages = self.state.get("messages") or []
        for message in messages[self.cursor["user"] :]:
            if isinstance(message, HumanMessage):
                yield LogEvent(
                    time=self.now, sender=USER, receiver=LEADER, kind="task", content=f"task: {message.text}"
                )
        self.cursor["user"] = len(messages)

    def histories(self) -> Iterator[LogEvent]:
        for agent, history in (self.state.get("histories") or {}).items():
            start = self.cursor["histories"].get(agent, 0)
            if start > len(history):
                # NOTE: the history is shorter than what was logged (a fork or lost data)
                yield LogEvent(
                    time=self.now,
                    sender=SYSTEM,
                    receiver=agent,
                    kind="call",
                    result="failed",
                    content=f"history of {agent} has {len(history)} messages, {start} were logged",
                    level="CRITICAL",
                    code="LOST_DATA",
                    error="history shorter than the log",
                )
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
            record = find_request(self.requests, number)
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
        candidates = [
            *self.cursor["open_messages"],
            *(f"msg_{n}" for n in range(self.cursor["messages"] + 1, counter + 1)),
        ]
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
                time=self.now,
                sender=str(task.get("updated_by") or LEADER),
                receiver=str(task.get("assignee") or task.get("role_id") or BOARD),
                kind="task",
                content=f'{task["id"]} "{task.get("title", "")}": {status}',
            )

    def registry(self) -> Iterator[LogEvent]:
        for name, record in (self.state.get("agents") or {}).items():
            logged = self.cursor["agents"].get(name)
            if logged is None:
                self.cursor["agents"][name] = "created"
                if name != LEADER:
                    task = record.get("task")
                    yield LogEvent(
                        time=log_time(record.get("created_at"), self.now),
                        sender=str(record.get("created_by") or SYSTEM),
                        receiver=name,
                        kind="task",
                        content=f"created {name} ({record['role']})" + (f": {task}" if task else ""),
                    )
            status = record.get("status")
            key = f"{status}:{record.get('turn', 0)}"
            if status in ENDED_STATUSES and logged != key:
                self.cursor["agents"][name] = key
                level = ENDED_STATUSES[status]
                failed = level == "ERROR"
                yield LogEvent(
                    time=self.now,
                    sender=SYSTEM,
                    receiver=name,
                    kind="task",
                    content=f"{name} is {status}",
                    result="failed" if failed else "success",
                    level=level,
                    code="AGENT_FAILED" if failed else "",
                    error=str(record.get("last_action") or "") if failed else "",
                )
            yield from self.budget(name, record)

    def budget(self, name: str, record: Mapping[str, Any]) -> Iterator[LogEvent]:
        turn, used = int(record.get("turn", 0)), int(record.get("turn_steps", 0))
        if used < BUDGET_WARN_SHARE * self.max_turn_steps or self.cursor["budgets"].get(name) == turn:
            return
        self.cursor["budgets"][name] = turn
        yield LogEvent(
            time=self.now,
            sender=SYSTEM,
            receiver=name,
            kind="task",
            content=f"turn {turn}: {used} model calls",
            level="WARN",
            code="BUDGET",
            error=f"{used} of {self.max_turn_steps} model calls of this turn used",
        )


def derive_events(
    state: Mapping[str, Any], cursor: Cursor, *, now: str, policy: Policy
) -> tuple[list[LogEvent], Cursor]:
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
