"""An agent's step: one model call plus the tool calls it made (or a slice of them).

Each role has a ``RoleStep``: its model with its tools bound, its context budget and
its tools. A step runs in the scheduler's pool on the team state that issued it,
reads that agent's history, and returns the new messages and the effects for the
router. Each model call runs inside one traced run named after the agent, whose
input is only the agent's name (traces do not carry every history).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypedDict, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.config import get_stream_writer
from langgraph.errors import GraphBubbleUp

from teamgraph.ahead import Ahead, Prepared
from teamgraph.audit.exceptions import StepGuard, guard_step
from teamgraph.audit.traces import OpenRun, agent_tags, run_and_end, traced_run
from teamgraph.history import HistoryAppend
from teamgraph.messaging import effects
from teamgraph.messaging.envelopes import LEADER
from teamgraph.models import ScriptExhaustedError
from teamgraph.models.scripted import (  # metadata every model call carries
    AGENT_KEY,
    ROLE_KEY,
)
from teamgraph.nodes.compaction import call_within_context
from teamgraph.nodes.model_view import ContextBudget, answer_index, context_budget
from teamgraph.nodes.tool_calls import run_tool_calls
from teamgraph.protocols.requests import APPROVED, MEMBER_PLAN, is_pending
from teamgraph.records import Effect
from teamgraph.roles import Role
from teamgraph.roles.budget import with_budget
from teamgraph.roles.prompts import leader_prompt, member_prompt
from teamgraph.runtime import TeamRuntime
from teamgraph.tools import tools_for_role, work_tool_names
from teamgraph.tools.context import TeamView
from teamgraph.tools.errors import PLAN_REQUIRED, Refusal


class StepOutput(TypedDict):
    """What one model call of a step gives: the agent's new messages and the tools' effects."""

    new: list[AnyMessage]
    effects: list[Effect]


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

    def __call__(
        self,
        messages: Sequence[BaseMessage],
        view: TeamView,
        config: RunnableConfig,
        *,
        answer: Future[list[BaseMessage]] | None = None,
    ) -> StepOutput:
        """One model call on ``messages`` (or its ``answer``, thought ahead), then its tool calls."""
        new = answer.result() if answer is not None else self.think(messages, view, config)
        ai = cast(AIMessage, new[-1])
        if not calls_tools(new):
            return StepOutput(new=cast(list[AnyMessage], new), effects=[])
        refused = {} if not self.gated or plan_approved(view) else dict.fromkeys(self.gated, PLAN_FIRST)
        answers, step_effects, _ = run_tool_calls(
            ai,
            dict(self.tools),
            view,
            config,
            runtime=self.runtime,
            refused=refused,
            retries=self.runtime.policy.tool_retries,
        )
        return StepOutput(new=cast(list[AnyMessage], [*new, *answers]), effects=step_effects)


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


def _step_config(config: RunnableConfig, name: str, role: Role) -> RunnableConfig:
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

    def first_call(self, run: OpenRun) -> Prepared:
        """The first model call, in ``run`` (opened by the issuing pass), for ``StepPool.think_ahead``.

        NOTE: the step that uses the call runs its tools in that run and ends it; an
        unused call's run ends with the reason.
        """
        think = partial(self.role_step.think, self.prompt(), self.view)
        return Prepared(start=(self, run), call=partial(run.run, think), end=lambda error: run.end(error=error))


@dataclass(frozen=True)
class Thought:
    """A first model call thought ahead that a step uses: its answer, and the traced run it opened.

    Attributes:
        run: The call's traced run, for the step's tools (None: it ended with the run that issued it).
        answer: The call's answer (None: the call had not started; the step makes it, in ``run``).
    """

    run: OpenRun | None
    answer: Future[list[BaseMessage]] | None


def step_reads(team: Mapping[str, Any], name: str) -> tuple[Any, ...]:
    """What ``begin_step`` reads of the team state: equal reads give the same start, and the same prompt.

    NOTE: compared at every thought-ahead call; the records are the same objects when
    nothing went wrong, so the comparison is by identity, item by item.
    """
    return (
        name,
        team.get("histories", {}).get(name, []),
        team.get("agents", {}),
        team.get("requests", {}),
        team.get("team", {}),
    )


def begin_step(
    runtime: TeamRuntime, step_for: StepFor, team: Mapping[str, Any], name: str, config: RunnableConfig
) -> StepStart:
    """What agent ``name``'s step reads on the team state ``team`` (``step_for`` may raise)."""
    role = runtime.roles[team["agents"][name]["role"]]
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
        config=_step_config(config, name, role),
    )


def start_step(
    runtime: TeamRuntime,
    step_for: StepFor,
    team: Mapping[str, Any],
    name: str,
    config: RunnableConfig,
    *,
    ahead: Ahead | None,
) -> tuple[StepStart, Thought | None]:
    """What the step reads, and its first call when thought ahead on what it reads.

    Raises:
        Exception: What ``begin_step`` raises (a role whose model cannot be built).
    """
    claimed = ahead.claim(step_reads(team, name)) if ahead is not None else None
    if claimed is None:
        return begin_step(runtime, step_for, team, name, config), None
    # NOTE: the start computed with the call; its config is this task's (later calls of a slice).
    (start, run), answer, owns = claimed
    thought = Thought(run=run if owns else None, answer=answer)
    return replace(start, config=_step_config(config, name, start.role_step.role)), thought


def call_and_act(start: StepStart, prompt: list[BaseMessage], *, thought: Thought | None) -> StepOutput:
    """One model call (or the call thought ahead) and its tool calls, in one traced run.

    NOTE: one traced run per model call whose input is only the agent's name: a trace
    (LangSmith) must not carry the agent's whole history at every step. A call thought
    ahead opened that run: its tools run in it, and it ends here.
    """
    answer = thought.answer if thought is not None else None
    call = partial(start.role_step, prompt, start.view, answer=answer)
    if thought is not None and thought.run is not None:
        return run_and_end(thought.run, call)
    return traced_run(call, inputs={AGENT_KEY: start.name}, config=start.config)


def calls_tools(new: Sequence[BaseMessage]) -> bool:
    """Whether the answer (its last message) calls tools, well-formed or not."""
    ai = cast(AIMessage, new[-1])
    return bool(ai.tool_calls or ai.invalid_tool_calls)


def failed_step(name: str, exc: Exception) -> dict[str, Any]:
    """The ``step`` effect of a member whose step failed, with the reason."""
    failed = effects.step(message_index=None, ended_turn=True, tool_calls=0, deferred=[])
    return {**failed, "agent": name, "error": f"{type(exc).__name__}: {exc}"}


def take_step(
    runtime: TeamRuntime,
    step_for: StepFor,
    team: Mapping[str, Any],
    name: str,
    config: RunnableConfig,
    *,
    ahead: Ahead | None = None,
) -> dict[str, Any]:
    """Take a step (or a slice of steps) of agent ``name`` on the team state ``team``.

    It runs in the scheduler's pool (``teamgraph/graph/scheduler.py``), on the state
    that recorded its dispatch. A member may make up to ``Policy.slice_steps`` model
    calls, as long as its steps only do work: a step that ends the turn, leaves a
    call open or asks the router for anything (a message, a question, a spawn...)
    ends the slice.

    Args:
        runtime: The team runtime.
        step_for: The ``RoleStep`` of a role.
        team: The team state the step reads.
        name: The agent.
        config: The issuing router task's config (callbacks and stream writer).
        ahead: Its first model call, thought ahead: used if made on what this step reads.

    Returns:
        The agent's new messages and, for the router, the tools' effects plus one
        ``step`` summary per model call.
    """
    try:
        start, thought = start_step(runtime, step_for, team, name, config, ahead=ahead)
    except Exception as exc:
        if name == LEADER:
            raise
        # NOTE: e.g. a role file whose model cannot be built: the member fails with the reason.
        return {"outbox": [failed_step(name, exc)]}
    role_step, guard = start.role_step, start.guard
    slice_steps = 1 if name == LEADER else runtime.policy.slice_steps
    new: list[AnyMessage] = []
    outbox: list[dict[str, Any]] = [{**e, "agent": name} for e in guard.effects]
    for _ in range(0 if guard.stop else slice_steps):
        try:
            result = call_and_act(start, start.prompt(new), thought=None if new else thought)
        except (GraphBubbleUp, ScriptExhaustedError):
            raise
        except Exception as exc:
            if name == LEADER:
                raise
            # NOTE: a member whose provider keeps failing is marked failed and the
            # leader is told; the rest of the team goes on.
            outbox.append(failed_step(name, exc))
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
                ROLE_KEY: role_step.role.id,
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
    return {"histories": HistoryAppend({name: new}), "outbox": outbox} if new else {"outbox": outbox}
