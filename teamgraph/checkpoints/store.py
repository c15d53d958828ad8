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

import functools
import os
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from langgraph.checkpoint.base import BaseCheckpointSaver

from teamgraph.checkpoints.db_lease import CheckpointStoreError, leases_for
from teamgraph.checkpoints.saver import DB_FILE, open_sqlite_saver
from teamgraph.checkpoints.serde import TeamSerializer
from teamgraph.checkpoints.threaded import lend_async
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
    # NOTE: the settings PostgresSaver.from_conn_string uses: autocommit (each checkpoint
    # is its own transaction), no server-side prepared statements (safe behind pgbouncer),
    # rows as dicts.
    settings: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    try:
        psycopg.Connection.connect(url, **settings).close()
    except psycopg.OperationalError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"Cannot connect to PostgreSQL at {describe_db(url, '.')}: {redact(first)}") from e
    # NOTE: one connection, not a pool: a write is fenced by the thread's lease in the same
    # transaction, on the same connection (``db_lease.py``). A connection the server closed
    # (a restart) is replaced at the next call instead (``reconnecting``).
    saver = PostgresSaver(psycopg.Connection.connect(url, **settings), serde=TeamSerializer())
    # NOTE: sets the tables up under an advisory lock (two processes on a fresh database) and
    # fences every write of a thread by its lease (``db_lease.py``).
    leases_for(saver)
    reconnecting(
        saver,
        lambda: psycopg.Connection.connect(url, **settings),
        errors=(psycopg.OperationalError, psycopg.InterfaceError, CheckpointStoreError),
    )
    lend_async(saver)  # NOTE: `await graph.ainvoke(...)` on it, each call in a worker thread
    return saver


SAVER_CALLS = ("get_tuple", "put", "put_writes", "delete_thread", "get_delta_channel_history")
"""The PostgresSaver methods that reconnect once when the server closed their connection."""
LEASE_CALLS = ("acquire", "renew", "release", "holder")
"""The same for its lease table's (``db_lease.py``)."""


class _Reconnecting:
    """Calls of a saver that get a new connection when they meet a closed one, then run again."""

    def __init__(self, saver: Any, connect: Callable[[], Any], errors: tuple[type[BaseException], ...]) -> None:
        self.saver, self.connect, self.errors = saver, connect, errors

    def _dead(self) -> bool:
        """Whether the saver's connection is gone (closed, broken, or no longer answering)."""
        conn = self.saver.conn
        if conn.closed or getattr(conn, "broken", False):
            return True
        try:
            conn.execute("SELECT 1")
        except self.errors:
            return True
        return False

    def call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except self.errors as failed:
            if not self._dead():
                raise  # NOTE: an error on a live connection (a bad query, a refused write) is the caller's
            try:
                self.saver.conn = self.connect()
            except self.errors:
                raise failed from None  # NOTE: the database is still away: the first error says what failed

            leases = getattr(self.saver, "_teamgraph_leases", None)
            if leases is not None:
                leases.conn = self.saver.conn  # NOTE: the lease table's transactions follow the saver's connection
            return method(*args, **kwargs)


def reconnecting(saver: Any, connect: Callable[[], Any], *, errors: tuple[type[BaseException], ...]) -> None:
    """Give ``saver`` a new connection when a call meets a closed one (a server restart), then call again."""
    again = _Reconnecting(saver, connect, errors)
    for name in SAVER_CALLS:
        if hasattr(saver, name):
            setattr(saver, name, functools.partial(again.call, getattr(saver, name)))
    listed = saver.list
    saver.list = lambda *args, **kwargs: iter(again.call(lambda: list(listed(*args, **kwargs))))
    leases = getattr(saver, "_teamgraph_leases", None)
    for name in LEASE_CALLS if leases is not None else ():
        setattr(leases, name, functools.partial(again.call, getattr(leases, name)))


@contextmanager
def _pg_connection(saver: Any) -> Iterator[Any]:
    """A PostgresSaver's connection, under the saver's lock."""
    with saver.lock:
        yield saver.conn


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
