"""The Team Leader's tools (docs/protocols.md, "Leader tools"): create, guide, ask, answer and end members."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.prebuilt import InjectedState

from teamgraph.records import LEADER_ROLE_ID
from teamgraph.messaging import effects
from teamgraph.messaging.envelopes import LEADER
from teamgraph.protocols.requests import ASK, is_pending
from teamgraph.roles.model import Level, ToolSetName
from teamgraph.runtime import TeamRuntime
from teamgraph.tools.context import (
    View,
    active_members,
    answer_question,
    ask_agent,
    defer,
    fail,
    instance_name,
    reply,
    require_member,
)
from teamgraph.tools.skills import governed


def require_approved_plan(runtime: TeamRuntime, view: View) -> None:
    """With ``Policy.require_plan``, refuse delegation until a plan is approved."""
    if runtime.policy.require_plan and view["team"].get("plan", {}).get("status") != "approved":
        raise fail(
            "No approved plan yet: this team requires one before you create members or "
            "delegate. Call propose_plan(summary, steps, complexity) and wait for approval."
        )


def make_leader_tools(runtime: TeamRuntime) -> list[BaseTool]:
    """Build the leader tool set for one team.

    Args:
        runtime: The team runtime (role catalogue, home folder).

    Returns:
        The tools, named and argued as the Team Leader spec specifies (docs/protocols.md).
    """

    @tool
    def create_sub_agent(
        role_id: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
        task: str | None = None,
    ):
        """Create a team member of a role and optionally give it its first task.

        A good task states the objective, the output format, the tools and scope,
        the boundaries (what not to do) and the context (who else works on what).

        Args:
            role_id: The role's id, e.g. "ui-operator" (see list_agents).
            task: The first task; without one the member waits for a message.
        """
        require_approved_plan(runtime, view)
        role = runtime.roles.get(role_id)
        if role is None or role.is_leader:
            ids = ", ".join(r for r in runtime.roles if r != LEADER_ROLE_ID)
            raise fail(f"Unknown role '{role_id}'. Available roles: {ids}.")
        name = instance_name(view, role)
        note = "It is working on the task." if task else "It is idle until you message it."
        return reply(
            f"Created {name} ({role.name}). {note}",
            tool_call_id,
            effects.spawn(role_id=role.id, name=name, task=task),
        )

    @tool
    def terminate_sub_agent(
        display_name: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ):
        """End a member for good (its name is not reused). Its open questions are closed.

        Args:
            display_name: The member's display name, e.g. "UI Operator_1".
        """
        require_member(view, display_name)
        return reply(
            f"{display_name} is terminated.", tool_call_id, effects.terminate(target=display_name)
        )

    @tool
    def stop_sub_agent(
        display_name: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ):
        """End a member's current turn; it keeps its context and takes new messages.

        Args:
            display_name: The member's display name.
        """
        require_member(view, display_name)
        return reply(
            f"{display_name}'s current turn is stopped; it keeps its context.",
            tool_call_id,
            effects.stop(target=display_name),
        )

    @tool
    def send_message_to_sub_agent(
        display_name: str,
        message: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ):
        """Send a message or a new task to a member without waiting for a reply.

        A busy member sees it at its next step; an idle one starts a new turn.

        Args:
            display_name: The member's display name.
            message: The text; write only the body, the envelope is added for you.
        """
        require_approved_plan(runtime, view)
        require_member(view, display_name)
        return reply(
            f"Message sent to {display_name}.",
            tool_call_id,
            effects.deliver(to=display_name, body=message),
        )

    @tool
    def ask_sub_agent(
        display_name: str,
        question: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ):
        """Ask a member a concrete question and wait one round: its reply is the result.

        Args:
            display_name: The member's display name.
            question: A specific, answerable question.
        """
        require_approved_plan(runtime, view)
        return ask_agent(view, display_name, question, tool_call_id, tool="ask_sub_agent", reply_via="output")

    @tool
    def answer_sub_agent_question(
        question_id: str,
        answer: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ):
        """Answer a member's ask_master question; the answer becomes its tool result.

        Args:
            question_id: The id in the question's envelope, e.g. "ask_3".
            answer: Your answer.
        """
        return answer_question(view, question_id, answer, tool_call_id, kind=ASK)

    @tool
    def create_custom_agent(
        id: str,
        name: str,
        description: str,
        prompt: str,
        view: Annotated[View, InjectedState("view")],
        config: RunnableConfig,
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
        }
        return governed(runtime, "create_custom_agent", fields, view, config)

    @tool
    def list_agents() -> str:
        """List the roles you can create members of."""
        rows = [
            {"role_id": r.id, "name": r.name, "description": r.description}
            for r in runtime.roles.values()
            if not r.is_leader
        ]
        return json.dumps(rows, ensure_ascii=False)

    @tool
    def list_active_sub_agents(view: Annotated[View, InjectedState("view")]) -> str:
        """List the members of this team that are still active, with their status."""
        rows = [
            {"display_name": n, "role_id": view["agents"][n]["role"], "status": view["agents"][n]["status"]}
            for n in active_members(view)
        ]
        return json.dumps(rows, ensure_ascii=False) if rows else "No active members."

    @tool
    def get_sub_agent_status(
        display_names: list[str] | str, view: Annotated[View, InjectedState("view")]
    ) -> str:
        """Detailed status of members: role, status, turn, steps, last action, waits.

        Args:
            display_names: One display name or a list of them.
        """
        names = [display_names] if isinstance(display_names, str) else display_names
        out = {}
        for name in names:
            record = view["agents"].get(name)
            if record is None or name == LEADER:
                raise fail(f"No member named '{name}'. Members: {', '.join(n for n in view['agents'] if n != LEADER) or 'none'}.")
            out[name] = status_row(view, name)
        return json.dumps(out, ensure_ascii=False)

    @tool
    def sleep(
        wait_sub_agent_output: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ):
        """Wait for a member's next output (or question, or the end of its turn).

        Use it only when you have nothing else to do; outputs also arrive on their own.

        Args:
            wait_sub_agent_output: The display name of the member to wait for.
        """
        record = require_member(view, wait_sub_agent_output)
        if record["status"] in ("idle", "stopped"):
            return reply(
                f"{wait_sub_agent_output} is {record['status']}: there is no output to wait for. "
                "Send it a message to give it work.",
                tool_call_id,
            )
        return defer(effects.wait_output(on=wait_sub_agent_output, call_id=tool_call_id, tool="sleep"))

    return [
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


def status_row(view: View, name: str) -> dict:
    """What the leader sees of one member."""
    record = view["agents"][name]
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
        "open_questions_to_it": [
            rid for rid, r in view["requests"].items() if is_pending(r) and r["to"] == name
        ],
    }
