"""Task board tools (docs/protocols.md, the task manager): create tasks, set status and priority, list them."""

from __future__ import annotations

from langchain_core.tools import BaseTool, tool
from langgraph.types import Command

from teamgraph.governance import board
from teamgraph.messaging import effects
from teamgraph.tools import errors
from teamgraph.tools.context import ToolContext, fail, reply


def current_board(context: ToolContext) -> list[board.Task]:
    """The board as the router will see it, with this step's earlier changes applied."""
    tasks = list(context.team.get("board") or [])
    for e in context.effects:
        if e["kind"] == effects.TASK_CREATE:
            tasks = board.add_task(tasks, title=e["title"], assignee=e["assignee"], priority=e["priority"],
                                   depends_on=e["depends_on"], by=context.caller)  # fmt: skip
    return tasks


def find_task(context: ToolContext, task_id: str) -> None:
    """Check that ``task_id`` is on the board (this step's new tasks included), or an error listing the tasks."""
    try:
        board.find(current_board(context), task_id)
    except board.BoardError as exc:
        raise fail(str(exc), code=errors.UNKNOWN_TASK) from None


@tool(parse_docstring=True)
def create_task(
    title: str,
    context: ToolContext,
    assignee: str | None = None,
    priority: board.Priority = "normal",
    depends_on: list[str] | None = None,
) -> Command:
    """Add a task to the team's task board. Hand the work over with assign_agent_work.

    Args:
        title: What the task delivers.
        assignee: The agent's display name, if it is decided.
        priority: "low", "normal", "high" or "urgent".
        depends_on: Ids of tasks that must be done first, e.g. ["task_1"].
    """
    tasks = current_board(context)
    if assignee is not None and assignee not in context.agents:
        raise fail(f"No agent '{assignee}'. Agents: {', '.join(context.agents)}.", code=errors.UNKNOWN_AGENT)
    try:
        added = board.add_task(tasks, title=title, assignee=assignee, priority=priority,
                               depends_on=depends_on or [], by=context.caller)[-1]  # fmt: skip
    except board.BoardError as exc:
        # NOTE: an unknown dependency or priority: the message names which
        raise fail(str(exc), code=errors.BAD_ARGUMENT) from None
    return reply(
        f"{added['id']} added ({added['status']}, {priority}).",
        context.tool_call_id,
        effects.task_create(title=title, assignee=assignee, priority=priority, depends_on=depends_on or []),
    )


@tool(parse_docstring=True)
def set_task_status(task_id: str, status: board.TaskStatus, context: ToolContext, note: str | None = None) -> Command:
    """Set a task's status: todo, in_progress, blocked, done or failed.

    Args:
        task_id: The task's id, e.g. "task_2".
        status: The new status.
        note: What was produced, what blocks it, why it failed.
    """
    find_task(context, task_id)
    change = effects.task_update(task_id=task_id, status=status, note=note)
    return reply(f"{task_id} is {status}.", context.tool_call_id, change)


@tool(parse_docstring=True)
def set_task_priority(task_id: str, priority: board.Priority, context: ToolContext) -> Command:
    """Set a task's priority: low, normal, high or urgent.

    Args:
        task_id: The task's id.
        priority: The new priority.
    """
    find_task(context, task_id)
    change = effects.task_update(task_id=task_id, priority=priority)
    return reply(f"{task_id} priority is {priority}.", context.tool_call_id, change)


@tool(parse_docstring=True, error_on_invalid_docstring=False)  # NOTE: no argument, no Args: section
def list_tasks(context: ToolContext) -> str:
    """List the task board: id, status, priority, title, assignee, dependencies."""
    return "\n".join(board.render(current_board(context))) or "The board is empty."


TASK_TOOLS: list[BaseTool] = [create_task, set_task_status, set_task_priority, list_tasks]
"""The ``tasks`` tool set."""
