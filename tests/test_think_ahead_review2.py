"""Second review of "think ahead" (5b8afb5) and of the router's ``Command(goto=...)`` (1875f85, reverted).

Each test here failed on 1875f85; a review found them. They drive the team with ``ScriptedChatModel`` under
``Policy(scheduling="completions")`` (where calls are thought ahead) and check what a
user sees: the thread's next node and requests, and a tracer's open runs.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import FakeClock
from langchain_core.tracers.schemas import Run
from langgraph.errors import GraphRecursionError
from langgraph.types import Command
from scripting import act, call, quiet

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.audit import writer as audit_writer
from tests.test_think_ahead import two_members
from tests.test_think_ahead_review import Runs

LEADER = "Team Leader"
R1 = "Researcher_1"
COMPLETIONS = Policy(scheduling="completions")
SETTLE_SECONDS = 5.0
"""How long a test lets calls still running in the pool end (their runs may end when they do)."""


def open_runs(runs: Runs) -> list[str]:
    """The names of the runs still open, once calls in flight had time to end."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while runs.run_map and time.monotonic() < deadline:
        time.sleep(0.05)
    return sorted(run.name for run in runs.run_map.values())


# --- 1875f85: Command(goto=...) ------------------------------------------------------


def test_a_state_edited_during_a_pause_still_goes_to_the_human_gate_and_takes_the_answer(tmp_path: Path) -> None:
    """A user (or Studio's state editor) edits a paused thread with ``update_state``; the
    run must still be paused at the human gate, and ``Command(resume=...)`` answer the ask.

    With the conditional edge, ``update_state`` (as the router, the last node that wrote)
    ran ``route`` on the edited state: next was ``("human",)``. A node's ``Command(goto=...)``
    is not re-run by ``update_state``: next is ``()``, the resume is ignored without an
    error and the ask stays pending.
    """
    script = {LEADER: [act(call("ask_user", question="Blue or red?")), "Going with blue."]}
    team = Team(model=ScriptedChatModel(script), home=tmp_path, policy=COMPLETIONS, clock=FakeClock())
    graph = team.compile()
    config = {"configurable": {"thread_id": "edited"}}
    out = graph.invoke({"messages": [("user", "Design a logo")]}, config)
    assert out["__interrupt__"] and graph.get_state(config).next == ("human",)

    graph.update_state(config, {"messages": []})  # NOTE: an edit that changes nothing the router reads

    assert graph.get_state(config).next == ("human",)  # NOTE: 1875f85: ()
    graph.invoke(Command(resume={"ask_1": "Blue"}), config)
    values = graph.get_state(config).values
    assert values["requests"]["ask_1"]["status"] == "answered"
    assert values["messages"][-1].content == "Going with blue."


def test_edits_keep_the_thread_going_where_the_router_sent_it(tmp_path: Path) -> None:
    """An edit made as the router gets the router's Command: paused stays paused, a finished
    thread stays finished, and an edit naming another node is left as it is. (The async
    path is run by ``langgraph dev`` in ``tests/test_studio.py``.)"""
    script = {LEADER: [act(call("ask_user", question="Blue or red?")), "Going with blue."]}
    team = Team(model=ScriptedChatModel(script), home=tmp_path, policy=COMPLETIONS, clock=FakeClock())
    graph = team.compile()
    config = {"configurable": {"thread_id": "edits"}}
    graph.invoke({"messages": [("user", "Design a logo")]}, config)

    graph.update_state(config, {"messages": []}, as_node="router")
    assert graph.get_state(config).next == ("human",)

    graph.invoke(Command(resume={"ask_1": "Blue"}), config)
    assert graph.get_state(config).next == ()
    graph.update_state(config, {"messages": []})
    assert graph.get_state(config).next == ()
    graph.update_state(config, {"messages": []}, as_node="human")  # NOTE: the gate's own edge: to the router
    assert graph.get_state(config).next == ("router",)

    # A fork of the paused checkpoint (the history's, by its id) is paused at the gate too, and answered.
    paused = next(s for s in graph.get_state_history(config) if s.next == ("human",))
    fork = graph.update_state(paused.config, {"messages": []})
    assert graph.get_state(fork).next == ("human",)
    graph.invoke(Command(resume={"ask_1": "Red"}), fork)
    assert graph.get_state(config).values["requests"]["ask_1"]["status"] == "answered"  # NOTE: the newest


# --- 5b8afb5: traced runs opened by the pass ------------------------------------------


def test_a_stream_closed_between_supersteps_leaves_no_traced_run_open(tmp_path: Path) -> None:
    """A client that stops reading (a closed ``stream``, a disconnected ``langgraph dev``
    client) ends the graph run after a superstep. The pass of that superstep opened the
    traced runs of the steps it issued (their calls thought ahead); no step ever takes
    them, so they stay open for good (and the pool holds their calls, states and configs).

    Before 5b8afb5 a call's run was opened and ended by the call itself.
    """
    team = Team(model=ScriptedChatModel(two_members()), home=tmp_path, policy=COMPLETIONS, clock=FakeClock())
    graph = team.compile()
    runs = Runs()
    config = {"configurable": {"thread_id": "closed"}, "callbacks": [runs]}
    stream = graph.stream({"messages": [("user", "Please do the work.")]}, config, stream_mode="updates")
    # NOTE: the second pass takes the leader's create_sub_agent step and issues three steps.
    assert [list(next(stream)) for _ in range(2)] == [["router"], ["router"]]
    stream.close()

    assert open_runs(runs) == []  # NOTE: 1875f85: ['Researcher_1', 'Team Leader', 'UI Operator_1']


def test_a_run_stopped_by_the_recursion_limit_leaves_no_traced_run_open(tmp_path: Path) -> None:
    """``recursion_limit=2``: the second pass takes the leader's create_sub_agent step and
    issues three steps (their calls thought ahead, their runs opened), then LangGraph
    stops the run with ``GraphRecursionError``: no step takes those calls."""
    team = Team(model=ScriptedChatModel(two_members()), home=tmp_path, policy=COMPLETIONS, clock=FakeClock())
    graph = team.compile()
    runs = Runs()
    config = {"configurable": {"thread_id": "limited"}, "callbacks": [runs], "recursion_limit": 2}
    with pytest.raises(GraphRecursionError):
        graph.invoke({"messages": [("user", "Please do the work.")]}, config)

    assert open_runs(runs) == []  # NOTE: 1875f85: ['Researcher_1', 'Team Leader', 'UI Operator_1']


def test_a_run_that_fails_after_its_pass_leaves_no_traced_run_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log write fails in the pass that spawns the member, after its call was thought
    ahead: ``invoke`` raises, the graph's root run ends with the error, and the agents'
    call runs (children of that pass) must not stay open after it (they stay open until a
    later ``invoke`` of this thread, if any, takes the calls, in another trace)."""
    script = {
        LEADER: [act(call("create_sub_agent", role_id="researcher", task="Survey.")), "Done."],
        R1: ["Survey done."],
    }
    team = Team(model=ScriptedChatModel(script), home=tmp_path, policy=COMPLETIONS, clock=FakeClock())
    graph = team.compile()
    original = audit_writer.write_committed

    def flaky(runtime, state, config=None, **kwargs):
        spawning = LEADER in state.get("team", {}).get("in_flight", {}) and R1 not in state.get("agents", {})
        if spawning and state.get("histories", {}).get(LEADER):
            raise OSError("disk full")
        return original(runtime, state, config, **kwargs)

    monkeypatch.setattr(audit_writer, "write_committed", flaky)
    runs = Runs()
    with pytest.raises(OSError):
        graph.invoke({"messages": [("user", "Go")]}, {"configurable": {"thread_id": "fails"}, "callbacks": [runs]})

    assert [root.error is not None for root in runs.roots] == [True]
    assert open_runs(runs) == []  # NOTE: 1875f85: ['Researcher_1', 'Team Leader']


def agent_runs(run: Run, name: str) -> list[Run]:
    return [run] * (run.name == name) + [r for child in run.child_runs for r in agent_runs(child, name)]


def test_a_turn_stopped_by_the_loop_guard_adds_no_failed_run_to_the_trace(tmp_path: Path) -> None:
    """A member's third identical call stops its turn (``Policy.loop_stop=3``): its next step
    makes no model call. In lockstep (and before think ahead) the trace has one run per
    model call, none failed. Under "completions" the pass opened a run for the call it
    would think ahead; no call is made, and that run ends failed with ``CallDropped``
    ("it read another state", which is not what happened): a spurious error in LangSmith."""
    ui = "UI Operator_1"
    script = {
        LEADER: [act(call("create_sub_agent", role_id="ui-operator", task="Draw.")), *quiet()],
        ui: [act(call("list_files"))] * 3 + ["never reached"],
    }
    policy = Policy(scheduling="completions", loop_warn=2, loop_stop=3)
    team = Team(model=ScriptedChatModel(script), home=tmp_path, policy=policy, clock=FakeClock())
    graph = team.compile()
    runs = Runs()
    config = {"configurable": {"thread_id": "looping"}, "callbacks": [runs]}
    graph.invoke({"messages": [("user", "Go")]}, config)
    assert graph.get_state(config).values["agents"][ui]["status"] == "stopped"
    assert open_runs(runs) == []

    steps = [run for root in runs.roots for run in agent_runs(root, ui)]
    assert [run.error for run in steps if run.error] == []  # NOTE: 1875f85: ["CallDropped('no step used ...')..."]
    assert len(steps) == 3  # NOTE: one run per model call
