"""Agent-to-agent sessions (seed 004): sessions_list, sessions_send, sessions_spawn.

An agent's session key is its display name. ``sessions_send`` blocks up to a
time-out (the target keeps working after it; its reply then arrives as a
message) or, with ``timeoutSeconds=0``, is fire-and-forget. ``sessions_spawn``
delegates in the background and pushes the result back to the requester.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.prebuilt import InjectedState

from teamgraph.messaging import effects
from teamgraph.messaging.envelopes import LEADER
from teamgraph.protocols.requests import QUESTION, RUN
from teamgraph.runtime import TeamRuntime
from teamgraph.tools.context import (
    ACTIVE_STATUSES,
    View,
    caller,
    defer,
    fail,
    instance_name,
    reply,
)

DEFAULT_TIMEOUT_SECONDS = 120


def live_sessions(view: View) -> list[str]:
    """The session keys of every agent that can still receive messages."""
    return [n for n, r in view["agents"].items() if r["status"] in ACTIVE_STATUSES]


def require_session(view: View, key: str) -> None:
    """An error worded as seed 004 words it, unless ``key`` is a live session other than the caller's."""
    if key == caller(view):
        raise fail("That session is you: you cannot send to yourself.")
    terminated = any(e["kind"] == "terminate" and e["target"] == key for e in view["effects"])
    if key not in live_sessions(view) or terminated:
        others = ", ".join(k for k in live_sessions(view) if k != caller(view)) or "none"
        raise fail(f"Unknown session '{key}'. Available sessions: {others}. Call sessions_list to get the live session keys; do not reuse keys from memory.")


def request_header(view: View, target: str, *, expected: str, timeout: float) -> str:
    """The seed 004 request header that precedes every sessions_send message."""
    me = caller(view)
    return (
        f"[Agent-to-agent]\nsender: {me}\nreceiver: {target}\nsource sessionKey: {me}\n"
        f"expected response: {expected}\ntimeout: {timeout:g} s\n---\n"
    )


def make_session_tools(runtime: TeamRuntime) -> list[BaseTool]:
    """Build ``sessions_list``, ``sessions_send`` and ``sessions_spawn``."""

    @tool
    def sessions_list(view: Annotated[View, InjectedState("view")]) -> str:
        """List the live sessions (agents) and their session keys. Call it before sending."""
        rows = [
            {"sessionKey": name, "role_id": view["agents"][name]["role"], "status": view["agents"][name]["status"], "you": name == caller(view)}
            for name in live_sessions(view)
        ]
        return json.dumps(rows, ensure_ascii=False)

    @tool
    def sessions_send(
        sessionKey: str,
        message: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
        timeoutSeconds: float = DEFAULT_TIMEOUT_SECONDS,
    ):
        """Send a message to a session and wait up to timeoutSeconds for its reply (0: fire-and-forget).

        After the reply you and the target may go back and forth a few rounds; reply
        exactly REPLY_SKIP to stop.

        Args:
            sessionKey: The target's session key (from sessions_list).
            message: The request: what you need and what you expect back.
            timeoutSeconds: Seconds to wait (default 120); 0 sends without waiting.
        """
        require_session(view, sessionKey)
        if timeoutSeconds < 0:
            raise fail("timeoutSeconds must be 0 (fire-and-forget) or a positive number of seconds.")
        if timeoutSeconds == 0:
            body = request_header(view, sessionKey, expected="none (fire-and-forget)", timeout=0) + message
            return reply(f"Sent to {sessionKey} (fire-and-forget): no reply expected.", tool_call_id, effects.deliver(to=sessionKey, body=body))
        if sessionKey == LEADER:
            raise fail("To ask the Team Leader and wait, use ask_master; sessions_send with timeoutSeconds=0 only notifies it.")
        body = request_header(view, sessionKey, expected="blocking reply", timeout=timeoutSeconds) + message
        return defer(
            effects.open_request(
                request_kind=QUESTION, to=sessionKey, body=body, call_id=tool_call_id,
                tool="sessions_send", reply_via="output", timeout=timeoutSeconds,
                details={"ping_pong": True},
            )
        )

    @tool
    def sessions_spawn(
        task: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
        label: str | None = None,
        agentId: str | None = None,
        runTimeoutSeconds: float = 0,
        cleanup: Literal["keep", "delete"] = "keep",
    ):
        """Delegate a task in the background; the result is pushed back to you when it is done.

        Returns at once with {status: "accepted", runId, childSessionKey}.

        Args:
            task: The task: objective, output, scope.
            label: A short label for this run.
            agentId: A role id for a new agent (e.g. "researcher"), or the session key
                of an existing agent; default: a new agent of your own role.
            runTimeoutSeconds: Stop the run after this many seconds (0: no limit).
            cleanup: "keep" the child afterwards, or "delete" it once it has reported.
        """
        if runTimeoutSeconds < 0:
            raise fail("runTimeoutSeconds must be 0 (no limit) or a positive number of seconds.")
        me = caller(view)
        spawned: list[dict] = []
        if agentId in view["agents"]:
            require_session(view, agentId)
            child = agentId
        else:
            if agentId is None and me == LEADER:
                raise fail("Give agentId: a role id for a new agent (e.g. 'researcher') or a live session key (sessions_list).")
            role_id = agentId or view["agents"][me]["role"]
            role = runtime.roles.get(role_id)
            if role is None or role.is_leader:
                ids = ", ".join(r for r in runtime.roles if r != "team-leader")
                raise fail(f"Unknown agentId '{agentId}'. Use a role id ({ids}) or a live session key (sessions_list).")
            child = instance_name(view, role)
            spawned.append(effects.spawn(role_id=role.id, name=child, task=None))
        header = f"[Background run from {me}" + (f" · {label}" if label else "") + "] Your final message is pushed back to the requester.\n"
        return defer(
            *spawned,
            effects.open_request(
                request_kind=RUN, to=child, body=task, call_id=tool_call_id, tool="sessions_spawn",
                reply_via="output", timeout=runTimeoutSeconds or None,
                details={"label": label, "cleanup": cleanup, "header": header},
            ),
        )

    return [sessions_list, sessions_send, sessions_spawn]
