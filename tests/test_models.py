"""Tests for teamgraph.models: the scripted chat model (the factory: ``test_model_factory.py``)."""

from __future__ import annotations

import asyncio
import time
from typing import Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph

from teamgraph.models import (
    ScriptedChatModel,
    ScriptExhaustedError,
)

ASK = [SystemMessage("You are on a team."), HumanMessage("Build a login page")]


def as_agent(name: str) -> RunnableConfig:
    return {"metadata": {"teamgraph_agent": name, "teamgraph_role": "some-role"}}


def joined(chunks: list) -> Any:
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    return total


# --- who is calling, which turn -------------------------------------------------


def test_each_agent_gets_its_own_turns_from_the_call_metadata():
    model = ScriptedChatModel({"Team Leader": ["I lead."], "UI Operator_1": ["I design."]})

    assert model.invoke(ASK, config=as_agent("UI Operator_1")).content == "I design."
    assert model.invoke(ASK, config=as_agent("Team Leader")).content == "I lead."
    # No metadata at all: the caller is the leader.
    assert model.invoke(ASK).content == "I lead."


def test_run_manager_metadata_names_the_agent_without_the_public_entry_points():
    # `generate` skips `invoke`, so only the run manager carries the metadata.
    model = ScriptedChatModel({"X": ["from x"]})

    result = model.generate([ASK], metadata={"teamgraph_agent": "X"})

    assert result.generations[0][0].message.content == "from x"


def test_metadata_set_with_with_config_or_by_a_langgraph_node_is_seen():
    model = ScriptedChatModel({"A": ["a1"], "Team Leader": ["lead"]})
    assert model.with_config(as_agent("A")).invoke(ASK).content == "a1"

    class State(TypedDict):
        out: list

    def step(state: State, config: RunnableConfig) -> State:
        # A node merges the agent into its own config, as the agent step does.
        cfg = {**config, "metadata": {**config.get("metadata", {}), "teamgraph_agent": "A"}}
        return {"out": [model.invoke(ASK, cfg), model.invoke(ASK)]}

    graph = StateGraph(State)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    out = graph.compile().invoke({"out": []})

    assert [m.content for m in out["out"]] == ["a1", "lead"]


def test_turn_index_comes_from_the_conversation_so_a_new_instance_continues():
    script = {"Team Leader": ["first", "second", "third"]}
    first = ScriptedChatModel(script).invoke(ASK)
    history = [*ASK, first, HumanMessage("go on")]

    # A fresh instance (a new process resuming a thread) continues at turn 2.
    assert ScriptedChatModel(script).invoke(history).content == "second"
    assert ScriptedChatModel(script).invoke(history).content == "second"
    assert ScriptedChatModel(script).invoke([*history, AIMessage("x")]).content == "third"


def test_star_script_serves_agents_without_their_own_key():
    model = ScriptedChatModel({"Team Leader": ["lead"], "*": ["anyone"]})

    assert model.invoke(ASK, config=as_agent("Full-Stack Engineer_2")).content == "anyone"
    assert model.invoke(ASK).content == "lead"


# --- kinds of turns ----------------------------------------------------------------


def test_dict_turn_builds_tool_calls_with_deterministic_unique_ids():
    model = ScriptedChatModel(
        {
            "UI Operator_1": [
                {
                    "content": "Creating two files.",
                    "tool_calls": [
                        {"name": "write_file", "args": {"path": "a.html"}},
                        {"name": "write_file", "args": {"path": "b.css"}, "id": "mine"},
                        {"name": "list_agents"},
                    ],
                },
                {"tool_calls": [{"name": "write_file", "args": {"path": "c.js"}}]},
            ]
        }
    )

    first = model.invoke(ASK, config=as_agent("UI Operator_1"))
    second = model.invoke([*ASK, first], config=as_agent("UI Operator_1"))

    assert first.content == "Creating two files."
    assert [(c["name"], c["args"], c["id"]) for c in first.tool_calls] == [
        ("write_file", {"path": "a.html"}, "call_ui_operator_1_1_0"),
        ("write_file", {"path": "b.css"}, "mine"),
        ("list_agents", {}, "call_ui_operator_1_1_2"),
    ]
    assert second.content == ""
    assert second.tool_calls[0]["id"] == "call_ui_operator_1_2_0"
    # Deterministic: the same conversation gives the same message.
    again = model.invoke(ASK, config=as_agent("UI Operator_1"))
    assert again.tool_calls == first.tool_calls


def test_aimessage_turn_is_returned_as_a_copy():
    scripted = AIMessage(content="hi", tool_calls=[{"name": "t", "args": {"x": 1}, "id": "c1"}])
    model = ScriptedChatModel({"Team Leader": [scripted]})

    answer = model.invoke(ASK)

    assert answer.content == "hi"
    assert answer.tool_calls == scripted.tool_calls
    assert answer is not scripted
    assert scripted.id is None  # the script's own message was not touched


def test_callable_turn_sees_the_input_messages():
    seen: list[list[BaseMessage]] = []

    def reply(messages: list[BaseMessage]) -> dict:
        seen.append(messages)
        return {"content": f"got {len(messages)} messages", "tool_calls": []}

    model = ScriptedChatModel({"Team Leader": [reply]})

    assert model.invoke(ASK).content == "got 2 messages"
    assert seen[0][-1].content == "Build a login page"


def test_callable_returning_a_callable_is_refused():
    model = ScriptedChatModel({"Team Leader": [lambda messages: lambda m: "nested"]})

    with pytest.raises(TypeError, match="callable returned another callable"):
        model.invoke(ASK)


def test_unknown_turn_kind_is_a_type_error_naming_agent_and_turn():
    model = ScriptedChatModel({"UI Operator_1": ["ok", 42]})
    history = [*ASK, AIMessage("ok")]

    with pytest.raises(TypeError) as info:
        model.invoke(history, config=as_agent("UI Operator_1"))

    message = str(info.value)
    assert "turn 2 of agent 'UI Operator_1'" in message
    assert "int" in message and "a string" in message and "AIMessage" in message


def test_dict_turn_with_a_typo_is_refused():
    model = ScriptedChatModel({"Team Leader": [{"tool_call": []}]})

    with pytest.raises(TypeError, match="unknown keys"):
        model.invoke(ASK)


# --- running out -------------------------------------------------------------------


def test_exhausted_script_names_the_agent_and_its_turn_count():
    model = ScriptedChatModel({"UI Operator_1": ["a", "b", "c"]})
    history = [*ASK, AIMessage("a"), AIMessage("b"), AIMessage("c")]

    with pytest.raises(ScriptExhaustedError) as info:
        model.invoke(history, config=as_agent("UI Operator_1"))

    assert str(info.value) == (
        "ScriptedChatModel: agent 'UI Operator_1' has no turn 4 (its script has 3 turns). Add turns to its script."
    )
    assert isinstance(info.value, RuntimeError)


def test_unknown_agent_lists_the_scripted_agents():
    model = ScriptedChatModel({"Team Leader": ["a"], "UI Operator_1": ["b"]})

    with pytest.raises(ScriptExhaustedError) as info:
        model.invoke(ASK, config=as_agent("QA_1"))

    assert str(info.value) == (
        "ScriptedChatModel: no script for agent 'QA_1' (scripted agents: Team Leader, "
        "UI Operator_1). Add a key 'QA_1' or '*' to the script."
    )


# --- YAML scripts and broken arguments ---------------------------------------------

YAML_SCRIPT = """\
Team Leader:
  - content: Delegating.
    tool_calls:
      - name: create_sub_agent
        args: {role: ui-operator, task: Design the login page}
  - Done.
"*":
  - tool_calls:
      - name: write_file
        args: 'not json at all'
      - name: write_file
        args: '{"path": "ok.html"}'
"""


def test_yaml_file_script(tmp_path):
    path = tmp_path / "script.yaml"
    path.write_text(YAML_SCRIPT)

    for model in (ScriptedChatModel(path), ScriptedChatModel(str(path))):
        first = model.invoke(ASK)
        assert first.tool_calls[0]["name"] == "create_sub_agent"
        assert first.tool_calls[0]["args"] == {"role": "ui-operator", "task": "Design the login page"}
        assert model.invoke([*ASK, first]).content == "Done."


def test_malformed_args_string_becomes_an_invalid_tool_call(tmp_path):
    path = tmp_path / "script.yaml"
    path.write_text(YAML_SCRIPT)
    model = ScriptedChatModel(path)

    answer = model.invoke(ASK, config=as_agent("UI Operator_1"))

    # Valid JSON text is parsed; anything else is kept raw, as ChatOpenAI does.
    assert answer.tool_calls == [
        {"name": "write_file", "args": {"path": "ok.html"}, "id": "call_ui_operator_1_1_1", "type": "tool_call"}
    ]
    [broken] = answer.invalid_tool_calls
    assert broken["type"] == "invalid_tool_call"
    assert (broken["name"], broken["args"], broken["id"]) == ("write_file", "not json at all", "call_ui_operator_1_1_0")
    assert "not valid JSON" in broken["error"]


def test_truncated_json_args_are_invalid_when_invoked():
    model = ScriptedChatModel({"Team Leader": [{"tool_calls": [{"name": "t", "args": '{"a": 1'}]}]})

    answer = model.invoke(ASK)

    assert answer.tool_calls == []
    assert answer.invalid_tool_calls[0]["args"] == '{"a": 1'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Team Leader: [unclosed", "not valid YAML"),
        ("- just\n- a list\n", "holds a list"),
    ],
)
def test_bad_yaml_file_names_the_file_and_the_expected_shape(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)

    with pytest.raises(ValueError) as info:
        ScriptedChatModel(path)

    assert expected in str(info.value)
    assert str(path) in str(info.value)
    assert "mapping" in str(info.value)


def test_missing_script_file_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="cannot read script file"):
        ScriptedChatModel(tmp_path / "nope.yaml")


# --- tools, streaming, async, latency ----------------------------------------------


@tool
def write_file(path: str, content: str) -> str:
    """Write a file."""
    return "ok"


def test_bind_tools_then_invoke_like_a_bound_chat_openai():
    model = ScriptedChatModel({"Team Leader": [{"tool_calls": [{"name": "write_file", "args": {"path": "a"}}]}]})

    bound = model.bind_tools([write_file], tool_choice="auto", parallel_tool_calls=False)
    answer = bound.invoke(ASK)

    assert answer.tool_calls[0]["name"] == "write_file"
    assert bound.kwargs["tools"][0]["function"]["name"] == "write_file"
    assert bound.kwargs["tool_choice"] == "auto"


TOOL_TURN = {
    "content": "Let me  write\nthe file. ",
    "tool_calls": [
        {"name": "write_file", "args": {"path": "a.html", "content": "<h1>hi</h1>"}},
        {"name": "list_agents", "args": {}},
    ],
}


@pytest.mark.parametrize("turn", ["A plain  final\tanswer with words.", TOOL_TURN])
def test_stream_chunks_aggregate_to_the_invoked_message(turn):
    model = ScriptedChatModel({"Team Leader": [turn]})

    invoked = model.invoke(ASK)
    chunks = list(model.stream(ASK))
    streamed = joined(chunks)

    assert len([c for c in chunks if c.content]) > 3
    assert "".join(c.content for c in chunks) == invoked.content
    assert streamed.content == invoked.content
    assert streamed.tool_calls == invoked.tool_calls
    assert streamed.invalid_tool_calls == invoked.invalid_tool_calls == []


def test_stream_sees_the_calling_agent_and_bound_tools():
    model = ScriptedChatModel({"UI Operator_1": [TOOL_TURN]})

    chunks = list(model.bind_tools([write_file]).stream(ASK, config=as_agent("UI Operator_1")))

    assert joined(chunks).tool_calls[0]["id"] == "call_ui_operator_1_1_0"


def test_unparseable_args_stay_invalid_when_streamed():
    model = ScriptedChatModel({"Team Leader": [{"tool_calls": [{"name": "t", "args": "not json"}]}]})

    streamed = joined(list(model.stream(ASK)))

    assert streamed.tool_calls == []
    assert streamed.invalid_tool_calls[0]["args"] == "not json"


def test_langgraph_messages_stream_mode_yields_several_chunks():
    model = ScriptedChatModel({"UI Operator_1": [TOOL_TURN]})

    class State(TypedDict):
        out: list

    def step(state: State) -> State:
        return {"out": [model.invoke(ASK, config=as_agent("UI Operator_1"))]}

    graph = StateGraph(State)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    parts = list(graph.compile().stream({"out": []}, stream_mode=["messages", "values"]))

    chunks = [chunk for mode, (chunk, meta) in (p for p in parts if p[0] == "messages")]
    metas = [meta for mode, (chunk, meta) in (p for p in parts if p[0] == "messages")]
    final = parts[-1][1]["out"][0]
    assert len(chunks) > 3
    assert {m["teamgraph_agent"] for m in metas} == {"UI Operator_1"}
    assert joined(chunks).tool_calls == final.tool_calls
    assert final.content == TOOL_TURN["content"]
    assert final.tool_calls[0]["id"] == "call_ui_operator_1_1_0"


def test_async_invoke_and_stream():
    model = ScriptedChatModel({"A": ["one two three", TOOL_TURN]})

    async def run():
        first = await model.ainvoke(ASK, config=as_agent("A"))
        chunks = [c async for c in model.astream([*ASK, first], config=as_agent("A"))]
        return first, joined(chunks)

    first, second = asyncio.run(run())

    assert first.content == "one two three"
    assert second.content == TOOL_TURN["content"]
    assert [c["name"] for c in second.tool_calls] == ["write_file", "list_agents"]


def test_latency_is_slept_before_each_answer():
    model = ScriptedChatModel({"Team Leader": ["hi"]}, latency=0.05)

    started = time.perf_counter()
    model.invoke(ASK)

    assert time.perf_counter() - started >= 0.05
    assert model._llm_type == "scripted"
