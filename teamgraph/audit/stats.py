"""Stats: the log analysis (docs/protocols.md, "Collaboration log"), computed from a thread's state.

Per agent: model calls, tool calls, tokens, errors and success rate; who called
whom how often and with what success; failing patterns (tool + error, counted);
request response times (opened -> decided) and recovery after errors (model
calls until the agent's next successful tool call).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

from teamgraph.audit.events import derive_events, new_cursor
from teamgraph.audit.exceptions import TIMED_OUT
from teamgraph.audit.records import one_line
from teamgraph.audit.tokens import Price, TokenUsage, add_usage, agent_tokens
from teamgraph.messaging.results import outcome_of
from teamgraph.policy import Policy

PATTERN_LIMIT = 80
_NUMBERS = re.compile(r"\d+")


class AgentStats(TypedDict):
    """One agent's figures."""

    role: str
    status: str
    model_calls: int
    tool_calls: int
    errors: int
    success_rate: float | None
    tokens: TokenUsage
    recovery_calls: list[int]


class PairStats(TypedDict):
    """Calls and messages from one agent to another."""

    sender: str
    receiver: str
    count: int
    success: int
    failed: int


class RequestTiming(TypedDict):
    """How long a request waited for its decision."""

    id: str
    kind: str
    status: str
    seconds: float


class TeamStats(TypedDict):
    """A thread's collaboration figures (``team.stats(config)``, ``teamgraph stats``)."""

    agents: dict[str, AgentStats]
    team: TokenUsage
    pairs: list[PairStats]
    """Who called whom; the person is one party, ``user``, and a rejection counts as a success (a decision)."""
    failing_patterns: list[dict[str, Any]]
    requests: list[RequestTiming]


def _is_error(result: ToolMessage | None) -> bool:
    return (
        result is None
        or result.status == "error"
        or (str(result.content).startswith(("Error", TIMED_OUT)) or outcome_of(result) is not None)
    )


def _tool_outcomes(history: list[AnyMessage]) -> list[tuple[int, str, ToolMessage | None]]:
    """(model call number, tool name, result) for every answered tool call, in order."""
    results = {m.tool_call_id: m for m in history if isinstance(m, ToolMessage)}
    outcomes: list[tuple[int, str, ToolMessage | None]] = []
    calls = 0
    for message in history:
        if isinstance(message, AIMessage):
            calls += 1
            for call in [*message.tool_calls, *message.invalid_tool_calls]:
                if call.get("id") in results:
                    outcomes.append((calls, str(call.get("name")), results[call.get("id") or ""]))
    return outcomes


def _recoveries(outcomes: list[tuple[int, str, ToolMessage | None]]) -> list[int]:
    """Model calls from each run of failures to the next successful tool call."""
    recoveries, failed_at = [], None
    for number, _, result in outcomes:
        if _is_error(result):
            failed_at = number if failed_at is None else failed_at
        elif failed_at is not None:
            recoveries.append(number - failed_at)
            failed_at = None
    return recoveries


def pattern(tool: str, error: str) -> str:
    """A failing pattern: the tool and its error with numbers blanked (so repeats group)."""
    return f"{tool}: {_NUMBERS.sub('N', one_line(error.removeprefix('Error: '), PATTERN_LIMIT))}"


def _seconds(opened: str | None, closed: str | None) -> float | None:
    if not opened or not closed:
        return None
    return (datetime.fromisoformat(closed) - datetime.fromisoformat(opened)).total_seconds()


PERSON_NAMES = frozenset({"human", "user"})
"""The log names the person ``user`` (tasks, replies) or ``human`` (requests routed to a person): one person."""


def _person(name: str) -> str:
    return "user" if name in PERSON_NAMES else name


def _decided(event: Any, requests: Mapping[str, Any]) -> bool:
    """Whether ``event`` closes a request by a decision (a rejection is one, not a failure)."""
    rid = event.content.split(" ", 1)[0]
    return (requests.get(rid) or {}).get("status") == "rejected"


def _pairs(values: Mapping[str, Any], policy: Policy) -> list[PairStats]:
    """Calls between agents (and the person), from the log's events: count, successes, failures."""
    pairs: dict[tuple[str, str], PairStats] = {}
    requests = values.get("requests") or {}
    events, _ = derive_events(values, new_cursor(), now="1970-01-01 00:00:00", policy=policy)
    for event in events:
        if event.kind != "call" or event.content.startswith("message msg_"):
            continue  # NOTE: deliveries repeat the calls that sent them
        sender, receiver = _person(event.sender), _person(event.receiver)
        pair = pairs.setdefault(
            (sender, receiver), PairStats(sender=sender, receiver=receiver, count=0, success=0, failed=0)
        )
        pair["count"] += 1
        pair["success" if event.result == "success" or _decided(event, requests) else "failed"] += 1
    return sorted(pairs.values(), key=lambda p: (-p["count"], p["sender"], p["receiver"]))


def team_stats(
    values: Mapping[str, Any], *, prices: Mapping[str, Price] | None = None, policy: Policy | None = None
) -> TeamStats:
    """Compute a thread's figures from its state values.

    Args:
        values: The thread's state values (``team.state(config)``).
        prices: The team's price table, for costs.
        policy: The team's policy (its exception-policy thresholds).

    Returns:
        The figures; see ``TeamStats``.
    """
    histories = values.get("histories") or {}
    tokens = agent_tokens(values, prices)
    agents: dict[str, AgentStats] = {}
    patterns: Counter[str] = Counter()
    for name, record in (values.get("agents") or {}).items():
        history = histories.get(name, [])
        outcomes = _tool_outcomes(history)
        errors = [(tool, str(r.content) if r else "no result") for _, tool, r in outcomes if _is_error(r)]
        patterns.update(pattern(tool, text) for tool, text in errors)
        agents[name] = AgentStats(
            role=str(record.get("role")),
            status=str(record.get("status")),
            model_calls=sum(isinstance(m, AIMessage) for m in history),
            tool_calls=len(outcomes),
            errors=len(errors),
            success_rate=round(1 - len(errors) / len(outcomes), 4) if outcomes else None,
            tokens=tokens[name],
            recovery_calls=_recoveries(outcomes),
        )
    pairs = _pairs(values, policy or Policy())
    timings = [
        RequestTiming(id=rid, kind=str(r["kind"]), status=str(r["status"]), seconds=seconds)
        for rid, r in (values.get("requests") or {}).items()
        if (seconds := _seconds(r.get("opened_at"), r.get("closed_at"))) is not None
    ]
    return TeamStats(
        agents=agents,
        team=add_usage(tokens.values()),
        pairs=pairs,
        failing_patterns=[{"pattern": p, "count": n} for p, n in patterns.most_common()],
        requests=timings,
    )
