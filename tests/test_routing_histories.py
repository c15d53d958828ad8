"""Scenario tests of the router: every message once in every history, and step slices.

Scenarios run as ``test_team_routing.py`` describes.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from fidelity_fixtures import has_envelope
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from scripting import act, call, reply_when_done

from teamgraph import Policy

LEADER = "Team Leader"


# --- exactly once ----------------------------------------------------------------------


def assert_well_formed(history, name: str) -> None:
    """Every tool call is answered exactly once, right after its AI message; no duplicates."""
    answered = Counter(m.tool_call_id for m in history if isinstance(m, ToolMessage))
    assert all(n == 1 for n in answered.values()), (name, answered)
    for i, message in enumerate(history):
        if isinstance(message, AIMessage):
            ids = [c["id"] for c in message.tool_calls] + [c["id"] for c in message.invalid_tool_calls]
            block = history[i + 1 : i + 1 + len(ids)]
            assert sorted(m.tool_call_id for m in block if isinstance(m, ToolMessage)) == sorted(ids), (name, i)
    ai_ids = {c["id"] for m in history if isinstance(m, AIMessage) for c in m.tool_calls}
    ai_ids |= {c["id"] for m in history if isinstance(m, AIMessage) for c in m.invalid_tool_calls}
    assert set(answered) == ai_ids, name
    envelopes = Counter(str(m.content) for m in history if isinstance(m, HumanMessage))
    assert all(n == 1 for n in envelopes.values()), (name, envelopes.most_common(2))


def test_the_demo_team_delivers_every_message_exactly_once(make_team):
    from pathlib import Path

    import teamgraph

    demo = Path(teamgraph.__file__).parent / "demo" / "demo.yaml"
    if not demo.exists():
        pytest.skip("no demo script")
    import yaml

    run = make_team(yaml.safe_load(demo.read_text(encoding="utf-8")))
    run.send("Build a login feature")
    agents = run.agents()
    assert set(agents) == {LEADER, "UI Operator_1", "UI Operator_2", "Full-Stack Engineer_1"}
    for name in agents:
        assert_well_formed(run.history(name), name)
    # Each output id reaches the leader at most once, and in order.
    leader_text = "\n".join(run.inbox_texts(LEADER))
    out_ids = re.findall(r"id: (out_\d+)", leader_text)
    assert len(out_ids) == len(set(out_ids))
    # Each question reaches its receiver exactly once.
    for request in run.requests().values():
        receiver_text = "\n".join(run.inbox_texts(request["to"]))
        assert receiver_text.count(f"id: {request['id']}\n") == 1, request["id"]
        assert request["status"] == "answered"
    # Every member's final answer reached the leader once (as a result or a tool result).
    for name in agents:
        if name == LEADER:
            continue
        final = run.history(name)[-1].content
        assert leader_text.count(final) == 1, name
    # The user sees the leader's report once.
    assert len(run.user_replies()) == 1


def test_histories_stay_exactly_once_across_user_messages(make_team):
    def leader(messages):
        last = str(messages[-1].content)
        if last == "Part one, please":
            return act(call("create_sub_agent", role_id="researcher", task="Part one."))
        if last == "Now part two":
            return act(call("send_message_to_sub_agent", display_name="Researcher_1", message="Part two."))
        if has_envelope(last, title="Result", sender="Researcher_1", id="out_1"):
            return "Part one done."
        if has_envelope(last, title="Result", sender="Researcher_1", id="out_2"):
            return "Part two done."
        return ""

    run = make_team(
        {
            LEADER: [leader] * 8,
            "Researcher_1": [act(call("write_file", path="one.md", content="1")), "One written.", "Two written."],
        }
    )
    run.send("Part one, please")
    before = {name: list(run.history(name)) for name in run.agents()}
    run.send("Now part two")
    for name, old in before.items():
        new = run.history(name)
        assert len(new) > len(old), name
        assert [(type(m), m.content) for m in new[: len(old)]] == [(type(m), m.content) for m in old], name
        assert_well_formed(new, name)
    assert run.user_replies() == ["Part one done.", "Part two done."]
    user_inputs = [t for t in run.inbox_texts(LEADER) if t in ("Part one, please", "Now part two")]
    assert user_inputs == ["Part one, please", "Now part two"]


# --- step slices ------------------------------------------------------------------------


def test_a_slice_runs_its_work_steps_one_task_each_and_messages_wait_for_its_end(tmp_path):
    from langchain_core.tools import tool

    from teamgraph import ScriptedChatModel, Team

    notes: list[str] = []

    @tool
    def take_note(text: str) -> str:
        """Keep a note (work that asks the router for nothing)."""
        notes.append(text)
        return "noted"

    # NOTE: a project file write records its version with the router (a file effect), which ends
    # a slice like any effect; this slice's work is a tool of the user's that asks for nothing.
    script = {
        LEADER: [
            act(call("create_sub_agent", role_id="researcher", task="Write three notes.")),
            act(call("send_message_to_sub_agent", display_name="Researcher_1", message="Also add a summary.")),
            *reply_when_done("Notes written.", "Researcher_1"),
        ],
        "Researcher_1": [
            act(call("take_note", text="a")),
            act(call("take_note", text="b")),
            act(call("take_note", text="c")),
            "Three notes written, with a summary.",
        ],
    }
    team = Team(model=ScriptedChatModel(script), home=tmp_path, policy=Policy(slice_steps=3), tools=[take_note])
    graph = team.compile()
    config = {"configurable": {"thread_id": "slice"}}
    ran_together = []
    for update in graph.stream({"messages": [("user", "Go")]}, config, stream_mode="updates"):
        for node, value in update.items():
            step = (value or {}).get("histories", {}).get("Researcher_1", [])
            if node == "researcher" and any(isinstance(m, AIMessage) for m in step):
                ran_together.append(sum(isinstance(m, AIMessage) for m in step))
    # NOTE: one model call a task: a call made in the task would hold the superstep (and everybody).
    assert ran_together == [1, 1, 1, 1]
    history = team.history(config, "Researcher_1")
    # The leader's message arrived after the slice's last tool result, never inside it.
    message_at = next(i for i, m in enumerate(history) if "Also add a summary." in str(m.content))
    assert [type(m).__name__ for m in history[message_at - 2 : message_at]] == ["AIMessage", "ToolMessage"]
    assert sum(isinstance(m, AIMessage) for m in history[:message_at]) == 3
    assert notes == ["a", "b", "c"]
    # The message landed inline, so the fourth call (which ends the turn) saw it.
    assert isinstance(history[message_at + 1], AIMessage)
    assert team.agents(config)["Researcher_1"]["steps"] == 4


def test_a_slice_ends_at_a_step_that_asks_the_team_for_something(tmp_path):
    from teamgraph import ScriptedChatModel, Team

    script = {
        LEADER: [
            act(call("create_sub_agent", role_id="researcher", task="Research.")),
            "",
            act(call("answer_sub_agent_question", question_id="ask_1", answer="Both.")),
            *reply_when_done("Done.", "Researcher_1"),
        ],
        "Researcher_1": [
            act(call("write_file", path="a.md", content="a")),
            act(call("ask_master", question="One source or both?")),
            act(call("write_file", path="b.md", content="b")),
            "Used both sources.",
        ],
    }
    team = Team(model=ScriptedChatModel(script), home=tmp_path, policy=Policy(slice_steps=5))
    graph = team.compile()
    config = {"configurable": {"thread_id": "slice-ask"}}
    out = graph.invoke({"messages": [("user", "Go")]}, config)
    assert out["messages"][-1].content == "Done."
    tool_results = [m.content for m in team.history(config, "Researcher_1") if isinstance(m, ToolMessage)]
    assert tool_results[1] == "Team Leader answered: Both."
