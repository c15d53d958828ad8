"""One home folder for every process on a shared database: checked at start (``shared_home.py``).

A replica with a fresh local disk at the shared home's path is simulated by moving the
shared folder aside and opening a new, empty folder at its path.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import pytest
from langgraph.store.memory import InMemoryStore
from pg_fixtures import postgres_server, postgres_url  # noqa: F401

from teamgraph import ScriptedChatModel, Team
from teamgraph.checkpoints.server_home import (
    SERVER_DB_ENVS,
    acheck_store_home,
    check_server_home,
    server_database,
    server_home_key,
)
from teamgraph.checkpoints.shared_home import (
    MARKER,
    SERVER_HOME_KEY,
    SHARED_HOME_ENV,
    TABLE,
    SharedHomeError,
    check_postgres_home,
    ensure_marker,
    read_marker,
)

REPO = Path(__file__).resolve().parents[1]


def open_team(home: Path, db: str, **options) -> Team:
    team = Team(model=ScriptedChatModel({"Team Leader": ["Done."]}), home=home, checkpointer=db, **options)
    team.compile()
    return team


def homes_in(db: str) -> list[tuple[str, str]]:
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass(%s)", (TABLE,)).fetchone() == (None,):
            return []  # NOTE: no home was ever registered (a refused first start creates nothing)
        return [(str(k), str(i)) for k, i in conn.execute(f"SELECT home_key, home_id FROM {TABLE}").fetchall()]


def fresh_disk_at(home: Path) -> None:
    """Another machine's view of ``home``: the shared folder is not mounted, an empty one is there."""
    home.rename(home.with_name(home.name + "-shared"))
    home.mkdir()


@pytest.fixture(autouse=True)
def _check_on(monkeypatch):
    monkeypatch.delenv(SHARED_HOME_ENV, raising=False)
    for name in SERVER_DB_ENVS:
        monkeypatch.delenv(name, raising=False)


# --- library mode ----------------------------------------------------------------------------


def test_a_process_whose_home_is_not_the_shared_one_is_refused_and_changes_nothing(tmp_path, postgres_url):  # noqa: F811
    home = tmp_path / "home"
    first = open_team(home, postgres_url)
    registered = read_marker(home)
    assert registered and homes_in(postgres_url) == [(f"path:{home.absolute()}", registered)]
    first.graph.invoke({"messages": [("user", "Go.")]}, {"configurable": {"thread_id": "t1"}})

    fresh_disk_at(home)
    with pytest.raises(SharedHomeError) as refused:
        open_team(home, postgres_url)
    message = str(refused.value)
    assert str(home.absolute()) in message and registered in message and SHARED_HOME_ENV in message
    assert os.uname().nodename in message
    assert not (home / MARKER).exists() and not (home / "project").exists()
    assert homes_in(postgres_url) == [(f"path:{home.absolute()}", registered)]


def test_a_process_on_the_shared_home_is_accepted_and_sees_its_files(tmp_path, postgres_url):  # noqa: F811
    home = tmp_path / "home"
    open_team(home, postgres_url)
    marker = (home / MARKER).read_text(encoding="utf-8")
    second = open_team(home, postgres_url)
    config = {"configurable": {"thread_id": "t1"}}
    second.graph.invoke({"messages": [("user", "Go.")]}, config)
    assert second.report(config) == "Done."
    assert (home / MARKER).read_text(encoding="utf-8") == marker
    assert homes_in(postgres_url) == [(f"path:{home.absolute()}", json.loads(marker)["id"])]


def test_a_postgres_saver_given_to_the_team_is_checked_too(tmp_path, postgres_url):  # noqa: F811
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    home = tmp_path / "home"
    open_team(home, postgres_url)
    fresh_disk_at(home)
    with psycopg.connect(postgres_url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)
        saver.setup()
        with pytest.raises(SharedHomeError, match=read_marker(home.with_name("home-shared")) or "-"):
            Team(model=ScriptedChatModel({}), home=home, checkpointer=saver).compile()
    assert not (home / MARKER).exists()


def test_a_home_at_another_path_is_a_home_of_its_own(tmp_path, postgres_url):  # noqa: F811
    open_team(tmp_path / "a", postgres_url)
    open_team(tmp_path / "b", postgres_url)
    assert sorted(key for key, _ in homes_in(postgres_url)) == [f"path:{tmp_path / 'a'}", f"path:{tmp_path / 'b'}"]


def test_one_machine_opts_out_by_team_option_or_environment(tmp_path, postgres_url, monkeypatch):  # noqa: F811
    home = tmp_path / "home"
    open_team(home, postgres_url)
    fresh_disk_at(home)
    open_team(home, postgres_url, shared_home=False)
    monkeypatch.setenv(SHARED_HOME_ENV, "0")
    open_team(home, postgres_url)
    assert not (home / MARKER).exists()


def test_bad_switches_are_refused_naming_them(tmp_path, monkeypatch):
    with pytest.raises(TypeError, match="shared_home"):
        Team(model=ScriptedChatModel({}), home=tmp_path / "home", shared_home="no")
    monkeypatch.setenv(SHARED_HOME_ENV, "maybe")
    with pytest.raises(ValueError, match=SHARED_HOME_ENV):
        Team(model=ScriptedChatModel({}), home=tmp_path / "home")


def test_sqlite_needs_no_shared_home(tmp_path):
    team = Team(model=ScriptedChatModel({"Team Leader": ["Done."]}), home=tmp_path / "home")
    team.graph.invoke({"messages": [("user", "Go.")]}, {"configurable": {"thread_id": "t1"}})
    assert not (tmp_path / "home" / MARKER).exists()


def test_a_torn_marker_is_refused_naming_the_file(tmp_path, postgres_url):  # noqa: F811
    home = tmp_path / "home"
    home.mkdir()
    (home / MARKER).write_text("{", encoding="utf-8")
    with pytest.raises(SharedHomeError, match=MARKER):
        open_team(home, postgres_url)
    assert homes_in(postgres_url) == []


# --- two at once ---------------------------------------------------------------------------------

OPEN_AND_PRINT = textwrap.dedent(
    """
    import json, sys
    from teamgraph import ScriptedChatModel, Team
    Team(model=ScriptedChatModel({}), home=sys.argv[1], checkpointer=sys.argv[2]).compile()
    print(json.loads(open(sys.argv[1] + "/.teamgraph-home").read())["id"])
    """
)


def test_processes_opening_a_fresh_database_and_home_at_once_agree_on_one_id(tmp_path, postgres_url):  # noqa: F811
    home = tmp_path / "home"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN_AND_PRINT, str(home), postgres_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outcomes = [process.communicate(timeout=120) for process in processes]
    assert [p.returncode for p in processes] == [0] * 4, [err[-2000:] for _, err in outcomes]
    ids = {out.strip() for out, _ in outcomes}
    assert len(ids) == 1 and homes_in(postgres_url) == [(f"path:{home.absolute()}", ids.pop())]
    assert sorted(p.name for p in home.iterdir() if p.name.startswith(MARKER)) == [MARKER]


def test_two_folders_registering_one_key_at_once_one_wins_the_other_is_refused(tmp_path, postgres_url):  # noqa: F811
    import psycopg

    homes, start, outcomes = [tmp_path / "x", tmp_path / "y"], threading.Barrier(2), {}

    def register(home: Path) -> None:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            start.wait()
            try:
                outcomes[home.name] = check_postgres_home(conn, home, key="server:test", where="db")
            except SharedHomeError:
                outcomes[home.name] = None

    workers = [threading.Thread(target=register, args=(home,)) for home in homes]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    winners = {name: home_id for name, home_id in outcomes.items() if home_id is not None}
    assert len(outcomes) == 2 and len(winners) == 1
    (name, home_id), loser = next(iter(winners.items())), ({"x", "y"} - set(winners)).pop()
    assert homes_in(postgres_url) == [("server:test", home_id)] and read_marker(tmp_path / name) == home_id
    assert read_marker(tmp_path / loser) is None


def test_threads_creating_one_marker_at_once_get_one_id(tmp_path):
    home, start, ids = tmp_path / "home", threading.Barrier(8), []

    def create() -> None:
        start.wait()
        ids.append(ensure_marker(home))

    workers = [threading.Thread(target=create) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert len({home_id for home_id, _ in ids}) == 1 and sum(created for _, created in ids) == 1
    assert [p.name for p in home.iterdir()] == [MARKER]


# --- the API server ------------------------------------------------------------------------------


def test_a_replica_with_another_home_is_refused_at_build_by_the_servers_database(tmp_path, postgres_url):  # noqa: F811
    env = {"DATABASE_URI": postgres_url.replace("postgresql://", "postgresql+asyncpg://")}
    assert server_database(env) == postgres_url
    key = f"server:{uuid.uuid4().hex}"
    assert check_server_home(tmp_path / "replica-1", key=key, environ=env) is True
    assert check_server_home(tmp_path / "replica-1", key=key, environ=env) is True
    with pytest.raises(SharedHomeError, match="replica-2"):
        check_server_home(tmp_path / "replica-2", key=key, environ=env)
    assert not (tmp_path / "replica-2" / MARKER).exists()
    assert check_server_home(tmp_path / "replica-2", key=key, environ={**env, SHARED_HOME_ENV: "off"}) is True


def test_a_server_database_out_of_reach_leaves_the_check_to_each_run(tmp_path):
    env = {"POSTGRES_URI": "postgresql://nobody@127.0.0.1:1/none"}
    assert check_server_home(tmp_path / "home", key=f"server:{uuid.uuid4().hex}", environ=env) is False
    assert check_server_home(tmp_path / "home", key="k", environ={}) is False
    assert not (tmp_path / "home").exists()


def test_each_run_checks_the_home_in_the_servers_store(tmp_path):
    store, key = InMemoryStore(), f"server:{uuid.uuid4().hex}"
    asyncio.run(acheck_store_home(store, tmp_path / "replica-1", key=key))
    asyncio.run(acheck_store_home(store, tmp_path / "replica-1", key=key))
    with pytest.raises(SharedHomeError, match="replica-2"):
        asyncio.run(acheck_store_home(store, tmp_path / "replica-2", key=key))
    assert read_marker(tmp_path / "replica-2") is None


def test_the_servers_own_home_is_one_key_whatever_its_path(tmp_path):
    default = tmp_path / "srv" / "teamgraph"
    assert server_home_key(default, default) == SERVER_HOME_KEY
    assert server_home_key(str(default) + "/", str(default)) == SERVER_HOME_KEY
    assert server_home_key(tmp_path / "assistant", default) == f"path:{tmp_path / 'assistant'}"


# --- the server's threads --------------------------------------------------------------------------


def test_the_server_loop_runs_many_team_steps_at_once(monkeypatch):
    """Twenty blocking steps meet at a barrier: the loop's default executor (6 threads on 2 CPUs) would deadlock."""
    from teamgraph.studio import SERVER_THREADS_ENV, widen_executor

    monkeypatch.setenv(SERVER_THREADS_ENV, "32")
    meet = threading.Barrier(20, timeout=30)

    async def steps() -> list[int]:
        loop = asyncio.get_running_loop()
        widen_executor(loop)
        widen_executor(loop)  # NOTE: once per loop
        return await asyncio.gather(*(loop.run_in_executor(None, meet.wait) for _ in range(20)))

    assert sorted(asyncio.run(steps())) == list(range(20))


def test_a_bad_server_threads_setting_is_refused_naming_it():
    from teamgraph.studio import SERVER_THREADS_ENV, server_threads

    assert server_threads({}) == 256 and server_threads({SERVER_THREADS_ENV: "64"}) == 64
    for bad in ("0", "-3", "many"):
        with pytest.raises(ValueError, match=SERVER_THREADS_ENV):
            server_threads({SERVER_THREADS_ENV: bad})


def test_the_log_index_in_a_shared_home_keeps_a_rollback_journal_not_wal(tmp_path: Path) -> None:
    """WAL needs every writer on one machine; a shared home's replicas are on several."""
    from teamgraph.audit.log import _Index
    from teamgraph.checkpoints.shared_home import ensure_marker

    shared, local = tmp_path / "shared", tmp_path / "local"
    ensure_marker(shared)
    for home in (shared, local):
        (home / "logs" / "project").mkdir(parents=True)
    modes = {
        home.name: _Index(home / "logs" / "project").db.execute("PRAGMA journal_mode").fetchone()[0]
        for home in (shared, local)
    }
    assert modes == {"shared": "delete", "local": "wal"}
