"""Adversarial review of lazy histories (commit 6b3a373).

The Team's serializer loads ``histories`` writes as ``History`` sequences; these tests
put such a sequence where the serializer, the savers and the readers meet it. The tests
under "defects" failed on 6b3a373; those under "found sound" passed and stay as guards.
"""

from __future__ import annotations

import linecache
import sys
import threading

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from pg_fixtures import postgres_server, postgres_url  # noqa: F401

from teamgraph import ScriptedChatModel, Team
from teamgraph.checkpoints.serde import TeamSerializer
from teamgraph.history import EncodedMessages, History, HistoryAppend
from tests.test_calls_in_flight import two_members as script

LEADER = "Team Leader"
R1, U1 = "Researcher_1", "UI Operator_1"


def loaded_history(messages: list, serde: TeamSerializer | None = None) -> History:
    """A history as the Team's saver loads it: one undecoded batch."""
    serde = serde or TeamSerializer()
    (history,) = serde.loads_typed(serde.dumps_typed(HistoryAppend({"a": messages}))).values()
    assert isinstance(history, History) and not history.decoded
    return history


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


# --- defects ------------------------------------------------------------------------------------
# --- Postgres: a snapshot of a History is stored per channel blob, not in the checkpoint ------------


def test_a_history_snapshot_dumped_on_its_own_round_trips():
    # NOTE: what PostgresSaver.put does with a DeltaChannel snapshot (postgres/base.py _dump_blobs):
    # serde.dumps_typed(channel_value), the snapshot alone, not inside a checkpoint dict.
    # (Since f02a2de it is stored as batches, under the Team's own type tag.)
    messages = [HumanMessage(f"m{i}", id=f"m{i}") for i in range(4)]
    snapshot = _DeltaSnapshot({LEADER: loaded_history(messages), R1: list(messages)})
    serde = TeamSerializer()
    stored = serde.loads_typed(serde.dumps_typed(snapshot))
    assert isinstance(stored, _DeltaSnapshot)
    assert stored.value == {LEADER: messages, R1: messages}


def test_a_resumed_thread_on_postgres_writes_its_history_snapshot(small_snapshots, postgres_url, team_home):  # noqa: F811
    # NOTE: PostgresSaver.put dumps each channel value on its own (_dump_blobs: serde.dumps_typed(
    # _DeltaSnapshot({agent: History}))), never the checkpoint dict _with_plain_snapshots looks into.
    done = run_twice(team_home, postgres_url)
    histories = done["graph"].get_state(done["config"]).values["histories"]
    assert histories[LEADER][-1].text == "All done."


# --- thread-safety: two first reads of one batch -------------------------------------------------


def test_two_threads_reading_one_undecoded_batch_both_get_its_messages():
    # NOTE: EncodedMessages.messages checks ``_messages is None``, then reads ``_data``; a thread
    # that finishes decoding in between sets ``_data = b""``, and the other decodes nothing.
    # The pool's steps and the router (its log, think ahead) read the same loaded History.
    # The trace below only holds the second reader at that point until the first is done.
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
        if event == "line" and "decode_messages" in _line(frame):
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


# --- found sound -------------------------------------------------------------------------------
# --- a History written back: update_state copies a loaded thread to another one ------------------


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
