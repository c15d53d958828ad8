"""``teamgraph stats`` and ``teamgraph export``: a thread's figures and its export.

The commands are plain functions with typer annotations; ``commands.py``
registers them (this module does not import it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from teamgraph.audit.export import FORMATS, export_thread
from teamgraph.audit.stats import TeamStats
from teamgraph.audit.tokens import team_tokens
from teamgraph.cli.errors import CLIError
from teamgraph.cli.output import console, display_path
from teamgraph.cli.teams import reader_team
from teamgraph.cli.threads import require_thread, thread_config
from teamgraph.team import DEFAULT_HOME

ThreadArg = Annotated[str, typer.Argument(metavar="THREAD", help="The thread.")]
HomeOpt = Annotated[Path, typer.Option("--home", help="Data folder: SQLite file, project files, custom roles.")]


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _cost(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, title_style="bold")
    for column in columns:
        table.add_column(column)
    return table


def stats_tables(stats: TeamStats) -> list[Table]:
    """The figures as rich tables: agents, calls between agents, failing patterns, requests."""
    agents = _table(
        "Agents", "agent", "model calls", "tool calls", "errors", "success", "tokens in", "tokens out", "cost"
    )
    for name, row in stats["agents"].items():
        tokens = row["tokens"]
        agents.add_row(
            name,
            str(row["model_calls"]),
            str(row["tool_calls"]),
            str(row["errors"]),
            _rate(row["success_rate"]),
            str(tokens["input"]),
            str(tokens["output"]),
            _cost(tokens["cost"]),
        )
    team = stats["team"]
    agents.add_row("team", "", "", "", "", str(team["input"]), str(team["output"]), _cost(team["cost"]), style="bold")
    pairs = _table("Who called whom", "from", "to", "count", "success", "failed")
    for pair in stats["pairs"]:
        pairs.add_row(pair["sender"], pair["receiver"], str(pair["count"]), str(pair["success"]), str(pair["failed"]))
    patterns = _table("Failing patterns", "count", "tool: error")
    for item in stats["failing_patterns"]:
        patterns.add_row(str(item["count"]), item["pattern"])
    requests = _table("Request response times", "id", "kind", "status", "seconds")
    for timing in stats["requests"]:
        requests.add_row(timing["id"], timing["kind"], timing["status"], f"{timing['seconds']:g}")
    return [agents, pairs, patterns, requests]


def stats_command(
    thread: ThreadArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    home: HomeOpt = Path(DEFAULT_HOME),
) -> None:
    """Per agent calls, tokens, errors and success rate; who called whom; failing patterns; response times."""
    require_thread(home, thread)
    stats = reader_team(home).stats(thread_config(thread))
    out = console()
    if as_json:
        typer.echo(json.dumps(stats, ensure_ascii=False, indent=2))
        return
    for table in stats_tables(stats):
        out.print(table)


def export_command(
    thread: ThreadArg,
    format: Annotated[str, typer.Option("--format", "-f", help=f"One of {', '.join(FORMATS)}.")] = "md",
    out_path: Annotated[
        Path | None, typer.Option("--out", "-o", help="File to write (default: <home>/exports/THREAD.<ext>).")
    ] = None,
    home: HomeOpt = Path(DEFAULT_HOME),
) -> None:
    """Export THREAD: Markdown, JSON, or SQLite (tables agents, messages, requests, deliveries, log)."""
    if format not in FORMATS:
        raise CLIError(f"Unknown --format {format!r}: use one of {', '.join(FORMATS)}.")
    require_thread(home, thread)
    team, config = reader_team(home), thread_config(thread)
    path = export_thread(team, config, format=format, out=out_path)
    console().print(Text.assemble(("Exported ", "bold"), display_path(path)), soft_wrap=True)


def token_cells(rec: Any) -> tuple[str, str]:
    """An agent record's input and output tokens as table cells (records from ``team.agents``)."""
    tokens = rec.get("tokens") or {}
    return str(tokens.get("input", 0)), str(tokens.get("output", 0))


def token_total_line(values: Any, prices: Any) -> Text:
    """``Tokens: 1,234 in · 567 out (cost 0.0123)``: the team's totals for a run's summary."""
    total = team_tokens(values, prices)
    cost = "" if total["cost"] is None else f" (cost {_cost(total['cost'])})"
    return Text.assemble(("Tokens: ", "bold"), f"{total['input']:,} in · {total['output']:,} out{cost}")
