"""One collaboration-log line: the typed event, its text form and back.

The format (docs/protocols.md, "Collaboration log")::

    [YYYY-MM-DD HH:mm:ss] [sender] → [receiver] | call|task|file|tool | content | success|failed|partial | error

and, as written to a day file, the hash chain's field ``| #<n> h=<hash>`` (``chain.py``).

The level (INFO / WARN / ERROR / CRITICAL) travels in the error field, so the
line keeps its seven fields: ``-`` for a plain INFO line, otherwise
``LEVEL CODE: description`` (``ERROR TOOL_ERROR: no such file``,
``WARN RETRY: read_file failed once, retried``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, cast

from teamgraph.redaction import redact

Kind = Literal["call", "task", "file", "tool"]
Result = Literal["success", "failed", "partial"]
Level = Literal["INFO", "WARN", "ERROR", "CRITICAL"]

KINDS: tuple[Kind, ...] = ("call", "task", "file", "tool")
RESULTS: tuple[Result, ...] = ("success", "failed", "partial")
LEVELS: tuple[Level, ...] = ("INFO", "WARN", "ERROR", "CRITICAL")
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
CONTENT_LIMIT = 300

LINE_RE = re.compile(
    r"^\[(?P<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\] \[(?P<sender>[^\]]+)\] → \[(?P<receiver>[^\]]+)\]"
    r" \| (?P<kind>call|task|file|tool) \| (?P<content>.*?) \| (?P<result>success|failed|partial)"
    r" \| (?P<error>-|(?P<level>INFO|WARN|ERROR|CRITICAL) (?P<code>[A-Z_]+): (?P<detail>.*?))"
    r"(?: \| #(?P<number>\d+) h=(?P<hash>[0-9a-f]{16}))?$"
)
"""What every line of a collaboration log matches (the chain's number and hash, ``chain.py``, optional)."""


@dataclass(frozen=True)
class LogEvent:
    """One event of the collaboration log.

    Attributes:
        time: When it happened (``YYYY-MM-DD HH:mm:ss``).
        sender: Who acted (a display name, ``user`` or ``router``).
        receiver: Whom or what it acted on (an agent, ``files``, ``system``, ``board``).
        kind: ``call``, ``task``, ``file`` or ``tool``.
        content: What happened, one line.
        result: ``success``, ``failed`` or ``partial``.
        level: ``INFO``, ``WARN``, ``ERROR`` or ``CRITICAL``.
        code: A short error code (``TOOL_ERROR``...); empty for a plain INFO line.
        error: The error's description; empty for a plain INFO line.
    """

    time: str
    sender: str
    receiver: str
    kind: Kind
    content: str
    result: Result = "success"
    level: Level = "INFO"
    code: str = ""
    error: str = ""


def one_line(text: str, limit: int = CONTENT_LIMIT) -> str:
    """``text`` redacted, on one line, without the field separator, at most ``limit`` characters."""
    # NOTE: only what can reach the line is redacted (plus a margin, so a secret across the cut is still masked).
    line = " ".join(redact(str(text)[: limit + 400]).split()).replace(" | ", " / ").replace("|", "/")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def log_time(iso: str | None, fallback: str) -> str:
    """An ISO time from a record as ``YYYY-MM-DD HH:mm:ss`` (``fallback`` if missing)."""
    try:
        return datetime.fromisoformat(iso or fallback).strftime(TIME_FORMAT)
    except ValueError:
        return datetime.fromisoformat(fallback).strftime(TIME_FORMAT)


def _name(text: str) -> str:
    return one_line(text, 80).replace("[", "(").replace("]", ")") or "-"


def format_line(event: LogEvent) -> str:
    """The event as one log line (without the newline)."""
    if event.level == "INFO" and not event.error:
        error = "-"
    else:
        error = f"{event.level} {event.code or 'NOTE'}: {one_line(event.error or '-')}"
    content = one_line(event.content) or "-"
    return (
        f"[{event.time}] [{_name(event.sender)}] → [{_name(event.receiver)}] | {event.kind} | "
        f"{content} | {event.result} | {error}"
    )


def parse_line(line: str) -> LogEvent:
    """Read one log line back into an event.

    Raises:
        ValueError: If the line is not in the collaboration-log format.
    """
    match = LINE_RE.match(line.rstrip("\n"))
    if match is None:
        raise ValueError(f"Not a collaboration-log line: {line!r}")
    fields = match.groupdict()
    # NOTE: LINE_RE matches only the words of Kind, Result and Level in those groups.
    return LogEvent(
        time=fields["time"],
        sender=fields["sender"],
        receiver=fields["receiver"],
        kind=cast(Kind, fields["kind"]),
        content=fields["content"],
        result=cast(Result, fields["result"]),
        level=cast(Level, fields["level"] or "INFO"),
        code=fields["code"] or "",
        error=fields["detail"] or "",
    )
