"""Helpers to write ScriptedChatModel scripts in tests."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from teamgraph.messaging.results import error_of


def call(tool: str, /, **args) -> dict:
    """One tool call of a scripted turn."""
    return {"name": tool, "args": args}


def act(*calls: dict, content: str = "") -> dict:
    """A scripted turn that calls tools."""
    return {"content": content, "tool_calls": list(calls)}


def reply_when_done(final: str, *members: str, turns: int = 12) -> list:
    """Leader turns: end each turn silently until every member's result arrived, then reply."""

    def turn(messages):
        seen = "\n".join(str(m.content) for m in messages if isinstance(m, HumanMessage))
        replied = any(isinstance(m, AIMessage) and m.content == final for m in messages)
        done = all(f"Result from {member}" in seen for member in members)
        return final if done and not replied else ""

    return [turn] * turns


def types(messages) -> list[str]:
    """The class names of ``messages``, for compact assertions."""
    return [type(m).__name__ for m in messages]


def on_message(rules: dict, otherwise=""):
    """A turn that reacts to the agent's last message.

    When the last message is a user-role message (an envelope, a notice) that contains
    one of ``rules``' markers, the turn is that marker's turn (the first that matches);
    otherwise it is ``otherwise`` (by default: end the turn silently).
    """

    def play(messages):
        last = messages[-1]
        if isinstance(last, HumanMessage):
            for marker, turn in rules.items():
                if marker in str(last.content):
                    return turn
        return otherwise

    return play


def after_seconds(clock, seconds: float, turn):
    """A turn that advances ``clock`` (a FakeClock) by ``seconds``, then plays ``turn``."""

    def play(messages):
        clock.advance(seconds)
        return turn

    return play


def quiet(turns: int = 12) -> list[str]:
    """Leader turns that end silently (the leader only watches)."""
    return [""] * turns


def errors_of(run, name: str) -> list[str]:
    """The error results of ``name``'s tool calls in a TeamRun."""
    return [str(m.content) for m in run.tool_results(name) if m.status == "error"]


def error_codes(run, name: str, tool: str | None = None) -> list[str | None]:
    """The codes (``teamgraph/tools/errors.py``) of the error results of ``name``'s calls (to ``tool``), in order.

    A result the router gave as an error (a deadlock) has no code: None.
    """
    return [error_of(m) for m in run.tool_results(name, tool) if m.status == "error"]


def chunks(run, name: str) -> list[str]:
    """Every envelope (notice, message, result...) that reached ``name``, one by one."""
    return [chunk for text in run.inbox_texts(name) for chunk in text.split("\n\n")]
