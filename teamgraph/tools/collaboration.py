"""The collaboration tools (docs/protocols.md, "Collaboration"): call_agent, call_agents, assign_agent_work.

Messages carry ``sender, receiver, content, project_name, task_name, files``. You
cannot call the master (the Team Leader) nor yourself. Files are paths inside
``project/{project_name}/`` under the home folder; anything else is refused.
"""

from __future__ import annotations

import re
from typing import Annotated

from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.prebuilt import InjectedState

from teamgraph.messaging import effects
from teamgraph.messaging.envelopes import LEADER
from teamgraph.protocols.requests import QUESTION
from teamgraph.runtime import TeamRuntime
from teamgraph.tools.context import View, caller, defer, fail, reply, require_member
from teamgraph.tools.files import resolve_inside

PROJECT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def collaboration_message(
    runtime: TeamRuntime,
    *,
    sender: str,
    receiver: str,
    content: str,
    project_name: str | None,
    task_name: str | None,
    files: list[str] | None,
) -> str:
    """The collaboration message: its fields, then the content; files checked to be in the project."""
    if files and not project_name:
        raise fail("files need a project_name: they are paths inside project/{project_name}/.")
    lines = [f"sender: {sender}", f"receiver: {receiver}"]
    if project_name:
        if not PROJECT_NAME.fullmatch(project_name):
            raise fail(f"'{project_name}' is not a valid project_name: use letters, digits, '-', '_' or '.'.")
        lines.append(f"project_name: {project_name}")
        root = runtime.project_dir / project_name
        for path in files or []:
            resolve_inside(root, path)
        if files:
            lines.append("files: " + ", ".join(f"project/{project_name}/{p}" for p in files))
    if task_name:
        lines.append(f"task_name: {task_name}")
    return "\n".join(lines) + "\n---\n" + content


def _check_receiver(view: View, receiver: str) -> None:
    if receiver == LEADER:
        raise fail("You cannot call the master (the Team Leader). Use ask_master for decisions.")
    if receiver == caller(view):
        raise fail("You cannot call yourself.")
    require_member(view, receiver)


def addressed_message(
    runtime: TeamRuntime,
    view: View,
    receiver: str,
    content: str,
    project_name: str | None,
    task_name: str | None,
    files: list[str] | None,
) -> str:
    """The message from the caller to ``receiver``, after checking both and the files."""
    _check_receiver(view, receiver)
    return collaboration_message(
        runtime,
        sender=caller(view),
        receiver=receiver,
        content=content,
        project_name=project_name,
        task_name=task_name,
        files=files,
    )


def make_collaboration_tools(runtime: TeamRuntime) -> list[BaseTool]:
    """Build ``call_agent``, ``call_agents`` and ``assign_agent_work``."""

    @tool
    def call_agent(
        receiver: str,
        content: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
        project_name: str | None = None,
        task_name: str | None = None,
        files: list[str] | None = None,
    ):
        """Send a message to one agent and wait for its reply.

        Args:
            receiver: The agent's display name (not the master, not yourself).
            content: The message (Markdown).
            project_name: The project, if any; files live in project/{project_name}/.
            task_name: The task this is about, if any.
            files: Paths inside the project folder the receiver should look at.
        """
        body = addressed_message(runtime, view, receiver, content, project_name, task_name, files)
        return defer(
            effects.open_request(
                request_kind=QUESTION, to=receiver, body=body, call_id=tool_call_id,
                tool="call_agent", reply_via="output", details={"style": "call"},
            )
        )

    @tool
    def call_agents(
        receivers: list[str],
        content: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
        project_name: str | None = None,
        task_name: str | None = None,
        files: list[str] | None = None,
    ):
        """Send one message to several agents; they work in parallel and you get every reply together.

        Args:
            receivers: Display names (not the master, not yourself), at least one.
            content: The message (Markdown).
            project_name: The project, if any.
            task_name: The task this is about, if any.
            files: Paths inside the project folder.
        """
        if not receivers:
            raise fail("receivers is empty: name at least one agent.")
        if len(set(receivers)) != len(receivers):
            raise fail("receivers names an agent twice.")
        for receiver in receivers:
            _check_receiver(view, receiver)
        opened = [
            effects.open_request(
                request_kind=QUESTION, to=receiver, call_id=tool_call_id, tool="call_agents",
                reply_via="output", details={"style": "call"}, group=True,
                body=addressed_message(runtime, view, receiver, content, project_name, task_name, files),
            )
            for receiver in receivers
        ]
        return defer(*opened)

    @tool
    def assign_agent_work(
        agent: str,
        task: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
        project_name: str | None = None,
        task_name: str | None = None,
        files: list[str] | None = None,
    ):
        """Assign work to an agent (master and task manager); it lands on the task board if there is one.

        Args:
            agent: The agent's display name.
            task: What to do: objective, output, scope, boundaries.
            project_name: The project, if any.
            task_name: A short name for the task (the board's title).
            files: Paths inside the project folder.
        """
        # NOTE: who may assign work is the permission matrix's call (the master and the task manager).
        body = addressed_message(runtime, view, agent, task, project_name, task_name, files)
        assigned = [effects.deliver(to=agent, body=body, type="task")]
        note = ""
        if view["team"].get("board") is not None:
            assigned.append(effects.board_add(title=task_name or task[:80], assignee=agent))
            note = " It is on the task board."
        return reply(f"Work assigned to {agent}.{note}", tool_call_id, *assigned)

    return [call_agent, call_agents, assign_agent_work]
