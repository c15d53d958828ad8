"""A step's first model call is thought ahead (``Policy.scheduling="completions"``).

The pass that issues a step starts its first model call at once, on the state the
checkpoint after that pass will hold, instead of one superstep later. The step uses
that call only if it reads the very same prompt, and runs its tools only once the
checkpoint is written. These tests check the call is used in an ordinary run, never
on another prompt, and that a superstep that fails after its pass leaves no trace of
the calls made on its state.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import wait
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langgraph.checkpoint.memory import InMemorySaver
from scripting import act, call, quiet

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.ahead import AHEAD_CLAIMED, AHEAD_DROPPED, AHEAD_LATE, AHEAD_STARTED, CallDropped, Prepared
from teamgraph.steps import StepPool
from tests.invariants import assert_team_invariants

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


def ai_messages(history: list) -> int:
    return sum(isinstance(m, AIMessage) for m in history)


def test_every_first_call_is_thought_ahead_and_used_by_its_step(make_team):
    run = make_team(two_members(), policy=COMPLETIONS)
    before = Counter(run.team.runtime.steps.ahead_counts)
    run.send("Please do the work.")
    counts = Counter(run.team.runtime.steps.ahead_counts)
    counts.subtract(before)

    calls = sum(ai_messages(run.history(name)) for name in (LEADER, R1, U1))
    # NOTE: a call not started yet when its step comes is not made ("late"): the step makes it.
    assert counts[AHEAD_STARTED] == counts[AHEAD_CLAIMED] + counts[AHEAD_LATE] == calls
    assert counts[AHEAD_DROPPED] == 0
    assert (ai_messages(run.history(R1)), ai_messages(run.history(U1))) == (3, 2)  # NOTE: no call made twice
    assert run.status(R1) == run.status(U1) == "idle"
    assert_team_invariants(run.values)


def test_no_call_is_thought_ahead_in_lockstep(make_team):
    run = make_team(two_members(), policy=Policy(scheduling="lockstep"))
    before = run.team.runtime.steps.ahead_counts[AHEAD_STARTED]
    run.send("Please do the work.")
    assert run.team.runtime.steps.ahead_counts[AHEAD_STARTED] == before
    assert run.status(R1) == run.status(U1) == "idle"


def ready(answer: str = "answer", *, ended: list[BaseException] | None = None) -> Prepared:
    end = ended.append if ended is not None else ignore
    return Prepared(start="start", call=lambda: answer, end=end)


def ignore(error: BaseException) -> None:
    del error


def test_a_call_thought_ahead_serves_only_what_was_read_and_only_once():
    pool = StepPool(workers=1)
    ended: list[BaseException] = []
    pool.think_ahead("t", R1, 2, (R1, ["task"]), ready(ended=ended))
    other = pool.ahead_of("t", R1, 2)
    assert other is not None and other.claim((R1, ["another task"])) is None
    wait([other.answer])  # NOTE: until it is done (or it was cancelled): its run is ended then
    assert [type(e) for e in ended] == [CallDropped]  # NOTE: an unused call's traced run ends, saying why

    pool.think_ahead("t", R1, 3, (R1, ["task"]), ready(ended=ended))
    same = pool.ahead_of("t", R1, 3)
    assert same is not None and same.answer.result() == "answer"
    claimed = same.claim((R1, ["task"]))
    assert claimed is not None and claimed[0] == "start" and claimed[1].result() == "answer"
    assert claimed[2]  # NOTE: the step owns the call's open run: it runs its tools in it and ends it
    assert same.claim((R1, ["task"])) is None  # NOTE: a retried step makes its own call
    assert len(ended) == 1

    pool.think_ahead("t", R1, 4, (R1, ["task"]), ready())
    assert pool.holds_ahead("t", R1, 4, (R1, ["task"])) and not pool.holds_ahead("t", R1, 4, (R1, ["other"]))
    assert pool.ahead_of("t", R1, 3) is None  # NOTE: a call for a later dispatch stays
    assert pool.ahead_of("t", R1, 5) is None  # NOTE: a call for an earlier dispatch is dropped
    assert pool.ahead_of("t", R1, 4) is None  # ... and gone
    assert pool.ahead_counts == Counter({AHEAD_STARTED: 3, AHEAD_CLAIMED: 1, AHEAD_DROPPED: 2})


def test_a_call_not_started_when_its_step_comes_is_made_by_the_step_in_the_run_opened_for_it():
    pool = StepPool(workers=1)
    busy = threading.Event()
    ended: list[BaseException] = []
    try:
        pool.think_ahead("t", U1, 1, (U1, ["task"]), Prepared(start="busy", call=lambda: busy.wait(30), end=ignore))
        pool.think_ahead("t", R1, 1, (R1, ["task"]), ready(ended=ended))  # NOTE: queued behind U1's call
        ahead = pool.ahead_of("t", R1, 1)
        assert ahead is not None
        claimed = ahead.claim((R1, ["task"]))
        # NOTE: not waited for, never made: the step makes the call, in the run opened for it
        assert claimed == ("start", None, True)
        assert pool.ahead_counts[AHEAD_LATE] == 1 and ended == []
    finally:
        busy.set()


def test_a_run_that_ends_closes_its_unused_calls_and_keeps_their_answers():
    pool = StepPool(workers=1)
    ended: list[BaseException] = []
    pool.think_ahead("t", R1, 1, (R1, ["task"]), ready(ended=ended))
    pool.think_ahead("other thread", R1, 1, (R1, ["task"]), ready(ended=ended))
    pool.close_ahead("t")
    ahead = pool.ahead_of("t", R1, 1)
    assert ahead is not None
    wait([ahead.answer])
    assert [type(e) for e in ended] == [CallDropped]  # NOTE: only the thread whose run ended
    claimed = ahead.claim((R1, ["task"]))
    # NOTE: a resumed run still uses the answer, in a traced run of its own (the first one ended)
    assert claimed is not None and claimed[1].result() == "answer" and not claimed[2]
    pool.close_ahead("t")
    assert len(ended) == 1


class FailsOnce(InMemorySaver):
    """Fails to save the writes of the first pass that issues a member's step: its state is never committed.

    NOTE: a failed checkpoint after saved writes would not do: a resumed run applies the
    saved writes of a finished task instead of running it again.
    """

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def put_writes(self, config, writes, task_id, task_path=""):
        team = dict(writes).get("team") or {}
        if not self.failed and any(name != LEADER for name in team.get("in_flight", {})):
            self.failed = True
            raise OSError("disk full")
        return super().put_writes(config, writes, task_id, task_path)


def test_calls_thought_ahead_on_a_state_never_committed_leave_no_trace(tmp_path):
    saver = FailsOnce()
    team = Team(model=ScriptedChatModel(two_members()), home=tmp_path, policy=COMPLETIONS, checkpointer=saver)
    graph = team.compile()
    config = {"configurable": {"thread_id": "fails-once"}}

    with pytest.raises(OSError):
        graph.invoke({"messages": [("user", "Please do the work.")]}, config)
    started = team.runtime.steps.ahead_counts[AHEAD_STARTED]
    graph.invoke(None, config)

    values = graph.get_state(config).values
    assert team.runtime.steps.ahead_counts[AHEAD_STARTED] > started
    for name in (R1, U1):
        record = values["agents"][name]
        assert record["status"] == "idle"
        assert ai_messages(values["histories"][name]) == record["steps"]  # NOTE: no dropped call landed
    assert_team_invariants(values)


def test_the_tokens_of_calls_thought_ahead_stream_named_and_add_up_to_the_histories(tmp_path):
    team = Team(model=ScriptedChatModel(two_members()), home=tmp_path, policy=COMPLETIONS)
    graph = team.compile()
    config = {"configurable": {"thread_id": "streamed"}}
    texts: dict[str, str] = {}
    for ns, (chunk, meta) in graph.stream(
        {"messages": [("user", "Please do the work.")]}, config, stream_mode="messages", subgraphs=True
    ):
        if isinstance(chunk, AIMessageChunk):
            assert (ns, meta["langgraph_node"]) == ((), "router")
            assert meta["teamgraph_agent"] in (LEADER, R1, U1), meta
            texts[chunk.id] = texts.get(chunk.id, "") + chunk.text
    histories = graph.get_state(config).values["histories"]
    kept = {m.id: m.text for name in (LEADER, R1, U1) for m in histories[name] if isinstance(m, AIMessage)}
    assert texts == kept  # NOTE: every call streamed once, whole, under the id its history keeps
    counts = team.runtime.steps.ahead_counts
    assert counts[AHEAD_CLAIMED] + counts[AHEAD_LATE] == len(kept) and counts[AHEAD_DROPPED] == 0
