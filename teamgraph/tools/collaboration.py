"""The collaboration tools (docs/protocols.md, "Collaboration"): call_agent, call_agents, assign_agent_work.

Messages carry ``sender, receiver, content, project_name, task_name, files``. You
cannot call the master (the Team Leader) nor yourself. Files are paths inside the
thread's project folder, the one every agent's file tools read (the collaboration spec §2.2:
``project/{project_name}/``), given as the receiver passes them to ``read_file``;
anything outside it is refused.
"""

from __future__ import annotations

import re
from pathlib import Path

from langchain_core.tools import BaseTool, tool
from langgraph.types import Command

from teamgraph.messaging import effects
from teamgraph.protocols.requests import QUESTION
from teamgraph.records import LEADER, Effect
from teamgraph.tools import errors
from teamgraph.tools.context import ToolContext, defer, fail, reply, require_member
from teamgraph.tools.files import resolve_inside

PROJECT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def collaboration_message(
    *,
    project_folder: Path,
    sender: str,
    receiver: str,
    content: str,
    project_name: str | None,
    task_name: str | None,
    files: list[str] | None,
) -> str:
    """The collaboration message: its fields, then the content; files checked to be in the project folder."""
    lines = [f"sender: {sender}", f"receiver: {receiver}"]
    if project_name:
        if not PROJECT_NAME.fullmatch(project_name):
            raise fail(
                f"'{project_name}' is not a valid project_name: use letters, digits, '-', '_' or '.'.",
                code=errors.BAD_ARGUMENT,
            )
        lines.append(f"project_name: {project_name}")
    if files:
        top = project_folder.resolve()
        paths = [resolve_inside(project_folder, path).relative_to(top).as_posix() for path in files]
        lines.append("files: " + ", ".join(paths) + " (in the project folder: read them with read_file)")
    if task_name:
        lines.append(f"task_name: {task_name}")
    return "\n".join(lines) + "\n---\n" + content


def _check_receiver(context: ToolContext, receiver: str) -> None:
    if receiver == LEADER:
        raise fail(
            "You cannot call the master (the Team Leader). Use ask_master for decisions.", code=errors.NOT_A_MEMBER
        )
    if receiver == context.caller:
        raise fail("You cannot call yourself.", code=errors.SELF_ADDRESS)
    require_member(context, receiver)


def addressed_message(
    context: ToolContext,
    receiver: str,
    content: str,
    project_name: str | None,
    task_name: str | None,
    files: list[str] | None,
) -> str:
    """The message from the caller to ``receiver``, after checking both and the files."""
    _check_receiver(context, receiver)
    return collaboration_message(
        project_folder=context.runtime.project_folder(context.config),
        sender=context.caller,
        receiver=receiver,
        content=content,
        project_name=project_name,
        task_name=task_name,
        files=files,
    )


@tool(parse_docstring=True)
def call_agent(
    receiver: str,
    content: str,
    context: ToolContext,
    project_name: str | None = None,
    task_name: str | None = None,
    files: list[str] | None = None,
) -> Command:
    """Send a message to one agent and wait for its reply.

    Args:
        receiver: The agent's display name (not the master, not yourself).
        content: The message (Markdown).
        project_name: The project, if any; files live in project/{project_name}/.
        task_name: The task this is about, if any.
        files: Paths inside the project folder the receiver should look at.
    """
    body = addressed_message(context, receiver, content, project_name, task_name, files)
    return defer(
        effects.open_request(
            request_kind=QUESTION, to=receiver, body=body, call_id=context.tool_call_id,
            tool="call_agent", reply_via="output", details={"style": "call"},
        )
    )  # fmt: skip


@tool(parse_docstring=True)
def call_agents(
    receivers: list[str],
    content: str,
    context: ToolContext,
    project_name: str | None = None,
    task_name: str | None = None,
    files: list[str] | None = None,
) -> Command:
    """Send one message to several agents; they work in parallel and you get every reply together.

    Args:
        receivers: Display names (not the master, not yourself), at least one.
        content: The message (Markdown).
        project_name: The project, if any.
        task_name: The task this is about, if any.
        files: Paths inside the project folder.
    """
    if not receivers:
        raise fail("receivers is empty: name at least one agent.", code=errors.BAD_ARGUMENT)
    if len(set(receivers)) != len(receivers):
        raise fail("receivers names an agent twice.", code=errors.BAD_ARGUMENT)
    for receiver in receivers:
        _check_receiver(context, receiver)
    opened = [
        effects.open_request(
            request_kind=QUESTION, to=receiver, call_id=context.tool_call_id, tool="call_agents",
            reply_via="output", details={"style": "call"}, group=len(receivers),
            body=addressed_message(context, receiver, content, project_name, task_name, files),
        )
        for receiver in receivers
    ]  # fmt: skip
    return defer(*opened)


@tool(parse_docstring=True)
def assign_agent_work(
    agent: str,
    task: str,
    context: ToolContext,
    project_name: str | None = None,
    task_name: str | None = None,
    files: list[str] | None = None,
) -> Command:
    """Assign work to an agent (master and task manager); it lands on the task board if there is one.

    Args:
        agent: The agent's display name.
        task: What to do: objective, output, scope, boundaries.
        project_name: The project, if any.
        task_name: A short name for the task (the board's title).
        files: Paths inside the project folder.
    """
    # NOTE: who may assign work is the permission matrix's call (the master and the task manager).
    body = addressed_message(context, agent, task, project_name, task_name, files)
    assigned: list[Effect] = [effects.deliver(to=agent, body=body, type="task")]
    note = ""
    if context.team.get("board") is not None:
        assigned.append(effects.board_add(title=task_name or task[:80], assignee=agent))
        note = " It is on the task board."
    return reply(f"Work assigned to {agent}.{note}", context.tool_call_id, *assigned)


COLLABORATION_TOOLS: list[BaseTool] = [call_agent, call_agents, assign_agent_work]
"""The ``collaboration`` tool set."""
