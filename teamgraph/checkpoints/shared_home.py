"""One home folder for every process of a team on a shared database, checked at start.

With a PostgreSQL checkpointer, several processes or replicas run the same threads; the
project files, the collaboration log (and its index), the roles and the skills the team
writes live in its home folder, so that folder must be the same one everywhere (a shared
volume mounted at ``TEAMGRAPH_HOME``). A folder of the local disk instead splits a
thread's files between machines and logs its whole history again after a failover.

The check: the home holds a marker file (``.teamgraph-home``) with a random id written
once; the database remembers, per home key, the id it saw first (the ``teamgraph_homes``
table, or a LangGraph ``BaseStore`` when the database is not reachable directly). A
process whose home has no marker, or another id, while the database expects one refuses
to start with ``SharedHomeError``, and writes nothing. Two processes starting at once on
a fresh database agree: the table's row is written under an advisory lock, and the marker
is created by a hard link that fails if one exists.

The home key is the home's absolute path (library mode: ``Team(home=...)``), or, for the
API server's ``TEAMGRAPH_HOME``, one key for the whole deployment, so a replica started
with another path is caught too. SQLite (one machine) needs no check. Opt out for one
machine with ``TEAMGRAPH_SHARED_HOME=0`` or ``Team(shared_home=False)``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from teamgraph.checkpoints.files import FILE_MODE, private_dir
from teamgraph.checkpoints.store import close_checkpointer, describe_db, open_checkpointer

__all__ = [
    "MARKER",
    "SHARED_HOME_ENV",
    "HomeRecord",
    "SharedHomeError",
    "check_team_home",
    "open_checked",
    "shared_home_required",
]

SHARED_HOME_ENV = "TEAMGRAPH_SHARED_HOME"
MARKER = ".teamgraph-home"
TABLE = "teamgraph_homes"
SERVER_HOME_KEY = "server:TEAMGRAPH_HOME"
"""The key of the API server's home from ``TEAMGRAPH_HOME``: one for every replica, whatever its path."""
_LOCK_KEY = zlib.crc32(TABLE.encode())  # NOTE: any constant: serializes the first registrations
_OFF, _ON = ("0", "false", "no", "off"), ("", "1", "true", "yes", "on")
_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (home_key TEXT PRIMARY KEY, home_id TEXT NOT NULL, "
    "path TEXT NOT NULL, host TEXT NOT NULL, since TEXT NOT NULL)"
)
_SELECT = f"SELECT home_id, path, host, since FROM {TABLE} WHERE home_key = %s"
_INSERT = (
    f"INSERT INTO {TABLE} (home_key, home_id, path, host, since) VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (home_key) DO NOTHING"
)


class SharedHomeError(RuntimeError):
    """This process's home folder is not the one the team's database expects (see the module doc)."""


@dataclass(frozen=True)
class HomeRecord:
    """A home as the database remembers it.

    Attributes:
        home_id: The id in the home's marker file.
        path: The home's path on the process that registered it.
        host: That process's machine.
        since: When it registered it (UTC, ISO 8601).
    """

    home_id: str
    path: str
    host: str
    since: str


def shared_home_required(option: Any = None, environ: Mapping[str, str] | None = None) -> bool:
    """Whether to check the home: ``option`` (``Team(shared_home=...)``), else ``$TEAMGRAPH_SHARED_HOME`` (on).

    Raises:
        TypeError: ``option`` is not a bool or None.
        ValueError: The variable is not one of 1/0, true/false, yes/no, on/off.
    """
    if option is not None:
        if not isinstance(option, bool):
            raise TypeError(f"Team(shared_home=...) takes True, False or None; got {type(option).__name__} {option!r}.")
        return option
    raw = (environ if environ is not None else os.environ).get(SHARED_HOME_ENV, "").strip().lower()
    if raw in _OFF or raw in _ON:
        return raw not in _OFF
    raise ValueError(f"{SHARED_HOME_ENV}={raw!r} is not a switch. Set it to 0 (one machine: no check) or 1.")


# --- the marker -------------------------------------------------------------------------


def read_marker(home: Path) -> str | None:
    """The id in ``home``'s marker file; None when it has none.

    Raises:
        SharedHomeError: The marker exists but holds no id (edited or torn by hand).
    """
    path = Path(home) / MARKER
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        home_id = json.loads(text)["id"]
    except (ValueError, KeyError, TypeError):
        home_id = None
    if not isinstance(home_id, str) or not home_id:
        raise SharedHomeError(
            f'the home marker {path} holds no home id (expected JSON like {{"id": "..."}}). Restore it from '
            "another replica's home, or delete it if no database has seen this home yet."
        )
    return home_id


def ensure_marker(home: Path) -> tuple[str, bool]:
    """The id of ``home``'s marker, created if missing; and whether this call created it.

    NOTE: written to a file of its own, then hard-linked to the marker's name: the link
    fails if a marker exists, so two processes creating it at once on one (shared)
    folder end with one id, never a torn file.
    """
    found = read_marker(home)
    if found is not None:
        return found, False
    private_dir(home)
    record = {"id": uuid.uuid4().hex, "host": socket.gethostname(), "since": _now()}
    draft = Path(home) / f"{MARKER}.{uuid.uuid4().hex}"
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(record))
            out.flush()
            os.fsync(out.fileno())
        os.link(draft, Path(home) / MARKER)
        return record["id"], True
    except FileExistsError:
        return str(read_marker(home)), False
    finally:
        draft.unlink(missing_ok=True)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# --- the check ----------------------------------------------------------------------------


Registry = tuple[Callable[[], HomeRecord | None], Callable[[HomeRecord], HomeRecord]]
"""How a database remembers a home key: (what it holds, add this record and give back the winner)."""


def check_home(home: Path, *, registry: Registry, where: str) -> str:
    """Refuse ``home`` unless it is the home ``registry`` remembers; register it when there is none.

    Args:
        home: This process's home folder.
        registry: The database's record of the home key (``Registry``).
        where: The database, for the error.

    Returns:
        The home's id.

    Raises:
        SharedHomeError: The database expects another home (nothing was written).
    """
    recorded, add = registry
    expected = recorded()
    if expected is not None:
        found = read_marker(home)
        if found != expected.home_id:
            raise SharedHomeError(_mismatch(home, expected, found, where))
        return found
    home_id, created = ensure_marker(home)
    winner = add(HomeRecord(home_id, str(Path(home).absolute()), socket.gethostname(), _now()))
    if winner.home_id != home_id:  # NOTE: another folder registered at the same moment (no lock: a store)
        if created:
            (Path(home) / MARKER).unlink(missing_ok=True)
        raise SharedHomeError(_mismatch(home, winner, home_id if not created else None, where))
    return home_id


def _mismatch(home: Path, expected: HomeRecord, found: str | None, where: str) -> str:
    has = f"its marker {MARKER} holds id {found}" if found else f"it has no marker {MARKER}"
    return (
        f"the home folder {Path(home).absolute()} on host {socket.gethostname()} is not the team's shared home: "
        f"{has}, but the database {where} expects home id {expected.home_id} (registered from "
        f"{expected.path} on host {expected.host} at {expected.since}). Project files, the collaboration log, "
        "roles and skills live in the home, so every process or replica on this database must use the same "
        f"folder. Fix: mount the shared volume (NFS, EFS...) at {Path(home).absolute()} (TEAMGRAPH_HOME), or, "
        f"on a single machine, opt out with {SHARED_HOME_ENV}=0 or Team(shared_home=False). Nothing was changed."
    )


# --- PostgreSQL: a table -------------------------------------------------------------------


def _record(row: Any) -> HomeRecord | None:
    if row is None:
        return None
    values = list(row.values()) if isinstance(row, Mapping) else list(row)
    return HomeRecord(*(str(v) for v in values))


def check_postgres_home(conn: Any, home: Path, *, key: str, where: str) -> str:
    """``check_home`` against the ``teamgraph_homes`` table, in one transaction under an advisory lock.

    Args:
        conn: A psycopg connection (autocommit; the transaction is this call's).
        home: This process's home folder.
        key: The home key (see the module doc).
        where: The database, for the error.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        conn.execute(_CREATE)

        def recorded() -> HomeRecord | None:
            return _record(conn.execute(_SELECT, (key,)).fetchone())

        def add(record: HomeRecord) -> HomeRecord:
            conn.execute(_INSERT, (key, *asdict(record).values()))
            return recorded() or record

        return check_home(home, registry=(recorded, add), where=where)


def home_key(home: Path) -> str:
    """The key of a library team's home: its absolute path."""
    return f"path:{Path(home).expanduser().absolute()}"


def check_team_home(saver: Any, home: Path, *, required: bool) -> None:
    """At a ``Team``'s start: check ``home`` when ``saver`` is a (sync) PostgreSQL checkpointer.

    Raises:
        SharedHomeError: The database expects another home.
    """
    conn = getattr(saver, "conn", None)
    if not required or not type(saver).__module__.startswith("langgraph.checkpoint.postgres"):
        return
    import psycopg

    if not isinstance(conn, psycopg.Connection):
        return  # NOTE: an async connection cannot be used from here; see docs/past-one-machine.md
    info = conn.info
    where = f"postgresql://{info.host}:{info.port}/{info.dbname}"
    with getattr(saver, "lock", contextlib.nullcontext()):
        check_postgres_home(conn, home, key=home_key(home), where=where)


def open_checked(db: str | Path | None, *, home: Path, required: bool) -> Any:
    """``open_checkpointer`` then ``check_team_home``; a refused home closes what was opened.

    Raises:
        SharedHomeError: The database expects another home.
    """
    saver = open_checkpointer(db, home=home)
    with _closed_on_error(saver):
        check_team_home(saver, home, required=required)
    return saver


@contextlib.contextmanager
def _closed_on_error(saver: Any) -> Iterator[None]:
    try:
        yield
    except BaseException:
        close_checkpointer(saver)
        raise


def describe(url: str) -> str:
    """A database URL for messages (no password)."""
    return describe_db(url, ".")
