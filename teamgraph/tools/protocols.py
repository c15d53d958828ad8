"""Team protocols (docs/protocols.md, "Shutdown" and "Plans"): plans, approvals, shutdowns, escalation, the task board.

Every protocol is a request with an id, a tracker entry that moves from
``pending`` to a closed status once, and a response that names the id. Who
decides a plan, a member's plan, a question or an approval is policy
(``Policy.plan`` ...); the router routes each request to its decider.
"""

from __future__ import annotations

import json
from typing import Literal

from langchain_core.tools import BaseTool, tool
from langgraph.types import Command
from pydantic import BaseModel, Field

from teamgraph.messaging import effects
from teamgraph.messaging.results import plan_submitted  # noqa: F401 - re-exported
from teamgraph.protocols.requests import (
    APPROVAL,
    APPROVED,
    ASK,
    COUNTER,
    ID_PREFIX,
    MEMBER_PLAN,
    PLAN,
    REJECTED,
    SHUTDOWN,
    is_pending,
)
from teamgraph.records import LEADER, LEADER_ROLE_ID, AnswerEffect, Request
from teamgraph.tools import errors
from teamgraph.tools.context import (
    ToolContext,
    active_members,
    defer,
    fail,
    reply,
    require_member,
)

TaskStatus = Literal["todo", "in_progress", "done", "blocked"]


class PlanStep(BaseModel):
    """One step of the leader's plan; it becomes a task on the board."""

    title: str = Field(description="What this step delivers.")
    role_id: str | None = Field(default=None, description="The role that does it.")
    depends_on: list[int] = Field(
        default_factory=list, description="Numbers (1-based) of steps that must finish first."
    )


def _request_to_me(context: ToolContext, request_id: str, kinds: tuple[str, ...]) -> Request:
    """A pending request of one of ``kinds`` that the caller must decide, or an error."""
    record = context.requests.get(request_id)
    if record is None or record["kind"] not in kinds or record.get("route") != context.caller:
        mine = [
            r
            for r, rec in context.requests.items()
            if rec["kind"] in kinds and rec.get("route") == context.caller and is_pending(rec)
        ]
        raise fail(
            f"Unknown {' or '.join(kinds)} request '{request_id}'. Yours pending: {', '.join(mine) or 'none'}.",
            code=errors.UNKNOWN_REQUEST,
        )
    earlier = [e for e in context.effects if e["kind"] == "answer" and e["request_id"] == request_id]
    if earlier:
        verdict = APPROVED if earlier[0]["approve"] else REJECTED
        raise fail(f"Request '{request_id}' is already {verdict}.", code=errors.ALREADY_ANSWERED)
    if not is_pending(record):
        raise fail(f"Request '{request_id}' is already {record['status']}.", code=errors.ALREADY_ANSWERED)
    return record


def next_request_id(context: ToolContext, kind: str) -> str:
    """The id the router gives a request the Team Leader opens with its current tool call.

    NOTE: ids come from one counter per thread, advanced in the order the router
    applies effects: the leader's first (it is agent 0, and its step is one model
    call), in call order. So the leader's next id is the counter plus the requests
    its earlier calls of this step opened, plus one. A member cannot know: other
    members' requests of the same superstep may come before its own.

    Args:
        context: The leader's tool context.
        kind: The request kind (``shutdown``, ...).

    Returns:
        The id, e.g. ``shutdown_4``.
    """
    if context.caller != LEADER:
        raise ValueError("only the Team Leader's request ids are known when its tool call runs")
    opened = sum(1 for e in context.effects if e["kind"] == effects.OPEN)
    number = context.team.get("counters", {}).get(COUNTER, 0) + opened + 1
    return f"{ID_PREFIX.get(kind, kind)}_{number}"


def _shutdown_request(context: ToolContext, display_name: str, reason: str) -> Command:
    """Ask an active member to shut down; the result names the request id (shutdown_request, send_message)."""
    require_member(context, display_name)
    request_id = next_request_id(context, SHUTDOWN)
    return reply(
        f"Shutdown request {request_id} sent to '{display_name}' (status: pending)",
        context.tool_call_id,
        effects.open_request(request_kind=SHUTDOWN, to=display_name, body=reason or "Your work is no longer needed."),
    )


def broadcast(context: ToolContext, content: str) -> Command:
    """Deliver ``content`` to every other active member (send_message's ``broadcast`` type)."""
    members = [n for n in active_members(context) if n != context.caller]
    if not members:
        raise fail("No active member to broadcast to.", code=errors.NOBODY_TO_ADDRESS)
    sent = [effects.deliver(to=n, body=content) for n in members]
    return reply(f"Broadcast to {len(members)} member(s): {', '.join(members)}.", context.tool_call_id, *sent)


def _response(
    context: ToolContext,
    request_id: str,
    approve: bool,
    text: str,
    kinds: tuple[str, ...],
    *,
    reason_name: str = "",
) -> tuple[Request, AnswerEffect]:
    """A decision on a request routed to the caller: its record and the answer effect.

    A shutdown may only be rejected with a reason (``reason_name`` says where it goes).
    """
    record = _request_to_me(context, request_id, kinds)
    if record["kind"] == SHUTDOWN and not approve and not text.strip():
        raise fail(f"Give a reason{reason_name} when you reject a shutdown request.", code=errors.BAD_ARGUMENT)
    return record, effects.answer(request_id=request_id, answer=text, approve=approve)


@tool(parse_docstring=True)
def update_task(task_id: str, status: TaskStatus, context: ToolContext, note: str | None = None) -> Command:
    """Update a task on the team's task board (created from the approved plan).

    Args:
        task_id: The task's id, e.g. "task_2".
        status: "todo", "in_progress", "done" or "blocked".
        note: A short note (what was produced, what blocks it).
    """
    board = context.team.get("board", [])
    if not any(t["id"] == task_id for t in board):
        tasks = ", ".join(t["id"] for t in board) or "none (no approved plan yet)"
        raise fail(f"No task '{task_id}' on the board. Tasks: {tasks}.", code=errors.UNKNOWN_TASK)
    return reply(
        f"{task_id} is {status}.", context.tool_call_id, effects.board(task_id=task_id, status=status, note=note)
    )


@tool(parse_docstring=True)
def request_approval(operation: str, reason: str, context: ToolContext) -> Command:
    """Ask for approval of a sensitive operation (deleting, changing core config...) and wait.

    Args:
        operation: What you want to do, precisely.
        reason: Why it is needed.
    """
    return defer(
        effects.open_request(
            request_kind=APPROVAL,
            body=f"{operation} (reason: {reason})",
            call_id=context.tool_call_id,
            tool="request_approval",
            details={"operation": operation, "reason": reason},
        )
    )


MESSAGE_TYPES = ("message", "broadcast", "shutdown_request", "shutdown_response", "plan_approval_response")
"""The message types of the team protocols (docs/protocols.md, "Message types")."""
RESPONSE_KINDS = {"shutdown_response": (SHUTDOWN,), "plan_approval_response": (MEMBER_PLAN, APPROVAL)}
"""The request kinds each response message type may answer."""


def _plain_message(context: ToolContext, to: str, content: str) -> Command:
    if to != LEADER:
        require_member(context, to)
    elif context.caller == LEADER:
        raise fail("You cannot message yourself.", code=errors.SELF_ADDRESS)
    return reply(f"Message sent to {to}.", context.tool_call_id, effects.deliver(to=to, body=content))


@tool(parse_docstring=True)
def send_message(
    to: str,
    content: str,
    context: ToolContext,
    msg_type: str = "message",
    request_id: str | None = None,
    approve: bool | None = None,
) -> Command:
    """Send a typed message: message, broadcast, or a protocol message.

    Args:
        to: The receiver's display name ("*" or anything for a broadcast).
        content: The text (for protocol messages: the reason or feedback).
        msg_type: message, broadcast, shutdown_request, shutdown_response or
            plan_approval_response.
        request_id: The request a response answers (shutdown_N, member_plan_N).
        approve: For responses: true or false.
    """
    if msg_type not in MESSAGE_TYPES:
        raise fail(
            f"Unknown message type '{msg_type}'. Valid types: {', '.join(MESSAGE_TYPES)}.", code=errors.BAD_ARGUMENT
        )
    if msg_type == "broadcast":
        return broadcast(context, content)
    if msg_type == "message":
        return _plain_message(context, to, content)
    if msg_type == "shutdown_request":
        if context.caller != LEADER:
            raise fail("Only the Team Leader sends shutdown requests.", code=errors.FORBIDDEN)
        return _shutdown_request(context, to, content)
    if request_id is None or approve is None:
        raise fail(f"A {msg_type} needs request_id and approve (true or false).", code=errors.BAD_ARGUMENT)
    _, answer = _response(context, request_id, approve, content, RESPONSE_KINDS[msg_type], reason_name=" (content)")
    verdict = "approve" if approve else "reject"
    return reply(f"{msg_type} for {request_id} sent ({verdict}).", context.tool_call_id, answer)


@tool(parse_docstring=True)
def propose_plan(
    summary: str,
    steps: list[PlanStep],
    context: ToolContext,
    complexity: Literal["simple", "medium", "complex"] = "medium",
) -> Command:
    """Propose your plan for the user's task and wait for its approval.

    An approved plan becomes the team's task board.

    Args:
        summary: The approach in a few sentences.
        steps: The steps, each {title, role_id, depends_on}.
        complexity: "simple", "medium" or "complex" (sets the team's budget).
    """
    if not steps:
        raise fail("A plan needs at least one step: [{title, role_id, depends_on}].", code=errors.BAD_ARGUMENT)
    roles = context.runtime.roles
    for number, step in enumerate(steps, 1):
        if step.role_id and step.role_id not in roles:
            known = ", ".join(r for r in roles if r != LEADER_ROLE_ID)
            raise fail(f"Step {number}: unknown role '{step.role_id}'. Roles: {known}.", code=errors.UNKNOWN_ROLE)
        if any(d < 1 or d >= number for d in step.depends_on):
            raise fail(
                f"Step {number}: depends_on must name earlier steps (1 to {number - 1}).", code=errors.BAD_ARGUMENT
            )
    details = {"summary": summary, "steps": [s.model_dump() for s in steps], "complexity": complexity}
    body = summary + "\n" + "\n".join(f"{i}. {s.title} ({s.role_id or 'any role'})" for i, s in enumerate(steps, 1))
    return defer(
        effects.open_request(
            request_kind=PLAN, body=body, call_id=context.tool_call_id, tool="propose_plan", details=details
        )
    )


@tool(parse_docstring=True)
def review_plan(request_id: str, approve: bool, context: ToolContext, feedback: str = "") -> Command:
    """Approve or reject a member's plan (member_plan_N) or an approval request (approval_N).

    Args:
        request_id: The id in the request's envelope.
        approve: True to approve, False to reject.
        feedback: What to change (on reject) or to keep in mind (on approve).
    """
    record, answer = _response(context, request_id, approve, feedback, (MEMBER_PLAN, APPROVAL))
    verdict = APPROVED if approve else REJECTED
    return reply(f"{request_id} ({record['from']}) {verdict}.", context.tool_call_id, answer)


@tool(parse_docstring=True)
def shutdown_request(display_name: str, context: ToolContext, reason: str = "") -> Command:
    """Ask a member to shut down gracefully. It approves (and stops) or rejects with a reason.

    A member that does not answer in time is terminated.

    Args:
        display_name: The member's display name.
        reason: Why (e.g. "your part is done").
    """
    return _shutdown_request(context, display_name, reason)


@tool(parse_docstring=True)
def check_shutdown_status(request_id: str, context: ToolContext) -> str:
    """The status of a shutdown request: request_id, target, status, timestamp, answer, deadline.

    Args:
        request_id: The id, e.g. "shutdown_4".
    """
    record = context.requests.get(request_id)
    if record is None or record["kind"] != SHUTDOWN:
        ids = [r for r, rec in context.requests.items() if rec["kind"] == SHUTDOWN]
        raise fail(
            f"Unknown shutdown request '{request_id}'. Shutdown requests: {', '.join(ids) or 'none'}.",
            code=errors.UNKNOWN_REQUEST,
        )
    status = {
        "request_id": record["id"],
        "target": record["to"],
        "status": record["status"],
        "timestamp": record["opened_at"],
        "answer": record["answer"],
        "deadline": record.get("deadline"),
    }
    return json.dumps(status, ensure_ascii=False)


@tool(parse_docstring=True)
def escalate_to_user(request_id: str, context: ToolContext, note: str = "") -> Command:
    """Send a question or approval you cannot or should not decide to the user.

    Args:
        request_id: A pending request waiting for you (ask_N, member_plan_N, approval_N).
        note: What the user should know (context, your recommendation).
    """
    record = context.requests.get(request_id)
    if record is None or not is_pending(record) or record.get("route") != LEADER:
        mine = [r for r, rec in context.requests.items() if is_pending(rec) and rec.get("route") == LEADER]
        raise fail(
            f"'{request_id}' is not a request waiting for you. Waiting for you: {', '.join(mine) or 'none'}.",
            code=errors.UNKNOWN_REQUEST,
        )
    return reply(
        f"{request_id} was sent to the user.",
        context.tool_call_id,
        effects.escalate(request_id=request_id, note=note or None),
    )


@tool(parse_docstring=True)
def ask_user(question: str, context: ToolContext) -> Command:
    """Ask the user (a person) a question and wait for the answer.

    Args:
        question: A specific question; give the options you see.
    """
    return defer(
        effects.open_request(
            request_kind=ASK, body=question, call_id=context.tool_call_id, tool="ask_user", details={"to_user": True}
        )
    )


@tool(parse_docstring=True)
def submit_plan(plan: str, context: ToolContext) -> Command:
    """Submit your plan before major work and wait for approval.

    Args:
        plan: The steps you will take, the files you will touch, how you will check.
    """
    return defer(
        effects.open_request(
            request_kind=MEMBER_PLAN,
            body=plan,
            call_id=context.tool_call_id,
            tool="submit_plan",
            details={"plan": plan},
        )
    )


@tool(parse_docstring=True)
def shutdown_response(request_id: str, approve: bool, context: ToolContext, reason: str = "") -> Command:
    """Answer a shutdown request: approve (you stop after this step) or reject with a reason.

    Args:
        request_id: The id in the request's envelope, e.g. "shutdown_4".
        approve: True to shut down, False to go on.
        reason: Why (required to reject).
    """
    _, answer = _response(context, request_id, approve, reason, (SHUTDOWN,))
    text = "Shutdown approved: you stop after this step." if approve else "Shutdown rejected; go on with your work."
    return reply(text, context.tool_call_id, answer)


SHARED_PROTOCOL_TOOLS: list[BaseTool] = [request_approval, update_task, send_message]
"""The protocol tools both sides get."""
LEADER_PROTOCOL_TOOLS: list[BaseTool] = [
    propose_plan,
    review_plan,
    shutdown_request,
    check_shutdown_status,
    escalate_to_user,
    ask_user,
    *SHARED_PROTOCOL_TOOLS,
]
"""The leader's side of the ``protocols`` tool set."""
MEMBER_PROTOCOL_TOOLS: list[BaseTool] = [submit_plan, shutdown_response, *SHARED_PROTOCOL_TOOLS]
"""A member's side of the ``protocols`` tool set."""
