"""The floor: teamgraph's engine shape in plain LangGraph, with no team in it.

``langgraph-floor`` runs the scheduling workloads' calls (the same seeded latencies: 8 or
16 members x 10 calls, uniform 20-80 ms or lognormal) through a minimal graph shaped as
teamgraph's engine, on a SQLite saver as ``Team(home=...)`` opens it (WAL,
synchronous=NORMAL, "sync" durability):

- ``supersteps=2`` (teamgraph's shape since issue 29): a ``router`` node starts each
  member's next call in a thread pool, waits for the first to finish, and ``Send``s each
  finished call to a ``member`` node, which appends the answer to the member's history and
  returns to the router;
- ``supersteps=1`` (the issue-10 engine): the router takes the finished calls itself.

No prompts, tools, ledger, log, journal, lease, subgraph or leader: what is left is
LangGraph's own cost per superstep (tasks, writes, a checkpoint) and the interpreter's
lock shared with the calls' threads. Its makespan over the critical path is the floor
under teamgraph's figure for the same shape on the same machine.

``shape="role"`` adds what issue 29's graph asks of any team built on LangGraph and
LangChain, and nothing of teamgraph's own: each call is a LangChain chat model's
``invoke`` (the bench's scripted model, answering with a tool call), and the ``member``
node invokes a role subgraph (``model → tools → effects``, lent no saver, as
``teamgraph/nodes/role_graph.py`` does) whose ``tools`` node runs the call through a
LangChain ``StructuredTool``; the histories hold the messages, in a ``DeltaChannel``.
Still no ledger, log, journal, lease, prompt, leader or router logic.

``cpu_ms`` adds that
much Python work to each call's supersteps (half in each of the two), which holds the
interpreter's lock as a step's own code does: the curve it draws is what each
millisecond of framework time a call costs the makespan (``docs/scheduler.md`` §0).
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send
from typing_extensions import TypedDict

from bench.baselines import echo
from bench.registry import Workload
from bench.scheduler_workloads import _plan, _PlannedModel
from bench.scripted import ModelMeter, call_tool, filler
from teamgraph.compat import unsaved


def _append(current: dict[str, list[Any]] | None, writes: Sequence[dict[str, list[Any]]]) -> dict[str, list[Any]]:
    out = dict(current or {})
    for write in writes:
        for agent, new in write.items():
            out[agent] = [*out.get(agent, []), *new]
    return out


def _merge(left: dict[str, list[Any]] | None, right: dict[str, list[Any]]) -> dict[str, list[Any]]:
    return _append(left, [right])


class FloorState(TypedDict, total=False):
    histories: Annotated[dict[str, list[Any]], _merge]


class RoleFloorState(TypedDict, total=False):
    # NOTE: a checkpoint stores only the new messages, as teamgraph's histories channel does.
    histories: Annotated[dict[str, list[Any]], DeltaChannel(_append, snapshot_frequency=3000)]


class RoleStep(TypedDict, total=False):
    agent: str
    answer: AIMessage
    turn: list[BaseMessage]
    effects: list[dict[str, Any]]


def _role_graph() -> Any:
    """The role subgraph of ``shape="role"``: take the answer, run its tool, sum the step up."""

    def model(step: RoleStep) -> RoleStep:
        return {"turn": [step["answer"]]}

    def tools(step: RoleStep) -> RoleStep:
        calls = step["answer"].tool_calls
        return {"turn": [*step["turn"], *(echo.invoke({**call, "type": "tool_call"}) for call in calls)]}

    def effects(step: RoleStep) -> RoleStep:
        done = sum(isinstance(m, ToolMessage) for m in step["turn"])
        return {"effects": [{"kind": "step", "agent": step["agent"], "tool_calls": done}]}

    builder = StateGraph(RoleStep)
    builder.add_node("model", model)
    builder.add_node("tools", tools)
    builder.add_node("effects", effects)
    builder.add_edge(START, "model")
    builder.add_edge("model", "tools")
    builder.add_edge("tools", "effects")
    builder.add_edge("effects", END)
    return builder.compile()  # NOTE: lent no saver when invoked (``unsaved``), as teamgraph's are


def _planned_models(plan: dict[str, list[float]]) -> dict[str, _PlannedModel]:
    """One LangChain chat model a member, sleeping its planned latencies, answering with an echo call."""

    def policy_for(agent: str):
        return lambda messages, n: call_tool("echo", {"text": filler(f"{agent} echo {n}")}, call_id=f"{agent}-{n}")

    return {
        agent: _PlannedModel(policy=policy_for(agent), meter=ModelMeter(), agent=agent, delays=delays)
        for agent, delays in plan.items()
    }


def uniform_delay(rng: random.Random) -> float:
    """One latency in seconds as ``TeamModel(latency_ms=(20, 80))`` draws it."""
    return rng.uniform(20, 80) / 1000.0


def _busy(ms: float) -> None:
    """Python work for ``ms`` milliseconds: it holds the interpreter's lock, as a step's own code does."""
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        pass


Shape = tuple[type, Callable[[str, int, list[Any]], Any], Callable[[dict[str, Any]], list[Any]]]
"""A floor's state schema, its model call (agent, call number, history) and what its member node appends."""


def _plain_shape(plan: dict[str, list[float]]) -> Shape:
    def call(agent: str, n: int, history: list[Any]) -> str:
        time.sleep(plan[agent][n])
        return f"{agent} answer {n}"

    return FloorState, call, lambda task: [task["text"]]


def _role_shape(plan: dict[str, list[float]]) -> Shape:
    models, role = _planned_models(plan), _role_graph()

    def call(agent: str, n: int, history: list[Any]) -> AIMessage:
        return models[agent].invoke([HumanMessage("Work on your part."), *history])

    def take(task: dict[str, Any]) -> list[Any]:
        return role.invoke({"agent": task["agent"], "answer": task["text"]}, unsaved(get_config()))["turn"]

    return RoleFloorState, call, take


SHAPES: dict[str, Callable[[dict[str, list[float]]], Shape]] = {"plain": _plain_shape, "role": _role_shape}


def _floor_graph(plan: dict[str, list[float]], supersteps: int, saver: SqliteSaver, cpu_ms: float, shape: str) -> Any:
    pool = ThreadPoolExecutor(max_workers=len(plan))
    calls: dict[str, Future[Any]] = {}
    made = dict.fromkeys(plan, 0)
    schema, call, take = SHAPES[shape](plan)

    def router(state: dict[str, Any]) -> Command:
        # NOTE: a member runs its calls one after another; nothing else decides
        for agent in plan:
            if agent not in calls and made[agent] < len(plan[agent]):
                history = state.get("histories", {}).get(agent, [])
                calls[agent] = pool.submit(call, agent, made[agent], history)
                made[agent] += 1
        if not calls:
            return Command(goto=END)
        wait(list(calls.values()), return_when=FIRST_COMPLETED)
        finished = {a: f.result() for a, f in list(calls.items()) if f.done()}
        for agent in finished:
            del calls[agent]
        _busy(cpu_ms / 2 if supersteps == 2 else cpu_ms)
        if supersteps == 1:
            return Command(update={"histories": {a: [t] for a, t in finished.items()}}, goto="router")
        return Command(goto=[Send("member", {"agent": a, "text": t}) for a, t in finished.items()])

    def member(task: dict[str, Any]) -> dict[str, Any]:
        _busy(cpu_ms / 2)
        return {"histories": {task["agent"]: take(task)}}

    builder: StateGraph[Any] = StateGraph(schema)
    builder.add_node("router", router, destinations=("member", "router", END))
    builder.add_node("member", member)
    builder.add_edge(START, "router")
    builder.add_edge("member", "router")
    return builder.compile(checkpointer=saver)


def floor_workload(params: dict, workdir: Path) -> dict:
    """Plain LangGraph in teamgraph's engine shape: N members x 10 calls, 1 or 2 supersteps a call."""
    members, steps, seed = int(params["members"]), int(params.get("steps", 10)), int(params.get("seed", 0))
    supersteps = int(params.get("supersteps", 2))
    cpu_ms = float(params.get("cpu_ms", 0.0))
    latency = params.get("latency", "uniform")
    shape = params.get("shape", "plain")
    plan = _plan(members, steps, seed, uniform_delay) if latency == "uniform" else _plan(members, steps, seed)
    conn = sqlite3.connect(str(workdir / "floor.sqlite"), check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    graph = _floor_graph(plan, supersteps, SqliteSaver(conn), cpu_ms, shape)
    config = {"configurable": {"thread_id": "floor"}, "recursion_limit": 100_000}
    cpu = time.process_time()
    start = time.perf_counter()
    out = graph.invoke({"histories": {}}, config, durability="sync")
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    conn.close()
    messages = sum(len(h) for h in out["histories"].values())
    if messages != members * steps * (2 if shape == "role" else 1):  # NOTE: role: each call's answer and tool result
        raise RuntimeError(f"floor ({shape}): {messages} messages in the histories for {members} x {steps} calls")
    critical = max(sum(v) for v in plan.values())
    ratio = seconds / critical
    return {
        "system": "langgraph (floor)",
        "workload": f"floor ({latency}, {members} members, {supersteps} superstep(s) a call, {cpu_ms:g} ms work"
        + (", role subgraph, LangChain model and tool)" if shape == "role" else ")"),
        "shape": shape,
        "members": members,
        "steps": steps,
        "supersteps_per_call": supersteps,
        "cpu_ms_per_call": cpu_ms,
        "messages": messages,
        "makespan_s": seconds,
        "critical_path_s": critical,
        "makespan_over_critical": ratio,
        "seconds": seconds,
        "model_calls": members * steps,
        "model_seconds": sum(sum(v) for v in plan.values()),
        "overhead_ms_per_call": None,  # NOTE: the calls overlap: wall time less their sum means nothing here
        "cpu_seconds": cpu,
        "note": f"makespan/critical {ratio:.2f}; {cpu / (members * steps) * 1000:.1f} ms of CPU a call",
    }


WORKLOADS = {
    "langgraph-floor": Workload(
        floor_workload,
        # NOTE: with 0, 2 and 4 ms of Python work a call, to show what a step's own code costs the makespan.
        full=[
            *({"members": 8, "latency": "uniform", "supersteps": 2, "cpu_ms": ms} for ms in (0, 2, 4)),
            {"members": 8, "latency": "uniform", "supersteps": 1, "cpu_ms": 0},
            *({"members": n, "latency": "lognormal", "supersteps": 2, "cpu_ms": 0} for n in (8, 16)),
            # NOTE: what any team in issue 29's shape does a call, with none of teamgraph's own work.
            {"members": 8, "latency": "uniform", "supersteps": 2, "cpu_ms": 0, "shape": "role"},
            *({"members": n, "latency": "lognormal", "supersteps": 2, "cpu_ms": 0, "shape": "role"} for n in (8, 16)),
        ],
        quick=[{"members": 4, "steps": 3}, {"members": 4, "steps": 3, "shape": "role"}],
        repeats=2,
        description=floor_workload.__doc__,
    ),
}
