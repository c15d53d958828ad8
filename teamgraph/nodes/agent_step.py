"""An agent's step: one model call plus the tool calls it made (or a slice of them).

Each role is a small compiled subgraph (``model -> tools``). The team graph
runs it through a step node that receives only the agent's display name (a tiny
``Send`` payload), reads that agent's history from the team state, and returns
the new messages and the effects for the router.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, cast

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict

from teamgraph.audit.exceptions import guard_step
from teamgraph.audit.traces import agent_tags
from teamgraph.compat import CONFIG_KEY_CHECKPOINTER, CONFIG_KEY_DURABILITY
from teamgraph.messaging import effects
from teamgraph.messaging.envelopes import LEADER
from teamgraph.models import ScriptExhaustedError
from teamgraph.models.scripted import (  # metadata every model call carries
    AGENT_KEY,
    ROLE_KEY,
)
from teamgraph.nodes.compaction import call_within_context
from teamgraph.nodes.model_view import answer_index, context_budget
from teamgraph.nodes.tool_calls import run_tool_calls
from teamgraph.protocols.requests import APPROVED, MEMBER_PLAN, is_pending
from teamgraph.roles import Role
from teamgraph.roles.budget import with_budget
from teamgraph.roles.prompts import leader_prompt, member_prompt
from teamgraph.runtime import TeamRuntime
from teamgraph.tools import tools_for_role, work_tool_names
from teamgraph.tools.context import TeamView


class StepOutput(TypedDict):
    """What a step returns: the agent's new messages and the effects for the router."""

    new: Annotated[list[AnyMessage], operator.add]
    effects: Annotated[list[dict[str, Any]], operator.add]


class StepState(StepOutput):
    """The role subgraph's state: one step of one agent."""

    agent: str
    messages: list[AnyMessage]
    view: TeamView


def build_role_subgraph(runtime: TeamRuntime, role: Role) -> CompiledStateGraph:
    """Compile the ``model -> tools`` subgraph an agent of ``role`` steps through.

    Args:
        runtime: The team runtime (model, tools).
        role: The role.

    Returns:
        The compiled subgraph, named after the role.
    """
    tools = {t.name: t for t in tools_for_role(runtime, role)}
    gated = work_tool_names(runtime, role) if role.require_plan else set()
    model = runtime.model_for(role)
    bound = model.bind_tools(list(tools.values())) if tools else model
    budget = context_budget(model=model, policy=runtime.policy, counter=runtime.token_counter, tools=[*tools.values()])

    def call_model(state: StepState, config: RunnableConfig) -> dict[str, Any]:
        messages: Sequence[BaseMessage] = state["messages"]
        notices: list[BaseMessage] = []
        if role.is_leader:
            messages, notices = with_budget(messages, team=state["view"].team, agents=state["view"].agents)
        answer = call_within_context(bound, messages, model=model, budget=budget, config=config)
        return {"new": [*notices, *answer]}

    def call_tools(state: StepState, config: RunnableConfig) -> dict[str, Any]:
        view = state["view"]
        refused = {} if not gated or plan_approved(view) else dict.fromkeys(gated, PLAN_FIRST)
        ai = cast(AIMessage, state["new"][-1])
        messages, step_effects, _ = run_tool_calls(
            ai, tools, view, config, runtime=runtime, refused=refused, retries=runtime.policy.tool_retries
        )
        return {"new": messages, "effects": step_effects}

    def has_tool_calls(state: StepState) -> str:
        ai = cast(AIMessage, state["new"][-1])
        return "tools" if ai.tool_calls or ai.invalid_tool_calls else END

    # NOTE: the output schema keeps the prompt and history out of the subgraph's
    # output, which LangGraph's "messages" stream mode would otherwise replay.
    builder = StateGraph(StepState, output_schema=StepOutput)
    builder.add_node("model", call_model)
    builder.add_node("tools", call_tools)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", has_tool_calls, ["tools", END])
    builder.add_edge("tools", END)
    return builder.compile(name=role.id)


PLAN_FIRST = (
    "your role requires an approved plan before this work. Call submit_plan(plan) "
    "and wait for the approval, then try again."
)


def plan_approved(view: TeamView) -> bool:
    """Whether the calling member has a plan (``submit_plan``) that was approved."""
    return any(
        r["kind"] == MEMBER_PLAN and r["from"] == view.caller and r["status"] == APPROVED
        for r in view.requests.values()
    )


def team_view(team: Mapping[str, Any], name: str) -> TeamView:
    """The read-only view of the team that tools see (in their ToolContext)."""
    return TeamView(
        caller=name, agents=team.get("agents", {}), requests=team.get("requests", {}), team=team.get("team", {})
    )


def system_prompt(runtime: TeamRuntime, role: Role, name: str, team: Mapping[str, Any]) -> str:
    """The agent's system prompt for this step (rules, role, live roster)."""
    agents, shared = team.get("agents", {}), team.get("team", {})
    if name == LEADER:
        pending = [r for r in team.get("requests", {}).values() if is_pending(r)]
        return leader_prompt(role, roles=runtime.roles, agents=agents, pending=pending, team=shared)
    return member_prompt(role, name=name, agents=agents, team=shared)


def _step_config(config: RunnableConfig, name: str, role: Role) -> RunnableConfig:
    # NOTE: the role subgraph runs without a checkpointer: the team graph checkpoints
    # once per superstep, and a subgraph checkpoint would store the whole history
    # again at every step (what makes other frameworks' storage quadratic).
    # Durability must then be "exit": "sync" waits on a checkpoint that never comes.
    # NOTE: the run name and tags let traces (LangSmith) tell "UI Operator_1" from "UI Operator_2".
    return {
        **config,
        "run_name": name,
        "tags": [*config.get("tags", []), *agent_tags(name, role.id)],
        "metadata": {**config.get("metadata", {}), AGENT_KEY: name, ROLE_KEY: role.id},
        "configurable": {
            **config.get("configurable", {}),
            CONFIG_KEY_CHECKPOINTER: None,
            CONFIG_KEY_DURABILITY: "exit",
        },
    }


def take_step(
    runtime: TeamRuntime,
    subgraph_for: Callable[[Role], CompiledStateGraph],
    team: Mapping[str, Any],
    name: str,
    config: RunnableConfig,
) -> dict[str, Any]:
    """Take a step (or a slice of steps) of agent ``name`` on the team state ``team``.

    It runs in the scheduler's pool (``teamgraph/graph/scheduler.py``), on the state
    that recorded its dispatch. A member may make up to ``Policy.slice_steps`` model
    calls, as long as its steps only do work: a step that ends the turn, leaves a
    call open or asks the router for anything (a message, a question, a spawn...)
    ends the slice.

    Args:
        runtime: The team runtime.
        subgraph_for: The role subgraph an agent of a role steps through.
        team: The team state the step reads.
        name: The agent.
        config: The issuing router task's config (callbacks and stream writer).

    Returns:
        The agent's new messages and, for the router, the tools' effects plus one
        ``step`` summary per model call.
    """
    role = runtime.roles[team["agents"][name]["role"]]
    try:
        subgraph = subgraph_for(role)
    except Exception as exc:
        if name == LEADER:
            raise
        # NOTE: e.g. a role file whose model cannot be built: the member fails with the reason.
        failed = effects.step(message_index=None, ended_turn=True, tool_calls=0, deferred=[])
        return {"outbox": [{**failed, "agent": name, "error": f"{type(exc).__name__}: {exc}"}]}
    history = team.get("histories", {}).get(name, [])
    guard = guard_step(runtime.policy, name, history)  # NOTE: loop and escalation rules (audit/exceptions.py)
    system = SystemMessage("\n\n".join(filter(None, (system_prompt(runtime, role, name, team), guard.note))))
    view = team_view(team, name)
    slice_steps = 1 if name == LEADER else runtime.policy.slice_steps
    new: list[AnyMessage] = []
    outbox: list[dict[str, Any]] = [{**e, "agent": name} for e in guard.effects]
    for _ in range(0 if guard.stop else slice_steps):
        try:
            result = subgraph.invoke(
                {"agent": name, "messages": [system, *history, *new], "view": view, "new": [], "effects": []},
                _step_config(config, name, role),
            )
        except (GraphBubbleUp, ScriptExhaustedError):
            raise
        except Exception as exc:
            if name == LEADER:
                raise
            # NOTE: a member whose provider keeps failing is marked failed and the
            # leader is told; the rest of the team goes on.
            failed = effects.step(message_index=None, ended_turn=True, tool_calls=0, deferred=[])
            outbox.append({**failed, "agent": name, "error": f"{type(exc).__name__}: {exc}"})
            break
        step_messages: list[AnyMessage] = result["new"]
        at = answer_index(step_messages)  # NOTE: compaction markers and notices come first
        ai = cast(AIMessage, step_messages[at])
        answered = {m.tool_call_id for m in step_messages[at + 1 :] if isinstance(m, ToolMessage)}
        calls = [c["id"] or "" for c in ai.tool_calls] + [c["id"] or "" for c in ai.invalid_tool_calls]
        summary = effects.step(
            message_index=len(new) + at,  # made relative to the history's end below
            ended_turn=not calls,
            tool_calls=len(calls),
            deferred=[c for c in calls if c not in answered],
            tokens=sum(
                m.usage_metadata["total_tokens"] for m in step_messages if isinstance(m, AIMessage) and m.usage_metadata
            ),
        )
        new.extend(step_messages)
        outbox.extend({**e, "agent": name} for e in (*result["effects"], summary))
        get_stream_writer()(
            {
                AGENT_KEY: name,
                ROLE_KEY: role.id,
                "event": "step",
                "text": ai.text.strip(),
                "tool_calls": [c["name"] for c in ai.tool_calls],
                "ended_turn": summary["ended_turn"],
            }
        )
        if summary["ended_turn"] or summary["deferred"] or result["effects"]:
            break
    for effect in outbox:
        if effect["kind"] == effects.STEP and effect["message_index"] is not None:
            effect["message_index"] -= len(new)
    return {"histories": {name: new}, "outbox": outbox} if new else {"outbox": outbox}
