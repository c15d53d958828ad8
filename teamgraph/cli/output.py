"""Shared terminal output: the stdout console and the small text helpers.

The live view, the pause prompts, the summary and the listings all show agents,
statuses, requests and answers the same way; the helpers for that live here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
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


# --------------------------------------------------------------------------- tables that fit

TABLE_GAP = 3
"""Characters between two columns of a :func:`fit_table`: a space of padding each side of the rule's gap."""
MIN_FREE_WIDTH = 20
"""The narrowest a free-text column gets before optional columns are dropped."""


@dataclass(frozen=True)
class Column:
    """A column of :func:`fit_table`.

    Attributes:
        header: The column's title.
        free: Free text (a task, an action): shortened with "…" to fit. Other
            columns (names, ids, statuses, numbers) are never shortened.
        optional: Dropped (last first) when the free text would get narrower
            than ``MIN_FREE_WIDTH``, or the other columns alone do not fit.
        justify: ``"left"`` or ``"right"``.
        style: The column's rich style.
    """

    header: str
    free: bool = False
    optional: bool = False
    justify: Literal["left", "right"] = "left"
    style: str = ""


Cell = str | Text


def _cell_width(cell: Cell) -> int:
    return cell.cell_len if isinstance(cell, Text) else cell_len(cell)


def _shorten(cell: Cell, width: int) -> Cell:
    if isinstance(cell, Text):
        if cell.cell_len <= width:
            return cell
        short = cell.copy()
        short.truncate(width, overflow="ellipsis")
        return short
    text = one_line(cell)
    return text if cell_len(text) <= width else clip(text, max(width, 1))


def fit_table(columns: list[Column], rows: list[list[Cell]], *, width: int, title: str | None = None) -> Table:
    """A table no wider than ``width``: names, ids and statuses whole, free text shortened.

    Args:
        columns: The columns, in order.
        rows: The cells, one list per row, in the columns' order.
        width: The console's width.
        title: The table's title (bold, left).

    Returns:
        The table; optional columns are left out when the free text would not fit.
    """
    keep = list(range(len(columns)))
    while True:
        fixed = {i: max([cell_len(columns[i].header), *(_cell_width(r[i]) for r in rows)]) for i in keep}
        free = [i for i in keep if columns[i].free]
        room = width - TABLE_GAP * (len(keep) - 1) - sum(w for i, w in fixed.items() if i not in free)
        share = room // len(free) if free else room
        optional = [i for i in keep if columns[i].optional]
        fits = room >= 0 and (not free or share >= MIN_FREE_WIDTH)
        if fits or not optional:
            break
        keep.remove(optional[-1])
    widths = {i: (min(fixed[i], max(share, 1)) if i in free else fixed[i]) for i in keep}
    table = Table(
        box=box.SIMPLE_HEAD,
        title=title,
        title_justify="left",
        title_style="bold",
        show_edge=False,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=False,
    )
    for i in keep:
        col = columns[i]
        table.add_column(col.header, width=widths[i], no_wrap=True, justify=col.justify, style=col.style)
    for row in rows:
        table.add_row(*(_shorten(row[i], widths[i]) if i in free else row[i] for i in keep))
    return table
