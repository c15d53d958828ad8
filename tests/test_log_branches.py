"""The collaboration log of a branch: a fork from an earlier checkpoint, a new thread under an old id.

The pass that logs a state puts the cursor after its lines into the state it writes
(``state["log"]``), so each branch is logged from its own point (review 14: a fork used to
log a false CRITICAL ``LOST_DATA`` and skip its own lines).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeClock
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from scripting import act, call

import teamgraph.audit.log as audit_log
from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.audit import LogEvent, flush_log, read_log
from teamgraph.state import log_delta, merge_log

R1 = "Researcher_1"


def _leader(messages: list[Any]) -> Any:
    asked = " ".join(str(m.content) for m in messages if isinstance(m, HumanMessage))
    said = [m.content for m in messages if m.type == "ai"]
    if not said:
        return act(call("create_sub_agent", role_id="researcher", task="Find fruit."))
    if "pears instead" in asked and "Leader says pears." not in said:
        return "Leader says pears."
    if f"Result from {R1}" in asked and "Leader says apples." not in said:
        return "Leader says apples."
    return ""


SCRIPT = {"Team Leader": [_leader] * 20, R1: [act(call("send_message", to="Team Leader", content="note")), "Found."]}


def _team(home: Path, saver: Any = None) -> Team:
    return Team(
        model=ScriptedChatModel(SCRIPT),
        home=home,
        checkpointer=saver,
        policy=Policy(scheduling="completions"),
        clock=FakeClock(),
    )


def _problems(events: list[LogEvent]) -> list[str]:
    return [event.code for event in events if event.level == "CRITICAL"]


@pytest.mark.parametrize("saver", ["team", "memory"])
def test_a_fork_from_an_earlier_checkpoint_is_logged_from_its_own_point(tmp_path: Path, saver: str) -> None:
    team = _team(tmp_path, InMemorySaver() if saver == "memory" else None)
    graph, config = team.compile(), {"configurable": {"thread_id": "fruit"}}
    graph.invoke({"messages": [("user", "Research fruit")]}, config)
    flush_log(team, config)
    before = read_log(team, config)

    early = next(s for s in graph.get_state_history(config) if s.metadata["step"] == 2)
    graph.invoke(None, graph.update_state(early.config, {"messages": [("user", "pears instead")]}))
    flush_log(team, config)
    branch = read_log(team, config)[len(before) :]

    assert not _problems(before) and not _problems(branch)
    contents = [event.content for event in branch]
    assert "branch" in contents[0]
    assert "task: pears instead" in contents and "reply: Leader says pears." in contents
    # NOTE: nothing of the branch is logged twice
    assert len(contents) == len(set(contents))


def test_a_new_thread_under_an_old_id_in_the_same_home_is_logged_whole(tmp_path: Path) -> None:
    config = {"configurable": {"thread_id": "fruit"}}
    logged: list[list[LogEvent]] = []
    for _ in range(2):
        # NOTE: a fresh InMemorySaver: a new process's thread of the same id, in the same home
        team = _team(tmp_path, InMemorySaver())
        team.compile().invoke({"messages": [("user", "Research fruit")]}, config)
        flush_log(team, config)
        logged.append(read_log(team, config))
    first, both = logged
    second = both[len(first) :]
    assert not _problems(both)
    assert "branch" in second[0].content
    # NOTE: completions may group the passes differently: the same lines, maybe in another order
    assert sorted(e.content for e in second[1:]) == sorted(e.content for e in first)


def test_an_index_from_before_states_carried_their_cursor_continues_where_it_was(tmp_path: Path) -> None:
    team, config = _team(tmp_path), {"configurable": {"thread_id": "fruit"}}
    graph = team.compile()
    graph.invoke({"messages": [("user", "Research fruit")]}, config)
    flush_log(team, config)
    before = read_log(team, config)
    (index,) = tmp_path.glob("project/fruit/logs/" + audit_log.INDEX_FILE)
    audit_log._forget_open_indexes()  # NOTE: as a new process, on an index written by an older teamgraph
    with sqlite3.connect(index) as db:
        db.execute("ALTER TABLE cursors DROP COLUMN logged_from")

    graph.invoke({"messages": [("user", "pears instead")]}, config)
    flush_log(team, config)
    after = read_log(team, config)[len(before) :]
    assert not _problems(after)
    contents = [event.content for event in after]
    assert contents[0] == "task: pears instead" and "reply: Leader says pears." in contents
    assert not [c for c in contents if "branch" in c]


COUNTS = st.dictionaries(st.sampled_from(["Team Leader", "R1", "R2"]), st.integers(0, 50), max_size=3)
CURSORS = st.fixed_dictionaries(
    {"histories": COUNTS, "user": st.integers(0, 9), "open_messages": st.lists(st.sampled_from(["m1", "m2"]))}
)


@settings(max_examples=200, deadline=None)
@given(st.lists(CURSORS, min_size=1, max_size=8), st.integers(1, 8))
def test_log_writes_are_deltas_that_fold_to_each_cursor_in_any_batching(cursors, chunk) -> None:
    writes, before = [], None
    for cursor in cursors:
        writes.append(log_delta(before, cursor))
        before = cursor
    assert merge_log(None, writes) == cursors[-1]
    folded: dict[str, Any] | None = None
    for start in range(0, len(writes), chunk):
        folded = merge_log(folded, writes[start : start + chunk])
    assert folded == cursors[-1]


@pytest.mark.parametrize("saver", ["team", "memory"])
def test_two_edits_of_one_checkpoint_are_two_branches(tmp_path: Path, saver: str) -> None:
    # NOTE: review 17: both edits carry the checkpoint's cursor; only their messages tell them apart.
    team = _team(tmp_path, InMemorySaver() if saver == "memory" else None)
    graph, config = team.compile(), {"configurable": {"thread_id": "fruit"}}
    graph.invoke({"messages": [("user", "Research fruit")]}, config)
    flush_log(team, config)
    tip = graph.get_state(config)
    graph.update_state(tip.config, {"messages": [("user", "pears A1"), ("user", "pears A2"), ("user", "pears A3")]})
    flush_log(team, config)
    before = len(read_log(team, config))
    graph.update_state(tip.config, {"messages": [("user", "pears B")]})
    flush_log(team, config)
    graph.invoke({"messages": [("user", "plums B")]}, config)
    flush_log(team, config)
    branch = read_log(team, config)[before:]
    contents = [event.content for event in branch]
    assert not _problems(branch)
    assert "branch" in contents[0]
    assert "task: pears B" in contents and "task: plums B" in contents
    assert not [c for c in contents if "pears A" in c]
