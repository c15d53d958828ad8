"""Task board tools (seed 000's task manager): create tasks, set status and priority, list them."""

from __future__ import annotations

from typing import Annotated

from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.prebuilt import InjectedState

from teamgraph.governance import board
from teamgraph.messaging import effects
from teamgraph.runtime import TeamRuntime
from teamgraph.tools.context import View, fail, reply


def current_board(view: View) -> list[board.Task]:
    """The board as the router will see it, with this step's earlier changes applied."""
    tasks: list[board.Task] = list(view["team"].get("board") or [])
    for e in view["effects"]:
        if e["kind"] == effects.TASK_CREATE:
            tasks = board.add_task(tasks, title=e["title"], assignee=e["assignee"], priority=e["priority"],
                                   depends_on=e["depends_on"], by=view["self"])
    return tasks


def make_task_tools(runtime: TeamRuntime) -> list[BaseTool]:
    """Build create_task, set_task_status, set_task_priority and list_tasks.

    Args:
        runtime: The team runtime (unused; kept for symmetry with the other sets).

    Returns:
        The four tools.
    """
    del runtime

    @tool
    def create_task(
        title: str,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
        assignee: str | None = None,
        priority: board.Priority = "normal",
        depends_on: list[str] | None = None,
    ):
        """Add a task to the team's task board. Hand the work over with assign_agent_work.

        Args:
            title: What the task delivers.
            assignee: The agent's display name, if it is decided.
            priority: "low", "normal", "high" or "urgent".
            depends_on: Ids of tasks that must be done first, e.g. ["task_1"].
        """
        tasks = current_board(view)
        if assignee is not None and assignee not in view["agents"]:
            raise fail(f"No agent '{assignee}'. Agents: {', '.join(view['agents'])}.")
        try:
            added = board.add_task(tasks, title=title, assignee=assignee, priority=priority,
                                   depends_on=depends_on or [], by=view["self"])[-1]
        except board.BoardError as exc:
            raise fail(str(exc)) from None
        return reply(
            f"{added['id']} added ({added['status']}, {priority}).",
            tool_call_id,
            effects.task_create(title=title, assignee=assignee, priority=priority, depends_on=depends_on or []),
        )

    @tool
    def set_task_status(
        task_id: str,
        status: board.TaskStatus,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
        note: str | None = None,
    ):
        """Set a task's status: todo, in_progress, blocked, done or failed.

        Args:
            task_id: The task's id, e.g. "task_2".
            status: The new status.
            note: What was produced, what blocks it, why it failed.
        """
        try:
            board.find(current_board(view), task_id)
        except board.BoardError as exc:
            raise fail(str(exc)) from None
        change = effects.task_update(task_id=task_id, status=status, note=note)
        return reply(f"{task_id} is {status}.", tool_call_id, change)

    @tool
    def set_task_priority(
        task_id: str,
        priority: board.Priority,
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ):
        """Set a task's priority: low, normal, high or urgent.

        Args:
            task_id: The task's id.
            priority: The new priority.
        """
        try:
            board.find(current_board(view), task_id)
        except board.BoardError as exc:
            raise fail(str(exc)) from None
        change = effects.task_update(task_id=task_id, priority=priority)
        return reply(f"{task_id} priority is {priority}.", tool_call_id, change)

    @tool
    def list_tasks(view: Annotated[View, InjectedState("view")]) -> str:
        """List the task board: id, status, priority, title, assignee, dependencies."""
        return "\n".join(board.render(current_board(view))) or "The board is empty."

    return [create_task, set_task_status, set_task_priority, list_tasks]
