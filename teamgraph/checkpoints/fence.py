"""A run's fence on a checkpointer teamgraph cannot lease in: a checkpoint goes on from the thread's latest.

Under an API server the checkpointer is the server's (``AsyncPostgresSaver`` on its
pool), and a replica paused past its heartbeat has its runs swept to another one; when it
wakes it writes on from the checkpoint it had, and the thread forks. Through this view a
run's checkpoint of the thread's root namespace is accepted only if its parent is still
the thread's latest checkpoint, and a task's writes only if their checkpoint is (before
the run's first checkpoint, the one it was asked to start from is accepted too: a fork
from the past is the caller's choice). A late write on an older checkpoint would also
change what its descendants read, as a delta channel's history runs through it. Otherwise the write is
refused with ``LeaseLostError`` and the run stops.

On PostgreSQL the check and the write are one transaction on one connection of the
server's pool, under a per-thread advisory lock (``_fenced``): no writer can slip in
between them. A writer paused inside that transaction (SIGSTOP, a partition) would hold
the lock; the transaction sets ``idle_in_transaction_session_timeout``, so PostgreSQL
ends its session after ``STALLED_SECONDS``, the write is rolled back and the lock freed
for the run that took over. On another saver the check and the write are two calls; the
leases in the database (``db_lease.py``) fence the checkpointers teamgraph opens.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, ChannelVersions, Checkpoint, CheckpointMetadata

from teamgraph.checkpoints.lease import LeaseLostError

__all__ = ["STALLED_SECONDS", "ParentFence"]

STALLED_SECONDS = 10
"""How long PostgreSQL lets a fenced write's transaction sit idle before it ends the writer's session."""

_FORWARDED = (
    "get",
    "get_tuple",
    "list",
    "delete_thread",
    "delete_for_runs",
    "copy_thread",
    "prune",
    "aget",
    "aget_tuple",
    "alist",
    "adelete_thread",
    "adelete_for_runs",
    "acopy_thread",
    "aprune",
    "get_delta_channel_history",
    "aget_delta_channel_history",
    "get_next_version",
)
_STALLED_SQL = "SELECT set_config('idle_in_transaction_session_timeout', %s, true)"
_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
_LATEST_SQL = (
    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '' "
    "ORDER BY checkpoint_id DESC LIMIT 1"
)


class ParentFence(BaseCheckpointSaver):
    """One run's view of ``inner``: every method as ``inner``'s, checkpoints fenced (see the module doc)."""

    def __init__(self, inner: BaseCheckpointSaver, *, start: str | None) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner
        self._start = start
        self._first = True
        for name in _FORWARDED:
            setattr(self, name, getattr(inner, name))

    @property
    def config_specs(self) -> list:
        return self.inner.config_specs

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> BaseCheckpointSaver:
        fenced = ParentFence(self.inner.with_allowlist(extra_allowlist), start=self._start)
        fenced._first = self._first
        return fenced

    def _check(self, config: RunnableConfig, latest: str | None, *, putting: bool) -> None:
        """Refuse a write on a checkpoint that is no longer the thread's latest (see the module doc)."""
        configurable = config["configurable"]
        at = configurable.get("checkpoint_id")
        first = self._first
        if putting:
            self._first = False
        if at == latest or (first and self._start is not None and at == self._start):
            return
        # NOTE: with "async" durability a task's writes may come before its checkpoint is saved: that
        # checkpoint is newer than the latest (ids are time-ordered); a zombie's is older than the other's.
        if not putting and (latest is None or (at is not None and str(at) > latest)):
            return
        raise LeaseLostError(
            f"thread {configurable['thread_id']!r} went on without this run (its latest checkpoint is {latest}, "
            f"this run's is {at}): another worker took the run over while this one was paused or cut off. "
            "This run's write was refused to keep the thread from forking; the thread is as the other worker left it."
        )

    @staticmethod
    def _root(config: RunnableConfig) -> bool:
        return not config["configurable"].get("checkpoint_ns")

    def _latest(self, config: RunnableConfig) -> str | None:
        latest = self.inner.get_tuple({"configurable": _thread_of(config)})
        return latest.config["configurable"]["checkpoint_id"] if latest else None

    def put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, versions: ChannelVersions
    ) -> RunnableConfig:
        if self._root(config):
            self._check(config, self._latest(config), putting=True)
        return self.inner.put(config, checkpoint, metadata, versions)

    def put_writes(self, config: RunnableConfig, writes: Any, task_id: str, task_path: str = "") -> None:
        if self._root(config):
            self._check(config, self._latest(config), putting=False)
        self.inner.put_writes(config, writes, task_id, task_path)

    async def aput_writes(self, config: RunnableConfig, writes: Any, task_id: str, task_path: str = "") -> None:
        if not self._root(config):
            await self.inner.aput_writes(config, writes, task_id, task_path)
            return
        async with self._fenced(config) as (latest, saver):
            self._check(config, latest, putting=False)
            await saver.aput_writes(config, writes, task_id, task_path)

    async def aput(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, versions: ChannelVersions
    ) -> RunnableConfig:
        if not self._root(config):
            return await self.inner.aput(config, checkpoint, metadata, versions)
        async with self._fenced(config) as (latest, saver):
            self._check(config, latest, putting=True)
            return await saver.aput(config, checkpoint, metadata, versions)

    @asynccontextmanager
    async def _fenced(self, config: RunnableConfig) -> AsyncIterator[tuple[str | None, BaseCheckpointSaver]]:
        """The thread's latest root checkpoint id, and the saver to write with while it stays the latest.

        NOTE: on PostgreSQL, a transaction holding the thread's fence lock, with a saver on
        its connection (see the module doc); elsewhere, a read and the inner saver.
        """
        if not _on_postgres(self.inner):
            latest = await self.inner.aget_tuple({"configurable": _thread_of(config)})
            yield (latest.config["configurable"]["checkpoint_id"] if latest else None), self.inner
            return
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg import AsyncConnection
        from psycopg.rows import dict_row

        thread = str(config["configurable"]["thread_id"])
        pool: Any = self.inner.conn  # type: ignore[attr-defined]
        async with _connection(pool, self.inner) as conn, conn.transaction():
            await conn.execute(_STALLED_SQL, (f"{STALLED_SECONDS}s",))
            await conn.execute(_LOCK_SQL, (f"teamgraph-fence:{thread}",))
            async with conn.cursor(row_factory=dict_row) as cur:
                await cur.execute(_LATEST_SQL, (thread,))
                row = await cur.fetchone()
            assert isinstance(conn, AsyncConnection)
            yield (None if row is None else str(row["checkpoint_id"])), AsyncPostgresSaver(conn, serde=self.inner.serde)


@asynccontextmanager
async def _connection(conn: Any, saver: BaseCheckpointSaver) -> AsyncIterator[Any]:
    """A connection of ``saver``'s pool, or its one connection (held under its lock, as it holds it)."""
    from psycopg_pool import AsyncConnectionPool

    if isinstance(conn, AsyncConnectionPool):
        async with conn.connection() as pooled:
            yield pooled
    else:
        async with saver.lock:  # type: ignore[attr-defined]
            yield conn


def _on_postgres(saver: BaseCheckpointSaver) -> bool:
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    except ImportError:
        return False
    return isinstance(saver, AsyncPostgresSaver)


def _thread_of(config: RunnableConfig) -> dict[str, Any]:
    return {"thread_id": config["configurable"]["thread_id"], "checkpoint_ns": ""}
