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

The check and the write are two statements, not one transaction: a writer paused exactly
between them still forks the thread. The leases in the database (``db_lease.py``) close
that gap for the checkpointers teamgraph opens.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, ChannelVersions, Checkpoint, CheckpointMetadata

from teamgraph.checkpoints.lease import LeaseLostError

__all__ = ["ParentFence"]

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
        if self._root(config):
            self._check(config, await self._alatest(config), putting=False)
        await self.inner.aput_writes(config, writes, task_id, task_path)

    async def aput(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, versions: ChannelVersions
    ) -> RunnableConfig:
        if self._root(config):
            self._check(config, await self._alatest(config), putting=True)
        return await self.inner.aput(config, checkpoint, metadata, versions)

    async def _alatest(self, config: RunnableConfig) -> str | None:
        """The thread's latest root checkpoint id (one indexed row from PostgreSQL when the saver is on it)."""
        if _on_postgres(self.inner):
            async with self.inner._cursor() as cur:  # type: ignore[attr-defined]
                await cur.execute(_LATEST_SQL, (str(config["configurable"]["thread_id"]),))
                row = await cur.fetchone()
            return None if row is None else str(row["checkpoint_id"])
        latest = await self.inner.aget_tuple({"configurable": _thread_of(config)})
        return latest.config["configurable"]["checkpoint_id"] if latest else None


def _on_postgres(saver: BaseCheckpointSaver) -> bool:
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    except ImportError:
        return False
    return isinstance(saver, AsyncPostgresSaver)


def _thread_of(config: RunnableConfig) -> dict[str, Any]:
    return {"thread_id": config["configurable"]["thread_id"], "checkpoint_ns": ""}
