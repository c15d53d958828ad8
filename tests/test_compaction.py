"""Long runs: every agent's context stays inside its window, and the leader sees the budget.

A fake token counter (``count``: characters / 4) is injected with ``Team(token_counter=...)``;
a callback records every model call's messages, counted with the same counter.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from conftest import assert_each_message_once
from context_fixtures import (
    LEADER,
    PAGE,
    R1,
    WINDOW,
    Calls,
    assert_pairing,
    count,
    fetch_page,
    markers,
    reader_script,
    reader_team,
)
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_openai import ChatOpenAI
from pydantic import ValidationError
from scripting import act, call, quiet

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.checkpoints.aio import open_async_sqlite_saver
from teamgraph.models.calls import COMPACTION_KEY
from teamgraph.nodes.compaction import COMPACTION_PROMPT
from teamgraph.nodes.model_view import context_window
from teamgraph.roles.budget import BUDGET_NOTICE_KEY
from teamgraph.tools import errors
from teamgraph.tools.errors import ToolError
from teamgraph.tools.files import read_range

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
    # NOTE: steps run in the router's pool: their custom events stream as the router's.
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
        act(
            call("create_sub_agent", role_id="researcher", task="Read page 1."),
            call("create_sub_agent", role_id="researcher", task="Read page 2."),
        ),
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


def test_the_budget_is_in_the_leaders_sight_only_once_an_approved_plan_has_a_complexity():
    from langchain_core.messages import SystemMessage

    from teamgraph.roles.budget import with_budget

    used = AIMessage("ok", usage_metadata={"input_tokens": 7, "output_tokens": 5, "total_tokens": 12})
    messages = [SystemMessage("You lead."), HumanMessage("go"), used]
    agents = {"Team Leader": {}, "R_1": {"tool_calls": 99, "tokens": 30}}
    for plan in (None, {"id": "p1", "status": "proposed", "complexity": "simple"}, {"id": "p1", "status": "approved"}):
        out, notice = with_budget(messages, team={"plan": plan} if plan else {}, agents=agents)
        assert out == messages and notice == []
    team = {"plan": {"id": "p1", "status": "approved", "complexity": "simple"}}
    out, notice = with_budget(messages, team=team, agents=agents)
    assert out[0].text.startswith("You lead.\n\n# Budget (plan p1: simple") and ": 42" in out[0].text
    assert len(notice) == 1 and out[-1] is notice[0]
    again, none = with_budget([*messages, *notice], team=team, agents=agents)
    assert none == [] and again[-1] is notice[0]


# --- tool results too large ---------------------------------------------------------------


def test_a_5_mb_file_is_cut_for_the_model_with_a_note_that_read_file_follows(tmp_path):
    home = tmp_path / "home"
    (home / "project" / "big" / "data").mkdir(parents=True)  # the thread "big"'s project folder
    text = "".join(f"line {n:07d}\n" for n in range(400_000))  # 5 200 000 characters
    (home / "project" / "big" / "data" / "big.txt").write_text(text)
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
    with pytest.raises(ToolError) as caught:
        read_range("some text", "notes.md", offset=offset, limit=limit)
    assert caught.value.code == errors.BAD_ARGUMENT
    assert f"offset={offset}" in str(caught.value) and f"limit={limit}" in str(caught.value)


def _usage(total: int) -> dict[str, int]:
    return {"input_tokens": total - 5, "output_tokens": 5, "total_tokens": total}


@pytest.mark.parametrize(
    "provider_b, usage_total",
    [("openai", 400), ("openai", 10), ("anthropic", 400), (None, 400), ("openai", None)],
)
def test_the_cached_counter_counts_as_langchain_does(provider_b: str | None, usage_total: int | None) -> None:
    """The per-message cache gives LangChain's count, scaling by reported usage included, every time."""
    from langchain_core.messages.utils import count_tokens_approximately

    from teamgraph.nodes.model_view import approximate_counter

    history = [
        SystemMessage("You are the Team Leader."),
        HumanMessage("Build a login page " * 20),
        AIMessage(
            "",
            tool_calls=[{"name": "echo", "args": {"text": "x" * 50}, "id": "c1"}],
            response_metadata={"model_provider": "openai"},
            usage_metadata=_usage(120),
        ),
        ToolMessage("echoed " * 30, tool_call_id="c1", name="echo"),
        AIMessage(
            [{"type": "text", "text": "done " * 10}],
            response_metadata={"model_provider": provider_b} if provider_b else {},
            usage_metadata=_usage(usage_total) if usage_total else None,
        ),
        HumanMessage("And the tests?", name="user"),
    ]
    for size in range(len(history) + 1):
        for _ in range(2):  # NOTE: the second count comes from the cache
            assert approximate_counter(history[:size]) == count_tokens_approximately(
                history[:size], use_usage_metadata_scaling=True
            ), size
