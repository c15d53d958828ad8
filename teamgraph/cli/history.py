"""`teamgraph history`: each agent's own conversation, printed message by message.

Text is wrapped at the terminal's width between words, indented under its message's
head (a word longer than a line is folded); piped output is as wide as ``COLUMNS``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.rule import Rule
from rich.text import Text

INDENT = 2


def print_history(out: Console, name: str, record: Mapping[str, Any], messages: list[Any]) -> None:
    """One agent's conversation under a rule naming it, its role and status."""
    title = f"{name} · {record.get('role', '?')} · {record.get('status', '?')} · {len(messages)} messages"
    out.print(Rule(Text(title, style="bold"), align="left"))
    for message in messages:
        print_message(out, message)
    out.print()


def print_message(out: Console, message: Any) -> None:
    """One message: its kind and name, its content, and the tool calls it makes."""
    kind = getattr(message, "type", type(message).__name__)
    label = {"human": "user", "ai": "ai", "tool": "tool", "system": "system"}.get(kind, kind)
    name = getattr(message, "name", None)
    style = {"user": "cyan", "ai": "green", "tool": "magenta", "system": "dim"}.get(label, "")
    head = Text(f"[{label}]", style=f"bold {style}")
    if name:
        head.append(f" {name}", style="bold")
    if kind == "tool":
        head.append(f" (call {getattr(message, 'tool_call_id', '?')})", style="dim")
    out.print(head)
    content = message.content
    if not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False, default=str)
    if content.strip():
        _indented(out, Text(content.strip()))
    for call in getattr(message, "tool_calls", None) or ():
        args = json.dumps(call.get("args", {}), ensure_ascii=False, default=str)
        line = Text.assemble(
            ("→ ", "bold"), (call.get("name", "?"), "bold"), f"({args})", (f"  id {call.get('id')}", "dim")
        )
        _indented(out, line)
    for call in getattr(message, "invalid_tool_calls", None) or ():
        text = f"→ invalid tool call {call.get('name')}: {call.get('args')!r} ({call.get('error')})"
        _indented(out, Text(text, style="red"))


def _indented(out: Console, text: Text) -> None:
    """``text`` two columns in, wrapped between words (a word longer than a line folded)."""
    for line in text.wrap(out, max(out.width - INDENT, 20), overflow="fold"):
        line.rstrip()
        out.print(Text(" " * INDENT) + line, soft_wrap=True)
