"""Issue 30, point 4: the step journal's parts, each alone.

- the tool seam (``nodes/tool_calls.py``) with a journal: recorded outcomes replayed (results,
  effects, calls left open), a call the process died in run again and marked, an interrupt
  not taken for a crash, two calls with one id kept apart;
- an approved sensitive operation, performed in its requester's node, journaled as a tool call;
- on PostgreSQL, the store writes under the saver's lock (one connection).

The team scenarios (a card charged across a crash, both schedulers, both databases) are in
``tests/test_step_journal.py``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.errors import GraphInterrupt
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command
from pg_fixtures import postgres_server, postgres_url  # noqa: F401
from scripting import act, call
from test_step_journal import CONFIG, LEADER, MEMBER, Crash

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.governance import operations
from teamgraph.nodes.journal import RERUN_KEY, RERUN_NOTE, StepJournal, flush, run_namespace
from teamgraph.nodes.tool_calls import run_tool_calls
from teamgraph.tools import TeamView, ToolContext
from teamgraph.tools.context import defer


def test_on_postgresql_the_store_writes_under_the_saver_s_lock(tmp_path: Path, postgres_url: str) -> None:  # noqa: F811
    """One connection for the checkpoints and the store: a store write never lands inside a fenced transaction."""
    team = Team(model=ScriptedChatModel({LEADER: ["Hi."]}), home=tmp_path, checkpointer=postgres_url)
    team.compile().invoke({"messages": [("user", "Hi")]}, CONFIG)  # NOTE: the lease fence swaps in its lock
    saver, store = team.graph.checkpointer, team.runtime.store

    def free() -> bool:
        """Whether another thread can take the saver's lock now."""
        taken: list[bool] = []

        def probe() -> None:
            taken.append(saver.lock.acquire(blocking=False))
            if taken[0]:
                saver.lock.release()

        prober = threading.Thread(target=probe)
        prober.start()
        prober.join()
        return taken[0]

    with store.lock:  # type: ignore[union-attr]
        assert not free()
    assert free()


APPROVING = Policy(approval="human")
ENGINEER = "Full-Stack Engineer_1"


def approved_command(hitl_team: Any, home: Path, monkeypatch: pytest.MonkeyPatch, *, stop: str) -> tuple[Any, Path]:
    """An engineer's command a person approves; the process stops once at ``stop`` while it is performed."""
    done = home / "project" / "runs.txt"  # NOTE: the command runs in the thread's folder, home/project/<thread>
    command = call("run_command", command=f"{sys.executable} -c \"open('../runs.txt', 'a').write('x')\"")
    run = hitl_team(
        {LEADER: [act(call("create_sub_agent", role_id="full-stack-engineer", task="Go.")), *[""] * 6]}
        | {ENGINEER: [act(command), "Done."]},
        policy=APPROVING,
        fresh=True,
    )
    run.send("Go")
    stopped: list[str] = []
    perform, record = operations.perform, StepJournal.record

    def performing(*args: Any) -> str:
        result = perform(*args)
        if stop == "act" and not stopped:
            stopped.append(stop)
            raise Crash(stop)  # NOTE: the command ran; the process dies before its result is recorded
        return result

    def recording(journal: StepJournal, key: str, *args: Any) -> None:
        record(journal, key, *args)
        if stop == "recorded" and key.startswith("perform:") and not stopped:
            stopped.append(stop)
            raise Crash(stop)  # NOTE: recorded; the process dies before the step's checkpoint

    monkeypatch.setattr(operations, "perform", performing)
    monkeypatch.setattr(StepJournal, "record", recording)
    with pytest.raises(Crash):
        run.resume({"approval_1": {"approve": True, "feedback": "fine"}})
    run.graph.invoke(None, run.config)
    assert stopped == [stop]
    return run, done


def test_an_approved_command_whose_result_was_recorded_runs_once(
    hitl_team: Any, team_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, done = approved_command(hitl_team, team_home, monkeypatch, stop="recorded")
    assert done.read_text() == "x"
    (result,) = run.tool_texts(ENGINEER, "run_command")
    assert result.startswith("approval_1 approved by the user.") and RERUN_NOTE not in result


def test_an_approved_command_the_process_died_in_runs_again_and_says_so(
    hitl_team: Any, team_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, done = approved_command(hitl_team, team_home, monkeypatch, stop="act")
    assert done.read_text() == "xx"  # NOTE: at least once: it had run when the process died
    (result,) = run.tool_texts(ENGINEER, "run_command")
    assert RERUN_NOTE in result


# --- the seam alone ------------------------------------------------------------------


def _journal(store: InMemoryStore) -> StepJournal:
    """Dispatch 1 of the member in run ``t.1``, as a step opening it reads it."""
    flush()  # NOTE: results are written behind the step; a step opening the journal waits for them too
    item = store.get(run_namespace("t.1"), MEMBER)
    value = {} if item is None else dict(item.value)
    return StepJournal(store=store, namespace=run_namespace("t.1"), agent=MEMBER, seq=1, value=value)


def _asking(*names: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": n, "args": {}, "id": "same"} for n in names])


Seam = Callable[[AIMessage, list[Any], StepJournal], tuple[list[ToolMessage], list[Any], list[str]]]


@pytest.fixture
def seam(tmp_path: Path) -> Seam:
    """``seam(ai, tools, journal)``: the tool calls of ``ai`` run through the tool seam with ``journal``."""
    runtime = Team(home=tmp_path).runtime
    view = TeamView(caller=MEMBER, agents={MEMBER: {"role": "researcher", "status": "running"}}, requests={}, team={})

    def run(ai: AIMessage, tools: list[Any], journal: StepJournal) -> tuple[list[ToolMessage], list[Any], list[str]]:
        return run_tool_calls(ai, {t.name: t for t in tools}, view, {}, runtime=runtime, journal=journal, turn=0)

    return run


def test_two_calls_with_one_id_are_journaled_apart(seam: Seam) -> None:
    runs: list[str] = []

    @tool
    def first() -> str:
        """One."""
        runs.append("first")
        return "one"

    @tool
    def second() -> str:
        """Two."""
        runs.append("second")
        return "two"

    store = InMemoryStore()
    for _ in range(2):  # NOTE: the step, then the step taken again from the same journal
        messages, _, _ = seam(_asking("first", "second"), [first, second], _journal(store))
        assert [m.content for m in messages] == ["one", "two"]
    assert runs == ["first", "second"]  # NOTE: the second pass took both recorded results


def test_a_recorded_call_left_open_is_replayed_with_its_effects(seam: Seam) -> None:
    asks: list[str] = []

    @tool
    def ask(context: ToolContext) -> Command:
        """Ask the leader; the answer comes later."""
        asks.append(context.tool_call_id)
        return defer({"kind": "open", "request_kind": "ask", "to": LEADER, "call_id": context.tool_call_id})

    store = InMemoryStore()
    runs = [seam(_asking("ask"), [ask], _journal(store)) for _ in range(2)]
    opened = {"kind": "open", "request_kind": "ask", "to": LEADER, "call_id": "same"}
    assert runs[0] == runs[1] == ([], [opened], ["same"])
    assert asks == ["same"]


def test_a_langchain_tool_run_again_gets_the_same_injected_call_id(seam: Seam) -> None:
    seen: list[str] = []

    @tool
    def pay(tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Pay, keyed by the call's id."""
        seen.append(tool_call_id)
        if len(seen) == 1:
            raise Crash  # NOTE: the process dies while the tool runs
        return f"paid under {tool_call_id}"

    store = InMemoryStore()
    with pytest.raises(Crash):
        seam(_asking("pay"), [pay], _journal(store))
    [result], _, _ = seam(_asking("pay"), [pay], _journal(store))
    assert seen == ["same", "same"] and result.additional_kwargs[RERUN_KEY] == 1
    assert str(result.content).endswith("paid under same")


def test_a_tool_stopped_by_an_interrupt_is_not_taken_for_a_crashed_one(seam: Seam) -> None:
    @tool
    def confirm() -> str:
        """Ask a person first."""
        raise GraphInterrupt(())  # NOTE: what interrupt() raises to pause the run

    @tool
    def dies() -> str:
        """The process dies in it."""
        raise Crash

    store = InMemoryStore()
    with pytest.raises(GraphInterrupt):
        seam(_asking("confirm"), [confirm], _journal(store))
    assert _entries(store) == {}  # NOTE: after the resume it runs as a first run
    with pytest.raises(Crash):
        seam(_asking("dies"), [dies], _journal(store))
    assert _entries(store) == {"0:0:same": {"runs": 1}}  # NOTE: a re-run would say it may have run


def _entries(store: InMemoryStore) -> dict[str, Any]:
    item = store.get(run_namespace("t.1"), MEMBER)
    return {} if item is None else item.value["tools"]
