"""The shared-home check under the LangGraph API server (``shared_home.py`` says what is checked).

The server brings its own checkpointer, so teamgraph opens no database of its own; a
replica checks its home:

- when the graph is built (the server imports it as it starts), in the server's own
  PostgreSQL (``DATABASE_URI``, or ``POSTGRES_URI``) when it can reach it: a replica whose
  home is not the shared one then fails to start;
- otherwise at every run, in the server's ``BaseStore`` (``ServerRuntime.store``): a run of
  a replica whose home is not the shared one fails with the same error.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Mapping
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from teamgraph.checkpoints.shared_home import (
    SERVER_HOME_KEY,
    HomeRecord,
    check_home,
    check_postgres_home,
    describe,
    home_key,
    shared_home_required,
)

__all__ = ["SERVER_DB_ENVS", "acheck_store_home", "check_server_home", "server_database", "server_home_key"]

SERVER_DB_ENVS = ("DATABASE_URI", "POSTGRES_URI")
STORE_NAMESPACE = ("teamgraph", "homes")
CONNECT_TIMEOUT_S = 5
_CHECKED: set[str] = set()
"""Home keys this process checked in the server's database (the store need not be asked)."""
_CHECKED_LOCK = threading.Lock()


def server_database(environ: Mapping[str, str] | None = None) -> str | None:
    """The server's PostgreSQL as a psycopg URL (``postgresql+asyncpg://`` made plain); None if unset."""
    env = environ if environ is not None else os.environ
    for name in SERVER_DB_ENVS:
        scheme, sep, rest = env.get(name, "").strip().partition("://")
        if sep and scheme.split("+")[0].lower() in ("postgresql", "postgres"):
            return f"postgresql://{rest}"
    return None


def server_home_key(home: str | Path, default_home: str | Path) -> str:
    """The deployment's key for the server's ``TEAMGRAPH_HOME``; an assistant's own home keys by path."""
    same = Path(home).expanduser().absolute() == Path(default_home).expanduser().absolute()
    return SERVER_HOME_KEY if same else home_key(Path(home))


def check_server_home(home: str | Path, *, key: str, environ: Mapping[str, str] | None = None) -> bool:
    """Check ``home`` in the server's database, if it can be reached.

    Returns:
        Whether it was checked (or needs no check); False: check it at each run instead.

    Raises:
        SharedHomeError: The database expects another home.
        ValueError: ``TEAMGRAPH_SHARED_HOME`` is not a switch.
    """
    if not shared_home_required(None, environ):
        return True
    url = server_database(environ)
    if url is None:
        return False
    try:
        import psycopg
    except ImportError:
        return False
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error:
        return False  # NOTE: not reachable from here: the store is asked at each run instead
    with conn:
        check_postgres_home(conn, Path(home).expanduser(), key=key, where=describe(url))
    with _CHECKED_LOCK:
        _CHECKED.add(key)
    return True


async def acheck_store_home(store: Any, home: str | Path, *, key: str) -> None:
    """At a run: check ``home`` in the server's store, unless its database was checked at build.

    NOTE: a store has no compare-and-set: two first registrations at once may both be
    written, and the later one wins; the other replica's check reads the winner back and
    fails, then or at its next run.

    Raises:
        SharedHomeError: The store remembers another home.
    """
    with _CHECKED_LOCK:
        if key in _CHECKED:
            return
    if store is None or not shared_home_required():
        return
    loop = asyncio.get_running_loop()

    def wait(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    def recorded() -> HomeRecord | None:
        item = wait(store.aget(STORE_NAMESPACE, key))
        value = getattr(item, "value", None) or {}
        return HomeRecord(**{k: str(value[k]) for k in (f.name for f in fields(HomeRecord))}) if value else None

    def add(record: HomeRecord) -> HomeRecord:
        wait(store.aput(STORE_NAMESPACE, key, asdict(record), index=False))
        return recorded() or record

    await asyncio.to_thread(check_home, Path(home).expanduser(), registry=(recorded, add), where="(the server's store)")
