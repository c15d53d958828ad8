"""Build the team's StateGraph: the router loops on itself (one superstep per finished step), and a human gate.

Agents' steps run in the scheduler's pool (``teamgraph/graph/scheduler.py``), not as
graph nodes: a member's next step starts as soon as its previous one is done.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from teamgraph.audit.writer import open_log_soon
from teamgraph.compat import CONFIG_KEY_DURABILITY, route_edits
from teamgraph.graph.guarded import guarded
from teamgraph.graph.router import HUMAN_NODE, ROUTER_NODE, make_router, route_edit
from teamgraph.nodes.agent_step import RoleStep, build_role_step
from teamgraph.nodes.human_gate import make_human_gate
from teamgraph.roles import Role
from teamgraph.runtime import TeamRuntime
from teamgraph.state import RouterInput, TeamInput, TeamOutput, TeamState

# NOTE: a team run takes about one superstep per finished step (Policy.max_model_calls
# per user message), far more than LangGraph's default limit of 25.
RECURSION_LIMIT = 100_000
LANGGRAPH_WORKERS = 3
"""The graph's default ``max_concurrency``: the threads of LangGraph's pool (a run's config may set more)."""


def build_team_graph(runtime: TeamRuntime, *, checkpointer: Any = None) -> CompiledStateGraph:
    """Compile the team graph.

    Args:
        runtime: The team runtime (the steps of the roles known now are built at once).
        checkpointer: A LangGraph checkpointer, or None (e.g. for ``langgraph dev``).

    Returns:
        The compiled graph, set to checkpoint every superstep synchronously.
    """
    builder = StateGraph(TeamState, input_schema=TeamInput, output_schema=TeamOutput)
    steps: dict[str, RoleStep] = {}

    def step_for(role: Role) -> RoleStep:
        if role.id not in steps:
            steps[role.id] = build_role_step(runtime, role)
        return steps[role.id]

    for role in runtime.roles.values():
        try:
            step_for(role)
        except Exception:
            if not runtime.wrote(role):
                raise
            # NOTE: a role the team wrote must never stop the compile: its members
            # fail at their first step, with the reason.
    # NOTE: the router goes on by a Command (``router.next_node``); ``destinations`` draws its edges.
    builder.add_node(
        ROUTER_NODE,
        make_router(runtime, step_for=step_for),
        input_schema=RouterInput,
        destinations=(ROUTER_NODE, HUMAN_NODE, END),
    )
    builder.add_edge(START, ROUTER_NODE)
    builder.add_node(HUMAN_NODE, make_human_gate(runtime))
    builder.add_edge(HUMAN_NODE, ROUTER_NODE)
    # NOTE: one run per thread (a lease in the home) wherever the team keeps its own checkpoints.
    lease_home = runtime.home if checkpointer is not None else None
    compiled = builder.compile(checkpointer=checkpointer, name="teamgraph")
    # NOTE: an edit made as the router (update_state, Studio, a fork) goes where a pass would send it.
    route_edits(compiled, ROUTER_NODE, route_edit)
    graph = guarded(
        compiled,
        lease_home=lease_home,
        on_end=lambda run: runtime.steps.close_ahead(run.key) if run.resumable else runtime.steps.forget(run.key),
        on_start=lambda config: open_log_soon(runtime, config),
    )
    config: dict[str, Any] = {
        "recursion_limit": RECURSION_LIMIT,
        # NOTE: the agents' steps run in the team's own pool, so LangGraph's pool serves a
        # superstep's tasks (the router, and the gate beside it after an edit), a stream's
        # chunk waiter and the checkpoint writes. Six workers (its default on 2 CPUs) woke a
        # thread for each write: 93 futex calls per model call, 78 with three (strace,
        # delegation R = 40 minus R = 10). Fewer than three hold a gate's interrupt back
        # behind the router's wait on a stream (one deadlocks a streamed run).
        "max_concurrency": LANGGRAPH_WORKERS,
    }
    if checkpointer is not None:
        # "sync" durability waits for each checkpoint (a crash loses no step); it
        # must not be set without a checkpointer, where nothing is ever saved.
        config["configurable"] = {CONFIG_KEY_DURABILITY: "sync"}
    return graph.with_config(**config)
