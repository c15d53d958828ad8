"""Shared terminal output: the stdout console and the small text helpers.

The live view, the pause prompts, the summary and the listings all show agents,
statuses, requests and answers the same way; the helpers for that live here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

STATUS_STYLE = {
    "running": "bold green",
    "waiting": "yellow",
    "idle": "dim",
    "stopped": "magenta",
    "shutdown": "magenta",
    "terminated": "magenta",
    "failed": "bold red",
    "pending": "yellow",
    "answered": "green",
    "approved": "green",
    "rejected": "red",
    "cancelled": "magenta",
    "expired": "magenta",
}
"""The colour of an agent's or a request's status."""


def console() -> Console:
    """stdout; wide when it is not a terminal, so logs and tests do not wrap names."""
    out = Console(highlight=False)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out = Console(highlight=False, width=160)
    return out


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines too) made one space."""
    return " ".join(str(text).split())


def clip(text: Any, limit: int = 90) -> str:
    """``text`` on one line, cut to ``limit`` characters (with "…")."""
    text = one_line("" if text is None else str(text))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def status_text(status: str) -> Text:
    """A status in its colour."""
    return Text(str(status), style=STATUS_STYLE.get(str(status), ""))


def display_path(path: Path) -> str:
    """``path`` relative to the current folder when it is below it, else absolute."""
    path = Path(os.path.abspath(path))
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def recipient(request: Mapping[str, Any]) -> str:
    """Who answers a request: "you" when it is routed to a person."""
    return "you" if request.get("route") == "human" else str(request.get("to"))


def answer_text(answer: Any) -> str:
    """A request's answer (or any value) as text: "approved: <feedback>", the answer, or JSON."""
    if isinstance(answer, Mapping) and "approve" in answer:
        verdict = "approved" if answer.get("approve") else "rejected"
        note = answer.get("feedback") or answer.get("reason") or ""
        return f"{verdict}: {note}" if note else verdict
    if isinstance(answer, Mapping) and set(answer) == {"answer"}:
        return answer_text(answer["answer"])
    if answer is None:
        return ""
    return answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False, default=str)
