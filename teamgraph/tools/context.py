"""What a tool sees and how it answers.

A tool declares one parameter typed :class:`ToolContext` (any name) and receives, per
call: who calls, a read-only view of the team (agents, requests, the team book), the
effects that earlier tool calls of the same step asked for, the team runtime (policy,
roles, home, clock), the tool call id and idempotency key, the run's number (above 1
when the process died while an earlier run of the call ran) and the call's config. The
parameter is injected by its type, like LangGraph's ``ToolRuntime``, and stays out of
the schema the model sees. A tool answers with text for its caller and, through
``Command``, effects for the router.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.prebuilt import ToolRuntime
from langgraph.types import Command
from pydantic import GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

from teamgraph.governance.agents import change_refusal, creation_refusal
from teamgraph.messaging import effects
from teamgraph.protocols.requests import APPROVED, QUESTION, is_pending
from teamgraph.records import ACTIVE, LEADER, AgentRecord, Effect, Request, TeamBook, TeamView
from teamgraph.runs import run_key
from teamgraph.tools import errors
from teamgraph.tools.errors import ErrorCode, ToolError

if TYPE_CHECKING:
    from teamgraph.roles import Role
    from teamgraph.runtime import TeamRuntime

try:
    from langchain_core.tools.base import _DirectlyInjectedToolArg as InjectedByType
except ImportError:  # NOTE: a private langchain-core name; ToolRuntime's own base is the same marker
    InjectedByType = ToolRuntime.__mro__[1]  # type: ignore[misc,assignment]


@dataclass(frozen=True, repr=False)
class ToolContext(InjectedByType):
    """Everything a tool may read: injected into the parameter typed ``ToolContext``.

    NOTE: our own class rather than LangGraph's ``ToolRuntime`` with this in its
    ``context``: langchain validates and dumps a tool's arguments with pydantic, and a
    dataclass argument is dumped field by field (ToolRuntime's ``state`` and ``context``
    hold every request of the run: 37 ms a call at 5,000 requests; passed through as
    ``__get_pydantic_core_schema__`` says, the context costs under 1 ms). Our executor
    has no store nor stream writer to fill ToolRuntime's other fields with either. It
    subclasses the same marker as ToolRuntime, so langchain keeps it out of the schema.
    """

    view: TeamView
    runtime: TeamRuntime
    tool_call_id: str = ""
    config: RunnableConfig = field(default_factory=lambda: RunnableConfig())
    effects: tuple[Effect, ...] = ()
    """What the step's earlier tool calls asked for (the router applies them after the step)."""
    attempt: int = 1
    """This run of the call: 1, or more when the process died while an earlier run of it ran (that
    run may have had its effect; ``idempotency_key`` is the same)."""

    @property
    def idempotency_key(self) -> str:
        """The call's idempotency key, the same on every run of it: ``<thread id>:<tool call id>``.

        Pass it to a service that deduplicates requests (a payment API's idempotency key):
        a call run again after a crash then takes effect once. The tool call id alone (what
        ``InjectedToolCallId`` gives) is as stable, but unique only as far as the model
        provider makes it (a scripted model's ids repeat from thread to thread).
        """
        run = run_key(self.config)
        return f"{run}:{self.tool_call_id}" if run else self.tool_call_id

    @property
    def caller(self) -> str:
        """The display name of the agent whose tool call this is."""
        return self.view.caller

    @property
    def agents(self) -> Mapping[str, AgentRecord]:
        """The registry: display name -> agent record."""
        return self.view.agents

    @property
    def requests(self) -> Mapping[str, Request]:
        """Every request of the thread by id, open or closed."""
        return self.view.requests

    @property
    def team(self) -> TeamBook:
        """The team book: counters, plan, task board, instances."""
        return self.view.team

    def __repr__(self) -> str:
        return f"ToolContext(caller={self.caller!r}, tool_call_id={self.tool_call_id!r}, attempt={self.attempt})"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        # NOTE: checked by type, never copied. langchain dumps the validated arguments only to read
        # their names (the values it passes on are the validated objects), so the dump is a token.
        return core_schema.is_instance_schema(cls, serialization=core_schema.plain_serializer_function_ser_schema(repr))


def reply(text: str, tool_call_id: str, *effects: Effect) -> Command:
    """An immediate tool result plus the effects the router must apply."""
    return Command(
        update={
            "new": [ToolMessage(content=text, tool_call_id=tool_call_id)],
            "effects": list(effects),
        }
    )


def defer(*effects: Effect) -> Command:
    """No result yet: the tool call stays open until the router answers it."""
    return Command(update={"effects": list(effects)})


def check_seconds(name: str, value: float, *, zero: str) -> None:
    """Refuse a time-out that is negative, not a number, infinite or longer than a week.

    Args:
        name: The argument's name, for the error.
        value: The seconds given.
        zero: What 0 means for this argument (e.g. "fire-and-forget").
    """
    if not math.isfinite(value) or not 0 <= value <= effects.MAX_WAIT_SECONDS:
        raise fail(
            f"{name} must be 0 ({zero}) or a number of seconds up to {effects.MAX_WAIT_SECONDS} (a week); "
            f"got {value!r}.",
            code=errors.BAD_ARGUMENT,
        )


def fail(problem: str, *, code: ErrorCode) -> ToolError:
    """An error result for the calling agent (it goes on; the run does not stop).

    Args:
        problem: What was wrong and how to fix it, for the model.
        code: What went wrong, for programs (``teamgraph/tools/errors.py``); stored on the result.

    Returns:
        The exception to raise.
    """
    return ToolError(problem, code=code)


def active_members(context: ToolContext) -> list[str]:
    """Members (not the leader) that can still receive messages, in creation order."""
    return [name for name, record in context.agents.items() if name != LEADER and record["status"] in ACTIVE]


def terminated_this_step(context: ToolContext, name: str) -> bool:
    """Whether an earlier call of this step terminated ``name``."""
    return any(e["kind"] == "terminate" and e["target"] == name for e in context.effects)


def caller_role(context: ToolContext) -> Role | None:
    """The calling agent's role (None for an agent the registry does not know yet)."""
    record = context.agents.get(context.caller)
    return context.runtime.role(record["role"]) if record else None


def require_approved_plan(context: ToolContext) -> None:
    """With ``Policy.require_plan``, refuse delegation until a plan is approved."""
    if context.runtime.policy.require_plan and context.team.get("plan", {}).get("status") != APPROVED:
        raise fail(
            "No approved plan yet: this team requires one before you create members or "
            "delegate. Call propose_plan(summary, steps, complexity) and wait for approval.",
            code=errors.PLAN_REQUIRED,
        )


def require_creatable(context: ToolContext, role: Role) -> None:
    """Refuse to create a member of ``role`` before an approved plan (when required) or above the
    caller's level: every path that creates one asks."""
    require_approved_plan(context)
    caller = caller_role(context)
    refused = creation_refusal(caller, context.caller, role) if caller else None
    if refused:
        raise fail(refused, code=errors.FORBIDDEN)


def require_changeable(context: ToolContext, role: Role, *, what: str) -> None:
    """Refuse to change ``what`` of ``role`` (the leader's, or above the caller's level) directly."""
    caller = caller_role(context)
    refused = change_refusal(caller, context.caller, role, what=what) if caller else None
    if refused:
        raise fail(refused, code=errors.FORBIDDEN)


def require_member(context: ToolContext, display_name: str) -> AgentRecord:
    """The record of an active member, or an error that lists the active members."""
    if display_name == context.caller:
        raise fail(f"'{display_name}' is you: you cannot address yourself.", code=errors.SELF_ADDRESS)
    record = context.agents.get(display_name)
    if terminated_this_step(context, display_name):
        raise fail(f"{display_name} was terminated by an earlier call of this step.", code=errors.AGENT_ENDED)
    if record is None or display_name == LEADER or record["status"] not in ACTIVE:
        members = ", ".join(active_members(context)) or "none"
        state = f" (it is {record['status']})" if record and display_name != LEADER else ""
        raise fail(
            f"No active member named '{display_name}'{state}. Active members: {members}. "
            "Use the exact display name, e.g. 'UI Operator_1'.",
            code=member_error(display_name, record),
        )
    return record


def member_error(display_name: str, record: AgentRecord | None) -> ErrorCode:
    """Why ``display_name`` is not an active member: the leader, an agent that ended, or no agent."""
    if display_name == LEADER:
        return errors.NOT_A_MEMBER
    return errors.UNKNOWN_AGENT if record is None else errors.AGENT_ENDED


def answered_this_step(context: ToolContext) -> set[str]:
    """The ids of the requests earlier calls of this step answered."""
    return {e["request_id"] for e in context.effects if e["kind"] == "answer"}


def require_question(context: ToolContext, question_id: str, *, kinds: set[str]) -> Request:
    """A pending question addressed to the caller, or an error saying what is wrong."""
    record = context.requests.get(question_id)
    answered = answered_this_step(context)
    if record is None or record["kind"] not in kinds or record.get("route", record["to"]) != context.caller:
        mine = [
            rid
            for rid, r in context.requests.items()
            if is_pending(r) and r["kind"] in kinds and r.get("route") == context.caller and rid not in answered
        ]
        raise fail(
            f"Unknown question id '{question_id}'. Questions waiting for your answer: {', '.join(mine) or 'none'}.",
            code=errors.UNKNOWN_REQUEST,
        )
    if question_id in answered:
        raise fail(f"Question '{question_id}' is already answered.", code=errors.ALREADY_ANSWERED)
    if not is_pending(record):
        raise fail(f"Question '{question_id}' is already {record['status']}.", code=errors.ALREADY_ANSWERED)
    return record


def instance_name(context: ToolContext, role: Role) -> str:
    """The next display name for ``role``: numbered per display name from 1, never reused."""
    taken = context.team.get("instances", {}).get(role.name, 0)
    return f"{role.name}_{taken + spawned_this_step(context, role.name) + 1}"


def spawned_this_step(context: ToolContext, role_name: str) -> int:
    """How many members named ``{role_name}_{n}`` earlier tool calls of this step created."""
    return sum(1 for e in context.effects if e["kind"] == "spawn" and e["name"].rsplit("_", 1)[0] == role_name)


def ask_agent(
    context: ToolContext, display_name: str, question: str, *, tool: str, reply_via: effects.ReplyVia = "tool"
) -> Command:
    """Open a question to another agent; the calling tool call waits for the answer."""
    require_member(context, display_name)
    return defer(
        effects.open_request(
            request_kind=QUESTION,
            to=display_name,
            body=question,
            call_id=context.tool_call_id,
            tool=tool,
            reply_via=reply_via,
        )
    )


def answer_question(context: ToolContext, question_id: str, answer: str, *, kind: str) -> Command:
    """Answer a pending question of ``kind`` addressed to the caller."""
    record = require_question(context, question_id, kinds={kind})
    return reply(
        f"Answered {question_id} ({record['from']}).",
        context.tool_call_id,
        effects.answer(request_id=question_id, answer=answer),
    )
