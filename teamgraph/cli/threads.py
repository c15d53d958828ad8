"""Saved threads: the SQLite file in the home folder and what the CLI keeps beside it.

- where the SQLite file is (:func:`db_path`), the thread ids in it (:func:`thread_ids`),
  the table `teamgraph threads` prints (:func:`threads_table`);
- ``cli-threads.json``: the model, policy and roles folder each thread was run with,
  so `resume` reuses them (:func:`save_thread_settings`, :func:`load_thread_settings`);
- the command line that resumes a thread (:func:`resume_command`).
"""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from rich.table import Table
from rich.text import Text

from teamgraph.audit.project import PROJECT_NAME_KEY, keeping_project
from teamgraph.checkpoints.lease import lease_holder
from teamgraph.cli.errors import CLIError, settings
from teamgraph.cli.output import Column, display_path, fit_table
from teamgraph.records import BUSY
from teamgraph.redaction import redact
from teamgraph.team import DEFAULT_HOME

SETTINGS_FILE = "cli-threads.json"
"""In the home folder: the model and policy each thread was run with, so `resume` reuses them."""


def thread_config(thread: str, project: str | None = None) -> RunnableConfig:
    """The LangGraph config that names ``thread`` (and its project, when given)."""
    return {"configurable": {"thread_id": thread, **({PROJECT_NAME_KEY: project} if project else {})}}


def project_config(graph: Any, thread: str) -> RunnableConfig:
    """``thread``'s config with the project its runs recorded (None recorded: its id names it)."""
    config = thread_config(thread)
    return keeping_project(config, graph.get_state(config).values or {})


def db_path(home: Path) -> Path:
    """The SQLite file in the home folder."""
    from teamgraph.checkpoints import DB_FILE

    return Path(home) / DB_FILE


def chosen_db() -> str | None:
    """The database ``--db`` names (None: ``$TEAMGRAPH_DB``, else the home's SQLite file)."""
    return settings.get("db") or None


def store_label(home: Path) -> str:
    """Where the threads are, for messages: the SQLite path, or the PostgreSQL URL without password."""
    from teamgraph.checkpoints import describe_db, is_postgres_url

    label = describe_db(chosen_db(), home)
    return label if is_postgres_url(label) else display_path(Path(label))


def list_threads(home: Path) -> list[str]:
    """Thread ids in the team's database, most recently updated first (a missing SQLite file: none)."""
    from teamgraph.checkpoints import (
        close_checkpointer,
        is_postgres_url,
        open_checkpointer,
    )
    from teamgraph.checkpoints.store import resolve_db

    db = resolve_db(chosen_db(), home)
    if not is_postgres_url(db):
        return thread_ids(Path(db))
    saver = open_checkpointer(db, home=home)
    try:
        from teamgraph.checkpoints import thread_ids as saver_thread_ids

        return saver_thread_ids(saver)
    finally:
        close_checkpointer(saver)


RESERVED_IDS_DIR = ".thread-ids"
"""Thread ids handed out by ``new_thread_id`` (one empty file each), so two runs never share one."""


def new_thread_id(home: Path, prefix: str) -> str:
    """A thread id not used yet: ``<prefix>-<n>``, n one more than the largest used or reserved.

    NOTE: the id is reserved with an exclusive file create, so two ``teamgraph run``
    started at the same moment get distinct ids.
    """
    pattern = re.compile(rf"^{re.escape(prefix)}-(\d+)$")
    reserved = Path(home) / RESERVED_IDS_DIR
    reserved.mkdir(parents=True, exist_ok=True)
    names = [*list_threads(home), *(p.name for p in reserved.iterdir())]
    number = max((int(m.group(1)) for t in names if (m := pattern.match(t))), default=0) + 1
    while True:
        thread = f"{prefix}-{number}"
        try:
            (reserved / thread).touch(exist_ok=False)
        except FileExistsError:
            number += 1
            continue
        return thread


def thread_ids(db: Path) -> list[str]:
    """Thread ids in the SQLite file, most recently updated first.

    Raises:
        CLIError: The home is not a folder, or the file cannot be read or is not a database.
    """
    if db.parent.exists() and not db.parent.is_dir():
        raise CLIError(f"{display_path(db.parent)} is not a folder: --home takes the team's home folder.")
    if not db.exists():
        return []
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = conn.execute(
                "SELECT thread_id, MAX(checkpoint_id) AS last FROM checkpoints "
                "WHERE checkpoint_ns = '' GROUP BY thread_id ORDER BY last DESC"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []  # NOTE: a database no team has written yet
        raise CLIError(f"cannot read {display_path(db)}: {exc}. Check the file's permissions.") from exc
    except sqlite3.DatabaseError as exc:
        raise CLIError(
            f"{display_path(db)} is not a teamgraph database ({exc}): move it away, or use another --home."
        ) from exc
    return [str(row[0]) for row in rows]


def require_thread(home: Path, thread: str) -> None:
    """Fail with the known thread ids unless ``thread`` is in the team's database."""
    from teamgraph.checkpoints import is_postgres_url
    from teamgraph.checkpoints.store import resolve_db

    where = store_label(home)
    local = not is_postgres_url(resolve_db(chosen_db(), home))
    if local and Path(home).exists() and not Path(home).is_dir():
        raise CLIError(f"{display_path(Path(home))} is not a folder: --home takes the team's home folder.")
    if local and not db_path_of(home).exists():
        raise CLIError(f"No threads yet: {where} does not exist. Try `teamgraph demo` first.")
    known = list_threads(home)
    if thread not in known:
        listing = ", ".join(known[:20]) + (" …" if len(known) > 20 else "")
        raise CLIError(f"No thread {thread!r} in {where}. Threads: {listing or 'none'}.")


def db_path_of(home: Path) -> Path:
    """The SQLite file the team uses (``--db``/``$TEAMGRAPH_DB`` naming a file, else the home's)."""
    from teamgraph.checkpoints.store import resolve_db

    return Path(resolve_db(chosen_db(), home))


THREAD_COLUMNS = [
    Column("thread", style="bold"),
    Column("last update", optional=True),
    Column("agents", justify="right", optional=True),
    Column("state"),
    Column("task", free=True),
]
_BUSY = BUSY


def thread_state(snapshot: Any, *, live: bool = False) -> Text:
    """Where a thread is: failed, paused for you (or an agent), running, stopped, or done.

    Args:
        snapshot: The thread's state snapshot.
        live: Whether a run holds the thread's lease now.

    An unfinished thread is "running" while a run holds its lease, else "stopped"
    (Ctrl-C, a crash): ``teamgraph resume`` continues it.
    """
    values = snapshot.values or {}
    agents = values.get("agents") or {}
    if any(getattr(task, "error", None) for task in snapshot.tasks or ()) or (
        agents.get("Team Leader", {}).get("status") == "failed"
    ):
        return Text("failed", style="bold red")
    if snapshot.interrupts:
        ids = sorted(
            rid for i in snapshot.interrupts if isinstance(i.value, dict) for rid in (i.value.get("requests") or {})
        )
        return Text(f"paused for you ({', '.join(ids)})" if ids else "paused for you", style="yellow")
    unfinished = Text("running", style="green") if live else Text("stopped", style="yellow")
    if snapshot.next or snapshot.tasks:
        return unfinished
    pending = [r for r in (values.get("requests") or {}).values() if r.get("status") == "pending"]
    if pending:
        whom = sorted({str(r.get("to")) for r in pending})
        return Text(f"paused for {', '.join(whom)}", style="yellow")
    if any(a.get("status") in _BUSY for a in agents.values()):
        return unfinished
    return Text("done", style="green")


def is_unfinished(snapshot: Any) -> bool:
    """Whether ``teamgraph resume`` has something to continue: a pause, or tasks not yet applied."""
    return bool(snapshot.interrupts or snapshot.next or snapshot.tasks)


def threads_table(team: Any, ids: Iterable[str], *, width: int = 160) -> Table:
    """The threads ``ids`` of ``team``: last update, agents, state, task; no wider than ``width``.

    NOTE: read through the graph, not the raw checkpoint: histories, requests and the
    registry are DeltaChannels, whose checkpoint blobs only point at earlier writes.
    """
    graph = team.graph
    rows: list[list[str | Text]] = []
    for thread in ids:
        snapshot = graph.get_state(thread_config(thread))
        if not snapshot.values:
            continue
        messages = snapshot.values.get("messages") or []
        task = next((m.content for m in messages if getattr(m, "type", "") == "human"), "")
        rows.append(
            [
                thread,
                str(snapshot.created_at or "")[:19].replace("T", " "),
                str(len(snapshot.values.get("agents") or {})),
                thread_state(snapshot, live=lease_holder(team.home, thread, saver=graph.checkpointer) is not None),
                redact(str(task)),
            ]
        )
    return fit_table(THREAD_COLUMNS, rows, width=width, title=f"Threads in {store_label(team.home)}")


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


def db_args() -> list[str]:
    """``--db <url>`` for a command line when ``--db`` was given (``$TEAMGRAPH_DB`` needs none).

    NOTE: a hint, printed: a password in the URL shows as ``***`` (the user types theirs back).
    """
    db = chosen_db()
    return ["--db", shlex.quote(redact(str(db)))] if db else []


def resume_command(thread: str, home: Path | str = DEFAULT_HOME) -> str:
    """The command line that continues ``thread``."""
    return " ".join(["teamgraph", *db_args(), "resume", shlex.quote(thread), *home_args(home)])
