"""The Team Leader's report for the user's latest task, read from a thread's state.

The ``messages`` channel is the user-facing conversation: the user's tasks and the
leader's replies. The report of the latest run is the leader's last reply after the
user's last message; a run that ended without one (stopped, out of budget, a follow-up
the leader never answered) has none, which is not the previous task's report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["message_text", "run_report"]


def message_text(message: Any) -> str:
    """A message's text, stripped (text content blocks joined; others left out)."""
    content = getattr(message, "content", "")
    if isinstance(content, list):
        content = "".join(
            b if isinstance(b, str) else str(b.get("text", "")) for b in content if isinstance(b, (str, dict))
        )
    return str(content or "").strip()


def run_report(values: Mapping[str, Any]) -> str | None:
    """The leader's report for the latest user message in ``values`` (a thread's state), or None.

    Returns:
        The text of the last AI message with text after the last human message; None
        when the latest task has no report (yet).
    """
    messages: Sequence[Any] = values.get("messages") or ()
    for message in reversed(messages):
        kind = getattr(message, "type", "")
        if kind == "human":
            return None
        if kind == "ai" and (text := message_text(message)):
            return text
    return None
