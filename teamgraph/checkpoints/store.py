"""Where a team's checkpoints live: a SQLite file (default) or a PostgreSQL database.

One function opens the checkpointer for a database URL or a home folder
(:func:`open_checkpointer`), so every command that reads or writes threads (the
CLI's ``run``, ``resume``, ``threads``, ``history``, and any later ones) agrees on
where they are:

- ``postgresql://user:password@host:5432/db`` (or ``postgres://``): a
  ``PostgresSaver``, tables created on first use. Needs the ``postgres`` extra:
  ``pip install 'teamgraph[postgres]'``;
- ``sqlite:///path/to/file.sqlite`` or a plain path: a SQLite file;
- nothing: ``$TEAMGRAPH_DB``, else ``<home>/teamgraph.sqlite``.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from langgraph.checkpoint.base import BaseCheckpointSaver

from teamgraph.checkpoints.db_lease import leases_for
from teamgraph.checkpoints.saver import DB_FILE, open_sqlite_saver
from teamgraph.checkpoints.serde import TeamSerializer

__all__ = ["DB_ENV", "close_checkpointer", "describe_db", "is_postgres_url", "open_checkpointer", "thread_ids"]

DB_ENV = "TEAMGRAPH_DB"
POSTGRES_SCHEMES = ("postgresql", "postgres")
_SQLITE_PREFIX = "sqlite:///"
_LATEST_THREADS_SQL = (
    "SELECT thread_id, MAX(checkpoint_id) AS last FROM checkpoints "
    "WHERE checkpoint_ns = '' GROUP BY thread_id ORDER BY last DESC"
)


def is_postgres_url(db: str | None) -> bool:
    """Whether ``db`` names a PostgreSQL database (``postgresql://…`` or ``postgres://…``)."""
    return bool(db) and urlsplit(str(db)).scheme in POSTGRES_SCHEMES


def resolve_db(db: str | Path | None, home: str | Path) -> str:
    """The database a team uses: ``db``, else ``$TEAMGRAPH_DB``, else the SQLite file in ``home``.

    Returns:
        A PostgreSQL URL, or the SQLite file's path.
    """
    chosen = str(db) if db else os.environ.get(DB_ENV, "").strip()
    if not chosen:
        return str(Path(home) / DB_FILE)
    if is_postgres_url(chosen):
        return chosen
    return chosen.removeprefix(_SQLITE_PREFIX)


def describe_db(db: str | Path | None, home: str | Path) -> str:
    """The database for messages: the SQLite path, or the PostgreSQL URL without its password."""
    chosen = resolve_db(db, home)
    if not is_postgres_url(chosen):
        return chosen
    parts = urlsplit(chosen)
    netloc = parts.netloc
    if parts.password:
        netloc = netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def open_checkpointer(db: str | Path | None = None, *, home: str | Path) -> BaseCheckpointSaver:
    """Open (and set up) the checkpointer for a database URL or a home folder.

    Args:
        db: ``postgresql://…``, ``sqlite:///…``, a SQLite path, or ``None`` for
            ``$TEAMGRAPH_DB`` (default: ``<home>/teamgraph.sqlite``).
        home: The team's data folder.

    Returns:
        A ready checkpointer; close it with :func:`close_checkpointer`.

    Raises:
        ImportError: A PostgreSQL URL without the ``postgres`` extra installed.
        ValueError: The PostgreSQL server cannot be reached (the message says which one).
    """
    chosen = resolve_db(db, home)
    if not is_postgres_url(chosen):
        saver = open_sqlite_saver(chosen)
        leases_for(saver)
        return saver
    return _open_postgres(chosen)


def _open_postgres(url: str) -> BaseCheckpointSaver:
    try:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
    except ImportError as e:
        raise ImportError(
            "A PostgreSQL database needs langgraph-checkpoint-postgres and psycopg: pip install 'teamgraph[postgres]'."
        ) from e
    try:
        # NOTE: the settings PostgresSaver.from_conn_string uses: autocommit (each
        # checkpoint is its own transaction), no server-side prepared statements
        # (safe behind pgbouncer), rows as dicts.
        conn = psycopg.Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    except psycopg.OperationalError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"Cannot connect to PostgreSQL at {describe_db(url, '.')}: {first}") from e
    saver = PostgresSaver(conn, serde=TeamSerializer())
    # NOTE: sets the tables up under an advisory lock (two processes on a fresh database) and
    # fences every write of a thread by its lease (``db_lease.py``).
    leases_for(saver)
    return saver


def close_checkpointer(saver: Any) -> None:
    """Close the connection a checkpointer from :func:`open_checkpointer` holds."""
    conn = getattr(saver, "conn", None)
    close = getattr(conn, "close", None)
    if callable(close):
        close()


def thread_ids(saver: Any) -> list[str]:
    """The thread ids a checkpointer holds, most recently updated first."""
    conn = getattr(saver, "conn", None)
    if isinstance(conn, sqlite3.Connection):
        try:
            return [str(row[0]) for row in conn.execute(_LATEST_THREADS_SQL).fetchall()]
        except sqlite3.OperationalError:
            return []
    if conn is not None and type(saver).__name__ == "PostgresSaver":
        with saver.lock, conn.cursor() as cur:
            cur.execute(_LATEST_THREADS_SQL)
            return [str(row["thread_id"]) for row in cur.fetchall()]
    # Any other checkpointer: walk its checkpoints (newest first per thread).
    latest: dict[str, str] = {}
    for item in saver.list(None):
        configurable = item.config["configurable"]
        if configurable.get("checkpoint_ns", ""):
            continue
        thread, checkpoint = str(configurable["thread_id"]), str(configurable["checkpoint_id"])
        latest[thread] = max(latest.get(thread, ""), checkpoint)
    return sorted(latest, key=lambda t: latest[t], reverse=True)
