"""The end of a run: what the team did, and what to type next.

:func:`print_summary` prints the Team Leader's report on the latest task (or says
there is none: an earlier task's report is never shown as this one's), who did what,
the requests and their answers, the files the agents wrote and where the threads are
saved (SQLite or PostgreSQL); :func:`print_hints` prints the `history` and `threads`
commands for the thread.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from teamgraph.audit.project import keeping_project
from teamgraph.audit.report import run_report
from teamgraph.audit.tokens import with_tokens
from teamgraph.checkpoints.store import POSTGRES_SCHEMES
from teamgraph.cli.links import render_links, sources_in
from teamgraph.cli.output import (
    Cell,
    Column,
    answer_text,
    display_path,
    fit_table,
    one_line,
    recipient,
    status_text,
)
from teamgraph.cli.reports import token_total_line
from teamgraph.cli.threads import db_args, home_args, store_label, thread_config


def _files_written(histories: Mapping[str, list[Any]], project_dir: Path) -> list[tuple[Path, str]]:
    """Files the thread's agents wrote (write, edit, restore) that still exist: (path, who)."""
    found: dict[Path, str] = {}
    for agent, messages in histories.items():
        for message in messages:
            for call in getattr(message, "tool_calls", None) or ():
                if call.get("name") not in ("write_file", "edit_file", "restore_file"):
                    continue
                rel = (call.get("args") or {}).get("path")
                if not isinstance(rel, str):
                    continue
                path = (project_dir / rel).resolve()
                if path.is_file():
                    found.setdefault(path, agent)
    return list(found.items())


AGENT_COLUMNS = [
    Column("agent", style="bold"),
    Column("role", optional=True),
    Column("status"),
    Column("model calls", justify="right"),
    Column("tool calls", justify="right", optional=True),
    Column("last action", free=True),
]
REQUEST_COLUMNS = [
    Column("id", style="bold"),
    Column("kind", optional=True),
    Column("from → to"),
    Column("status"),
    Column("question · answer", free=True),
]


def _question_and_answer(request: Mapping[str, Any]) -> str:
    answer = answer_text(request.get("answer"))
    body = one_line(str(request.get("body") or ""))
    return f"{body} · {answer}" if answer else body


def print_summary(out: Console, team: Any, graph: Any, thread: str) -> bool:
    """The end of a run: the leader's report, who did what, requests, files, where the SQLite file is.

    Returns:
        Whether the latest task has a report (a follow-up task's run may end without one:
        the previous task's report is then not shown as if it were this one's).
    """
    values = graph.get_state(thread_config(thread)).values or {}
    config = keeping_project(thread_config(thread), values)
    agents = with_tokens(values, team.runtime.prices)
    requests = values.get("requests") or {}

    project = team.runtime.project_folder(config)
    final = run_report(values)
    if final:
        final = render_links(final, project=project, sources=sources_in(values.get("histories") or {}))
        out.print(Panel(Text(final), title="Team Leader's report", title_align="left", border_style="green"))
    else:
        out.print(
            Text("No new report: the Team Leader has not reported on the latest task.", style="bold yellow"),
            soft_wrap=True,
        )

    rows: list[list[Cell]] = [
        [
            name,
            str(rec.get("role", "")),
            status_text(rec.get("status", "")),
            str(rec.get("steps", 0)),
            str(rec.get("tool_calls", 0)),
            str(rec.get("last_action") or ""),
        ]
        for name, rec in agents.items()
    ]
    out.print(fit_table(AGENT_COLUMNS, rows, width=out.width, title="Who did what"))
    out.print(token_total_line(values, team.runtime.prices))

    if requests:
        rrows = [
            [
                rid,
                str(r.get("kind", "")),
                f"{r.get('from')} → {recipient(r)}",
                status_text(r.get("status", "")),
                _question_and_answer(r),
            ]
            for rid, r in requests.items()
        ]
        out.print(fit_table(REQUEST_COLUMNS, rrows, width=out.width, title="Requests"))

    files = _files_written(values.get("histories") or {}, project)
    if files:
        out.print(Text("Files written", style="bold"))
        for path, who in files:
            out.print(f"  {display_path(path)}  ({who})", markup=False, soft_wrap=True)
    label = store_label(team.home)
    kind = "PostgreSQL: " if label.startswith(POSTGRES_SCHEMES) else "SQLite: "
    out.print(Text.assemble((kind, "bold"), label, f"  (thread {thread})"), soft_wrap=True)
    return final is not None


def print_hints(out: Console, thread: str, home: Path | str, agents: Iterable[str]) -> None:
    """The commands to look further: one member's history (else the thread's), the thread list."""
    home_flag = "".join(f" {arg}" for arg in home_args(home))
    db = "".join(f" {arg}" for arg in db_args())
    members = [a for a in agents if a != "Team Leader"]
    out.print(Text("Next:", style="bold"))
    agent = f" --agent {shlex.quote(members[0])}" if members else ""
    out.print(f"  teamgraph{db} history {shlex.quote(thread)}{home_flag}{agent}", markup=False, soft_wrap=True)
    out.print(f"  teamgraph{db} threads{home_flag}", markup=False, soft_wrap=True)
