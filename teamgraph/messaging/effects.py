"""Effects: what a tool asks the router to do.

Tools never change another agent's state. A tool returns its result for the
caller plus effects; the router applies every effect in one place, in a
deterministic order. Effects are plain dicts so they can be checkpointed.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from teamgraph.records import (
    AnswerEffect,
    BoardAddEffect,
    BoardEffect,
    DeliverEffect,
    Effect,
    EndowEffect,
    EscalateEffect,
    FileEffect,
    HumanAnswerEffect,
    OpenEffect,
    PerformedEffect,
    ResumeErrorEffect,
    SpawnEffect,
    StepEffect,
    StopEffect,
    TakenEffect,
    TaskCreateEffect,
    TaskUpdateEffect,
    TerminateEffect,
    WaitOutputEffect,
)

__all__ = ["Effect"]

# Effect kinds.
SPAWN: Final = "spawn"
DELIVER: Final = "deliver"
OPEN: Final = "open"
ANSWER: Final = "answer"
ESCALATE: Final = "escalate"
HUMAN_ANSWER: Final = "human_answer"
RESUME_ERROR: Final = "resume_error"
WAIT_OUTPUT: Final = "wait_output"
TERMINATE: Final = "terminate"
STOP: Final = "stop"
BOARD: Final = "board"
BOARD_ADD: Final = "board_add"
STEP: Final = "step"
TAKEN: Final = "taken"
PERFORMED: Final = "performed"

ReplyVia = Literal["tool", "output"]

MAX_WAIT_SECONDS = 7 * 24 * 3600
"""The longest time-out a wait may have (a week): tools refuse more, the router bounds it."""


def spawn(*, role_id: str, name: str, task: str | None) -> SpawnEffect:
    """Create a member ``name`` of role ``role_id`` and optionally give it a task."""
    return {"kind": SPAWN, "role": role_id, "name": name, "task": task}


def deliver(*, to: str, body: str, type: str = "message") -> DeliverEffect:
    """Deliver ``body`` to agent ``to``; ``type`` is ``task`` or ``message``."""
    return {"kind": DELIVER, "to": to, "body": body, "type": type}


def open_request(
    *,
    request_kind: str,
    body: str,
    to: str | None = None,
    call_id: str | None = None,
    tool: str | None = None,
    reply_via: ReplyVia = "tool",
    details: dict[str, Any] | None = None,
    timeout: float | None = None,
    group: int = 0,
) -> OpenEffect:
    """Open a request; if ``call_id`` is given, that tool call waits for the outcome.

    Args:
        request_kind: ``ask``, ``question``, ``plan``, ``member_plan``, ``approval``
            or ``shutdown`` (protocols/requests.py).
        body: The question, plan or reason, as text.
        to: Who must answer, when the kind does not decide it (questions, shutdowns).
        call_id: The asker's open tool call; its result will be the outcome.
        tool: The asking tool's name (for the ToolMessage that answers it).
        reply_via: ``tool`` when the receiver answers with a tool, ``output`` when
            its next output is the answer (``ask_sub_agent``).
        details: Kind-specific fields a decider sees (plan steps, operation...).
        timeout: Seconds the asker's call waits; then it gets a time-out result
            and the answer, when it comes, arrives as a message.
        group: Several requests answer one call (``call_agents``): how many (0: one
            request, no group). The call gets every answer together once all of them
            were opened and the last one is closed.
    """
    return {
        "kind": OPEN,
        "request_kind": request_kind,
        "body": body,
        "to": to,
        "call_id": call_id,
        "tool": tool,
        "reply_via": reply_via,
        "details": details or {},
        "timeout": timeout,
        "group": group,
    }


def answer(*, request_id: str, answer: str, approve: bool | None = None) -> AnswerEffect:
    """Answer (or, with ``approve``, decide) the open request ``request_id``."""
    return {"kind": ANSWER, "request_id": request_id, "answer": answer, "approve": approve}


def escalate(*, request_id: str, note: str | None) -> EscalateEffect:
    """Send a request the leader should not decide alone to a person."""
    return {"kind": ESCALATE, "request_id": request_id, "note": note}


def human_answer(*, request_id: str, value: Any) -> HumanAnswerEffect:
    """A person's answer to a request (written by the human gate)."""
    return {"kind": HUMAN_ANSWER, "request_id": request_id, "value": value}


def resume_error(*, error: str) -> ResumeErrorEffect:
    """A resume value the human gate refused (the requests stay as they were)."""
    return {"kind": RESUME_ERROR, "error": error}


def wait_output(*, on: str, call_id: str, tool: str) -> WaitOutputEffect:
    """Keep the caller's tool call open until agent ``on`` produces its next output."""
    return {"kind": WAIT_OUTPUT, "on": on, "call_id": call_id, "tool": tool}


def terminate(*, target: str) -> TerminateEffect:
    """End member ``target`` for good; its name is never reused."""
    return {"kind": TERMINATE, "target": target}


def stop(*, target: str) -> StopEffect:
    """End ``target``'s current turn; it keeps its context and can be given new work."""
    return {"kind": STOP, "target": target}


def board(*, task_id: str, status: str, note: str | None) -> BoardEffect:
    """Update a task of the team's task board."""
    return {"kind": BOARD, "task_id": task_id, "status": status, "note": note}


def board_add(*, title: str, assignee: str | None) -> BoardAddEffect:
    """Add a task to the team's task board."""
    return {"kind": BOARD_ADD, "title": title, "assignee": assignee}


def taken(*, seq: int, read: str | None = None) -> TakenEffect:
    """An agent's node took dispatch ``seq``'s step: it leaves the book's in-flight record.

    NOTE: written by the agent's node whatever the step did (even nothing, or failed), so a
    pass knows which dispatches its agents' nodes took; a dispatch sent to a node that never
    ran (an edit of the checkpoint before it) stays in flight and is made again. ``read``
    names the checkpoint the node read: the next pass logs it, then its own state on from
    it (``audit/cursors.py``).
    """
    effect: TakenEffect = {"kind": TAKEN, "seq": seq}
    if read is not None:
        effect["read"] = read
    return effect


def performed(*, request_id: str, result: str) -> PerformedEffect:
    """An approved sensitive operation was performed in its requester's node: ``result`` answers its call."""
    return {"kind": PERFORMED, "request_id": request_id, "result": result}


def step(
    *,
    message_index: int | None,
    ended_turn: bool,
    tool_calls: int,
    deferred: list[str],
    tokens: int = 0,
    works: bool = False,
) -> StepEffect:
    """Summarize one agent step for the router (written by the step node, not a tool).

    Args:
        message_index: Where the step's AI message is in the agent's history,
            counted from the end (None when the step failed).
        ended_turn: Whether the model ended its turn (no tool calls).
        tool_calls: How many tool calls it made.
        deferred: The calls left open for the router to answer.
        tokens: The tokens the provider reported for the step's model calls.
        works: Whether the call only did work (tool calls that asked the team for nothing).
    """
    summary: StepEffect = {
        "kind": STEP,
        "message_index": message_index,
        "ended_turn": ended_turn,
        "tool_calls": tool_calls,
        "deferred": deferred,
        "tokens": tokens,
    }
    if works:
        summary["works"] = True  # NOTE: only when set: every step's effect is stored
    return summary


# Governance effects (issue 12): the task board with priorities, and skill endowments.
TASK_CREATE: Final = "task_create"
TASK_UPDATE: Final = "task_update"
ENDOW: Final = "endow"


def task_create(*, title: str, assignee: str | None, priority: str, depends_on: list[str]) -> TaskCreateEffect:
    """Add a task to the team's task board (the board is created if there is none)."""
    return {"kind": TASK_CREATE, "title": title, "assignee": assignee, "priority": priority, "depends_on": depends_on}


def task_update(
    *, task_id: str, status: str | None = None, priority: str | None = None, note: str | None = None
) -> TaskUpdateEffect:
    """Change a task's status, priority or note."""
    return {"kind": TASK_UPDATE, "task_id": task_id, "status": status, "priority": priority, "note": note}


def endow(*, target: str, skills: list[dict[str, str]]) -> EndowEffect:
    """Give skills (name and description) to an agent (display name) or a role (role id)."""
    return {"kind": ENDOW, "target": target, "skills": skills}


# Project files (the collaboration spec §2.2): who saw and who made which version.
FILE: Final = "file"


def file(*, path: str, version: int, action: str) -> FileEffect:
    """The caller read (``action="read"``) or made (``write``, ``edit``, ``restore``) ``version`` of ``path``."""
    return {"kind": FILE, "path": path, "version": version, "action": action}
