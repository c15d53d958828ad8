"""The fence on the API server's checkpointer (``checkpoints/fence.py``), on a real PostgreSQL.

The server's saver is an ``AsyncPostgresSaver`` on an autocommit pool, as
``langgraph-runtime-pg`` opens it. A run writes through ``ParentFence``: a checkpoint
only on the thread's latest, checked and written in one transaction under the thread's
lock, and a writer paused inside that transaction loses its session instead of forking
the thread when it wakes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from pg_fixtures import postgres_server, postgres_url  # noqa: F401

from teamgraph.checkpoints import fence
from teamgraph.checkpoints.fence import ParentFence
from teamgraph.checkpoints.lease import LeaseLostError

pytest.importorskip("langgraph.checkpoint.postgres.aio")

THREAD = "fenced"


async def _server_saver(url: str) -> tuple[Any, Any]:
    """The saver ``langgraph-runtime-pg`` gives a graph: an AsyncPostgresSaver on an autocommit pool."""
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=4,
        open=False,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
    )
    await pool.open()
    saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
    await saver.setup()
    return saver, pool


def _config(parent: str | None = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": THREAD, "checkpoint_ns": ""}
    if parent is not None:
        configurable["checkpoint_id"] = parent
    return {"configurable": configurable}


async def _put(saver: Any, parent: str | None) -> str:
    """A new checkpoint on ``parent`` through ``saver``: its id."""
    written = await saver.aput(_config(parent), empty_checkpoint(), {"source": "loop", "step": 0}, {})
    return str(written["configurable"]["checkpoint_id"])


async def _children(pool: Any) -> dict[str | None, int]:
    async with pool.connection() as conn:
        rows = await (
            await conn.execute(
                "SELECT parent_checkpoint_id AS parent, COUNT(*) AS n FROM checkpoints WHERE thread_id = %s "
                "GROUP BY parent_checkpoint_id",
                (THREAD,),
            )
        ).fetchall()
    return {row["parent"]: row["n"] for row in rows}


@asynccontextmanager
async def server_saver(url: str) -> AsyncIterator[tuple[Any, Any]]:
    saver, pool = await _server_saver(url)
    try:
        yield saver, pool
    finally:
        await pool.close()


def test_a_run_writes_on_from_the_latest_and_a_stale_writer_is_refused_writing_nothing(postgres_url) -> None:  # noqa: F811
    async def scenario() -> None:
        async with server_saver(postgres_url) as (saver, pool):
            first = await _put(ParentFence(saver, start=None), None)
            taken_over = ParentFence(saver, start=None)  # NOTE: the run another replica took over
            second = await _put(taken_over, first)
            zombie = ParentFence(saver, start=None)
            with pytest.raises(LeaseLostError, match=THREAD):
                await _put(zombie, first)
            with pytest.raises(LeaseLostError):
                await zombie.aput_writes(_config(first), [("messages", "late")], "task-1")
            assert await _children(pool) == {None: 1, first: 1}
            assert second > first

    asyncio.run(scenario())


def test_a_writer_paused_inside_its_fenced_write_loses_its_session_and_the_thread_does_not_fork(
    postgres_url,  # noqa: F811
    monkeypatch,
) -> None:
    monkeypatch.setattr(fence, "STALLED_SECONDS", 1)

    async def scenario() -> None:
        async with server_saver(postgres_url) as (saver, pool):
            first = await _put(ParentFence(saver, start=None), None)
            zombie = ParentFence(saver, start=None)
            inside, wake = asyncio.Event(), asyncio.Event()

            async def paused_writer() -> None:
                # NOTE: checked, then paused before its write, the lock held (as a SIGSTOP there would).
                async with zombie._fenced(_config(first)) as (latest, bound):
                    zombie._check(_config(first), latest, putting=True)
                    inside.set()
                    await wake.wait()
                    await bound.aput(_config(first), empty_checkpoint(), {"source": "loop", "step": 1}, {})

            writer = asyncio.create_task(paused_writer())
            await inside.wait()
            # NOTE: the run that took over waits for the lock until PostgreSQL ends the paused session.
            second = await asyncio.wait_for(_put(ParentFence(saver, start=None), first), timeout=30)
            wake.set()
            with pytest.raises(Exception) as failed:
                await writer
            assert not isinstance(failed.value, AssertionError)
            assert await _children(pool) == {None: 1, first: 1}
            assert second > first

    asyncio.run(scenario())
