"""One run per thread: a lease held while a run is under way, wherever the graph runs.

Two runs of one thread at once both write checkpoints from the same parent: the thread
forks and one run's work is silently dropped (in one process they also share the steps
in flight and loop). So a run holds its thread's lease, and a second run is refused at
once with an error naming the thread and who holds it. Where the lease lives:

- with a database checkpointer of ours (SQLite, PostgreSQL): a row in that database,
  with holder, expiry and heartbeat, and every write is fenced (``db_lease.py``);
- with another checkpointer given to ``Team``: a file in the team's home;
- with a checkpointer the API server brings: this process only (the server queues the
  runs of one thread across its replicas).

Every run also takes the lease in this process's registry, so a second run in the same
process is refused whatever the store, and fenced writes know which holder they belong to.
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
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

LEASES_DIR = "leases"
GUARD_FILE = ".guard"
LOCAL_STORE = "process"
"""The store key of a lease only this process knows (no database of ours)."""

_HELD: dict[tuple[str, str], Holder] = {}
"""The leases this process holds now: (store key, thread id) -> holder."""
_HELD_LOCK = threading.Lock()


class ThreadBusyError(RuntimeError):
    """Another run of the same thread is under way (in this process or another one)."""


class LeaseLostError(RuntimeError):
    """A run's lease expired or was taken over: its write is refused so the thread does not fork."""


@dataclass(frozen=True)
class Holder:
    """Who holds a thread's lease.

    Attributes:
        token: Unique to one hold (a fenced write must carry the token that holds the lease now).
        host: The holder's machine.
        pid: The holder's process id.
        since: When the hold began (UTC, ISO 8601).
        run_id: The run's id when the caller gave one (the API server does).
    """

    token: str
    host: str
    pid: int
    since: str
    run_id: str | None = None

    @classmethod
    def mine(cls, run_id: str | None = None) -> Holder:
        """A new hold by this process."""
        since = datetime.now(UTC).isoformat(timespec="seconds")
        return cls(token=uuid.uuid4().hex, host=socket.gethostname(), pid=os.getpid(), since=since, run_id=run_id)

    def describe(self) -> str:
        """``process 12 on host-a (run r1, since 2026-…)``."""
        run = f"run {self.run_id}, " if self.run_id else ""
        return f"process {self.pid} on {self.host} ({run}since {self.since})"

    def retries(self, other: Holder) -> bool:
        """Whether this hold is a new attempt of the run ``other`` holds (same run id).

        An API server retries a run whose attempt failed or whose worker it swept, and runs one
        attempt of a run at a time: the new attempt takes the lease over (an earlier attempt
        still going is a zombie, refused at its next write by the fence).
        """
        return self.run_id is not None and self.run_id == other.run_id

    def is_gone(self) -> bool:
        """Whether the holder is a process of this machine that no longer runs it.

        A process on another machine cannot be checked: its lease is honoured until it expires.
        """
        if self.host != socket.gethostname():
            return False
        if self.pid == os.getpid():
            # NOTE: our own pid but none of our runs holds it: left by an earlier process with this pid.
            with _HELD_LOCK:
                return all(held.token != self.token for held in _HELD.values())
        return not _alive(self.pid)


class LeaseStore(Protocol):
    """Where leases live beyond this process (``db_lease.py``)."""

    key: str

    def acquire(self, thread_id: str, holder: Holder) -> None:
        """Take the lease or raise ThreadBusyError naming the holder."""

    def renewer(self, thread_id: str, holder: Holder) -> contextlib.AbstractContextManager[object]:
        """Keep the lease alive while the run goes on (a heartbeat)."""

    def release(self, thread_id: str, holder: Holder) -> None:
        """Give the lease up (only if ``holder`` still holds it)."""


def busy_message(thread_id: str, holder: Holder, *, until: str = "") -> str:
    """The error for a second run of a busy thread: the thread, the holder, what to do."""
    expiry = f" Its lease runs until {until} unless renewed." if until else ""
    return (
        f"thread {thread_id!r} is being run by {holder.describe()}.{expiry} Wait for that run to end or stop it, "
        "or run another thread."
    )


def held_by_me(store_key: str, thread_id: str) -> Holder | None:
    """This process's hold of ``thread_id`` in ``store_key``, if a run of it is under way."""
    with _HELD_LOCK:
        return _HELD.get((store_key, thread_id))


@contextlib.contextmanager
def hold_run(store: LeaseStore | None, thread_id: str, *, run_id: str | None = None) -> Iterator[Holder]:
    """Hold the lease of ``thread_id`` for the duration of a run.

    Args:
        store: Where the lease lives beyond this process (None: this process only).
        thread_id: The thread the run writes to.
        run_id: The run's id, shown to a run that is refused.

    Raises:
        ThreadBusyError: Another run of the thread holds the lease.
    """
    key = (store.key if store is not None else LOCAL_STORE, thread_id)
    holder = Holder.mine(run_id)
    # NOTE: the registry's lock is never held while the store is used: a fenced write holds the
    # store's lock and then reads the registry, so the other order would deadlock.
    with _HELD_LOCK:
        current = _HELD.get(key)
        if current is not None and not holder.retries(current):
            raise ThreadBusyError(busy_message(thread_id, current))
        _HELD[key] = holder
    try:
        if store is not None:
            store.acquire(thread_id, holder)
        with store.renewer(thread_id, holder) if store is not None else contextlib.nullcontext():
            yield holder
    finally:
        with _HELD_LOCK:
            if _HELD.get(key) is holder:
                del _HELD[key]
        if store is not None:
            store.release(thread_id, holder)


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


class FileLeases:
    """Leases as files in a home folder, for a checkpointer that has no lease table of ours.

    A lease file whose holder process is gone is taken over; one held by another machine
    is honoured (a home folder is one machine's).
    """

    def __init__(self, home: Path) -> None:
        self.folder = Path(home) / LEASES_DIR
        self.key = f"file:{self.folder.resolve()}"

    def acquire(self, thread_id: str, holder: Holder) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / _file_name(thread_id)
        with open(self.folder / GUARD_FILE, "a") as guard:
            fcntl.flock(guard, fcntl.LOCK_EX)
            current = _read_holder(path)
            if current is not None and not current.is_gone():
                raise ThreadBusyError(
                    f"{busy_message(thread_id, current)} If that process is gone for good, delete {path}."
                )
            path.write_text(json.dumps({"thread_id": thread_id, **asdict(holder)}), encoding="utf-8")

    def renewer(self, thread_id: str, holder: Holder) -> contextlib.AbstractContextManager[object]:
        return contextlib.nullcontext()  # NOTE: a file lease never expires; a dead holder is detected by pid

    def release(self, thread_id: str, holder: Holder) -> None:
        path = self.folder / _file_name(thread_id)
        current = _read_holder(path)
        if current is not None and current.token == holder.token:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def lease_holder(home: Path, thread_id: str, *, saver: object = None) -> Holder | None:
    """Who runs ``thread_id`` now: the live holder of its lease, or None.

    The lease is in the checkpointer's database when ``saver`` has a lease table of ours
    (``db_lease.py``), else a file in ``home``. A lease left by a process that is gone
    (Ctrl-C'd twice, killed) holds nothing: the thread is stopped, not running.
    """
    leases = getattr(saver, "_teamgraph_leases", None)
    if leases is not None:
        holder: Holder | None = leases.holder(thread_id)
        return holder
    holder = _read_holder(Path(home) / LEASES_DIR / _file_name(thread_id))
    return None if holder is None or holder.is_gone() else holder


def _read_holder(path: Path) -> Holder | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None  # NOTE: a torn lease file (its writer died mid-write) holds nothing
    return Holder(
        token=str(record.get("token", "")),
        host=str(record.get("host", "")),
        pid=int(record.get("pid", -1)),
        since=str(record.get("since", "")),
        run_id=record.get("run_id"),
    )


def hold_thread(home: Path, thread_id: str) -> contextlib.AbstractContextManager[Holder]:
    """Hold ``thread_id``'s lease as a file in ``home`` (see ``FileLeases``)."""
    return hold_run(FileLeases(home), thread_id)
