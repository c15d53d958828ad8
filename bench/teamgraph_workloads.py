"""teamgraph's own workloads (sections 1-6 of the benchmarks issue).

Every workload runs teamgraph offline: one `TeamModel` (a `bench.scripted`
scripted model) serves the whole team and asks a per-agent *policy* what the
calling agent says next. teamgraph names the caller in every model call's
metadata (`teamgraph_agent`), and each policy decides from the agent's own
conversation only, so a fresh process resuming a thread carries on where it was.
Checkpoints go to a `SqliteSaver` on a fresh file (`bench.harness.fresh_sqlite_saver`,
the baselines' setup) and every run passes `durability="sync"`.

- ``teamgraph`` (sections 1 and 3): the supervisor's round with teamgraph's own
  tools. The leader creates two researchers (one step), then per round:
  leader ``ask_sub_agent(Researcher_1, ...)`` -> Researcher_1 calls ``echo``, then
  answers (its answer is the leader's tool result) -> leader
  ``ask_sub_agent(Researcher_2, ...)`` -> Researcher_2 the same. After R rounds
  the leader answers. 6 model calls and 12 messages per round (+2 calls and +5
  messages for the setup and the final answer). Every model-written text is ~500
  characters, and so is every echo argument. A member's echo call carries no
  prose: teamgraph forwards every text a member writes to the leader as progress,
  which would answer the leader's ``ask_sub_agent`` with the reasoning.
  ``teamgraph`` with ``saver="teamgraph"`` runs on the Team's own SQLite setup
  (``teamgraph.checkpoints.open_sqlite_saver``: WAL, synchronous=NORMAL) instead.
- ``teamgraph-storage`` (sections 2, 3 and 5): the same run sized to 100 / 500 /
  1 000 / 5 000 messages; at 500 and 5 000, 3 fresh processes then each open a copy
  of the file, ``get_state`` and take one more step (the leader answers a new user
  message); the fastest is kept.
- ``teamgraph-cadence``: the 500 / 1 000 / 5 000-message runs at other DeltaChannel
  snapshot cadences (``teamgraph.state.HISTORY_SNAPSHOT_FREQUENCY``, set in the
  child before the graph is compiled): storage vs resume time, to choose the cadence.
- ``teamgraph-parallel`` (section 4): 8 members x 10 steps (9 echo calls, then an
  answer), each member call sleeping a seeded random 20-80 ms; makespan over the
  critical path (the slowest member's own total latency). The leader's model is
  instant. ``Policy(max_parallel=8)`` (default) vs 1; members that also write
  ~500 characters of progress with every echo call (each one wakes the leader);
  and, as a diagnostic, LangGraph's thread pool sized with ``max_concurrency=16``.
  ``lockstep_bound_s`` is the makespan of the same calls with zero framework time
  and one call per member per superstep.
- ``teamgraph-scale`` (section 6): 5, 20, 50 members for 10 rounds; a round is
  every member echoing and answering once, then the leader messaging each again.

Each row also carries `breakdown_ms_per_call` (where the wall time goes: checkpoint
writes, router, agent steps, model wrapper, tools) and, for storage rows,
`storage_breakdown` (where the bytes go), used by the targets' notes.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.sqlite import SqliteSaver
from pydantic import PrivateAttr

from bench.harness import REPO_ROOT, db_bytes, fresh_sqlite_saver, peak_rss_mb, sqlite_saver, timed_invoke
from bench.registry import Workload
from bench.scripted import ModelMeter, ScriptedChatModel, call_tool, filler, say

SYSTEM = "teamgraph"
LEADER = "Team Leader"
AGENT_KEY = "teamgraph_agent"
ROLE = "researcher"
ROLE_NAME = "Researcher"
TASK = "Run R rounds of delegation between two researchers. " + filler("task", 400)
RESUME_INPUT = "One more thing: summarise the rounds. " + filler("resume", 400)

MESSAGES_PER_ROUND = 12
MESSAGES_FIXED = 5
"""A delegation run of R rounds holds 12 R + 5 messages (histories of every agent)."""

FULL_ROUNDS = (10, 50, 100)
STORAGE_MESSAGES = (100, 500, 1000, 5000)
RESUME_AT = (500, 5000)
CADENCES = (300, 1000, 3000, 10_000)
"""Snapshot cadences compared with teamgraph's default; the default itself is skipped
(its rows are the `teamgraph-storage` rows)."""
RESUME_REPEATS = 5
NO_COMPACTION_TOKENS = 1_000_000_000
"""A context window no workload here comes near: no compaction calls."""
NO_BUDGET_CALLS = 1_000_000
"""A model-call budget no workload here comes near."""

TeamPolicy = Callable[[str, Sequence[BaseMessage], int], AIMessage]
"""`policy(agent, messages, call_index) -> AIMessage`; messages = [system, *history]."""


def rounds_for(messages: int) -> int:
    """Delegation rounds whose run holds about `messages` messages."""
    return max(1, round((messages - MESSAGES_FIXED) / MESSAGES_PER_ROUND))


# --- the team's scripted model -----------------------------------------------------


def _unused_policy(messages: Sequence[BaseMessage], n: int) -> AIMessage:
    raise AssertionError("TeamModel dispatches to `policies`")


class TeamModel(ScriptedChatModel):
    """One scripted model for a whole team: the calling agent picks the policy.

    - `policies` maps a display name (or `"*"`, any other agent) to a `TeamPolicy`.
    - `latency_ms=(lo, hi)` sleeps a uniform random delay per call, seeded per agent
      (`f"{seed}:{agent}"`), for the agents in `slow` (every agent if None).
    - Time inside each call, delay included, goes to `meter`; each agent's total
      delay is in `latency_by_agent`; `invoke_seconds` is the time in `invoke`
      (langchain's chat-model machinery around the call included).
    """

    policy: Any = _unused_policy
    policies: dict[str, Any]
    slow: frozenset[str] | None = None

    _agent_calls: dict[str, int] = PrivateAttr(default_factory=dict)
    _agent_rngs: dict[str, random.Random] = PrivateAttr(default_factory=dict)
    _delays: dict[str, list[float]] = PrivateAttr(default_factory=dict)
    _invoke_seconds: list[float] = PrivateAttr(default_factory=lambda: [0.0])

    @property
    def latency_by_agent(self) -> dict[str, float]:
        """Seconds each agent's calls slept so far."""
        return {agent: sum(d) for agent, d in self._delays.items()}

    @property
    def delays_by_agent(self) -> dict[str, list[float]]:
        """Each agent's per-call delays, in call order."""
        return {agent: list(d) for agent, d in self._delays.items()}

    @property
    def calls_by_agent(self) -> dict[str, int]:
        """Model calls so far, by agent."""
        return dict(self._agent_calls)

    @property
    def invoke_seconds(self) -> float:
        """Seconds spent in `invoke` so far (all threads)."""
        return self._invoke_seconds[0]

    def invoke(self, input, config=None, *, stop=None, **kwargs):
        start = time.perf_counter()
        try:
            return super().invoke(input, config, stop=stop, **kwargs)
        finally:
            with self._lock:
                self._invoke_seconds[0] += time.perf_counter() - start

    def _agent_delay(self, agent: str) -> float:
        if self.latency_ms is None or (self.slow is not None and agent not in self.slow):
            return 0.0
        rng = self._agent_rngs.setdefault(agent, random.Random(f"{self.seed}:{agent}"))
        lo, hi = self.latency_ms
        return rng.uniform(lo, hi) / 1000.0

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        start = time.perf_counter()
        metadata = getattr(run_manager, "metadata", None) or {}
        agent = metadata.get(AGENT_KEY, LEADER)
        with self._lock:
            index = self._agent_calls.get(agent, 0)
            self._agent_calls[agent] = index + 1
            delay = self._agent_delay(agent)
        policy = self.policies.get(agent) or self.policies["*"]
        message = policy(agent, messages, index)
        if message.name is None:
            message.name = agent
        if delay:
            time.sleep(delay)
            with self._lock:
                self._delays.setdefault(agent, []).append(delay)
        self.meter.record(time.perf_counter() - start)
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        return self._generate(messages, stop, run_manager, **kwargs)


# --- conversation helpers ----------------------------------------------------------


def _ai_count(messages: Sequence[BaseMessage]) -> int:
    return sum(1 for m in messages if isinstance(m, AIMessage))


def _tool_results(messages: Sequence[BaseMessage], name: str) -> int:
    return sum(1 for m in messages if isinstance(m, ToolMessage) and m.name == name)


def _called(messages: Sequence[BaseMessage], name: str) -> int:
    return sum(1 for m in messages if isinstance(m, AIMessage) for c in m.tool_calls if c["name"] == name)


def _results_received(messages: Sequence[BaseMessage]) -> int:
    """Members' final results that reached the leader (batched envelopes included)."""
    return sum(m.text.count("Result from ") for m in messages if isinstance(m, HumanMessage))


def _last_is_echo(messages: Sequence[BaseMessage]) -> bool:
    last = messages[-1] if messages else None
    return isinstance(last, ToolMessage) and last.name == "echo"


def _slug(agent: str) -> str:
    return agent.lower().replace(" ", "-")


def _multi_call(agent: str, k: int, calls: list[tuple[str, dict]], content: str = "") -> AIMessage:
    """One assistant message calling several tools (ids unique within the thread)."""
    return AIMessage(
        content=content,
        tool_calls=[
            {"name": name, "args": args, "id": f"{_slug(agent)}-{k}-{i}"} for i, (name, args) in enumerate(calls)
        ],
    )


def member_name(i: int) -> str:
    """The display name of the i-th researcher (1-based)."""
    return f"{ROLE_NAME}_{i}"


def echo_member(steps: int = 2, progress: bool = False) -> TeamPolicy:
    """A member: `steps - 1` echo calls after each envelope it receives, then an answer.

    With `progress`, every echo call also carries ~500 characters of prose, which
    teamgraph forwards to the leader as a progress output.
    """

    def policy(agent: str, messages: Sequence[BaseMessage], n: int) -> AIMessage:
        k = _ai_count(messages)
        since = 0
        for m in reversed(messages):
            if isinstance(m, HumanMessage):
                break
            since += isinstance(m, AIMessage)
        if since >= steps - 1 and _last_is_echo(messages):
            return say(filler(f"{agent} answer {k}"))
        content = filler(f"{agent} progress {k}") if progress else ""
        return call_tool("echo", {"text": filler(f"{agent} echo {k}")}, call_id=f"{_slug(agent)}-{k}", content=content)

    return policy


def delegation_leader(rounds: int) -> TeamPolicy:
    """Leader: create two researchers, ask each in turn for R rounds, then answer.

    Any later turn (a new user message after the run) is answered at once.
    """
    a, b = member_name(1), member_name(2)

    def policy(agent: str, messages: Sequence[BaseMessage], n: int) -> AIMessage:
        k = _ai_count(messages)
        if not _called(messages, "create_sub_agent"):
            return _multi_call(
                agent, k, [("create_sub_agent", {"role_id": ROLE})] * 2, content=filler(f"leader plan {k}")
            )
        done = _tool_results(messages, "ask_sub_agent")
        if done >= 2 * rounds:
            return say(filler(f"leader final answer {k}"))
        target = a if done % 2 == 0 else b
        return call_tool(
            "ask_sub_agent",
            {"display_name": target, "question": filler(f"leader asks {target} {k}")},
            call_id=f"leader-{k}",
            content=filler(f"leader thinking {k}"),
        )

    return policy


def fan_out_leader(members: int, rounds: int) -> TeamPolicy:
    """Leader: create N members with a task (round 1); when all N results of a round
    are in, message every member again, R rounds in all; then answer. Otherwise it
    ends its turn silently (nothing to do)."""

    def policy(agent: str, messages: Sequence[BaseMessage], n: int) -> AIMessage:
        k = _ai_count(messages)
        if not _called(messages, "create_sub_agent"):
            calls = [
                ("create_sub_agent", {"role_id": ROLE, "task": filler(f"task {i} round 1")})
                for i in range(1, members + 1)
            ]
            return _multi_call(agent, k, calls, content=filler(f"leader plan {k}"))
        sent = 1 + _called(messages, "send_message_to_sub_agent") // members
        if _results_received(messages) < sent * members:
            return say("")
        if sent >= rounds:
            return say(filler(f"leader final answer {k}"))
        calls = [
            (
                "send_message_to_sub_agent",
                {"display_name": member_name(i), "message": filler(f"round {sent + 1} for {i}")},
            )
            for i in range(1, members + 1)
        ]
        return _multi_call(agent, k, calls)

    return policy


# --- building and measuring a team -------------------------------------------------


def _build_team(
    workdir: Path,
    model: TeamModel,
    saver,
    *,
    max_parallel: int = 8,
    slice_steps: int | None = None,
    snapshot_frequency: int | None = None,
):
    """A Team on `saver` whose members all get the bench's `echo` tool; (team, graph)."""
    import teamgraph.state
    from bench.baselines import echo
    from teamgraph import Policy, Team

    if snapshot_frequency is not None:
        # NOTE: TeamState's annotations are strings (`from __future__ import
        # annotations`), evaluated when the StateGraph is built: the module constant
        # is read then, so setting it before `compile()` sets the DeltaChannels' cadence.
        teamgraph.state.HISTORY_SNAPSHOT_FREQUENCY = snapshot_frequency
    # NOTE: compaction (issue 15) would add summary calls to long runs and change the workload
    # the baselines are compared on (bench/context_workloads.py measures it on its own); the
    # team's call budget (issue 9, 2 000 per user message) would stop the 5 000-message run.
    policy = Policy(
        max_parallel=max_parallel,
        context_tokens=NO_COMPACTION_TOKENS,
        max_model_calls=NO_BUDGET_CALLS,
        **({"slice_steps": slice_steps} if slice_steps else {}),
    )
    team = Team(model=model, home=workdir / "home", checkpointer=saver, policy=policy, tools={"*": [echo]})
    graph = team.compile()
    return team, graph


def _message_count(values: dict) -> int:
    """Messages in every agent's history (the user's task is in the leader's)."""
    return sum(len(h) for h in values.get("histories", {}).values())


def _snapshot_frequency(graph) -> int | None:
    channel = graph.channels.get("histories")
    return getattr(channel, "snapshot_frequency", None)


def check_calls(model: TeamModel, expected: dict[str, int], what: str) -> None:
    """Fail loudly if the team did not run the scripted workload in full (e.g. a
    teamgraph change made an agent stop early): a short run would look fast."""
    got = model.calls_by_agent
    wrong = {a: (got.get(a, 0), n) for a, n in expected.items() if got.get(a, 0) != n}
    if wrong:
        detail = ", ".join(f"{a}: {g} calls, expected {n}" for a, (g, n) in wrong.items())
        raise RuntimeError(f"{what} did not run as scripted: {detail}")


def _count(conn: sqlite3.Connection, table: str) -> int:
    return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


class Probe:
    """Sums the wall time spent in the parts of a teamgraph run (for the notes).

    Wraps the saver's `put` / `put_writes` (run on LangGraph's background thread;
    with durability "sync" the loop waits for them), and, in teamgraph, the router
    pass, the collaboration log's write, an agent's whole step (where the scheduler
    calls it), the system prompt and the tool calls. The model's
    own time and langchain's wrapper around it come from `TeamModel`. Parts that
    a teamgraph version lacks are skipped.
    """

    TARGETS = (
        ("router", "teamgraph.graph.router", None, "run_pass"),
        # NOTE: patched where the log's writer thread looks it up.
        ("collaboration_log", "teamgraph.audit.writer", None, "write_committed"),
        ("agent_step", "teamgraph.nodes.role_graph", None, "take_step"),
        ("system_prompt", "teamgraph.nodes.agent_step", None, "system_prompt"),
        ("tool_calls", "teamgraph.nodes.role_graph", None, "run_tool_calls"),
    )

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self._undo: list[Callable[[], None]] = []

    def _wrap(self, name: str, fn: Callable) -> Callable:
        seconds, calls = self.seconds, self.calls

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds[name] += time.perf_counter() - start
                calls[name] += 1

        return timed

    def _patch(self, owner: Any, attr: str, name: str) -> None:
        """Replace `owner.attr` (a class's method, a module's function or an
        instance's bound method) by a timed wrapper, remembering how to undo it."""
        if isinstance(owner, type):
            original = owner.__dict__.get(attr)
        else:
            original = getattr(owner, attr, None)
        if original is None or not callable(original):
            return
        setattr(owner, attr, self._wrap(name, original))
        self._undo.append(lambda: setattr(owner, attr, original))

    def install(self, saver: Any) -> Probe:
        """Wrap the saver's writes and teamgraph's parts (call before building the team)."""
        import importlib

        for method in ("put", "put_writes"):
            self._patch(saver, method, f"checkpoint_{method}")
        for name, module_name, cls, attr in self.TARGETS:
            try:
                owner = importlib.import_module(module_name)
            except ImportError:
                continue
            if cls is not None:
                owner = getattr(owner, cls, None)
            if owner is not None:
                self._patch(owner, attr, name)
        return self

    def uninstall(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    def breakdown(self, timing: dict, model: TeamModel) -> dict[str, float]:
        """Milliseconds per model call: where the run's wall time went.

        `agent_step_machinery` is an agent's step minus the model call (with
        langchain's wrapper), the tool calls and the system prompt: the model view,
        the traced run around the call, building the step's result.
        `collaboration_log` runs on the log's writer thread, overlapping the step.
        `pregel_loop_other` is what is left of the wall time (the outer loop's
        bookkeeping, plus any checkpoint work not overlapped). Steps run on the pool's
        threads and the log on its own: parts are summed over threads and may exceed
        the wall time.
        """
        calls = timing["model_calls"] or 1
        s = self.seconds
        model_inside = timing["model_seconds"]
        wrapper = max(0.0, model.invoke_seconds - model_inside)
        step_rest = s["agent_step"] - model.invoke_seconds - s["tool_calls"] - s["system_prompt"]
        writes = s["checkpoint_put"] + s["checkpoint_put_writes"]
        other = timing["seconds"] - writes - s["router"] - s["agent_step"]
        parts = {
            "checkpoint_put": s["checkpoint_put"],
            "checkpoint_put_writes": s["checkpoint_put_writes"],
            "router": s["router"],
            "collaboration_log": s["collaboration_log"],
            "agent_step_machinery": max(0.0, step_rest),
            "system_prompt": s["system_prompt"],
            "tool_calls": s["tool_calls"],
            "chat_model_wrapper": wrapper,
            "pregel_loop_other": max(0.0, other),
        }
        return {k: round(v / calls * 1000.0, 3) for k, v in parts.items()}


@contextmanager
def probed(saver: Any) -> Iterator[Probe]:
    """A `Probe` installed for the duration of the block."""
    probe = Probe().install(saver)
    try:
        yield probe
    finally:
        probe.uninstall()


def storage_breakdown(conn: sqlite3.Connection, sample: int = 300) -> dict[str, Any]:
    """Where the file's bytes go: checkpoint blobs by channel, writes by channel,
    DeltaChannel snapshots, and what SQLite itself adds (pages, indexes).

    Checkpoint blobs are decoded for every snapshot (a blob > 3x the median) and a
    uniform sample of the others (extrapolated), re-serializing each channel value.
    """
    from langgraph.checkpoint.serde.types import _DeltaSnapshot

    from teamgraph.checkpoints import TeamSerializer

    # NOTE: the Team's serializer reads what the Team's saver wrote (and LangGraph's msgpack).
    serde = TeamSerializer()
    rows = conn.execute("SELECT rowid, length(checkpoint), length(metadata) FROM checkpoints").fetchall()
    if not rows:
        return {}
    lengths = sorted(r[1] for r in rows)
    median = lengths[len(lengths) // 2]
    big = [r[0] for r in rows if r[1] > 3 * median]
    small = [r[0] for r in rows if r[1] <= 3 * median]
    step = max(1, len(small) // sample)
    picked = small[::step]
    scale = len(small) / max(1, len(picked))
    by_channel: Counter[str] = Counter()
    snapshot_bytes = 0.0
    for rowid in big + picked:
        weight = 1.0 if rowid in big else scale
        type_, blob = conn.execute("SELECT type, checkpoint FROM checkpoints WHERE rowid = ?", (rowid,)).fetchone()
        checkpoint = serde.loads_typed((type_, blob))
        used = 0
        for channel, value in (checkpoint.get("channel_values") or {}).items():
            n = len(serde.dumps_typed(value)[1])
            used += n
            if isinstance(value, _DeltaSnapshot):
                snapshot_bytes += n * weight
                by_channel[f"{channel} (snapshots)"] += n * weight
            else:
                by_channel[channel] += n * weight
        by_channel["(versions, ids, other checkpoint fields)"] += max(0, len(blob) - used) * weight
        del checkpoint, blob
    writes = {
        ch: {"count": n, "bytes": b}
        for ch, n, b in conn.execute(
            "SELECT channel, COUNT(*), SUM(length(value)) FROM writes GROUP BY channel ORDER BY 3 DESC"
        )
    }
    checkpoint_blobs = sum(r[1] for r in rows)
    metadata = sum(r[2] for r in rows)
    return {
        "checkpoints": len(rows),
        "snapshots": len(big),
        "checkpoint_blob_bytes": checkpoint_blobs,
        "checkpoint_blob_by_channel": {k: int(v) for k, v in by_channel.most_common()},
        "snapshot_bytes": int(snapshot_bytes),
        "metadata_bytes": metadata,
        "writes_by_channel": writes,
        "writes_bytes": sum(w["bytes"] or 0 for w in writes.values()),
    }


# --- section 1, 2, 3, 5: delegation rounds ------------------------------------------


def run_delegation(
    params: dict, workdir: Path, *, label: str, path: Path | None = None, with_storage: bool = False
) -> dict:
    """Run R delegation rounds on a fresh SQLite file; measure time, bytes, breakdown."""
    rounds = int(params["rounds"])
    meter = ModelMeter()
    model = TeamModel(policies={LEADER: delegation_leader(rounds), "*": echo_member()}, meter=meter)
    path = path or workdir / "teamgraph.sqlite"
    saver, conn, suffix = sqlite_saver(path, params)
    label += suffix
    with probed(saver) as probe:
        team, graph = _build_team(workdir, model, saver, snapshot_frequency=params.get("snapshot_frequency"))
        config = {"configurable": {"thread_id": thread_id(rounds)}}
        _output, timing = timed_invoke(graph, {"messages": [HumanMessage(TASK)]}, config, meter)
    messages = _message_count(graph.get_state(config).values)  # NOTE: histories are not in the output
    check_calls(
        model,
        {LEADER: 2 * rounds + 2, member_name(1): 2 * rounds, member_name(2): 2 * rounds},
        f"delegation R={rounds}",
    )
    size = db_bytes(path, conn)
    row = {
        "system": SYSTEM,
        "workload": label,
        "rounds": rounds,
        "messages": messages,
        "db_bytes": size,
        "snapshot_frequency": _snapshot_frequency(graph),
        "checkpoints": _count(conn, "checkpoints"),
        "writes": _count(conn, "writes"),
        "breakdown_ms_per_call": probe.breakdown(timing, model),
        **timing,
    }
    # NOTE: peak RSS of the run itself, before the storage breakdown decodes blobs.
    row["peak_rss_mb"] = peak_rss_mb()
    if with_storage:
        row["storage_breakdown"] = storage_breakdown(conn)
    conn.close()
    return row


def thread_id(rounds: int) -> str:
    return f"teamgraph-r{rounds}"


def delegation_workload(params: dict, workdir: Path) -> dict:
    """teamgraph's leader delegating R rounds to two researchers (ask_sub_agent + echo)."""
    return run_delegation(params, workdir, label="delegation rounds")


def storage_workload(params: dict, workdir: Path) -> dict:
    """Checkpoint storage at N messages (delegation rounds); with `resume`, fresh
    processes then open the thread, get_state and take one more step."""
    target = int(params["messages"])
    rounds = rounds_for(target)
    path = workdir / "teamgraph.sqlite"
    label = "storage + resume" if params.get("resume") else "checkpoint storage"
    # NOTE: the file a user's Team writes (the Team's saver and serializer), which the
    # resumed process then opens.
    run = {"rounds": rounds, "snapshot_frequency": params.get("snapshot_frequency"), "saver": "teamgraph"}
    row = run_delegation(run, workdir, label=label, path=path, with_storage=True)
    notes = [f"cadence {row['snapshot_frequency']}"]
    if params.get("resume"):
        resume = measure_resume(path, rounds, row["snapshot_frequency"], int(params.get("repeats", RESUME_REPEATS)))
        row["resume"] = resume
        notes.append(f"resume {resume['in_process_ms']:.0f} ms (process {resume['process_ms']:.0f} ms)")
    row["note"] = ", ".join(notes)
    return row


def cadence_workload(params: dict, workdir: Path) -> dict:
    """storage (+ resume unless `resume` is false) at another DeltaChannel snapshot cadence."""
    return storage_workload({**params, "resume": params.get("resume", True)}, workdir)


# --- section 5: resume in a fresh process --------------------------------------------


def measure_resume(path: Path, rounds: int, snapshot_frequency: int | None, repeats: int) -> dict:
    """Run `repeats` fresh processes that resume the thread; the fastest one's timings."""
    runs = []
    for i in range(repeats):
        # NOTE: each resumed step is written to the file; start every repeat from the
        # same state by resuming a copy.
        copy = path.with_name(f"resume-{i}.sqlite")
        _copy_db(path, copy)
        args = {"path": str(copy), "rounds": rounds, "snapshot_frequency": snapshot_frequency}
        cmd = [sys.executable, "-m", "bench.teamgraph_workloads", "resume", json.dumps(args)]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p),
        }
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
        wall = time.perf_counter() - start
        line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("RESUME ")), None)
        if proc.returncode or line is None:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-10:])
            raise RuntimeError(f"resume child failed ({proc.returncode}): {tail}")
        child = json.loads(line[len("RESUME ") :])
        runs.append(
            {
                **child,
                "process_ms": wall * 1000.0,
                "history_ms": child["get_state_ms"] + child["step_ms"],
                "history_cpu_ms": child["get_state_cpu_ms"] + child["step_cpu_ms"],
                "startup_ms": wall * 1000.0 - child["in_process_ms"],
            }
        )
        copy.unlink(missing_ok=True)
        for suffix in ("-wal", "-shm"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)
    # NOTE: timings are the fastest of the repeats (contention only ever adds time);
    # the median of the in-process time is kept too.
    keys = [k for k in runs[0] if isinstance(runs[0][k], (int, float))]
    fastest = min(runs, key=lambda r: r["in_process_ms"])
    out = {k: fastest[k] for k in keys}
    out["median_in_process_ms"] = statistics.median(r["in_process_ms"] for r in runs)
    out["repeats"] = repeats
    return out


def _copy_db(src: Path, dst: Path) -> None:
    """Copy a SQLite database with the backup API (consistent, WAL folded in)."""
    for stale in (dst, Path(f"{dst}-wal"), Path(f"{dst}-shm")):
        stale.unlink(missing_ok=True)
    source = sqlite3.connect(str(src))
    target = sqlite3.connect(str(dst))
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def resume_child(args: dict) -> dict:
    """In a fresh process: open the SQLite file, get_state, take one more step.

    Returns milliseconds for each phase; `in_process_ms` = open (connect, build and
    compile the team) + get_state + step. Interpreter start-up and imports are the
    rest of the parent's `process_ms`.
    """
    clock = _Clock()
    path = Path(args["path"])
    rounds = int(args["rounds"])
    meter = ModelMeter()
    model = TeamModel(policies={LEADER: delegation_leader(rounds), "*": echo_member()}, meter=meter)
    # NOTE: a resumed process opens what `Team(home=...)` opens, on the file the run wrote
    # (or, with `saver="sqlite"`, LangGraph's own SqliteSaver: rule 8's with/without).
    if args.get("saver") == "sqlite":
        conn = sqlite3.connect(path, check_same_thread=False)
        saver = SqliteSaver(conn)
    else:
        saver, conn, _ = sqlite_saver(path, {"saver": "teamgraph"})
    team, graph = _build_team(path.parent, model, saver, snapshot_frequency=args.get("snapshot_frequency"))
    config = {"configurable": {"thread_id": thread_id(rounds)}}
    clock.lap("open")
    state = graph.get_state(config)
    before = _message_count(state.values)
    clock.lap("get_state")
    graph.invoke({"messages": [HumanMessage(RESUME_INPUT)]}, config, durability="sync")
    clock.lap("step")
    after = _message_count(graph.get_state(config).values)  # NOTE: histories are not in the output
    if after != before + 2 or meter.calls != 1:
        raise RuntimeError(f"resume step: {before} -> {after} messages, {meter.calls} model calls")
    conn.close()
    out = clock.result()
    out["in_process_ms"] = out["open_ms"] + out["get_state_ms"] + out["step_ms"]
    out["in_process_cpu_ms"] = out["open_cpu_ms"] + out["get_state_cpu_ms"] + out["step_cpu_ms"]
    return {**out, "messages_before": before, "peak_rss_mb": peak_rss_mb()}


class _Clock:
    """Wall and CPU milliseconds per phase (CPU time is less sensitive to a busy machine)."""

    def __init__(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        self._laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self._laps[f"{name}_ms"] = (wall - self._wall) * 1000.0
        self._laps[f"{name}_cpu_ms"] = (cpu - self._cpu) * 1000.0
        self._wall, self._cpu = wall, cpu

    def result(self) -> dict[str, float]:
        return dict(self._laps)


# --- section 4: parallel makespan ------------------------------------------------------


MODEL_LIKE_PARALLEL = {"members": 8, "steps": 3, "max_parallel": 8, "latency_ms": [1000, 3000], "saver": "teamgraph"}
"""The parallel workload with calls as long as a hosted model's, on the Team's saver."""


def parallel_workload(params: dict, workdir: Path) -> dict:
    """N members x S steps with seeded random 20-80 ms model latency: makespan / critical path."""
    members, steps = int(params["members"]), int(params["steps"])
    max_parallel = int(params.get("max_parallel", 8))
    slice_steps = params.get("slice_steps")
    progress = bool(params.get("progress", False))
    lo, hi = params.get("latency_ms", (20, 80))
    names = frozenset(member_name(i) for i in range(1, members + 1))
    meter = ModelMeter()
    model = TeamModel(
        policies={LEADER: fan_out_leader(members, 1), "*": echo_member(steps=steps, progress=progress)},
        meter=meter,
        latency_ms=(lo, hi),
        slow=names,
        seed=int(params.get("seed", 0)),
    )
    path = workdir / "parallel.sqlite"
    saver, conn, suffix = sqlite_saver(path, params)
    with probed(saver) as probe:
        team, graph = _build_team(workdir, model, saver, max_parallel=max_parallel, slice_steps=slice_steps)
        config = {"configurable": {"thread_id": "parallel"}}
        if params.get("max_concurrency"):
            # NOTE: diagnostic only: LangGraph runs a superstep's tasks (and the
            # checkpoint writes) on a thread pool of `max_concurrency` workers,
            # min(32, CPUs + 4) when unset, which teamgraph does not set.
            config["max_concurrency"] = int(params["max_concurrency"])
        _output, timing = timed_invoke(graph, {"messages": [HumanMessage(TASK)]}, config, meter)
    messages = _message_count(graph.get_state(config).values)  # NOTE: histories are not in the output
    check_calls(model, {name: steps for name in names}, f"parallel {members}x{steps}")
    latency = model.latency_by_agent
    critical = max(latency.values())
    # The makespan of the same calls run in lockstep (step j of every member in one
    # superstep) with zero framework time: what one call per superstep costs by itself.
    delays = list(model.delays_by_agent.values())
    lockstep = sum(max(d[j] for d in delays if j < len(d)) for j in range(max(len(d) for d in delays)))
    makespan = timing["seconds"]
    supersteps = _count(conn, "checkpoints")
    conn.close()
    ratio = makespan / critical
    variant = f"max_parallel={max_parallel}, slice_steps={team.runtime.policy.slice_steps}"
    variant += ", progress" if progress else ""
    variant += f", {lo}-{hi} ms calls" if (lo, hi) != (20, 80) else ""
    if params.get("max_concurrency"):
        variant += f", max_concurrency={params['max_concurrency']}"
    variant += suffix
    return {
        "system": SYSTEM,
        "workload": f"parallel ({variant})",
        "members": members,
        "steps": steps,
        "max_parallel": max_parallel,
        "progress": progress,
        "slice_steps": team.runtime.policy.slice_steps,
        "messages": messages,
        "makespan_s": makespan,
        "critical_path_s": critical,
        "makespan_over_critical": ratio,
        "sum_latency_s": sum(latency.values()),
        "checkpoints": supersteps,
        "lockstep_bound_s": lockstep,
        "lockstep_over_critical": lockstep / critical,
        # NOTE: model time overlaps across threads: no per-call overhead here.
        "overhead_ms_per_call": None,
        "breakdown_ms_per_call": probe.breakdown(timing, model),
        "note": f"makespan/critical {ratio:.2f} ({makespan:.2f} s / {critical:.2f} s; "
        f"lockstep bound {lockstep / critical:.2f})",
        **timing,
    }


# --- section 6: scale --------------------------------------------------------------------


def scale_workload(params: dict, workdir: Path) -> dict:
    """N members for R rounds (each: every member echoes and answers; the leader
    messages each again): time per round and peak memory."""
    members, rounds = int(params["members"]), int(params["rounds"])
    meter = ModelMeter()
    model = TeamModel(policies={LEADER: fan_out_leader(members, rounds), "*": echo_member()}, meter=meter)
    path = workdir / "scale.sqlite"
    saver, conn = fresh_sqlite_saver(path)
    with probed(saver) as probe:
        team, graph = _build_team(workdir, model, saver)
        config = {"configurable": {"thread_id": "scale"}}
        _output, timing = timed_invoke(graph, {"messages": [HumanMessage(TASK)]}, config, meter)
    messages = _message_count(graph.get_state(config).values)  # NOTE: histories are not in the output
    check_calls(
        model, {member_name(i): 2 * rounds for i in range(1, members + 1)}, f"scale {members} members x {rounds} rounds"
    )
    size = db_bytes(path, conn)
    checkpoints = _count(conn, "checkpoints")
    conn.close()
    per_round = timing["seconds"] / rounds
    return {
        "system": SYSTEM,
        "workload": "scale",
        "members": members,
        "rounds": rounds,
        "messages": messages,
        "db_bytes": size,
        "checkpoints": checkpoints,
        "seconds_per_round": per_round,
        "seconds_per_round_per_member": per_round / members,
        "breakdown_ms_per_call": probe.breakdown(timing, model),
        "note": f"{per_round * 1000:.0f} ms/round ({per_round / members * 1000:.1f} ms/member)",
        **timing,
    }


# --- registry ------------------------------------------------------------------------


def _default_cadence() -> int | None:
    try:
        import teamgraph.state

        return int(teamgraph.state.HISTORY_SNAPSHOT_FREQUENCY)
    except Exception:  # noqa: BLE001 - the rows then say which cadence ran
        return None


def _cadence_params() -> list[dict]:
    default = _default_cadence()
    return [
        {"snapshot_frequency": f, "messages": m, **({} if m in RESUME_AT else {"resume": False})}
        for f in CADENCES
        if f != default
        for m in (500, 1000, 5000)
    ]


WORKLOADS: dict[str, Workload] = {
    "teamgraph": Workload(
        delegation_workload,
        full=[{"rounds": r} for r in FULL_ROUNDS] + [{"rounds": r, "saver": "teamgraph"} for r in (10, 100)],
        quick=[{"rounds": 10}],
        repeats=2,
        description=delegation_workload.__doc__,
    ),
    "teamgraph-storage": Workload(
        storage_workload,
        full=[{"messages": m, **({"resume": True} if m in RESUME_AT else {})} for m in STORAGE_MESSAGES],
        # NOTE: the quick run resumes with a tiny cadence, so snapshots are exercised too.
        quick=[{"messages": 100, "resume": True, "repeats": 1, "snapshot_frequency": 10}],
        timeout_s=900.0,
        description=storage_workload.__doc__,
    ),
    "teamgraph-parallel": Workload(
        parallel_workload,
        full=[
            {"members": 8, "steps": 10, "max_parallel": 8},
            {"members": 8, "steps": 10, "max_parallel": 1},
            {"members": 8, "steps": 10, "max_parallel": 8, "progress": True},
            {"members": 8, "steps": 10, "max_parallel": 8, "slice_steps": 1},
            {"members": 8, "steps": 10, "max_parallel": 8, "slice_steps": 4},
            {"members": 8, "steps": 10, "max_parallel": 8, "slice_steps": 10},
            {"members": 8, "steps": 10, "max_parallel": 8, "saver": "teamgraph"},
            # NOTE: calls as long as a hosted model's (1-3 s): what the framework time costs there.
            MODEL_LIKE_PARALLEL,
        ],
        quick=[{"members": 8, "steps": 3, "max_parallel": 8, "latency_ms": [2, 8]}],
        repeats=2,
        description=parallel_workload.__doc__,
    ),
    "teamgraph-scale": Workload(
        scale_workload,
        full=[{"members": n, "rounds": 10} for n in (5, 20, 50)],
        quick=[{"members": 5, "rounds": 2}],
        repeats=2,
        description=scale_workload.__doc__,
    ),
    "teamgraph-cadence": Workload(
        cadence_workload, full=_cadence_params(), quick=[], timeout_s=900.0, description=cadence_workload.__doc__
    ),
}


def main(argv: list[str]) -> int:
    """`python -m bench.teamgraph_workloads resume '<json>'`: the resume child."""
    if len(argv) != 2 or argv[0] != "resume":
        print("usage: python -m bench.teamgraph_workloads resume '<json args>'", file=sys.stderr)
        return 2
    import warnings

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    print("RESUME " + json.dumps(resume_child(json.loads(argv[1]))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
