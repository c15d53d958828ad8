"""The collaboration log of a branch: a fork from an earlier checkpoint is logged from its fork point."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from audit_fixtures import CONFIG, log_lines, login_team
from conftest import FakeClock
from langchain_core.messages import AIMessage
from langgraph.types import Command
from pg_fixtures import postgres_server, postgres_url  # noqa: F401
from scripting import act, call, on_message

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.audit import flush_log, parse_line
from teamgraph.audit.events import derive_events, new_cursor
from teamgraph.audit.log import INDEX_FILE
from teamgraph.checkpoints.aio import open_async_sqlite_saver

REPLY = ("Team Leader", "user", "call", "reply", "success")


def _heads(lines: list[str]) -> Counter[tuple[str, str, str, str, str]]:
    """Each line's (sender, receiver, kind, what, result), counted."""
    events = [parse_line(line) for line in lines]
    return Counter((e.sender, e.receiver, e.kind, re.split(r"[(:]", e.content)[0].strip(), e.result) for e in events)


def test_a_branch_forked_from_an_earlier_checkpoint_logs_its_own_lines_once(tmp_path: Path) -> None:
    team = login_team(tmp_path / "home", clock=FakeClock())
    graph = team.compile()
    graph.invoke({"messages": [("user", "Build a login page.")]}, CONFIG)
    flush_log(team, CONFIG)
    before = log_lines(team.home)
    fork = graph.update_state(_before_the_members_first_step(graph).config, {"messages": []})
    graph.invoke(None, fork)
    flush_log(team, CONFIG)
    branch = _heads(log_lines(team.home)[len(before) :])
    codes = [parse_line(line).code for line in log_lines(team.home)]
    assert "LOST_DATA" not in codes
    assert branch[("Team Leader", "UI Operator_1", "task", "created UI Operator_1", "success")] == 0
    for head in [
        ("UI Operator_1", "files", "file", "write_file", "success"),
        ("UI Operator_1", "files", "file", "read_file", "failed"),
        ("UI Operator_1", "Team Leader", "call", "ask_1 ask opened", "success"),
        ("Team Leader", "UI Operator_1", "call", "ask_1 answered", "success"),
        ("UI Operator_1", "Team Leader", "call", "reply", "success"),
        ("Team Leader", "user", "call", "reply", "success"),
    ]:
        assert branch[head] == 1, (head, branch)


@pytest.mark.parametrize("scheduling", ["completions", "lockstep"])
def test_every_checkpoint_of_a_run_is_logged_under_its_own_id(tmp_path: Path, scheduling) -> None:
    """The log follows the committed checkpoints: each is logged by the task that reads it, the last by flush_log."""
    team = login_team(tmp_path / "home", clock=FakeClock(), policy=Policy(scheduling=scheduling))
    graph = team.compile()
    graph.invoke({"messages": [("user", "Build a login page.")]}, CONFIG)
    flush_log(team, CONFIG)
    history = graph.get_state_history(CONFIG)
    run = {s.config["configurable"]["checkpoint_id"] for s in history if s.metadata["step"] >= 0}
    with sqlite3.connect(team.home / "logs" / "login" / INDEX_FILE) as index:
        logged = {checkpoint for (checkpoint,) in index.execute("SELECT checkpoint FROM logged")}
    assert run <= logged


def test_a_pass_that_never_saw_what_its_agents_read_logs_on_from_the_pass_before_them(tmp_path: Path) -> None:
    """A run that stops between the agents' nodes and the next pass (an interrupt here; a kill alike).

    What the agents' nodes read is then never logged; the pass that resumes logs on from the
    pass before them, not from the thread's latest cursor, which another branch moved meanwhile.
    """
    team = login_team(tmp_path / "home", clock=FakeClock())
    graph = team.compile()
    graph.invoke({"messages": [("user", "Build a login page.")]}, CONFIG)
    flush_log(team, CONFIG)
    trunk = graph.get_state(CONFIG).config
    before = log_lines(team.home)
    fork = graph.update_state(_before_the_members_first_step(graph).config, {"messages": []})
    graph.invoke(None, fork, interrupt_after=["leader", "ui-operator", "member"])
    flush_log(team, trunk)  # NOTE: the trunk's end, logged already: the thread's latest cursor is the trunk's again
    graph.invoke(None, CONFIG)
    flush_log(team, CONFIG)
    branch = log_lines(team.home)[len(before) :]
    assert _twice(branch) == []
    assert "LOST_DATA" not in [parse_line(line).code for line in branch]
    assert _heads(branch)[("UI Operator_1", "files", "file", "write_file", "success")] == 1
    assert _heads(branch)[REPLY] == 1


def _before_the_members_first_step(graph):
    """The first checkpoint where the member exists and has not taken a step: everything it does comes after."""
    return next(
        s
        for s in reversed(list(graph.get_state_history(CONFIG)))
        if "UI Operator_1" in s.values.get("agents", {})
        and not any(isinstance(m, AIMessage) for m in s.values["histories"].get("UI Operator_1", []))
    )


def _user_tasks(home: Path) -> Counter[str]:
    """The user's messages in the log (the task lines from the user), counted by text."""
    return Counter(e.content for e in map(parse_line, log_lines(home)) if e.sender == "user" and e.kind == "task")


def _chat_team(home: Path, **kwargs) -> Team:
    return Team(model=ScriptedChatModel({"Team Leader": [f"Answer {n}." for n in range(8)]}), home=home, **kwargs)


def test_a_past_message_sent_again_differently_is_logged_once_beside_the_first(tmp_path: Path) -> None:
    """Studio's "edit a past message": the thread goes back before it and runs on from there."""
    team = _chat_team(tmp_path / "home", clock=FakeClock())
    _three_questions(team.compile(), CONFIG)  # NOTE: no flush between the runs: runs from code
    flush_log(team, CONFIG)
    told = _user_tasks(team.home)
    assert [sum(n for text, n in told.items() if word in text) for word in ("first", "second", "third")] == [1, 1, 1]
    assert "LOST_DATA" not in [parse_line(line).code for line in log_lines(team.home)]


def test_a_fork_of_the_first_checkpoint_logs_only_what_follows_it(tmp_path: Path) -> None:
    team = _chat_team(tmp_path / "home", clock=FakeClock())
    graph = team.compile()
    graph.invoke({"messages": [("user", "first question")]}, CONFIG)
    flush_log(team, CONFIG)
    first = list(graph.get_state_history(CONFIG))[-1]  # NOTE: the input checkpoint, before any pass
    graph.invoke(None, graph.update_state(first.config, {"messages": []}))
    flush_log(team, CONFIG)
    assert sum(n for text, n in _user_tasks(team.home).items() if "first" in text) == 1
    assert "LOST_DATA" not in [parse_line(line).code for line in log_lines(team.home)]


def test_a_new_thread_under_an_old_id_in_another_checkpointer_is_logged_whole(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for db, question in (("a.sqlite", "first question"), ("b.sqlite", "other question")):
        team = _chat_team(home, clock=FakeClock(), checkpointer=tmp_path / db)
        team.compile().invoke({"messages": [("user", question)]}, CONFIG)
        flush_log(team, CONFIG)
    told = _user_tasks(home)
    assert [sum(n for text, n in told.items() if word in text) for word in ("first", "other")] == [1, 1]
    replies = [e for e in map(parse_line, log_lines(home)) if e.sender == "Team Leader" and e.receiver == "user"]
    assert len(replies) == 2
    assert "LOST_DATA" not in [parse_line(line).code for line in log_lines(home)]


def _three_questions(graph, config) -> None:
    """First and second question, then the second replaced by a third (the thread rewound)."""
    graph.invoke({"messages": [("user", "first question")]}, config)
    end_of_first = graph.get_state(config).config
    graph.invoke({"messages": [("user", "second question")]}, config)
    graph.invoke({"messages": [("user", "third question")]}, end_of_first)


def test_a_rewound_thread_on_postgres_walks_the_parents_there(postgres_url, tmp_path: Path) -> None:  # noqa: F811
    team = _chat_team(tmp_path / "home", clock=FakeClock(), checkpointer=postgres_url)
    _three_questions(team.compile(), CONFIG)
    flush_log(team, CONFIG)
    told = _user_tasks(team.home)
    assert [sum(n for text, n in told.items() if word in text) for word in ("first", "second", "third")] == [1, 1, 1]


def test_a_rewound_thread_on_the_async_saver_walks_the_parents_from_the_writer_thread(tmp_path: Path) -> None:
    """The parents are read with the saver's sync API from the log's writer thread, while the loop runs."""

    async def main() -> None:
        async with open_async_sqlite_saver(tmp_path / "async.sqlite") as saver:
            graph = _chat_team(tmp_path / "home", clock=FakeClock(), checkpointer=saver).compile()
            await graph.ainvoke({"messages": [("user", "first question")]}, CONFIG)
            end_of_first = (await graph.aget_state(CONFIG)).config
            await graph.ainvoke({"messages": [("user", "second question")]}, CONFIG)
            await graph.ainvoke({"messages": [("user", "third question")]}, end_of_first)
            await graph.ainvoke({"messages": [("user", "fourth question")]}, CONFIG)

    asyncio.run(main())
    told = _user_tasks(tmp_path / "home")
    words = ("first", "second", "third", "fourth")
    assert [sum(n for text, n in told.items() if word in text) for word in words] == [1, 1, 1, 1]
    assert "LOST_DATA" not in [parse_line(line).code for line in log_lines(tmp_path / "home")]


ASK_SCRIPT = {
    "Team Leader": [
        act(call("create_sub_agent", role_id="ui-operator", task="Design web/login.html.")),
        *[on_message({"Result from UI Operator_1": "Login page ready."})] * 8,
    ],
    "UI Operator_1": [act(call("ask_master", question="Which colour?")), "Login page done."],
}
"""A member whose question goes to a person (``Policy(ask="human")``): the run pauses at the gate."""


@pytest.mark.parametrize("durability", ["exit", "async", "sync"])
def test_a_gate_resumed_in_a_run_that_does_not_save_each_step_logs_its_lines_once(tmp_path: Path, durability) -> None:
    """The pass after the gate reads a checkpoint the saver may not have yet: its lines are still logged once."""
    for attempt in range(3):
        home = tmp_path / f"home{attempt}"
        team = Team(model=ScriptedChatModel(ASK_SCRIPT), home=home, policy=Policy(ask="human"), clock=FakeClock())
        graph = team.compile()
        graph.invoke({"messages": [("user", "Build a login page.")]}, CONFIG, durability=durability)
        graph.invoke(Command(resume={"ask_1": "Blue."}), CONFIG, durability=durability)
        flush_log(team, CONFIG)
        heads = _heads(log_lines(home))
        assert heads[("UI Operator_1", "human", "call", "ask_1 ask opened", "success")] == 1, heads
        assert _twice(log_lines(home)) == []


@pytest.mark.parametrize("durability", ["exit", "async"])
def test_a_flushed_run_then_another_that_does_not_save_each_step_logs_each_line_once(
    tmp_path: Path, durability
) -> None:
    for attempt in range(3):
        team = _chat_team(tmp_path / f"home{attempt}", clock=FakeClock())
        graph = team.compile()
        for question in ("first question", "second question"):
            graph.invoke({"messages": [("user", question)]}, CONFIG, durability=durability)
            flush_log(team, CONFIG)
        assert _twice(log_lines(team.home)) == []


def test_a_thread_logged_before_the_per_checkpoint_index_goes_on_from_where_it_got_to(
    tmp_path: Path, monkeypatch
) -> None:
    """An index and team books written before ``logged`` and ``log_base`` existed (an upgrade)."""
    import teamgraph.audit.cursors as cursors
    import teamgraph.graph.router as router

    team = _chat_team(tmp_path / "home", clock=FakeClock())
    graph = team.compile()
    with monkeypatch.context() as old:
        old.setattr(router, "LOG_BASE", "written_before")  # NOTE: a team book with no base
        old.setattr(cursors, "record", lambda *args: None)  # NOTE: and no per-checkpoint rows
        for question in ("first question", "second question"):
            graph.invoke({"messages": [("user", question)]}, CONFIG)
    graph.invoke({"messages": [("user", "third question")]}, CONFIG)
    flush_log(team, CONFIG)
    told = _user_tasks(team.home)
    assert [sum(n for text, n in told.items() if word in text) for word in ("first", "second", "third")] == [1, 1, 1]
    assert _twice(log_lines(team.home)) == []
    assert "LOST_DATA" not in [parse_line(line).code for line in log_lines(team.home)]


def _twice(lines: list[str]) -> list[str]:
    """The lines written more than once (every line here names its own message, request or turn)."""
    return [line for line, n in Counter(lines).items() if n > 1]


@pytest.mark.parametrize("scheduling", ["completions", "lockstep"])
def test_a_fork_at_each_checkpoint_of_a_run_logs_the_branch_once_while_its_member_works(
    tmp_path: Path, scheduling
) -> None:
    """Forks taken where the member is idle, in a step, calling a tool or waiting on its question.

    Every checkpoint of the run is a fork point: the ones a pass wrote (read by the agents'
    nodes or the gate) and the ones the agents' nodes wrote (read by a pass). A branch
    logs what follows its fork point, once, and nothing its fork point held.
    """
    team = login_team(tmp_path / "home", clock=FakeClock(), policy=Policy(scheduling=scheduling))
    graph = team.compile()
    graph.invoke({"messages": [("user", "Build a login page.")]}, CONFIG)
    flush_log(team, CONFIG)
    points = [s for s in graph.get_state_history(CONFIG) if s.metadata["step"] >= 0]
    assert len([s for s in points if s.next == ("router",)]) >= 4
    for point in points:
        held = [e.content for e in derive_events(point.values, new_cursor(), now="-", policy=team.runtime.policy)[0]]
        before = log_lines(team.home)
        graph.invoke(None, graph.update_state(point.config, {"messages": []}))
        flush_log(team, CONFIG)
        branch = log_lines(team.home)[len(before) :]
        step = point.metadata["step"]
        assert _twice(branch) == [], step
        assert [e.content for e in map(parse_line, branch) if e.content in held] == [], step
        # NOTE: the leader's report is the trunk's once the fork point holds it (its last node's checkpoint).
        assert _heads(branch)[REPLY] == (0 if any(c.startswith("reply: Login page ready") for c in held) else 1), step
        assert "LOST_DATA" not in [parse_line(line).code for line in branch]
