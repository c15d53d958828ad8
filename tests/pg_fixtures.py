"""A real PostgreSQL for the tests: ``postgres_url`` gives each test a fresh database.

Where the server comes from, first found:

1. ``$TEAMGRAPH_TEST_PG`` (``.ci/run`` starts a cluster and exports it), e.g.
   ``postgresql://postgres@127.0.0.1:54329/postgres``;
2. a throwaway cluster started here with ``initdb`` / ``pg_ctl`` (on ``$PATH`` or
   under ``/usr/lib/postgresql/*/bin``) in a temporary folder, on a free loopback
   port, stopped when the session ends. As root, it runs as the ``postgres`` user
   (PostgreSQL refuses to run as root).

Tests that ask for it are skipped, saying why, only when neither works.

Use it from a test module with ``from pg_fixtures import postgres_server, postgres_url  # noqa: F401``.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

PG_ENV = "TEAMGRAPH_TEST_PG"
START_TIMEOUT_S = 60


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres_user(argv: list[str]) -> list[str]:
    """``argv`` run as the ``postgres`` user when we are root (PostgreSQL refuses root)."""
    if os.geteuid() != 0:
        return argv
    runuser = shutil.which("runuser")
    if runuser is None:
        raise RuntimeError("running as root without `runuser`: cannot start PostgreSQL as another user")
    return [runuser, "-u", "postgres", "--", *argv]


def _start_cluster(folder: Path) -> tuple[str, list[str]]:
    """Start a throwaway cluster in ``folder``; return its URL and the command that stops it."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        raise RuntimeError("no PostgreSQL binaries (initdb, pg_ctl): install Debian's `postgresql` package")
    if os.geteuid() == 0:
        import pwd

        try:
            user = pwd.getpwnam("postgres")
        except KeyError as e:
            raise RuntimeError("running as root and there is no `postgres` user to run PostgreSQL as") from e
        os.chown(folder, user.pw_uid, user.pw_gid)
    data, log = folder / "data", folder / "server.log"
    port = _free_port()
    subprocess.run(
        _as_postgres_user([initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]),
        check=True,
        capture_output=True,
        timeout=START_TIMEOUT_S,
    )
    # NOTE: room for the cluster tests' replicas (each holds a pool of connections).
    options = (
        f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off -c full_page_writes=off "
        "-c max_connections=300"
    )
    subprocess.run(
        _as_postgres_user(
            [pg_ctl, "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", str(START_TIMEOUT_S), "start"]
        ),
        check=True,
        capture_output=True,
        timeout=START_TIMEOUT_S + 10,
    )
    stop = _as_postgres_user([pg_ctl, "-D", str(data), "-m", "immediate", "stop"])
    return f"postgresql://postgres@127.0.0.1:{port}/postgres", stop


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a running PostgreSQL server's ``postgres`` database (skips if there is none)."""
    psycopg = pytest.importorskip("psycopg", reason="PostgreSQL tests need the postgres extra (psycopg)")
    url = os.environ.get(PG_ENV, "").strip()
    stop: list[str] = []
    folder = None
    if not url:
        folder = Path(tempfile.mkdtemp(prefix="teamgraph-pg-"))
        try:
            url, stop = _start_cluster(folder)
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            shutil.rmtree(folder, ignore_errors=True)
            detail = getattr(e, "stderr", b"") or b""
            pytest.skip(f"no PostgreSQL: set {PG_ENV} or install initdb/pg_ctl ({e} {detail[-300:]!r})")
    try:
        with psycopg.connect(url, connect_timeout=10) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError as e:
        pytest.skip(f"no PostgreSQL at {url}: {e}")
    try:
        yield url
    finally:
        if stop:
            subprocess.run(stop, capture_output=True, timeout=60, check=False)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _require_slow(request: pytest.FixtureRequest) -> None:
    """Fail a test that needs PostgreSQL but is not marked slow: the fast loop never starts a server."""
    if request.node.get_closest_marker("slow") is None:
        pytest.fail(
            f"{request.node.nodeid} needs PostgreSQL but is not marked slow: ask for a fixture, a parameter "
            "value or a name that tests/conftest.py marks slow (SLOW_FIXTURES, POSTGRES_PARAM, SLOW_TESTS)",
            pytrace=False,
        )


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest, postgres_server: str) -> Iterator[str]:
    """A new, empty database on the test server, dropped after the test."""
    import psycopg

    _require_slow(request)

    name = f"teamgraph_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(postgres_server)
    yield urlunsplit(parts._replace(path=f"/{name}"))
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def restartable_postgres(request: pytest.FixtureRequest) -> Iterator[tuple[str, Callable[[], None]]]:
    """A throwaway cluster of this test's own and the function that restarts it (kills its connections).

    NOTE: never ``$TEAMGRAPH_TEST_PG``: a test must not restart a server others use.
    """
    _require_slow(request)
    pytest.importorskip("psycopg", reason="PostgreSQL tests need the postgres extra (psycopg)")
    folder = Path(tempfile.mkdtemp(prefix="teamgraph-pg-restart-"))
    try:
        url, stop = _start_cluster(folder)
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"cannot start a PostgreSQL of its own to restart: {e}")
    pg_ctl = str(_pg_bin("pg_ctl"))
    # NOTE: "immediate": the server drops its connections like a crash; restart reuses the start options.
    restart = _as_postgres_user(
        [pg_ctl, "-D", str(folder / "data"), "-l", str(folder / "server.log"), "-m", "immediate", "-w", "restart"]
    )

    def restart_server() -> None:
        subprocess.run(restart, check=True, capture_output=True, timeout=START_TIMEOUT_S + 10)

    try:
        yield url, restart_server
    finally:
        subprocess.run(stop, capture_output=True, timeout=60, check=False)
        shutil.rmtree(folder, ignore_errors=True)
