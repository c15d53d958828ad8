"""The scheduler half of the router node: steps run in a pool, one superstep per completion.

A router superstep (1) waits until a step in flight is done (unless a person's
answers or the user's new message are waiting to be applied), (2) takes every
finished step, (3) runs the router pass on the state with those steps in it, and
(4) starts the steps that pass issued. The checkpoint written at the end of the
superstep holds the finished steps applied and the new ones recorded
(``team["in_flight"]``), so a crash loses only the steps in flight: a new process
issues them again from the same state.

The first model call of each step a pass issues is thought ahead: started at the end
of the pass, on the state that checkpoint will hold, instead of one superstep later.
The step uses it only if it reads that very state (``teamgraph/ahead.py``); its
tools run only once the checkpoint recording it is written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from functools import partial
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import default_retry_on

from teamgraph.audit.traces import open_run
from teamgraph.graph.runs import run_key
from teamgraph.history import HistoryAppend
from teamgraph.ledger.mail import new_user_messages
from teamgraph.models.scripted import AGENT_KEY
from teamgraph.nodes.agent_step import StepFor, begin_step, step_reads, take_step
from teamgraph.protocols.requests import is_pending
from teamgraph.records import LEADER
from teamgraph.runtime import TeamRuntime
from teamgraph.state import append_histories, merge_records

LEADER_ATTEMPTS = 3
"""Attempts of a leader's step whose provider fails transiently (a member's failure fails it instead)."""


def with_retries(step: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """``step``, retried on the errors LangGraph's ``RetryPolicy`` retries by default.

    NOTE: steps run in the pool, outside any Pregel task, so a node's RetryPolicy
    no longer applies to them.
    """

    def attempt() -> dict[str, Any]:
        for _ in range(LEADER_ATTEMPTS - 1):
            try:
                return step()
            except Exception as exc:
                if not default_retry_on(exc):
                    raise
        return step()

    return attempt


def start(
    runtime: TeamRuntime,
    step_for: StepFor,
    state: Mapping[str, Any],
    agents: Mapping[str, int],
    config: RunnableConfig,
) -> None:
    """Start the dispatches ``agents`` (agent -> dispatch number) on ``state``, unless already running."""
    key = run_key(config)
    pool = runtime.steps
    held = pool.running(key, agents)
    for agent, seq in agents.items():
        if agent in held:
            continue  # NOTE: running already; its call thought ahead, if any, was claimed
        ahead = pool.ahead_of(key, agent, seq)
        step = partial(take_step, runtime, step_for, state, agent, config, ahead=ahead)
        pool.ensure(key, agent, seq, with_retries(step) if agent == LEADER else step)


def after_pass(state: Mapping[str, Any], updates: Mapping[str, Any]) -> dict[str, Any]:
    """What a step reads of the state the checkpoint after this pass holds: ``updates``
    folded into ``state`` by the channels' own reducers (``teamgraph/state.py``).

    NOTE: only what a step reads (histories, registry, requests, team book); a step that
    claims a call thought ahead on it checks the prompt is the same anyway.
    """
    after = dict(state)
    if "histories" in updates:
        after["histories"] = append_histories(state.get("histories"), [updates["histories"]])
    for key in ("agents", "requests"):
        if key in updates:
            after[key] = merge_records(state.get(key), [updates[key]])
    after["team"] = updates.get("team", state.get("team", {}))
    return after


def think_ahead(
    runtime: TeamRuntime,
    step_for: StepFor,
    committed: Mapping[str, Any],
    updates: Mapping[str, Any],
    config: RunnableConfig,
) -> None:
    """Start the first model call of each step this pass issues, before its checkpoint is written.

    NOTE: never in lockstep (a superstep's steps start together), in virtual time (a pool
    that does not think ahead), while draining (no new step starts) or before the human
    gate (the steps wait for the person's answer).
    """
    key = run_key(config)
    team = updates.get("team", {})
    pool = runtime.steps
    if not pool.thinks_ahead or runtime.scheduling() == "lockstep" or key in pool.draining or team.get("human"):
        return
    before = committed.get("team", {}).get("in_flight", {})
    issued = [(agent, seq) for agent, seq in team.get("in_flight", {}).items() if before.get(agent) != seq]
    if not issued:
        return
    state = after_pass(committed, updates)
    for agent, seq in issued:
        reads = step_reads(state, agent)
        if pool.holds_ahead(key, agent, seq, reads):
            continue  # NOTE: a pass retried after a failure: the call it made serves
        try:
            start = begin_step(runtime, step_for, state, agent, config)
        except Exception:  # noqa: BLE001 - e.g. a role that is gone: the step meets the error and reports it
            continue
        if start.guard.stop:
            continue  # NOTE: the step makes no call (the loop guard stops its turn)
        # NOTE: its traced run opens now, under this pass's run: the call and the step's tools nest in it.
        run = open_run(inputs={AGENT_KEY: agent}, config=start.config)
        pool.think_ahead(key, agent, seq, reads, start.first_call(run))


def seconds_to_next_deadline(runtime: TeamRuntime, state: Mapping[str, Any]) -> float | None:
    """How long the scheduler may wait before a pending request's deadline must fire.

    NOTE: it reads the pending ids the router keeps (``team["open"]``), never every
    request of the thread: this runs once per finished step.
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


def has_input(state: Mapping[str, Any]) -> bool:
    """Whether a person's answers or a new user message wait to be applied (no reason to wait)."""
    if state.get("outbox"):
        return True
    return bool(new_user_messages(state.get("messages", []), state.get("team", {}).get("user_seen", 0)))


def start_recorded(runtime: TeamRuntime, step_for: StepFor, state: Mapping[str, Any], config: RunnableConfig) -> None:
    """Start the dispatches ``state`` records (``team["in_flight"]``) that the pool does not run yet.

    NOTE: a dispatch the pool does not hold (a new process after a crash) is issued
    again on the state that recorded it, which is this superstep's input. A draining
    thread (the CLI's Ctrl-C) starts none of a superstep's steps, never a part of
    them: a lockstep batch stays whole, so a resume replays the same interleaving.
    """
    in_flight = state.get("team", {}).get("in_flight", {})
    if in_flight and run_key(config) not in runtime.steps.draining:
        start(runtime, step_for, state, in_flight, config)


def wait_for_steps(runtime: TeamRuntime, state: Mapping[str, Any], config: RunnableConfig) -> None:
    """Wait until a step in flight is done (every one in lockstep or while draining).

    No wait when a person's answers or the user's new message are waiting to be applied,
    and none past the next deadline of a pending request.
    """
    key = run_key(config)
    pool = runtime.steps
    held = pool.running(key, state.get("team", {}).get("in_flight", {}))
    if held and not has_input(state):
        every = runtime.scheduling() == "lockstep" or key in pool.draining
        pool.wait(key, held, every=every, timeout=seconds_to_next_deadline(runtime, state))


def finished_steps(runtime: TeamRuntime, state: Mapping[str, Any], config: RunnableConfig) -> dict[str, dict[str, Any]]:
    """The results of the finished steps of the dispatches ``state`` records, by agent.

    NOTE: they stay in the pool until ``release``: a pass, or its log, that fails leaves
    them for the retried pass (taken and dropped, they would be issued again).
    """
    in_flight = state.get("team", {}).get("in_flight", {})
    return runtime.steps.done(run_key(config), in_flight) if in_flight else {}


def release(
    runtime: TeamRuntime, state: Mapping[str, Any], finished: Mapping[str, Any], config: RunnableConfig
) -> None:
    """The pool forgets the finished steps this pass took (its updates record them)."""
    in_flight = state.get("team", {}).get("in_flight", {})
    runtime.steps.release(run_key(config), {agent: in_flight[agent] for agent in finished})


def with_finished(state: Mapping[str, Any], finished: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The state with the finished steps in it: their messages in histories, their effects to apply."""
    if not finished:
        return dict(state)
    results = [finished[agent] for agent in sorted(finished)]
    histories = append_histories(state.get("histories"), [result.get("histories", {}) for result in results])
    outbox = [*state.get("outbox", []), *(effect for result in results for effect in result.get("outbox", []))]
    team = dict(state.get("team", {}))
    team["in_flight"] = {a: seq for a, seq in team.get("in_flight", {}).items() if a not in finished}
    return {**state, "histories": histories, "outbox": outbox, "team": team}


def finished_messages(updates: dict[str, Any], finished: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """``updates`` with the finished steps' messages first in each agent's appended history."""
    if not finished:
        return updates
    histories: dict[str, list[Any]] = {}
    for agent in sorted(finished):
        histories[agent] = list(finished[agent].get("histories", {}).get(agent, []))
    for agent, appended in updates.get("histories", {}).items():
        histories[agent] = [*histories.get(agent, []), *appended]
    updates["histories"] = HistoryAppend({agent: messages for agent, messages in histories.items() if messages})
    return updates
