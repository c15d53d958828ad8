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
from teamgraph.audit.cursors import base_of
from teamgraph.audit.log import log_thread, write_committed
from teamgraph.audit.project import log_folder
from teamgraph.compat import checkpoint_read

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

    The state the pass's agents' nodes read before it (``note_read``) is written first.

    NOTE: the router waits for it before it takes the finished steps, so a failed write
    leaves them in the pool (a retried pass takes them, nothing runs twice), and the
    checkpoint after a pass follows the lines of the state it read (a crash repeats a
    pass, never skips one's lines). Meanwhile the pass waits for steps, instead of
    waiting on the log's file and index writes.

    Args:
        runtime: The team runtime.
        state: The committed state the pass read.
        config: The run's config (the writer thread has no LangGraph context).

    Returns:
        The future of the lines written.
    """
    folder = log_folder(runtime, config)
    if folder is None:
        done: Future[list[str]] = Future()
        done.set_result([])
        return done
    read = _take_read(log_thread(config), base_of(state))
    # NOTE: the folder is fixed now: a chdir before the write must not move a relative home.
    # NOTE: the pass waits for the lines and the index, not for the disk: they are flushed
    # once written, on the flusher thread (a process killed in between loses nothing: the
    # page cache has the lines).
    written = _submit(folder, _write_in_order, runtime, [*read, (state, config)], folder)
    written.add_done_callback(lambda _: flush_soon(folder))
    return written


def _write_in_order(runtime: Any, states: list[tuple[Mapping[str, Any], RunnableConfig]], folder: Path) -> list[str]:
    """``write_committed`` of each (state, config of the task that read it), in order; the lines written."""
    lines: list[str] = []
    for state, config in states:
        lines += write_committed(runtime, state, config, folder=folder, sync=False)
    return lines


_READ: dict[str, dict[str, tuple[Mapping[str, Any], RunnableConfig]]] = {}
"""Per run (``log_thread``), the committed states its agents' nodes read, by checkpoint, until a pass logs them."""
_READ_GUARD = threading.Lock()


def note_read(runtime: Any, config: RunnableConfig, state: Mapping[str, Any]) -> None:
    """Keep ``state``, the committed state the running agent's node read, for the next pass to log before its own.

    NOTE: the checkpoint a pass writes is read only by the agents' nodes (or the human
    gate, which logs it itself). Logged with the next pass's state, in the pass's write,
    it costs no write of its own; the values are not copied (LangGraph's channels are
    never changed in place). A process that stops before that pass loses no line: the
    pass logs on from the checkpoint the pass before the nodes read (``cursors``); only a
    fork of this one is then logged from there.
    """
    checkpoint, run = checkpoint_read(config), log_thread(config)
    with _READ_GUARD:
        if checkpoint is None or checkpoint in _READ.get(run, {}):
            return  # NOTE: every agent's node of a superstep reads the same checkpoint: the first notes it
    if log_folder(runtime, config) is None:
        return
    with _READ_GUARD:
        _READ.setdefault(run, {})[checkpoint] = (state, config)


def _take_read(run: str, checkpoint: str | None) -> list[tuple[Mapping[str, Any], RunnableConfig]]:
    """The state read at ``checkpoint`` by the run's agents' nodes, if noted; the run's others are dropped."""
    with _READ_GUARD:
        noted = _READ.pop(run, {})
    return [noted[checkpoint]] if checkpoint in noted else []


def forget_reads(run: str) -> None:
    """Drop what the run's agents' nodes read and no pass logged (the run ended before one)."""
    with _READ_GUARD:
        _READ.pop(run, None)
