"""The task board (docs/protocols.md, "Task board"): tasks with an assignee, a priority, dependencies and a status.

The board is plain data in ``state["team"]["board"]``, a list of ``Task`` records;
every function here returns a new list (records are never changed in place).
Statuses follow the work: ``work_event`` is the rule the router applies when an
assigned member starts, ends its turn or fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args

from teamgraph.records import BUSY, Task

TaskStatus = Literal["todo", "in_progress", "blocked", "done", "failed"]
Priority = Literal["low", "normal", "high", "urgent"]
WorkEvent = Literal["started", "ended", "failed"]
STATUSES: tuple[str, ...] = get_args(TaskStatus)
PRIORITIES: tuple[str, ...] = get_args(Priority)
OPEN_STATUSES = frozenset({"todo", "in_progress", "blocked"})


class BoardError(ValueError):
    """A task id, status or priority that cannot be used (the message says how to fix it)."""


def next_id(board: Sequence[Task]) -> str:
    """The id the next task gets: ``task_<n>``, one more than the largest number on the board."""
    numbers = [int(t["id"].rsplit("_", 1)[1]) for t in board if t["id"].rsplit("_", 1)[-1].isdigit()]
    return f"task_{max(numbers, default=0) + 1}"


def find(board: Sequence[Task], task_id: str) -> Task:
    """The task ``task_id``, or a BoardError that lists the ids."""
    for task in board:
        if task["id"] == task_id:
            return task
    raise BoardError(f"No task '{task_id}' on the board. Tasks: {', '.join(t['id'] for t in board) or 'none'}.")


def check(*, status: str | None = None, priority: str | None = None) -> None:
    """Refuse an unknown status or priority."""
    if status is not None and status not in STATUSES:
        raise BoardError(f"Unknown status '{status}'. Statuses: {', '.join(STATUSES)}.")
    if priority is not None and priority not in PRIORITIES:
        raise BoardError(f"Unknown priority '{priority}'. Priorities: {', '.join(PRIORITIES)}.")


def add_task(
    board: Sequence[Task], *, title: str, assignee: str | None, priority: str, depends_on: Sequence[str], by: str
) -> list[Task]:
    """The board with a new ``todo`` task (``blocked`` while a dependency is not done)."""
    check(priority=priority)
    for dep in depends_on:
        find(board, dep)
    task = Task(
        id=next_id(board),
        title=title,
        role_id=None,
        assignee=assignee,
        priority=priority,
        depends_on=list(depends_on),
        status="todo",
        updated_by=by,
    )
    if _waiting(board, task):
        task["status"] = "blocked"
    return [*board, task]


def update_task(
    board: Sequence[Task],
    task_id: str,
    *,
    by: str,
    status: str | None = None,
    priority: str | None = None,
    note: str | None = None,
) -> list[Task]:
    """The board with one task's status, priority or note changed (dependants unblocked when done)."""
    check(status=status, priority=priority)
    find(board, task_id)
    out: list[Task] = []
    for t in board:
        task = Task(**t)
        if t["id"] == task_id:
            task["updated_by"] = by
            if status is not None:
                task["status"] = status
            if priority is not None:
                task["priority"] = priority
            if note is not None:
                task["note"] = note
        out.append(task)
    return unblock(out) if status == "done" else out


def unblock(board: Sequence[Task]) -> list[Task]:
    """Blocked tasks whose dependencies are all done go back to ``todo``."""
    return [
        Task(**{**t, "status": "todo"}) if t["status"] == "blocked" and not _waiting(board, t) else t for t in board
    ]


def _waiting(board: Sequence[Task], task: Task) -> bool:
    done = {t["id"] for t in board if t["status"] == "done"}
    return any(dep not in done for dep in task.get("depends_on", []))


def work_event(board: Sequence[Task], *, agent: str, role_id: str, event: WorkEvent) -> list[Task]:
    """The board after ``agent`` (of ``role_id``) started work, ended its turn, or failed.

    The rule: when a member starts a turn, its highest-priority ``todo`` task (one assigned
    to it, else an unassigned one planned for its role, which it then claims) whose
    dependencies are done becomes ``in_progress``; when it ends its turn its
    ``in_progress`` tasks become ``done`` (and their dependants unblock); when it fails they
    become ``failed``. Tasks set by hand to ``blocked``, ``done`` or ``failed`` are left alone.
    """
    by = f"{agent} ({event})"
    if event == "started":
        if any(t.get("assignee") == agent and t["status"] == "in_progress" for t in board):
            return list(board)
        mine = [
            t
            for t in board
            if t["status"] == "todo"
            and not _waiting(board, t)
            and (t.get("assignee") == agent or (not t.get("assignee") and t.get("role_id") == role_id))
        ]
        if not mine:
            return list(board)
        # NOTE: a task assigned to the member by name comes before one it would claim for its role.
        first = min(
            mine, key=lambda t: (t.get("assignee") != agent, -PRIORITIES.index(t.get("priority", "normal")), t["id"])
        )
        return [
            Task(**{**t, "status": "in_progress", "assignee": agent, "updated_by": by}) if t is first else t
            for t in board
        ]
    final = "done" if event == "ended" else "failed"
    out = [
        Task(**{**t, "status": final, "updated_by": by})
        if t.get("assignee") == agent and t["status"] == "in_progress"
        else t
        for t in board
    ]
    return unblock(out)


def leader_reported(board: Sequence[Task], *, leader: str, role_id: str) -> list[Task]:
    """The board after the leader's report: its own open tasks whose dependencies are done are done.

    The leader's tasks are those assigned to it, or planned for its role and unassigned
    (a plan's "review and report" step). ``follow_work`` leaves the leader out, since its
    turns end many times in a run; its report is what finishes its part.
    """
    by = f"{leader} (reported)"

    def mine(task: Task) -> bool:
        owner = task.get("assignee")
        return owner == leader or (not owner and task.get("role_id") == role_id)

    done = {t["id"] for t in board if mine(t) and t["status"] in ("todo", "in_progress") and not _waiting(board, t)}
    if not done:
        return list(board)
    out = [
        Task(**{**t, "status": "done", "assignee": leader, "updated_by": by}) if t["id"] in done else t for t in board
    ]
    return unblock(out)


def render(board: Sequence[Task]) -> list[str]:
    """One line per task, highest priority first: for prompts, tools and the CLI."""
    order = sorted(
        board, key=lambda t: (t["status"] not in OPEN_STATUSES, -PRIORITIES.index(t.get("priority", "normal")))
    )
    lines = []
    for t in order:
        who = t.get("assignee") or t.get("role_id") or "unassigned"
        after = f" after {', '.join(t['depends_on'])}" if t.get("depends_on") else ""
        note = f" — {t['note']}" if t.get("note") else ""
        lines.append(f"{t['id']} [{t['status']}] ({t.get('priority', 'normal')}) {t['title']} · {who}{after}{note}")
    return lines


ACTIVE = BUSY


def follow_work(
    board: Sequence[Task],
    before: Mapping[str, Mapping[str, Any]],
    after: Mapping[str, Mapping[str, Any]],
    *,
    leader: str = "Team Leader",
) -> list[Task]:
    """The board after one router pass, from the registry before and after it (``work_event`` per member).

    A member whose turn ended (it was running or waiting and is idle now, or a new turn
    began) ends its work; one that failed fails it; one that began a turn starts work.

    Args:
        board: The task board.
        before: The registry (display name -> record) when the pass began.
        after: The registry when the pass ends.
        leader: The leader's display name (the leader has no tasks).

    Returns:
        The new board (the same tasks when nothing moved).
    """
    tasks = list(board)
    for name, now in after.items():
        if name == leader:
            continue
        was = before.get(name) or {}
        role_id, new_turn = str(now.get("role", "")), now.get("turn", 0) > was.get("turn", 0)
        if now.get("status") == "failed" and was.get("status") != "failed":
            tasks = work_event(tasks, agent=name, role_id=role_id, event="failed")
            continue
        if was.get("status") in ACTIVE and (now.get("status") == "idle" or new_turn):
            tasks = work_event(tasks, agent=name, role_id=role_id, event="ended")
        if now.get("status") in ACTIVE and (new_turn or was.get("status") not in ACTIVE):
            tasks = work_event(tasks, agent=name, role_id=role_id, event="started")
    return tasks
