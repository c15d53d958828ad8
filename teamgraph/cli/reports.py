"""``teamgraph stats``, ``teamgraph export`` and ``teamgraph timeline``: a thread's figures, export and picture.

The commands are plain functions with typer annotations; ``commands.py``
registers them (this module does not import it).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from teamgraph.audit.export import FORMATS, export_thread
from teamgraph.audit.stats import TeamStats
from teamgraph.audit.tokens import team_tokens
from teamgraph.cli.errors import CLIError
from teamgraph.cli.output import Cell, Column, console, display_path, fit_table
from teamgraph.cli.teams import reader_team
from teamgraph.cli.threads import db_args, home_args, project_config, require_thread
from teamgraph.team import DEFAULT_HOME

ThreadArg = Annotated[str, typer.Argument(metavar="THREAD", help="The thread.")]
HomeOpt = Annotated[Path, typer.Option("--home", help="Data folder: SQLite file, project files, custom roles.")]


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _cost(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


AGENT_COLUMNS = [
    Column("agent", style="bold"),
    Column("calls", justify="right"),
    Column("tools", justify="right"),
    Column("errors", justify="right"),
    Column("success", justify="right", optional=True),
    Column("in", justify="right"),
    Column("out", justify="right"),
    Column("cost", justify="right", optional=True),
]
AGENTS_TITLE = "Agents (calls: model calls, tools: tool calls, in / out: tokens)"
PAIR_COLUMNS = [
    Column("from", style="bold"),
    Column("to"),
    Column("count", justify="right"),
    Column("success", justify="right"),
    Column("failed", justify="right"),
]
PATTERN_COLUMNS = [Column("count", justify="right"), Column("tool: error", free=True)]
REQUEST_COLUMNS = [
    Column("id", style="bold"),
    Column("kind"),
    Column("status"),
    Column("seconds", justify="right"),
]


def stats_tables(stats: TeamStats, *, width: int) -> list[Table]:
    """The figures as tables no wider than ``width``: agents, calls between agents, failing patterns, requests.

    NOTE: names and numbers are never cut (``fit_table``); at 80 columns the optional
    columns (cost, then success) are left out, and ``--json`` has every figure.
    """
    agents: list[list[Cell]] = []
    for name, row in stats["agents"].items():
        tokens = row["tokens"]
        agents.append(
            [
                name,
                str(row["model_calls"]),
                str(row["tool_calls"]),
                str(row["errors"]),
                _rate(row["success_rate"]),
                str(tokens["input"]),
                str(tokens["output"]),
                _cost(tokens["cost"]),
            ]
        )
    team = stats["team"]
    agents.append(
        [Text("team", style="bold"), "", "", "", "", str(team["input"]), str(team["output"]), _cost(team["cost"])]
    )
    pairs: list[list[Cell]] = [
        [p["sender"], p["receiver"], str(p["count"]), str(p["success"]), str(p["failed"])] for p in stats["pairs"]
    ]
    patterns: list[list[Cell]] = [[str(item["count"]), item["pattern"]] for item in stats["failing_patterns"]]
    requests: list[list[Cell]] = [[t["id"], t["kind"], t["status"], f"{t['seconds']:g}"] for t in stats["requests"]]
    return [
        fit_table(AGENT_COLUMNS, agents, width=width, title=AGENTS_TITLE),
        fit_table(PAIR_COLUMNS, pairs, width=width, title="Who called whom"),
        fit_table(PATTERN_COLUMNS, patterns, width=width, title="Failing patterns"),
        fit_table(REQUEST_COLUMNS, requests, width=width, title="Request response times"),
    ]


def stats_command(
    thread: ThreadArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    home: HomeOpt = Path(DEFAULT_HOME),
) -> None:
    """Per agent calls, tokens, errors and success rate; who called whom; failing patterns; response times."""
    require_thread(home, thread)
    team = reader_team(home)
    stats = team.stats(project_config(team.graph, thread))
    out = console()
    if as_json:
        typer.echo(json.dumps(stats, ensure_ascii=False, indent=2))
        return
    for i, table in enumerate(stats_tables(stats, width=out.width)):
        if i:
            out.print()
        out.print(table)
    out.print()
    out.print(f"A picture of the run: {timeline_hint(thread, home)}", markup=False, soft_wrap=True)


def timeline_hint(thread: str, home: Path | str) -> str:
    """The command line that draws ``thread``'s timeline."""
    return " ".join(["teamgraph", *db_args(), "timeline", shlex.quote(thread), *home_args(home)])


TIMELINE_FORMATS = ("png", "html")


def timeline_command(
    thread: ThreadArg,
    format: Annotated[str, typer.Option("--format", "-f", help="png (an image) or html (interactive).")] = "png",
    out_path: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="File to write (default: <home>/exports/THREAD-timeline.<format>)."),
    ] = None,
    home: HomeOpt = Path(DEFAULT_HOME),
) -> None:
    """Draw THREAD as one lane per agent over time: model calls, tool calls, waits, messages as arrows.

    Reads the thread's checkpoints only (no model). Needs the ``timeline`` extra:
    pip install 'teamgraph[timeline]'.
    """
    if format not in TIMELINE_FORMATS:
        raise CLIError(f"Unknown --format {format!r}: use one of {', '.join(TIMELINE_FORMATS)}.")
    require_thread(home, thread)
    path = out_path or Path(home) / "exports" / f"{thread}-timeline.{format}"
    if path.suffix.lower() != f".{format}":
        raise CLIError(f"--out {path} does not end in .{format}: name the file so, or choose --format.")
    team = reader_team(home)
    timeline = team.timeline(project_config(team.graph, thread))
    try:
        written = timeline.save(path)
    except ImportError as exc:
        raise CLIError(str(exc)) from None
    lanes = len([lane for lane in timeline.lanes if lane != "person"])
    console().print(
        Text.assemble(
            ("Timeline ", "bold"),
            display_path(written),
            f" ({lanes} agents, {timeline.count('model')} model calls, {len(timeline.arrows)} messages)",
        ),
        soft_wrap=True,
    )


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
    team = reader_team(home)
    config = project_config(team.graph, thread)
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
