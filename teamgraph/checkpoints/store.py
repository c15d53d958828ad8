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

Any other ``scheme://`` (``mysql://``, ``postgresql+psycopg://``...) is refused with
the list above (:func:`check_db`): it would otherwise name a local SQLite file.

A PostgreSQL database is reached through a small connection pool that checks a
connection before handing it out, so a ``Team`` outlives a server restart: the
next call gets a fresh connection instead of the closed one.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from langgraph.checkpoint.base import BaseCheckpointSaver

from teamgraph.checkpoints.saver import DB_FILE, open_sqlite_saver
from teamgraph.checkpoints.serde import TeamSerializer
from teamgraph.redaction import redact

__all__ = [
    "DB_ENV",
    "check_db",
    "close_checkpointer",
    "describe_db",
    "is_postgres_url",
    "open_checkpointer",
    "thread_ids",
]

DB_ENV = "TEAMGRAPH_DB"
POSTGRES_SCHEMES = ("postgresql", "postgres")
_SQLITE_PREFIX = "sqlite:///"
SUPPORTED_DATABASES = (
    "postgresql://user:password@host:5432/db (or postgres://...), sqlite:///path/to/file.sqlite, or a SQLite file path"
)
_URL_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+):/")
"""A URL's scheme: two characters at least, so that a drive letter (``C:/teams.sqlite``) stays a path."""
POOL_SIZE = 4
"""Connections a Team keeps to PostgreSQL (the saver serializes its calls; the rest is headroom)."""
_LATEST_THREADS_SQL = (
    "SELECT thread_id, MAX(checkpoint_id) AS last FROM checkpoints "
    "WHERE checkpoint_ns = '' GROUP BY thread_id ORDER BY last DESC"
)


def is_postgres_url(db: str | None) -> bool:
    """Whether ``db`` names a PostgreSQL database (``postgresql://…`` or ``postgres://…``)."""
    return bool(db) and urlsplit(str(db)).scheme in POSTGRES_SCHEMES


def check_db(db: str | Path, *, source: str) -> str:
    """``db`` if it names a database teamgraph can use; a clear error otherwise.

    Args:
        db: A database URL or a SQLite file path.
        source: Where it came from, for the error (``--db``, ``$TEAMGRAPH_DB``, ``Team(checkpointer=...)``).

    Returns:
        ``db`` as a string.

    Raises:
        ValueError: ``db`` is a URL of another scheme (``mysql://``, ``postgresql+psycopg://``,
            ``sqlite://`` with two slashes...), or empty.
    """
    text = str(db).strip()
    match = _URL_SCHEME.match(text)
    scheme = match["scheme"].lower() if match else ""
    refused = (match and scheme not in (*POSTGRES_SCHEMES, "sqlite")) or (
        scheme == "sqlite" and not text.startswith(_SQLITE_PREFIX)
    )
    if refused or not text:
        what = f"unknown database URL scheme {scheme!r}" if text else "an empty database name"
        raise ValueError(f"{source} {redact(text)!r}: {what}. Supported: {SUPPORTED_DATABASES}.")
    return text


def resolve_db(db: str | Path | None, home: str | Path) -> str:
    """The database a team uses: ``db``, else ``$TEAMGRAPH_DB``, else the SQLite file in ``home``.

    Returns:
        A PostgreSQL URL, or the SQLite file's path.

    Raises:
        ValueError: ``db`` or ``$TEAMGRAPH_DB`` names an unsupported database (``check_db``).
    """
    from_env = os.environ.get(DB_ENV, "").strip()
    if not db and not from_env:
        return str(Path(home) / DB_FILE)
    chosen = check_db(db, source="database") if db else check_db(from_env, source=f"${DB_ENV}")
    if is_postgres_url(chosen):
        return chosen
    return chosen.removeprefix(_SQLITE_PREFIX)


def describe_db(db: str | Path | None, home: str | Path) -> str:
    """The database for messages: the SQLite path, or the PostgreSQL URL without its password."""
    return redact(resolve_db(db, home))


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
        return open_sqlite_saver(chosen)
    return _open_postgres(chosen)


def _open_postgres(url: str) -> BaseCheckpointSaver:
    try:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool
    except ImportError as e:
        raise ImportError(
            "A PostgreSQL database needs langgraph-checkpoint-postgres and psycopg: pip install 'teamgraph[postgres]'."
        ) from e
    # NOTE: the settings PostgresSaver.from_conn_string uses: autocommit (each checkpoint
    # is its own transaction), no server-side prepared statements (safe behind pgbouncer),
    # rows as dicts.
    settings: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    try:
        # NOTE: one direct connection first: the pool only says "timed out", this says why.
        psycopg.Connection.connect(url, **settings).close()
    except psycopg.OperationalError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"Cannot connect to PostgreSQL at {describe_db(url, '.')}: {redact(first)}") from e
    # NOTE: check_connection before each hand-out: after a server restart the pooled
    # connections are closed, and the pool replaces them instead of failing the call.
    pool: ConnectionPool = ConnectionPool(
        url,
        min_size=1,
        max_size=POOL_SIZE,
        kwargs=settings,
        check=ConnectionPool.check_connection,
        num_workers=1,  # NOTE: its maintenance threads (they end when the pool is closed or collected)
        open=False,
    )
    pool.open(wait=True)
    saver = PostgresSaver(pool, serde=TeamSerializer())  # type: ignore[arg-type]
    saver.setup()
    return saver


@contextmanager
def _pg_connection(saver: Any) -> Iterator[Any]:
    """A connection of a PostgresSaver's (its pool's, or its own), under the saver's lock."""
    conn = saver.conn
    with saver.lock:
        if hasattr(conn, "connection"):  # a pool
            with conn.connection() as pooled:
                yield pooled
        else:
            yield conn


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
        with _pg_connection(saver) as pg, pg.cursor() as cur:
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
