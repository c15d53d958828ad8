"""The router node: the team's post office and scheduler, as a LangGraph node.

Between two supersteps the router applies every effect the agents' steps asked
for, in one deterministic order, then decides who runs next. It is plain code,
no model. This module only adapts: state -> ``Ledger`` -> one handler per effect
kind (``HANDLERS``) -> settle -> schedule -> state updates. The rules live in
``teamgraph/ledger/``, one layer per file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, cast

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END
from langgraph.types import Command
from typing_extensions import TypedDict

from teamgraph.audit.cursors import LOG_BASE
from teamgraph.audit.project import named_project
from teamgraph.audit.writer import write_committed_soon
from teamgraph.compat import checkpoint_read, read_channels, read_fresh
from teamgraph.graph import scheduler
from teamgraph.ledger import lifecycle, liveness, mail, requests, turns, waits, work
from teamgraph.ledger.book import Ledger
from teamgraph.ledger.schedule import schedule
from teamgraph.messaging import effects
from teamgraph.nodes.agent_step import StepFor
from teamgraph.nodes.journal import forget_run
from teamgraph.records import (
    AnswerEffect,
    BoardAddEffect,
    BoardEffect,
    DeliverEffect,
    Effect,
    EndowEffect,
    EscalateEffect,
    FileEffect,
    HumanAnswerEffect,
    OpenEffect,
    PerformedEffect,
    ResumeErrorEffect,
    SpawnEffect,
    StepEffect,
    StopEffect,
    TakenEffect,
    TaskCreateEffect,
    TaskUpdateEffect,
    TeamBook,
    TerminateEffect,
    WaitOutputEffect,
)
from teamgraph.runtime import TeamRuntime
from teamgraph.state import TEAM_CHANNELS, RouterInput, TeamUpdate

ROUTER_NODE = "router"
HUMAN_NODE = "human"


class Handlers(TypedDict):
    """The handler of each effect kind, typed by the effect it takes (``records.EffectKind``)."""

    spawn: Callable[[Ledger, SpawnEffect], None]
    deliver: Callable[[Ledger, DeliverEffect], None]
    open: Callable[[Ledger, OpenEffect], None]
    answer: Callable[[Ledger, AnswerEffect], None]
    escalate: Callable[[Ledger, EscalateEffect], None]
    human_answer: Callable[[Ledger, HumanAnswerEffect], None]
    resume_error: Callable[[Ledger, ResumeErrorEffect], None]
    wait_output: Callable[[Ledger, WaitOutputEffect], None]
    terminate: Callable[[Ledger, TerminateEffect], None]
    stop: Callable[[Ledger, StopEffect], None]
    board: Callable[[Ledger, BoardEffect], None]
    board_add: Callable[[Ledger, BoardAddEffect], None]
    step: Callable[[Ledger, StepEffect], None]
    taken: Callable[[Ledger, TakenEffect], None]
    performed: Callable[[Ledger, PerformedEffect], None]
    task_create: Callable[[Ledger, TaskCreateEffect], None]
    task_update: Callable[[Ledger, TaskUpdateEffect], None]
    endow: Callable[[Ledger, EndowEffect], None]
    file: Callable[[Ledger, FileEffect], None]


HANDLERS: Handlers = {
    "spawn": lifecycle.on_spawn,
    "deliver": mail.on_deliver,
    "open": requests.on_open,
    "answer": lifecycle.on_answer,
    "escalate": requests.on_escalate,
    "human_answer": requests.on_human_answer,
    "resume_error": requests.on_resume_error,
    "wait_output": waits.on_wait_output,
    "terminate": lifecycle.on_terminate,
    "stop": turns.on_stop,
    "board": work.on_board,
    "board_add": work.on_board_add,
    "step": turns.on_step,
    "taken": turns.on_taken,
    "performed": requests.on_performed,
    "task_create": work.on_task_create,
    "task_update": work.on_task_update,
    "endow": work.on_endow,
    "file": work.on_file,
}
"""Effect kind -> the handler that applies it."""

# NOTE: an effect read from the state is a plain dict; its ``kind`` picks the handler that takes its type.
_BY_KIND = cast(Mapping[str, Callable[[Ledger, Any], None]], HANDLERS)

PHASE = {
    effects.TAKEN: -1,
    effects.STEP: 1,
    effects.STOP: 2,
    effects.TERMINATE: 2,
    effects.HUMAN_ANSWER: 3,
    effects.RESUME_ERROR: 3,
}
"""The phase of each effect kind in a router pass (kinds not listed: 0).

First the dispatches the agents' nodes took leave the in-flight record (``taken``).

NOTE: causality. Effects are applied in phases, so that no outcome depends on the
order of the agents: first what every step asked for (requests, waits, messages),
then the steps' outputs (which may answer the waits just opened by a concurrent
step, but a request only once its envelope was read), then stops and terminations
(which close whatever the stopped agent left open), then a person's answers.
"""


def apply_effects(ledger: Ledger, outbox: Sequence[Effect]) -> None:
    """Apply a superstep's effects: by phase, then in the agents' order of creation."""
    order = {name: rec["index"] for name, rec in ledger.agents.items()}

    def key(effect: Effect) -> tuple[int, int]:
        return PHASE.get(effect["kind"], 0), order.get(effect.get("agent", ""), len(order))

    for effect in sorted(outbox, key=key):
        _BY_KIND[effect["kind"]](ledger, effect)


def run_pass(runtime: TeamRuntime, state: Mapping[str, Any]) -> TeamUpdate:
    """One router pass: user input and effects in, the settled team and the next steps out.

    Args:
        runtime: The team runtime.
        state: The team state after the last superstep.

    Returns:
        The state updates (only the records the pass changed).
    """
    ledger = Ledger(runtime, state)
    lifecycle.ensure_leader(ledger)
    mail.take_user_input(ledger)
    apply_effects(ledger, ledger.outbox)
    liveness.expire_deadlines(ledger)
    liveness.settle(ledger)
    work.follow_work(ledger)
    return ledger.updates(schedule(ledger))


def next_node(team: TeamBook) -> str:
    """Where the graph goes after a pass that leaves the team book ``team``, when no call finished."""
    if team.get("human"):
        # NOTE: with Policy.pause="immediately" calls may be in flight: they go on in the
        # pool during the pause, and the pass after the person's answer takes them back.
        return HUMAN_NODE
    return ROUTER_NODE if team.get("in_flight") else END


def route_edit(update: Any, config: RunnableConfig) -> str | list[str]:
    """Where an edit made as the router sends the thread (as the router's pass would), for ``compat.route_edits``.

    NOTE: a pass's own ``Command`` (and an edit's, when it says where to go) routes
    already. The team book is read only for an edit: it is all the router's conditional
    edge used to read, at every superstep.
    """
    if isinstance(update, Command) and update.goto:
        gotos = update.goto if isinstance(update.goto, (list, tuple)) else [update.goto]
        if any(goto != END for goto in gotos):
            return []
        # NOTE: a goto of END writes nothing (LangGraph's edges still fire after it), so an
        # edit saying END to a paused thread keeps the gate; a pass's own END brings its book.
        written = update.update.get("team") if isinstance(update.update, Mapping) else None
        if written is not None:
            return next_node(written)
    if read_fresh(config, "outbox", []):
        return ROUTER_NODE  # NOTE: agents' steps wait for a pass (an edit after an agent's node)
    return next_node(read_fresh(config, "team", {}))


class RouterNode(Protocol):
    def __call__(self, state: RouterInput, config: RunnableConfig) -> Command[str]: ...


def make_router(runtime: TeamRuntime, *, step_for: StepFor) -> RouterNode:
    """The router node for one team (its input is only the effects: see ``RouterInput``).

    Args:
        runtime: The team runtime (its ``calls`` hold the model calls in flight).
        step_for: The ``RoleStep`` of a role.
    """

    def router(state: RouterInput, config: RunnableConfig) -> Command[str]:
        del state  # NOTE: the same effects are in the full state read below
        # NOTE: its input is only RouterInput; the rest is read here, as LangGraph's ToolNode
        # reads state, so traces and debug streams of the router do not carry every history.
        committed = read_channels(config, TEAM_CHANNELS)
        # NOTE: the state a pass reads is committed: its log lines are written while it works.
        logged = write_committed_soon(runtime, committed, config)
        updates = run_pass(runtime, committed)
        team = updates["team"]
        updates["outbox"] = {"taken": len(committed.get("outbox") or ())}
        # NOTE: the checkpoint this pass read (and logs) is the base its branch's next lines follow.
        team[LOG_BASE] = checkpoint_read(config)
        if (project := named_project(config, runtime.project)) is not None:
            team["project"] = project  # NOTE: the thread keeps its project for what resumes it without one
        after = scheduler.after_pass(committed, updates)
        # NOTE: the checkpoint follows the log lines of the state the pass read.
        logged.result()
        if team.get("human"):
            return Command(update=updates, goto=HUMAN_NODE)
        scheduler.start_calls(runtime, step_for, after, config)
        finished = scheduler.finished_calls(runtime, after, config)
        if not finished:
            goto = next_node(team)
            if goto == END:
                forget_run(runtime, config, after.get("agents", {}))  # NOTE: every step is saved: its journal goes
            return Command(update=updates, goto=goto)
        # NOTE: the agents' nodes take the steps in the next superstep; the dispatches stay
        # in flight until the pass after it reads that they were taken (``taken``).
        # NOTE: a Command, not a conditional edge: an edge reads the state fresh, which
        # copies every channel (each agent's history too) after every pass.
        return Command(update=updates, goto=scheduler.sends(runtime, after, finished))

    return router
