"""The completions scheduler (Policy.scheduling="completions"): no lockstep.

A member's next step starts as soon as its previous one is done and its inbox is
settled. These tests use models with real latencies (a callable script that
sleeps), so which step finishes first is decided by time, as with real providers;
they assert what must hold for every interleaving, never a whole history.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from scripting import act, call, quiet

from teamgraph import Policy
from teamgraph.messaging import envelopes
from tests.invariants import assert_team_invariants

LEADER = "Team Leader"
SLOW, FAST = "Researcher_1", "UI Operator_1"
COMPLETIONS = Policy(scheduling="completions")


def slow(turn: Any, seen: list[list[BaseMessage]], until: threading.Event | None = None):
    """A turn that records the context it was given and, with ``until``, lasts until that event.

    NOTE: an event, not a duration: the turn lasts exactly as long as the order under test
    needs, and a scheduler that made the other member wait for it times out (and fails).
    """

    def play(messages):
        seen.append(list(messages))
        if until is not None:
            until.wait(UNTIL_TIMEOUT_S)
        return turn

    return play


UNTIL_TIMEOUT_S = 10
"""How long a ``slow`` turn waits for its event at most: only a failing run waits that long."""


def setting(event: threading.Event, turn: Any):
    """A turn that sets ``event`` as it is played."""

    def play(messages):
        event.set()
        return turn

    return play


def messages_from(messages: list[BaseMessage], sender: str) -> list[str]:
    found = []
    for m in messages:
        if isinstance(m, HumanMessage) and (env := envelopes.parse(str(m.content))) and env["sender"] == sender:
            found.append(env["body"])
    return found


def test_a_message_to_a_busy_member_is_in_its_very_next_model_call(run_team):
    seen: list[list[BaseMessage]] = []
    sent = threading.Event()
    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="researcher", task="Survey the sources."),
                    call("create_sub_agent", role_id="ui-operator", task="Tell Researcher_1 to add the date."),
                ),
                *quiet(),
            ],
            SLOW: [
                slow(act(call("list_files")), seen, until=sent),
                slow(act(call("list_files")), seen),
                slow("Survey done, with the date.", seen),
            ],
            # NOTE: the fast member's second turn follows its send_message's result: the message is sent.
            FAST: [act(call("send_message", to=SLOW, content="Add the date.")), setting(sent, "Told them.")],
        },
        policy=COMPLETIONS,
    )
    # The message was sent while the researcher's first call was in flight: that
    # call did not have it, the very next one did.
    assert messages_from(seen[0], FAST) == []
    assert messages_from(seen[1], FAST) == ["Add the date."]
    # In its history it comes after the first step's tool result (the pairing holds).
    history = run.history(SLOW)
    at = next(i for i, m in enumerate(history) if messages_from([m], FAST))
    assert isinstance(history[at - 1], ToolMessage) and isinstance(history[at - 2], AIMessage)
    assert_team_invariants(run.values)


def test_a_fast_member_does_not_wait_for_a_slow_one(run_team):
    seen: list[list[BaseMessage]] = []
    finished: dict[str, float] = {}
    fast_done = threading.Event()

    def done(name: str, text: str):
        def play(messages):
            finished[name] = time.monotonic()
            if name == FAST:
                fast_done.set()
            return text

        return play

    run = run_team(
        {
            LEADER: [
                act(
                    call("create_sub_agent", role_id="researcher", task="Slow work."),
                    call("create_sub_agent", role_id="ui-operator", task="Quick work."),
                ),
                *quiet(),
            ],
            SLOW: [slow(act(call("list_files")), seen, until=fast_done), done(SLOW, "Slow done.")],
            FAST: [
                act(call("list_files")),
                act(call("list_files")),
                act(call("list_files")),
                done(FAST, "Quick done."),
            ],
        },
        policy=COMPLETIONS,
    )
    # NOTE: an order, not a timing: the fast member's four steps do not wait for the
    # slow member's one (in lockstep the slow one would finish two rounds earlier).
    assert finished[FAST] < finished[SLOW]
    assert run.status(SLOW) == run.status(FAST) == "idle"
    assert_team_invariants(run.values)


def test_each_finished_step_costs_at_most_two_checkpoints(make_team):
    run = make_team(
        {
            LEADER: [act(*[call("create_sub_agent", role_id="researcher", task=f"T{i}.") for i in range(3)]), *quiet()],
            **{f"Researcher_{i}": [act(call("list_files")), act(call("list_files")), "Done."] for i in (1, 2, 3)},
        },
        policy=COMPLETIONS,
    )
    run.send("Go.")
    steps = sum(a["steps"] for a in run.agents().values())
    checkpoints = len(list(run.graph.get_state_history(run.config)))
    # One checkpoint for the input and one per superstep: a router superstep sends at least
    # one finished call to its agent's node, whose superstep takes the step (issue 29: <= 2).
    assert checkpoints <= 2 * steps + 3


def test_streamed_runs_finish_with_any_count_of_langgraph_workers(make_team, tmp_path):
    """LangGraph's pool runs the router, the agents' nodes, the checkpoint writes and a
    stream's chunk waiter. A streamed run (the waiter holds a worker) must still finish,
    with LangGraph's default and with whatever a run's config sets."""
    script = {
        LEADER: [act(*[call("create_sub_agent", role_id="researcher", task=f"T{i}.") for i in range(2)]), *quiet()],
        **{f"Researcher_{i}": [act(call("list_files")), "Done."] for i in (1, 2)},
    }
    for workers in (None, 2, 8):
        run = make_team(script, policy=COMPLETIONS, home=tmp_path / str(workers))
        config = {**run.config, **({"max_concurrency": workers} if workers else {})}
        modes = ["messages", "custom", "updates"]
        chunks = list(run.graph.stream({"messages": [("user", "Go.")]}, config, stream_mode=modes))
        assert {mode for mode, _ in chunks} >= {"updates"}
        assert {name: a["status"] for name, a in run.agents().items() if name != LEADER} == {
            "Researcher_1": "idle",
            "Researcher_2": "idle",
        }


def test_a_gate_beside_the_router_streams_its_interrupt_before_the_routers_wait_ends(tmp_path):
    """After an edit with two updates, a superstep runs the router and the gate.
    Streamed, both tasks and the chunk waiter need a worker each: the person's question must
    not queue behind the router, which waits for the member's step in flight."""
    from langgraph.types import StateUpdate

    from teamgraph import ScriptedChatModel, Team

    script = {
        LEADER: [act(call("create_sub_agent", role_id="researcher", task="T."), call("ask_user", question="Blue?"))],
        SLOW: [act(call("list_files")), act(call("list_files")), "Done."],
    }
    team = Team(
        model=ScriptedChatModel(script, latency=0.4),
        home=tmp_path,
        policy=Policy(scheduling="completions", pause="immediately"),
    )
    graph = team.compile()
    config = {"configurable": {"thread_id": "two-tasks"}}
    graph.invoke({"messages": [("user", "Go")]}, config)
    assert team.agents(config)[SLOW]["status"] == "running"  # NOTE: paused at the gate, a step in flight
    graph.bulk_update_state(config, [[StateUpdate({"messages": []}, "router"), StateUpdate({"messages": []}, "human")]])
    assert set(graph.get_state(config).next) == {"router", "human"}
    order = []
    for mode, chunk in graph.stream(None, config, stream_mode=["messages", "custom", "updates"]):
        order.append("__interrupt__" if mode == "updates" and "__interrupt__" in chunk else mode)
        if order[-1] == "__interrupt__":
            break
    # NOTE: the person's question does not wait for the member's 0.4 s call: none of the
    # call's tokens comes before it (the router's own update may).
    assert "messages" not in order, order
