"""A resumed thread's load: the collector kept off long-lived objects, the ancestor walk that
decodes only checkpoints that may hold a snapshot, and writes kept folded between readers."""

from __future__ import annotations

import copy
import gc
import sqlite3
import threading
from typing import Annotated

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from teamgraph import ScriptedChatModel, Team
from teamgraph.checkpoints import collector, open_sqlite_saver
from teamgraph.checkpoints.saver import TeamSqliteSaver, _WalkSerde
from teamgraph.checkpoints.serde import HISTORY_APPEND_TYPE, TeamSerializer, uncompressed
from teamgraph.compat import DELTA_SNAPSHOT
from tests.saver_fixtures import CHANNELS, plain, second_turn
from tests.test_calls_in_flight import two_members as script

needs_snapshots = pytest.mark.skipif(DELTA_SNAPSHOT is None, reason="this LangGraph has no DeltaChannel snapshots")


def test_compiling_a_team_freezes_what_lives_then_once_per_process(tmp_path, monkeypatch):
    """The modules' objects leave the collector's reach (no full pass scans them in a run), once."""
    Team(model=ScriptedChatModel({}), home=tmp_path / "home").compile()
    assert gc.get_freeze_count() > 0
    freezes: list[int] = []
    monkeypatch.setattr(collector, "_frozen", False)
    monkeypatch.setattr(collector.gc, "freeze", lambda: freezes.append(1))
    Team(model=ScriptedChatModel({}), home=tmp_path / "one").compile()
    Team(model=ScriptedChatModel({}), home=tmp_path / "two").compile()
    assert freezes == [1]


def _collecting() -> bool:
    """Automatic collection is on: the switch, and its young generation's threshold."""
    return gc.isenabled() and gc.get_threshold()[0] > 0


@pytest.fixture
def collector_on():
    was, thresholds = gc.isenabled(), gc.get_threshold()
    gc.enable()
    yield
    gc.set_threshold(*thresholds)
    (gc.enable if was else gc.disable)()


def test_the_collector_is_on_after_a_run_a_get_state_a_resumed_run_and_a_failed_load(team_home, collector_on):

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
        assert conn.execute("UPDATE writes SET value = x'c1' WHERE type LIKE ?", (HISTORY_APPEND_TYPE + "%",)).rowcount
    with pytest.raises(Exception):  # noqa: B017 - what matters here is the collector after it
        Team(model=ScriptedChatModel({}), home=team_home).state(config)
    assert _collecting()


# --- the ancestor walk ------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text() | st.binary(max_size=40),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6),
    max_leaves=30,
)


@needs_snapshots
@settings(max_examples=300, deadline=None)
@given(
    value=json_values,
    padding=st.sampled_from([0, 1, 3, 7, 15, 200, 70_000]),
    snapshot=st.booleans(),
    others=st.dictionaries(st.text(max_size=20), json_values, max_size=4),
    versions=st.dictionaries(st.text(max_size=20), st.text(max_size=20), max_size=4),
)
def test_a_checkpoint_holding_a_walked_channel_is_always_decoded(value, padding, snapshot, others, versions):
    """A snapshot of any size, or a plain value (from before the channel was a DeltaChannel)."""
    held = [value, "\x07" * padding]  # NOTE: padding moves a snapshot through fixext 1-16 and ext 8/16/32
    stored = DELTA_SNAPSHOT(held) if snapshot else held
    checkpoint = {"v": 4, "channel_values": {**others, "histories": stored}, "channel_versions": versions}
    type_tag, blob = JsonPlusSerializer().dumps_typed(checkpoint)
    decoded = _WalkSerde(TeamSerializer(), ["agents", "histories"]).loads_typed((type_tag, blob))
    assert decoded["channel_values"]["histories"] == stored


def test_a_checkpoint_without_a_walked_channel_is_not_decoded_by_the_walk():
    # NOTE: the channels' names elsewhere (versions, versions seen) do not count.
    checkpoint = {
        "v": 4,
        "channel_values": {"team": {"a": [1, 7, "agent"]}},
        "channel_versions": {"team": "7", "histories": "3", "agents": "2"},
        "versions_seen": {"router": {"histories": "3"}},
    }
    type_tag, blob = JsonPlusSerializer().dumps_typed(checkpoint)
    assert _WalkSerde(TeamSerializer(), ["agents", "histories"]).loads_typed((type_tag, blob)) == {}


def _appended(current: list[int] | None, writes: list[list[int]]) -> list[int]:
    return [*(current or []), *(n for write in writes for n in write)]


def _snapshots_by_checkpoint(db_path) -> dict[str, tuple[str, set[str]]]:
    """Each stored checkpoint's type tag (uncompressed) and the channels it holds a snapshot of."""
    serde = TeamSerializer()
    with sqlite3.connect(db_path) as conn:
        rows = conn.execute("SELECT checkpoint_id, type, checkpoint FROM checkpoints").fetchall()
    found = {}
    for cid, type_tag, blob in rows:
        values = serde.loads_typed((type_tag, blob))["channel_values"]
        snapshots = {ch for ch, v in values.items() if isinstance(v, DELTA_SNAPSHOT)}
        found[cid] = (uncompressed((type_tag, blob))[0], snapshots)
    return found


@needs_snapshots
def test_a_load_starts_from_each_channels_newest_snapshot_and_reads_no_write_before_it(team_home, snapshot_every):
    """Writes older than a channel's newest snapshot are deleted: the thread still reads the same.

    NOTE: on a team thread a record is rewritten whole soon after, so a snapshot passed by
    hides in the final values; the graph below, whose channels only append, shows it.
    """
    # NOTE: the roster's cadence differs, so some of its snapshots are in checkpoints without one of
    # the histories (stored as LangGraph stores them: what the walk's filter looks into).
    snapshot_every(3, roster=2)
    config = {"configurable": {"thread_id": "t"}}
    team = Team(model=ScriptedChatModel(script()), home=team_home)
    graph = team.compile()
    graph.invoke({"messages": [HumanMessage("Please do the work.")]}, config)
    expected = plain(graph.get_state(config).values)

    chain = [s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(config)]  # newest first
    held = _snapshots_by_checkpoint(team.db_path)
    assert any(tag == "msgpack" and "agents" in channels for tag, channels in held.values())
    assert _delete_writes_before_snapshots(team.db_path, chain, CHANNELS) > 0

    reader = Team(model=ScriptedChatModel({}), home=team_home).compile()
    assert isinstance(reader.checkpointer, TeamSqliteSaver)
    assert plain(reader.get_state(config).values) == expected


def _delete_writes_before_snapshots(db_path, chain: list[str], channels) -> int:
    """Delete each channel's writes older than its newest snapshot on ``chain`` (newest first)."""
    held = _snapshots_by_checkpoint(db_path)
    deleted = 0
    with sqlite3.connect(db_path) as conn:
        for channel in channels:
            newest = next((i for i, cid in enumerate(chain[1:], 1) if channel in held[cid][1]), None)
            older = chain[newest + 1 :] if newest is not None else []
            deleted += conn.execute(
                f"DELETE FROM writes WHERE channel = ? AND checkpoint_id IN ({','.join('?' * len(older))})",
                (channel, *older),
            ).rowcount
    return deleted


class Counted(TypedDict):
    every: Annotated[list[int], DeltaChannel(_appended, snapshot_frequency=3)]
    odd: Annotated[list[int], DeltaChannel(_appended, snapshot_frequency=3)]
    n: int


def _step(state: Counted) -> dict:
    n = state.get("n", 0) + 1
    return {"n": n, "every": [n], **({"odd": [n]} if n % 2 else {})}


@needs_snapshots
def test_snapshots_in_checkpoints_the_serializer_stores_as_langgraph_does_are_found(tmp_path):
    """A channel's snapshot taken when the histories' is not is in a plain msgpack checkpoint."""
    builder = StateGraph(Counted)
    builder.add_node("step", _step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", lambda s: END if s["n"] >= 20 else "step")
    db_path = tmp_path / "graph.sqlite"
    graph = builder.compile(checkpointer=open_sqlite_saver(db_path))
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"n": 0}, config)
    expected = graph.get_state(config).values
    assert expected["every"] == list(range(1, 21)) and expected["odd"] == list(range(1, 21, 2))

    held = _snapshots_by_checkpoint(db_path)
    assert any(tag == "msgpack" and channels for tag, channels in held.values())
    chain = [s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(config)]
    assert _delete_writes_before_snapshots(db_path, chain, ("every", "odd")) > 0
    assert builder.compile(checkpointer=open_sqlite_saver(db_path)).get_state(config).values == expected


# --- writes kept folded -------------------------------------------------------------


def test_readers_of_a_kept_load_get_objects_of_their_own(team_home):
    config = {"configurable": {"thread_id": "t"}}
    Team(model=ScriptedChatModel(script()), home=team_home).compile().invoke(
        {"messages": [HumanMessage("Please do the work.")]}, config
    )
    reader = Team(model=ScriptedChatModel({}), home=team_home).compile()
    first, again = reader.get_state(config).values, reader.get_state(config).values
    assert plain(first) == plain(again)
    for agent, history in first["histories"].items():
        assert all(a is not b for a, b in zip(history, again["histories"][agent], strict=True))
    for channel in ("agents", "requests"):
        assert all(first[channel][key] is not again[channel][key] for key in first[channel])


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
