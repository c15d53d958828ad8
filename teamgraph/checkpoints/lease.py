"""One writer per thread: a lease file in the team's home while a run is under way.

Two processes that resume the same thread at once would both write checkpoints from
the same parent: the thread forks and one run's work is silently dropped. A lease
makes the second one fail at once with an error naming the thread. A lease whose
holder is gone (its process died) is taken over.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

LEASES_DIR = "leases"
GUARD_FILE = ".guard"

_HELD: set[str] = set()
"""Lease files this process holds now (a second run of the same thread in this process is refused too)."""
_HELD_LOCK = threading.Lock()


class ThreadBusyError(RuntimeError):
    """Another run of the same thread is under way (in this process or another one)."""


def _file_name(thread_id: str) -> str:
    # NOTE: thread ids are free text; the file name keeps a readable part and a hash.
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", thread_id)[:60]
    digest = hashlib.sha256(thread_id.encode()).hexdigest()[:12]
    return f"{readable}-{digest}.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True


def _holder_is_gone(holder: dict, path: Path) -> bool:
    if holder.get("host") != socket.gethostname():
        return False  # NOTE: a process on another machine cannot be checked: its lease is honoured
    pid = int(holder.get("pid", -1))
    if pid == os.getpid():
        return str(path) not in _HELD  # our own pid, but no run of ours holds it: left by a reused pid
    return not _alive(pid)


@contextlib.contextmanager
def hold_thread(home: Path, thread_id: str) -> Iterator[None]:
    """Hold the lease of ``thread_id`` for the duration of a run.

    Args:
        home: The team's home folder (the lease lives in ``<home>/leases/``).
        thread_id: The thread the run writes to.

    Raises:
        ThreadBusyError: Another run of the thread holds the lease.
    """
    folder = Path(home) / LEASES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / _file_name(thread_id)
    with open(folder / GUARD_FILE, "a") as guard, _HELD_LOCK:
        fcntl.flock(guard, fcntl.LOCK_EX)
        try:
            holder = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
        except (OSError, ValueError):
            holder = None  # NOTE: a torn lease file (its writer died mid-write) holds nothing
        if holder is not None and (str(path) in _HELD or not _holder_is_gone(holder, path)):
            raise ThreadBusyError(
                f"thread {thread_id!r} is being run by process {holder.get('pid')} on {holder.get('host')} "
                f"(since {holder.get('since')}). Wait for that run to end or stop it; if that process is gone "
                f"for good, delete {path}."
            )
        record = {
            "thread_id": thread_id,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        path.write_text(json.dumps(record), encoding="utf-8")
        _HELD.add(str(path))
    try:
        yield
    finally:
        with _HELD_LOCK:
            _HELD.discard(str(path))
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def lease_holder(home: Path, thread_id: str) -> dict | None:
    """Who runs ``thread_id`` now: the live holder's record (pid, host, since), or None.

    A lease left by a process that is gone (Ctrl-C'd twice, killed) holds nothing: the
    thread is stopped, not running.
    """
    path = Path(home) / LEASES_DIR / _file_name(thread_id)
    try:
        holder = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(holder, dict):
        return None
    with _HELD_LOCK:
        return None if _holder_is_gone(holder, path) else holder
