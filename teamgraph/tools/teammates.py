"""The agent-teams tool names (docs/protocols.md, "Teammates"), for users coming from teams that use them.

``spawn_teammate``, ``list_teammates``, ``read_inbox``, ``broadcast`` and
``plan_approval`` are thin aliases: each calls the teamgraph tool that does the
same thing, so there is one implementation and these only rename arguments.

- ``spawn_teammate(role, prompt)`` is ``create_sub_agent(role_id, task)`` (leader).
- ``list_teammates()`` is ``sessions_list()``.
- ``read_inbox()`` shows what is queued for the caller. NOTE: teamgraph pushes
  messages into the receiver's conversation (inline at its next step, or as a new
  turn), so the queue is usually empty: what others sent is already in your history.
- ``broadcast(content)`` is ``send_message(msg_type="broadcast")``.
- ``plan_approval``: on the leader's side ``review_plan(request_id, approve,
  feedback)``; on a member's side ``submit_plan(plan)``, which waits for the verdict.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool, tool
from langgraph.prebuilt import InjectedState

from teamgraph.runtime import TeamRuntime
from teamgraph.tools.context import View, caller
from teamgraph.tools.leader import make_leader_tools
from teamgraph.tools.protocols import make_protocol_tools
from teamgraph.tools.sessions import make_session_tools

TEAMMATE_TOOL_NAMES = ("spawn_teammate", "list_teammates", "read_inbox", "broadcast", "plan_approval")
"""The agent-teams names this set provides (``spawn_teammate`` on the leader's side only)."""


def _by_name(tools: list[BaseTool]) -> dict[str, StructuredTool]:
    return {t.name: t for t in tools if isinstance(t, StructuredTool)}


def _call(target: StructuredTool, **args: Any) -> Any:
    """Run the aliased tool's own function: its checks, its result and its effects."""
    if target.func is None:
        raise TypeError(f"{target.name} has no function to alias")
    return target.func(**args)


def _shared_tools(runtime: TeamRuntime, *, leader: bool) -> list[BaseTool]:
    """The tools both sides get: list_teammates, read_inbox, broadcast."""
    sessions = _by_name(make_session_tools(runtime))
    protocols = _by_name(make_protocol_tools(runtime, leader=leader))

    @tool
    def list_teammates(view: Annotated[View, InjectedState("view")]) -> str:
        """List all teammates with name (sessionKey), role and status."""
        return _call(sessions["sessions_list"], view=view)

    @tool
    def read_inbox(view: Annotated[View, InjectedState("view")]) -> str:
        """Show the messages queued for you that are not in your conversation yet (usually none).

        Messages are pushed into your conversation as they arrive; you do not need to poll.
        """
        queued = view["agents"][caller(view)]["inbox"]
        return json.dumps(
            [{"id": m["id"], "from": m["from"], "content": m["text"]} for m in queued], ensure_ascii=False
        )

    @tool
    def broadcast(
        content: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ):
        """Send a message to all teammates (every other active member).

        Args:
            content: The message.
        """
        return _call(
            protocols["send_message"],
            to="*",
            content=content,
            view=view,
            tool_call_id=tool_call_id,
            msg_type="broadcast",
        )

    return [list_teammates, read_inbox, broadcast]


def make_leader_teammate_tools(runtime: TeamRuntime) -> list[BaseTool]:
    """The leader's side: spawn_teammate, list_teammates, read_inbox, broadcast, plan_approval (review)."""
    leader = _by_name(make_leader_tools(runtime))
    protocols = _by_name(make_protocol_tools(runtime, leader=True))

    @tool
    def spawn_teammate(
        role: str,
        prompt: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ):
        """Spawn a persistent teammate of a role, with its first task. Its name is "{Role Name}_{n}".

        Args:
            role: The role id, e.g. "researcher" (see list_agents).
            prompt: The first task: objective, output, scope, boundaries, context.
        """
        return _call(leader["create_sub_agent"], role_id=role, task=prompt, view=view, tool_call_id=tool_call_id)

    @tool
    def plan_approval(
        request_id: str,
        approve: bool,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
        feedback: str = "",
    ):
        """Approve or reject a teammate's plan. Provide request_id + approve + optional feedback.

        Args:
            request_id: The plan's id (member_plan_N), from its envelope.
            approve: True to approve, False to reject.
            feedback: What to change (on reject) or to keep in mind (on approve).
        """
        return _call(
            protocols["review_plan"],
            request_id=request_id,
            approve=approve,
            feedback=feedback,
            view=view,
            tool_call_id=tool_call_id,
        )

    return [spawn_teammate, *_shared_tools(runtime, leader=True), plan_approval]


def make_member_teammate_tools(runtime: TeamRuntime) -> list[BaseTool]:
    """A member's side: list_teammates, read_inbox, broadcast, plan_approval (submit)."""
    protocols = _by_name(make_protocol_tools(runtime, leader=False))

    @tool
    def plan_approval(plan: str, tool_call_id: Annotated[str, InjectedToolCallId]):
        """Submit your plan to the lead before major work, and wait for approval.

        Args:
            plan: The steps you will take, the files you will touch, how you will check.
        """
        return _call(protocols["submit_plan"], plan=plan, tool_call_id=tool_call_id)

    return [*_shared_tools(runtime, leader=False), plan_approval]


def make_teammate_tools(runtime: TeamRuntime, *, leader: bool) -> list[BaseTool]:
    """The teammates tool set for the leader's or a member's side."""
    return make_leader_teammate_tools(runtime) if leader else make_member_teammate_tools(runtime)
