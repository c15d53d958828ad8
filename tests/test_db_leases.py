"""One run per thread wherever the graph runs: the lease in the checkpointer's database, fenced writes.

Each scenario runs on SQLite (the default, the lease in the team's file) and on a real
PostgreSQL (``pg_fixtures``). A paused or cut-off writer is simulated by expiring its
lease row, as its heartbeat would have stopped renewing it.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from pg_fixtures import postgres_server, postgres_url  # noqa: F401

from teamgraph import ScriptedChatModel, Team
from teamgraph.checkpoints import close_checkpointer, open_checkpointer
from teamgraph.checkpoints.db_lease import LEASE_ENV, TABLE, leases_for
from teamgraph.checkpoints.lease import LEASES_DIR, Holder, LeaseLostError, ThreadBusyError

LEADER = "Team Leader"
OTHER_MACHINE = Holder(token="other", host="replica-b", pid=4242, since="2026-12-02T10:00:00+00:00", run_id="r-b")


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path) -> str:
    """The team's database: its SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "home" / "teamgraph.sqlite")
    return request.getfixturevalue("postgres_url")


@contextmanager
def raw(db: str) -> Iterator[Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]]:
    """A separate connection to the database (another process's view), autocommitting."""
    if db.startswith("postgresql"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:

            def run_pg(sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
                cur = conn.execute(sql.replace("?", "%s"), params)
                return cur.fetchall() if cur.description else []

            yield run_pg
        return
    conn = sqlite3.connect(db, isolation_level=None, timeout=10)
    try:

        def run_sqlite(sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
            return conn.execute(sql, params).fetchall()

        yield run_sqlite
    finally:
        conn.close()


def blocking_team(tmp_path, db: str, *, after: list[str] | None = None):
    """A team whose leader's first turn waits for ``release`` (a run in flight); the events."""
    entered, release = threading.Event(), threading.Event()

    def hold(messages):
        entered.set()
        assert release.wait(60)
        return "First."

    team = Team(
        model=ScriptedChatModel({LEADER: [hold, *(after or ["Second."])]}), home=tmp_path / "home", checkpointer=db
    )
    return team, entered, release


def test_a_second_run_of_a_thread_under_a_servers_checkpointer_is_refused_naming_the_holder(tmp_path):
    # The API server compiles the team without a checkpointer and sets its own on a copy of the graph.
    entered, release = threading.Event(), threading.Event()

    def hold(messages):
        entered.set()
        assert release.wait(60)
        return "First."

    team = Team(model=ScriptedChatModel({LEADER: [hold, "Second."]}), home=tmp_path, checkpointer=False)
    graph = team.compile().copy(update={"checkpointer": InMemorySaver()})
    config = {"configurable": {"thread_id": "t"}, "metadata": {"run_id": "run-1"}}
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(graph.invoke, {"messages": [("user", "One")]}, config)
        assert entered.wait(30)
        with pytest.raises(ThreadBusyError, match=r"'t'.*run-1"):
            graph.invoke({"messages": [("user", "Two")]}, {"configurable": {"thread_id": "t"}})
        release.set()
        assert [m.content for m in first.result()["messages"]] == ["One", "First."]
    out = graph.invoke({"messages": [("user", "Two")]}, {"configurable": {"thread_id": "t"}})
    assert [m.content for m in out["messages"]] == ["One", "First.", "Two", "Second."]


def test_the_lease_is_a_row_in_the_database_while_the_run_goes_on_and_gone_after(tmp_path, db):
    team, entered, release = blocking_team(tmp_path, db)
    graph, config = team.compile(), {"configurable": {"thread_id": "t"}}
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(graph.invoke, {"messages": [("user", "One")]}, config)
        assert entered.wait(30)
        with raw(db) as sql:
            assert [row[0] for row in sql(f"SELECT thread_id FROM {TABLE}", ())] == ["t"]
        release.set()
        first.result()
    with raw(db) as sql:
        assert sql(f"SELECT thread_id FROM {TABLE}", ()) == []
    assert not (tmp_path / "home" / LEASES_DIR).exists()


def test_a_run_is_refused_while_another_machine_holds_a_live_lease_and_changes_nothing(tmp_path, db):
    team = Team(model=ScriptedChatModel({LEADER: ["Hello.", "Again."]}), home=tmp_path / "home", checkpointer=db)
    graph, config = team.compile(), {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": [("user", "Hi")]}, config)
    before = graph.get_state(config).config["configurable"]["checkpoint_id"]
    with raw(db) as sql:
        sql(
            f"INSERT INTO {TABLE} (thread_id, token, host, pid, run_id, since, expires_at) VALUES (?,?,?,?,?,?,?)",
            ("t", OTHER_MACHINE.token, OTHER_MACHINE.host, OTHER_MACHINE.pid, "r-b", OTHER_MACHINE.since, 4e9),
        )
    with pytest.raises(ThreadBusyError, match=r"'t'.*replica-b"):
        graph.invoke({"messages": [("user", "Me too")]}, config)
    with pytest.raises(ThreadBusyError, match="replica-b"):  # an edit outside a run is fenced too
        graph.update_state(config, {"messages": [("user", "sneaked in")]})
    assert graph.get_state(config).config["configurable"]["checkpoint_id"] == before
    with raw(db) as sql:  # expired: taken over
        sql(f"UPDATE {TABLE} SET expires_at = 0", ())
    assert graph.invoke({"messages": [("user", "Me too")]}, config)["messages"][-1].content == "Again."


def test_a_lease_whose_holder_process_died_is_taken_over_at_once(tmp_path, db):
    import socket
    import subprocess
    import sys

    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True).stdout)
    team = Team(model=ScriptedChatModel({LEADER: ["Hello."]}), home=tmp_path / "home", checkpointer=db)
    graph = team.compile()
    with raw(db) as sql:
        sql(
            f"INSERT INTO {TABLE} (thread_id, token, host, pid, run_id, since, expires_at) VALUES (?,?,?,?,?,?,?)",
            ("t", "dead", socket.gethostname(), dead, None, "2026-12-02T10:00:00+00:00", 4e9),
        )
    out = graph.invoke({"messages": [("user", "Hi")]}, {"configurable": {"thread_id": "t"}})
    assert out["messages"][-1].content == "Hello."


def test_a_writer_whose_lease_expired_fails_on_its_next_write_and_the_thread_does_not_fork(tmp_path, db):
    team, entered, release = blocking_team(tmp_path, db, after=["Resumed."])
    graph, config = team.compile(), {"configurable": {"thread_id": "t"}}
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(graph.invoke, {"messages": [("user", "One")]}, config)
        assert entered.wait(30)
        saved = graph.get_state(config)
        with raw(db) as sql:  # paused past its lease: another holder took over, then finished
            sql(f"UPDATE {TABLE} SET token = 'zombie-killer', expires_at = 0", ())
        release.set()
        with pytest.raises(LeaseLostError, match="'t'"):
            first.result()
    after = graph.get_state(config)
    assert after.config["configurable"]["checkpoint_id"] == saved.config["configurable"]["checkpoint_id"]
    with raw(db) as sql:
        ids = sql("SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''", ("t",))
        parents = sql("SELECT parent_checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''", ("t",))
    children = [p[0] for p in parents if p[0] is not None]
    assert len(children) == len(set(children)) == len(ids) - 1  # one chain: no checkpoint has two children
    out = graph.invoke(None, config)  # the thread goes on from its last saved checkpoint: the call is redone
    assert [m.content for m in out["messages"]] == ["One", "First."]


def test_two_takers_of_an_expired_lease_race_and_exactly_one_wins(tmp_path, db):
    savers = [open_checkpointer(db, home=tmp_path) for _ in range(2)]
    try:
        stores = [leases_for(s) for s in savers]
        assert all(stores)
        barrier = threading.Barrier(2)

        def take(store):
            # NOTE: holders on other machines: the race is in the database, not this process's registry
            holder = Holder(token=uuid.uuid4().hex, host=f"replica-{id(store)}", pid=1, since="now")
            barrier.wait()
            try:
                store.acquire("t", holder)
            except ThreadBusyError:
                return "refused"
            return "won"

        for _ in range(5):
            with raw(db) as sql:
                sql(f"DELETE FROM {TABLE}", ())
            with ThreadPoolExecutor(2) as pool:
                outcomes = sorted(pool.map(take, stores))
            assert outcomes == ["refused", "won"]
    finally:
        for saver in savers:
            close_checkpointer(saver)


def test_processes_opening_a_fresh_postgres_database_at_once_do_not_crash(postgres_url, tmp_path):  # noqa: F811
    barrier = threading.Barrier(6)

    def open_one(_):
        barrier.wait()
        saver = open_checkpointer(postgres_url, home=tmp_path)
        close_checkpointer(saver)
        return True

    with ThreadPoolExecutor(6) as pool:
        assert all(pool.map(open_one, range(6)))


def test_a_connection_the_server_closes_mid_run_is_replaced_and_the_run_goes_on(
    postgres_url,  # noqa: F811
    tmp_path,
):
    """Issue 31 (failure 10) beside issue 30's fence: the lease is a row, not a session, so a
    connection the server closed (a restart, an admin) is replaced at the next call and the
    run's writes are still fenced by its lease."""
    import psycopg

    team, entered, release = blocking_team(tmp_path, postgres_url)
    graph, config = team.compile(), {"configurable": {"thread_id": "t"}}
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(graph.invoke, {"messages": [("user", "One")]}, config)
        assert entered.wait(30)
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        release.set()
        assert [m.content for m in first.result(timeout=60)["messages"]] == ["One", "First."]
    again = Team(model=ScriptedChatModel({LEADER: []}), home=tmp_path / "again", checkpointer=postgres_url)
    assert [m.content for m in again.compile().get_state(config).values["messages"]] == ["One", "First."]


def test_under_a_servers_checkpointer_a_run_whose_thread_went_on_without_it_is_refused(tmp_path):
    # A worker paused past its heartbeat: the server gave its run to another worker, which wrote on.
    team, entered, release = blocking_team(tmp_path, False)
    graph = team.compile().copy(update={"checkpointer": InMemorySaver()})
    config = {"configurable": {"thread_id": "t"}}
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(graph.invoke, {"messages": [("user", "One")]}, config)
        assert entered.wait(30)
        taken_over = graph.update_state(config, {"messages": [("user", "Written by the other worker")]})
        release.set()
        with pytest.raises(LeaseLostError, match="'t'"):
            first.result()
    latest = graph.get_state(config)
    assert latest.config["configurable"]["checkpoint_id"] == taken_over["configurable"]["checkpoint_id"]
    assert [m.content for m in latest.values["messages"]] == ["One", "Written by the other worker"]


def test_under_a_servers_checkpointer_a_run_from_a_past_checkpoint_forks_as_asked(tmp_path):
    team = Team(model=ScriptedChatModel({LEADER: ["First.", "Second.", "Again."]}), home=tmp_path, checkpointer=False)
    graph = team.compile().copy(update={"checkpointer": InMemorySaver()})
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": [("user", "One")]}, config)
    past = graph.get_state(config).config
    graph.invoke({"messages": [("user", "Two")]}, config)
    forked = graph.invoke({"messages": [("user", "Instead")]}, past)
    assert [m.content for m in forked["messages"]][:3] == ["One", "First.", "Instead"]


def test_a_run_longer_than_its_lease_keeps_it_by_its_heartbeat(tmp_path, db, monkeypatch):
    monkeypatch.setenv(LEASE_ENV, "0.6")  # NOTE: renewed every 0.2 s; the model call below takes 1.5 s

    def slow(messages):
        time.sleep(1.5)
        return "Slow but mine."

    team = Team(model=ScriptedChatModel({LEADER: [slow]}), home=tmp_path / "home", checkpointer=db)
    out = team.compile().invoke({"messages": [("user", "Go")]}, {"configurable": {"thread_id": "t"}})
    assert out["messages"][-1].content == "Slow but mine."


@pytest.mark.parametrize("value", ["soon", "0", "-5"])
def test_a_bad_lease_length_is_refused_naming_the_setting(tmp_path, monkeypatch, value):
    monkeypatch.setenv(LEASE_ENV, value)
    with pytest.raises(ValueError, match=LEASE_ENV):
        Team(model=ScriptedChatModel({}), home=tmp_path).compile()


def test_a_servers_new_attempt_of_a_run_takes_the_lease_over_from_an_attempt_left_open(tmp_path):
    # The server retries a run whose attempt failed; the old attempt's stream was left open, holding the lease.
    team = Team(model=ScriptedChatModel({LEADER: ["Hello.", "Later."]}), home=tmp_path, checkpointer=False)
    graph = team.compile().copy(update={"checkpointer": InMemorySaver()})
    config = {"configurable": {"thread_id": "t"}, "metadata": {"run_id": "run-1"}}
    # NOTE: "sync": its first checkpoint is saved before the chunk comes (none lands later, from behind).
    old = graph.stream({"messages": [("user", "One")]}, config, stream_mode="updates", durability="sync")
    next(old)  # the old attempt holds the lease now
    try:
        with pytest.raises(ThreadBusyError, match="run-1"):  # another run is still refused
            graph.invoke(None, {"configurable": {"thread_id": "t"}, "metadata": {"run_id": "run-2"}})
        assert graph.invoke(None, config)["messages"][-1].content == "Hello."
    finally:
        old.close()
    later = graph.invoke({"messages": [("user", "Two")]}, {"configurable": {"thread_id": "t"}})  # the lease is free
    assert [m.content for m in later["messages"]] == ["One", "Hello.", "Two", "Later."]


def test_many_threads_run_at_once_in_one_process_while_their_leases_beat(tmp_path, db, monkeypatch):
    # NOTE: runs starting (the registry, then the database), fenced writes (the database, then the
    # registry) and heartbeats all at once on one connection: a lock order that deadlocks hangs here.
    # Each model call outlasts a heartbeat's interval (a third of the lease), so every run beats;
    # the lease is long enough that a busy machine's scheduling delay does not expire it.
    monkeypatch.setenv(LEASE_ENV, "1.2")

    def reply(messages):
        time.sleep(0.5)
        return "Done."

    team = Team(model=ScriptedChatModel({LEADER: [reply]}), home=tmp_path / "home", checkpointer=db)
    graph = team.compile()

    def run(n: int) -> str:
        config = {"configurable": {"thread_id": f"t{n}"}}
        return graph.invoke({"messages": [("user", "Go")]}, config)["messages"][-1].content

    pool = ThreadPoolExecutor(12)
    try:
        futures = [pool.submit(run, n) for n in range(24)]
        assert [f.result(timeout=300) for f in futures] == ["Done."] * 24  # NOTE: a hang guard, not a timing
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
