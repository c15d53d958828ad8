"""The default checkpointer: one SQLite file in the team's home folder."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver

DB_FILE = "teamgraph.sqlite"
BUSY_TIMEOUT_MS = 10_000


def connect(path: str | Path) -> sqlite3.Connection:
    """Open the SQLite file in WAL mode with a busy timeout (several processes may open it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def open_sqlite_saver(path: str | Path) -> SqliteSaver:
    """A SqliteSaver on ``path`` (created if missing), ready to use."""
    saver = SqliteSaver(connect(path))
    saver.setup()
    return saver
