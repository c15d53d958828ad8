"""Team protocols (docs/protocols.md, "Shutdown" and "Plans"): plans, approvals, shutdowns, escalation, the task board.

Every protocol is a request with an id, a tracker entry that moves from
``pending`` to a closed status once, and a response that names the id. Who
decides a plan, a member's plan, a question or an approval is policy
(``Policy.plan`` ...); the router routes each request to its decider.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.prebuilt import InjectedState
from pydantic import BaseModel, Field

from teamgraph.records import LEADER_ROLE_ID
from teamgraph.messaging import effects
from teamgraph.messaging.results import plan_submitted  # noqa: F401 - re-exported
from teamgraph.messaging.envelopes import LEADER
from teamgraph.protocols.requests import (
    APPROVAL,
    ASK,
    COUNTER,
    ID_PREFIX,
    MEMBER_PLAN,
    PLAN,
    SHUTDOWN,
    is_pending,
)
from teamgraph.runtime import TeamRuntime
from teamgraph.tools.context import (
    View,
    active_members,
    caller,
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


def _request_to_me(view: View, request_id: str, kinds: tuple[str, ...]) -> dict:
    """A pending request of one of ``kinds`` that the caller must decide, or an error."""
    record = view["requests"].get(request_id)
    if record is None or record["kind"] not in kinds or record.get("route") != caller(view):
        mine = [
            r
            for r, rec in view["requests"].items()
            if rec["kind"] in kinds and rec.get("route") == caller(view) and is_pending(rec)
        ]
        raise fail(f"Unknown {' or '.join(kinds)} request '{request_id}'. Yours pending: {', '.join(mine) or 'none'}.")
    earlier = [e for e in view["effects"] if e["kind"] == "answer" and e["request_id"] == request_id]
    if earlier:
        raise fail(f"Request '{request_id}' is already {'approved' if earlier[0]['approve'] else 'rejected'}.")
    if not is_pending(record):
        raise fail(f"Request '{request_id}' is already {record['status']}.")
    return record


def next_request_id(view: View, kind: str) -> str:
    """The id the router gives a request the Team Leader opens with its current tool call.

    NOTE: ids come from one counter per thread, advanced in the order the router
    applies effects: the leader's first (it is agent 0, and its step is one model
    call), in call order. So the leader's next id is the counter plus the requests
    its earlier calls of this step opened, plus one. A member cannot know: other
    members' requests of the same superstep may come before its own.

    Args:
        view: The leader's view of the team.
        kind: The request kind (``shutdown``, ...).
    """
    if caller(view) != LEADER:
        raise ValueError("only the Team Leader's request ids are known when its tool call runs")
    opened = sum(1 for e in view["effects"] if e["kind"] == effects.OPEN)
    number = view["team"].get("counters", {}).get(COUNTER, 0) + opened + 1
    return f"{ID_PREFIX.get(kind, kind)}_{number}"


def _shutdown_request(view: View, display_name: str, reason: str, tool_call_id: str):
    """Ask an active member to shut down; the result names the request id (shutdown_request, send_message)."""
    require_member(view, display_name)
    request_id = next_request_id(view, SHUTDOWN)
    return reply(
        f"Shutdown request {request_id} sent to '{display_name}' (status: pending)",
        tool_call_id,
        effects.open_request(request_kind=SHUTDOWN, to=display_name, body=reason or "Your work is no longer needed."),
    )


def broadcast(view: View, content: str, tool_call_id: str):
    """Deliver ``content`` to every other active member (send_message's ``broadcast`` type)."""
    members = [n for n in active_members(view) if n != caller(view)]
    if not members:
        raise fail("No active member to broadcast to.")
    sent = [effects.deliver(to=n, body=content) for n in members]
    return reply(f"Broadcast to {len(members)} member(s): {', '.join(members)}.", tool_call_id, *sent)


def _response(
    view: View, request_id: str, approve: bool, text: str, kinds: tuple[str, ...], *, reason_name: str = ""
) -> tuple[dict, dict]:
    """A decision on a request routed to the caller: its record and the answer effect.

    A shutdown may only be rejected with a reason (``reason_name`` says where it goes).
    """
    record = _request_to_me(view, request_id, kinds)
    if record["kind"] == SHUTDOWN and not approve and not text.strip():
        raise fail(f"Give a reason{reason_name} when you reject a shutdown request.")
    return record, effects.answer(request_id=request_id, answer=text, approve=approve)


def _update_task_tool() -> BaseTool:
    @tool
    def update_task(
        task_id: str,
        status: TaskStatus,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
        note: str | None = None,
    ):
        """Update a task on the team's task board (created from the approved plan).

        Args:
            task_id: The task's id, e.g. "task_2".
            status: "todo", "in_progress", "done" or "blocked".
            note: A short note (what was produced, what blocks it).
        """
        board = view["team"].get("board", [])
        if not any(t["id"] == task_id for t in board):
            tasks = ", ".join(t["id"] for t in board) or "none (no approved plan yet)"
            raise fail(f"No task '{task_id}' on the board. Tasks: {tasks}.")
        return reply(f"{task_id} is {status}.", tool_call_id, effects.board(task_id=task_id, status=status, note=note))

    return update_task


def _request_approval_tool() -> BaseTool:
    @tool
    def request_approval(
        operation: str,
        reason: str,
        tool_call_id: Annotated[str, InjectedToolCallId],
    ):
        """Ask for approval of a sensitive operation (deleting, changing core config...) and wait.

        Args:
            operation: What you want to do, precisely.
            reason: Why it is needed.
        """
        return defer(
            effects.open_request(
                request_kind=APPROVAL,
                body=f"{operation} (reason: {reason})",
                call_id=tool_call_id,
                tool="request_approval",
                details={"operation": operation, "reason": reason},
            )
        )

    return request_approval


MESSAGE_TYPES = ("message", "broadcast", "shutdown_request", "shutdown_response", "plan_approval_response")
"""The message types of the team protocols (docs/protocols.md, "Message types")."""


def _send_message_tool() -> BaseTool:
    @tool
    def send_message(
        to: str,
        content: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
        msg_type: str = "message",
        request_id: str | None = None,
        approve: bool | None = None,
    ):
        """Send a typed message: message, broadcast, or a protocol message.

        Args:
            to: The receiver's display name ("*" or anything for a broadcast).
            content: The text (for protocol messages: the reason or feedback).
            msg_type: message, broadcast, shutdown_request, shutdown_response or
                plan_approval_response.
            request_id: The request a response answers (shutdown_N, member_plan_N).
            approve: For responses: true or false.
        """
        me = caller(view)
        if msg_type not in MESSAGE_TYPES:
            raise fail(f"Unknown message type '{msg_type}'. Valid types: {', '.join(MESSAGE_TYPES)}.")
        if msg_type == "broadcast":
            return broadcast(view, content, tool_call_id)
        if msg_type == "message":
            if to != LEADER:
                require_member(view, to)
            elif me == LEADER:
                raise fail("You cannot message yourself.")
            return reply(f"Message sent to {to}.", tool_call_id, effects.deliver(to=to, body=content))
        if msg_type == "shutdown_request":
            if me != LEADER:
                raise fail("Only the Team Leader sends shutdown requests.")
            return _shutdown_request(view, to, content, tool_call_id)
        if request_id is None or approve is None:
            raise fail(f"A {msg_type} needs request_id and approve (true or false).")
        kinds = (SHUTDOWN,) if msg_type == "shutdown_response" else (MEMBER_PLAN, APPROVAL)
        _, answer = _response(view, request_id, approve, content, kinds, reason_name=" (content)")
        return reply(f"{msg_type} for {request_id} sent ({'approve' if approve else 'reject'}).", tool_call_id, answer)

    return send_message


def make_leader_protocol_tools(runtime: TeamRuntime) -> list[BaseTool]:
    """The leader's side of the protocols."""

    @tool
    def propose_plan(
        summary: str,
        steps: list[PlanStep],
        tool_call_id: Annotated[str, InjectedToolCallId],
        complexity: Literal["simple", "medium", "complex"] = "medium",
    ):
        """Propose your plan for the user's task and wait for its approval.

        An approved plan becomes the team's task board.

        Args:
            summary: The approach in a few sentences.
            steps: The steps, each {title, role_id, depends_on}.
            complexity: "simple", "medium" or "complex" (sets the team's budget).
        """
        if not steps:
            raise fail("A plan needs at least one step: [{title, role_id, depends_on}].")
        for number, step in enumerate(steps, 1):
            if step.role_id and step.role_id not in runtime.roles:
                roles = ", ".join(r for r in runtime.roles if r != LEADER_ROLE_ID)
                raise fail(f"Step {number}: unknown role '{step.role_id}'. Roles: {roles}.")
            if any(d < 1 or d >= number for d in step.depends_on):
                raise fail(f"Step {number}: depends_on must name earlier steps (1 to {number - 1}).")
        details = {
            "summary": summary,
            "steps": [s.model_dump() for s in steps],
            "complexity": complexity,
        }
        body = summary + "\n" + "\n".join(f"{i}. {s.title} ({s.role_id or 'any role'})" for i, s in enumerate(steps, 1))
        return defer(
            effects.open_request(
                request_kind=PLAN, body=body, call_id=tool_call_id, tool="propose_plan", details=details
            )
        )

    @tool
    def review_plan(
        request_id: str,
        approve: bool,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
        feedback: str = "",
    ):
        """Approve or reject a member's plan (member_plan_N) or an approval request (approval_N).

        Args:
            request_id: The id in the request's envelope.
            approve: True to approve, False to reject.
            feedback: What to change (on reject) or to keep in mind (on approve).
        """
        record, answer = _response(view, request_id, approve, feedback, (MEMBER_PLAN, APPROVAL))
        verdict = "approved" if approve else "rejected"
        return reply(f"{request_id} ({record['from']}) {verdict}.", tool_call_id, answer)

    @tool
    def shutdown_request(
        display_name: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
        reason: str = "",
    ):
        """Ask a member to shut down gracefully. It approves (and stops) or rejects with a reason.

        A member that does not answer in time is terminated.

        Args:
            display_name: The member's display name.
            reason: Why (e.g. "your part is done").
        """
        return _shutdown_request(view, display_name, reason, tool_call_id)

    @tool
    def check_shutdown_status(request_id: str, view: Annotated[View, InjectedState("view")]) -> str:
        """The status of a shutdown request: request_id, target, status, timestamp, answer, deadline.

        Args:
            request_id: The id, e.g. "shutdown_4".
        """
        record = view["requests"].get(request_id)
        if record is None or record["kind"] != SHUTDOWN:
            ids = [r for r, rec in view["requests"].items() if rec["kind"] == SHUTDOWN]
            raise fail(f"Unknown shutdown request '{request_id}'. Shutdown requests: {', '.join(ids) or 'none'}.")
        status = {
            "request_id": record["id"],
            "target": record["to"],
            "status": record["status"],
            "timestamp": record["opened_at"],
            "answer": record["answer"],
            "deadline": record.get("deadline"),
        }
        return json.dumps(status, ensure_ascii=False)

    @tool
    def escalate_to_user(
        request_id: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
        note: str = "",
    ):
        """Send a question or approval you cannot or should not decide to the user.

        Args:
            request_id: A pending request waiting for you (ask_N, member_plan_N, approval_N).
            note: What the user should know (context, your recommendation).
        """
        record = view["requests"].get(request_id)
        if record is None or not is_pending(record) or record.get("route") != LEADER:
            mine = [r for r, rec in view["requests"].items() if is_pending(rec) and rec.get("route") == LEADER]
            raise fail(
                f"'{request_id}' is not a request waiting for you. Waiting for you: {', '.join(mine) or 'none'}."
            )
        return reply(
            f"{request_id} was sent to the user.",
            tool_call_id,
            effects.escalate(request_id=request_id, note=note or None),
        )

    @tool
    def ask_user(question: str, tool_call_id: Annotated[str, InjectedToolCallId]):
        """Ask the user (a person) a question and wait for the answer.

        Args:
            question: A specific question; give the options you see.
        """
        return defer(
            effects.open_request(
                request_kind=ASK, body=question, call_id=tool_call_id, tool="ask_user", details={"to_user": True}
            )
        )

    return [
        propose_plan,
        review_plan,
        shutdown_request,
        check_shutdown_status,
        escalate_to_user,
        ask_user,
        _request_approval_tool(),
        _update_task_tool(),
        _send_message_tool(),
    ]


def make_member_protocol_tools(runtime: TeamRuntime) -> list[BaseTool]:
    """A member's side of the protocols."""
    del runtime

    @tool
    def submit_plan(plan: str, tool_call_id: Annotated[str, InjectedToolCallId]):
        """Submit your plan before major work and wait for approval.

        Args:
            plan: The steps you will take, the files you will touch, how you will check.
        """
        return defer(
            effects.open_request(
                request_kind=MEMBER_PLAN, body=plan, call_id=tool_call_id, tool="submit_plan", details={"plan": plan}
            )
        )

    @tool
    def shutdown_response(
        request_id: str,
        approve: bool,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
        reason: str = "",
    ):
        """Answer a shutdown request: approve (you stop after this step) or reject with a reason.

        Args:
            request_id: The id in the request's envelope, e.g. "shutdown_4".
            approve: True to shut down, False to go on.
            reason: Why (required to reject).
        """
        _, answer = _response(view, request_id, approve, reason, (SHUTDOWN,))
        text = "Shutdown approved: you stop after this step." if approve else "Shutdown rejected; go on with your work."
        return reply(text, tool_call_id, answer)

    return [submit_plan, shutdown_response, _request_approval_tool(), _update_task_tool(), _send_message_tool()]


def make_protocol_tools(runtime: TeamRuntime, *, leader: bool) -> list[BaseTool]:
    """The protocol tools for the leader's or a member's side."""
    return make_leader_protocol_tools(runtime) if leader else make_member_protocol_tools(runtime)
