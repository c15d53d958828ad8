"""The router node: the team's post office and scheduler, as a LangGraph node.

Between two supersteps the router applies every effect the agents' steps asked
for, in one deterministic order, then decides who runs next. It is plain code,
no model. This module only adapts: state -> ``Ledger`` -> one handler per effect
kind (``HANDLERS``) -> settle -> schedule -> state updates. The rules live in
``teamgraph/ledger/``, one layer per file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END
from langgraph.types import Command

from teamgraph.audit.cursors import LOG_BASE
from teamgraph.audit.writer import write_committed_soon
from teamgraph.compat import checkpoint_read, read_fresh, read_graph_state
from teamgraph.graph import scheduler
from teamgraph.ledger import lifecycle, liveness, mail, requests, turns, waits, work
from teamgraph.ledger.book import Ledger
from teamgraph.ledger.schedule import schedule
from teamgraph.messaging import effects
from teamgraph.nodes.agent_step import StepFor
from teamgraph.runtime import TeamRuntime
from teamgraph.state import RouterInput, TeamState

Handler = Callable[[Ledger, Any], None]

ROUTER_NODE = "router"
HUMAN_NODE = "human"

HANDLERS: dict[str, Handler] = {
    effects.SPAWN: lifecycle.on_spawn,
    effects.DELIVER: mail.on_deliver,
    effects.OPEN: requests.on_open,
    effects.ANSWER: lifecycle.on_answer,
    effects.ESCALATE: requests.on_escalate,
    effects.HUMAN_ANSWER: requests.on_human_answer,
    effects.RESUME_ERROR: requests.on_resume_error,
    effects.WAIT_OUTPUT: waits.on_wait_output,
    effects.TERMINATE: lifecycle.on_terminate,
    effects.STOP: turns.on_stop,
    effects.BOARD: work.on_board,
    effects.BOARD_ADD: work.on_board_add,
    effects.STEP: turns.on_step,
    effects.TASK_CREATE: work.on_task_create,
    effects.TASK_UPDATE: work.on_task_update,
    effects.ENDOW: work.on_endow,
    effects.FILE: work.on_file,
}
"""Effect kind -> the handler that applies it."""

PHASE = {effects.STEP: 1, effects.STOP: 2, effects.TERMINATE: 2, effects.HUMAN_ANSWER: 3, effects.RESUME_ERROR: 3}
"""The phase of each effect kind in a router pass (kinds not listed: 0).

NOTE: causality. Effects are applied in phases, so that no outcome depends on the
order of the agents: first what every step asked for (requests, waits, messages),
then the steps' outputs (which may answer the waits just opened by a concurrent
step, but a request only once its envelope was read), then stops and terminations
(which close whatever the stopped agent left open), then a person's answers.
"""


def apply_effects(ledger: Ledger, outbox: list[dict[str, Any]]) -> None:
    """Apply a superstep's effects: by phase, then in the agents' order of creation."""
    order = {name: rec["index"] for name, rec in ledger.agents.items()}

    def key(effect: dict[str, Any]) -> tuple[int, int]:
        return PHASE.get(effect["kind"], 0), order.get(effect.get("agent", ""), len(order))

    for effect in sorted(outbox, key=key):
        HANDLERS[effect["kind"]](ledger, effect)


def run_pass(runtime: TeamRuntime, state: Mapping[str, Any]) -> dict[str, Any]:
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


def next_node(team: Mapping[str, Any]) -> str:
    """Where the graph goes after a pass that leaves the team book ``team``."""
    if team.get("human"):
        # NOTE: with Policy.pause="immediately" steps may be in flight: they go on in the
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
    return next_node(read_fresh(config, "team", {}))


class RouterNode(Protocol):
    def __call__(self, state: RouterInput, config: RunnableConfig) -> Command[str]: ...


def make_router(runtime: TeamRuntime, *, step_for: StepFor) -> RouterNode:
    """The router node for one team (its input is only the effects: see ``RouterInput``).

    Args:
        runtime: The team runtime (its ``steps`` pool runs the agents' steps).
        step_for: The ``RoleStep`` of a role.
    """

    def router(state: RouterInput, config: RunnableConfig) -> Command[str]:
        del state  # NOTE: the same effects are in the full state read below
        # NOTE: its input is only RouterInput; the rest is read here, as LangGraph's ToolNode
        # reads state, so traces and debug streams of the router do not carry every history.
        committed = read_graph_state(config, list(TeamState.__annotations__))
        scheduler.start_recorded(runtime, step_for, committed, config)
        # NOTE: the state a pass reads is committed: its log lines are written while it waits.
        logged = write_committed_soon(runtime, committed, config)
        scheduler.wait_for_steps(runtime, committed, config)
        finished = scheduler.finished_steps(runtime, committed, config)
        current = scheduler.with_finished(committed, finished)
        # NOTE: the steps this pass issues start in the next superstep, once the checkpoint
        # that records them is written: a crash then loses only steps in flight. Only
        # their first model calls start now (thought ahead), on the state it will hold.
        updates = run_pass(runtime, current)
        # NOTE: the checkpoint this pass read (and logs) is the base its branch's next lines follow.
        updates["team"][LOG_BASE] = checkpoint_read(config)
        # NOTE: the finished steps' messages are written first: the pass's own appends follow them.
        updates = scheduler.finished_messages(updates, finished)
        scheduler.think_ahead(runtime, step_for, committed, updates, config)
        # NOTE: the checkpoint follows the log lines of the state the pass read; a failed
        # write (or pass) leaves the finished steps in the pool, for the retried pass.
        logged.result()
        scheduler.release(runtime, committed, finished, config)
        # NOTE: a Command, not a conditional edge: an edge reads the state fresh, which
        # copies every channel (each agent's history too) after every pass.
        return Command(update=updates, goto=next_node(updates.get("team", committed.get("team", {}))))

    return router
