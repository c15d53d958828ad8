"""The async half of a sync saver: each call runs the sync method in a worker thread.

NOTE: LangGraph's ``SqliteSaver`` refuses ``ainvoke`` / ``astream`` (its async methods
raise ``NotImplementedError``), so ``await graph.ainvoke(...)`` on a team built with
its default home (a notebook cell) failed. The sync methods are thread-safe (one
connection behind the saver's lock), so running each in a thread keeps the event loop
free of the file's I/O and reads and writes the same rows, through the same fence
(``db_lease.py`` wraps the instance's ``put`` and ``put_writes``, which these call).
``teamgraph.checkpoints.aio`` stays the saver of a program that is async throughout.

LangGraph's ``PostgresSaver`` gets the same methods on its instance (``lend_async``):
its class stays LangGraph's, which the shared-home check and the store read.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple

__all__ = ["AsyncInThreads", "lend_async"]


class AsyncInThreads:
    """Mixed in before a sync saver: its async methods, each a sync call in a worker thread."""

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)  # type: ignore[attr-defined]

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        # NOTE: read whole in one thread: the sync list holds the saver's lock while it yields.
        found = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))  # type: ignore[attr-defined]
        )
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)  # type: ignore[attr-defined]

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)  # type: ignore[attr-defined]

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)  # type: ignore[attr-defined]

    async def aget_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, Any]:
        return await asyncio.to_thread(
            lambda: self.get_delta_channel_history(config=config, channels=channels)  # type: ignore[attr-defined]
        )


def lend_async(saver: Any) -> None:
    """Give a sync saver instance ``AsyncInThreads``' methods (they call its own, patched ones)."""
    for name, method in vars(AsyncInThreads).items():
        if name.startswith("a") and callable(method):
            setattr(saver, name, types.MethodType(method, saver))
