"""Review of "think ahead": behaviours that must be as before apart from timing.

Each test here failed on the first build of think ahead (2237d63); a review found them.
They drive the team with ``ScriptedChatModel`` under ``Policy(scheduling="completions")``
(under ``"auto"`` a scripted team runs in lockstep, where nothing is thought ahead).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeClock
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tracers.base import BaseTracer
from langchain_core.tracers.schemas import Run
from scripting import act, call, quiet

from teamgraph import Policy, ScriptedChatModel, Team
from teamgraph.ahead import Prepared
from teamgraph.audit import writer as audit_writer
from teamgraph.steps import StepPool
from tests.test_think_ahead import FailsOnce, ignore, two_members

LEADER = "Team Leader"
R1, U1 = "Researcher_1", "UI Operator_1"
COMPLETIONS = Policy(scheduling="completions")


def counting(script: dict[str, list[Any]], calls: Counter[str]) -> dict[str, list[Any]]:
    """``script`` whose turns count, per agent, the model calls actually made (dropped ones too)."""

    def turn(name: str, value: Any) -> Callable[[list[BaseMessage]], Any]:
        def play(messages: list[BaseMessage]) -> Any:
            calls[name] += 1
            return value(messages) if callable(value) else value

        return play

    return {name: [turn(name, value) for value in turns] for name, turns in script.items()}


def ai_count(values: dict[str, Any], name: str) -> int:
    return sum(isinstance(m, AIMessage) for m in values["histories"][name])


def test_a_superstep_retried_after_a_failed_put_writes_makes_each_call_once(tmp_path: Path) -> None:
    """The retried pass issues the same dispatches on the same state: the calls thought ahead
    by the failed attempt are for those very prompts, yet each is made again (twice in all).

    Before 2237d63 each member's model was called once per step (3 and 2 calls).
    """
    calls: Counter[str] = Counter()
    team = Team(
        model=ScriptedChatModel(counting(two_members(), calls)),
        home=tmp_path,
        policy=COMPLETIONS,
        checkpointer=FailsOnce(),
        clock=FakeClock(),  # NOTE: the retried pass stamps the same times: the very same prompts and views
    )
    graph = team.compile()
    config = {"configurable": {"thread_id": "retried"}}
    with pytest.raises(OSError):
        graph.invoke({"messages": [("user", "Please do the work.")]}, config)
    graph.invoke(None, config)

    values = graph.get_state(config).values
    assert (ai_count(values, R1), ai_count(values, U1)) == (3, 2)
    assert (calls[R1], calls[U1]) == (3, 2)  # NOTE: 2237d63: (4, 3), the first calls made twice


def test_a_superstep_retried_after_a_failed_log_write_makes_each_call_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log write fails in the pass that spawns the member (after its call is thought
    ahead); the resumed pass issues the same step on the same state: one call, not two."""
    calls: Counter[str] = Counter()
    script = {
        LEADER: [act(call("create_sub_agent", role_id="researcher", task="Survey.")), *quiet()],
        R1: ["Survey done."],
    }
    team = Team(model=ScriptedChatModel(counting(script, calls)), home=tmp_path, policy=COMPLETIONS, clock=FakeClock())
    graph = team.compile()
    original, failed = audit_writer.write_committed, []

    def flaky(runtime, state, config=None, **kwargs):
        # NOTE: the pass that takes the leader's create_sub_agent step (R1 not spawned yet).
        spawning = LEADER in state.get("team", {}).get("in_flight", {}) and R1 not in state.get("agents", {})
        if spawning and state.get("histories", {}).get(LEADER) and not failed:
            failed.append(1)
            raise OSError("disk full")
        return original(runtime, state, config, **kwargs)

    monkeypatch.setattr(audit_writer, "write_committed", flaky)
    config = {"configurable": {"thread_id": "log-fails"}}
    with pytest.raises(OSError):
        graph.invoke({"messages": [("user", "Go")]}, config)
    graph.invoke(None, config)

    values = graph.get_state(config).values
    assert failed and values["agents"][R1]["status"] == "idle"
    assert calls[R1] == 1  # NOTE: 2237d63: 2


class Runs(BaseTracer):
    """Every finished run tree (a root run with its children); ``run_map`` holds the runs still open."""

    def __init__(self) -> None:
        super().__init__()
        self.roots: list[Run] = []

    def _persist_run(self, run: Run) -> None:
        self.roots.append(run)


def named(run: Run, name: str) -> list[Run]:
    return [run] * (run.name == name) + [r for child in run.child_runs for r in named(child, name)]


def test_each_model_call_is_one_traced_run_with_its_tool_runs_nested(tmp_path: Path) -> None:
    """README: "one traced run per call (input: the agent's name); the model and tool runs
    nest under it". A call thought ahead runs in a run of its own (under the pass that issued
    it) and its tools in a second run named after the agent, with no model run in it."""
    script = {
        LEADER: [act(call("create_sub_agent", role_id="researcher", task="Survey.")), *quiet()],
        R1: [act(call("list_files")), "Survey done."],
    }
    graph = Team(model=ScriptedChatModel(script), home=tmp_path, policy=COMPLETIONS).compile()
    runs = Runs()
    graph.invoke({"messages": [("user", "Go")]}, {"configurable": {"thread_id": "traced"}, "callbacks": [runs]})

    steps = [run for root in runs.roots for run in named(root, R1)]
    shapes = [[f"{child.run_type}:{child.name}" for child in run.child_runs] for run in steps]
    # NOTE: 2237d63: [[llm], [tool:list_files], [llm], []]
    assert shapes == [["llm:ScriptedChatModel", "tool:list_files"], ["llm:ScriptedChatModel"]]


def test_a_step_does_not_wait_for_a_replaced_call_it_will_not_use() -> None:
    """A call thought ahead on a state that was never committed (another prompt) is replaced
    by the retried pass's, but keeps its worker: the new call queues behind it, and the step
    waits for the stale call to end before it can even compare prompts. A provider that
    hangs on the stale call holds the step forever (before 2237d63 the step made its own call).
    """
    pool = StepPool(workers=1)
    stale_may_end = threading.Event()
    uncommitted, committed = (["system", "task", "uncommitted"], "view"), (["system", "task"], "view")

    def stale() -> Any:
        return Prepared(start="stale", call=lambda: stale_may_end.wait(30) and "stale answer", end=ignore)

    def fresh() -> Any:
        return Prepared(start="fresh", call=lambda: "answer", end=ignore)

    try:
        pool.think_ahead("t", R1, 3, uncommitted, stale())  # NOTE: the pass whose checkpoint failed
        pool.think_ahead("t", R1, 3, committed, fresh())  # NOTE: the pass retried on the committed state
        ahead = pool.ahead_of("t", R1, 3)
        assert ahead is not None
        claimed: list[Any] = []
        claiming = threading.Thread(target=lambda: claimed.append(ahead.claim(committed)), daemon=True)
        claiming.start()
        claiming.join(2.0)
        assert claimed, "the step still waits for the replaced call"
    finally:
        stale_may_end.set()


def test_starting_an_older_dispatch_leaves_the_newer_dispatchs_call() -> None:
    """Every superstep starts each dispatch its state records (``start_recorded``), the ones
    already running too. A superstep retried after a failure starts the leader's running
    dispatch 1 while the failed attempt's call for dispatch 2 is held: asking for 1 drops 2's
    call, and the retried pass makes it again (the leader's call made twice)."""
    pool = StepPool(workers=1)
    pool.think_ahead("t", LEADER, 2, (LEADER, ["task"]), Prepared(start="start", call=lambda: "answer", end=ignore))
    assert pool.ahead_of("t", LEADER, 1) is None
    assert pool.ahead_of("t", LEADER, 2) is not None  # NOTE: 2237d63: None (dropped by the ask for 1)
