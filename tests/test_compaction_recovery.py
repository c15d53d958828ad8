"""Long runs that go wrong: the provider refuses a call as too long (through the real
ChatOpenAI client and tests/openai_server.py), and a process is killed during a compaction.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import assert_each_message_once
from context_fixtures import LEADER, R1, fetch_page, markers
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from teamgraph import Policy, Team
from teamgraph.models.calls import COMPACTION_KEY
from teamgraph.nodes.compaction import COMPACTION_PROMPT, OVERFLOW_CODE

# --- the provider's "context length exceeded" ---------------------------------------------


def openai_team(server, home: Path, tools=(fetch_page,)) -> Team:
    model = ChatOpenAI(model="gpt-test", base_url=server.base_url, api_key="test", max_retries=0)
    # NOTE: a counter that sees nothing: only the provider's refusal can trigger a compaction.
    policy = Policy(context_tokens=1_000_000)
    return Team(model=model, home=home, policy=policy, tools=list(tools), token_counter=lambda m: 0)


def reader_server(pages: int):
    """The server's script: the leader delegates, the member fetches ``pages`` pages, summaries are short."""

    def answer(body: dict):
        messages = body["messages"]
        if messages[0]["content"] == COMPACTION_PROMPT:
            return "Summary: the task is to read pages; pages so far were read."
        last = messages[-1]
        if any(t["function"]["name"] == "create_sub_agent" for t in body.get("tools", [])):  # the leader
            if last["role"] == "user" and last["content"] == "Read":
                task = {"role_id": "researcher", "task": f"Read pages 1 to {pages}."}
                return {"tool_calls": [{"name": "create_sub_agent", "arguments": task}]}
            return ""
        done = sum(m["role"] == "tool" for m in messages)
        page = int(last["content"].split()[1]) + 1 if last["role"] == "tool" else done + 1
        if page > pages:
            return f"Read {pages} pages."
        return {"tool_calls": [{"name": "fetch_page", "arguments": {"page": page}}]}

    return answer


def test_the_providers_context_length_error_compacts_and_retries_once(openai_server, tmp_path):
    server = openai_server(reader_server(8), context_limit=2500)
    team = openai_team(server, tmp_path / "home")
    config = {"configurable": {"thread_id": "overflow"}}
    team.compile().invoke({"messages": [("user", "Read")]}, config)

    assert server.refused, "the server never refused a request"
    values = team.state(config)
    records = [m.additional_kwargs[COMPACTION_KEY] for m in markers(values, R1)]
    assert records and {r["reason"] for r in records} == {OVERFLOW_CODE}
    # After each refusal: one compaction request, then the same turn again, accepted.
    at = server.requests.index(server.refused[0])
    assert server.requests[at + 1]["messages"][0]["content"] == COMPACTION_PROMPT
    assert server.requests[at + 2] not in server.refused
    assert team.agents(config)[R1]["status"] == "idle"
    assert team.history(config, R1)[-1].content == "Read 8 pages."
    assert len([m for m in team.history(config, R1) if isinstance(m, ToolMessage)]) == 8


def test_a_member_still_too_long_after_compaction_fails_and_the_leader_is_told(openai_server, tmp_path):
    @tool
    def fetch_page(page: int) -> str:
        """Fetch one page of the corpus.

        Args:
            page: The page number.
        """
        return f"page {page} " + "word " * 3000

    server = openai_server(reader_server(3), context_limit=2500)
    team = openai_team(server, tmp_path / "home", tools=[fetch_page])
    config = {"configurable": {"thread_id": "too-long"}}
    team.compile().invoke({"messages": [("user", "Read")]}, config)

    record = team.agents(config)[R1]
    assert record["status"] == "failed"
    assert record["last_action"].startswith(f"ContextLengthExceededError: {OVERFLOW_CODE}")
    notices = [str(m.content) for m in team.history(config, LEADER) if isinstance(m, HumanMessage)]
    assert any(f"{R1} failed: ContextLengthExceededError: {OVERFLOW_CODE}" in n for n in notices)
    assert len(server.refused) == 2  # the first try and the one retry after the compaction


# --- kill -9 during a compaction ------------------------------------------------------------

CRASH_MODULE = textwrap.dedent(
    """
    import json, os, signal, sys

    from langchain_core.tools import tool
    from teamgraph import Policy, ScriptedChatModel, Team

    PAGE = "lorem ipsum dolor sit amet " * 150


    def count(messages):
        return sum(len(str(m.content)) + len(json.dumps(getattr(m, "tool_calls", []))) for m in messages) // 4


    @tool
    def fetch_page(page: int) -> str:
        \"\"\"Fetch one page.

        Args:
            page: The page number.
        \"\"\"
        return f"page {page}\\n" + PAGE


    def call(name, args):
        return {"content": "", "tool_calls": [{"name": name, "args": args}]}


    def summary(number):
        def write(messages):
            if number == 2 and os.environ.get("CRASH") == "1":
                os.kill(os.getpid(), signal.SIGKILL)  # dies in the middle of the compaction call
            return f"Summary {number}."
        return write


    def make_team(home):
        script = {
            "Team Leader": [
                call("create_sub_agent", {"role_id": "researcher", "task": "Read 40 pages."}),
                *[""] * 6,
            ],
            "Researcher_1": [call("fetch_page", {"page": n}) for n in range(1, 41)]
            + ["Read 40 pages."],
            "Researcher_1#compaction": [summary(n) for n in range(1, 10)],
        }
        policy = Policy(context_tokens=12000, max_turn_steps=500, slice_steps=4)
        return Team(model=ScriptedChatModel(script), home=home, policy=policy, tools=[fetch_page], token_counter=count)


    if __name__ == "__main__":
        team = make_team(sys.argv[1])
        config = {"configurable": {"thread_id": "crash"}}
        if sys.argv[2] == "run":
            team.compile().invoke({"messages": [("user", "Read")]}, config)
        else:
            view = team.history(config, "Researcher_1", view="model")
            print(json.dumps([[type(m).__name__, str(m.content)] for m in view]))
    """
)


@pytest.mark.slow
def test_a_kill_9_during_a_compaction_resumes_cleanly(tmp_path):
    module = str(tmp_path / "crash_team.py")
    Path(module).write_text(CRASH_MODULE)
    home = str(tmp_path / "home")
    path = os.pathsep.join([str(Path.cwd()), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "CRASH": "1", "PYTHONPATH": path}
    first = subprocess.run([sys.executable, module, home, "run"], check=False, capture_output=True, text=True, env=env)
    assert first.returncode == -signal.SIGKILL, first.stderr[-3000:]

    sys.path.insert(0, str(tmp_path))
    try:
        import crash_team
    finally:
        sys.path.remove(str(tmp_path))
    team = crash_team.make_team(home)
    config = {"configurable": {"thread_id": "crash"}}
    stored = markers(team.state(config), R1)
    assert [m.content for m in stored] == ["Summary 1."]  # the second compaction was in flight

    team.compile().invoke(None, config)
    values = team.state(config)
    assert_each_message_once(values)
    numbers = [m.additional_kwargs[COMPACTION_KEY]["number"] for m in markers(values, R1)]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 3
    history = team.history(config, R1)
    pages = [m.tool_calls[0]["args"]["page"] for m in history if isinstance(m, AIMessage) and m.tool_calls]
    assert pages == list(range(1, 41))
    assert history[-1].content == "Read 40 pages."

    # A new process rebuilds the same view of the model from the checkpoint.
    env["CRASH"] = "0"
    other = subprocess.run([sys.executable, module, home, "view"], check=False, capture_output=True, text=True, env=env)
    assert other.returncode == 0, other.stderr[-3000:]
    here = [[type(m).__name__, str(m.content)] for m in team.history(config, R1, view="model")]
    assert json.loads(other.stdout) == here
    assert here[0][1].endswith(f"Summary {numbers[-1]}.")
