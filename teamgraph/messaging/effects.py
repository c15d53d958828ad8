"""Effects: what a tool asks the router to do.

Tools never change another agent's state. A tool returns its result for the
caller plus effects; the router applies every effect in one place, in a
deterministic order. Effects are plain dicts so they can be checkpointed.
"""

from __future__ import annotations

from typing import Any, Literal

Effect = dict[str, Any]

# Effect kinds.
SPAWN = "spawn"
DELIVER = "deliver"
ASK = "ask"
ANSWER = "answer"
WAIT_OUTPUT = "wait_output"
TERMINATE = "terminate"
STOP = "stop"
STEP = "step"

# Request kinds a question can be (the tracker in protocols/requests.py).
ASK_MASTER = "ask"  # a member asks the master (the Team Leader, or a person)
QUESTION = "question"  # one agent asks another

ReplyVia = Literal["tool", "output"]


def spawn(*, role_id: str, name: str, task: str | None) -> Effect:
    """Create a member ``name`` of role ``role_id`` and optionally give it a task."""
    return {"kind": SPAWN, "role": role_id, "name": name, "task": task}


def deliver(*, to: str, body: str, type: str = "message") -> Effect:
    """Deliver ``body`` to agent ``to``; ``type`` is ``task`` or ``message``."""
    return {"kind": DELIVER, "to": to, "body": body, "type": type}


def ask(
    *,
    to: str,
    question: str,
    call_id: str,
    tool: str,
    request_kind: str,
    reply_via: ReplyVia = "tool",
) -> Effect:
    """Open a question request to ``to``; the caller's tool call ``call_id`` waits for it.

    Args:
        to: Who must answer.
        question: The question text.
        call_id: The asker's open tool call; its result will be the answer.
        tool: The asking tool's name (for the ToolMessage that answers it).
        request_kind: ``ask`` (to the master) or ``question`` (agent to agent).
        reply_via: ``tool`` when the receiver answers with an answer tool,
            ``output`` when its next output is the answer (``ask_sub_agent``).
    """
    return {
        "kind": ASK,
        "to": to,
        "question": question,
        "call_id": call_id,
        "tool": tool,
        "request_kind": request_kind,
        "reply_via": reply_via,
    }


def answer(*, request_id: str, answer: str) -> Effect:
    """Answer the open request ``request_id``."""
    return {"kind": ANSWER, "request_id": request_id, "answer": answer}


def wait_output(*, on: str, call_id: str, tool: str) -> Effect:
    """Keep the caller's tool call open until agent ``on`` produces its next output."""
    return {"kind": WAIT_OUTPUT, "on": on, "call_id": call_id, "tool": tool}


def terminate(*, target: str) -> Effect:
    """End member ``target`` for good; its name is never reused."""
    return {"kind": TERMINATE, "target": target}


def stop(*, target: str) -> Effect:
    """End ``target``'s current turn; it keeps its context and can be given new work."""
    return {"kind": STOP, "target": target}


def step(*, text: str, ended_turn: bool, tool_calls: int, deferred: list[str]) -> Effect:
    """Summarize one agent step for the router (written by the step node, not a tool)."""
    return {
        "kind": STEP,
        "text": text,
        "ended_turn": ended_turn,
        "tool_calls": tool_calls,
        "deferred": deferred,
    }
