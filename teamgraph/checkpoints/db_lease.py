"""The lease of a thread in the checkpointer's own database, and writes fenced by it.

A row per running thread in ``teamgraph_leases`` (in the SQLite file, or the PostgreSQL
database) names its holder and when the lease expires; the holder renews it (a
heartbeat, and every write). Another process or machine may take a lease over only once
it has expired, or at once if its holder is a process of this machine that is gone.

Every checkpoint and every pending write of a thread is fenced: in the same database
transaction as the write, the writer's lease is renewed, and the write is refused with
``LeaseLostError`` if the writer no longer holds it (it was paused or cut off past its
expiry, and another run may have gone on). A write outside any run of this process
(``update_state``) is refused while another holder's lease is live. So a zombie fails on
its next write instead of forking the thread.

The PostgreSQL clock decides expiry there (replicas' clocks may differ); SQLite is one
machine's file, so its clock is this machine's.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from teamgraph.checkpoints.lease import Holder, LeaseLostError, ThreadBusyError, busy_message, held_by_me

__all__ = ["LEASE_ENV", "CheckpointStoreError", "DbLeases", "leases_for"]

LEASE_ENV = "TEAMGRAPH_LEASE_SECONDS"
DEFAULT_LEASE_SECONDS = 30.0
TABLE = "teamgraph_leases"
_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (thread_id TEXT PRIMARY KEY, token TEXT NOT NULL, host TEXT NOT NULL, "
    "pid INTEGER NOT NULL, run_id TEXT, since TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL)"
)
_COLUMNS = "token, host, pid, since, run_id, expires_at, expires_at > {now} AS live"
_SELECT = f"SELECT {_COLUMNS} FROM {TABLE} WHERE thread_id = %s"
_INSERT = (
    f"INSERT INTO {TABLE} (thread_id, token, host, pid, run_id, since, expires_at) "
    "VALUES (%s, %s, %s, %s, %s, %s, {now} + %s) ON CONFLICT (thread_id) DO NOTHING"
)
_TAKE_OVER = (
    f"UPDATE {TABLE} SET token = %s, host = %s, pid = %s, run_id = %s, since = %s, expires_at = {{now}} + %s "
    "WHERE thread_id = %s AND token = %s"
)
_RENEW = f"UPDATE {TABLE} SET expires_at = {{now}} + %s WHERE thread_id = %s AND token = %s AND expires_at > {{now}}"
_RELEASE = f"DELETE FROM {TABLE} WHERE thread_id = %s AND token = %s"
_SETUP_LOCK_KEY = 0x7EA36A9  # NOTE: any constant: the advisory lock every teamgraph process takes to set up


class CheckpointStoreError(RuntimeError):
    """The checkpoint database could not be written (it went away, or stayed locked)."""


def lease_seconds() -> float:
    """How long a lease lives without renewal: ``$TEAMGRAPH_LEASE_SECONDS``, default 30."""
    raw = os.environ.get(LEASE_ENV, "").strip()
    if not raw:
        return DEFAULT_LEASE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if value <= 0:
        raise ValueError(f"{LEASE_ENV}={raw!r} is not a positive number of seconds. Set e.g. {LEASE_ENV}=30.")
    return value


class DbLeases:
    """The leases in one checkpoint database (see the module doc).

    Attributes:
        key: Names the database (leases of two databases never meet).
        ttl: Seconds a lease lives without renewal.
    """

    now_sql = ""
    db_errors: tuple[type[BaseException], ...] = ()

    def __init__(self, saver: Any, *, key: str, ttl: float) -> None:
        self.saver = saver
        self.conn = saver.conn
        self.key = key
        self.ttl = ttl

    # --- dialect ------------------------------------------------------------
    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """One transaction on the saver's connection, under the saver's (reentrant) lock."""
        raise NotImplementedError

    def _sql(self, template: str) -> str:
        return template.replace("{now}", self.now_sql)

    def _execute(self, template: str, params: tuple[Any, ...]) -> Any:
        cur = self.conn.cursor()
        cur.execute(self._sql(template), params)
        return cur

    def _row(self, thread_id: str) -> tuple[Holder, bool] | None:
        row = self._execute(_SELECT, (thread_id,)).fetchone()
        if row is None:
            return None
        values = list(row.values()) if isinstance(row, dict) else list(row)
        token, host, pid, since, run_id, _expires, live = values
        return Holder(token=token, host=host, pid=int(pid), since=since, run_id=run_id), bool(live)

    def holder(self, thread_id: str) -> Holder | None:
        """Who runs ``thread_id`` now: the live holder of its lease, or None."""
        with self.transaction():
            current = self._row(thread_id)
        if current is None or not current[1] or current[0].is_gone():
            return None
        return current[0]

    # --- the lease ------------------------------------------------------------
    def acquire(self, thread_id: str, holder: Holder) -> None:
        """Take ``thread_id``'s lease for ``holder``.

        Raises:
            ThreadBusyError: A live holder has it (named in the message).
        """
        with self._failing_clearly(thread_id, "take the lease of"), self.transaction():
            current = self._row(thread_id)
            if current is not None and current[1] and not (current[0].is_gone() or holder.retries(current[0])):
                raise ThreadBusyError(busy_message(thread_id, current[0]))
            fields = (holder.token, holder.host, holder.pid, holder.run_id, holder.since)
            if current is None:
                taken = self._execute(_INSERT, (thread_id, *fields, self.ttl)).rowcount
            else:  # NOTE: compare-and-swap on the old token: two takers of an expired lease, one wins
                taken = self._execute(_TAKE_OVER, (*fields, self.ttl, thread_id, current[0].token)).rowcount
            if taken != 1:
                winner = self._row(thread_id)
                raise ThreadBusyError(busy_message(thread_id, winner[0] if winner else holder))

    def renew(self, thread_id: str, holder: Holder) -> bool:
        """Push the expiry on; False if ``holder`` no longer holds a live lease."""
        return bool(self._execute(_RENEW, (self.ttl, thread_id, holder.token)).rowcount == 1)

    def release(self, thread_id: str, holder: Holder) -> None:
        """Give the lease up if ``holder`` still has it (a database gone meanwhile is left to expiry)."""
        with contextlib.suppress(*self.db_errors), self.transaction():
            self._execute(_RELEASE, (thread_id, holder.token))

    @contextlib.contextmanager
    def renewer(self, thread_id: str, holder: Holder) -> Iterator[None]:
        """Renew the lease every third of its life while the run goes on."""
        stop = threading.Event()
        beat = threading.Thread(target=self._beat, args=(thread_id, holder, stop), daemon=True, name="lease-beat")
        beat.start()
        try:
            yield
        finally:
            stop.set()
            beat.join(timeout=self.ttl)

    def _beat(self, thread_id: str, holder: Holder, stop: threading.Event) -> None:
        while not stop.wait(self.ttl / 3):
            try:
                with self.transaction():
                    if not self.renew(thread_id, holder):
                        return  # NOTE: lost: the run's next write is refused (check_write)
            except self.db_errors:
                return  # NOTE: the database went away: the run's next write fails with the reason

    # --- fenced writes ---------------------------------------------------------
    def check_write(self, thread_id: str) -> None:
        """Inside a write's transaction: refuse it unless this process may write ``thread_id``.

        Raises:
            LeaseLostError: This process's run of the thread no longer holds its lease.
            ThreadBusyError: No run of this process holds it, and another holder's lease is live.
        """
        mine = held_by_me(self.key, thread_id)
        if mine is not None:
            if not self.renew(thread_id, mine):
                raise LeaseLostError(self._lost_message(thread_id, mine))
            return
        current = self._row(thread_id)
        if current is not None and current[1] and not current[0].is_gone():
            raise ThreadBusyError(busy_message(thread_id, current[0]))

    def _lost_message(self, thread_id: str, mine: Holder) -> str:
        current = self._row(thread_id)
        now = f"it is held by {current[0].describe()}" if current and current[1] else "it expired"
        return (
            f"this run of thread {thread_id!r} lost its lease ({now}: the run was paused or cut off for more than "
            f"{self.ttl:g} s), so its write was refused to keep the thread from forking. Nothing after the last "
            "saved checkpoint was kept; resume the thread to go on from there."
        )

    @contextlib.contextmanager
    def fenced(self, thread_id: str) -> Iterator[None]:
        """A write of ``thread_id`` that commits only with the lease check (one transaction)."""
        with self._failing_clearly(thread_id, "save a checkpoint of"), self.transaction():
            self.check_write(thread_id)
            yield

    @contextlib.contextmanager
    def _failing_clearly(self, thread_id: str, what: str) -> Iterator[None]:
        try:
            yield
        except self.db_errors as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise CheckpointStoreError(
                f"could not {what} thread {thread_id!r} in {self.key}: {first}. Nothing committed before was "
                "lost; resume the thread once the database is reachable again."
            ) from e


class SqliteLeases(DbLeases):
    """Leases in the SQLite file the saver writes."""

    now_sql = "teamgraph_now()"
    db_errors = (sqlite3.OperationalError, sqlite3.DatabaseError)

    def _sql(self, template: str) -> str:
        return super()._sql(template).replace("%s", "?")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        with self.saver.lock:
            outer = self.conn.in_transaction
            if not outer:
                self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                if not outer and self.conn.in_transaction:
                    self.conn.rollback()
                raise
            # NOTE: the saver's own write commits the transaction it joined (lease check and write together).
            if not outer and self.conn.in_transaction:
                self.conn.commit()


class PostgresLeases(DbLeases):
    """Leases in the PostgreSQL database the saver writes (its clock decides expiry)."""

    now_sql = "EXTRACT(EPOCH FROM clock_timestamp())::double precision"

    def __init__(self, saver: Any, *, key: str, ttl: float) -> None:
        import psycopg

        super().__init__(saver, key=key, ttl=ttl)
        self.db_errors = (psycopg.OperationalError, psycopg.InterfaceError)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        with self.saver.lock, self.conn.transaction():
            yield


@contextlib.contextmanager
def postgres_setup_lock(conn: Any) -> Iterator[None]:
    """Hold the database-wide advisory lock under which every teamgraph process sets tables up.

    Two processes setting up a fresh database at once otherwise race on the migrations
    tables (``UniqueViolation``) and on ``CREATE TABLE``.

    NOTE: taken by polling ``pg_try_advisory_lock``, never by waiting in
    ``pg_advisory_lock``: the store's migrations run ``CREATE INDEX CONCURRENTLY``, which
    waits for every open transaction, a waiter's included; a waiter in a statement
    while the holder runs it is a deadlock that PostgreSQL breaks by failing one.
    """
    delay = 0.005
    while not _first(conn.execute("SELECT pg_try_advisory_lock(%s)", (_SETUP_LOCK_KEY,)).fetchone()):
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    try:
        yield
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK_KEY,))


def _first(row: Any) -> Any:
    """The first column of ``row``, whichever row factory the connection has."""
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


def setup_postgres(conn: Any, setup: Callable[[], None]) -> None:
    """Run ``setup`` and create the lease table under ``postgres_setup_lock``."""
    with postgres_setup_lock(conn):
        setup()
        conn.execute(_CREATE)


_MAKE_LOCK = threading.Lock()


def leases_for(saver: Any) -> DbLeases | None:
    """The leases of ``saver``'s database, its writes fenced from now on (None: not a database of ours).

    Ours: LangGraph's sync ``SqliteSaver`` (the default) and a ``PostgresSaver`` on one connection.
    """
    with _MAKE_LOCK:
        existing = getattr(saver, "_teamgraph_leases", None)
        if existing is not None:
            return existing
        leases = _make(saver)
        if leases is None:
            return None
        _fence_writes(saver, leases)
        saver._teamgraph_leases = leases
        return leases


def _make(saver: Any) -> DbLeases | None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    ttl = lease_seconds()
    if isinstance(saver, SqliteSaver):
        saver.setup()
        saver.conn.create_function("teamgraph_now", 0, time.time)
        path = saver.conn.execute("PRAGMA database_list").fetchone()[2]
        saver.conn.execute(_CREATE)
        saver.conn.commit()
        return SqliteLeases(saver, key=f"sqlite:{path}", ttl=ttl)
    try:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:
        return None
    if not isinstance(saver, PostgresSaver) or not isinstance(saver.conn, psycopg.Connection) or saver.pipe:
        return None
    info = saver.conn.info
    setup_postgres(saver.conn, saver.setup)
    return PostgresLeases(saver, key=f"postgresql://{info.host}:{info.port}/{info.dbname}", ttl=ttl)


def _fence_writes(saver: Any, leases: DbLeases) -> None:
    # NOTE: reentrant, so a fenced write holds the saver's lock around its own transaction
    # while the saver's method takes it again inside.
    saver.lock = threading.RLock()
    for name in ("put", "put_writes"):
        setattr(saver, name, _fenced(getattr(saver, name), leases))


def _fenced(write: Callable[..., Any], leases: DbLeases) -> Callable[..., Any]:
    @functools.wraps(write)
    def fenced_write(config: Any, *args: Any, **kwargs: Any) -> Any:
        with leases.fenced(str(config["configurable"]["thread_id"])):
            return write(config, *args, **kwargs)

    return fenced_write
