"""The team as a node of a user's own LangGraph graph.

A parent graph may have no checkpointer (the team then saves nothing: LangGraph lends
its subgraphs the parent's lack of one) or one of its own (the team's checkpoints go
to the parent's saver, and a person's answer resumes the parent).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessageChunk
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command
from scripting import act, call, reply_when_done

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.demo import DEMO_SCRIPT
from tests.test_async import ASK_SCRIPT, FINAL

# NOTE: the leader's turns do not depend on when the results arrive (any scheduling).
TWO_MEMBERS = {
    "Team Leader": [
        act(
            call("create_sub_agent", role_id="researcher", task="Survey the sources."),
            call("create_sub_agent", role_id="ui-operator", task="Draw the screens."),
        ),
        *reply_when_done(FINAL, "Researcher_1", "UI Operator_1"),
    ],
    "Researcher_1": [act(call("list_files")), "Survey done."],
    "UI Operator_1": ["Screens drawn."],
}

CONFIG = {"configurable": {"thread_id": "outer"}}


def _parent(team: Team, checkpointer: Any = None) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("team", team.compile())
    builder.add_edge(START, "team")
    builder.add_edge("team", END)
    return builder.compile(checkpointer=checkpointer)


@pytest.mark.parametrize("scheduling", ["lockstep", "completions"])
def test_a_parent_without_a_checkpointer_runs_the_team_to_its_answer(tmp_path: Path, scheduling: str) -> None:
    team = Team(model=ScriptedChatModel(TWO_MEMBERS), home=tmp_path, policy=Policy(scheduling=scheduling))
    result = _parent(team).invoke({"messages": [("user", "Build a login feature")]}, CONFIG)
    assert result["messages"][-1].content.startswith(FINAL)


def test_a_parent_without_a_checkpointer_runs_the_team_under_ainvoke(tmp_path: Path) -> None:
    team = Team(model=ScriptedChatModel(DEMO_SCRIPT), home=tmp_path)
    parent = _parent(team)
    result = asyncio.run(parent.ainvoke({"messages": [("user", "Build a login feature")]}, CONFIG))
    assert result["messages"][-1].content.startswith(FINAL)


def test_a_parent_with_a_checkpointer_pauses_for_a_person_and_resumes(tmp_path: Path) -> None:
    team = Team(model=ScriptedChatModel(ASK_SCRIPT), home=tmp_path, policy=Policy(ask="human"))
    parent = _parent(team, InMemorySaver())
    paused = parent.invoke({"messages": [("user", "Design a login page")]}, CONFIG)
    (interrupt,) = paused["__interrupt__"]
    (request_id,) = interrupt.value["requests"]
    assert interrupt.value["requests"][request_id]["from"] == "UI Operator_1"
    result = parent.invoke(Command(resume={request_id: "Blue."}), CONFIG)
    assert result["messages"][-1].content == ASK_SCRIPT["Team Leader"][-1]
    assert not parent.get_state(CONFIG).next


def test_a_parent_streams_the_teams_tokens_tagged_per_agent(tmp_path: Path) -> None:
    team = Team(model=ScriptedChatModel(DEMO_SCRIPT), home=tmp_path)
    chunks = _parent(team).stream(
        {"messages": [("user", "Build a login feature")]}, CONFIG, stream_mode="messages", subgraphs=True
    )
    agents = {meta.get("teamgraph_agent") for _, (message, meta) in chunks if isinstance(message, AIMessageChunk)}
    assert agents == {"Team Leader", "UI Operator_1", "UI Operator_2", "Full-Stack Engineer_1"}
