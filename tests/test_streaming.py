"""Streaming a team run: every agent's tokens and events, named.

`graph.stream(..., stream_mode=["updates", "messages", "custom"], subgraphs=True)`
is how code (and Studio) watches a team work. Each model call's config carries
`teamgraph_agent` / `teamgraph_role` metadata, so the `messages` mode tells whose
tokens these are. Steps run in the scheduler's pool and are issued by the router
node, so they stream as the router's (root namespace, node "router"); the agent tags
say whose they are.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from teamgraph import ScriptedChatModel, Team
from teamgraph.demo import DEMO_SCRIPT

TASK = "Build a login feature"
ROLES = {
    "Team Leader": "team-leader",
    "UI Operator_1": "ui-operator",
    "UI Operator_2": "ui-operator",
    "Full-Stack Engineer_1": "full-stack-engineer",
}
MODES = ["updates", "messages", "custom"]


@pytest.fixture(scope="module")
def streamed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The demo team streamed to the end: every event, and the final state."""
    home: Path = tmp_path_factory.mktemp("home")
    team = Team(model=ScriptedChatModel(DEMO_SCRIPT), home=home, checkpointer=InMemorySaver())
    graph = team.compile()
    config = {"configurable": {"thread_id": "stream-1"}}
    events = list(graph.stream({"messages": [("user", TASK)]}, config, stream_mode=MODES, subgraphs=True))
    return {"events": events, "state": graph.get_state(config), "team": team, "config": config}


def _messages(streamed: dict[str, Any]) -> list[tuple[tuple[str, ...], Any, dict[str, Any]]]:
    return [
        (ns, msg, meta)
        for ns, mode, (msg, meta) in ((ns, mode, data) for ns, mode, data in streamed["events"] if mode == "messages")
    ]


def test_events_have_the_requested_shape(streamed: dict[str, Any]) -> None:
    assert streamed["events"], "the stream gave nothing"
    for event in streamed["events"]:
        ns, mode, _ = event
        assert isinstance(ns, tuple) and mode in MODES
    assert streamed["state"].next == ()
    assert streamed["state"].values["messages"][-1].content.startswith("The login feature is built.")


def test_every_token_names_its_agent_and_role(streamed: dict[str, Any]) -> None:
    seen: set[str] = set()
    for ns, msg, meta in _messages(streamed):
        if not isinstance(msg, AIMessageChunk):
            continue
        agent = meta.get("teamgraph_agent")
        assert agent in ROLES, f"token without a known teamgraph_agent: {meta}"
        assert meta.get("teamgraph_role") == ROLES[agent], meta
        # Tokens stream as the agent's node (issue 29): its role's node, or the leader's.
        assert meta["langgraph_node"] == ("leader" if agent == "Team Leader" else ROLES[agent]), meta
        # NOTE: like a model called inside any top-level node: the root namespace, no subgraphs=True needed.
        assert ns == (), (ns, agent)
        seen.add(agent)
    assert seen == set(ROLES)


def test_tokens_add_up_to_each_agents_history(streamed: dict[str, Any]) -> None:
    """Joining one call's tokens gives the message the agent's history keeps."""
    calls: dict[str, list[str]] = defaultdict(list)  # agent -> one text per model call
    ids: dict[str, int] = {}
    for _, msg, meta in _messages(streamed):
        if isinstance(msg, AIMessageChunk):
            agent = meta["teamgraph_agent"]
            if msg.id not in ids:
                ids[msg.id] = len(calls[agent])
                calls[agent].append("")
            calls[agent][ids[msg.id]] += msg.text
    histories = streamed["state"].values["histories"]
    for agent in ROLES:
        kept = [m.text for m in histories[agent] if isinstance(m, AIMessage)]
        assert calls[agent] == kept, agent


def test_step_updates_name_the_agent(streamed: dict[str, Any]) -> None:
    """At the top level, each agent's node's update carries its step under its agent's name."""
    stepped: set[str] = set()
    for ns, mode, data in streamed["events"]:
        if mode != "updates" or ns != ():
            continue
        for node, update in data.items():
            if node in ("router", "human") or not update:
                continue
            for name, messages in update.get("histories", {}).items():
                if any(isinstance(m, AIMessage) for m in messages):
                    assert name in ROLES, name
                    stepped.add(name)
    assert stepped == set(ROLES)


def test_custom_mode_events_are_tagged(streamed: dict[str, Any]) -> None:
    """Every agent step writes one custom "step" event naming the agent and its role."""
    events = [data for _, mode, data in streamed["events"] if mode == "custom"]
    assert {e["teamgraph_agent"] for e in events} == set(ROLES)
    for event in events:
        assert event["event"] == "step"
        assert event["teamgraph_role"] == ROLES[event["teamgraph_agent"]]


def test_async_stream_names_the_agents(tmp_path: Path) -> None:
    import asyncio

    async def collect() -> set[str]:
        team = Team(model=ScriptedChatModel(DEMO_SCRIPT), home=tmp_path, checkpointer=InMemorySaver())
        graph = team.compile()
        agents = set()
        config = {"configurable": {"thread_id": "astream-1"}}
        async for _ns, mode, data in graph.astream(
            {"messages": [("user", TASK)]}, config, stream_mode=MODES, subgraphs=True
        ):
            if mode == "messages" and isinstance(data[0], AIMessageChunk):
                agents.add(data[1]["teamgraph_agent"])
        return agents

    assert asyncio.run(collect()) == set(ROLES)


def test_messages_mode_does_not_replay_prompts(streamed: dict[str, Any]) -> None:
    """Only the models' tokens, the tools' results and the leader's replies to the user are streamed, never a prompt."""

    def allowed(msg: Any, meta: dict[str, Any]) -> bool:
        token = isinstance(msg, AIMessageChunk | ToolMessage) and meta.get("teamgraph_agent") in ROLES
        return token or (isinstance(msg, AIMessage) and msg.name == "Team Leader")

    replayed = [
        (meta.get("teamgraph_agent"), type(msg).__name__)
        for _, msg, meta in _messages(streamed)
        if isinstance(msg, SystemMessage) or not allowed(msg, meta)
    ]
    assert replayed == []
