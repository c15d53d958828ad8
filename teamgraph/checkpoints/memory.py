"""The team's store: a LangGraph ``BaseStore`` in the checkpointer's database where there is one.

``remember``/``recall`` (``teamgraph/tools/memory.py``) keep notes here, under one
namespace per team home (``memory_namespace``), so every thread of a home shares
them; the step journal (``teamgraph/nodes/journal.py``) keeps each run's model answers
and tool results here. The store follows the checkpointer: a ``SqliteStore`` on the
same SQLite file (its own connection), a ``PostgresStore`` on the same PostgreSQL
connection and lock (``pg_store.py``), an ``InMemoryStore`` otherwise (no checkpointer,
or one of another kind).
"""

from __future__ import annotations

import functools
import hashlib
import sqlite3
import time
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from teamgraph.checkpoints.saver import BUSY_TIMEOUT_MS, WAL_RETRY_SECONDS, connect, wal_busy


@functools.lru_cache(maxsize=64)  # NOTE: resolving the path costs a few system calls, on every step's journal
def memory_namespace(home: Path) -> tuple[str, ...]:
    """The namespace of a team home's notes (one per home, whatever the database)."""
    return ("teamgraph", "memory", hashlib.sha1(str(Path(home).resolve()).encode()).hexdigest()[:16])


def _sqlite_file(conn: sqlite3.Connection) -> str | None:
    row = conn.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row and row[2] else None


def open_store(checkpointer: Any) -> BaseStore:
    """The store that goes with ``checkpointer`` (its tables created on first use)."""
    conn = getattr(checkpointer, "conn", None)
    if isinstance(conn, sqlite3.Connection) and (path := _sqlite_file(conn)):
        return _sqlite_store(path)
    if type(checkpointer).__module__.startswith("langgraph.checkpoint.postgres") and conn is not None:
        from teamgraph.checkpoints.pg_store import SaverStore

        postgres_store = SaverStore(checkpointer)
        postgres_store.setup()
        return postgres_store
    return InMemoryStore()


def open_journal_store(checkpointer: Any) -> BaseStore | None:
    """The step journal's own store beside a SQLite checkpointer's file (None: the journal uses the team's store).

    NOTE: SQLite locks the whole file per write: the journal's writes behind each step
    would make the next checkpoint wait (about 1 ms a model call), so on SQLite it has a
    file of its own, ``<checkpoints file>-journal.sqlite``. PostgreSQL locks rows.
    """
    conn = getattr(checkpointer, "conn", None)
    if isinstance(conn, sqlite3.Connection) and (path := _sqlite_file(conn)):
        return _sqlite_store(str(Path(path).with_name(f"{Path(path).stem}-journal.sqlite")))
    return None


def _sqlite_store(path: str) -> BaseStore:
    from langgraph.store.sqlite import SqliteStore

    store_conn = connect(path)
    store_conn.isolation_level = None  # NOTE: autocommit, as SqliteStore expects: no write lock held
    sqlite_store = SqliteStore(store_conn)
    _set_up(sqlite_store)
    return sqlite_store


def _set_up(store: Any) -> None:
    """``store.setup()``, after another connection's setup of the same fresh file is done.

    NOTE: two teams opening a new home at once both apply the store's migrations; the
    second fails on what the first made (a duplicate column, a table that exists, a
    migration recorded). Its next try reads the migrations the first recorded, and
    applies none of them again.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            store.setup()
            return
        except (sqlite3.OperationalError, sqlite3.IntegrityError) as exc:
            text = str(exc)
            raced = any(sign in text for sign in ("duplicate column", "already exists", "store_migrations"))
            raced = raced or (isinstance(exc, sqlite3.OperationalError) and wal_busy(exc))
            if not raced or time.monotonic() > deadline:
                raise
        time.sleep(WAL_RETRY_SECONDS)
