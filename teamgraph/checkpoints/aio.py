"""The async checkpointer: AsyncSqliteSaver on the team's SQLite file.

Use it for ``graph.ainvoke`` / ``graph.astream``. The file is the same one the
sync saver writes (``<home>/teamgraph.sqlite``), opened the same way (WAL mode,
a busy timeout), so a thread started async can be read or resumed by sync code
and the other way round.

Example:
    ```python
    from teamgraph import Team
    from teamgraph.checkpoints.aio import open_async_sqlite_saver

    async with open_async_sqlite_saver(".teamgraph/teamgraph.sqlite") as saver:
        graph = Team(checkpointer=saver).compile()
        config = {"configurable": {"thread_id": "t1"}}
        await graph.ainvoke({"messages": [("user", "Build a login page")]}, config)
        state = await graph.aget_state(config)
    ```
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from teamgraph.checkpoints.files import private_database
from teamgraph.checkpoints.saver import BUSY_TIMEOUT_MS, PAGE_SIZE_PRAGMA, WAL_RETRY_SECONDS, IntVersions, wal_busy
from teamgraph.checkpoints.serde import TeamSerializer

__all__ = ["TeamAsyncSqliteSaver", "open_async_sqlite_saver"]


class TeamAsyncSqliteSaver(IntVersions, AsyncSqliteSaver):
    """``AsyncSqliteSaver`` with the int channel versions of the Team's sync saver.

    NOTE: both savers write the same file; a thread either one wrote must be read with
    the versions of one kind (see ``IntVersions``).
    """

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = await super().aget_tuple(config)
        return None if found is None else self.int_tuple(found)

    async def alist(self, config: RunnableConfig | None, **kwargs: Any) -> AsyncIterator[CheckpointTuple]:
        async for found in super().alist(config, **kwargs):
            yield self.int_tuple(found)


async def _connect(path: Path) -> aiosqlite.Connection:
    """Open the SQLite file in WAL mode with a busy timeout (as ``saver.connect``)."""
    conn = await aiosqlite.connect(path, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        await conn.execute(PAGE_SIZE_PRAGMA)
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                await conn.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                if not wal_busy(exc) or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(WAL_RETRY_SECONDS)
        await conn.execute("PRAGMA synchronous=NORMAL")
    except BaseException:
        await conn.close()
        raise
    return conn


@asynccontextmanager
async def open_async_sqlite_saver(path: str | Path) -> AsyncIterator[TeamAsyncSqliteSaver]:
    """An AsyncSqliteSaver on ``path`` (created if missing), closed on exit.

    Args:
        path: The SQLite file, e.g. ``Team(...).db_path``. Its folder is created.

    Yields:
        The saver, its tables set up; pass it as ``Team(checkpointer=saver)``.
    """
    path = Path(path)
    private_database(path)
    conn = await _connect(path)
    try:
        saver = TeamAsyncSqliteSaver(conn, serde=TeamSerializer())
        await saver.setup()
        yield saver
    finally:
        await conn.close()
