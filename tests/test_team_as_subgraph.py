"""The team as a node of a user's own LangGraph graph.

A parent graph may have no checkpointer (the team then saves nothing: LangGraph lends
its subgraphs the parent's lack of one) or one of its own (the team's checkpoints go
to the parent's saver, and a person's answer resumes the parent).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from audit_fixtures import log_lines
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command
from scripting import act, call, reply_when_done

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.audit import parse_line
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
LONG_TWO_MEMBERS = {
    **TWO_MEMBERS,
    "Researcher_1": [act(call("list_files")), "Survey done."] * 20,
    "UI Operator_1": ["Screens drawn."] * 20,
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


def test_a_team_called_inside_a_parent_nodes_function_runs(tmp_path: Path) -> None:
    team_graph = Team(model=ScriptedChatModel(DEMO_SCRIPT), home=tmp_path).compile()

    def node(state: MessagesState) -> dict[str, Any]:
        # NOTE: no config passed: the team inherits the parent task's (no checkpointer here).
        return team_graph.invoke({"messages": state["messages"]})

    async def anode(state: MessagesState) -> dict[str, Any]:
        return await team_graph.ainvoke({"messages": state["messages"]})

    for fn in (node, anode):
        builder = StateGraph(MessagesState)
        builder.add_node("team", fn)
        builder.add_edge(START, "team")
        builder.add_edge("team", END)
        parent = builder.compile()
        request = {"messages": [("user", "Build a login feature")]}
        result = parent.invoke(request, CONFIG) if fn is node else asyncio.run(parent.ainvoke(request, CONFIG))
        assert result["messages"][-1].content.startswith(FINAL)


@pytest.mark.parametrize("checkpointer", [None, "memory"])
def test_two_team_nodes_in_one_parent_thread_are_two_runs(tmp_path: Path, checkpointer: str | None) -> None:
    graph = Team(model=ScriptedChatModel(TWO_MEMBERS), home=tmp_path, policy=Policy(scheduling="completions")).compile()
    builder = StateGraph(MessagesState)
    for node in ("first", "second"):
        builder.add_node(node, graph)
        builder.add_edge(START, node)
        builder.add_edge(node, END)
    parent = builder.compile(checkpointer=InMemorySaver() if checkpointer else None)
    result = parent.invoke({"messages": [("user", "Survey and draw.")]}, CONFIG)
    answers = [m for m in result["messages"] if isinstance(m, AIMessage) and m.content.startswith(FINAL)]
    assert len(answers) == 2


def _echo(messages: list[Any]) -> str:
    return "ANSWER TO: " + " | ".join(str(m.content) for m in messages if isinstance(m, HumanMessage))


def test_runs_without_a_thread_id_never_share_their_steps(tmp_path: Path) -> None:
    team = Team(
        model=ScriptedChatModel({"Team Leader": [_echo] * 12}),
        home=tmp_path,
        policy=Policy(scheduling="completions"),
    )
    parent = _parent(team)
    requests = [f"Request number {n}." for n in range(4)]
    for _ in range(3):
        # NOTE: no thread id, no checkpointer: four runs at once, each its own.
        results = parent.batch([{"messages": [("user", text)]} for text in requests])
        for text, result in zip(requests, results, strict=True):
            answer = result["messages"][-1].content
            assert text in answer and all(other not in answer for other in requests if other != text)


def _logged(home: Path, turns: int) -> list[tuple[str, str, str, str]]:
    parent = _parent(Team(model=ScriptedChatModel(DEMO_SCRIPT), home=home), InMemorySaver())
    for _ in range(turns):
        assert parent.invoke({"messages": [("user", "Build a login feature")]}, CONFIG)["messages"][-1].content
    events = [parse_line(line) for line in log_lines(home, project="outer")]
    return [(e.sender, e.receiver, e.content, e.level) for e in events]


def test_each_parent_turn_is_a_fresh_team_run_in_the_log(tmp_path: Path) -> None:
    # NOTE: a team node's state is its parent task's: the second turn starts a new team,
    # whose log starts afresh (no false "history shorter than the log", nothing skipped).
    once = _logged(tmp_path / "once", 1)
    twice = _logged(tmp_path / "twice", 2)
    assert "CRITICAL" not in {level for *_, level in twice}
    # NOTE: the second turn's team also reads the first turn's messages (the parent's whole
    # conversation): its deliveries are numbered on; every other line is logged twice.
    work = [event for event in once if " delivered" not in event[2] and not event[2].startswith("task: ")]
    assert work and all(twice.count(event) == 2 * once.count(event) for event in work)


@pytest.mark.parametrize("thread", [None, "outer"])
def test_runs_nothing_can_resume_leave_nothing_in_the_pool(tmp_path: Path, thread: str | None) -> None:
    # NOTE: a parent without a checkpointer: each run's key is new, and a run stopped by the
    # recursion limit leaves steps and calls thought ahead that no later run can take.
    team = Team(model=ScriptedChatModel(LONG_TWO_MEMBERS), home=tmp_path, policy=Policy(scheduling="completions"))
    parent = _parent(team)
    for n in range(4):
        config: dict[str, Any] = {"recursion_limit": 4}
        if thread:
            config["configurable"] = {"thread_id": thread}
        with pytest.raises(GraphRecursionError):
            parent.invoke({"messages": [("user", f"Go {n}")]}, config)
    pool = team.runtime.calls
    assert not pool._futures


TOKEN = re.compile(r"Task-[A-Z]")
ASK_ID = re.compile(r"\b(ask_\d+)")
MEMBER_SIDES = {
    "ends_its_turn": None,
    "calls_a_tool": act(call("list_files")),
    "opens_a_request": act(call("ask_master", question="May I start?")),
}


def _tokens(messages: list[Any]) -> list[str]:
    return TOKEN.findall(" ".join(str(m.content) for m in messages))


def _concurrent_leader(messages: list[Any]) -> Any:
    said = [m for m in messages if isinstance(m, AIMessage)]
    token = _tokens(messages[:2])[0]
    if not said:
        return act(call("create_sub_agent", role_id="researcher", task=f"Work on {token}."))
    tail = " ".join(str(m.content) for m in messages[messages.index(said[-1]) + 1 :])
    if "Question from" in tail:
        return act(call("answer_sub_agent_question", question_id=ASK_ID.findall(tail)[-1], answer=f"Yes for {token}"))
    results = [str(m.content) for m in messages if isinstance(m, HumanMessage) and "Result from" in str(m.content)]
    if results and not any(str(m.content).startswith("FINAL") for m in said):
        return "FINAL " + " ".join(_tokens([HumanMessage(results[-1])]))
    return ""


def _concurrent_member(first: Any) -> Any:
    def play(messages: list[Any]) -> Any:
        if not any(isinstance(m, AIMessage) for m in messages) and first is not None:
            return first
        return "Done " + " ".join(_tokens(messages))

    return play


@pytest.mark.parametrize("side", list(MEMBER_SIDES))
@pytest.mark.parametrize("order", ["A first", "B first"])
def test_two_runs_at_once_keep_each_protocol_to_its_own_run(tmp_path: Path, side: str, order: str) -> None:
    # NOTE: no thread id, no checkpointer: two runs of one team in one process, at the same moment,
    # with the member idle, calling a tool or opening a request while the other run does the same.
    script = {"Team Leader": [_concurrent_leader] * 12, "Researcher_1": [_concurrent_member(MEMBER_SIDES[side])] * 6}
    team = Team(model=ScriptedChatModel(script), home=tmp_path, policy=Policy(scheduling="completions"))
    tokens = ["Task-A", "Task-B"] if order == "A first" else ["Task-B", "Task-A"]
    results = _parent(team).batch([{"messages": [("user", f"Please do {token}.")]} for token in tokens])
    for token, result in zip(tokens, results, strict=True):
        final = result["messages"][-1].content
        assert final.startswith("FINAL") and set(TOKEN.findall(final)) == {token}, final
    assert not team.runtime.calls._futures
