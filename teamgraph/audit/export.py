"""Export a thread: Markdown to read, JSON to process, SQLite (via sqlite-utils) for Datasette.

Every format holds the same records, built once by ``export_records``: agents
(with tokens), messages (agent, seq, type, content, tool calls, tokens),
requests, deliveries and the collaboration log. Secrets are masked as in the log.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypedDict

import sqlite_utils
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from teamgraph.audit.events import derive_events, new_cursor
from teamgraph.audit.records import TIME_FORMAT
from teamgraph.audit.thread_log import read_log
from teamgraph.audit.tokens import TokenUsage, team_tokens, with_tokens
from teamgraph.checkpoints.files import private_database, private_file, thread_file_name
from teamgraph.redaction import redact, redact_value

Format = Literal["md", "json", "sqlite"]
FORMATS: tuple[Format, ...] = ("md", "json", "sqlite")
SUFFIXES: dict[Format, str] = {"md": ".md", "json": ".json", "sqlite": ".db"}


class MessageRow(TypedDict):
    """One message of one agent's history."""

    agent: str
    seq: int
    type: str
    content: str
    tool_calls: str
    tool_call_id: str | None
    status: str | None
    input_tokens: int
    output_tokens: int


class ExportRecords(TypedDict):
    """Everything an export holds."""

    thread: str
    task: str
    report: str
    tokens: TokenUsage
    agents: list[dict[str, Any]]
    messages: list[MessageRow]
    requests: list[dict[str, Any]]
    deliveries: list[dict[str, Any]]
    log: list[dict[str, Any]]
    files: list[str]


def message_row(agent: str, seq: int, message: AnyMessage) -> MessageRow:
    """A history message as a flat, redacted row."""
    usage: Mapping[str, Any] = (message.usage_metadata or {}) if isinstance(message, AIMessage) else {}
    calls = [{"name": c["name"], "args": redact_value(c["args"])} for c in getattr(message, "tool_calls", [])]
    return MessageRow(
        agent=agent,
        seq=seq,
        type=message.type,
        content=redact(str(message.text)),  # NOTE: a str, not langchain's TextAccessor (sqlite-utils maps types)
        tool_calls=json.dumps(calls, ensure_ascii=False),
        tool_call_id=getattr(message, "tool_call_id", None),
        status=getattr(message, "status", None) if isinstance(message, ToolMessage) else None,
        input_tokens=int(usage.get("input_tokens", 0)),
        output_tokens=int(usage.get("output_tokens", 0)),
    )


def _flat(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record with nested values as JSON text (one SQLite column each), secrets masked."""
    clean = redact_value(dict(record))
    return {
        k: json.dumps(v, ensure_ascii=False, default=str) if isinstance(v, dict | list) else v for k, v in clean.items()
    }


def export_records(team: Any, config: RunnableConfig) -> ExportRecords:
    """Collect a thread's export records.

    Args:
        team: The ``Team``.
        config: The thread's config.

    Returns:
        The records every format is written from.
    """
    values = team.state(config)
    prices = team.runtime.prices
    user = [m for m in values.get("messages", []) if isinstance(m, HumanMessage)]
    replies = [m for m in values.get("messages", []) if isinstance(m, AIMessage)]
    agents = with_tokens(values, prices)
    histories = values.get("histories", {})
    logged = read_log(team, config, values)
    if not logged:  # NOTE: the log is off (Policy.log=False): derive the same events from the state
        logged, _ = derive_events(
            values, new_cursor(), now=team.runtime.clock.now().strftime(TIME_FORMAT), policy=team.runtime.policy
        )
    files = sorted(
        {
            str(call["args"].get("path"))
            for history in histories.values()
            for m in history
            if isinstance(m, AIMessage)
            for call in m.tool_calls
            if call["name"] in ("write_file", "edit_file", "restore_file")
        }
    )
    return ExportRecords(
        thread=str(config["configurable"]["thread_id"]),
        task=redact("\n\n".join(m.text for m in user)),
        report=redact(str(replies[-1].text) if replies else ""),
        tokens=team_tokens(values, prices),
        agents=[
            {"name": name, **_flat({k: v for k, v in rec.items() if k not in ("inbox", "waits")})}
            for name, rec in agents.items()
        ],
        messages=[message_row(name, seq, m) for name, history in histories.items() for seq, m in enumerate(history)],
        requests=[_flat(r) for r in values.get("requests", {}).values()],
        deliveries=[_flat(d) for d in values.get("deliveries", {}).values()],
        # NOTE: masked again: the events derived from the state (log off) never went through a log line.
        log=[redact_value(dict(e.__dict__)) for e in logged],
        files=[redact(path) for path in files],
    )


def to_markdown(records: ExportRecords) -> str:
    """The thread as a Markdown document: task, report, conversations, requests, files, tokens."""
    tokens = records["tokens"]
    lines = [
        f"# Thread {records['thread']}",
        "",
        "## Task",
        "",
        records["task"] or "-",
        "",
        "## Report of the Team Leader",
        "",
        records["report"] or "-",
        "",
        "## Tokens",
        "",
        "| agent | input | output | total | cost |",
        "|---|---|---|---|---|",
    ]
    for agent in records["agents"]:
        usage = json.loads(agent["tokens"])
        lines.append(f"| {agent['name']} | {usage['input']} | {usage['output']} | {usage['total']} | {usage['cost']} |")
    lines += [f"| **team** | {tokens['input']} | {tokens['output']} | {tokens['total']} | {tokens['cost']} |", ""]
    for agent in records["agents"]:
        lines += [f"## {agent['name']} ({agent['role']}, {agent['status']})", ""]
        for row in (r for r in records["messages"] if r["agent"] == agent["name"]):
            calls = json.loads(row["tool_calls"])
            text = row["content"].strip() or "-"
            lines.append(f"**{row['seq']} · {row['type']}**" + (f" ({row['status']})" if row["status"] else ""))
            lines += ["", "\n".join(f"> {t}" for t in text.splitlines()), ""]
            lines += [f"- calls `{c['name']}` `{json.dumps(c['args'], ensure_ascii=False)}`" for c in calls]
            lines += [""] if calls else []
    lines += ["## Requests", "", "| id | kind | from | to | status | answer |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {r['id']} | {r['kind']} | {r['from']} | {r.get('route') or r['to']} | {r['status']} | "
        f"{' '.join(str(r.get('answer') or '').split())[:120]} |"
        for r in records["requests"]
    ]
    lines += ["", "## Files", "", *(f"- `{path}`" for path in records["files"]), ""]
    return "\n".join(lines)


def _write_md(records: ExportRecords, out: Path) -> None:
    out.write_text(to_markdown(records), encoding="utf-8")


def _write_json(records: ExportRecords, out: Path) -> None:
    out.write_text(json.dumps(records, ensure_ascii=False, indent=2, default=str), encoding="utf-8")


def _column(value: Any) -> Any:
    """A value as one of the plain types sqlite-utils maps to a column type.

    sqlite-utils picks a column's type by ``type(value)`` exactly, so a ``str``
    subclass (LangChain's ``TextAccessor``, a message's ``.text``) or an enum is
    not found in its table: every value goes in as a plain ``str``, ``int``,
    ``float``, ``bytes`` or ``None``; anything else as its JSON text.
    """
    if value is None or type(value) in (str, int, float, bytes):
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int | float):
        return value.real
    return json.dumps(value, ensure_ascii=False, default=str)


def _rows(records: list[Any]) -> list[dict[str, Any]]:
    """Rows with every value a plain column value (see ``_column``)."""
    return [{str(k): _column(v) for k, v in dict(row).items()} for row in records]


def _write_sqlite(records: ExportRecords, out: Path) -> None:
    out.unlink(missing_ok=True)
    private_database(out)
    db = sqlite_utils.Database(out)
    db.table("agents").insert_all(_rows(records["agents"]), pk="name", alter=True)
    db.table("messages").insert_all(_rows(records["messages"]), pk=("agent", "seq"), alter=True)
    db.table("requests").insert_all(_rows(records["requests"]), pk="id", alter=True)
    db.table("deliveries").insert_all(_rows(records["deliveries"]), pk="id", alter=True)
    db.table("log").insert_all(_rows(records["log"]), alter=True)
    for table in ("agents", "messages", "requests", "deliveries", "log"):
        if not db[table].exists():  # NOTE: an empty thread still gets every table (queries keep working)
            db.execute(f"CREATE TABLE [{table}] (id TEXT)")
    db.close()


WRITERS: dict[Format, Callable[[ExportRecords, Path], None]] = {
    "md": _write_md,
    "json": _write_json,
    "sqlite": _write_sqlite,
}


def export_thread(team: Any, config: RunnableConfig, *, format: Format, out: Path | str | None = None) -> Path:
    """Write a thread's export.

    Args:
        team: The ``Team``.
        config: The thread's config.
        format: ``"md"``, ``"json"`` or ``"sqlite"``.
        out: The file to write; default ``<home>/exports/<thread><suffix>``.

    Returns:
        The file written.

    Raises:
        ValueError: For an unknown format, or a thread id that cannot name the default file.
    """
    if format not in WRITERS:
        raise ValueError(f"Unknown export format {format!r}: use one of {', '.join(FORMATS)}.")
    thread = str(config["configurable"]["thread_id"])
    if out is None:
        # NOTE: checked before anything is read or written: the id names the file
        path = Path(team.home) / "exports" / f"{thread_file_name(thread)}{SUFFIXES[format]}"
    else:
        path = Path(out)
    records = export_records(team, config)
    private_file(path)  # NOTE: an export holds every message: owner-only, whatever the umask
    WRITERS[format](records, path)
    return path
