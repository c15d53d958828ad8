"""Every way of editing a thread as the router routes it where a pass would (the router routes by Command).

An edit made as the router (in bulk, beside another update, as a copy, not a mapping, a Command)
must keep a gate that was pending before it, and an edit of a fresh thread must route."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FakeClock
from langgraph.graph import END
from langgraph.types import Command, StateUpdate
from scripting import act, call

from teamgraph import Policy, ScriptedChatModel, Team

LEADER = "Team Leader"


def paused(home: Path, thread: str):
    script = {LEADER: [act(call("ask_user", question="Blue or red?")), "Going with blue."]}
    team = Team(model=ScriptedChatModel(script), home=home, policy=Policy(scheduling="completions"), clock=FakeClock())
    graph = team.compile()
    config = {"configurable": {"thread_id": thread}}
    graph.invoke({"messages": [("user", "Design a logo")]}, config)
    assert graph.get_state(config).next == ("human",)
    return graph, config


def test_a_router_edit_in_a_later_superstep_keeps_the_gate(tmp_path: Path) -> None:
    graph, config = paused(tmp_path, "supersteps")
    graph.bulk_update_state(
        config, [[StateUpdate({"messages": []}, "human")], [StateUpdate({"messages": []}, "router")]]
    )
    assert graph.get_state(config).next == ("human",)


def test_a_router_edit_beside_another_update_keeps_the_gate(tmp_path: Path) -> None:
    graph, config = paused(tmp_path, "two")
    graph.bulk_update_state(config, [[StateUpdate({"messages": []}, "router"), StateUpdate({"messages": []}, "human")]])
    assert set(graph.get_state(config).next) == {
        "router",
        "human",
    }


def test_a_fork_with_copy_made_as_the_router_keeps_the_gate(tmp_path: Path) -> None:
    graph, config = paused(tmp_path, "copy")
    fork = graph.update_state(config, [({"messages": []}, "router")], as_node="__copy__")
    assert graph.get_state(fork).next == ("human",)


@pytest.mark.parametrize(
    "values",
    [None, Command(update={"messages": []})],
    ids=["none", "command-without-goto"],
)
def test_an_edit_that_is_not_a_mapping_keeps_the_gate(tmp_path: Path, values) -> None:
    graph, config = paused(tmp_path, "values")
    graph.update_state(config, values)  # NOTE: as the router (the last writer), inferred
    assert graph.get_state(config).next == ("human",)


def test_a_command_edit_that_says_end_keeps_the_gate(tmp_path: Path) -> None:
    """END writes no trigger; the router's edges must still fire after it."""
    graph, config = paused(tmp_path, "end")
    graph.update_state(config, Command(update={"messages": []}, goto=END), as_node="router")
    state = graph.get_state(config)
    assert state.values["team"]["human"] is True and state.next == ("human",)
    graph.update_state(config, Command(update={"messages": []}, goto="human"), as_node="router")
    assert graph.get_state(config).next == ("human",)


def test_an_edit_as_the_router_on_a_fresh_thread_routes(tmp_path: Path) -> None:
    team = Team(model=ScriptedChatModel({LEADER: []}), home=tmp_path, clock=FakeClock())
    graph = team.compile()
    config = {"configurable": {"thread_id": "fresh"}}
    graph.update_state(config, {"messages": [], "team": {"in_flight": ["x"]}}, as_node="router")
    assert graph.get_state(config).next == ("router",)


async def _async_supersteps(home: Path) -> tuple[str, ...]:
    from teamgraph.checkpoints.aio import open_async_sqlite_saver

    async with open_async_sqlite_saver(home / "a.sqlite") as saver:
        script = {LEADER: [act(call("ask_user", question="Blue or red?")), "Going with blue."]}
        team = Team(
            model=ScriptedChatModel(script),
            home=home,
            policy=Policy(scheduling="completions"),
            clock=FakeClock(),
            checkpointer=saver,
        )
        graph = team.compile()
        config = {"configurable": {"thread_id": "async"}}
        await graph.ainvoke({"messages": [("user", "Design a logo")]}, config)
        await graph.abulk_update_state(
            config, [[StateUpdate({"messages": []}, "human")], [StateUpdate({"messages": []}, "router")]]
        )
        return (await graph.aget_state(config)).next


def test_async_a_router_edit_in_a_later_superstep_keeps_the_gate(tmp_path: Path) -> None:
    import asyncio

    assert asyncio.run(_async_supersteps(tmp_path)) == ("human",)


def test_a_fork_in_the_middle_of_a_run_goes_back_to_the_router(tmp_path: Path) -> None:
    graph, config = paused(tmp_path, "mid")
    mid = next(s for s in graph.get_state_history(config) if s.next == ("router",) and s.metadata["step"] > 0)
    fork = graph.update_state(mid.config, {"messages": []})
    assert graph.get_state(fork).next == ("router",)


def test_a_run_reads_no_state_to_route_and_each_pass_routes_once(tmp_path: Path, monkeypatch) -> None:
    """A pass routes by its own Command: the edits' branch reads nothing (the edge it replaced
    copied every channel at every superstep) and adds no second trigger."""
    import teamgraph.graph.router as router

    reads: list[str] = []
    real = router.read_fresh
    monkeypatch.setattr(
        router,
        "read_fresh",
        lambda config, channel, default=None: reads.append(channel) or real(config, channel, default),
    )
    graph, config = paused(tmp_path, "reads")
    assert reads == []
    tasks = [s.tasks for s in graph.get_state_history(config)]
    assert all(len(t) <= 1 for t in tasks)  # NOTE: one router (or gate) task per superstep, never two
    graph.update_state(config, {"messages": []})
    assert reads == ["outbox", "team"] and graph.get_state(config).next == ("human",)
