"""Build the team's StateGraph: router -> leader / role nodes -> router."""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import RetryPolicy, Send

from teamgraph.compat import CONFIG_KEY_DURABILITY
from teamgraph.graph.guarded import guarded
from teamgraph.graph.router import make_router
from teamgraph.nodes.agent_step import make_generic_member_node, make_step_node
from teamgraph.nodes.human_gate import make_human_gate
from teamgraph.runtime import TeamRuntime
from teamgraph.state import RouterInput, TeamInput, TeamState

ROUTER = "router"
LEADER_NODE = "leader"
GENERIC_MEMBER_NODE = "member"
HUMAN_NODE = "human"

# NOTE: a team run takes one superstep per step of the busiest agent, far more
# than LangGraph's default limit of 25.
RECURSION_LIMIT = 100_000


def node_name(role_id: str, *, leader: bool) -> str:
    """The graph node that runs agents of ``role_id``.

    NOTE: a role whose id is one of the team's own node names (a role called
    ``member`` or ``human``) gets a suffixed node, so it never clashes with them.
    """
    if leader:
        return LEADER_NODE
    return f"{role_id}-role" if role_id in (ROUTER, LEADER_NODE, GENERIC_MEMBER_NODE, HUMAN_NODE) else role_id


def build_team_graph(runtime: TeamRuntime, *, checkpointer: Any = None) -> CompiledStateGraph:
    """Compile the team graph.

    Args:
        runtime: The team runtime (roles known now become nodes).
        checkpointer: A LangGraph checkpointer, or None (e.g. for ``langgraph dev``).

    Returns:
        The compiled graph, set to checkpoint every superstep synchronously.
    """
    builder = StateGraph(TeamState, input_schema=TeamInput, output_schema=TeamState)
    builder.add_node(ROUTER, make_router(runtime), input_schema=RouterInput)
    builder.add_edge(START, ROUTER)

    nodes: dict[str, str] = {}
    for role in runtime.roles.values():
        name = node_name(role.id, leader=role.is_leader)
        # NOTE: the leader's transient provider errors are retried here; a member's
        # last failure marks it failed instead (nodes/agent_step.py).
        retry = RetryPolicy(max_attempts=3) if role.is_leader else None
        try:
            node = make_step_node(runtime, role)
        except Exception:
            if not runtime.wrote(role):
                raise
            # NOTE: a role the team wrote must never stop the compile: its members
            # step in the generic node, where the problem fails them with its reason.
            continue
        builder.add_node(name, node, retry_policy=retry)
        builder.add_edge(name, ROUTER)
        nodes[role.id] = name
    builder.add_node(GENERIC_MEMBER_NODE, make_generic_member_node(runtime))
    builder.add_edge(GENERIC_MEMBER_NODE, ROUTER)
    builder.add_node(HUMAN_NODE, make_human_gate(runtime))
    builder.add_edge(HUMAN_NODE, ROUTER)

    def route(state: dict[str, Any]) -> list[Send | str] | str:
        agents, team = state["agents"], state["team"]
        targets: list[Send | str] = [
            Send(nodes.get(agents[name]["role"], GENERIC_MEMBER_NODE), {"agent": name}) for name in team["scheduled"]
        ]
        if team.get("human"):
            targets.append(HUMAN_NODE)
        return targets or END

    builder.add_conditional_edges(ROUTER, route, [*nodes.values(), GENERIC_MEMBER_NODE, HUMAN_NODE, END])
    # NOTE: one run per thread (a lease in the home) wherever the team keeps its own checkpoints.
    lease_home = runtime.home if checkpointer is not None else None
    graph = guarded(builder.compile(checkpointer=checkpointer, name="teamgraph"), lease_home=lease_home)
    # NOTE: LangGraph's thread pool is sized from the CPU count; a team must be able
    # to run every scheduled member (and the leader and the human gate) at once.
    config: dict[str, Any] = {
        "recursion_limit": RECURSION_LIMIT,
        "max_concurrency": runtime.policy.max_parallel + 2,
    }
    if checkpointer is not None:
        # "sync" durability waits for each checkpoint (a crash loses no step); it
        # must not be set without a checkpointer, where nothing is ever saved.
        config["configurable"] = {CONFIG_KEY_DURABILITY: "sync"}
    return graph.with_config(**config)
