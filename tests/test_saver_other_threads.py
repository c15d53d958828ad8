"""Threads the Team's saver did not write as a team writes them now read as LangGraph's saver
reads them: written at an older snapshot cadence (the roster's, on SQLite and PostgreSQL), by a
process killed after each turn under strict msgpack, before a channel became a DeltaChannel (a
user's channel, the team's conversation), and a user's own graphs (several tasks' writes in one
checkpoint, a channel shaped like the histories).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from typing import Annotated, Any

import pytest
from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph, add_messages
from pg_fixtures import postgres_server, postgres_url  # noqa: F401
from typing_extensions import TypedDict

from teamgraph import ScriptedChatModel, Team
from teamgraph.checkpoints import open_checkpointer, open_sqlite_saver
from teamgraph.checkpoints.serde import TeamSerializer
from teamgraph.history import History
from teamgraph.state import append_conversation
from tests.saver_fixtures import assert_every_checkpoint_reads_as_langgraphs, plain, second_turn
from tests.test_calls_in_flight import two_members as script

# --- an older snapshot cadence --------------------------------------------------------------------


def test_a_thread_written_at_the_old_roster_cadence_resumes_at_the_new_one_as_langgraph_reads_it(
    team_home, snapshot_every
):
    """A thread written when the roster snapshotted every 3000 updates, resumed with a roster
    cadence far below its count since the last snapshot (100 in the code; 2 here to reach it)."""

    config = {"configurable": {"thread_id": "roster"}}
    snapshot_every(3000, roster=3000)
    team = Team(model=ScriptedChatModel(script()), home=team_home)
    team.compile().invoke({"messages": [HumanMessage("Please do the work.")]}, config)
    before = plain(team.state(config)["agents"])
    snapshot_every(3000, roster=2)
    again = second_turn(team_home, config)
    assert again.history(config, "Team Leader")[-1].text == "All done."
    assert set(plain(again.state(config)["agents"])) == set(before)
    assert assert_every_checkpoint_reads_as_langgraphs(team_home, again, config) > 10


def test_a_postgres_thread_resumed_at_the_new_roster_cadence_reads_the_same_at_either_cadence(
    team_home, snapshot_every, request
):
    """On Postgres: written at the old roster cadence, resumed at a lower one; every checkpoint reads
    the same through a graph compiled at the old cadence and one at the new."""
    pg_url = request.getfixturevalue("postgres_url")
    config = {"configurable": {"thread_id": "pg-roster"}}

    def team(script_: dict) -> Team:
        saver = open_checkpointer(pg_url, home=team_home)
        return Team(model=ScriptedChatModel(script_), home=team_home, checkpointer=saver)

    snapshot_every(3000, roster=3000)
    first = team(script())
    first.compile().invoke({"messages": [HumanMessage("Please do the work.")]}, config)
    old_reader = team({}).compile()
    turns = sum(m.type == "ai" for m in first.history(config, "Team Leader"))
    snapshot_every(3000, roster=2)
    again = team({"Team Leader": [*[""] * turns, "All done."]})
    again.compile().invoke({"messages": [HumanMessage("Anything left?")]}, config)
    assert again.history(config, "Team Leader")[-1].text == "All done."
    new_reader = team({}).compile()
    checked = 0
    for snap in new_reader.get_state_history(config):
        assert plain(old_reader.get_state(snap.config).values) == plain(snap.values)
        checked += 1
    assert checked > 10


def test_the_studio_schemas_carry_the_roster_at_its_own_cadence(team_home):
    graph = Team(model=ScriptedChatModel({}), home=team_home).compile()
    assert set(graph.get_input_jsonschema()["properties"]) == {"messages"}
    assert {"agents", "messages", "team"} <= set(graph.get_output_jsonschema()["properties"])
    assert graph.channels["agents"].snapshot_frequency == 100
    assert graph.channels["histories"].snapshot_frequency == 3000


# --- another process ------------------------------------------------------------------------------


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


@pytest.mark.slow
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


# --- a channel moved to a DeltaChannel ------------------------------------------------------------


class NotesBefore(TypedDict):
    """A user's graph before: ``notes`` a plain channel (the checkpoint stores its whole value)."""

    notes: list[str]


def _appended(current: list | None, writes: list) -> list:
    return [*(current or []), *(item for write in writes for item in write)]


class NotesAfter(TypedDict):
    """The same graph after moving ``notes`` to a DeltaChannel (each write: the new notes)."""

    notes: Annotated[list[str], DeltaChannel(_appended, snapshot_frequency=50)]


def _whole_list(state: NotesBefore) -> dict:
    notes = state.get("notes", [])
    return {"notes": [*notes, f"n{len(notes)}"]}


def _notes_graph(schema, node, checkpointer):
    builder = StateGraph(schema)
    builder.add_node("note", node)
    builder.add_edge(START, "note")
    builder.add_edge("note", END)
    return builder.compile(checkpointer=checkpointer)


def test_a_channel_moved_to_a_delta_channel_reads_from_its_plain_value_as_langgraph_does(tmp_path):
    """LangGraph seeds a DeltaChannel from a plain value stored before the move ("migration from
    old blobs", ``DeltaChannel.from_checkpoint``). The walk's filter must look into checkpoints
    without an extension header too: were the plain value skipped, every older write would be
    replayed through the new reducer, and the Team's saver would read other notes than LangGraph's."""
    db = tmp_path / "notes.sqlite"
    config = {"configurable": {"thread_id": "notes"}}
    before = _notes_graph(NotesBefore, _whole_list, open_sqlite_saver(db))
    for _ in range(3):
        before.invoke({}, config)
    assert before.get_state(config).values["notes"] == ["n0", "n1", "n2"]
    after = _notes_graph(NotesAfter, lambda s: {"notes": [f"n{len(s['notes'])}"]}, open_sqlite_saver(db))
    after.invoke({}, config)
    reference = SqliteSaver(sqlite3.connect(db, check_same_thread=False), serde=TeamSerializer())
    theirs = _notes_graph(NotesAfter, lambda s: {}, reference)
    expected = theirs.get_state(config).values["notes"]
    assert expected == ["n0", "n1", "n2", "n3"]
    ours = _notes_graph(NotesAfter, lambda s: {}, open_sqlite_saver(db))
    assert ours.get_state(config).values["notes"] == expected


class ConversationBefore(TypedDict):
    """The conversation as older releases stored it: ``add_messages`` on a plain channel."""

    messages: Annotated[list[AnyMessage], add_messages]


class ConversationAfter(TypedDict):
    """The conversation as ``teamgraph/state.py`` stores it: a DeltaChannel."""

    messages: Annotated[list[AnyMessage], DeltaChannel(append_conversation, snapshot_frequency=3000)]


def _answer(state) -> dict:
    # NOTE: a message as a dict (a user's input, an OpenAI-style node): the write stored has no id;
    # ``add_messages`` gave the converted message an id, stored only in the checkpoint's plain value.
    return {"messages": [{"role": "assistant", "content": f"answer {len(state['messages'])}"}]}


def test_a_conversation_stored_before_it_was_a_delta_channel_keeps_its_message_ids(tmp_path):
    """A thread written while ``messages`` was a plain ``add_messages`` channel (older releases):
    its checkpoints hold the conversation with the ids ``add_messages`` gave. LangGraph's saver
    seeds from them; a walk that skipped those checkpoints would replay every write through
    ``append_conversation``, which gives id-less writes other ids: the conversation the user reads
    (and any ``RemoveMessage`` by id) would change on the first resume."""
    db = tmp_path / "old.sqlite"
    config = {"configurable": {"thread_id": "old"}}
    before = _notes_graph(ConversationBefore, _answer, open_sqlite_saver(db))
    for text in ("first", "second"):
        before.invoke({"messages": [{"role": "user", "content": text}]}, config)
    stored = [m.id for m in before.get_state(config).values["messages"]]
    after = _notes_graph(ConversationAfter, _answer, open_sqlite_saver(db))
    after.invoke({"messages": [HumanMessage("third", id="third")]}, config)
    reference = SqliteSaver(sqlite3.connect(db, check_same_thread=False), serde=TeamSerializer())
    theirs = _notes_graph(ConversationAfter, _answer, reference).get_state(config).values["messages"]
    assert [m.text for m in theirs] == ["first", "answer 1", "second", "answer 3", "third", "answer 5"]
    assert [m.id for m in theirs][:4] == stored
    ours = _notes_graph(ConversationAfter, _answer, open_sqlite_saver(db)).get_state(config).values["messages"]
    assert [(m.text, m.id) for m in ours] == [(m.text, m.id) for m in theirs]


# --- a user's own graphs --------------------------------------------------------------------------


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
    # NOTE: only the team's histories are stored as batches that load as History (no copy, append
    # or extend): a user's DeltaChannel snapshot of {str: [messages]} must come back as the lists
    # it was given, as LangGraph's saver gives them back, or the user's reducer breaks.
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
