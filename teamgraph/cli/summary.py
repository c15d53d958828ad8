"""The end of a run: what the team did, and what to type next.

:func:`print_summary` prints the Team Leader's report, who did what, the
requests and their answers, the files the agents wrote and where the SQLite file
is; :func:`print_hints` prints the `history` and `threads` commands for the thread.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from teamgraph.cli.output import answer_text, clip, display_path, recipient, status_text
from teamgraph.cli.threads import home_args, thread_config


def _files_written(histories: Mapping[str, list[Any]], project_dir: Path) -> list[tuple[Path, str]]:
    """Files the thread's agents wrote with write_file that still exist: (path, who)."""
    found: dict[Path, str] = {}
    for agent, messages in histories.items():
        for message in messages:
            for call in getattr(message, "tool_calls", None) or ():
                if call.get("name") != "write_file":
                    continue
                rel = (call.get("args") or {}).get("path")
                if not isinstance(rel, str):
                    continue
                path = (project_dir / rel).resolve()
                if path.is_file():
                    found.setdefault(path, agent)
    return list(found.items())


def _final_answer(messages: list[Any]) -> str:
    """The text of the last AI message with any text (the Team Leader's report)."""
    for message in reversed(messages or []):
        if getattr(message, "type", "") == "ai":
            content = message.content
            if isinstance(content, list):  # content blocks: keep the text ones
                content = "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in content)
            text = str(content or "")
            if text.strip():
                return text.strip()
    return ""


def print_summary(out: Console, team: Any, graph: Any, thread: str) -> None:
    """The end of a run: the leader's report, who did what, requests, files, where the SQLite file is."""
    values = graph.get_state(thread_config(thread)).values or {}
    agents = values.get("agents") or {}
    requests = values.get("requests") or {}

    final = _final_answer(values.get("messages") or [])
    if final:
        out.print(Panel(Text(final), title="Team Leader's report", title_align="left", border_style="green"))
    else:
        out.print(Text("The Team Leader has not reported yet.", style="yellow"))

    table = Table(title="Who did what", title_justify="left", box=box.SIMPLE_HEAD, title_style="bold")
    table.add_column("agent", no_wrap=True, style="bold")
    table.add_column("role", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("model calls", justify="right")
    table.add_column("tool calls", justify="right")
    table.add_column("last action")
    for name, rec in agents.items():
        table.add_row(
            name,
            str(rec.get("role", "")),
            status_text(rec.get("status", "")),
            str(rec.get("steps", 0)),
            str(rec.get("tool_calls", 0)),
            clip(rec.get("last_action"), 100),
        )
    out.print(table)

    if requests:
        rtable = Table(title="Requests", title_justify="left", box=box.SIMPLE_HEAD, title_style="bold")
        rtable.add_column("id", no_wrap=True, style="bold")
        rtable.add_column("kind", no_wrap=True)
        rtable.add_column("from → to")
        rtable.add_column("status", no_wrap=True)
        rtable.add_column("question")
        rtable.add_column("answer")
        for rid, r in requests.items():
            rtable.add_row(
                rid,
                str(r.get("kind", "")),
                f"{r.get('from')} → {recipient(r)}",
                status_text(r.get("status", "")),
                clip(r.get("body"), 70),
                clip(answer_text(r.get("answer")), 70),
            )
        out.print(rtable)

    files = _files_written(values.get("histories") or {}, team.runtime.project_folder(thread_config(thread)))
    if files:
        out.print(Text("Files written", style="bold"))
        for path, who in files:
            out.print(f"  {display_path(path)}  ({who})", markup=False, soft_wrap=True)
    out.print(Text.assemble(("SQLite: ", "bold"), display_path(team.db_path), f"  (thread {thread})"), soft_wrap=True)


def print_hints(out: Console, thread: str, home: Path, agents: Iterable[str]) -> None:
    """The commands to look further: one member's history (else the thread's), the thread list."""
    home_flag = "".join(f" {arg}" for arg in home_args(home))
    members = [a for a in agents if a != "Team Leader"]
    out.print(Text("Next:", style="bold"))
    out.print(f"  teamgraph history {shlex.quote(thread)}{home_flag}" + (f" --agent {shlex.quote(members[0])}" if members else ""), markup=False, soft_wrap=True)
    out.print(f"  teamgraph threads{home_flag}", markup=False, soft_wrap=True)
