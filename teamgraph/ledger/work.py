"""Work: the task board and the skills given to agents (the governance effects).

These handlers only change the team book's ``WorkBook`` part; a refused change is
told to the agent that asked for it.
"""

from __future__ import annotations

from teamgraph.governance import board as task_board
from teamgraph.ledger.book import Ledger
from teamgraph.ledger.mail import notify
from teamgraph.messaging import notices
from teamgraph.records import (
    ENDED,
    LEADER,
    LEADER_ROLE_ID,
    BoardAddEffect,
    BoardEffect,
    EndowEffect,
    FileEffect,
    FileRecord,
    Task,
    TaskCreateEffect,
    TaskUpdateEffect,
)


def on_board(ledger: Ledger, effect: BoardEffect) -> None:
    """``update_task``: a task's status (and note) on the plan's board."""
    board: list[Task] = [{**task} for task in ledger.team.get("board", [])]
    for task in board:
        if task["id"] == effect["task_id"]:
            task["status"] = effect["status"]
            task["updated_by"] = effect["agent"]
            if effect["note"]:
                task["note"] = effect["note"]
    ledger.team["board"] = board


def on_board_add(ledger: Ledger, effect: BoardAddEffect) -> None:
    """A delegated task joins the board."""
    board = list(ledger.team.get("board", []))
    task: Task = {
        "id": f"task_{len(board) + 1}",
        "title": effect["title"],
        "role_id": None,
        "depends_on": [],
        "status": "todo",
        "assignee": effect["assignee"],
    }
    ledger.team["board"] = [*board, task]


def on_task_create(ledger: Ledger, effect: TaskCreateEffect) -> None:
    """``task_create``: a task with a priority and dependencies."""
    try:
        ledger.team["board"] = task_board.add_task(
            ledger.team.get("board") or [],
            title=effect["title"],
            assignee=effect["assignee"],
            priority=effect["priority"],
            depends_on=effect["depends_on"],
            by=effect["agent"],
        )
    except task_board.BoardError as exc:
        notify(ledger, effect["agent"], notices.task_refused("created", error=str(exc)), wake=False)


def on_task_update(ledger: Ledger, effect: TaskUpdateEffect) -> None:
    """``task_update``: status, priority or note."""
    try:
        ledger.team["board"] = task_board.update_task(
            ledger.team.get("board") or [],
            effect["task_id"],
            by=effect["agent"],
            status=effect["status"],
            priority=effect["priority"],
            note=effect["note"],
        )
    except task_board.BoardError as exc:
        notify(ledger, effect["agent"], notices.task_refused("updated", error=str(exc)), wake=False)


def on_endow(ledger: Ledger, effect: EndowEffect) -> None:
    """Skills (name and description) given to an agent or a role."""
    endowments = dict(ledger.team.get("endowments", {}))
    current = {s["name"]: s for s in endowments.get(effect["target"], [])}
    current.update({s["name"]: s for s in effect["skills"]})
    endowments[effect["target"]] = list(current.values())
    ledger.team["endowments"] = endowments


def on_file(ledger: Ledger, effect: FileEffect) -> None:
    """A project file read or written: record who saw which version; tell earlier readers of a change."""
    files = dict(ledger.team.get("files", {}))
    path, agent, version = effect["path"], effect["agent"], effect["version"]
    record: FileRecord = {"version": 0, "by": "", "seen": {}, **files.get(path, {})}  # type: ignore[typeddict-item]
    seen = dict(record["seen"])
    if effect["action"] != "read" and version > record["version"]:
        for reader, saw in seen.items():
            member = ledger.agents.get(reader)
            if reader != agent and saw < version and member is not None and member["status"] not in ENDED:
                notice = notices.file_changed(path, by=agent, version=version, action=effect["action"])
                notify(ledger, reader, notice, wake=False)
        record = {**record, "version": version, "by": agent}
    seen[agent] = max(seen.get(agent, 0), version)
    files[path] = {**record, "seen": seen}
    ledger.team["files"] = files


def follow_work(ledger: Ledger) -> None:
    """Task statuses follow the work: a member that starts, ends or fails its turn moves its tasks."""
    if ledger.team.get("board"):
        ledger.team["board"] = task_board.follow_work(ledger.team["board"], ledger.agents_before, ledger.agents)
        if ledger.replies:  # NOTE: the leader answered the user in this pass: its report closes its own steps
            ledger.team["board"] = task_board.leader_reported(
                ledger.team["board"], leader=LEADER, role_id=LEADER_ROLE_ID
            )
