"""An agent's node: a compiled role subgraph in which the agent's step is taken.

The router sends a member whose model call finished to its role's node
(``Send(<role node>, {"agent": ..., "seq": ...})``). The node reads the team state,
then runs the role subgraph::

    model ──> tools ──> effects ──> END

- ``model`` takes the model's answer: the call the router started when it issued the
  step (``teamgraph/calls.py``), or, when no call is held (a new process after a crash,
  a retry), makes it here;
- ``tools`` runs the answer's tool calls through the one seam (``nodes/tool_calls.py``);
- ``effects`` sums the call up for the router (and whether it only did work, so the
  agent's slice goes on: ``Policy.slice_steps``).

The node then returns the agent's new messages (its history) and the effects (the
router's ``outbox``). So everything of a step but the call in flight happens in this
task: Studio shows the node while the step is taken, and ``stream(subgraphs=True)``
yields the step's updates under it.

The subgraph does not checkpoint its own supersteps (``compat.unsaved``): the parent's
checkpoint after the node holds the step, and a crash in the node re-runs it whole. The
step journal (``nodes/journal.py``) makes that re-run take the model answers and tool
results the first run recorded, so it makes no call again and runs no recorded tool again.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import Annotated, Any, Protocol, cast

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config, get_stream_writer
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import RetryPolicy
from typing_extensions import TypedDict

from teamgraph.audit.writer import note_read
from teamgraph.calls import Answer
from teamgraph.compat import NS_SEP, checkpoint_read, read_channels, unsaved
from teamgraph.governance.operations import perform_approved
from teamgraph.history import HistoryAppend
from teamgraph.messaging import effects
from teamgraph.messaging.envelopes import LEADER
from teamgraph.models import ScriptExhaustedError
from teamgraph.models.scripted import AGENT_KEY, ROLE_KEY
from teamgraph.nodes.agent_step import (
    PLAN_FIRST,
    StepFor,
    StepStart,
    begin_step,
    calls_tools,
    failed_step,
    plan_approved,
    step_config,
)
from teamgraph.nodes.journal import StepJournal, carried_journal, journaled_act, journaled_answer
from teamgraph.nodes.model_view import answer_index
from teamgraph.nodes.tool_calls import run_tool_calls
from teamgraph.records import Effect
from teamgraph.runs import run_key
from teamgraph.runtime import TeamRuntime
from teamgraph.state import TEAM_CHANNELS

MODEL_RETRY = RetryPolicy(max_attempts=3)
"""A model call that fails transiently (LangGraph's ``default_retry_on``) is made again, for every agent."""
TOOLS_RETRY = RetryPolicy(max_attempts=2)
"""A tools node that fails transiently runs again (a tool's own error is the model's to read)."""


class StepTask(TypedDict):
    """What the router sends an agent's node: whose step, and which dispatch."""

    agent: str
    seq: int


class StepUpdate(TypedDict, total=False):
    """What an agent's node writes: the agent's new messages, and the effects for the router."""

    histories: HistoryAppend
    outbox: list[Effect]


class StepState(TypedDict, total=False):
    """The role subgraph's state: one model call of one agent, and its tools.

    NOTE: one call a task, whatever ``Policy.slice_steps``: a second call made in the task
    would hold the superstep, so every member would wait for it. A slice's calls are
    dispatches of their own; the router holds the agent's messages until it ends.

    Attributes:
        new: The step's messages (what the agent's history gets).
        turn: The model call's messages: notices and markers, the answer, its tool results.
        effects: What the tools asked the router for, and the call's ``step`` summary.
        acted: Whether the call's tools asked the router for anything.
    """

    new: Annotated[list[BaseMessage], operator.add]
    turn: list[BaseMessage]
    effects: Annotated[list[Effect], operator.add]
    acted: bool


@dataclass
class StepContext:
    """What the role subgraph's nodes read besides their state (LangGraph's runtime context).

    Attributes:
        start: What the step read of the team state (prompt, view, role step).
        node: The agent's node, which its model calls stream under.
        answer: The call made in flight, until the model node takes it (once: a retry calls again).
        journal: The step's journal (None: the run keeps none).
    """

    start: StepStart
    node: str
    answer: Future[Answer] | None = field(default=None)
    journal: StepJournal | None = None

    def take_answer(self) -> Future[Answer] | None:
        answer, self.answer = self.answer, None
        return answer


def streamed_as(config: RunnableConfig, node: str, *, nested: bool) -> RunnableConfig:
    """``config`` for a model call that streams as the agent's node, wherever it is made.

    NOTE: a call made in flight runs under the router's task, one made in the task under
    the subgraph's ``model`` node (``nested``). Both stream as ``langgraph_node == <the
    agent's node>``, and a nested one in the namespace of that node's task, so
    ``stream_mode="messages"`` shows every token of an agent alike, with or without
    ``subgraphs=True``.
    """
    metadata = dict(config.get("metadata") or {})
    metadata["langgraph_node"] = node
    namespace = metadata.get("langgraph_checkpoint_ns")
    if nested and isinstance(namespace, str):
        metadata["langgraph_checkpoint_ns"] = namespace.rpartition(NS_SEP)[0]
    return {**config, "metadata": metadata}


def first_call(start: StepStart, node: str) -> Answer:
    """The step's first model call, as the router makes it in flight (None: the guard stops the turn).

    Its answer is recorded in the step's journal as the call finishes, so a pass or a step
    re-run after a crash takes it instead of calling again.
    """
    if start.guard.stop:
        return None
    seq = start.view.team.get("in_flight", {}).get(start.name)
    journal = StepJournal.open(start.role_step.runtime, start.config, start.name, seq)
    config = streamed_as(start.config, node, nested=False)
    return journaled_answer(journal, 0, lambda: start.role_step.think(start.prompt(), start.view, config))


def model(state: StepState, runtime: Runtime[StepContext]) -> StepState:
    """Take the model's answer: the call made in flight, else make it now."""
    del state  # NOTE: the call reads the team state its step started from (``StepStart``)
    config = get_config()
    context = runtime.context
    start = context.start
    answer = context.take_answer()
    if answer is not None:
        new = list(answer.result() or ())
    else:
        call_config = streamed_as(step_config(config, start.name, start.role_step.role), context.node, nested=True)
        prompt = start.prompt()
        new = list(journaled_answer(context.journal, 0, lambda: start.role_step.think(prompt, start.view, call_config)))
    return {"turn": new, "acted": False}


def tools(state: StepState, runtime: Runtime[StepContext]) -> StepState:
    """Run the answer's tool calls, in order, through the tool seam."""
    config = get_config()
    turn = state["turn"]
    if not calls_tools(turn):
        return {}
    start = runtime.context.start
    role_step = start.role_step
    refused = {} if not role_step.gated or plan_approved(start.view) else dict.fromkeys(role_step.gated, PLAN_FIRST)
    answers, step_effects, _ = run_tool_calls(
        cast(AIMessage, turn[answer_index(turn)]),
        dict(role_step.tools),
        start.view,
        step_config(config, start.name, role_step.role),
        runtime=role_step.runtime,
        refused=refused,
        retries=role_step.runtime.policy.tool_retries,
        journal=runtime.context.journal,
        turn=0,
    )
    return {"turn": [*turn, *answers], "effects": step_effects, "acted": bool(step_effects)}


def summarize(state: StepState) -> StepState:
    """The ``step`` effect of the call for the router: what it did, and whether it only did work."""
    turn = state["turn"]
    at = answer_index(turn)  # NOTE: compaction markers and notices come first
    ai = cast(AIMessage, turn[at])
    answered = {m.tool_call_id for m in turn[at + 1 :] if isinstance(m, ToolMessage)}
    calls = [c["id"] or "" for c in ai.tool_calls] + [c["id"] or "" for c in ai.invalid_tool_calls]
    deferred = [c for c in calls if c not in answered]
    summary = effects.step(
        message_index=at,  # NOTE: made relative to the history's end by the node
        ended_turn=not calls,
        tool_calls=len(calls),
        deferred=deferred,
        tokens=sum(m.usage_metadata["total_tokens"] for m in turn if isinstance(m, AIMessage) and m.usage_metadata),
        works=bool(calls) and not deferred and not state.get("acted"),
    )
    return {"new": turn, "effects": [summary]}


RoleGraph = CompiledStateGraph[StepState, StepContext, StepState, StepState]


def build_role_graph(name: str) -> RoleGraph:
    """The role subgraph of one agent node (``model → tools → effects``), compiled.

    Args:
        name: The node's name (the role id, ``leader`` or ``member``): the subgraph's name in traces and drawings.
    """
    builder = StateGraph(StepState, context_schema=StepContext)
    builder.add_node("model", model, retry_policy=MODEL_RETRY)
    builder.add_node("tools", tools, retry_policy=TOOLS_RETRY)
    builder.add_node("effects", summarize)
    builder.add_edge(START, "model")
    builder.add_edge("model", "tools")
    builder.add_edge("tools", "effects")
    builder.add_edge("effects", END)
    return builder.compile(name=name)


class AgentNode(Protocol):
    def __call__(self, state: StepTask, config: RunnableConfig) -> StepUpdate: ...


def make_agent_node(runtime: TeamRuntime, step_for: StepFor, *, node: str) -> AgentNode:
    """The node in which agents take their steps: the leader's, a role's, or the generic member node.

    Args:
        runtime: The team runtime (its ``calls`` hold the calls in flight).
        step_for: The ``RoleStep`` of a role.
        node: The node's name.
    """
    graph = build_role_graph(node)

    def agent(state: StepTask, config: RunnableConfig) -> StepUpdate:
        return take_step(runtime, step_for, graph, node, state, config)

    return agent


def take_step(
    runtime: TeamRuntime,
    step_for: StepFor,
    graph: RoleGraph,
    node: str,
    task: StepTask,
    config: RunnableConfig,
) -> StepUpdate:
    """Take ``task``'s step in the role subgraph ``graph``: the agent's new messages and effects.

    A member's step that cannot start or whose model keeps failing (after its retries)
    ends with a failed ``step`` effect: the leader is told and the team goes on. The
    leader's raises (the run stops, and resumes from the last checkpoint).
    """
    name = task["agent"]
    answer = runtime.calls.take(run_key(config), name, task["seq"])
    taken = signed(effects.taken(seq=task["seq"], read=checkpoint_read(config)), name)
    state = read_channels(config, TEAM_CHANNELS)
    note_read(runtime, config, state)  # NOTE: the next pass logs what the node read, so a fork of it finds its cursor
    # NOTE: the journal the call in flight read and wrote, else read now (a new process, a retry).
    journal = carried_journal(answer, task["seq"]) or StepJournal.open(runtime, config, name, task["seq"])
    approved = state.get("team", {}).get("perform", {}).get(name)
    if approved is not None:
        # NOTE: an approved sensitive operation runs here, in its requester's task, once the
        # decision is committed (never in the router's pass); its result answers the call.
        request = state["requests"][approved]
        act = partial(perform_approved, runtime, request, agents=state.get("agents"))
        result = journaled_act(journal, f"perform:{approved}", act)
        return {"outbox": [taken, signed(effects.performed(request_id=approved, result=result), name)]}
    try:
        start = begin_step(runtime, step_for, state, name, config)
    except Exception as exc:
        if name == LEADER:
            raise
        # NOTE: e.g. a role file whose model cannot be built: the member fails with the reason.
        return {"outbox": [taken, failed_step(name, exc)]}
    guarded = [taken, *(signed(e, name) for e in start.guard.effects)]
    if start.guard.stop:
        return {"outbox": guarded}
    context = StepContext(start=start, node=node, answer=answer, journal=journal)
    try:
        # NOTE: the subgraph's run is named after the agent (tags and metadata too): one
        # traced run per step, with its model call and tools inside.
        out = graph.invoke({}, unsaved(start.config), context=context)
    except (GraphBubbleUp, ScriptExhaustedError):
        raise
    except Exception as exc:
        if name == LEADER:
            raise
        return {"outbox": [*guarded, failed_step(name, exc)]}
    return step_updates(start, out, guarded)


def signed(effect: Mapping[str, Any], agent: str) -> Effect:
    """``effect`` as the router reads it: with the agent that asked for it."""
    return cast(Effect, {**effect, "agent": agent})


def step_updates(start: StepStart, out: Mapping[str, Any], guarded: list[Effect]) -> StepUpdate:
    """The node's updates: the agent's new messages, and its effects (``step`` indices from the history's end)."""
    name, new = start.name, list(out.get("new", []))
    outbox: list[Effect] = [*guarded]
    writer = get_stream_writer()
    for made in out.get("effects", []):
        effect = signed(made, name)
        if effect["kind"] == "step" and effect["message_index"] is not None:
            ai = cast(AIMessage, new[effect["message_index"]])
            writer(step_event(start, ai, effect))
            effect["message_index"] -= len(new)
        outbox.append(effect)
    return {"histories": HistoryAppend({name: new}), "outbox": outbox} if new else {"outbox": outbox}


def step_event(start: StepStart, ai: AIMessage, summary: Mapping[str, Any]) -> dict[str, Any]:
    """The ``custom`` stream's event for one model call of an agent."""
    return {
        AGENT_KEY: start.name,
        ROLE_KEY: start.role_step.role.id,
        "event": "step",
        "text": ai.text.strip(),
        "tool_calls": [c["name"] for c in ai.tool_calls],
        "ended_turn": summary["ended_turn"],
    }
