"""Histories the Team's saver loads are decoded per agent, when read (issue 10: resume).

A write to ``histories`` is stored as one encoded batch per agent; loading a thread
gives each agent a ``History`` sequence that decodes a batch when one of its messages
is first read. These tests check the sequence behaves as the list it replaces (also when
two threads first read one batch at once), that the serializer stores histories, their
snapshots and records as batches and everything else as LangGraph does, keeping what a user
wrote, that a resumed team reads and continues the same histories decoding only what it
reads, and that a loaded History written back (copied to another thread, under an
Overwrite) is stored.
"""

from __future__ import annotations

import copy
import linecache
import pickle
import random
import sys
import threading
import uuid
from datetime import UTC, datetime

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.types import Overwrite
from pg_fixtures import postgres_server, postgres_url  # noqa: F401

from teamgraph import ScriptedChatModel, Team
from teamgraph.checkpoints.serde import (
    CHECKPOINT_TYPE,
    COMPRESSED,
    HISTORY_APPEND_TYPE,
    HISTORY_SNAPSHOT_TYPE,
    RECORDS_UPDATE_TYPE,
    TeamSerializer,
    uncompressed,
)
from teamgraph.history import EncodedMessages, Histories, History, HistoryAppend, join_history
from teamgraph.state import EncodedRecord, RecordsUpdate, merge_records
from tests.saver_fixtures import LEADER, R1, U1, plain
from tests.test_calls_in_flight import two_members as script


def sample(n: int, tag: str) -> list:
    out: list = []
    for i in range(n):
        if i % 3 == 0:
            out.append(HumanMessage(f"{tag} ask {i}", id=f"{tag}-h{i}", additional_kwargs={"kind": "message"}))
        elif i % 3 == 1:
            out.append(AIMessage("", id=f"{tag}-a{i}", tool_calls=[{"name": "list_files", "args": {}, "id": f"c{i}"}]))
        else:
            out.append(ToolMessage(f"{tag} result {i}", tool_call_id=f"c{i - 1}", id=f"{tag}-t{i}"))
    return out


def encoded(messages: list, serde: TeamSerializer | None = None) -> EncodedMessages:
    serde = serde or TeamSerializer()
    type_, data = serde.dumps_typed(HistoryAppend({"x": messages}))
    (history,) = serde.loads_typed((type_, data)).values()
    (part,) = history.parts()
    assert isinstance(part, EncodedMessages) and not part.decoded
    return part


def loaded_history(messages: list, serde: TeamSerializer | None = None) -> History:
    """A history as the Team's saver loads it: one undecoded batch."""
    serde = serde or TeamSerializer()
    (history,) = serde.loads_typed(serde.dumps_typed(HistoryAppend({"a": messages}))).values()
    assert isinstance(history, History) and not history.decoded
    return history


# --- the sequence ---------------------------------------------------------------------------------


def test_a_history_reads_like_the_list_of_its_messages_and_decodes_only_what_is_read():
    first, second, third = sample(4, "a"), sample(3, "b"), sample(5, "c")
    parts = [encoded(first), list(second), encoded(third)]
    history = History(parts)
    messages = [*first, *second, *third]

    assert len(history) == 12 and bool(history) and not history.decoded
    assert history[5] == messages[5]  # in the plain part: nothing decoded
    assert not parts[0].decoded and not parts[2].decoded
    assert history[-1] == messages[-1] and parts[2].decoded and not parts[0].decoded
    assert history[6:] == messages[6:] and not parts[0].decoded  # a tail decodes only the batches it touches
    slices = (slice(None), slice(2, 9), slice(3, 4), slice(9, 2), slice(-5, None), slice(None, None, 2))
    for sl in (*slices, slice(None, None, -1)):
        assert history[sl] == messages[sl], sl
    assert list(history) == messages and list(reversed(history)) == messages[::-1]
    assert history == messages and history == tuple(messages) and history == History([list(messages)])
    assert history != messages[:-1] and history != "text" and history != [*messages[:-1], SystemMessage("x")]
    assert history + [SystemMessage("y")] == [*messages, SystemMessage("y")]
    assert [SystemMessage("y")] + history == [SystemMessage("y"), *messages]
    for copied in (copy.copy(history), copy.deepcopy(history), pickle.loads(pickle.dumps(history))):
        assert type(copied) is list and copied == messages
    with pytest.raises(IndexError):
        history[12]
    with pytest.raises(TypeError):
        hash(history)
    longer = join_history(history, [[SystemMessage("z")], encoded(sample(2, "d"))])
    assert isinstance(longer, History) and longer.parts()[:3] == history.parts() and len(longer) == 15
    assert longer == [*messages, SystemMessage("z"), *sample(2, "d")] and longer[12:13] == [SystemMessage("z")]
    assert join_history(history, []) is history and join_history(None, [[SystemMessage("z")]]) == [SystemMessage("z")]
    empty = EncodedMessages(0, TeamSerializer().dumps_typed([])[1], TeamSerializer())
    assert len(History()) == 0 and not History([[], empty]) and History()[0:3] == []


def test_a_batch_that_does_not_decode_to_its_count_is_an_error_not_a_short_history():
    serde = TeamSerializer()
    part = EncodedMessages(3, serde.dumps_typed(sample(2, "x"))[1], serde)
    with pytest.raises(ValueError, match="3 messages"):
        History([part])[0]


def test_two_threads_reading_one_undecoded_batch_both_get_its_messages():
    # NOTE: the pool's steps and the router (its log, think ahead) read the same loaded History.
    # A reader that has seen the batch undecoded must still get its messages when another thread
    # finishes decoding it (and drops the encoded bytes) meanwhile: the trace below holds the
    # second reader past its first look, at the first line that would guard or start a decode
    # (held inside a guard, it would only keep the first reader waiting), until the first is done.
    messages = [HumanMessage(f"m{i}", id=f"m{i}") for i in range(20)]
    history = loaded_history(messages)
    (part,) = history.parts()
    code = EncodedMessages.messages.__code__
    first_done, second_checked = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    read: list = []

    def hold_after_the_check(frame, event, arg):
        if frame.f_code is not code:
            return None
        if event == "line" and not second_checked.is_set() and _guards_or_decodes(_line(frame)):
            second_checked.set()
            first_done.wait(5)
        return hold_after_the_check

    def second_reader():
        sys.settrace(hold_after_the_check)
        try:
            read.append(history[0])
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)
        finally:
            sys.settrace(None)

    second = threading.Thread(target=second_reader)
    second.start()
    assert second_checked.wait(5)
    first = history[-1]  # NOTE: the first reader decodes the batch while the second waits past its check
    first_done.set()
    second.join(5)
    assert first == messages[-1] and part.decoded
    assert not errors, errors
    assert read == [messages[0]]


def _line(frame) -> str:
    return linecache.getline(frame.f_code.co_filename, frame.f_lineno)


def _guards_or_decodes(line: str) -> bool:
    """The line of ``EncodedMessages.messages`` that takes its decoding lock or decodes."""
    return "_DECODING" in line or "decode_messages" in line


def test_a_compacted_loaded_history_decodes_only_what_its_newest_summary_keeps():
    from teamgraph.models.calls import COMPACTION_KEY
    from teamgraph.nodes.model_view import ContextBudget, approximate_counter, view_and_tokens

    old, kept = sample(9, "old"), sample(3, "kept")
    record = {"number": 1, "keep_from": 9, "ai_turns": 3, "compacted": 9, "tokens_before": 900, "reason": "threshold"}
    marker = AIMessage("Summary of the old work.", id="compaction-1-9", additional_kwargs={COMPACTION_KEY: record})
    parts = [encoded(old[:1]), encoded(old[1:]), encoded([*kept, marker]), encoded(sample(2, "new"))]
    history = History(parts)
    budget = ContextBudget(window=100_000, threshold=0.8, counter=approximate_counter)
    messages, tokens = view_and_tokens([SystemMessage("rules")], history, budget=budget)
    # NOTE: the first message keys the agent's kept view; the rest before the cut is never read
    assert not parts[1].decoded
    assert [m.id for m in messages[2:]] == [m.id for m in [*kept, *sample(2, "new")]] and tokens > 0


# --- the serializer -------------------------------------------------------------------------------


def test_the_serializer_stores_a_history_append_as_batches_and_everything_else_as_langgraph_does():
    serde, plain = TeamSerializer(), JsonPlusSerializer()
    write = HistoryAppend({LEADER: sample(5, "l"), R1: sample(2, "r")})
    type_, data = serde.dumps_typed(write)
    assert uncompressed((type_, data))[0] == HISTORY_APPEND_TYPE
    loaded = serde.loads_typed((type_, data))
    assert type(loaded) is dict and set(loaded) == {LEADER, R1}
    assert all(isinstance(h, History) and not h.decoded for h in loaded.values())
    assert loaded[LEADER] == write[LEADER] and loaded[R1] == write[R1]
    assert [type(m) for m in loaded[LEADER]] == [type(m) for m in write[LEADER]]
    assert loaded[LEADER][1].tool_calls == write[LEADER][1].tool_calls

    # Anything else: LangGraph's own bytes once uncompressed, readable by LangGraph's own serializer.
    other = {"messages": sample(3, "m"), "n": 1}
    assert uncompressed(serde.dumps_typed(other)) == plain.dumps_typed(other)
    assert plain.loads_typed(uncompressed(serde.dumps_typed(dict(write)))) == dict(write)

    # A History anywhere else (values read from a thread and written back) is stored as a list.
    history = History([encoded(sample(4, "s"))])
    assert plain.loads_typed(uncompressed(serde.dumps_typed({"copy": [history]}))) == {"copy": [list(history)]}


def test_a_value_is_stored_compressed_when_that_makes_it_smaller_and_a_plain_one_still_loads():
    serde, plain = TeamSerializer(), JsonPlusSerializer()
    value = {"messages": sample(20, "m"), "n": 1}
    type_, data = serde.dumps_typed(value)
    assert type_ == "msgpack" + COMPRESSED and len(data) < len(plain.dumps_typed(value)[1])
    # NOTE: what an earlier version stored, uncompressed, loads as it is.
    assert serde.loads_typed((type_, data)) == serde.loads_typed(plain.dumps_typed(value)) == value
    noise = random.Random(7).randbytes(2000)
    for kept_as_is in (None, 7, "v", noise):  # nothing to gain: too short, or incompressible
        assert serde.dumps_typed(kept_as_is) == plain.dumps_typed(kept_as_is)


def test_threads_compressing_and_loading_at_once_each_get_their_own_values_back():
    # NOTE: agents' nodes, the saver's writer and async worker threads serialize at the same time.
    serde = TeamSerializer()
    start = threading.Barrier(8)
    failures: list[str] = []

    def work(n: int) -> None:
        start.wait()
        for i in range(150):
            value = {"messages": sample(6, f"t{n}-{i}"), "n": i}
            try:
                stored = serde.dumps_typed(value)
                if not stored[0].endswith(COMPRESSED) or serde.loads_typed(stored) != value:
                    failures.append(f"{n}:{i}")
            except Exception as error:  # noqa: BLE001 - a shared context fails in any of several ways
                failures.append(f"{n}:{i} {type(error).__name__}")

    workers = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert failures == []


def test_a_large_value_is_compressed_only_if_it_holds_a_delta_channel_snapshot():
    # NOTE: a large plain value is stored whole at every step; a snapshot once in thousands.
    serde, plain = TeamSerializer(), JsonPlusSerializer()
    messages = sample(400, "big")
    assert len(plain.dumps_typed(messages)[1]) > 64 * 1024
    assert serde.dumps_typed(messages) == plain.dumps_typed(messages)
    checkpoint = {"v": 4, "id": "c1", "channel_versions": {"messages": 3}, "channel_values": {"messages": messages}}
    assert serde.dumps_typed(checkpoint)[0] == "msgpack"
    checkpoint["channel_values"]["messages"] = _DeltaSnapshot(messages)
    for snapshot in (checkpoint, _DeltaSnapshot(messages)):
        type_, data = serde.dumps_typed(snapshot)
        assert type_.endswith(COMPRESSED) and len(data) < len(uncompressed((type_, data))[1])


def test_a_snapshot_of_histories_is_stored_as_batches_and_loads_undecoded():
    serde = TeamSerializer()
    kept, fresh = encoded(sample(4, "k")), sample(3, "f")
    value = Histories({LEADER: History([kept, fresh]), R1: sample(2, "r"), U1: []})
    expected = {LEADER: [*sample(4, "k"), *fresh], R1: sample(2, "r"), U1: []}
    checkpoint = {
        "v": 4,
        "id": "c1",
        "channel_versions": {"histories": 3, "team": 2},
        "channel_values": {
            "histories": _DeltaSnapshot(value),
            "team": {"n": 1},
            "messages": _DeltaSnapshot(sample(1, "m")),
        },
    }
    for obj, type_ in ((checkpoint, CHECKPOINT_TYPE), (_DeltaSnapshot(value), HISTORY_SNAPSHOT_TYPE)):
        stored = serde.dumps_typed(obj)
        assert uncompressed(stored)[0] == type_ and not kept.decoded  # NOTE: an undecoded batch is stored as it is
        loaded = serde.loads_typed(stored)
        snapshot = loaded["channel_values"]["histories"] if type_ == CHECKPOINT_TYPE else loaded
        assert isinstance(snapshot, _DeltaSnapshot) and set(snapshot.value) == {LEADER, R1, U1}
        assert all(isinstance(h, History) and (not h.decoded or not h) for h in snapshot.value.values())
        assert {agent: list(h) for agent, h in snapshot.value.items()} == expected
    assert loaded_checkpoint_rest(serde, checkpoint) == {"team": {"n": 1}, "messages": sample(1, "m")}


def loaded_checkpoint_rest(serde: TeamSerializer, checkpoint: dict) -> dict:
    values = dict(serde.loads_typed(serde.dumps_typed(checkpoint))["channel_values"])
    del values["histories"]
    return {k: v.value if isinstance(v, _DeltaSnapshot) else v for k, v in values.items()}


def test_a_history_snapshot_dumped_on_its_own_round_trips():
    # NOTE: what PostgresSaver.put does with a DeltaChannel snapshot (postgres/base.py _dump_blobs):
    # serde.dumps_typed(channel_value), the snapshot alone, not inside a checkpoint dict: it must
    # be stored as batches under the Team's own type tag, as inside a checkpoint.
    messages = [HumanMessage(f"m{i}", id=f"m{i}") for i in range(4)]
    snapshot = _DeltaSnapshot({LEADER: loaded_history(messages), R1: list(messages)})
    serde = TeamSerializer()
    stored = serde.loads_typed(serde.dumps_typed(snapshot))
    assert isinstance(stored, _DeltaSnapshot)
    assert stored.value == {LEADER: messages, R1: messages}


def test_records_are_stored_one_by_one_and_only_the_surviving_ones_are_decoded():
    serde, plain = TeamSerializer(), JsonPlusSerializer()
    first = RecordsUpdate({"ask_1": {"id": "ask_1", "status": "open", "payload": {"q": "x"}}, "ask_2": {"id": "ask_2"}})
    second = RecordsUpdate({"ask_1": {"id": "ask_1", "status": "answered", "answer": ["a", 1, None, 2.5]}})
    stored = [serde.dumps_typed(w) for w in (first, second)]
    assert {uncompressed(s)[0] for s in stored} == {RECORDS_UPDATE_TYPE}
    assert [serde.loads_typed(s) for s in stored] == [dict(first), dict(second)]

    # As the Team's saver replays them: encoded records, decoded by the reducer if they stay.
    replayed = [serde.encoded_records(uncompressed(s)[1]) for s in stored]
    assert all(isinstance(r, EncodedRecord) for w in replayed for r in w.values())
    folded = merge_records({}, replayed)
    assert folded == {"ask_1": dict(second)["ask_1"], "ask_2": {"id": "ask_2"}}
    assert merge_records(folded, [{"ask_2": {"id": "ask_2", "status": "closed"}}])["ask_2"]["status"] == "closed"

    # A record that is not plain data is stored as LangGraph stores it (and still reads back).
    for odd_value in (_DeltaSnapshot(1), datetime.now(UTC), uuid.uuid4(), HistoryAppend({"a": []})):
        odd = RecordsUpdate({"x": {"when": odd_value}})
        type_, data = uncompressed(serde.dumps_typed(odd))
        assert type_ == "msgpack" and plain.loads_typed((type_, data)) == dict(odd), odd_value


@pytest.mark.parametrize("record", [b"\xc3", b"\x01"])
def test_a_record_written_as_bytes_is_kept_as_written(record):
    # NOTE: a record the Team's saver hands over still encoded is an EncodedRecord, never plain
    # bytes: a user's update_state of {"requests": {"r": b"\xc3"}} must not be unpacked (to True;
    # b"\x01" to 1) but kept as written, as an upsert keeps it.
    assert merge_records({}, [{"r": record}]) == {"r": record}
    assert merge_records({"r": {"id": "r"}}, [RecordsUpdate({"r": record})]) == {"r": record}


# --- a team on the Team's saver -------------------------------------------------------------------


def test_a_resumed_team_decodes_only_the_histories_it_reads_and_continues_them(team_home):
    config = {"configurable": {"thread_id": "lazy"}}
    first = Team(model=ScriptedChatModel(script()), home=team_home)
    first.compile().invoke({"messages": [HumanMessage("Please do the work.")]}, config)
    before = {name: list(first.history(config, name)) for name in (LEADER, R1, U1)}
    assert all(before.values())

    # A new Team on the same home: what a new process opens.
    turns = sum(isinstance(m, AIMessage) for m in before[LEADER])
    again = Team(model=ScriptedChatModel({LEADER: [*[""] * turns, "All done."]}), home=team_home)
    graph = again.compile()
    histories = graph.get_state(config).values["histories"]
    assert set(histories) == {LEADER, R1, U1}
    assert all(isinstance(h, History) and not h.decoded for h in histories.values())
    assert {name: len(h) for name, h in histories.items()} == {name: len(h) for name, h in before.items()}
    assert histories[R1] == before[R1] and histories[R1].decoded and not histories[U1].decoded

    graph.invoke({"messages": [HumanMessage("Anything left?")]}, config)
    after = graph.get_state(config).values["histories"]
    assert after[LEADER][: len(before[LEADER])] == before[LEADER]
    assert isinstance(after[LEADER][-1], AIMessage) and after[LEADER][-1].text == "All done."
    assert after[R1] == before[R1] and after[U1] == before[U1]
    assert again.history(config, LEADER) == list(after[LEADER])


@pytest.fixture
def small_snapshots(snapshot_every):
    """DeltaChannel snapshots every 2 updates (set before compiling, restored after)."""
    snapshot_every(2)


def run_twice(team_home, checkpointer) -> dict:
    """One run, then a second Team on the same database answers a new message (the resume path)."""
    config = {"configurable": {"thread_id": "twice"}}
    first = Team(model=ScriptedChatModel(script()), home=team_home, checkpointer=checkpointer)
    first.compile().invoke({"messages": [HumanMessage("Please do the work.")]}, config)
    turns = sum(m.type == "ai" for m in first.history(config, LEADER))
    again = Team(
        model=ScriptedChatModel({LEADER: [*[""] * turns, "All done."]}), home=team_home, checkpointer=checkpointer
    )
    graph = again.compile()
    assert any(isinstance(h, History) for h in graph.get_state(config).values["histories"].values())
    graph.invoke({"messages": [HumanMessage("Anything left?")]}, config)
    return {"first": first, "again": again, "graph": graph, "config": config}


def test_a_resumed_thread_on_postgres_writes_its_history_snapshot(small_snapshots, postgres_url, team_home):  # noqa: F811
    # NOTE: PostgresSaver.put dumps each channel value on its own (_dump_blobs: serde.dumps_typed(
    # _DeltaSnapshot({agent: History}))), never the checkpoint dict _with_plain_snapshots looks into.
    done = run_twice(team_home, postgres_url)
    histories = done["graph"].get_state(done["config"]).values["histories"]
    assert histories[LEADER][-1].text == "All done."


def test_a_thread_read_from_the_teams_saver_can_be_copied_to_another_thread(team_home):
    # NOTE: the write is a plain dict holding History values (not a HistoryAppend): the
    # Team's serializer hands it to LangGraph's msgpack encoder, which does not know History.
    config = {"configurable": {"thread_id": "source"}}
    team = Team(model=ScriptedChatModel(script()), home=team_home)
    graph = team.compile()
    graph.invoke({"messages": [HumanMessage("Please do the work.")]}, config)
    graph = Team(model=ScriptedChatModel({}), home=team_home).compile()
    values = graph.get_state(config).values
    assert isinstance(values["histories"][R1], History)
    copy = {"configurable": {"thread_id": "copy"}}
    graph.update_state(copy, values, as_node="router")  # NOTE: with InMemorySaver (plain lists) this works
    assert graph.get_state(copy).values["histories"] == values["histories"]


def test_a_loaded_history_written_back_under_overwrite_is_stored(team_home):
    # NOTE: values holding a History are stored as plain lists (update_state with get_state's
    # values), inside an Overwrite too: LangGraph's encoder does not know History, and a plain
    # SqliteSaver's lists never raise "Type is not msgpack serializable: Overwrite".
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
