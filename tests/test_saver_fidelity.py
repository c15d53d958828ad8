"""The Team's saver reads every checkpoint of a thread as LangGraph's own SqliteSaver does.

The Team's saver scans a channel's writes once and keeps rows between reads; LangGraph's
replays one write at a time. On threads a team wrote, then edited (updates, an Overwrite,
forks of older checkpoints), in lockstep, asynchronously, through an encrypting serializer,
with checkpoint ids out of time order, and read by two threads and two instances at once,
every checkpoint must read the same through both.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Overwrite

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.checkpoints import open_sqlite_saver
from teamgraph.checkpoints.saver import TeamSqliteSaver
from teamgraph.checkpoints.serde import COMPRESSED, TeamSerializer
from teamgraph.history import EncodedMessages, History
from teamgraph.state import EncodedRecord, append_conversation, append_histories, merge_records
from tests.saver_fixtures import (
    CHANNELS,
    LEADER,
    R1,
    U1,
    assert_every_checkpoint_reads_as_langgraphs,
    plain,
    reference_graph,
    second_turn,
)
from tests.test_calls_in_flight import two_members as script


@pytest.fixture
def small_snapshots(snapshot_every):
    """DeltaChannel snapshots every 3 updates (set before compiling, restored after)."""
    snapshot_every(3)


# --- the writes scan ------------------------------------------------------------------------------


@pytest.mark.parametrize("cadence", [None, 4])
def test_the_team_saver_reads_the_writes_langgraphs_saver_reads_on_every_branch(team_home, snapshot_every, cadence):
    if cadence:
        snapshot_every(cadence)
    config = {"configurable": {"thread_id": "scan"}}
    team = Team(model=ScriptedChatModel(script()), home=team_home)
    graph = team.compile()
    graph.invoke({"messages": [HumanMessage("Please do the work.")]}, config)
    # NOTE: a fork: an edit of an older checkpoint starts a second branch in the same thread.
    older = list(graph.get_state_history(config))[4].config
    graph.update_state(older, {"histories": {R1: [HumanMessage("edited", id="edit-1")]}})
    saver = graph.checkpointer
    assert isinstance(saver, TeamSqliteSaver)
    reference = SqliteSaver(sqlite3.connect(team.db_path, check_same_thread=False), serde=TeamSerializer())
    channels = ["histories", "agents", "requests", "deliveries", "messages"]
    statements: list[str] = []
    saver.conn.set_trace_callback(statements.append)
    checked = seeded = 0
    for snapshot in graph.get_state_history(config):
        theirs = reference.get_delta_channel_history(config=snapshot.config, channels=channels)
        first = saver.get_delta_channel_history(config=snapshot.config, channels=channels)
        statements.clear()
        again = saver.get_delta_channel_history(config=snapshot.config, channels=channels)
        # NOTE: the same checkpoint again: the kept rows, no walk and no scan (a snapshot's
        # checkpoint is read again by its id: its bytes are not kept)
        assert not [q for q in statements if "FROM writes" in q or "WITH RECURSIVE" in q], statements
        assert len(statements) <= len({ch for ch in channels if "seed" in theirs[ch]})
        for ours in (first, again):
            assert set(ours) == set(theirs)
            for channel in channels:
                # NOTE: runs of writes may come pre-folded (the Team's saver); the channel's value is the same.
                assert _folded(channel, ours[channel]) == _folded(channel, theirs[channel]), channel
                assert len(ours[channel]["writes"]) <= len(theirs[channel]["writes"])
                assert ("seed" in ours[channel]) == ("seed" in theirs[channel])
                if "seed" in ours[channel]:
                    assert _plain(ours[channel]["seed"].value) == _plain(theirs[channel]["seed"].value)
        if "seed" in first["histories"]:
            seeded += 1
            # Each reader gets objects of its own.
            assert first["histories"]["seed"].value is not again["histories"]["seed"].value
        checked += 1
    assert checked >= 10 and (seeded > 0) == bool(cadence)
    histories = Team(model=ScriptedChatModel({}), home=team_home).compile().get_state(config).values["histories"]
    assert all(isinstance(h, History) and not h.decoded for h in histories.values())
    assert open_sqlite_saver(team.db_path).get_tuple(config) is not None


REDUCERS = {
    "histories": append_histories,
    "agents": merge_records,
    "requests": merge_records,
    "deliveries": merge_records,
    "messages": append_conversation,
}


def _folded(channel: str, history: dict):
    """The channel's value the writes replay to, from its snapshot (or empty)."""
    seed = history.get("seed")
    start = seed.value if seed is not None else ([] if channel == "messages" else {})
    return _plain(REDUCERS[channel](start, [value for *_, value in history["writes"]]))


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, EncodedMessages):
        return value.messages()
    if isinstance(value, EncodedRecord):  # NOTE: a record the Team's saver hands over encoded
        return value.decode()
    return list(value) if isinstance(value, History) else value


def test_a_plain_langgraph_saver_cannot_read_the_batches_and_says_so(team_home):
    config = {"configurable": {"thread_id": "plain"}}
    team = Team(model=ScriptedChatModel(script()), home=team_home)
    team.compile().invoke({"messages": [HumanMessage("Please do the work.")]}, config)
    plain = SqliteSaver(sqlite3.connect(team.db_path, check_same_thread=False))
    with pytest.raises(NotImplementedError, match=re.escape(COMPRESSED)):
        plain.get_delta_channel_history(config=config, channels=["histories"])


# --- a thread edited, forked, renumbered ----------------------------------------------------------


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


def test_forks_of_older_checkpoints_with_small_cadences_read_as_langgraphs(team_home, snapshot_every):
    """Two edits of older checkpoints (forks), one edited again, the main branch run on; roster
    snapshots in plain checkpoints."""

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


# --- other writers and readers --------------------------------------------------------------------


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
