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
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, tool
from langgraph.types import Command

from teamgraph.tools.context import ToolContext
from teamgraph.tools.leader import create_sub_agent
from teamgraph.tools.protocols import review_plan, send_message, submit_plan
from teamgraph.tools.sessions import sessions_list

TEAMMATE_TOOL_NAMES = ("spawn_teammate", "list_teammates", "read_inbox", "broadcast", "plan_approval")
"""The agent-teams names this set provides (``spawn_teammate`` on the leader's side only)."""


def _call(target: BaseTool, **args: Any) -> Any:
    """Run the aliased tool's own function: its checks, its result and its effects."""
    if not isinstance(target, StructuredTool) or target.func is None:
        raise TypeError(f"{target.name} has no function to alias")
    return target.func(**args)


@tool(parse_docstring=True, error_on_invalid_docstring=False)  # NOTE: no argument, no Args: section
def list_teammates(context: ToolContext) -> str:
    """List all teammates with name (sessionKey), role and status."""
    return _call(sessions_list, context=context)


@tool(parse_docstring=True, error_on_invalid_docstring=False)  # NOTE: no argument, no Args: section
def read_inbox(context: ToolContext) -> str:
    """Show the messages queued for you that are not in your conversation yet (usually none).

    Messages are pushed into your conversation as they arrive; you do not need to poll.
    """
    queued = context.agents[context.caller]["inbox"]
    return json.dumps([{"id": m["id"], "from": m["from"], "content": m["text"]} for m in queued], ensure_ascii=False)


@tool(parse_docstring=True)
def broadcast(content: str, context: ToolContext) -> Command:
    """Send a message to all teammates (every other active member).

    Args:
        content: The message.
    """
    return _call(send_message, to="*", content=content, context=context, msg_type="broadcast")


@tool(parse_docstring=True)
def spawn_teammate(role: str, prompt: str, context: ToolContext) -> Command:
    """Spawn a persistent teammate of a role, with its first task. Its name is "{Role Name}_{n}".

    Args:
        role: The role id, e.g. "researcher" (see list_agents).
        prompt: The first task: objective, output, scope, boundaries, context.
    """
    return _call(create_sub_agent, role_id=role, task=prompt, context=context)


@tool("plan_approval", parse_docstring=True)
def review_teammate_plan(request_id: str, approve: bool, context: ToolContext, feedback: str = "") -> Command:
    """Approve or reject a teammate's plan. Provide request_id + approve + optional feedback.

    Args:
        request_id: The plan's id (member_plan_N), from its envelope.
        approve: True to approve, False to reject.
        feedback: What to change (on reject) or to keep in mind (on approve).
    """
    return _call(review_plan, request_id=request_id, approve=approve, feedback=feedback, context=context)


@tool("plan_approval", parse_docstring=True)
def submit_teammate_plan(plan: str, context: ToolContext) -> Command:
    """Submit your plan to the lead before major work, and wait for approval.

    Args:
        plan: The steps you will take, the files you will touch, how you will check.
    """
    return _call(submit_plan, plan=plan, context=context)


LEADER_TEAMMATE_TOOLS: list[BaseTool] = [spawn_teammate, list_teammates, read_inbox, broadcast, review_teammate_plan]
"""The leader's side: spawn_teammate, list_teammates, read_inbox, broadcast, plan_approval (review)."""
MEMBER_TEAMMATE_TOOLS: list[BaseTool] = [list_teammates, read_inbox, broadcast, submit_teammate_plan]
"""A member's side: list_teammates, read_inbox, broadcast, plan_approval (submit)."""
