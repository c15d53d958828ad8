"""Model calls in flight, and each agent's step taken in its own node.

The router starts an issued step's model call at once and sends the member to its role
node when the call is done; the node takes the answer, runs the tools and returns the
history and the effects. These tests drive a scripted team under
``Policy(scheduling="completions")`` (a scripted team runs in lockstep under ``"auto"``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeClock
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from scripting import act, call, quiet

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.audit import writer as audit_writer

LEADER = "Team Leader"
R1, U1 = "Researcher_1", "UI Operator_1"
COMPLETIONS = Policy(scheduling="completions")


def two_members() -> dict[str, Any]:
    return {
        LEADER: [
            act(
                call("create_sub_agent", role_id="researcher", task="Survey the sources."),
                call("create_sub_agent", role_id="ui-operator", task="Draw the screens."),
            ),
            *quiet(),
        ],
        R1: [act(call("list_files")), act(call("list_files")), "Survey done."],
        U1: [act(call("list_files")), "Screens drawn."],
    }


def counting(script: dict[str, list[Any]], calls: Counter[str]) -> dict[str, list[Any]]:
    """``script`` whose turns count, per agent, the model calls actually made."""

    def turn(name: str, value: Any) -> Callable[[list[BaseMessage]], Any]:
        def play(messages: list[BaseMessage]) -> Any:
            calls[name] += 1
            return value(messages) if callable(value) else value

        return play

    return {name: [turn(name, value) for value in turns] for name, turns in script.items()}


def ai_count(values: dict[str, Any], name: str) -> int:
    return sum(isinstance(m, AIMessage) for m in values["histories"][name])


class FailsOnce(InMemorySaver):
    """Fails to save the writes of the first pass that issues a member's step: its state is never committed."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def put_writes(self, config, writes, task_id, task_path=""):
        team = dict(writes).get("team") or {}
        if not self.failed and any(name != LEADER for name in team.get("in_flight", {})):
            self.failed = True
            raise OSError("disk full")
        return super().put_writes(config, writes, task_id, task_path)


@pytest.mark.parametrize("policy", [COMPLETIONS, Policy(scheduling="lockstep")], ids=["completions", "lockstep"])
def test_each_member_streams_its_step_under_its_role_node(tmp_path: Path, policy: Policy) -> None:
    """Issue 29: a member's updates come under its role node, and every token names that node."""
    team = Team(model=ScriptedChatModel(two_members()), home=tmp_path, policy=policy)
    graph = team.compile()
    config = {"configurable": {"thread_id": "streamed"}}
    texts: dict[str, str] = {}
    updated: dict[str, set[str]] = {}
    nodes = {LEADER: "leader", R1: "researcher", U1: "ui-operator"}
    for ns, mode, chunk in graph.stream(
        {"messages": [("user", "Please do the work.")]},
        config,
        stream_mode=["updates", "messages", "custom"],
        subgraphs=True,
    ):
        if mode == "messages" and isinstance(chunk[0], AIMessageChunk):
            message, meta = chunk
            assert meta["langgraph_node"] == nodes[meta["teamgraph_agent"]], meta
            texts[message.id] = texts.get(message.id, "") + message.text
        elif mode == "updates" and not ns:
            for node, update in chunk.items():
                for agent in (update or {}).get("histories", {}) if node != "router" else ():
                    updated.setdefault(agent, set()).add(node)
        elif mode == "updates":
            assert ns[0].split(":")[0] in nodes.values()  # NOTE: the role subgraph's model, tools, effects
    assert updated == {name: {node} for name, node in nodes.items()}
    histories = graph.get_state(config).values["histories"]
    kept = {m.id: m.text for name in nodes for m in histories[name] if isinstance(m, AIMessage)}
    assert texts == kept  # NOTE: every call streamed once, whole, under the id its history keeps


def test_the_graph_shows_the_leader_each_role_a_member_node_and_the_gate(tmp_path: Path) -> None:
    """Issue 29: ``get_graph()`` is the team; ``xray`` shows each role subgraph's model, tools and effects."""
    graph = Team(model=ScriptedChatModel(two_members()), home=tmp_path).compile()
    nodes = set(graph.get_graph().nodes)
    assert {"router", "leader", "researcher", "ui-operator", "member", "human"} <= nodes
    inner = set(graph.get_graph(xray=True).nodes)
    assert {"researcher:model", "researcher:tools", "researcher:effects", "leader:model"} <= inner


def test_a_superstep_retried_after_a_failed_put_writes_makes_each_call_once(tmp_path: Path) -> None:
    """The retried pass issues the same dispatches on the same state: the calls in flight serve it."""
    calls: Counter[str] = Counter()
    team = Team(
        model=ScriptedChatModel(counting(two_members(), calls)),
        home=tmp_path,
        policy=COMPLETIONS,
        checkpointer=FailsOnce(),
        clock=FakeClock(),
    )
    graph = team.compile()
    config = {"configurable": {"thread_id": "retried"}}
    with pytest.raises(OSError):
        graph.invoke({"messages": [("user", "Please do the work.")]}, config)
    graph.invoke(None, config)

    values = graph.get_state(config).values
    assert (ai_count(values, R1), ai_count(values, U1)) == (3, 2)
    assert (calls[R1], calls[U1]) == (3, 2)


def test_a_superstep_retried_after_a_failed_log_write_makes_each_call_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log write fails in the pass that spawns the member; the resumed pass issues the
    same step on the same state: one call, not two."""
    calls: Counter[str] = Counter()
    script = {
        LEADER: [act(call("create_sub_agent", role_id="researcher", task="Survey.")), *quiet()],
        R1: ["Survey done."],
    }
    team = Team(model=ScriptedChatModel(counting(script, calls)), home=tmp_path, policy=COMPLETIONS, clock=FakeClock())
    graph = team.compile()
    original, failed = audit_writer.write_committed, []

    def flaky(runtime, state, config=None, **kwargs):
        spawning = R1 not in state.get("agents", {}) and any(e.get("kind") == "spawn" for e in state.get("outbox", []))
        if spawning and not failed:
            failed.append(1)
            raise OSError("disk full")
        return original(runtime, state, config, **kwargs)

    monkeypatch.setattr(audit_writer, "write_committed", flaky)
    config = {"configurable": {"thread_id": "log-fails"}}
    with pytest.raises(OSError):
        graph.invoke({"messages": [("user", "Go")]}, config)
    graph.invoke(None, config)

    values = graph.get_state(config).values
    assert failed and values["agents"][R1]["status"] == "idle"
    assert calls[R1] == 1


def test_a_state_edited_during_a_pause_still_goes_to_the_human_gate_and_takes_the_answer(tmp_path: Path) -> None:
    """An edit of a paused thread (``update_state``, Studio's state editor) keeps it at the human gate."""
    script = {LEADER: [act(call("ask_user", question="Blue or red?")), "Going with blue."]}
    team = Team(model=ScriptedChatModel(script), home=tmp_path, policy=COMPLETIONS, clock=FakeClock())
    graph = team.compile()
    config = {"configurable": {"thread_id": "edited"}}
    out = graph.invoke({"messages": [("user", "Design a logo")]}, config)
    assert out["__interrupt__"] and graph.get_state(config).next == ("human",)

    graph.update_state(config, {"messages": []})

    assert graph.get_state(config).next == ("human",)
    graph.invoke(Command(resume={"ask_1": "Blue"}), config)
    values = graph.get_state(config).values
    assert values["requests"]["ask_1"]["status"] == "answered"
    assert values["messages"][-1].content == "Going with blue."


def test_edits_keep_the_thread_going_where_the_router_sent_it(tmp_path: Path) -> None:
    """An edit made as the router gets the router's Command: paused stays paused, a finished
    thread stays finished; a fork of the paused checkpoint is paused at the gate too."""
    script = {LEADER: [act(call("ask_user", question="Blue or red?")), "Going with blue."]}
    team = Team(model=ScriptedChatModel(script), home=tmp_path, policy=COMPLETIONS, clock=FakeClock())
    graph = team.compile()
    config = {"configurable": {"thread_id": "edits"}}
    graph.invoke({"messages": [("user", "Design a logo")]}, config)

    graph.update_state(config, {"messages": []}, as_node="router")
    assert graph.get_state(config).next == ("human",)

    graph.invoke(Command(resume={"ask_1": "Blue"}), config)
    assert graph.get_state(config).next == ()
    graph.update_state(config, {"messages": []}, as_node="router")
    assert graph.get_state(config).next == ()
    graph.update_state(config, {"messages": []}, as_node="human")
    assert graph.get_state(config).next == ("router",)

    paused = next(s for s in graph.get_state_history(config) if s.next == ("human",))
    fork = graph.update_state(paused.config, {"messages": []})
    assert graph.get_state(fork).next == ("human",)
    graph.invoke(Command(resume={"ask_1": "Red"}), fork)
    assert graph.get_state(config).values["requests"]["ask_1"]["status"] == "answered"
