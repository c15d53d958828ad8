"""Long runs: every agent's context stays inside its window, and the leader sees the budget.

A fake token counter (``count``: characters / 4) is injected with ``Team(token_counter=...)``;
a callback records every model call's messages, counted with the same counter.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import assert_each_message_once
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import ToolException, tool
from langchain_openai import ChatOpenAI
from pydantic import ValidationError
from scripting import act, call, quiet

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.checkpoints.aio import open_async_sqlite_saver
from teamgraph.models.scripted import COMPACTION_KEY
from teamgraph.nodes.compaction import COMPACTION_PROMPT, OVERFLOW_CODE
from teamgraph.nodes.model_view import context_window
from teamgraph.roles.budget import BUDGET_NOTICE_KEY
from teamgraph.tools.files import read_range

LEADER = "Team Leader"
R1 = "Researcher_1"
WINDOW = 20_000
PAGE = "lorem ipsum dolor sit amet " * 150  # about 4 000 characters: 1 000 tokens for `count`


def count(messages) -> int:
    """The fake token counter: 4 characters a token, tool calls included."""
    return sum(len(str(m.content)) + len(json.dumps(getattr(m, "tool_calls", []))) for m in messages) // 4


@tool
def fetch_page(page: int) -> str:
    """Fetch one page of the corpus.

    Args:
        page: The page number.
    """
    # NOTE: every 100th page is huge (40 000 tokens): more than the whole window.
    return f"page {page}\n" + PAGE * (40 if page % 100 == 0 else 1)


class Calls(BaseCallbackHandler):
    """Every chat model call: who made it, what for, and the messages sent."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, list]] = []

    def on_chat_model_start(self, serialized, messages, *, metadata=None, **kwargs):
        metadata = metadata or {}
        self.calls.append((metadata.get("teamgraph_agent"), metadata.get("teamgraph_call"), list(messages[0])))

    def of(self, agent: str, kind: str | None = None) -> list[list]:
        return [messages for who, what, messages in self.calls if who == agent and what == kind]


def markers(values: dict, name: str) -> list[AIMessage]:
    return [m for m in values["histories"][name] if COMPACTION_KEY in m.additional_kwargs]


def assert_pairing(messages: list) -> None:
    """Each AI message's tool calls are answered right after it, and no result lacks its call."""
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in open_calls, f"result {message.tool_call_id} without its call in the view"
            open_calls.discard(message.tool_call_id)
            continue
        assert not open_calls, f"calls {open_calls} not answered before {type(message).__name__}"
        if isinstance(message, AIMessage):
            open_calls = {c["id"] for c in message.tool_calls}


def reader_script(pages: int) -> dict:
    return {
        LEADER: [act(call("create_sub_agent", role_id="researcher", task=f"Read pages 1 to {pages}.")), *quiet(4)],
        R1: [act(call("fetch_page", page=n)) for n in range(1, pages + 1)] + [f"Read {pages} pages."],
    }


def reader_team(home: Path, script: dict, **policy) -> Team:
    policy = {"context_tokens": WINDOW, "max_turn_steps": 2000, "slice_steps": 50, **policy}
    return Team(
        model=ScriptedChatModel(script), home=home, policy=Policy(**policy), tools=[fetch_page], token_counter=count
    )


# --- the 500-call member ------------------------------------------------------------------


def test_a_member_making_500_tool_calls_never_sends_a_prompt_above_its_budget(tmp_path):
    team = reader_team(tmp_path / "home", reader_script(500))
    config = {"configurable": {"thread_id": "long"}}
    calls = Calls()
    team.compile().invoke({"messages": [("user", "Read the corpus")]}, {**config, "callbacks": [calls]})
    values = team.state(config)

    # Every turn of the member fits under the threshold; every summary call fits in the window.
    turns, summaries = calls.of(R1), calls.of(R1, "compaction")
    assert len(turns) == 501
    assert max(count(m) for m in turns) <= WINDOW * 0.8
    assert max(count(m) for m in summaries) <= WINDOW
    for messages in turns:
        assert_pairing(messages[1:])

    # Each compaction is one marker in the history, numbered in order, cut after the previous cut.
    stored = markers(values, R1)
    records = [m.additional_kwargs[COMPACTION_KEY] for m in stored]
    assert len(stored) == len(summaries) >= 20
    assert [r["number"] for r in records] == list(range(1, len(records) + 1))
    assert all(a["keep_from"] < b["keep_from"] for a, b in itertools.pairwise(records))
    assert {r["reason"] for r in records} == {"threshold"}

    # The full history is intact: every call and every result, in order, without the markers.
    history = team.history(config, R1)
    assert [type(m).__name__ for m in history[1:]] == ["AIMessage", "ToolMessage"] * 500 + ["AIMessage"]
    assert [m.tool_calls[0]["args"]["page"] for m in history if isinstance(m, AIMessage) and m.tool_calls] == list(
        range(1, 501)
    )
    assert len(history[1000].content) > 160_000  # page 500, huge, stored whole
    assert team.agents(config)[R1]["status"] == "idle"
    assert any(f"Result from {R1}" in str(m.content) for m in team.history(config, LEADER))

    # The model's view now: the latest summary, then the newest messages verbatim (huge results cut).
    view = team.history(config, R1, view="model")
    assert isinstance(view[0], HumanMessage) and view[0].additional_kwargs[COMPACTION_KEY] == records[-1]
    assert view[-1].content == "Read 500 pages."
    assert_pairing(view[1:])
    big = next(m for m in turns[-1] if isinstance(m, ToolMessage) and m.content.startswith("page 500\n"))
    assert "teamgraph: this tool result has" in big.content and count([big]) <= WINDOW * 0.1
    assert_each_message_once(values)


def test_the_leader_collecting_long_results_from_eight_members_compacts_too(tmp_path):
    members = [f"Researcher_{n}" for n in range(1, 9)]
    create = [call("create_sub_agent", role_id="researcher", task=f"Report on topic {n}.") for n in range(1, 9)]
    script = {LEADER: [act(*create), *quiet(20)], **{m: [f"Report of {m}: " + PAGE * 2] for m in members}}
    team = reader_team(tmp_path / "home", script, context_tokens=8000, max_parallel=2)
    config = {"configurable": {"thread_id": "leader"}}
    calls = Calls()
    team.compile().invoke({"messages": [("user", "Research eight topics")]}, {**config, "callbacks": [calls]})

    assert markers(team.state(config), LEADER)
    assert max(count(m) for m in calls.of(LEADER)) <= 8000 * 0.8
    inbox = "\n".join(str(m.content) for m in team.history(config, LEADER) if isinstance(m, HumanMessage))
    assert all(f"Report of {m}: " in inbox for m in members)  # the full history keeps every result
    assert all(team.agents(config)[m]["status"] == "idle" for m in members)


def test_an_async_team_compacts_and_ahistory_gives_both_views(tmp_path):
    async def main():
        async with open_async_sqlite_saver(tmp_path / "async.sqlite") as saver:
            script = reader_script(16)
            model = ScriptedChatModel(script)
            policy = Policy(context_tokens=8000, max_turn_steps=100)
            tools = [fetch_page]
            team = Team(model=model, home=tmp_path, policy=policy, tools=tools, token_counter=count, checkpointer=saver)
            config = {"configurable": {"thread_id": "async"}}
            await team.compile().ainvoke({"messages": [("user", "Read")]}, config)
            return await team.ahistory(config, R1), await team.ahistory(config, R1, view="model")

    full, view = asyncio.run(main())
    assert len(full) == 1 + 2 * 16 + 1 and not any(COMPACTION_KEY in m.additional_kwargs for m in full)
    assert COMPACTION_KEY in view[0].additional_kwargs and view[-1].content == "Read 16 pages."
    assert len(view) < len(full)


def test_summaries_come_from_the_agents_compaction_script(tmp_path):
    seen = []

    def second(messages):
        seen.append(messages)
        return "Second summary: pages 1-8 read."

    script = reader_script(16)
    script[f"{R1}#compaction"] = ["First summary: pages 1-4 read.", second]
    team = reader_team(tmp_path / "home", script, context_tokens=8000)
    config = {"configurable": {"thread_id": "summaries"}}
    # NOTE: the model is called inside the role subgraph: its events come with subgraphs=True.
    chunks = team.compile().stream({"messages": [("user", "Read")]}, config, stream_mode="custom", subgraphs=True)
    events = [event for _namespace, event in chunks]
    compactions = [e for e in events if e["event"] == "compaction"]
    assert [(e["teamgraph_agent"], e["number"]) for e in compactions] == [(R1, 1), (R1, 2)]
    assert all(e["tokens_after"] < e["tokens_before"] for e in compactions)

    stored = markers(team.state(config), R1)
    assert [m.content for m in stored] == ["First summary: pages 1-4 read.", "Second summary: pages 1-8 read."]
    # The second compaction is asked with the compaction prompt, and sees the first summary.
    system, request = seen[0]
    assert isinstance(system, SystemMessage) and system.content == COMPACTION_PROMPT
    assert request.additional_kwargs[COMPACTION_KEY] == {"number": 2}
    assert "First summary: pages 1-4 read." in request.content
    assert team.history(config, R1)[-1].content == "Read 16 pages."


def test_the_scripted_model_counts_the_turns_a_summary_replaced_and_answers_compaction_calls():
    model = ScriptedChatModel({R1: ["one", "two", "three", "four"], "*#compaction": ["Any agent's summary."]})
    agent = {"metadata": {"teamgraph_agent": R1}}
    summary = HumanMessage("Summary.", additional_kwargs={COMPACTION_KEY: {"number": 1, "ai_turns": 2}})
    stored = AIMessage("Summary.", additional_kwargs={COMPACTION_KEY: {"number": 1, "ai_turns": 2}})
    assert model.invoke([summary, AIMessage("two"), HumanMessage("go on")], agent).content == "four"
    assert model.invoke([stored, HumanMessage("go on")], agent).content == "one"  # a stored marker is no turn

    compaction = {"metadata": {"teamgraph_agent": R1, "teamgraph_call": "compaction"}}
    request = [SystemMessage(COMPACTION_PROMPT), HumanMessage("...", additional_kwargs={COMPACTION_KEY: {"number": 1}})]
    assert model.invoke(request, compaction).content == "Any agent's summary."
    default = ScriptedChatModel({R1: ["one"]}).invoke(request, compaction).content
    assert default.startswith("Summary 1 of the earlier conversation")


def test_a_third_compaction_without_a_summary_turn_names_the_script_key(tmp_path):
    script = reader_script(12)
    script[f"{R1}#compaction"] = ["Only one summary."]
    team = reader_team(tmp_path / "home", script, context_tokens=6000)
    with pytest.raises(Exception, match=f"'{R1}#compaction'"):
        team.compile().invoke({"messages": [("user", "Read")]}, {"configurable": {"thread_id": "short"}})


# --- budgets and defaults ----------------------------------------------------------------


def test_the_window_comes_from_the_policy_then_the_model_profile_then_a_default():
    gpt = ChatOpenAI(model="gpt-4o-mini", api_key="test")
    assert context_window(gpt, Policy()) == gpt.profile["max_input_tokens"] == 128_000
    assert context_window(gpt, Policy(context_tokens=5000)) == 5000
    assert context_window(ScriptedChatModel({}), Policy()) == 100_000


@pytest.mark.parametrize("bad", [{"context_threshold": 1.5}, {"context_threshold": 0}, {"context_tokens": 10}])
def test_a_bad_context_setting_is_refused_naming_the_field(bad):
    with pytest.raises(ValidationError, match=next(iter(bad))):
        Policy(**bad)


def test_an_unknown_history_view_is_refused(tmp_path):
    team = reader_team(tmp_path / "home", reader_script(1))
    config = {"configurable": {"thread_id": "views"}}
    team.compile().invoke({"messages": [("user", "Read")]}, config)
    with pytest.raises(ValueError, match="'full'.*'model'"):
        team.history(config, R1, view="summary")  # type: ignore[arg-type]
    assert team.history(config, R1, view="model") == team.history(config, R1)  # nothing compacted


def test_the_leader_sees_its_budget_and_gets_one_notice_past_a_reference(tmp_path):
    steps = [{"title": "Read", "role_id": "researcher"}]
    plan = call("propose_plan", summary="Read.", steps=steps, complexity="simple")
    leader = [
        act(plan),
        act(call("create_sub_agent", role_id="researcher", task="Read page 1."),
            call("create_sub_agent", role_id="researcher", task="Read page 2.")),
        *quiet(8),
    ]
    script = {LEADER: leader, R1: [act(call("fetch_page", page=1)), "Page 1 read."], "Researcher_2": ["Page 2 read."]}
    model = ScriptedChatModel(script)
    team = Team(model=model, home=tmp_path / "home", policy=Policy(plan="leader"), tools=[fetch_page])
    config = {"configurable": {"thread_id": "budget"}}
    calls = Calls()
    team.compile().invoke({"messages": [("user", "Read two pages")]}, {**config, "callbacks": [calls]})

    prompts = [m[0].content for m in calls.of(LEADER)]
    assert "# Budget (" not in prompts[0]  # no approved plan yet
    last = prompts[-1]
    assert "# Budget (plan plan_1: simple; reference: 1 member" in last
    assert "- Members created: 2" in last and f"{R1} 1" in last
    notices = [m for m in team.history(config, LEADER) if BUDGET_NOTICE_KEY in m.additional_kwargs]
    assert [n.additional_kwargs[BUDGET_NOTICE_KEY] for n in notices] == [["members"]]
    assert len(calls.of(LEADER)) > 3  # later calls did not repeat the notice


# --- tool results too large ---------------------------------------------------------------


def test_a_5_mb_file_is_cut_for_the_model_with_a_note_that_read_file_follows(tmp_path):
    home = tmp_path / "home"
    (home / "project" / "data").mkdir(parents=True)
    text = "".join(f"line {n:07d}\n" for n in range(400_000))  # 5 200 000 characters
    (home / "project" / "data" / "big.txt").write_text(text)
    script = {
        LEADER: [act(call("create_sub_agent", role_id="researcher", task="Read data/big.txt.")), *quiet(4)],
        R1: [
            act(call("read_file", path="data/big.txt")),
            act(call("read_file", path="data/big.txt", offset=4500, limit=26)),
            "Done.",
        ],
    }
    team = reader_team(home, script)
    config = {"configurable": {"thread_id": "big"}}
    calls = Calls()
    team.compile().invoke({"messages": [("user", "Read it")]}, {**config, "callbacks": [calls]})

    full = [m for m in team.history(config, R1) if isinstance(m, ToolMessage)]
    assert full[0].content.startswith(text[:50_000]) and "offset=50000" in full[0].content
    assert full[1].content.startswith(text[4500:4526] + "\n[... truncated") and "offset=4526)" in full[1].content
    seen = next(m for m in calls.of(R1)[1] if isinstance(m, ToolMessage))
    kept = len(seen.content.split("\n\n[teamgraph:")[0])
    assert count([seen]) <= WINDOW * 0.1
    assert f"read_file(path='data/big.txt', offset={kept})" in seen.content


@pytest.mark.parametrize(("offset", "limit"), [(-1, 10), (0, 0)])
def test_a_bad_read_range_is_refused_naming_offset_and_limit(offset, limit):
    expected = f"offset must be >= 0 and limit >= 1 \\(got offset={offset}, limit={limit}\\)"
    with pytest.raises(ToolException, match=expected):
        read_range("some text", "notes.md", offset=offset, limit=limit)


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
