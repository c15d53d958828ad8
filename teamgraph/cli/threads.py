"""Saved threads: the SQLite file in the home folder and what the CLI keeps beside it.

- where the SQLite file is (:func:`db_path`), the thread ids in it (:func:`thread_ids`),
  the table `teamgraph threads` prints (:func:`threads_table`);
- ``cli-threads.json``: the model, policy and roles folder each thread was run with,
  so `resume` reuses them (:func:`save_thread_settings`, :func:`load_thread_settings`);
- the command line that resumes a thread (:func:`resume_command`).
"""

from __future__ import annotations

import json
import shlex
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from teamgraph.audit.tokens import team_tokens
from teamgraph.cli.errors import CLIError
from teamgraph.cli.output import clip, display_path
from teamgraph.team import DEFAULT_HOME

SETTINGS_FILE = "cli-threads.json"
"""In the home folder: the model and policy each thread was run with, so `resume` reuses them."""


def thread_config(thread: str) -> dict[str, Any]:
    """The LangGraph config that names ``thread``."""
    return {"configurable": {"thread_id": thread}}


def db_path(home: Path) -> Path:
    """The SQLite file in the home folder."""
    from teamgraph.checkpoints import DB_FILE

    return Path(home) / DB_FILE


def thread_ids(db: Path) -> list[str]:
    """Thread ids in the SQLite file, most recently updated first."""
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT thread_id, MAX(checkpoint_id) AS last FROM checkpoints "
            "WHERE checkpoint_ns = '' GROUP BY thread_id ORDER BY last DESC"
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
    return [str(row[0]) for row in rows]


def require_thread(home: Path, thread: str) -> None:
    """Fail with the known thread ids unless ``thread`` is in the home folder's SQLite file."""
    db = db_path(home)
    if not db.exists():
        raise CLIError(f"No threads yet: {display_path(db)} does not exist. Try `teamgraph demo` first.")
    known = thread_ids(db)
    if thread not in known:
        listing = ", ".join(known[:20]) + (" …" if len(known) > 20 else "")
        raise CLIError(f"No thread {thread!r} in {display_path(db)}. Threads: {listing or 'none'}.")


def threads_table(team: Any, ids: Iterable[str]) -> Table:
    """The threads ``ids`` of ``team``: last update, agents, state (paused, interrupted, done), task.

    NOTE: read through the graph, not the raw checkpoint: histories, requests and the
    registry are DeltaChannels, whose checkpoint blobs only point at earlier writes.
    """
    graph = team.graph
    table = Table(title=f"Threads in {display_path(team.db_path)}", title_justify="left", box=box.SIMPLE_HEAD, title_style="bold")
    table.add_column("thread", no_wrap=True, style="bold")
    table.add_column("last update", no_wrap=True)
    table.add_column("agents", justify="right")
    table.add_column("state", no_wrap=True)
    table.add_column("task")
    table.add_column("tokens", justify="right")
    for thread in ids:
        snapshot = graph.get_state(thread_config(thread))
        if not snapshot.values:
            continue
        agents = snapshot.values.get("agents") or {}
        messages = snapshot.values.get("messages") or []
        task = next((m.content for m in messages if getattr(m, "type", "") == "human"), "")
        if snapshot.interrupts:
            state = Text("paused", style="yellow")
        elif snapshot.next:
            state = Text("interrupted", style="magenta")
        else:
            state = Text("done", style="green")
        table.add_row(
            thread,
            str(snapshot.created_at or "")[:19].replace("T", " "),
            str(len(agents)),
            state,
            clip(task, 70),
            str(team_tokens(snapshot.values, team.runtime.prices)["total"]),
        )
    return table


# --------------------------------------------------------------------------- cli-threads.json


def _read_settings(path: Path) -> dict[str, Any]:
    """The settings file's entries by thread; empty when it is missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_thread_settings(home: Path, thread: str) -> dict[str, Any]:
    """What :func:`save_thread_settings` saved for ``thread`` (empty if nothing)."""
    entry = _read_settings(Path(home) / SETTINGS_FILE).get(thread)
    return entry if isinstance(entry, dict) else {}


def save_thread_settings(home: Path, thread: str, *, policy: Any, roles_dir: Path | None, **entry: Any) -> None:
    """Remember how ``thread`` runs: ``entry`` (``model=`` or ``demo=True``), its Policy and roles folder."""
    path = Path(home) / SETTINGS_FILE
    data = _read_settings(path)
    data[thread] = {
        **entry,
        "policy": policy.model_dump(mode="json"),
        "roles_dir": str(Path(roles_dir).resolve()) if roles_dir else None,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)


# --------------------------------------------------------------------------- command lines


def home_args(home: Path | str) -> list[str]:
    """``--home <home>`` for a command line, shell-quoted; nothing for the default home."""
    return [] if Path(home) == Path(DEFAULT_HOME) else ["--home", shlex.quote(str(home))]


def resume_command(thread: str, home: Path | str = DEFAULT_HOME) -> str:
    """The command line that continues ``thread``."""
    return " ".join(["teamgraph", "resume", shlex.quote(thread), *home_args(home)])
