"""Build the team's StateGraph: the router, the leader, a node per role, a member node and the human gate.

::

    START → router ─┬─ Send → leader               (the Team Leader's step)
       ↑            ├─ Send → <role node> × N      (a member's step, in its role subgraph)
       │            ├─ Send → member               (roles created after the compile)
       │            ├─ human                        (the interrupt: questions, approvals)
       │            └─ END
       └──────────── every node returns to the router

The model calls run in flight (``teamgraph/graph/scheduler.py``): the router sends a
member to its node as soon as its call is done, so nobody waits for another's call.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from teamgraph.audit.writer import forget_reads, open_log_soon
from teamgraph.checkpoints.collector import freeze_long_lived
from teamgraph.compat import CONFIG_KEY_DURABILITY, route_edits
from teamgraph.graph.guarded import guarded
from teamgraph.graph.router import HUMAN_NODE, ROUTER_NODE, make_router, route_edit
from teamgraph.graph.scheduler import LEADER_NODE, MEMBER_NODE
from teamgraph.nodes.agent_step import RoleStep, build_role_step
from teamgraph.nodes.human_gate import make_human_gate
from teamgraph.nodes.journal import begin_run
from teamgraph.nodes.role_graph import StepTask, make_agent_node
from teamgraph.roles import Role
from teamgraph.runs import RunScope
from teamgraph.runtime import TeamRuntime
from teamgraph.state import RouterInput, TeamInput, TeamOutput, TeamState

# NOTE: a team run takes about one superstep per finished step (Policy.max_model_calls
# per user message), far more than LangGraph's default limit of 25.
RECURSION_LIMIT = 100_000


def role_node(role_id: str) -> str:
    """The node of a role: its id, unless that names one of the graph's own nodes."""
    return f"{role_id}-role" if role_id in (ROUTER_NODE, HUMAN_NODE, LEADER_NODE, MEMBER_NODE) else role_id


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
    runtime.role_nodes = {role.id: role_node(role.id) for role in runtime.roles.values() if not role.is_leader}
    agent_nodes = [LEADER_NODE, *runtime.role_nodes.values(), MEMBER_NODE]
    # NOTE: the router goes on by a Command (``router.next_node``, ``Send``s); ``destinations`` draws its edges.
    builder.add_node(
        ROUTER_NODE,
        make_router(runtime, step_for=step_for),
        input_schema=RouterInput,
        destinations=(*agent_nodes, HUMAN_NODE, ROUTER_NODE, END),
    )
    builder.add_edge(START, ROUTER_NODE)
    for node in agent_nodes:
        builder.add_node(node, make_agent_node(runtime, step_for, node=node), input_schema=StepTask)
        builder.add_edge(node, ROUTER_NODE)
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
        on_end=lambda run: run_ends(runtime, run),
        on_start=lambda config: run_starts(runtime, config),
    )
    config: dict[str, Any] = {"recursion_limit": RECURSION_LIMIT}
    if checkpointer is not None:
        # "sync" durability waits for each checkpoint (a crash loses no step); it
        # must not be set without a checkpointer, where nothing is ever saved.
        config["configurable"] = {CONFIG_KEY_DURABILITY: "sync"}
    freeze_long_lived()  # NOTE: the modules a run uses are all imported by now
    return graph.with_config(**config)


def run_ends(runtime: TeamRuntime, run: RunScope) -> None:
    """Forget what a run's agents' nodes read and no pass logged, and its calls when nothing can resume it."""
    forget_reads(run.key)
    if not run.resumable:
        runtime.calls.forget(run.key)


def run_starts(runtime: TeamRuntime, config: RunnableConfig) -> None:
    """What a run does as it starts: forget what this process knew of the thread's step journal, open the log."""
    begin_run(runtime, config)
    open_log_soon(runtime, config)
