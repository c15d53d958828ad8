"""The collaboration log writer: exactly once, from committed state.

``write_committed`` runs for the state each router pass reads and the one its agents'
nodes read before it (on the writer thread, ``audit/writer.py``; the pass waits for it
before it returns), the human gate's and ``flush_log``'s: that state was committed
(durability ``"sync"``), so a crash can only repeat a task over the same state. Lines
are derived deterministically from that state (``events.py``) and appended together
with the cursor that says what was logged, in one SQLite transaction kept next to the
log (``<home>/logs/<project>/.collaboration.sqlite``, out of the agents' reach:
``project.py``). Each line carries a hash chain (``chain.py``); the index keeps
each day file's size and last link, committed with the lines:

1. recover: a day file longer than its recorded size holds lines whose
   transaction never committed (a crash between the append and the commit);
   it is cut back to the recorded size (the file written to, at every append;
   every day file, when a process first opens the index and once a day);
2. append the new lines, then commit the new sizes and the cursor;
3. flush the appended files to disk (fdatasync): inline for a direct call, on the
   writer thread after the pass's lines for a router pass (``sync=False`` and
   ``sync_appended``), so a slow disk's flush is off the team's critical path.

A crash before step 2's commit leaves the old cursor and a tail that the next
writer cuts off and writes again: every line is written once, none is lost. A
process killed after the commit loses nothing either (the lines are in the page
cache). Only a power cut between step 2 and step 3 can leave a day file shorter
than its recorded size: the next process to open the index says so in a CRITICAL
``LOG_LOST`` line in that file (the checkpoints, at ``synchronous=NORMAL``, may
then be older than the log too).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config

from teamgraph.audit import chain, cursors, rotation
from teamgraph.audit.events import Cursor, derive_events, new_cursor
from teamgraph.audit.lines import SYSTEM
from teamgraph.audit.project import PROJECT_NAME_KEY, log_folder, project_name
from teamgraph.audit.records import TIME_FORMAT, LogEvent, format_line
from teamgraph.checkpoints.files import private_dir
from teamgraph.checkpoints.saver import set_wal
from teamgraph.checkpoints.shared_home import MARKER
from teamgraph.runs import run_key

INDEX_FILE = ".collaboration.sqlite"
BUSY_TIMEOUT = 30.0
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS files (name TEXT PRIMARY KEY, size INTEGER NOT NULL, head TEXT, lines INTEGER)",
    "CREATE TABLE IF NOT EXISTS cursors (thread TEXT PRIMARY KEY, cursor TEXT NOT NULL, maintained TEXT)",
    *cursors.SCHEMA,
)
OPEN_INDEXES = 16
"""Index connections kept open (least recently used closed first): opening one costs ms."""


class _Index:
    """One open connection to a logs folder's index, and the lock that serializes its writers."""

    def __init__(self, folder: Path) -> None:
        path = folder / INDEX_FILE
        self.path = str(path)
        _private_file(path)
        self.lock = threading.Lock()
        self.recovered = False
        self.closed = False
        self.db = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False)
        if (folder.parent.parent / MARKER).exists():
            # NOTE: a shared home (several machines on one volume): SQLite's WAL needs every
            # writer on one machine, its rollback journal only the volume's file locks.
            self.db.execute("PRAGMA journal_mode=DELETE")
        else:
            set_wal(self.db)
        # NOTE: NORMAL is enough: an index commit lost by a power cut leaves the index behind the
        # log file, and the next writer cuts the file back and writes those lines again (a file
        # behind the index is reported: ``_recover``).
        self.db.execute("PRAGMA synchronous=NORMAL")
        for statement in _SCHEMA:
            self.db.execute(statement)


_OPEN: OrderedDict[Path, _Index] = OrderedDict()
_OPEN_GUARD = threading.Lock()


_INHERITED: list[_Index] = []
"""A forked child's copies of the parent's indexes: kept, never used and never closed."""


def _forget_open_indexes() -> None:
    """In a forked child: the parent's connections and locks are not the child's to use.

    NOTE: SQLite forbids using a connection across fork(), closing included (a rollback
    could touch the WAL index the parent shares): they are kept referenced, not closed.
    """
    global _OPEN_GUARD, _UNSYNCED_GUARD
    _OPEN_GUARD = threading.Lock()
    _UNSYNCED_GUARD = threading.Lock()  # NOTE: a writer or the flusher may have held it at the fork
    _INHERITED.extend(_OPEN.values())
    _OPEN.clear()


os.register_at_fork(after_in_child=_forget_open_indexes)


def _open_index(folder: Path) -> _Index:
    # NOTE: keyed by the absolute folder, not the resolved one: resolving costs a system call
    # per path component at every router pass (and a GIL hand-off while steps run).
    key = folder.absolute()
    retired: list[_Index] = []
    with _OPEN_GUARD:
        if key in _OPEN and os.path.exists(_OPEN[key].path):
            _OPEN.move_to_end(key)
            return _OPEN[key]
        if (stale := _OPEN.pop(key, None)) is not None:  # NOTE: its folder was removed and made again
            retired.append(stale)
        private_dir(folder)  # NOTE: the log holds what the agents said: owner-only, whatever the umask
        index = _OPEN[key] = _Index(folder)
        while len(_OPEN) > OPEN_INDEXES:
            retired.append(_OPEN.popitem(last=False)[1])
    # NOTE: closed outside the guard: a writer of that folder may hold its lock for a while,
    # and the other folders' writers must not wait for it.
    for old in retired:
        with old.lock:
            old.closed = True
            old.db.close()
    return index


def _private_file(path: Path) -> None:
    """Create ``path`` readable by its owner only (0600), whatever the umask."""
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, rotation.FILE_MODE))
    os.chmod(path, rotation.FILE_MODE)


@contextmanager
def _index(folder: Path) -> Iterator[sqlite3.Connection]:
    """The log's index, in one write transaction (BEGIN IMMEDIATE: one writer at a time)."""
    while True:
        index = _open_index(folder)
        with index.lock:
            if index.closed:
                continue  # NOTE: retired between the lookup and the lock: open it again
            db = index.db
            db.execute("BEGIN IMMEDIATE")
            try:
                if not index.recovered:
                    _recover_alone(db, folder)  # NOTE: a writer of another process may have crashed mid-append
                    index.recovered = True
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return


def open_log(folder: Path) -> list[str]:
    """Open the logs folder's index and recover its day files now; writes no line."""
    with _index(folder):
        return []


def _recover(db: sqlite3.Connection, folder: Path) -> dict[str, int]:
    """Cut every day file back to its committed size, and report one that lost its tail; returns the sizes."""
    sizes = dict(db.execute("SELECT name, size FROM files").fetchall())
    for path in rotation.day_files(folder):
        committed = sizes.get(path.name, 0)
        size = path.stat().st_size
        if size > committed:
            with open(path, "r+b") as handle:
                handle.truncate(committed)
                os.fsync(handle.fileno())
        elif size < committed:
            # NOTE: the index's last link was lost with the tail: the chain goes on from the file's.
            previous, count = chain.tail_of(path)
            lost, head, count = chain.chain_lines([_lost_line(path, committed - size)], previous=previous, count=count)
            sizes[path.name] = _append(path, lost, committed=size)
            _flush_file(path)  # NOTE: like the cut above: recovery leaves its files on disk
            db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?)", (path.name, sizes[path.name], head, count))
    return sizes


def _recover_alone(db: sqlite3.Connection, folder: Path) -> None:
    """``_recover`` in a transaction of its own, inside the caller's (open) one.

    NOTE: recovery may append a LOG_LOST line: committed at once, a failure of the
    caller's own writes cannot roll its size back under it (a torn line, a lost report).
    """
    _recover(db, folder)
    db.execute("COMMIT")
    db.execute("BEGIN IMMEDIATE")


def _lost_line(path: Path, lost: int) -> str:
    """The CRITICAL line for a day file whose last ``lost`` bytes never reached the disk."""
    return format_line(
        LogEvent(
            time=datetime.now().strftime(TIME_FORMAT),
            sender=SYSTEM,
            receiver=SYSTEM,
            kind="task",
            content=f"{path.name}: its last {lost} bytes were lost (a power cut before they reached the disk)",
            result="failed",
            level="CRITICAL",
            code="LOG_LOST",
            error="day file shorter than its index",
        )
    )


def _append(path: Path, lines: list[str], *, committed: int) -> int:
    """Append ``lines`` to ``path`` after cutting off any tail past its ``committed`` size; returns the new size."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, rotation.FILE_MODE)
    try:
        stat = os.fstat(fd)
        if stat.st_mode & 0o777 != rotation.FILE_MODE:
            os.fchmod(fd, rotation.FILE_MODE)  # NOTE: owner only, whatever the umask
        if stat.st_size > committed:
            os.ftruncate(fd, committed)  # NOTE: lines of a writer that crashed before its commit
        data = memoryview("".join(f"{line}\n" for line in lines).encode("utf-8"))
        while data:
            data = data[os.write(fd, data) :]
        return os.lseek(fd, 0, os.SEEK_CUR)
    finally:
        os.close(fd)


_UNSYNCED: dict[Path, set[Path]] = {}
"""Per logs folder, the day files appended to and not flushed to disk yet."""
_UNSYNCED_GUARD = threading.Lock()
_SYNC_FAILED: dict[Path, OSError] = {}
"""Per logs folder, a flush that failed: the folder's next append raises it."""


def sync_appended(folder: Path) -> None:
    """Flush to disk (fdatasync) the day files of ``folder`` appended to since the last flush.

    NOTE: a failure is kept and raised by the folder's next append: a flush on the writer
    thread has no caller to tell, and a disk that cannot flush must stop the run.
    """
    key = folder.absolute()
    with _UNSYNCED_GUARD:
        paths = _UNSYNCED.pop(key, set())
    failed: set[Path] = set()
    for path in sorted(paths):
        try:
            _flush_file(path)
        except FileNotFoundError:
            continue  # NOTE: removed meanwhile (rotation: past KEEP_DAYS)
        except OSError as exc:
            _SYNC_FAILED[key] = exc
            failed.add(path)
    if failed:
        with _UNSYNCED_GUARD:  # NOTE: flushed again by the next flush
            _UNSYNCED.setdefault(key, set()).update(failed)


def _flush_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


def _raise_failed_flush(folder: Path) -> None:
    """Raise (once) the error of a flush of ``folder`` that failed."""
    if (failed := _SYNC_FAILED.pop(folder.absolute(), None)) is not None:
        raise failed


def append_events(
    folder: Path,
    project: str,
    thread: str,
    now: datetime,
    derive: Any,
    *,
    sync: bool = True,
    at: cursors.LoggedAt | None = None,
) -> list[str]:
    """Append the events ``derive(cursor)`` returns, with the advanced cursor, exactly once.

    Args:
        folder: The logs folder.
        project: The project name (in the file names).
        thread: The thread id (each thread has its own cursor).
        now: The clock's time: the day file written to, and when old files are archived.
        derive: ``cursor -> (events, new cursor)``.
        sync: Flush the lines to disk before returning; with False the caller calls
            ``sync_appended`` later (the router's writer thread, after the pass has its lines).
        at: Where the state logged sits in its thread: it is logged from its nearest
            logged ancestor (``cursors``); from the thread's latest cursor when None.

    Returns:
        The lines written.

    Raises:
        OSError: A deferred flush of this folder failed (the disk may have lost lines).
    """
    _raise_failed_flush(folder)
    path = rotation.day_file(folder, project, now.date())
    today = now.date().isoformat()
    with _index(folder) as db:
        saved, maintained, recorded, head, count = _where_logged(db, thread, path.name)
        daily = saved is None or maintained != today
        if daily:
            _recover_alone(db, folder)  # NOTE: it may have recorded this file's size anew
            saved, maintained, recorded, head, count = _where_logged(db, thread, path.name)
        start = cursors.start_cursor(db, thread, at, saved) if at is not None else saved
        cursor: Cursor = json.loads(start) if start is not None else new_cursor()
        events, advanced = derive(cursor)
        # NOTE: a file the index does not know is cut to nothing by _append: its chain starts afresh.
        start_link = head if recorded and head else chain.seed(path.name)
        lines, head, count = chain.chain_lines(
            [format_line(event) for event in events], previous=start_link, count=(count or 0) if recorded else 0
        )
        if lines:
            size = _append(path, lines, committed=recorded or 0)
            with _UNSYNCED_GUARD:
                _UNSYNCED.setdefault(folder.absolute(), set()).add(path)
            db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?)", (path.name, size, head, count))
        if daily:
            rotation.maintain(folder, project, now.date())
            existing = {p.name for p in rotation.day_files(folder)}
            db.executemany(
                "DELETE FROM files WHERE name = ?",
                [(n,) for (n,) in db.execute("SELECT name FROM files") if n not in existing],
            )
        dumped = json.dumps(advanced)
        db.execute("INSERT OR REPLACE INTO cursors VALUES (?, ?, ?)", (thread, dumped, today))
        if at is not None:
            cursors.record(db, thread, at, dumped)
    if sync:
        sync_appended(folder)
        _raise_failed_flush(folder)
    return lines


def _where_logged(
    db: sqlite3.Connection, thread: str, day_file: str
) -> tuple[str | None, str | None, int | None, str | None, int | None]:
    """The thread's cursor (JSON), the day its folder was last maintained, ``day_file``'s size and last link.

    NOTE: one statement: each one hands the GIL over and back while the team's steps run.
    """
    return db.execute(
        "SELECT (SELECT cursor FROM cursors WHERE thread = ?), (SELECT maintained FROM cursors WHERE thread = ?),"
        " (SELECT size FROM files WHERE name = ?), (SELECT head FROM files WHERE name = ?),"
        " (SELECT lines FROM files WHERE name = ?)",
        (thread, thread, day_file, day_file, day_file),
    ).fetchone()


def log_thread(config: RunnableConfig) -> str:
    """The key of a run's cursors in the log's index.

    NOTE: the run's (its state's): a team inside a parent graph starts afresh in every
    parent task, under the parent's thread id.
    """
    return run_key(config) or str((config.get("configurable") or {})[PROJECT_NAME_KEY])


def write_committed(
    runtime: Any,
    state: Mapping[str, Any],
    config: RunnableConfig | None = None,
    *,
    folder: Path | None = None,
    sync: bool = True,
    checkpointer: Any = None,
) -> list[str]:
    """Log what committed ``state`` adds to the thread's collaboration log.

    Call it where the state read is committed: for the state a router pass reads and
    the one its agents' nodes read (``write_committed_soon``), the human gate's, or after
    a run with ``flush_log``.
    Calling it twice on one state writes nothing the second time.

    Args:
        runtime: The team runtime (home folder, policy, clock).
        state: Committed state values of the thread.
        config: The run's config; the current LangGraph config when None.
        folder: The logs folder, when the caller has it (``log_folder``); found from the config otherwise.
        sync: Flush the lines to disk before returning (see ``append_events``).
        checkpointer: The thread's checkpointer, when ``config`` is not a task's (it finds
            the parents of a branch's checkpoints: ``cursors``).

    Returns:
        The lines written (empty when ``Policy.log`` is off, or the run names no
        thread and no project).
    """
    config = config if config is not None else get_config()
    folder = folder or log_folder(runtime, config)
    if folder is None:
        return []
    thread = log_thread(config)
    now = runtime.clock.now()
    stamp = now.strftime(TIME_FORMAT)

    def derive(cursor: Cursor) -> tuple[list[LogEvent], Cursor]:
        return derive_events(state, cursor, now=stamp, policy=runtime.policy)

    at = cursors.logged_at(config, state, checkpointer)
    return append_events(folder, project_name(config, runtime.project), thread, now, derive, sync=sync, at=at)
