"""The live view of a running thread.

:class:`TeamView` is what the terminal shows while a team runs (agents, their
latest action, open requests), redrawn in place on a terminal and printed as
event lines otherwise. :class:`Session` drives one thread: it streams it into
the view, hands each pause to :class:`~teamgraph.cli.answers.Answerer` and
resumes, and ends with the summary.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.text import Text

from teamgraph.audit.thread_log import flush_log
from teamgraph.cli.answers import Answerer
from teamgraph.cli.errors import (
    EXIT_INTERRUPTED,
    EXIT_NO_REPORT,
    EXIT_PAUSED,
    CLIError,
    error_text,
    settings,
)
from teamgraph.cli.output import (
    Column,
    answer_text,
    clip,
    console,
    fit_table,
    one_line,
    recipient,
    status_text,
)
from teamgraph.cli.stopping import GracefulStop, StopRequested
from teamgraph.cli.summary import print_hints, print_summary
from teamgraph.cli.threads import project_config, resume_command
from teamgraph.team import DEFAULT_HOME


def _ai_messages(messages: Any) -> list[Any]:
    return [m for m in messages or () if getattr(m, "type", "") == "ai"]


def _tokens(message: Any) -> int:
    usage = getattr(message, "usage_metadata", None) or {}
    return int(usage.get("total_tokens") or 0)


def _tool_names(message: Any) -> list[str]:
    return [str(call.get("name")) for call in getattr(message, "tool_calls", None) or ()]


AGENT_COLUMNS = [
    Column("agent", style="bold"),
    Column("role", optional=True),
    Column("status"),
    Column("calls", justify="right"),
    Column("tokens", justify="right", optional=True),
    Column("latest action", free=True),
]
BOARD_COLUMNS = [Column("task", style="bold"), Column("status"), Column("assignee"), Column("title", free=True)]


class TeamView:
    """What the terminal shows while a team runs: agents, their latest tools, tokens, board, requests."""

    def __init__(self, thread: str, values: Mapping[str, Any] | None = None) -> None:
        values = values or {}
        self.thread = thread
        self.started = time.monotonic()
        self.agents: dict[str, dict[str, Any]] = {n: dict(r) for n, r in (values.get("agents") or {}).items()}
        self.requests: dict[str, dict[str, Any]] = dict(values.get("requests") or {})
        team = values.get("team") or {}
        self.in_flight: list[str] = list(team.get("in_flight") or {})
        self.tick = team.get("tick", 0)
        self.board: list[dict[str, Any]] = [dict(t) for t in team.get("board") or ()]
        self.paused: dict[str, dict[str, Any]] = {}
        self.stopping = False
        self.tokens: dict[str, int] = {}
        self.tools: dict[str, list[str]] = {}
        for name, messages in (values.get("histories") or {}).items():
            ais = _ai_messages(messages)
            self.tokens[name] = sum(_tokens(m) for m in ais)
            with_tools = [m for m in ais if _tool_names(m)]
            if with_tools:
                self.tools[name] = _tool_names(with_tools[-1])

    @property
    def elapsed(self) -> float:
        """Seconds since the view started."""
        return time.monotonic() - self.started

    def apply(self, node: str, update: Any) -> list[str]:
        """Take one streamed update; return plain event lines (for logs, not terminals)."""
        if node == "__interrupt__":
            return self._interrupted(update)
        if not isinstance(update, Mapping):
            return []
        events: list[str] = []
        if node != "human":
            # NOTE: finished steps come back in the router's update (the scheduler's pool runs them).
            events.extend(self._steps(update.get("histories") or {}))
        events.extend(self._agents(update.get("agents") or {}))
        events.extend(self._requests(update.get("requests") or {}))
        team = update.get("team")
        if isinstance(team, Mapping):
            self.in_flight = list(team.get("in_flight") or {})
            self.tick = team.get("tick", self.tick)
            if "board" in team:
                events.extend(self.take_board(team.get("board")))
        return events

    def take_board(self, board: Any) -> list[str]:
        """Take the task board from a team update; return a line per task added or moved."""
        if not isinstance(board, list):
            return []
        before = {t.get("id"): t.get("status") for t in self.board}
        self.board = [dict(t) for t in board]
        return [
            f"▣ {t.get('id')} {one_line(str(t.get('title') or ''))[:60]}: "
            f"{before.get(t.get('id')) or 'new'} → {t.get('status')}"
            for t in self.board
            if before.get(t.get("id")) != t.get("status")
        ]

    def _interrupted(self, update: Any) -> list[str]:
        for interrupt in update or ():
            value = getattr(interrupt, "value", None)
            if isinstance(value, Mapping):
                self.paused.update(value.get("requests") or {})
        return [
            f"paused for a person: {rid} ({req.get('type', '?')} from {req.get('from', '?')})"
            for rid, req in self.paused.items()
        ]

    def _steps(self, histories: Mapping[str, Any]) -> list[str]:
        """One line per agent step: who, the tools it called (or what it said), tokens."""
        events = []
        for name, messages in histories.items():
            for ai in _ai_messages(messages):
                tools = _tool_names(ai)
                used = _tokens(ai)
                self.tokens[name] = self.tokens.get(name, 0) + used
                if tools:
                    self.tools[name] = tools
                    action = "called " + ", ".join(tools)
                else:
                    text = clip(ai.content if isinstance(ai.content, str) else answer_text(ai.content), 80)
                    action = f"said: {text}" if text else "ended its turn"
                tokens = f" · {used} tokens" if used else ""
                events.append(f"[{self.elapsed:6.1f}s] {name}: {action}{tokens}")
        return events

    def _agents(self, agents: Mapping[str, Any]) -> list[str]:
        events = []
        for name, record in agents.items():
            old = self.agents.get(name)
            if old is None:
                creator = record.get("created_by")
                by = f", created by {creator}" if creator else ""
                events.append(f"+ {name} ({record.get('role')}){by}")
            elif record.get("status") == "failed" and old.get("status") != "failed":
                events.append(f"✗ {name} failed: {clip(record.get('last_action'))}")
            self.agents[name] = dict(record)
        return events

    def _requests(self, requests: Mapping[str, Any]) -> list[str]:
        events = []
        for rid, record in requests.items():
            old = self.requests.get(rid)
            if old is None:
                events.append(f"? {rid} {record.get('from')} → {recipient(record)}: {clip(record.get('body'), 100)}")
            if record.get("status") != "pending" and (old is None or old.get("status") == "pending"):
                events.append(f"✓ {rid} {record.get('status')}: {clip(answer_text(record.get('answer')), 100)}")
            self.requests[rid] = dict(record)
        return events

    def _action(self, name: str, record: Mapping[str, Any]) -> str:
        action = one_line(record.get("last_action") or "")
        tools = self.tools.get(name)
        if tools:
            action = f"{', '.join(tools)} · {action}" if action else ", ".join(tools)
        waits = [w for w in (record.get("waits") or {}).values() if isinstance(w, Mapping)]
        if waits:
            on = ", ".join(f"{w.get('on')} ({w.get('request') or w.get('tool')})" for w in waits)
            action = f"waits for {on} · {action}"
        return action

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        total = sum(self.tokens.values())
        head = Text.assemble(
            ("teamgraph", "bold"),
            f" · thread {self.thread} · step {self.tick} · {self.elapsed:.0f}s",
            f" · {total:,} tokens" if total else "",
        )
        if self.stopping:
            head.append(" · stopping", style="yellow")
        yield head
        rows: list[list[str | Text]] = [
            [
                ("▶ " if name in self.in_flight else "  ") + name,
                str(rec.get("role", "")),
                status_text(rec.get("status", "")),
                str(rec.get("steps", 0)),
                f"{self.tokens.get(name, 0):,}",
                self._action(name, rec),
            ]
            for name, rec in self.agents.items()
        ]
        yield fit_table(AGENT_COLUMNS, rows, width=width)
        if self.board:
            board: list[list[str | Text]] = [
                [
                    str(t.get("id", "")),
                    status_text(str(t.get("status", ""))),
                    str(t.get("assignee") or "-"),
                    str(t.get("title", "")),
                ]
                for t in self.board
            ]
            yield fit_table(BOARD_COLUMNS, board, width=width, title="Task board")
        pending = [(rid, r) for rid, r in self.requests.items() if r.get("status") == "pending"]
        if pending:
            yield Text("Pending requests", style="bold yellow")
            for rid, r in pending:
                prefix = f"  {rid}  {r.get('from')} → {recipient(r)}: "
                yield Text(prefix + clip(r.get("body"), max(width - cell_len(prefix), 10)), no_wrap=True)


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
        self.config = project_config(self.graph, thread)
        self.out = console()
        self.interactive = sys.stdin is not None and sys.stdin.isatty()
        self.resume_hint = resume_command(thread, home)
        self.answerer = Answerer(self.out, thread, answers, resume_hint=self.resume_hint, interactive=self.interactive)

    def values(self) -> dict[str, Any]:
        """The thread's state values now (empty for a new thread)."""
        return self.graph.get_state(self.config).values or {}

    def run(self, payload: Any) -> None:
        """:meth:`drive` the thread, then print the summary and the commands to try next.

        Raises:
            typer.Exit: With ``EXIT_NO_REPORT`` when the run ended without a new report.
        """
        self.drive(payload)
        flush_log(self.team, self.config)  # NOTE: the run's last router pass is logged from committed state here
        reported = self.summary()
        print_hints(self.out, self.thread, self.home, self.values().get("agents") or {})
        if not reported:
            raise typer.Exit(EXIT_NO_REPORT)

    # -- streaming ------------------------------------------------------------

    def _until_done(self, payload: Any) -> None:
        from langgraph.types import Command

        while True:
            if payload is not None or not self.pending():
                self.stream(payload)
            pending, error = self.pause()
            if not pending:
                return
            payload = Command(resume=self.answerer.collect(pending, error))

    def drive(self, payload: Any) -> None:
        """Stream ``payload`` (input, ``None`` or a ``Command``); answer pauses until the run ends."""
        try:
            self._until_done(payload)
        except (KeyboardInterrupt, StopRequested):
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
                Text(
                    f"Note: --answer given for {', '.join(unused)}, but no pending request has that id.",
                    style="yellow",
                )
            )

    def stream(self, payload: Any) -> None:
        """Stream the graph once, into the live view (terminal) or one line per event (otherwise).

        Ctrl-C stops it cleanly once the model calls in flight have finished (see ``GracefulStop``).
        """
        view = TeamView(self.thread, self.values())
        chunks = self.graph.stream(payload, self.config, stream_mode=["updates", "tasks"])
        steps = self.team.runtime.calls
        steps.draining.discard(self.thread)
        # NOTE: the first Ctrl-C lets the steps in flight finish and starts no new one.
        with GracefulStop(
            self.out, drain=lambda: steps.draining.add(self.thread), calls=lambda: len(view.in_flight)
        ) as stop:
            if self.out.is_terminal:
                with Live(view, console=self.out, refresh_per_second=8, transient=True):
                    self._consume(chunks, view, stop, echo=False)
            else:
                self._consume(chunks, view, stop, echo=True)

    def _consume(self, chunks: Any, view: TeamView, stop: GracefulStop, *, echo: bool) -> None:
        try:
            for mode, chunk in chunks:
                if mode == "tasks":
                    stop.track(chunk)
                else:
                    for node, update in chunk.items():
                        for line in view.apply(node, update):
                            if echo:
                                self.out.print(line, markup=False, soft_wrap=True)
                view.stopping = stop.requested
                stop.check()
        finally:
            # NOTE: closing the stream here (no task in flight) leaves LangGraph's
            # thread pool idle: every finished task's writes are saved.
            chunks.close()

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

    def summary(self) -> bool:
        """Print the end-of-run summary (see :func:`~teamgraph.cli.summary.print_summary`); whether it has a report."""
        return print_summary(self.out, self.team, self.graph, self.thread)
