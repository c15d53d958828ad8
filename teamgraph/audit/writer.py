"""The log's writer threads: the lines of the state a task reads are written while the task runs.

One single-thread writer per logs folder, so a folder's lines keep their order and one
slow disk (or an index another process holds) stalls only the runs that log there.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from teamgraph.audit import log as audit_log
from teamgraph.audit.log import write_committed
from teamgraph.audit.project import log_folder
from teamgraph.compat import read_channels
from teamgraph.state import TeamState

_WRITERS: OrderedDict[Path, ThreadPoolExecutor] = OrderedDict()
_WRITERS_GUARD = threading.Lock()


def _submit(key: Path, fn: Callable[..., list[str]], *args: Any, **kwargs: Any) -> Future[list[str]]:
    """Run ``fn`` on the writer thread of the logs folder ``key`` (made on first use; the least recent retired)."""
    with _WRITERS_GUARD:  # NOTE: submitted under the guard: no writer is retired between lookup and submit
        writer = _WRITERS.get(key)
        if writer is not None:
            _WRITERS.move_to_end(key)
        else:
            writer = _WRITERS[key] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="teamgraph-log")
            while len(_WRITERS) > audit_log.OPEN_INDEXES:
                _, old = _WRITERS.popitem(last=False)
                old.shutdown(wait=False)  # NOTE: what it holds still runs; it takes nothing new
        return writer.submit(fn, *args, **kwargs)


_FLUSHER: list[ThreadPoolExecutor] = []
_FLUSH_QUEUED: set[Path] = set()
_FLUSH_GUARD = threading.Lock()


def flush_soon(folder: Path) -> Future[None] | None:
    """Flush the day files ``folder``'s writes appended (``sync_appended``) on the flusher thread.

    NOTE: a thread of its own, not the folder's writer: a slow disk's flush (0.2-3 ms here)
    must not hold up the next pass's lines. A flush queued and not started yet covers
    every append before it runs, so none is queued twice.

    Returns:
        The queued flush, or None when one was queued already.
    """
    with _FLUSH_GUARD:
        if folder in _FLUSH_QUEUED:
            return None
        _FLUSH_QUEUED.add(folder)
        if not _FLUSHER:
            _FLUSHER.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="teamgraph-flush"))
        try:
            return _FLUSHER[0].submit(_flush, folder)
        except RuntimeError:  # NOTE: the interpreter is exiting (no new thread work): flush here
            _FLUSH_QUEUED.discard(folder)
    audit_log.sync_appended(folder)
    return None


def _flush(folder: Path) -> None:
    with _FLUSH_GUARD:
        _FLUSH_QUEUED.discard(folder)
    audit_log.sync_appended(folder)


def _forget_writers() -> None:
    """In a forked child: the parent's writer and flusher threads do not exist there."""
    global _WRITERS_GUARD, _FLUSH_GUARD
    _WRITERS_GUARD = threading.Lock()
    _WRITERS.clear()
    _FLUSH_GUARD = threading.Lock()
    _FLUSHER.clear()
    _FLUSH_QUEUED.clear()


os.register_at_fork(after_in_child=_forget_writers)


def open_log_soon(runtime: Any, config: RunnableConfig) -> None:
    """Open the run's logs index (and recover it) on the folder's writer thread, now.

    NOTE: a run's first pass waits for its log lines; opening the index in a fresh home
    (its folders, its tables, the recovery of the day files) took 5-7 ms of that wait.
    Started as the run starts, it overlaps the run's first checkpoints. Nothing is
    written; an error is left for the first write to raise.
    """
    folder = log_folder(runtime, config)
    if folder is not None:
        _submit(folder, audit_log.open_log, folder)


def write_committed_soon(runtime: Any, state: Mapping[str, Any], config: RunnableConfig) -> Future[list[str]]:
    """``write_committed`` on the folder's writer thread (flushed after); wait for it before the pass ends.

    NOTE: the router waits for it before it takes the finished steps, so a failed write
    leaves them in the pool (a retried pass takes them, nothing runs twice), and the
    checkpoint after a pass follows the lines of the state it read (a crash repeats a
    pass, never skips one's lines). Meanwhile the pass waits for steps, instead of
    waiting on the log's file and index writes.

    Args:
        runtime: The team runtime.
        state: The committed state the task read.
        config: The run's config (the writer thread has no LangGraph context).

    Returns:
        The future of the lines written.
    """
    folder = log_folder(runtime, config)
    if folder is None:
        done: Future[list[str]] = Future()
        done.set_result([])
        return done
    # NOTE: the folder is fixed now: a chdir before the write must not move a relative home.
    # NOTE: the pass waits for the lines and the index, not for the disk: they are flushed
    # once written, on the flusher thread (a process killed in between loses nothing: the
    # page cache has the lines).
    written = _submit(folder, write_committed, runtime, state, config, folder=folder, sync=False)
    written.add_done_callback(lambda _: flush_soon(folder))
    return written


def log_read_soon(runtime: Any, config: RunnableConfig) -> Future[list[str]]:
    """``write_committed_soon`` of the committed state the running task reads (an agent's node's).

    NOTE: the agents' nodes read the checkpoint a pass wrote; logged here, a fork of it
    finds its own cursor. Every node of one superstep asks: the first writes the lines,
    the others find the checkpoint logged (``cursors``) and write nothing.
    """
    return write_committed_soon(runtime, read_channels(config, list(TeamState.__annotations__)), config)
