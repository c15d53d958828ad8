"""The Team Leader's tools (docs/protocols.md, "Leader tools"): create, guide, ask, answer and end members."""

from __future__ import annotations

import json
from typing import Any, Literal

from langchain_core.tools import BaseTool, tool
from langgraph.types import Command

from teamgraph.messaging import effects
from teamgraph.protocols.requests import ASK, is_pending
from teamgraph.records import IDLE, LEADER, LEADER_ROLE_ID, STOPPED
from teamgraph.roles.model import Level, ToolSetName
from teamgraph.tools import errors
from teamgraph.tools.context import (
    ToolContext,
    active_members,
    answer_question,
    ask_agent,
    defer,
    fail,
    instance_name,
    reply,
    require_approved_plan,
    require_creatable,
    require_member,
)
from teamgraph.tools.skills import governed


@tool(parse_docstring=True)
def create_sub_agent(role_id: str, context: ToolContext, task: str | None = None) -> Command:
    """Create a team member of a role and optionally give it its first task.

    A good task states the objective, the output format, the tools and scope,
    the boundaries (what not to do) and the context (who else works on what).

    Args:
        role_id: The role's id, e.g. "ui-operator" (see list_agents).
        task: The first task; without one the member waits for a message.
    """
    require_approved_plan(context)
    role = context.runtime.role(role_id)
    if role is None or role.is_leader:
        ids = ", ".join(r for r in context.runtime.roles if r != LEADER_ROLE_ID)
        raise fail(f"Unknown role '{role_id}'. Available roles: {ids}.", code=errors.UNKNOWN_ROLE)
    require_creatable(context, role)
    name = instance_name(context, role)
    note = "It is working on the task." if task else "It is idle until you message it."
    return reply(
        f"Created {name} ({role.name}). {note}",
        context.tool_call_id,
        effects.spawn(role_id=role.id, name=name, task=task),
    )


@tool(parse_docstring=True)
def terminate_sub_agent(display_name: str, context: ToolContext) -> Command:
    """End a member for good (its name is not reused). Its open questions are closed.

    Args:
        display_name: The member's display name, e.g. "UI Operator_1".
    """
    require_member(context, display_name)
    return reply(f"{display_name} is terminated.", context.tool_call_id, effects.terminate(target=display_name))


@tool(parse_docstring=True)
def stop_sub_agent(display_name: str, context: ToolContext) -> Command:
    """End a member's current turn; it keeps its context and takes new messages.

    Args:
        display_name: The member's display name.
    """
    require_member(context, display_name)
    return reply(
        f"{display_name}'s current turn is stopped; it keeps its context.",
        context.tool_call_id,
        effects.stop(target=display_name),
    )


@tool(parse_docstring=True)
def send_message_to_sub_agent(display_name: str, message: str, context: ToolContext) -> Command:
    """Send a message or a new task to a member without waiting for a reply.

    A busy member sees it at its next step; an idle one starts a new turn.

    Args:
        display_name: The member's display name.
        message: The text; write only the body, the envelope is added for you.
    """
    require_approved_plan(context)
    require_member(context, display_name)
    return reply(
        f"Message sent to {display_name}.", context.tool_call_id, effects.deliver(to=display_name, body=message)
    )


@tool(parse_docstring=True)
def ask_sub_agent(display_name: str, question: str, context: ToolContext) -> Command:
    """Ask a member a concrete question and wait one round: its reply is the result.

    Args:
        display_name: The member's display name.
        question: A specific, answerable question.
    """
    require_approved_plan(context)
    return ask_agent(context, display_name, question, tool="ask_sub_agent", reply_via="output")


@tool(parse_docstring=True)
def answer_sub_agent_question(question_id: str, answer: str, context: ToolContext) -> Command:
    """Answer a member's ask_master question; the answer becomes its tool result.

    Args:
        question_id: The id in the question's envelope, e.g. "ask_3".
        answer: Your answer.
    """
    return answer_question(context, question_id, answer, kind=ASK)


@tool(parse_docstring=True)
def create_custom_agent(
    id: str,
    name: str,
    description: str,
    prompt: str,
    context: ToolContext,
    model: str | None = None,
    thinking_mode: Literal["fast", "deep"] | None = None,
    tools: list[ToolSetName] | None = None,
    level: Level = "L4",
) -> str:
    """Create a new role, saved as a role file: usable at once and after a restart.

    Args:
        id: A lowercase slug, e.g. "data-analyst".
        name: The display name of its members, e.g. "Data Analyst".
        description: One sentence: what this role is for.
        prompt: The role prompt: what it does, how it works, what it outputs.
        model: Optional model for this role, e.g. "openai:gpt-4o-mini".
        thinking_mode: "fast" (default) or "deep".
        tools: Tool sets, e.g. ["member", "files"] (the default); they must fit the level.
        level: Permission level, L4 (default) to L1; above L4 is a sensitive operation.
    """
    fields = {
        "id": id, "name": name, "description": description, "prompt": prompt,
        "model": model, "thinking_mode": thinking_mode, "tools": tools, "level": level,
    }  # fmt: skip
    return governed(context, "create_custom_agent", fields)


@tool(parse_docstring=True, error_on_invalid_docstring=False)  # NOTE: no argument, no Args: section
def list_agents(context: ToolContext) -> str:
    """List the roles you can create members of."""
    rows = [
        {"role_id": r.id, "name": r.name, "description": r.description}
        for r in context.runtime.roles.values()
        if not r.is_leader
    ]
    return json.dumps(rows, ensure_ascii=False)


@tool(parse_docstring=True, error_on_invalid_docstring=False)  # NOTE: no argument, no Args: section
def list_active_sub_agents(context: ToolContext) -> str:
    """List the members of this team that are still active, with their status."""
    rows = [
        {"display_name": n, "role_id": context.agents[n]["role"], "status": context.agents[n]["status"]}
        for n in active_members(context)
    ]
    return json.dumps(rows, ensure_ascii=False) if rows else "No active members."


@tool(parse_docstring=True)
def get_sub_agent_status(display_names: list[str] | str, context: ToolContext) -> str:
    """Detailed status of members: role, status, turn, steps, last action, waits.

    Args:
        display_names: One display name or a list of them.
    """
    names = [display_names] if isinstance(display_names, str) else display_names
    out = {}
    for name in names:
        if name not in context.agents or name == LEADER:
            members = ", ".join(n for n in context.agents if n != LEADER) or "none"
            code: errors.ErrorCode = errors.NOT_A_MEMBER if name == LEADER else errors.UNKNOWN_AGENT
            raise fail(f"No member named '{name}'. Members: {members}.", code=code)
        out[name] = status_row(context, name)
    return json.dumps(out, ensure_ascii=False)


@tool(parse_docstring=True)
def sleep(wait_sub_agent_output: str, context: ToolContext) -> Command:
    """Wait for a member's next output (or question, or the end of its turn).

    Use it only when you have nothing else to do; outputs also arrive on their own.

    Args:
        wait_sub_agent_output: The display name of the member to wait for.
    """
    record = require_member(context, wait_sub_agent_output)
    if record["status"] in (IDLE, STOPPED):
        return reply(
            f"{wait_sub_agent_output} is {record['status']}: there is no output to wait for. "
            "Send it a message to give it work.",
            context.tool_call_id,
        )
    return defer(effects.wait_output(on=wait_sub_agent_output, call_id=context.tool_call_id, tool="sleep"))


def status_row(context: ToolContext, name: str) -> dict[str, Any]:
    """What the leader sees of one member."""
    record = context.agents[name]
    waits = [w.get("request") or f"output of {w['on']}" for w in record.get("waits", {}).values()]
    return {
        "role_id": record["role"],
        "status": record["status"],
        "turn": record["turn"],
        "steps": record["steps"],
        "tool_calls": record["tool_calls"],
        "last_action": record.get("last_action"),
        "waiting_for": waits,
        "unread_messages": len(record.get("inbox", [])),
        "open_questions_to_it": [rid for rid, r in context.requests.items() if is_pending(r) and r["to"] == name],
    }


LEADER_TOOLS: list[BaseTool] = [
    create_sub_agent,
    terminate_sub_agent,
    stop_sub_agent,
    send_message_to_sub_agent,
    ask_sub_agent,
    answer_sub_agent_question,
    create_custom_agent,
    list_agents,
    list_active_sub_agents,
    get_sub_agent_status,
    sleep,
]
"""The ``leader`` tool set, named and argued as the Team Leader spec specifies (docs/protocols.md)."""
