"""The scripted OpenAI server, driven by the real ``langchain_openai.ChatOpenAI``."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from openai import BadRequestError, InternalServerError
from openai_server import ScriptedOpenAIServer


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def make_llm(server: ScriptedOpenAIServer, **kwargs) -> ChatOpenAI:
    """The real client, pointed at the local server."""
    return ChatOpenAI(model="gpt-test", base_url=server.base_url, api_key="test", max_retries=2, timeout=10, **kwargs)


def test_plain_answer(openai_server):
    server = openai_server(["Hello from the script."])
    reply = make_llm(server).invoke([SystemMessage("You are terse."), HumanMessage("Hi")])

    assert isinstance(reply, AIMessage)
    assert reply.content == "Hello from the script."
    assert reply.response_metadata["finish_reason"] == "stop"
    assert reply.response_metadata["model_name"] == "gpt-test"
    assert reply.usage_metadata["total_tokens"] > 0
    [request] = server.requests
    assert request["model"] == "gpt-test"
    assert not request.get("stream")
    assert request["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hi"},
    ]


def test_tool_call_round_trip(openai_server):
    server = openai_server(
        [
            {"content": None, "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
            "The sum is 5.",
        ]
    )
    llm = make_llm(server).bind_tools([add])
    messages = [HumanMessage("What is 2 + 3?")]

    first = llm.invoke(messages)
    assert first.content == ""
    assert first.response_metadata["finish_reason"] == "tool_calls"
    [call] = first.tool_calls
    assert call["name"] == "add"
    assert call["args"] == {"a": 2, "b": 3}
    assert call["id"] == "call_1"

    messages += [first, ToolMessage(str(add.invoke(call["args"])), tool_call_id=call["id"])]
    second = llm.invoke(messages)
    assert second.content == "The sum is 5."

    # The client sent the tool schema, then the tool call and its result back.
    first_request, second_request = server.requests
    assert [t["function"]["name"] for t in first_request["tools"]] == ["add"]
    assistant, tool_result = second_request["messages"][1:]
    assert assistant["tool_calls"][0]["id"] == "call_1"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"a": 2, "b": 3}
    assert tool_result == {"role": "tool", "content": "5", "tool_call_id": "call_1"}


def test_streaming_content_and_tool_calls(openai_server):
    server = openai_server(
        [
            {
                "content": "Let me add those numbers.",
                "tool_calls": [{"name": "add", "arguments": {"a": 40, "b": 2}}],
            }
        ]
    )
    llm = make_llm(server, stream_usage=True).bind_tools([add])

    chunks = list(llm.stream("What is 40 + 2?"))
    total = chunks[0]
    for chunk in chunks[1:]:
        total += chunk

    assert len([c for c in chunks if c.content]) >= 4  # word by word
    assert len([c for c in chunks if c.tool_call_chunks]) >= 3  # header + 2+ argument pieces
    assert total.content == "Let me add those numbers."
    assert total.tool_calls == [{"name": "add", "args": {"a": 40, "b": 2}, "id": "call_1", "type": "tool_call"}]
    assert total.response_metadata["finish_reason"] == "tool_calls"
    assert total.usage_metadata["total_tokens"] > 0
    [request] = server.requests
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}


def test_500_is_retried(openai_server):
    server = openai_server([{"error": {"status": 500, "message": "boom", "retry_after": 0.01}}, "recovered"])
    assert make_llm(server).invoke("Hi").content == "recovered"
    assert len(server.requests) == 2


def test_429_with_retry_after_zero_is_retried(openai_server):
    server = openai_server([{"error": {"status": 429, "message": "slow down", "retry_after": 0}}, "after the limit"])
    assert make_llm(server).invoke("Hi").content == "after the limit"
    assert len(server.requests) == 2


def test_400_is_not_retried(openai_server):
    server = openai_server([{"error": {"status": 400, "message": "bad request"}}, "unused"])
    with pytest.raises(BadRequestError, match="bad request"):
        make_llm(server).invoke("Hi")
    assert len(server.requests) == 1


def test_malformed_arguments_become_invalid_tool_calls(openai_server):
    server = openai_server([{"content": None, "tool_calls": [{"name": "add", "arguments": '{"a": 1, "b": '}]}])
    reply = make_llm(server).bind_tools([add]).invoke("Add 1 and something")

    assert reply.tool_calls == []
    [invalid] = reply.invalid_tool_calls
    assert invalid["name"] == "add"
    assert invalid["args"] == '{"a": 1, "b": '
    assert invalid["id"] == "call_1"
    assert invalid["error"]  # the JSON parse error, as text


def test_exhausted_script_fails_fast(openai_server):
    server = openai_server([])
    started = time.monotonic()
    with pytest.raises(InternalServerError, match="script exhausted"):
        make_llm(server).invoke("Hi")
    assert len(server.requests) == 1  # x-should-retry: false, no retries
    assert time.monotonic() - started < 2


def test_callable_script_answers_per_agent(openai_server):
    def answer(body: dict) -> str:
        system = body["messages"][0]["content"]
        return "I plan." if "leader" in system else "I do."

    server = openai_server(answer)
    llm = make_llm(server)
    assert llm.invoke([SystemMessage("You are the leader."), HumanMessage("go")]).content == "I plan."
    assert llm.invoke([SystemMessage("You are a coder."), HumanMessage("go")]).content == "I do."
    assert len(server.requests) == 2


def test_models_endpoint_and_clean_stop():
    with ScriptedOpenAIServer([]) as server:
        with urllib.request.urlopen(f"{server.base_url}/models", timeout=5) as resp:
            models = json.load(resp)
        url = server.base_url
    assert models["object"] == "list"
    assert [m["id"] for m in models["data"]] == ["gpt-test"]
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{url}/models", timeout=1)
