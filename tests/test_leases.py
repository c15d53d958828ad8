"""One writer per thread, and resume values LangGraph would mishandle are refused up front."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from teamgraph import ScriptedChatModel, Team
from teamgraph.checkpoints.lease import LEASES_DIR, ThreadBusyError, _file_name
from teamgraph.cli.threads import new_thread_id
from teamgraph.graph.guarded import ResumeValueError
from tests.scripting import act, call

LEADER = "Team Leader"

SLOW_TEAM = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from teamgraph import ScriptedChatModel, Team

    def slow(messages):
        Path(sys.argv[2]).write_text("started")
        time.sleep(3)
        return "Done slowly."

    team = Team(model=ScriptedChatModel({"Team Leader": [slow, "Again."]}), home=sys.argv[1])
    team.compile().invoke({"messages": [("user", "Go")]}, {"configurable": {"thread_id": "shared"}})
    """
)


@pytest.mark.slow
def test_a_second_process_is_refused_while_a_run_holds_the_thread_then_may_go_on(tmp_path):
    home, started = tmp_path / "home", tmp_path / "started"
    script = tmp_path / "slow_team.py"
    script.write_text(SLOW_TEAM, encoding="utf-8")
    first = subprocess.Popen([sys.executable, str(script), str(home), str(started)])
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert first.poll() is None and time.monotonic() < deadline, "the first run never started"
            time.sleep(0.05)
        team = Team(model=ScriptedChatModel({LEADER: ["(turn 1 was the first run's)", "Again."]}), home=home)
        graph, config = team.compile(), {"configurable": {"thread_id": "shared"}}
        with pytest.raises(ThreadBusyError, match="'shared'"):
            graph.invoke({"messages": [("user", "Me too")]}, config)
    finally:
        assert first.wait(timeout=60) == 0
    # The refused run changed nothing; once the first run ended the thread is free.
    assert [m.content for m in graph.get_state(config).values["messages"]] == ["Go", "Done slowly."]
    out = graph.invoke({"messages": [("user", "Me too")]}, config)
    assert out["messages"][-1].content == "Again."


@pytest.mark.slow
def test_a_lease_whose_holder_died_is_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    folder = tmp_path / LEASES_DIR
    folder.mkdir(parents=True)
    import socket

    lease = {"thread_id": "t", "pid": int(dead.stdout), "host": socket.gethostname(), "since": "2026-01-01T00:00:00"}
    (folder / _file_name("t")).write_text(json.dumps(lease))
    # NOTE: a checkpointer without a lease table of ours (the SQLite default leases in its file).
    team = Team(model=ScriptedChatModel({LEADER: ["Hello."]}), home=tmp_path, checkpointer=InMemorySaver())
    out = team.compile().invoke({"messages": [("user", "Hi")]}, {"configurable": {"thread_id": "t"}})
    assert out["messages"][-1].content == "Hello."
    assert not (folder / _file_name("t")).exists()  # released when the run ended


def test_two_runs_of_one_thread_in_one_process_are_refused_too(tmp_path):
    entered, release = threading.Event(), threading.Event()

    def hold(messages):
        entered.set()
        release.wait(30)
        return "First."

    team = Team(model=ScriptedChatModel({LEADER: [hold, "Second."]}), home=tmp_path)
    graph, config = team.compile(), {"configurable": {"thread_id": "t"}}
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(graph.invoke, {"messages": [("user", "One")]}, config)
        assert entered.wait(30)
        with pytest.raises(ThreadBusyError):
            graph.invoke({"messages": [("user", "Two")]}, config)
        release.set()
        assert first.result()["messages"][-1].content == "First."
    assert graph.invoke({"messages": [("user", "Two")]}, config)["messages"][-1].content == "Second."


@pytest.mark.parametrize("value", [{1: "x"}, {}, None], ids=["int-key", "empty", "none"])
def test_resume_values_langgraph_would_mishandle_are_refused_and_change_nothing(tmp_path, value):
    team = Team(
        model=ScriptedChatModel({LEADER: [act(call("ask_user", question="Colour?")), "Blue it is."]}), home=tmp_path
    )
    graph, config = team.compile(), {"configurable": {"thread_id": "t"}}
    paused = graph.invoke({"messages": [("user", "Go")]}, config)
    before = graph.get_state(config)
    with pytest.raises(ResumeValueError):
        graph.invoke(Command(resume=value), config)
    after = graph.get_state(config)
    assert after.config["configurable"]["checkpoint_id"] == before.config["configurable"]["checkpoint_id"]
    (request_id,) = paused["__interrupt__"][0].value["requests"]
    out = graph.invoke(Command(resume={request_id: "blue"}), config)  # still resumable
    assert out["messages"][-1].content == "Blue it is."


def test_thread_ids_handed_out_at_the_same_moment_are_distinct(tmp_path):
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(lambda _: new_thread_id(tmp_path, "run"), range(16)))
    assert sorted(ids, key=lambda t: int(t.split("-")[1])) == [f"run-{n}" for n in range(1, 17)]


def test_a_long_task_is_stored_once_not_again_at_every_leader_step(tmp_path):
    # NOTE: the user-facing conversation is a delta channel: ten leader steps over a 300 KB task
    # keep a handful of copies of it, where a plain channel adds it again to every checkpoint.
    steps = [act(call("list_agents"))] * 10
    team = Team(model=ScriptedChatModel({LEADER: [*steps, "Done."]}), home=tmp_path)
    graph, config = team.compile(), {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": [("user", "x" * 300_000)]}, config)
    db = tmp_path / "teamgraph.sqlite"
    # NOTE: what the file keeps, its WAL folded in (the WAL holds every page each commit rewrote).
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    stored = sum(p.stat().st_size for p in (db, db.with_name(db.name + "-wal")) if p.exists())
    assert stored < 8 * 300_000, stored
    ids = [m.id for m in graph.get_state(config).values["messages"]]
    reopened = Team(model=ScriptedChatModel({}), home=tmp_path).compile()
    assert [m.id for m in reopened.get_state(config).values["messages"]] == ids  # replayed the same
