"""What a tool sees and how it answers.

A tool sees a read-only *view* of the team (injected with ``InjectedState("view")``):
who calls, the registry, the requests, the counters, and the effects that earlier
tool calls of the same step asked for. It answers with text for its caller and,
through ``Command``, effects for the router.
"""

from __future__ import annotations

import math
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import ToolException
from langgraph.types import Command

from teamgraph.messaging import effects
from teamgraph.messaging.envelopes import LEADER
from teamgraph.protocols.requests import QUESTION, is_pending
from teamgraph.records import ACTIVE


class View:
    """A read-only view of the team for tools: ``view["agents"]``, ``["requests"]``,
    ``["team"]``, ``["self"]`` (the caller) and ``["effects"]`` (this step's so far).

    NOTE: a plain class, not a dict: langchain validates a tool's arguments and dumps
    them with pydantic, which would deep-copy a dict holding every request of the
    run on every tool call.
    """

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def _asdict(self) -> dict[str, Any]:
        # NOTE: how serializers (the LangGraph API server's, for a "values" stream of
        # the role subgraphs) turn an unknown object into JSON.
        return dict(self._data)

    def with_effects(self, step_effects: list[dict[str, Any]]) -> View:
        """The same view, seeing the effects of the step's earlier tool calls."""
        return View({**self._data, "effects": step_effects})

ACTIVE_STATUSES = ACTIVE


def reply(text: str, tool_call_id: str, *effects: dict[str, Any]) -> Command:
    """An immediate tool result plus the effects the router must apply."""
    return Command(
        update={
            "new": [ToolMessage(content=text, tool_call_id=tool_call_id)],
            "effects": list(effects),
        }
    )


def defer(*effects: dict[str, Any]) -> Command:
    """No result yet: the tool call stays open until the router answers it."""
    return Command(update={"effects": list(effects)})


def check_seconds(name: str, value: float, *, zero: str) -> None:
    """Refuse a time-out that is negative, not a number, infinite or longer than a week.

    Args:
        name: The argument's name, for the error.
        value: The seconds given.
        zero: What 0 means for this argument (e.g. "fire-and-forget").
    """
    if not math.isfinite(value) or not 0 <= value <= effects.MAX_WAIT_SECONDS:
        raise fail(
            f"{name} must be 0 ({zero}) or a number of seconds up to {effects.MAX_WAIT_SECONDS} (a week); got {value!r}."
        )


def fail(problem: str) -> ToolException:
    """An error result for the calling agent (it goes on; the run does not stop)."""
    return ToolException(problem)


def caller(view: View) -> str:
    """The display name of the agent whose tool this is."""
    return view["self"]


def active_members(view: View) -> list[str]:
    """Members (not the leader) that can still receive messages, in creation order."""
    return [
        name
        for name, record in view["agents"].items()
        if name != LEADER and record["status"] in ACTIVE_STATUSES
    ]


def require_member(view: View, display_name: str) -> dict[str, Any]:
    """The record of an active member, or an error that lists the active members."""
    if display_name == caller(view):
        raise fail(f"'{display_name}' is you: you cannot address yourself.")
    record = view["agents"].get(display_name)
    if any(e["kind"] == "terminate" and e["target"] == display_name for e in view["effects"]):
        raise fail(f"{display_name} was terminated by an earlier call of this step.")
    if record is None or display_name == LEADER or record["status"] not in ACTIVE_STATUSES:
        members = ", ".join(active_members(view)) or "none"
        state = f" (it is {record['status']})" if record and display_name != LEADER else ""
        raise fail(
            f"No active member named '{display_name}'{state}. Active members: {members}. "
            "Use the exact display name, e.g. 'UI Operator_1'."
        )
    return record


def require_question(view: View, question_id: str, *, kinds: set[str]) -> dict[str, Any]:
    """A pending question addressed to the caller, or an error saying what is wrong."""
    record = view["requests"].get(question_id)
    answered = {e["request_id"] for e in view["effects"] if e["kind"] == "answer"}
    answered_now = question_id in answered
    if record is None or record["kind"] not in kinds or record.get("route", record["to"]) != caller(view):
        mine = [
            rid
            for rid, r in view["requests"].items()
            if is_pending(r) and r["kind"] in kinds and r.get("route") == caller(view) and rid not in answered
        ]
        raise fail(
            f"Unknown question id '{question_id}'. Questions waiting for your answer: "
            f"{', '.join(mine) or 'none'}."
        )
    if not is_pending(record) or answered_now:
        raise fail(f"Question '{question_id}' is already {record['status'] if not answered_now else 'answered'}.")
    return record


def instance_name(view: View, role: Any) -> str:
    """The next display name for ``role``: numbered per display name from 1, never reused."""
    taken = view["team"].get("instances", {}).get(role.name, 0)
    return f"{role.name}_{taken + spawned_this_step(view, role.name) + 1}"


def spawned_this_step(view: View, role_name: str) -> int:
    """How many members named ``{role_name}_{n}`` earlier tool calls of this step created."""
    return sum(1 for e in view["effects"] if e["kind"] == "spawn" and e["name"].rsplit("_", 1)[0] == role_name)


def ask_agent(
    view: View, display_name: str, question: str, tool_call_id: str, *, tool: str, reply_via: str = "tool"
) -> Command:
    """Open a question to another agent; the calling tool call waits for the answer."""
    require_member(view, display_name)
    return defer(
        effects.open_request(
            request_kind=QUESTION,
            to=display_name,
            body=question,
            call_id=tool_call_id,
            tool=tool,
            reply_via=reply_via,
        )
    )


def answer_question(view: View, question_id: str, answer: str, tool_call_id: str, *, kind: str) -> Command:
    """Answer a pending question of ``kind`` addressed to the caller."""
    record = require_question(view, question_id, kinds={kind})
    return reply(
        f"Answered {question_id} ({record['from']}).",
        tool_call_id,
        effects.answer(request_id=question_id, answer=answer),
    )
