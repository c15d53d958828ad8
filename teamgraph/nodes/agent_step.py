"""What an agent's step reads and calls: its role's model, tools and budget, its prompt and view.

Each role has a ``RoleStep``: its model with its tools bound, its context budget and
its tools. ``begin_step`` reads what a step of an agent starts from (its history, its
system prompt, the team as its tools see it); the step itself is taken in the agent's
node (``teamgraph/nodes/role_graph.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool

from teamgraph.audit.exceptions import StepGuard, guard_step
from teamgraph.audit.traces import agent_tags
from teamgraph.messaging import effects
from teamgraph.messaging.envelopes import LEADER
from teamgraph.models.scripted import (  # metadata every model call carries
    AGENT_KEY,
    ROLE_KEY,
)
from teamgraph.nodes.compaction import call_within_context
from teamgraph.nodes.model_view import ContextBudget, context_budget
from teamgraph.protocols.requests import APPROVED, MEMBER_PLAN, is_pending
from teamgraph.records import StepEffect
from teamgraph.roles import Role
from teamgraph.roles.budget import with_budget
from teamgraph.roles.prompts import leader_prompt, member_prompt
from teamgraph.runtime import TeamRuntime
from teamgraph.tools import tools_for_role, work_tool_names
from teamgraph.tools.context import TeamView
from teamgraph.tools.errors import PLAN_REQUIRED, Refusal


@dataclass(frozen=True)
class RoleStep:
    """How an agent of one role takes a model call and runs the tool calls it made.

    Attributes:
        runtime: The team runtime.
        role: The role.
        tools: The role's tools by name.
        gated: Tools refused until the member's plan is approved (``Role.require_plan``).
        model: The role's model (writes compaction summaries).
        bound: The model with the tools bound.
        budget: The agent's context budget.
    """

    runtime: TeamRuntime
    role: Role
    tools: Mapping[str, BaseTool]
    gated: frozenset[str]
    model: BaseChatModel
    bound: Runnable
    budget: ContextBudget

    def think(self, messages: Sequence[BaseMessage], view: TeamView, config: RunnableConfig) -> list[BaseMessage]:
        """The model call on ``messages`` (system prompt first): the leader's budget notices, then the answer."""
        notices: list[BaseMessage] = []
        if self.role.is_leader:
            messages, notices = with_budget(messages, team=view.team, agents=view.agents)
        answer = call_within_context(self.bound, messages, model=self.model, budget=self.budget, config=config)
        return [*notices, *answer]


def build_role_step(runtime: TeamRuntime, role: Role) -> RoleStep:
    """The ``RoleStep`` of ``role``: its model, tools and budget, built once per team.

    Args:
        runtime: The team runtime (model, tools).
        role: The role.

    Returns:
        The role's step.
    """
    tools = {t.name: t for t in tools_for_role(runtime, role)}
    model = runtime.model_for(role)
    return RoleStep(
        runtime=runtime,
        role=role,
        tools=tools,
        gated=frozenset(work_tool_names(runtime, role) if role.require_plan else ()),
        model=model,
        bound=model.bind_tools(list(tools.values())) if tools else model,
        budget=context_budget(
            model=model, policy=runtime.policy, counter=runtime.token_counter, tools=list(tools.values())
        ),
    )


PLAN_FIRST = Refusal(
    text="your role requires an approved plan before this work. Call submit_plan(plan) "
    "and wait for the approval, then try again.",
    code=PLAN_REQUIRED,
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
        # NOTE: the team book's index of open requests: scanning them all made leader steps grow with the run.
        requests = team.get("requests", {})
        pending = [r for rid in shared.get("open", requests) if is_pending(r := requests.get(rid))]
        return leader_prompt(role, roles=runtime.roles, agents=agents, pending=pending, team=shared)
    return member_prompt(role, name=name, agents=agents, team=shared)


def step_config(config: RunnableConfig, name: str, role: Role) -> RunnableConfig:
    # NOTE: the run name and tags let traces (LangSmith) tell "UI Operator_1" from "UI Operator_2";
    # the metadata is how every model call says whose it is (and how ScriptedChatModel knows).
    return {
        **config,
        "run_name": name,
        "tags": [*config.get("tags", []), *agent_tags(name, role.id)],
        "metadata": {**config.get("metadata", {}), AGENT_KEY: name, ROLE_KEY: role.id},
    }


StepFor = Callable[[Role], RoleStep]


@dataclass(frozen=True)
class StepStart:
    """What an agent's step reads before its first model call.

    Attributes:
        name: The agent.
        role_step: Its role's step.
        history: Its history.
        guard: The loop and escalation rules' verdict on that history.
        system: The system prompt of this step.
        view: The team as its tools see it.
        config: The config of its model calls (run name, tags, metadata).
    """

    name: str
    role_step: RoleStep
    history: Sequence[AnyMessage]
    guard: StepGuard
    system: SystemMessage
    view: TeamView
    config: RunnableConfig

    def prompt(self, new: Sequence[BaseMessage] = ()) -> list[BaseMessage]:
        return [self.system, *self.history, *new]


def begin_step(
    runtime: TeamRuntime, step_for: StepFor, team: Mapping[str, Any], name: str, config: RunnableConfig
) -> StepStart:
    """What agent ``name``'s step reads on the team state ``team`` (``step_for`` may raise)."""
    role_id = team["agents"][name]["role"]
    role = runtime.role(role_id)
    if role is None:
        raise KeyError(f"role {role_id!r} is not defined in this team (built-in, roles_dir or the home's roles)")
    role_step = step_for(role)
    history = team.get("histories", {}).get(name, [])
    guard = guard_step(runtime.policy, name, history)  # NOTE: loop and escalation rules (audit/exceptions.py)
    system = SystemMessage("\n\n".join(filter(None, (system_prompt(runtime, role, name, team), guard.note))))
    return StepStart(
        name=name,
        role_step=role_step,
        history=history,
        guard=guard,
        system=system,
        view=team_view(team, name),
        config=step_config(config, name, role),
    )


def calls_tools(new: Sequence[BaseMessage]) -> bool:
    """Whether the answer (its last message) calls tools, well-formed or not."""
    ai = cast(AIMessage, new[-1])
    return bool(ai.tool_calls or ai.invalid_tool_calls)


def failed_step(name: str, exc: Exception) -> StepEffect:
    """The ``step`` effect of a member whose step failed, with the reason."""
    failed = effects.step(message_index=None, ended_turn=True, tool_calls=0, deferred=[])
    return {**failed, "agent": name, "error": f"{type(exc).__name__}: {exc}"}
