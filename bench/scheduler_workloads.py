"""Issue 10's workloads ("No lockstep"): lognormal latencies, checkpoint writes per model
call, and the bytes a `values` stream and a LangSmith trace send per message.

- ``teamgraph-lognormal``: N members x 10 model calls (9 echo calls, then an answer),
  each member call sleeping a seeded lognormal latency (median 40 ms, sigma 0.8, capped
  at 1 s, seeded per agent), ``Policy(max_parallel=N)``, through the public API
  (``Team(...).compile().invoke``). Makespan over the critical path (the slowest member's
  own total latency), and checkpoint writes per model call (the saver's ``put`` calls
  over every model call of the run, the leader's included).
- ``supervisor-lognormal`` / ``swarm-lognormal``: the same N workers x 10 calls with the
  same latencies in langgraph-supervisor and langgraph-swarm. Neither can run workers in
  parallel: the supervisor (0.0.31) follows only the first of several handoffs in one
  message, so it hands off to each worker in turn; a swarm has one active agent at a time,
  so each worker hands off to the next when done. Their makespan is about the sum of all
  latencies: the figure shows what running members in parallel is worth.
- ``teamgraph-observed``: the delegation workload (``bench.teamgraph_workloads``) at
  about 80 and 300 messages, run once with ``stream_mode="values"`` (every chunk
  serialized as ``langgraph dev`` serializes it for Studio) and with LangSmith tracing
  on, sent to a local fake endpoint (``bench.fake_langsmith``) that counts the bytes it
  receives. Bytes per message = bytes sent / messages in the final state. The chunks are
  read with the graph's output keys, as langgraph-api streams them; the trace is broken
  down by run (name, type) and part, and its LLM prompts (inputs of LLM runs) told apart.
- ``supervisor-observed``: langgraph-supervisor's delegation at about 80 and 300
  messages, observed the same way (for comparison).
"""

from __future__ import annotations

import math
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from bench.fake_langsmith import FakeLangSmith
from bench.harness import fresh_sqlite_saver, sqlite_saver, timed_invoke
from bench.registry import Workload
from bench.scripted import ModelMeter, ScriptedChatModel, call_tool, filler, say
from bench.team_model import (
    LEADER,
    SYSTEM,
    TASK,
    TeamModel,
    delegation_leader,
    echo_member,
    fan_out_leader,
    member_name,
)
from bench.team_probe import build_team, check_calls, count_rows, message_count, probed

MEDIAN_MS, SIGMA, CAP_MS = 40.0, 0.8, 1000.0
STEPS = 10
OBSERVED_ROUNDS = {80: 6, 300: 25}
"""Messages -> delegation rounds (12 R + 5 messages)."""


def lognormal_delay(rng: random.Random) -> float:
    """One latency in seconds: lognormal, median 40 ms, sigma 0.8, capped at 1 s."""
    return min(rng.lognormvariate(math.log(MEDIAN_MS), SIGMA), CAP_MS) / 1000.0


class LognormalTeamModel(TeamModel):
    """`TeamModel` whose slow agents sleep a seeded lognormal latency per call."""

    def _agent_delay(self, agent: str) -> float:
        if self.slow is not None and agent not in self.slow:
            return 0.0
        rng = self._agent_rngs.setdefault(agent, random.Random(f"{self.seed}:{agent}"))
        return lognormal_delay(rng)


def _plan(
    members: int, steps: int, seed: int, draw: Callable[[random.Random], float] = lognormal_delay
) -> dict[str, list[float]]:
    """The latencies a seeded team model draws for each member (same seeds, same order):
    `LognormalTeamModel`'s by default; `draw` gives another model's draw from the member's generator."""
    out = {}
    for i in range(1, members + 1):
        rng = random.Random(f"{seed}:{member_name(i)}")
        out[member_name(i)] = [draw(rng) for _ in range(steps)]
    return out


def lognormal_workload(params: dict, workdir: Path) -> dict:
    """teamgraph: N members x 10 calls, lognormal latencies, max_parallel = N."""
    members, steps = int(params["members"]), int(params.get("steps", STEPS))
    seed = int(params.get("seed", 0))
    names = frozenset(member_name(i) for i in range(1, members + 1))
    meter = ModelMeter()
    model = LognormalTeamModel(
        policies={LEADER: fan_out_leader(members, 1), "*": echo_member(steps=steps)}, meter=meter, slow=names, seed=seed
    )
    saver, conn, suffix = sqlite_saver(workdir / "lognormal.sqlite", params)
    with probed(saver) as probe:
        team, graph = build_team(workdir, model, saver, max_parallel=members)
        config = {"configurable": {"thread_id": "lognormal"}}
        _output, timing = timed_invoke(graph, {"messages": [HumanMessage(TASK)]}, config, meter)
    messages = message_count(graph.get_state(config).values)  # NOTE: histories are not in the output
    check_calls(model, {name: steps for name in names}, f"lognormal {members}x{steps}")
    probe_puts = probe.calls["checkpoint_put"]
    puts = count_rows(conn, "checkpoints")
    conn.close()
    critical = max(model.latency_by_agent.values())
    ratio = timing["seconds"] / critical
    return {
        "system": SYSTEM,
        "workload": f"lognormal ({members} members, max_parallel={members}){suffix}",
        "members": members,
        "steps": steps,
        "messages": messages,
        "makespan_s": timing["seconds"],
        "critical_path_s": critical,
        "makespan_over_critical": ratio,
        "checkpoint_puts": puts,
        "puts_per_model_call": puts / timing["model_calls"],
        "probe_puts": probe_puts,
        "overhead_ms_per_call": None,
        "note": f"makespan/critical {ratio:.2f}; {puts / timing['model_calls']:.2f} checkpoint puts per call",
        **timing,
    }


# --- the baselines on the same workload ------------------------------------------------


class _PlannedModel(ScriptedChatModel):
    """A baseline agent's model that sleeps its planned latency on every worker call."""

    delays: list[float] = []

    def _delay_seconds(self) -> float:
        index = self._calls - 1
        return self.delays[index] if index < len(self.delays) else 0.0


def _echo_policy(agent: str, steps: int, then: AIMessage | None):
    """Worker: `steps - 1` echo calls, then `then` (a handoff) or a final answer."""

    def policy(messages: Sequence[BaseMessage], n: int) -> AIMessage:
        mine = sum(
            1
            for m in messages
            if isinstance(m, ToolMessage) and m.name == "echo" and m.tool_call_id.startswith(f"{agent}-")
        )
        if mine < steps - 1:
            return call_tool("echo", {"text": filler(f"{agent} echo {mine}")}, call_id=f"{agent}-{mine}")
        return then if then is not None else say(filler(f"{agent} answer"))

    return policy


def _baseline_row(
    system: str, graph, members: int, steps: int, plan: dict, meter: ModelMeter, saver_puts: list[int]
) -> dict:
    config = {"configurable": {"thread_id": system}, "recursion_limit": 50 * members * steps}
    output, timing = timed_invoke(graph, {"messages": [HumanMessage(TASK)]}, config, meter)
    critical = max(sum(v) for v in plan.values())
    ratio = timing["seconds"] / critical
    return {
        "system": system,
        "workload": f"lognormal ({members} workers)",
        "members": members,
        "steps": steps,
        "messages": len(output["messages"]),
        "makespan_s": timing["seconds"],
        "critical_path_s": critical,
        "makespan_over_critical": ratio,
        "checkpoint_puts": saver_puts[0],
        "puts_per_model_call": saver_puts[0] / timing["model_calls"],
        "overhead_ms_per_call": None,
        "note": f"makespan/critical {ratio:.2f}; {saver_puts[0] / timing['model_calls']:.2f} puts per call",
        **timing,
    }


def _counted(saver) -> list[int]:
    count = [0]
    put = saver.put

    def counted(*a, **k):
        count[0] += 1
        return put(*a, **k)

    saver.put = counted
    return count


def supervisor_lognormal_workload(params: dict, workdir: Path) -> dict:
    """langgraph-supervisor: N ReAct workers x 10 calls, handed off one at a time."""
    from langgraph_supervisor import create_supervisor

    from bench.baselines import create_react_agent, echo

    members, steps = int(params["members"]), int(params.get("steps", STEPS))
    plan = _plan(members, steps, int(params.get("seed", 0)))
    meter = ModelMeter()
    names = [f"worker_{i}" for i in range(1, members + 1)]
    workers = [
        create_react_agent(
            _PlannedModel(agent=n, meter=meter, delays=plan[member_name(i + 1)], policy=_echo_policy(n, steps, None)),
            tools=[echo],
            name=n,
        )
        for i, n in enumerate(names)
    ]

    def boss(messages: Sequence[BaseMessage], n: int) -> AIMessage:
        # NOTE: langgraph-supervisor 0.0.31 follows only the first of several handoffs in one
        # message (measured: the other workers never ran), so workers go one at a time.
        done = sum(1 for m in messages if isinstance(m, ToolMessage) and (m.name or "").startswith("transfer_to_"))
        if done < members:
            return call_tool(f"transfer_to_{names[done]}", {}, call_id=f"h-{done}")
        return say(filler("supervisor final answer"))

    supervisor = create_supervisor(workers, model=ScriptedChatModel(agent="supervisor", meter=meter, policy=boss))
    saver, conn = fresh_sqlite_saver(workdir / "supervisor.sqlite")
    puts = _counted(saver)
    row = _baseline_row(
        "langgraph-supervisor", supervisor.compile(checkpointer=saver), members, steps, plan, meter, puts
    )
    conn.close()
    return row


def swarm_lognormal_workload(params: dict, workdir: Path) -> dict:
    """langgraph-swarm: N ReAct workers x 10 calls, one active agent at a time (a relay)."""
    from langgraph_swarm import create_handoff_tool, create_swarm

    from bench.baselines import create_react_agent, echo

    members, steps = int(params["members"]), int(params.get("steps", STEPS))
    plan = _plan(members, steps, int(params.get("seed", 0)))
    meter = ModelMeter()
    names = [f"worker_{i}" for i in range(1, members + 1)]
    agents = []
    for i, n in enumerate(names):
        nxt = names[i + 1] if i + 1 < members else None
        then = call_tool(f"transfer_to_{nxt}", {}, call_id=f"{n}-handoff") if nxt else None
        tools = [echo] + ([create_handoff_tool(agent_name=nxt)] if nxt else [])
        agents.append(
            create_react_agent(
                _PlannedModel(
                    agent=n, meter=meter, delays=plan[member_name(i + 1)], policy=_echo_policy(n, steps, then)
                ),
                tools=tools,
                name=n,
            )
        )
    saver, conn = fresh_sqlite_saver(workdir / "swarm.sqlite")
    puts = _counted(saver)
    graph = create_swarm(agents, default_active_agent=names[0]).compile(checkpointer=saver)
    row = _baseline_row("langgraph-swarm", graph, members, steps, plan, meter, puts)
    conn.close()
    return row


# --- what Studio and LangSmith receive -------------------------------------------------


def _studio_bytes(chunk) -> int:
    """Bytes of one `values` chunk as the LangGraph API server serializes it for Studio."""
    try:
        from langgraph_api.serde import json_dumpb
    except ImportError:  # pragma: no cover - langgraph-api is in the bench extra
        import json

        from langchain_core.load import dumpd

        return len(json.dumps(chunk, default=lambda o: dumpd(o)).encode())
    return len(json_dumpb(chunk))


def _observe(graph, config: dict, endpoint, count) -> dict:
    """Stream one run's `values` as Studio gets them, with tracing on; bytes per message, by key and by run.

    `count(values)` gives the messages of the final state. Studio (langgraph-api) streams a
    graph's output keys (``graph.output_channels``), so the chunks are read with those.
    """
    streamed, chunks, by_key = 0, 0, Counter[str]()
    start = time.perf_counter()
    stream = graph.stream(
        {"messages": [HumanMessage(TASK)]},
        config,
        stream_mode="values",
        durability="sync",
        output_keys=graph.output_channels,
    )
    for chunk in stream:
        streamed += _studio_bytes(chunk)
        chunks += 1
        by_key.update({key: _studio_bytes(value) for key, value in chunk.items()})
    seconds = time.perf_counter() - start
    endpoint.flush()
    messages = count(graph.get_state(config).values)
    runs = sorted(endpoint.breakdown().items(), key=lambda item: -item[1].total)
    # NOTE: an LLM run's inputs are its prompt (the agent's whole view): inherent, and quadratic in a run.
    prompts = sum(run.parts.get("inputs", 0) for _key, run in runs if run.run_type == "llm")
    traced = endpoint.bytes_received
    return {
        "messages": messages,
        "values_chunks": chunks,
        "values_bytes": streamed,
        "values_bytes_per_message": streamed / messages,
        "trace_bytes": traced,
        "trace_requests": endpoint.requests,
        "trace_bytes_per_message": traced / messages,
        "trace_prompt_bytes_per_message": prompts / messages,
        "trace_other_bytes_per_message": (traced - prompts) / messages,
        "values_bytes_by_key": dict(by_key.most_common()),
        "trace_bytes_by_run": {key: {"runs": run.runs, "bytes": run.total, **run.parts} for key, run in runs},
        "seconds": seconds,
        "overhead_ms_per_call": None,
        "note": f"values {streamed / messages / 1000:.1f} KB/msg, trace {traced / messages / 1000:.1f} KB/msg "
        f"(LLM prompts {prompts / messages / 1000:.1f})",
    }


def _traced() -> FakeLangSmith:
    """A fake LangSmith endpoint, with this process's tracing pointed at it."""
    endpoint = FakeLangSmith()
    # NOTE: langsmith reads (and caches) its environment on first use: set it before any run.
    os.environ.update(
        {
            "LANGSMITH_ENDPOINT": endpoint.url,
            "LANGSMITH_TRACING": "true",
            "LANGSMITH_API_KEY": "bench-dummy-key",
            "LANGSMITH_PROJECT": "bench",
        }
    )
    return endpoint


def observed_workload(params: dict, workdir: Path) -> dict:
    """Delegation at ~80 / ~300 messages: bytes per message in a `values` stream and a LangSmith trace."""
    target = int(params["messages"])
    rounds = OBSERVED_ROUNDS.get(target) or max(1, (target - 5) // 12)
    with _traced() as endpoint:
        meter = ModelMeter()
        model = TeamModel(policies={LEADER: delegation_leader(rounds), "*": echo_member()}, meter=meter)
        saver, conn = fresh_sqlite_saver(workdir / "observed.sqlite")
        _team, graph = build_team(workdir, model, saver)
        row = _observe(graph, {"configurable": {"thread_id": "observed"}}, endpoint, message_count)
        conn.close()
    return {"system": SYSTEM, "workload": "observed bytes (values stream, LangSmith trace)", "rounds": rounds, **row,
            "model_calls": meter.calls, "model_seconds": meter.seconds}  # fmt: skip


def supervisor_observed_workload(params: dict, workdir: Path) -> dict:
    """langgraph-supervisor's delegation (10 messages a round) at ~80 / ~300 messages, observed the same way."""
    from bench.baselines import build_supervisor

    rounds = max(1, int(params["messages"]) // 10)
    with _traced() as endpoint:
        meter = ModelMeter()
        saver, conn = fresh_sqlite_saver(workdir / "supervisor-observed.sqlite")
        graph = build_supervisor(rounds, meter, saver)
        config = {"configurable": {"thread_id": "observed"}, "recursion_limit": 20 * rounds + 50}
        row = _observe(graph, config, endpoint, lambda values: len(values["messages"]))
        conn.close()
    return {"system": "langgraph-supervisor", "workload": "observed bytes (values stream, LangSmith trace)",
            "rounds": rounds, **row, "model_calls": meter.calls, "model_seconds": meter.seconds}  # fmt: skip


WORKLOADS: dict[str, Workload] = {
    "teamgraph-lognormal": Workload(
        lognormal_workload,
        # NOTE: on LangGraph's SqliteSaver as the baselines run (synchronous=FULL: an fsync
        # per commit), and on the saver ``Team(home=...)`` opens (synchronous=NORMAL).
        full=[{"members": n, **saver} for saver in ({}, {"saver": "teamgraph"}) for n in (8, 16)],
        quick=[{"members": 4, "steps": 3}],
        repeats=2,
        description=lognormal_workload.__doc__,
    ),
    "supervisor-lognormal": Workload(
        supervisor_lognormal_workload,
        full=[{"members": 8}, {"members": 16}],
        quick=[{"members": 4, "steps": 3}],
        repeats=2,
        description=supervisor_lognormal_workload.__doc__,
    ),
    "swarm-lognormal": Workload(
        swarm_lognormal_workload,
        full=[{"members": 8}, {"members": 16}],
        quick=[],
        description=swarm_lognormal_workload.__doc__,
    ),
    "teamgraph-observed": Workload(
        observed_workload,
        full=[{"messages": 80}, {"messages": 300}],
        quick=[{"messages": 80}],
        description=observed_workload.__doc__,
    ),
    "supervisor-observed": Workload(
        supervisor_observed_workload,
        full=[{"messages": 80}, {"messages": 300}],
        quick=[],
        description=supervisor_observed_workload.__doc__,
    ),
}
