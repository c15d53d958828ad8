"""Agent-to-agent sessions (docs/protocols.md, "Sessions"): sessions_list, sessions_send, sessions_spawn.

An agent's session key is its display name. ``sessions_send`` blocks up to a
time-out (the target keeps working after it; its reply then arrives as a
message) or, with ``timeoutSeconds=0``, is fire-and-forget. ``sessions_spawn``
delegates in the background and pushes the result back to the requester.
"""

from __future__ import annotations

import json
from typing import Literal

from langchain_core.tools import BaseTool, tool
from langgraph.types import Command

from teamgraph.messaging import effects
from teamgraph.messaging.results import communication_failed, timed_out  # noqa: F401 - re-exported
from teamgraph.protocols.requests import QUESTION, RUN
from teamgraph.records import ACTIVE, LEADER, LEADER_ROLE_ID, SpawnEffect
from teamgraph.tools import errors
from teamgraph.tools.context import (
    TeamView,
    ToolContext,
    check_seconds,
    defer,
    fail,
    instance_name,
    reply,
    require_creatable,
    terminated_this_step,
)

DEFAULT_TIMEOUT_SECONDS = 120

PURPOSES = {True: "knowledge query (ask, learn, check, confirm)", False: "notification (inform, pass on)"}
"""The default purpose (通信目的) of a sessions_send, by whether it blocks."""
EXPECTED = {True: "blocking", False: "fire-and-forget"}
"""The expected response (期望响应) of a sessions_send, by whether it blocks."""
NOT_GIVEN = "(not given)"


def live_sessions(context: ToolContext) -> list[str]:
    """The session keys of every agent that can still receive messages."""
    return [n for n, r in context.agents.items() if r["status"] in ACTIVE]


def unknown_target(target: str, available: list[str]) -> str:
    """The error for a target that does not exist or is unavailable (docs/protocols.md, "Sessions").

    Args:
        target: The session key the caller gave.
        available: The live session keys it may use instead.
    """
    listing = "\n".join(f"- {key}" for key in available) or "- (none)"
    return (
        f'Target agent "{target}" does not exist or is unavailable.\n'
        f"Available agents (from sessions_list):\n{listing}\n"
        "Check the target name or choose another agent; call sessions_list for the live session keys, "
        "do not reuse keys from memory."
    )


def require_session(context: ToolContext, key: str) -> None:
    """An error worded as the sessions spec words it, unless ``key`` is a live session other than the caller's."""
    if key == context.caller:
        raise fail("That session is you: you cannot send to yourself.", code=errors.SELF_ADDRESS)
    live = live_sessions(context)
    if key not in live or terminated_this_step(context, key):
        others = [k for k in live if k not in (context.caller, key)]
        code: errors.ErrorCode = errors.AGENT_ENDED if key in context.agents else errors.UNKNOWN_AGENT
        raise fail(unknown_target(key, others), code=code)


def request_message(
    view: TeamView,
    target: str,
    message: str,
    *,
    timeout: float,
    purpose: str | None = None,
    user_request: str | None = None,
    context_summary: str | None = None,
) -> str:
    """A sessions_send request in the spec's template: header, the user's words, the request, the context.

    Args:
        view: The caller's view of the team (``ToolContext.view``).
        target: The receiver's session key.
        message: The request itself.
        timeout: The caller's ``timeoutSeconds`` (0: fire-and-forget).
        purpose: Why the caller writes (通信目的); by default from whether it blocks.
        user_request: The user's own words the request serves (用户需求).
        context_summary: What the receiver should know besides (上下文摘要).

    Returns:
        The text delivered to ``target``.
    """
    me, blocking = view.caller, timeout > 0
    # NOTE: the spec's template has blank lines around "---"; envelopes hold none (a
    # blank line separates envelopes that arrive together), so the sections are
    # separated by the "---" lines alone.
    return (
        f"[Agent-to-agent communication]\n"
        f"sender: {me} ({view.agents[me]['role']})\n"
        f"receiver: {target}\n"
        f"source sessionKey: {me}\n"
        f"purpose: {purpose or PURPOSES[blocking]}\n"
        f"expected response: {EXPECTED[blocking]}\n"
        f"timeout: {timeout:g}\n"
        f"---\n"
        f"user request: {user_request or NOT_GIVEN}\n"
        f"{message}\n"
        f"---\n"
        f"context summary: {context_summary or NOT_GIVEN}"
    )


def spawn_target(context: ToolContext, agent_id: str | None) -> tuple[str, list[SpawnEffect]]:
    """Who runs a sessions_spawn task: a live session, or a new agent of a role (and its spawn effect).

    Args:
        context: The caller's tool context (the team, the role catalogue).
        agent_id: A live session key, a role id, or None for a new agent of the caller's role.

    Returns:
        The child's session key and the effects that create it (none for a live session).
    """
    me, roles = context.caller, context.runtime.roles
    if agent_id == LEADER:
        raise fail(
            "The Team Leader takes no background runs: use ask_master to ask it, or give a member or a role id.",
            code=errors.NOT_A_MEMBER,
        )
    if agent_id is not None and agent_id in context.agents:
        require_session(context, agent_id)
        return agent_id, []
    if agent_id is None and me == LEADER:
        raise fail(
            "Give agentId: a role id for a new agent (e.g. 'researcher') or a live session key (sessions_list).",
            code=errors.BAD_ARGUMENT,
        )
    role = roles.get(agent_id or context.agents[me]["role"])
    if role is None or role.is_leader:
        ids = ", ".join(r for r in roles if r != LEADER_ROLE_ID)
        raise fail(
            f"Unknown agentId '{agent_id}'. Use a role id ({ids}) or a live session key (sessions_list).",
            code=errors.UNKNOWN_ROLE,
        )
    require_creatable(context, role)
    child = instance_name(context, role)
    return child, [effects.spawn(role_id=role.id, name=child, task=None)]


@tool(parse_docstring=True, error_on_invalid_docstring=False)  # NOTE: no argument, no Args: section
def sessions_list(context: ToolContext) -> str:
    """List the live sessions (agents) and their session keys. Call it before sending."""
    rows = [
        {
            "sessionKey": name,
            "role_id": context.agents[name]["role"],
            "status": context.agents[name]["status"],
            "you": name == context.caller,
        }
        for name in live_sessions(context)
    ]
    return json.dumps(rows, ensure_ascii=False)


@tool(parse_docstring=True)
def sessions_send(
    sessionKey: str,
    message: str,
    context: ToolContext,
    timeoutSeconds: float = DEFAULT_TIMEOUT_SECONDS,
    purpose: str | None = None,
    userRequest: str | None = None,
    contextSummary: str | None = None,
) -> Command:
    """Send a message to a session and wait up to timeoutSeconds for its reply (0: fire-and-forget).

    After the reply you and the target may go back and forth a few rounds; put
    REPLY_SKIP in your reply to stop.

    Args:
        sessionKey: The target's session key (from sessions_list).
        message: The request: what you need and what you expect back.
        timeoutSeconds: Seconds to wait (default 120); 0 sends without waiting.
        purpose: Why you write, e.g. "knowledge query" or "notification" (default: from timeoutSeconds).
        userRequest: The user's own words this request serves, if any.
        contextSummary: What the target should know besides: decisions, files, who does what.
    """
    require_session(context, sessionKey)
    check_seconds("timeoutSeconds", timeoutSeconds, zero="fire-and-forget")
    if timeoutSeconds > 0 and sessionKey == LEADER:
        raise fail(
            "To ask the Team Leader and wait, use ask_master; sessions_send with timeoutSeconds=0 only notifies it.",
            code=errors.WRONG_TOOL,
        )
    body = request_message(
        context.view,
        sessionKey,
        message,
        timeout=timeoutSeconds,
        purpose=purpose,
        user_request=userRequest,
        context_summary=contextSummary,
    )
    if timeoutSeconds == 0:
        return reply(
            f"Sent to {sessionKey} (fire-and-forget): no reply expected.",
            context.tool_call_id,
            effects.deliver(to=sessionKey, body=body),
        )
    return defer(
        effects.open_request(
            request_kind=QUESTION,
            to=sessionKey,
            body=body,
            call_id=context.tool_call_id,
            tool="sessions_send",
            reply_via="output",
            timeout=timeoutSeconds,
            details={"ping_pong": True, "timeout": timeoutSeconds},
        )
    )


@tool(parse_docstring=True)
def sessions_spawn(
    task: str,
    context: ToolContext,
    label: str | None = None,
    agentId: str | None = None,
    runTimeoutSeconds: float = 0,
    cleanup: Literal["keep", "delete"] = "keep",
) -> Command:
    """Delegate a task in the background; the result is pushed back to you when it is done.

    Returns at once with {status: "accepted", runId, childSessionKey}.

    Args:
        task: The task: objective, output, scope.
        label: A short label for this run.
        agentId: A role id for a new agent (e.g. "researcher"), or the session key
            of an existing agent; by default a new agent of your own role.
        runTimeoutSeconds: Stop the run after this many seconds (0: no limit).
        cleanup: "keep" the child afterwards, or "delete" it once it has reported.
    """
    check_seconds("runTimeoutSeconds", runTimeoutSeconds, zero="no limit")
    child, spawned = spawn_target(context, agentId)
    header = (
        f"[Background run from {context.caller}"
        + (f" · {label}" if label else "")
        + "] Your final message is pushed back to the requester.\n"
    )
    return defer(
        *spawned,
        effects.open_request(
            request_kind=RUN,
            to=child,
            body=task,
            call_id=context.tool_call_id,
            tool="sessions_spawn",
            reply_via="output",
            timeout=runTimeoutSeconds or None,
            details={"label": label, "cleanup": cleanup, "header": header},
        ),
    )


SESSION_TOOLS: list[BaseTool] = [sessions_list, sessions_send, sessions_spawn]
"""The ``sessions`` tool set."""
