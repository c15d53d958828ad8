"""A team run from async code: ainvoke / astream on AsyncSqliteSaver, or the Team's own saver.

The step nodes are sync (a role subgraph runs with ``.invoke``); under ``ainvoke``
LangGraph runs them in a thread executor, where ``read_team_state`` still reads
the team state. These tests run whole teams that way (``asyncio.run`` in plain
tests: no pytest-asyncio).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langgraph.types import Command

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.checkpoints.aio import open_async_sqlite_saver
from teamgraph.demo import DEMO_SCRIPT

TASK = "Build a login feature"
MEMBERS = {"Team Leader", "UI Operator_1", "UI Operator_2", "Full-Stack Engineer_1"}
FINAL = "The login feature is built."

# A member asks the user (Policy(ask="human")): the run pauses, then resumes.
ASK_SCRIPT = {
    "Team Leader": [
        {
            "tool_calls": [
                {"name": "create_sub_agent", "args": {"role_id": "ui-operator", "task": "Design the login page."}}
            ]
        },
        "",
        "The login page is designed, in blue as you asked.",
    ],
    "UI Operator_1": [
        {"tool_calls": [{"name": "ask_master", "args": {"question": "Which colour should the login page use?"}}]},
        "Login page designed in blue.",
    ],
}


def _config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def _demo_team(home: Path, saver: Any, **kwargs: Any) -> Team:
    return Team(model=ScriptedChatModel(DEMO_SCRIPT), home=home, checkpointer=saver, **kwargs)


def test_ainvoke_demo_to_the_end(tmp_path: Path) -> None:
    db = tmp_path / "teamgraph.sqlite"

    async def main() -> tuple[dict[str, Any], Any, list, dict]:
        async with open_async_sqlite_saver(db) as saver:
            team = _demo_team(tmp_path, saver)
            graph = team.compile()
            config = _config("async-1")
            out = await graph.ainvoke({"messages": [("user", TASK)]}, config)
            snapshot = await graph.aget_state(config)
            history = await team.ahistory(config, "UI Operator_2")
            agents = await team.aagents(config)
            return out, snapshot, history, agents

    out, snapshot, history, agents = asyncio.run(main())
    assert out["messages"][-1].content.startswith(FINAL)
    assert snapshot.next == ()
    values = snapshot.values
    assert set(values["agents"]) == MEMBERS == set(agents)
    assert all(rec["status"] == "idle" for rec in agents.values()), agents
    for name in MEMBERS:
        assert any(isinstance(m, AIMessage) for m in values["histories"][name]), name
    # UI Operator_2 asked UI Operator_1 for its palette and got the answer.
    assert history[-1].content.startswith("Sign-up page done")
    assert any("Indigo #4F46E5" in str(m.content) for m in history)
    # The project files the members wrote (tools ran in the executor threads).
    for path in ("web/login.html", "web/signup.html", "api/auth.py"):
        assert (tmp_path / "project" / "async-1" / path).is_file(), path  # the thread's project folder
    # The saver's file is in WAL mode, as the sync saver's is.
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_async_thread_is_readable_by_sync_code(tmp_path: Path) -> None:
    """A thread written by AsyncSqliteSaver reads back with the default (sync) saver."""

    async def main() -> dict[str, int]:
        async with open_async_sqlite_saver(tmp_path / "teamgraph.sqlite") as saver:
            team = _demo_team(tmp_path, saver)
            await team.compile().ainvoke({"messages": [("user", TASK)]}, _config("async-2"))
            values = await team.astate(_config("async-2"))
            return {name: len(h) for name, h in values["histories"].items()}

    written = asyncio.run(main())
    sync_team = Team(model=ScriptedChatModel(DEMO_SCRIPT), home=tmp_path)  # SQLite in home
    read = {name: len(sync_team.history(_config("async-2"), name)) for name in MEMBERS}
    assert read == written


@pytest.mark.parametrize("own_saver", [False, True], ids=["async-sqlite", "teams-own"])
def test_astream_and_parallel_threads(tmp_path: Path, own_saver: bool) -> None:
    """Several threads at once on one saver, one of them streamed token by token."""

    async def main() -> tuple[set[str], list[dict[str, Any]], list]:
        async with contextlib.AsyncExitStack() as stack:
            saver = (
                None
                if own_saver
                else await stack.enter_async_context(open_async_sqlite_saver(tmp_path / "teamgraph.sqlite"))
            )
            graph = _demo_team(tmp_path, saver).compile()
            agents: set[str] = set()

            async def streamed() -> None:
                async for _, mode, data in graph.astream(
                    {"messages": [("user", TASK)]},
                    _config("streamed"),
                    stream_mode=["updates", "messages", "custom"],
                    subgraphs=True,
                ):
                    if mode == "messages" and isinstance(data[0], AIMessageChunk):
                        agents.add(data[1]["teamgraph_agent"])

            outs = await asyncio.gather(
                streamed(),
                *(graph.ainvoke({"messages": [("user", TASK)]}, _config(f"p{i}")) for i in range(3)),
            )
            states = [await graph.aget_state(_config(t)) for t in ("streamed", "p0", "p1", "p2")]
            return agents, outs[1:], states

    agents, outs, states = asyncio.run(main())
    assert agents == MEMBERS
    for out in outs:
        assert out["messages"][-1].content.startswith(FINAL)
    for state in states:
        assert state.values["messages"][-1].content.startswith(FINAL)
        assert set(state.values["histories"]) == MEMBERS


def test_sync_reads_refuse_the_event_loop_thread(tmp_path: Path) -> None:
    """Why Team has astate/ahistory/aagents: AsyncSqliteSaver refuses sync calls in its loop."""

    async def main() -> None:
        async with open_async_sqlite_saver(tmp_path / "teamgraph.sqlite") as saver:
            team = _demo_team(tmp_path, saver)
            await team.compile().ainvoke({"messages": [("user", TASK)]}, _config("async-3"))
            with pytest.raises(asyncio.InvalidStateError):
                team.history(_config("async-3"), "Team Leader")
            assert await team.ahistory(_config("async-3"), "Team Leader")
            with pytest.raises(KeyError, match="No agent named 'Nobody_1'"):
                await team.ahistory(_config("async-3"), "Nobody_1")

    asyncio.run(main())


def test_ainvoke_pauses_for_a_person_and_resumes(tmp_path: Path) -> None:
    """The human gate's interrupt and Command(resume=...) under ainvoke."""

    async def main() -> tuple[dict, Any, dict, list]:
        async with open_async_sqlite_saver(tmp_path / "teamgraph.sqlite") as saver:
            team = Team(
                model=ScriptedChatModel(ASK_SCRIPT),
                home=tmp_path,
                checkpointer=saver,
                policy=Policy(ask="human"),
            )
            graph = team.compile()
            config = _config("async-ask")
            paused = await graph.ainvoke({"messages": [("user", "Design a login page")]}, config)
            snapshot = await graph.aget_state(config)
            done = await graph.ainvoke(Command(resume={"ask_1": "Use blue"}), config)
            return paused, snapshot, done, await team.ahistory(config, "UI Operator_1")

    paused, snapshot, done, history = asyncio.run(main())
    (interrupt,) = paused["__interrupt__"]
    request = interrupt.value["requests"]["ask_1"]
    assert request["from"] == "UI Operator_1"
    assert request["question"] == "Which colour should the login page use?"
    assert snapshot.next == ("human",)
    assert "__interrupt__" not in done
    assert done["messages"][-1].content == "The login page is designed, in blue as you asked."
    assert any("Use blue" in str(m.content) for m in history)
    assert history[-1].content == "Login page designed in blue."


@pytest.mark.parametrize("saver", ["the Team's", "async sqlite"])
def test_an_async_run_makes_no_blocking_call_on_the_event_loop(tmp_path: Path, saver: str) -> None:
    """``await graph.ainvoke(...)`` on the saver ``Team(home=...)`` opens (a notebook cell) or on
    the async one: the API server's detector of blocking calls (blockbuster) finds none on
    the loop, the thread's lease included; sync code then reads the same checkpoints."""
    from blockbuster import blockbuster_ctx

    config = _config("no-blocking")

    async def main() -> tuple[dict, dict, list, list, Team]:
        async with contextlib.AsyncExitStack() as stack:
            given = None
            if saver == "async sqlite":
                given = await stack.enter_async_context(open_async_sqlite_saver(tmp_path / "teamgraph.sqlite"))
            team = Team(
                model=ScriptedChatModel(ASK_SCRIPT), home=tmp_path, checkpointer=given, policy=Policy(ask="human")
            )
            graph = team.compile()
            with blockbuster_ctx():
                paused = await graph.ainvoke({"messages": [("user", "Design a login page")]}, config)
                done = await graph.ainvoke(Command(resume={"ask_1": "Use blue"}), config)
                history = await team.ahistory(config, "UI Operator_1")
                states = [state.config for state in await _history(graph, config)]
        return paused, done, history, states, team

    paused, done, history, states, team = asyncio.run(main())
    assert list(paused["__interrupt__"][0].value["requests"]) == ["ask_1"]
    assert done["messages"][-1].content == "The login page is designed, in blue as you asked."
    assert history[-1].content == "Login page designed in blue."
    reader = Team(model=ScriptedChatModel({}), home=tmp_path).compile()
    assert [s.config for s in reader.get_state_history(config)] == states
    assert Team(model=ScriptedChatModel({}), home=tmp_path).history(config, "UI Operator_1") == history


async def _history(graph: Any, config: dict[str, Any]) -> list[Any]:
    return [state async for state in graph.aget_state_history(config)]


def test_an_async_run_cancelled_while_it_takes_its_lease_gives_the_lease_back(tmp_path: Path, monkeypatch) -> None:
    """A notebook's cell stopped as the run starts: the thread is not left busy in this process."""
    import threading

    from teamgraph.checkpoints.db_lease import DbLeases
    from teamgraph.checkpoints.lease import ThreadBusyError

    acquire, started, proceed = DbLeases.acquire, threading.Event(), threading.Event()

    def held_back(self: Any, thread_id: str, holder: Any) -> None:
        started.set()
        proceed.wait(10)  # NOTE: the run is cancelled while its worker thread is here
        acquire(self, thread_id, holder)

    monkeypatch.setattr(DbLeases, "acquire", held_back)
    team = Team(model=ScriptedChatModel({"Team Leader": ["Done."]}), home=tmp_path)
    graph, config = team.compile(), _config("cancelled")

    async def main() -> str:
        run = asyncio.ensure_future(graph.ainvoke({"messages": [("user", "Hi")]}, config))
        await asyncio.to_thread(started.wait, 10)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        monkeypatch.setattr(DbLeases, "acquire", acquire)
        proceed.set()
        for _ in range(100):  # NOTE: a bound, not a timing: the lease is given back once taken
            try:
                out = await graph.ainvoke({"messages": [("user", "Hi")]}, config)
                return out["messages"][-1].content
            except ThreadBusyError:
                await asyncio.sleep(0.05)
        raise AssertionError("the cancelled run kept the thread's lease")

    assert asyncio.run(main()) == "Done."


@pytest.mark.parametrize("holder, second", [("async", "async"), ("async", "sync"), ("sync", "async")])
def test_a_second_run_of_a_thread_under_way_is_refused_whichever_side_is_async(
    tmp_path: Path, holder: str, second: str
) -> None:
    """The Team's own saver: a run holds its thread while its model call is under way; a second run of
    that thread (from the loop, or sync from a worker thread) is refused and changes nothing; other threads run."""
    import threading

    from teamgraph.checkpoints.lease import ThreadBusyError

    entered, release, calls = threading.Event(), threading.Event(), []

    def held(messages: Any) -> str:
        calls.append(messages)
        if len(calls) > 1:
            return "Other."  # NOTE: the other thread's leader (a thread's first turn is this one too)
        entered.set()
        release.wait(10)  # NOTE: the second run is tried while the first is here
        return "First."

    team = Team(model=ScriptedChatModel({"Team Leader": [held]}), home=tmp_path)
    graph, busy, other = team.compile(), _config("busy"), _config("other")

    async def run(how: str, config: dict[str, Any], text: str) -> dict:
        payload = {"messages": [("user", text)]}
        if how == "async":
            return await graph.ainvoke(payload, config)
        return await asyncio.to_thread(graph.invoke, payload, config)

    async def main() -> tuple[dict, str]:
        first = asyncio.ensure_future(run(holder, busy, "Go"))
        await asyncio.to_thread(entered.wait, 10)
        with pytest.raises(ThreadBusyError):
            await run(second, busy, "Me too")
        elsewhere = await run(second, other, "Hi")  # NOTE: another thread runs meanwhile
        release.set()
        return await first, elsewhere["messages"][-1].content

    done, elsewhere = asyncio.run(main())
    assert [m.content for m in done["messages"]] == ["Go", "First."]  # the refused run left no message
    assert elsewhere == "Other."
    assert [m.content for m in graph.get_state(busy).values["messages"]] == ["Go", "First."]
