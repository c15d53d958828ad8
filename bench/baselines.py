"""Baseline workloads: langgraph-supervisor and langgraph-swarm (see shared ANCHORS.md).

Two workers, `worker_a` and `worker_b`, each a prebuilt ReAct agent
(`langgraph.prebuilt.create_react_agent`, which is what langgraph-supervisor 0.0.31
builds its own supervisor with) holding one `echo` tool.

- supervisor, one round: supervisor -> worker_a (echo, answer) -> supervisor ->
  worker_b (echo, answer). 6 model calls and 10 messages per round.
- swarm, one round: worker_a echoes and hands off to worker_b; worker_b echoes and
  hands back. 4 model calls and 8 messages per round.
- react (a floor, not a team): one prebuilt ReAct agent echoing twice per round, on
  LangGraph's SqliteSaver or the Team's own saver: what a single LangGraph agent with
  the same model and tool costs per model call (one superstep and checkpoint per call,
  LangChain's model and tool wrappers).

After R rounds the supervisor (or worker_a in the swarm) gives a final answer. Every
model-written message has ~500 characters of content, and the echo argument (hence
the echo result) is another ~500 characters; this sizing reproduces ANCHORS.md's
SQLite sizes at R=10 within 1-2% for both libraries. Each agent has its own
`ScriptedChatModel`, deciding from its conversation what to do next.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from bench.harness import db_bytes, sqlite_saver, timed_invoke
from bench.registry import Workload
from bench.scripted import ModelMeter, ScriptedChatModel, call_tool, filler, say

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent

FULL_ROUNDS = (10, 50, 100)
TASK = "Run R rounds of delegation between worker_a and worker_b. " + filler("task", 400)


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


def _tool_messages(messages: Sequence[BaseMessage], name: str) -> int:
    """How many tool results named `name` the conversation holds."""
    return sum(1 for m in messages if isinstance(m, ToolMessage) and m.name == name)


def _last_is_echo(messages: Sequence[BaseMessage]) -> bool:
    """Did the previous step return an echo result?"""
    last = messages[-1] if messages else None
    return isinstance(last, ToolMessage) and last.name == "echo"


def _echo_call(agent: str, n: int) -> AIMessage:
    """Call `echo` with ~500 characters of text, after ~500 characters of reasoning."""
    return call_tool(
        "echo", {"text": filler(f"{agent} echo {n}")}, call_id=f"{agent}-{n}", content=filler(f"{agent} thinking {n}")
    )


def _handoff(agent: str, n: int, tool_name: str) -> AIMessage:
    """Call a handoff tool (no arguments), with ~500 characters of reasoning."""
    return call_tool(tool_name, {}, call_id=f"{agent}-{n}", content=filler(f"{agent} handoff {n}"))


def _model(agent: str, meter: ModelMeter, policy) -> ScriptedChatModel:
    """A scripted model for one agent, sharing the workload's meter."""
    return ScriptedChatModel(agent=agent, meter=meter, policy=policy)


# --- langgraph-supervisor ------------------------------------------------------------


def supervisor_policy(rounds: int):
    """Supervisor: alternate handoffs to worker_a / worker_b for R rounds, then answer."""

    def policy(messages: Sequence[BaseMessage], n: int) -> AIMessage:
        done = sum(1 for m in messages if isinstance(m, ToolMessage) and (m.name or "").startswith("transfer_to_"))
        if done >= 2 * rounds:
            return say(filler(f"supervisor final answer {n}"))
        target = "worker_a" if done % 2 == 0 else "worker_b"
        return _handoff("supervisor", n, f"transfer_to_{target}")

    return policy


def supervised_worker_policy(agent: str):
    """Supervised worker: echo, then answer with what came back."""

    def policy(messages: Sequence[BaseMessage], n: int) -> AIMessage:
        if _last_is_echo(messages):
            return say(filler(f"{agent} answer {n}"))
        return _echo_call(agent, n)

    return policy


def build_supervisor(rounds: int, meter: ModelMeter, checkpointer):
    """Compile the langgraph-supervisor team for R rounds."""
    from langgraph_supervisor import create_supervisor

    workers = [
        create_react_agent(_model(name, meter, supervised_worker_policy(name)), tools=[echo], name=name)
        for name in ("worker_a", "worker_b")
    ]
    supervisor = create_supervisor(workers, model=_model("supervisor", meter, supervisor_policy(rounds)))
    return supervisor.compile(checkpointer=checkpointer)


# --- langgraph-swarm -----------------------------------------------------------------


def swarm_policy(agent: str, peer: str, rounds: int | None):
    """Swarm agent: echo, then hand off to `peer`.

    The agent with `rounds` set (worker_a) gives the final answer instead of
    echoing once it has been handed control back R times.
    """

    def policy(messages: Sequence[BaseMessage], n: int) -> AIMessage:
        if _last_is_echo(messages):
            return _handoff(agent, n, f"transfer_to_{peer}")
        if rounds is not None and _tool_messages(messages, f"transfer_to_{agent}") >= rounds:
            return say(filler(f"{agent} final answer {n}"))
        return _echo_call(agent, n)

    return policy


def build_swarm(rounds: int, meter: ModelMeter, checkpointer):
    """Compile the langgraph-swarm team for R rounds."""
    from langgraph_swarm import create_handoff_tool, create_swarm

    def agent(name: str, peer: str, rounds_: int | None):
        model = _model(name, meter, swarm_policy(name, peer, rounds_))
        return create_react_agent(model, tools=[echo, create_handoff_tool(agent_name=peer)], name=name)

    swarm = create_swarm(
        [agent("worker_a", "worker_b", rounds), agent("worker_b", "worker_a", None)], default_active_agent="worker_a"
    )
    return swarm.compile(checkpointer=checkpointer)


# --- a lone ReAct agent (the floor) -------------------------------------------------


def react_policy(rounds: int):
    """A lone agent: echo twice per round for R rounds, then answer."""

    def policy(messages: Sequence[BaseMessage], n: int) -> AIMessage:
        if _tool_messages(messages, "echo") >= 2 * rounds:
            return say(filler(f"agent final answer {n}"))
        return _echo_call("agent", n)

    return policy


def build_react(rounds: int, meter: ModelMeter, checkpointer):
    """Compile one prebuilt ReAct agent holding `echo`, for R rounds."""
    return create_react_agent(_model("agent", meter, react_policy(rounds)), tools=[echo], checkpointer=checkpointer)


# --- workloads -----------------------------------------------------------------------


def _run_team(system: str, build, params: dict, workdir: Path) -> dict:
    """Build a team on a fresh SQLite file, run R rounds once, measure it."""
    rounds = int(params["rounds"])
    meter = ModelMeter()
    path = workdir / f"{system}.sqlite"
    saver, conn, suffix = sqlite_saver(path, params)
    system += suffix
    graph = build(rounds, meter, saver)
    config = {"configurable": {"thread_id": f"{system}-r{rounds}"}, "recursion_limit": 20 * rounds + 50}
    output, timing = timed_invoke(graph, {"messages": [HumanMessage(TASK)]}, config, meter)
    size = db_bytes(path, conn)
    # NOTE: every checkpoint row is one `put` of the saver (subgraph checkpoints included).
    checkpoints = conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0]
    conn.close()
    return {
        "system": system,
        "workload": "delegation rounds",
        "rounds": rounds,
        "messages": len(output["messages"]),
        "db_bytes": size,
        "checkpoints": checkpoints,
        **timing,
    }


def supervisor_workload(params: dict, workdir: Path) -> dict:
    """langgraph-supervisor delegating R rounds to two ReAct workers."""
    return _run_team("langgraph-supervisor", build_supervisor, params, workdir)


def swarm_workload(params: dict, workdir: Path) -> dict:
    """langgraph-swarm: two ReAct workers handing off to each other for R rounds."""
    return _run_team("langgraph-swarm", build_swarm, params, workdir)


def react_workload(params: dict, workdir: Path) -> dict:
    """A floor, not a team: one prebuilt ReAct agent echoing 2 R times (`saver="teamgraph"`: the Team's saver)."""
    return _run_team("langgraph-react", build_react, params, workdir)


WORKLOADS: dict[str, Workload] = {
    "supervisor": Workload(
        supervisor_workload,
        full=[{"rounds": r} for r in FULL_ROUNDS],
        quick=[{"rounds": 10}],
        repeats=2,
        description=supervisor_workload.__doc__,
    ),
    "swarm": Workload(
        swarm_workload,
        full=[{"rounds": r} for r in FULL_ROUNDS],
        quick=[{"rounds": 10}],
        repeats=2,
        description=swarm_workload.__doc__,
    ),
    "react": Workload(
        react_workload,
        full=[{"rounds": r, "saver": saver} for r in (10, 100) for saver in ("sqlite", "teamgraph")],
        quick=[{"rounds": 10, "saver": "teamgraph"}],
        repeats=2,
        description=react_workload.__doc__,
    ),
}
