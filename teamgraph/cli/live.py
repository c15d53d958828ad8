"""The live view of a running thread.

:class:`TeamView` is what the terminal shows while a team runs (agents, their
latest action, open requests), redrawn in place on a terminal and printed as
event lines otherwise. :class:`Session` drives one thread: it streams it into
the view, hands each pause to :class:`~teamgraph.cli.answers.Answerer` and
resumes, and ends with the summary.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from teamgraph.cli.answers import Answerer
from teamgraph.cli.errors import (
    EXIT_INTERRUPTED,
    EXIT_PAUSED,
    CLIError,
    error_text,
    settings,
)
from teamgraph.cli.output import answer_text, clip, console, recipient, status_text
from teamgraph.cli.summary import print_hints, print_summary
from teamgraph.cli.threads import resume_command, thread_config
from teamgraph.governance.board import render
from teamgraph.team import DEFAULT_HOME


class TeamView:
    """What the terminal shows while a team runs: agents, their latest action, open requests."""

    def __init__(self, thread: str, values: Mapping[str, Any] | None = None) -> None:
        values = values or {}
        self.thread = thread
        self.agents: dict[str, dict[str, Any]] = {n: dict(r) for n, r in (values.get("agents") or {}).items()}
        self.requests: dict[str, dict[str, Any]] = dict(values.get("requests") or {})
        self.scheduled: list[str] = []
        self.tick = (values.get("team") or {}).get("tick", 0)
        self.paused: dict[str, dict[str, Any]] = {}
        self.board: list[dict[str, Any]] = list((values.get("team") or {}).get("board") or [])

    def apply(self, node: str, update: Any) -> list[str]:
        """Take one streamed update; return plain event lines (for logs, not terminals)."""
        events: list[str] = []
        if node == "__interrupt__":
            for interrupt in update or ():
                value = getattr(interrupt, "value", None)
                if isinstance(value, Mapping):
                    self.paused.update(value.get("requests") or {})
            for rid, req in self.paused.items():
                events.append(f"paused for a person: {rid} ({req.get('type', '?')} from {req.get('from', '?')})")
            return events
        if not isinstance(update, Mapping):
            return events
        for name, record in (update.get("agents") or {}).items():
            old = self.agents.get(name)
            if old is None:
                creator = record.get("created_by")
                by = f", created by {creator}" if creator else ""
                events.append(f"+ {name} ({record.get('role')}){by}")
            elif record.get("status") == "failed" and old.get("status") != "failed":
                events.append(f"✗ {name} failed: {clip(record.get('last_action'))}")
            self.agents[name] = dict(record)
        for rid, record in (update.get("requests") or {}).items():
            old = self.requests.get(rid)
            if old is None:
                events.append(
                    f"? {rid} {record.get('from')} → {recipient(record)}: {clip(record.get('body'), 100)}"
                )
            if record.get("status") != "pending" and (old is None or old.get("status") == "pending"):
                events.append(f"✓ {rid} {record.get('status')}: {clip(answer_text(record.get('answer')), 100)}")
            self.requests[rid] = dict(record)
        team = update.get("team")
        if isinstance(team, Mapping):
            self.scheduled = list(team.get("scheduled") or [])
            self.tick = team.get("tick", self.tick)
            events.extend(self.take_board(team.get("board")))
        return events

    def take_board(self, board: Any) -> list[str]:
        """Take the task board from a team update; return a line per task added or moved."""
        if not isinstance(board, list):
            return []
        before = {t.get("id"): t.get("status") for t in self.board}
        self.board = [dict(t) for t in board]
        return [
            f"▣ {t.get('id')} {clip(t.get('title'), 60)}: {before.get(t.get('id')) or 'new'} → {t.get('status')}"
            for t in self.board
            if before.get(t.get("id")) != t.get("status")
        ]

    def __rich__(self) -> RenderableType:
        table = Table(box=box.SIMPLE_HEAD, expand=False, title_justify="left")
        table.add_column("agent", no_wrap=True, style="bold")
        table.add_column("role", no_wrap=True)
        table.add_column("status", no_wrap=True)
        table.add_column("calls", justify="right")
        table.add_column("tools", justify="right")
        table.add_column("latest action", overflow="ellipsis", no_wrap=True, max_width=70)
        for name, rec in self.agents.items():
            mark = "▶ " if name in self.scheduled else "  "
            action = clip(rec.get("last_action"), 70)
            waits = [w for w in (rec.get("waits") or {}).values() if isinstance(w, Mapping)]
            if waits:
                on = ", ".join(f"{w.get('on')} ({w.get('request') or w.get('tool')})" for w in waits)
                action = f"waits for {on} · {action}"
            table.add_row(
                mark + name,
                str(rec.get("role", "")),
                status_text(rec.get("status", "")),
                str(rec.get("steps", 0)),
                str(rec.get("tool_calls", 0)),
                action,
            )
        pending = [(rid, r) for rid, r in self.requests.items() if r.get("status") == "pending"]
        parts: list[RenderableType] = [
            Text.assemble(("teamgraph", "bold"), f" · thread {self.thread} · step {self.tick}"),
            table,
        ]
        if self.board:
            tasks = "".join(f"  {line}\n" for line in render(self.board))  # type: ignore[arg-type]
            parts.append(Text("Task board\n", style="bold").append(tasks))
        if pending:
            lines = Text("Pending requests\n", style="bold yellow")
            for rid, r in pending:
                lines.append(f"  {rid}  {r.get('from')} → {recipient(r)}: {clip(r.get('body'), 80)}\n")
            parts.append(lines)
        return Group(*parts)


class Session:
    """Drive one thread: stream it with a live view, answer its pauses, print the summary."""

    def __init__(
        self,
        team: Any,
        thread: str,
        *,
        home: Path | str = DEFAULT_HOME,
        answers: Mapping[str, str] | None = None,
    ) -> None:
        self.team = team
        self.graph = team.compile()
        self.thread = thread
        self.home = home
        self.config = thread_config(thread)
        self.out = console()
        self.interactive = sys.stdin is not None and sys.stdin.isatty()
        self.resume_hint = resume_command(thread, home)
        self.answerer = Answerer(
            self.out, thread, answers, resume_hint=self.resume_hint, interactive=self.interactive
        )

    def values(self) -> dict[str, Any]:
        """The thread's state values now (empty for a new thread)."""
        return self.graph.get_state(self.config).values or {}

    def run(self, payload: Any) -> None:
        """:meth:`drive` the thread, then print the summary and the commands to try next."""
        self.drive(payload)
        self.summary()
        print_hints(self.out, self.thread, self.home, self.values().get("agents") or {})

    # -- streaming ------------------------------------------------------------

    def drive(self, payload: Any) -> None:
        """Stream ``payload`` (input, ``None`` or a ``Command``); answer pauses until the run ends."""
        from langgraph.types import Command

        try:
            while True:
                if payload is not None or not self.pending():
                    self.stream(payload)
                pending, error = self.pause()
                if not pending:
                    break
                payload = Command(resume=self.answerer.collect(pending, error))
        except KeyboardInterrupt:
            if self.interactive:
                self.out.print()  # end the prompt's line
            raise CLIError(
                f"Interrupted. Thread {self.thread} is saved at its last step; continue with: {self.resume_hint}",
                EXIT_INTERRUPTED,
            ) from None
        except EOFError:  # Ctrl-D at a prompt
            self.out.print()
            message = self.answerer.paused_message(self.pending(), reason="no answer was typed")
            raise CLIError(message, EXIT_PAUSED) from None
        except CLIError:
            raise
        except Exception as exc:
            if settings["debug"]:
                raise
            message, code = error_text(exc)
            raise CLIError(
                f"{message.rstrip('.')}. Thread {self.thread} is saved at its last step; "
                f"once fixed, continue with: {self.resume_hint}",
                code,
            ) from exc
        unused = self.answerer.unused()
        if unused:
            self.out.print(
                Text(f"Note: --answer given for {', '.join(unused)}, but no pending request has that id.", style="yellow")
            )

    def stream(self, payload: Any) -> None:
        """Stream the graph once, into the live view (terminal) or as event lines (otherwise)."""
        view = TeamView(self.thread, self.values())
        chunks = self.graph.stream(payload, self.config, stream_mode="updates")
        if self.out.is_terminal:
            with Live(view, console=self.out, refresh_per_second=8, transient=True):
                for chunk in chunks:
                    for node, update in chunk.items():
                        view.apply(node, update)
        else:
            for chunk in chunks:
                for node, update in chunk.items():
                    for line in view.apply(node, update):
                        self.out.print(line, markup=False, soft_wrap=True)

    def pause(self) -> tuple[dict[str, dict[str, Any]], str | None]:
        """The requests the thread is paused on, by id, and the last refused answer's error."""
        snapshot = self.graph.get_state(self.config)
        requests: dict[str, dict[str, Any]] = {}
        error = None
        for interrupt in getattr(snapshot, "interrupts", ()) or ():
            value = getattr(interrupt, "value", None)
            if isinstance(value, Mapping) and isinstance(value.get("requests"), Mapping):
                requests.update(value["requests"])
                error = value.get("error") or error
            elif value is not None:
                requests[str(getattr(interrupt, "id", "interrupt"))] = {"type": "ask", "question": str(value)}
        return requests, error

    def pending(self) -> dict[str, dict[str, Any]]:
        """The requests the thread is paused on, by id (empty when it is not paused)."""
        return self.pause()[0]

    def summary(self) -> None:
        """Print the end-of-run summary (see :func:`~teamgraph.cli.summary.print_summary`)."""
        print_summary(self.out, self.team, self.graph, self.thread)
