"""The scripted team the teamgraph workloads run: one model for the whole team, a policy per agent.

One ``TeamModel`` (a ``bench.scripted`` scripted model) serves the whole team and asks a
per-agent *policy* what the calling agent says next. teamgraph names the caller in every
model call's metadata (``teamgraph_agent``), and each policy decides from the agent's own
conversation only, so a fresh process resuming a thread carries on where it was.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from bench.scripted import ScriptedChatModel, call_tool, filler, say

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


def thread_id(rounds: int) -> str:
    return f"teamgraph-r{rounds}"
