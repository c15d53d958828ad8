"""The scheduler half of the router node: model calls in flight, one superstep per completion.

After its pass, the router (1) starts the model call of every step the state records
in flight (``team["in_flight"]``) that the pool does not hold yet, on the very state its
checkpoint will hold, (2) waits until one of them is done (each one in lockstep or while
draining, never past a pending request's deadline), and (3) sends each finished call to
its agent's node, where the step is taken (``teamgraph/nodes/role_graph.py``). The next
pass applies what those steps did. So a member's call never waits for another's, and a
crash loses only the calls in flight: a new process makes them again from the
checkpoint that records them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import partial
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Send

from teamgraph.nodes.agent_step import StepFor, begin_step
from teamgraph.nodes.role_graph import StepTask, first_call
from teamgraph.protocols.requests import is_pending
from teamgraph.runs import run_key
from teamgraph.runtime import TeamRuntime
from teamgraph.state import TeamUpdate, append_histories, merge_records

LEADER_NODE = "leader"
MEMBER_NODE = "member"
"""The node of members whose role was created after the graph was compiled."""


def after_pass(state: Mapping[str, Any], updates: TeamUpdate) -> dict[str, Any]:
    """What a step reads of the state the checkpoint after this pass holds: ``updates``
    folded into ``state`` by the channels' own reducers (``teamgraph/state.py``)."""
    after = dict(state)
    if "histories" in updates:
        after["histories"] = append_histories(state.get("histories"), [updates["histories"]])
    for key in ("agents", "requests"):
        if key in updates:
            after[key] = merge_records(state.get(key), [updates[key]])
    after["team"] = updates.get("team", state.get("team", {}))
    return after


def start_calls(runtime: TeamRuntime, step_for: StepFor, state: Mapping[str, Any], config: RunnableConfig) -> None:
    """Start the model call of each dispatch ``state`` records that the pool does not hold.

    NOTE: a draining thread (the CLI's Ctrl-C) starts none: the calls running finish, and
    the thread stops with the rest recorded, for a resume to make.
    """
    key = run_key(config)
    pool = runtime.calls
    if key in pool.draining:
        return
    in_flight = state.get("team", {}).get("in_flight", {})
    performs = state.get("team", {}).get("perform", {})
    held = pool.running(key, in_flight)
    for agent, seq in in_flight.items():
        if agent in held:
            continue
        if agent in performs:
            pool.start(key, agent, seq, _no_call)  # NOTE: its node performs an approved operation
            continue
        try:
            start = begin_step(runtime, step_for, state, agent, config)
        except Exception:  # noqa: BLE001 - e.g. a role that is gone: the agent's node meets the error and reports it
            start = None
        node = node_of(runtime, state, agent)
        pool.start(key, agent, seq, partial(first_call, start, node) if start is not None else _no_call)


def _no_call() -> None:
    """A dispatch with no model call: its step cannot start (its node meets the reason), or it performs an operation."""
    return None


def node_of(runtime: TeamRuntime, state: Mapping[str, Any], agent: str) -> str:
    """The node in which ``agent`` takes its steps: the leader's, its role's, or the generic member node."""
    record = state.get("agents", {}).get(agent, {})
    role = runtime.role(record.get("role", ""))
    if role is not None and role.is_leader:
        return LEADER_NODE
    return runtime.role_nodes.get(record.get("role", ""), MEMBER_NODE)


def seconds_to_next_deadline(runtime: TeamRuntime, state: Mapping[str, Any]) -> float | None:
    """How long the scheduler may wait before a pending request's deadline must fire.

    NOTE: it reads the pending ids the router keeps (``team["open"]``), never every
    request of the thread: this runs once per finished call.
    """
    requests = state.get("requests", {})
    pending = [requests[rid] for rid in state.get("team", {}).get("open", ()) if rid in requests]
    now = runtime.clock.now()
    left = [
        (datetime.fromisoformat(deadline) - now).total_seconds()
        for r in pending
        if is_pending(r) and (deadline := r.get("deadline"))
    ]
    return max(0.0, min(left)) if left else None


def finished_calls(runtime: TeamRuntime, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, int]:
    """Wait until a call in flight is done (every one in lockstep or while draining); the finished dispatches."""
    key = run_key(config)
    pool = runtime.calls
    held = pool.running(key, state.get("team", {}).get("in_flight", {}))
    if held:
        every = runtime.scheduling() == "lockstep" or key in pool.draining
        pool.wait(key, held, every=every, timeout=seconds_to_next_deadline(runtime, state))
    return pool.finished(key, held)


def sends(runtime: TeamRuntime, state: Mapping[str, Any], finished: Mapping[str, int]) -> list[Send]:
    """One task per finished call, to its agent's node (in the agents' order of creation)."""
    agents = state.get("agents", {})
    order = sorted(finished, key=lambda agent: agents.get(agent, {}).get("index", 0))
    return [Send(node_of(runtime, state, agent), StepTask(agent=agent, seq=finished[agent])) for agent in order]
