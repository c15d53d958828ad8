"""The scheduler half of the router node: issue steps, wait for completions, take results.

One superstep per completion (or per batch that completes together): the router
pass applies the results taken by the previous superstep, then this module issues
the steps the pass scheduled, waits until a step in flight is done, and adds the
finished steps' messages and effects to the pass's updates, for the next pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from functools import partial
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from teamgraph.graph.steps import StepPool
from teamgraph.nodes.agent_step import take_step
from teamgraph.protocols.requests import is_pending
from teamgraph.roles import Role
from teamgraph.runtime import TeamRuntime


def state_after(state: Mapping[str, Any], updates: Mapping[str, Any]) -> dict[str, Any]:
    """The team state once a pass's updates are applied (what a step issued by the pass reads)."""
    histories = dict(state.get("histories", {}))
    for name, appended in updates.get("histories", {}).items():
        histories[name] = [*histories.get(name, []), *appended]
    return {
        **state,
        "agents": {**state.get("agents", {}), **updates.get("agents", {})},
        "requests": {**state.get("requests", {}), **updates.get("requests", {})},
        "histories": histories,
        "team": updates["team"],
    }


def seconds_to_next_deadline(runtime: TeamRuntime, requests: Mapping[str, Any]) -> float | None:
    """How long the scheduler may wait before a request's deadline must fire."""
    now = runtime.clock.now()
    left = [
        (datetime.fromisoformat(r["deadline"]) - now).total_seconds()
        for r in requests.values()
        if is_pending(r) and r.get("deadline")
    ]
    return max(0.0, min(left)) if left else None


def advance(
    runtime: TeamRuntime,
    pool: StepPool,
    subgraph_for: Callable[[Role], CompiledStateGraph],
    state: Mapping[str, Any],
    updates: dict[str, Any],
    config: RunnableConfig,
) -> dict[str, Any]:
    """Issue the pass's steps, wait for a completion, and add the finished steps to ``updates``.

    Args:
        runtime: The team runtime.
        pool: The process's steps in flight.
        subgraph_for: The role subgraph an agent steps through.
        state: The state the pass read (what steps issued by earlier passes read).
        updates: The pass's updates (``team["in_flight"]`` lists every step in flight).
        config: The router task's config (steps stream through it).

    Returns:
        ``updates``, with the finished steps' messages (``histories``) and effects
        (``outbox``) and without their dispatches.
    """
    thread_id = str(config.get("configurable", {}).get("thread_id", ""))
    team = updates["team"]
    in_flight: dict[str, int] = dict(team.get("in_flight", {}))
    issued = set(team.get("scheduled", []))
    after = state_after(state, updates) if issued else state
    for agent, seq in in_flight.items():
        # NOTE: a step issued by an earlier pass (re-issued in a new process after a
        # crash) reads the state that pass left, which is this pass's input.
        source = after if agent in issued else state
        pool.ensure(thread_id, agent, seq, partial(take_step, runtime, subgraph_for, source, agent, config))
    if not in_flight:
        return updates
    requests = {**state.get("requests", {}), **updates.get("requests", {})}
    every = runtime.policy.scheduling == "lockstep"
    pool.wait(thread_id, in_flight, every=every, timeout=seconds_to_next_deadline(runtime, requests))
    done = pool.take_done(thread_id, in_flight)
    if not done:
        return updates
    histories = dict(updates.get("histories", {}))
    outbox: list[dict[str, Any]] = []
    for agent in sorted(done, key=lambda name: (name in in_flight and in_flight[name])):
        result = done[agent]
        histories[agent] = [*histories.get(agent, []), *result.get("histories", {}).get(agent, [])]
        outbox.extend(result.get("outbox", []))
        del in_flight[agent]
    team["in_flight"] = in_flight
    updates["histories"] = histories
    updates["outbox"] = outbox
    return updates
