"""Review 6: the Team's saver after lazy histories (pre-folded writes, kept rows, snapshots as batches).

Each test in "defects" failed on ff09303; the others pin what was probed and found sound.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from typing import Annotated, Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Overwrite
from pg_fixtures import postgres_server, postgres_url  # noqa: F401
from typing_extensions import TypedDict

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.checkpoints import open_checkpointer, open_sqlite_saver
from teamgraph.checkpoints.saver import TeamSqliteSaver
from teamgraph.checkpoints.serde import TeamSerializer
from teamgraph.history import History
from teamgraph.state import RecordsUpdate, merge_records
from tests.test_calls_in_flight import two_members as script

LEADER = "Team Leader"
R1, U1 = "Researcher_1", "UI Operator_1"
CHANNELS = ("histories", "agents", "requests", "deliveries", "messages")


@pytest.fixture
def small_snapshots(snapshot_every):
    """DeltaChannel snapshots every 3 updates (set before compiling, restored after)."""
    snapshot_every(3)


def plain(value: Any) -> Any:
    """A state value with every History as a list (what a reader compares)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (History, list, tuple)):
        return [plain(v) for v in value]
    return value


def reference_graph(team_home, db_path):
    """The Team's graph on LangGraph's own SqliteSaver (one write replayed at a time), same file."""
    reference = SqliteSaver(sqlite3.connect(db_path, check_same_thread=False), serde=TeamSerializer())
    return Team(model=ScriptedChatModel({}), home=team_home, checkpointer=reference).compile()


def assert_every_checkpoint_reads_as_langgraphs(team_home, team: Team, config: dict) -> int:
    """Every checkpoint of the thread (all branches) loads to the values LangGraph's saver rebuilds."""
    ours = Team(model=ScriptedChatModel({}), home=team_home).compile()
    assert isinstance(ours.checkpointer, TeamSqliteSaver)
    theirs = reference_graph(team_home, team.db_path)
    checked = 0
    for snapshot in theirs.get_state_history(config):
        mine = ours.get_state(snapshot.config)
        for channel in CHANNELS:
            assert plain(mine.values.get(channel)) == plain(snapshot.values.get(channel)), (
                channel,
                snapshot.config["configurable"]["checkpoint_id"],
            )
        checked += 1
    assert [plain(x.values) for x in ours.get_state_history(config)] == [
        plain(x.values) for x in theirs.get_state_history(config)
    ]
    latest = ours.get_state(config)
    assert plain(latest.values) == plain(theirs.get_state(config).values)
    return checked


def second_turn(team_home, config: dict, *, policy: Policy | None = None):
    """A new Team on the same file answers one more message (the resume path)."""
    first_turns = sum(m.type == "ai" for m in Team(model=ScriptedChatModel({}), home=team_home).history(config, LEADER))
    again = Team(model=ScriptedChatModel({LEADER: [*[""] * first_turns, "All done."]}), home=team_home, policy=policy)
    again.compile().invoke({"messages": [HumanMessage("Anything left?")]}, config)
    return again


@pytest.mark.parametrize("cadence", [None, 3])
def test_user_updates_between_team_writes_load_as_langgraph_replays_them(team_home, snapshot_every, cadence):
    if cadence:
        snapshot_every(cadence)
    config = {"configurable": {"thread_id": "edits"}}
    team = Team(model=ScriptedChatModel(script()), home=team_home)
    graph = team.compile()
    graph.invoke({"messages": [HumanMessage("Please do the work.")]}, config)
    values = graph.get_state(config).values
    agents = {name: dict(record) for name, record in values["agents"].items()}
    agents[R1] = {**agents[R1], "note": "overwritten"}
    # NOTE: a user's edits between the Team's writes: an Overwrite, plain dicts, a record losing keys.
    graph.update_state(config, {"agents": Overwrite(agents)})
    graph.update_state(
        config, {"requests": {"user_1": {"id": "user_1", "kind": "note", "status": "closed", "n": 1.5, "x": None}}}
    )
    graph.update_state(config, {"requests": {"user_1": {"id": "user_1", "kind": "note", "status": "closed"}}})
    graph.update_state(config, {"histories": {R1: [HumanMessage("edited", id="edit-1")]}})
    graph.update_state(config, {"histories": Overwrite({**{k: list(v) for k, v in values["histories"].items()}})})
    graph.update_state(config, {"messages": [HumanMessage("a user's note", id="note-1")]})
    # NOTE: a fork: an edit of an older checkpoint starts a second branch; the run goes on from the first.
    head = graph.get_state(config).config
    older = list(graph.get_state_history(config))[8].config
    graph.update_state(older, {"agents": {U1: {**agents[U1], "note": "forked"}}})
    second_turn(team_home, head)
    assert assert_every_checkpoint_reads_as_langgraphs(team_home, team, config) > 10


def test_lockstep_supersteps_with_several_tasks_load_as_langgraph_replays_them(team_home, small_snapshots):
    config = {"configurable": {"thread_id": "lockstep"}}
    team = Team(model=ScriptedChatModel(script()), home=team_home, policy=Policy(scheduling="lockstep"))
    team.compile().invoke({"messages": [HumanMessage("Please do the work.")]}, config)
    second_turn(team_home, config, policy=Policy(scheduling="lockstep"))
    assert assert_every_checkpoint_reads_as_langgraphs(team_home, team, config) > 10


CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from langchain_core.messages import HumanMessage
    import teamgraph.state
    teamgraph.state.HISTORY_SNAPSHOT_FREQUENCY = 2
    from teamgraph import ScriptedChatModel, Team
    from tests.test_calls_in_flight import two_members

    home, turn = sys.argv[1], sys.argv[2]
    config = {"configurable": {"thread_id": "strict"}}
    if turn == "first":
        Team(model=ScriptedChatModel(two_members()), home=home).compile().invoke(
            {"messages": [HumanMessage("Please do the work.")]}, config
        )
    else:
        turns = sum(m.type == "ai" for m in Team(model=ScriptedChatModel({}), home=home).history(config, "Team Leader"))
        team = Team(model=ScriptedChatModel({"Team Leader": [*[""] * turns, "All done."]}), home=home)
        team.compile().invoke({"messages": [HumanMessage("Anything left?")]}, config)
        print(team.history(config, "Team Leader")[-1].text, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # NOTE: no clean close of the SQLite file
    """
)


def test_a_thread_resumed_in_a_killed_process_under_strict_msgpack_reads_as_langgraphs(team_home, tmp_path):
    child = tmp_path / "child.py"
    child.write_text(CHILD, encoding="utf-8")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join([root, os.path.join(root, "tests")])
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true", "PYTHONPATH": path}
    for turn in ("first", "second"):
        done = subprocess.run(
            [sys.executable, str(child), str(team_home), turn],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=root,
            env=env,
        )
        assert done.returncode == -9, done.stderr[-3000:]
    assert done.stdout.strip() == "All done."
    team = Team(model=ScriptedChatModel({}), home=team_home)
    config = {"configurable": {"thread_id": "strict"}}
    assert assert_every_checkpoint_reads_as_langgraphs(team_home, team, config) > 10
    histories = team.compile().get_state(config).values["histories"]
    assert all(isinstance(h, History) for h in histories.values())


def test_an_async_thread_with_snapshots_reads_as_langgraphs_with_the_sync_saver(team_home, small_snapshots):
    import asyncio

    from teamgraph.checkpoints.aio import open_async_sqlite_saver

    config = {"configurable": {"thread_id": "async"}}
    db = team_home / "teamgraph.sqlite"

    async def main() -> dict:
        async with open_async_sqlite_saver(db) as saver:
            team = Team(model=ScriptedChatModel(script()), home=team_home, checkpointer=saver)
            graph = team.compile()
            await graph.ainvoke({"messages": [HumanMessage("Please do the work.")]}, config)
            turns = sum(m.type == "ai" for m in await team.ahistory(config, LEADER))
            again = Team(
                model=ScriptedChatModel({LEADER: [*[""] * turns, "All done."]}), home=team_home, checkpointer=saver
            )
            await again.compile().ainvoke({"messages": [HumanMessage("Anything left?")]}, config)
            return {name: list(h) for name, h in (await again.astate(config))["histories"].items()}

    written = asyncio.run(main())
    assert written[LEADER][-1].text == "All done."
    team = Team(model=ScriptedChatModel({}), home=team_home)
    assert assert_every_checkpoint_reads_as_langgraphs(team_home, team, config) > 10
    assert plain(team.state(config)["histories"]) == plain(written)


def test_kept_rows_serve_threads_and_instances_as_the_file_does(team_home, small_snapshots):
    first, second = {"configurable": {"thread_id": "one"}}, {"configurable": {"thread_id": "two"}}
    for config in (first, second):
        Team(model=ScriptedChatModel(script()), home=team_home).compile().invoke(
            {"messages": [HumanMessage("Please do the work.")]}, config
        )
    reader = Team(model=ScriptedChatModel({}), home=team_home).compile()
    reference = reference_graph(team_home, team_home / "teamgraph.sqlite")
    configs = [s.config for c in (first, second) for s in reference.get_state_history(c)]
    expected = {c["configurable"]["checkpoint_id"]: plain(reference.get_state(c).values) for c in configs}
    # NOTE: two threads load checkpoints of two threads at once through one saver (one kept load).
    failures: list[Any] = []

    def load(order: list[dict]) -> None:
        for config in order:
            got = plain(reader.get_state(config).values)
            if got != expected[config["configurable"]["checkpoint_id"]]:
                failures.append(config)

    workers = [threading.Thread(target=load, args=(configs,)), threading.Thread(target=load, args=(configs[::-1],))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert failures == []
    # An older checkpoint, then the latest; then another instance moves the thread on and deletes the other.
    assert plain(reader.get_state(configs[5]).values) == expected[configs[5]["configurable"]["checkpoint_id"]]
    before = reader.get_state(first)
    second_turn(team_home, first)
    after = reader.get_state(first)
    assert after.config != before.config and plain(after.values) == plain(reference.get_state(first).values)
    assert after.values["histories"][LEADER][-1].text == "All done."
    reader.get_state(second)
    open_sqlite_saver(team_home / "teamgraph.sqlite").delete_thread("two")
    assert reader.get_state(second).values == {}


def append_items(current: list | None, writes: list) -> list:
    """An order-sensitive reducer: each write's items appended in turn."""
    return [*(current or []), *(item for write in writes for item in write)]


class FanState(TypedDict):
    items: Annotated[list[str], DeltaChannel(append_items)]


def test_writes_of_several_tasks_in_one_checkpoint_replay_in_langgraphs_order(tmp_path):
    # NOTE: Send tasks' ids (hashes) sort apart from their task paths: the scan's order is not
    # LangGraph's, so the Team's saver sorts (`_in_order`); a Team's own runs never needed it.
    from langgraph.types import Send

    import teamgraph.checkpoints.saver as saver_module

    builder = StateGraph(FanState)
    builder.add_node("fan", lambda state: {})
    builder.add_node("write", lambda arg: {"items": [f"item {arg['n']}"]})
    builder.add_edge(START, "fan")
    builder.add_conditional_edges("fan", lambda state: [Send("write", {"n": n}) for n in range(8)])
    builder.add_edge("write", END)
    path = tmp_path / "fan.sqlite"
    graph = builder.compile(checkpointer=open_sqlite_saver(path))
    config = {"configurable": {"thread_id": "fan"}}
    sorted_loads: list[bool] = []
    in_order = saver_module._in_order

    def spy(*columns: list) -> Any:
        rows = in_order(*columns)
        sorted_loads.append(rows.task_ids != columns[2])
        return rows

    saver_module._in_order = spy
    try:
        for _ in range(3):
            graph.invoke({"items": []}, config)
        ours = graph.get_state(config).values["items"]
    finally:
        saver_module._in_order = in_order
    reference = SqliteSaver(sqlite3.connect(path, check_same_thread=False), serde=TeamSerializer())
    theirs = builder.compile(checkpointer=reference).get_state(config).values["items"]
    assert any(sorted_loads)
    assert ours == theirs and len(ours) == 24


# --- defects ------------------------------------------------------------------------------------


def add_notes(current: dict | None, writes: list) -> dict:
    """A user's reducer: per key, a new list with the written messages appended (no in-place change)."""
    merged = dict(current or {})
    for write in writes:
        for key, messages in write.items():
            notes = merged.get(key, []).copy()
            notes.extend(messages)
            merged[key] = notes
    return merged


class NotesState(TypedDict):
    notes: Annotated[dict[str, list[BaseMessage]], DeltaChannel(add_notes, snapshot_frequency=2)]


def take_note(state: NotesState) -> dict:
    return {"notes": {"a": [HumanMessage(f"note {len(state.get('notes', {}).get('a', []))}")]}}


def notes_graph(checkpointer):
    builder = StateGraph(NotesState)
    builder.add_node("take_note", take_note)
    builder.add_edge(START, "take_note")
    builder.add_edge("take_note", END)
    return builder.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("saver", ["langgraph", "team", "team-postgres"])
def test_a_users_channel_shaped_like_histories_keeps_its_lists(tmp_path, saver, request):
    # NOTE: any DeltaChannel snapshot of {str: [messages]} is stored as history batches, and comes
    # back as History (no copy/append/extend): a user's graph on the Team's saver breaks once its
    # channel is snapshotted, where LangGraph's saver gives back the lists it was given.
    path = tmp_path / "notes.sqlite"
    if saver == "team":
        checkpointer = open_sqlite_saver(path)
    elif saver == "team-postgres":  # NOTE: PostgresSaver stores the snapshot alone (teamgraph-history-snapshot)
        checkpointer = open_checkpointer(request.getfixturevalue("postgres_url"), home=tmp_path)
    else:
        checkpointer = SqliteSaver(sqlite3.connect(path, check_same_thread=False))
        checkpointer.setup()
    graph = notes_graph(checkpointer)
    config = {"configurable": {"thread_id": "notes"}}
    for _ in range(4):
        graph.invoke({}, config)
    notes = graph.get_state(config).values["notes"]["a"]
    assert type(notes) is list
    assert [m.text for m in notes] == [f"note {i}" for i in range(4)]


@pytest.mark.parametrize("record", [b"\xc3", b"\x01"])
def test_a_record_written_as_bytes_is_kept_as_written(record):
    # NOTE: merge_records takes any bytes record for one the Team's saver handed over still
    # encoded, and unpacks it: a user's update_state of {"requests": {"r": b"\xc3"}} stores True
    # (b"\x01" gives 1, b"abc" raises MsgpackDecodeError), where an upsert keeps what was written.
    assert merge_records({}, [{"r": record}]) == {"r": record}
    assert merge_records({"r": {"id": "r"}}, [RecordsUpdate({"r": record})]) == {"r": record}


def test_a_loaded_history_written_back_under_overwrite_is_stored(team_home):
    # NOTE: review 5 made values holding a History storable as plain lists (update_state with
    # get_state's values), but not inside an Overwrite: LangGraph's encoder raises "Type is not
    # msgpack serializable: Overwrite", which a plain SqliteSaver's lists never do.
    config = {"configurable": {"thread_id": "overwrite"}}
    Team(model=ScriptedChatModel(script()), home=team_home).compile().invoke(
        {"messages": [HumanMessage("Please do the work.")]}, config
    )
    graph = Team(model=ScriptedChatModel({}), home=team_home).compile()
    histories = graph.get_state(config).values["histories"]
    assert all(isinstance(h, History) for h in histories.values())
    kept = {name: h for name, h in histories.items() if name != U1}
    graph.update_state(config, {"histories": Overwrite(kept)})
    after = Team(model=ScriptedChatModel({}), home=team_home).compile().get_state(config).values["histories"]
    assert plain(after) == plain(kept)
