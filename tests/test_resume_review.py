"""Review 7: the resume work (9271e7f..44ae946): the collector after loads, the walk's
filter, the per-channel lower bound of the writes scan, kept folded writes, the roster's cadence.

Each test under "defects" fails on 44ae946; the others pin what was probed and found sound.
"""

from __future__ import annotations

import copy
import gc
import sqlite3
import threading
from typing import Annotated

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph, add_messages
from pg_fixtures import postgres_server, postgres_url  # noqa: F401
from typing_extensions import TypedDict

from teamgraph import ScriptedChatModel, Team
from teamgraph.checkpoints import open_checkpointer, open_sqlite_saver
from teamgraph.checkpoints.saver import TeamSqliteSaver
from teamgraph.checkpoints.serde import HISTORY_APPEND_TYPE, TeamSerializer
from teamgraph.nodes.model_view import ContextBudget, approximate_counter, model_view, view_entries
from teamgraph.state import append_conversation
from tests.test_calls_in_flight import two_members as script
from tests.test_saver_review import CHANNELS, assert_every_checkpoint_reads_as_langgraphs, plain, reference_graph


@pytest.fixture
def collector_on():
    was, thresholds = gc.isenabled(), gc.get_threshold()
    gc.enable()
    yield
    gc.set_threshold(*thresholds)
    (gc.enable if was else gc.disable)()


def _collecting() -> bool:
    """Automatic collection is on: the switch, and no pause left behind (a young threshold of 0)."""
    return gc.isenabled() and gc.get_threshold()[0] > 0


# --- defects -------------------------------------------------------------------------


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
    old blobs", ``DeltaChannel.from_checkpoint``). The walk's filter reads every checkpoint without
    an extension header as holding nothing: the plain value is skipped and every older write is
    replayed through the new reducer, so the Team's saver reads other notes than LangGraph's."""
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
    """The Team's conversation before 8bf2508: ``add_messages`` on a plain channel."""

    messages: Annotated[list[AnyMessage], add_messages]


class ConversationAfter(TypedDict):
    """The conversation since 8bf2508 (``teamgraph/state.py``): a DeltaChannel."""

    messages: Annotated[list[AnyMessage], DeltaChannel(append_conversation, snapshot_frequency=3000)]


def _answer(state) -> dict:
    # NOTE: a message as a dict (a user's input, an OpenAI-style node): the write stored has no id;
    # ``add_messages`` gave the converted message an id, stored only in the checkpoint's plain value.
    return {"messages": [{"role": "assistant", "content": f"answer {len(state['messages'])}"}]}


def test_a_conversation_stored_before_it_was_a_delta_channel_keeps_its_message_ids(tmp_path):
    """A thread written while ``messages`` was a plain ``add_messages`` channel (teamgraph before
    8bf2508): its checkpoints hold the conversation with the ids ``add_messages`` gave. LangGraph's
    saver seeds from them; the Team's saver's walk skips those checkpoints and replays every write
    through ``append_conversation``, which gives id-less writes other ids: the conversation the user
    reads (and any ``RemoveMessage`` by id) changes on the first resume."""
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


# --- probed and found sound ----------------------------------------------------------


def test_a_thread_written_at_the_old_roster_cadence_resumes_at_the_new_one_as_langgraph_reads_it(
    team_home, snapshot_every
):
    """A thread written when the roster snapshotted every 3000 updates, resumed with a roster
    cadence far below its count since the last snapshot (100 in the code; 2 here to reach it)."""
    from tests.test_saver_review import second_turn

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


def test_forks_of_older_checkpoints_with_small_cadences_read_as_langgraphs(team_home, snapshot_every):
    """Two edits of older checkpoints (forks), one edited again, the main branch run on; roster
    snapshots in plain checkpoints."""
    from tests.test_saver_review import second_turn

    snapshot_every(3, roster=2)
    config = {"configurable": {"thread_id": "forks"}}
    team = Team(model=ScriptedChatModel(script()), home=team_home)
    graph = team.compile()
    graph.invoke({"messages": [HumanMessage("Please do the work.")]}, config)
    history = list(graph.get_state_history(config))
    agents = {name: dict(record) for name, record in history[0].values["agents"].items()}
    name = next(n for n in agents if n != "Team Leader")
    fork = graph.update_state(history[len(history) // 2].config, {"agents": {name: {**agents[name], "note": "fork-1"}}})
    graph.update_state(
        history[len(history) - 3].config, {"messages": [HumanMessage("a note on an old branch", id="n-1")]}
    )
    fork = graph.update_state(fork, {"requests": {"user_1": {"id": "user_1", "kind": "note", "status": "open"}}})
    second_turn(team_home, history[0].config)  # NOTE: the main branch runs on, after both forks
    reader = Team(model=ScriptedChatModel({}), home=team_home).compile()
    assert isinstance(reader.checkpointer, TeamSqliteSaver)
    reference = reference_graph(team_home, team.db_path)
    for snap in reference.get_state_history(config):
        assert plain(reader.get_state(snap.config).values) == plain(snap.values)
    assert assert_every_checkpoint_reads_as_langgraphs(team_home, team, config) > 10
    assert set(CHANNELS) <= set(reader.get_state(fork).values) | {"messages"}


def _words(messages) -> int:
    """A user's counter: one token per word."""
    return sum(len(m.text.split()) + 3 for m in messages)


def _tool_history() -> list:
    """A history with a tool result far past the budget's share (truncated for the model) and a small one."""
    call = {"name": "read_file", "args": {"path": "a.txt"}, "id": "c1", "type": "tool_call"}
    small = {"name": "list_files", "args": {}, "id": "c2", "type": "tool_call"}
    return [
        HumanMessage("Please read a.txt.", id="h1"),
        AIMessage("", tool_calls=[call], id="a1"),
        ToolMessage("word " * 5000, tool_call_id="c1", id="t1"),
        AIMessage("", tool_calls=[small], id="a2"),
        ToolMessage("a.txt b.txt", tool_call_id="c2", id="t2"),
        AIMessage("Read it.", id="a3"),
        HumanMessage("Thanks, now summarise.", id="h2"),
        AIMessage("Done.", id="a4"),
    ]


@pytest.mark.parametrize("counter", [approximate_counter, _words], ids=["default", "custom"])
def test_the_views_counts_are_each_seen_messages_tokens_by_the_budgets_counter(counter):
    """Compaction cuts by ``view_entries``' counts: they equal per-message counting of what the model
    sees (a truncated tool result counted truncated), built at once or message by message."""
    budget = ContextBudget(window=4000, threshold=0.8, counter=counter)
    history = _tool_history()
    for end in range(1, len(history) + 1):
        _, entries, counts = view_entries(history[:end], budget)
        assert counts == [budget.counter([m]) for _, m in entries]
    seen = model_view(history, budget=budget)
    assert [m.id for m in seen] == [m.id for m in history]
    assert len(seen[2].text) < len(history[2].text) and seen[4] is history[4]
    _, fresh_entries, fresh_counts = view_entries(list(history), ContextBudget(4000, 0.8, counter))
    assert fresh_counts == counts and [m.text for _, m in fresh_entries] == [m.text for _, m in entries]


class _XorCipher:
    """A user's cipher for ``EncryptedSerializer`` (a fixed key: the test is about the saver, not the cipher)."""

    KEY = 0x5A

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "xor", bytes(b ^ self.KEY for b in plaintext)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "xor"
        return bytes(b ^ self.KEY for b in ciphertext)


def test_an_encrypted_team_serializer_on_the_teams_saver_reads_every_checkpoint_as_langgraphs(
    team_home, tmp_path, snapshot_every
):
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
    from langgraph.checkpoint.sqlite import SqliteSaver

    snapshot_every(3, roster=2)
    db = tmp_path / "encrypted.sqlite"

    def serde():
        return EncryptedSerializer(_XorCipher(), serde=TeamSerializer())

    ours = TeamSqliteSaver(sqlite3.connect(db, check_same_thread=False), serde=serde())
    ours.setup()
    config = {"configurable": {"thread_id": "enc"}}
    graph = Team(model=ScriptedChatModel(script()), home=team_home, checkpointer=ours).compile()
    graph.invoke({"messages": [HumanMessage("Please do the work.")]}, config)
    with sqlite3.connect(db) as conn:
        tags = {t for (t,) in conn.execute("SELECT DISTINCT type FROM checkpoints")}
    assert tags and all(t.endswith("+xor") for t in tags)
    reader = TeamSqliteSaver(sqlite3.connect(db, check_same_thread=False), serde=serde())
    mine = Team(model=ScriptedChatModel({}), home=team_home, checkpointer=reader).compile()
    theirs = Team(
        model=ScriptedChatModel({}),
        home=team_home,
        checkpointer=SqliteSaver(sqlite3.connect(db, check_same_thread=False), serde=serde()),
    ).compile()
    checked = 0
    for snap in theirs.get_state_history(config):
        assert plain(mine.get_state(snap.config).values) == plain(snap.values)
        checked += 1
    assert checked > 5
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT type, checkpoint FROM checkpoints").fetchall()
    snapshots = [serde().loads_typed(row)["channel_values"] for row in rows]
    assert any("agents" in values for values in snapshots)  # NOTE: the walk met encrypted snapshots


def test_the_collector_is_on_after_a_run_a_get_state_a_resumed_run_and_a_failed_load(team_home, collector_on):
    from tests.test_saver_review import second_turn

    config = {"configurable": {"thread_id": "gc"}}
    team = Team(model=ScriptedChatModel(script()), home=team_home)
    team.compile().invoke({"messages": [HumanMessage("Please do the work.")]}, config)
    assert _collecting()
    reader = Team(model=ScriptedChatModel({}), home=team_home)
    histories = reader.state(config)["histories"]
    assert _collecting()
    # NOTE: many threads read the same lazily decoded histories at once (each batch decoded once).
    seen: list[list[str]] = []

    def read() -> None:
        seen.append([m.id for h in histories.values() for m in h])

    workers = [threading.Thread(target=read) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(seen) == 8 and all(ids == seen[0] for ids in seen) and _collecting()
    second_turn(team_home, config)
    assert _collecting()
    with sqlite3.connect(team.db_path) as conn:
        assert conn.execute("UPDATE writes SET value = x'c1' WHERE type = ?", (HISTORY_APPEND_TYPE,)).rowcount
    with pytest.raises(Exception):  # noqa: B017 - what matters here is the collector after it
        Team(model=ScriptedChatModel({}), home=team_home).state(config)
    assert _collecting()


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


def test_a_reader_that_changes_what_it_got_changes_nothing_for_the_next_reader(team_home):
    config = {"configurable": {"thread_id": "mutate"}}
    Team(model=ScriptedChatModel(script()), home=team_home).compile().invoke(
        {"messages": [HumanMessage("Please do the work.")]}, config
    )
    reader = Team(model=ScriptedChatModel({}), home=team_home).compile()
    first = reader.get_state(config).values
    expected = copy.deepcopy(plain(first))
    for record in first["agents"].values():
        record["status"] = "tampered"
    first["requests"].clear()
    first["messages"].append(HumanMessage("tampered"))
    first["messages"][0].content = "tampered"
    for agent in list(first["histories"]):
        first["histories"][agent] = []
    got = {"main": None, "other": None}

    def read(key: str) -> None:
        got[key] = plain(reader.get_state(config).values)

    worker = threading.Thread(target=read, args=("other",))
    worker.start()
    read("main")
    worker.join(10)
    assert got["main"] == expected and got["other"] == expected


def test_the_studio_schemas_carry_the_roster_at_its_own_cadence(team_home):
    graph = Team(model=ScriptedChatModel({}), home=team_home).compile()
    assert set(graph.get_input_jsonschema()["properties"]) == {"messages"}
    assert {"agents", "messages", "team"} <= set(graph.get_output_jsonschema()["properties"])
    assert graph.channels["agents"].snapshot_frequency == 100
    assert graph.channels["histories"].snapshot_frequency == 3000


def test_the_budget_is_in_the_leaders_sight_only_once_an_approved_plan_has_a_complexity():
    from langchain_core.messages import SystemMessage

    from teamgraph.roles.budget import with_budget

    used = AIMessage("ok", usage_metadata={"input_tokens": 7, "output_tokens": 5, "total_tokens": 12})
    messages = [SystemMessage("You lead."), HumanMessage("go"), used]
    agents = {"Team Leader": {}, "R_1": {"tool_calls": 99, "tokens": 30}}
    for plan in (None, {"id": "p1", "status": "proposed", "complexity": "simple"}, {"id": "p1", "status": "approved"}):
        out, notice = with_budget(messages, team={"plan": plan} if plan else {}, agents=agents)
        assert out == messages and notice == []
    team = {"plan": {"id": "p1", "status": "approved", "complexity": "simple"}}
    out, notice = with_budget(messages, team=team, agents=agents)
    assert out[0].text.startswith("You lead.\n\n# Budget (plan p1: simple") and ": 42" in out[0].text
    assert len(notice) == 1 and out[-1] is notice[0]
    again, none = with_budget([*messages, *notice], team=team, agents=agents)
    assert none == [] and again[-1] is notice[0]


def test_checkpoint_ids_that_do_not_sort_by_time_read_as_langgraphs(team_home, snapshot_every):
    """Ids are monotonic only within one process (LangGraph's ``_delta`` notes): give the chain's
    checkpoints ids in reverse order of time and every checkpoint still reads as LangGraph's."""
    snapshot_every(3, roster=2)
    config = {"configurable": {"thread_id": "ids"}}
    team = Team(model=ScriptedChatModel(script()), home=team_home)
    team.compile().invoke({"messages": [HumanMessage("Please do the work.")]}, config)
    with sqlite3.connect(team.db_path) as conn:
        ids = [
            cid
            for (cid,) in conn.execute(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = 'ids' ORDER BY checkpoint_id"
            )
        ]
        renamed = {cid: f"{len(ids) - i:08d}-reversed" for i, cid in enumerate(ids)}  # NOTE: the newest sorts first
        for old, new in renamed.items():
            conn.execute("UPDATE checkpoints SET checkpoint_id = ? WHERE checkpoint_id = ?", (new, old))
            conn.execute("UPDATE checkpoints SET parent_checkpoint_id = ? WHERE parent_checkpoint_id = ?", (new, old))
            conn.execute("UPDATE writes SET checkpoint_id = ? WHERE checkpoint_id = ?", (new, old))
    reader = Team(model=ScriptedChatModel({}), home=team_home).compile()
    reference = reference_graph(team_home, team.db_path)
    checked = 0
    for snap in reference.get_state_history(config):
        assert snap.config["configurable"]["checkpoint_id"].endswith("-reversed")
        assert plain(reader.get_state(snap.config).values) == plain(snap.values)
        checked += 1
    assert checked == len(ids)
