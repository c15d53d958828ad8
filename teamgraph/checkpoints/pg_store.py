"""The team's store on PostgreSQL: a ``PostgresStore`` on its saver's connection, under its saver's lock.

The saver of a database URL holds one connection (``checkpoints/store.py``): its writes
are fenced by the thread's lease in the same transaction, a heartbeat renews the lease
on it, and a connection the server closed (a restart) is replaced at the saver's next
call. The store the team keeps notes and step journals in follows all three: it uses the
saver's connection and lock, whichever they are when it is used, and a store call that
meets a closed connection first has the saver replace it, then runs again.

Imported only with the ``postgres`` extra installed (``checkpoints/memory.py``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import Any

from langgraph.store.base import BaseStore, Op, Result

from teamgraph.checkpoints.db_lease import postgres_setup_lock

PROBE = {"configurable": {"thread_id": "", "checkpoint_ns": ""}}
"""A read of no thread: the saver's call that replaces a closed connection, and finds nothing."""


class SaverLock:
    """The lock of a saver, whichever it holds when taken (the lease fence swaps in an ``RLock``).

    Args:
        saver: The object whose ``lock`` attribute is taken.
    """

    def __init__(self, saver: Any) -> None:
        self._saver = saver
        self._held = threading.local()

    def __enter__(self) -> bool:
        lock = self._saver.lock
        lock.acquire()
        self._held.__dict__.setdefault("locks", []).append(lock)
        return True

    def __exit__(self, *exc: object) -> None:
        self._held.locks.pop().release()


class SaverStore(BaseStore):
    """A ``PostgresStore`` on ``saver``'s connection and lock (see the module doc).

    Args:
        saver: A ``PostgresSaver`` on one connection.
    """

    def __init__(self, saver: Any) -> None:
        from langgraph.store.postgres import PostgresStore

        self._saver = saver
        self._store = PostgresStore(saver.conn)
        # NOTE: one connection, so one lock: a store write while the saver's transaction is
        # open (a fenced checkpoint, a lease's heartbeat) would join or break it.
        self._store.lock = SaverLock(saver)  # type: ignore[assignment]

    @property
    def lock(self) -> SaverLock:
        """The lock the store's calls take: the saver's."""
        return self._store.lock  # type: ignore[return-value]

    def setup(self) -> None:
        """Create the store's tables (once per database), under the lock every setup takes."""

        def set_up() -> None:
            with self.lock, postgres_setup_lock(self._store.conn):
                self._store.setup()

        self._on_saver_connection(set_up)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` on the saver's connection."""
        ops = list(ops)
        return self._on_saver_connection(lambda: self._store.batch(ops))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` on the saver's connection, in a worker thread (the connection is synchronous)."""
        ops = list(ops)
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, ops)

    def _on_saver_connection(self, call: Any) -> Any:
        """``call()`` on the saver's connection now; once more on a new one if the server closed it."""
        import psycopg

        self._store.conn = self._saver.conn
        try:
            return call()
        except (psycopg.OperationalError, psycopg.InterfaceError):
            conn = self._saver.conn
            if not (conn.closed or getattr(conn, "broken", False)):  # NOTE: a pool has no "broken"
                raise  # NOTE: an error on a live connection is the caller's
            self._saver.get_tuple(PROBE)  # NOTE: the saver's next call replaces the closed connection
            self._store.conn = self._saver.conn
            return call()
