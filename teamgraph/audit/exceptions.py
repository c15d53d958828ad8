"""The exception policy (docs/protocols.md, "Exceptions"), as behaviour.

- A tool call that fails with a transient error is retried (``Policy.tool_retries``,
  once by default); when it fails again the agent gets the error and the advice
  to go another way.
- ``Policy.file_failures`` consecutive failed file operations of one agent, or
  ``Policy.send_timeouts`` consecutive timed-out calls (``sessions_send``,
  ``call_agent``...), notify the Team Leader.
- The same tool with the same arguments ``Policy.loop_warn`` times in a row gives
  the agent a warning; ``Policy.loop_stop`` times stops its turn and tells the leader.
- A member's tool that failed after its retry (``tool_failed``) notifies the Team
  Leader (``Policy.notify_master``; the collaboration spec §5.1).
- A member whose failures were escalated to the leader stops its turn and waits
  for the leader's instruction (``Policy.escalation_waits``; the collaboration spec §5.2).

The rules read the agent's history (pure functions, no state of their own), so
the step that acts on them and the collaboration log that records them decide
the same, and a step re-run after a crash decides the same again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage

from teamgraph.messaging import effects, results
from teamgraph.messaging.envelopes import ENVELOPE_KEY, LEADER, clip, notice
from teamgraph.messaging.notices import STOPPED
from teamgraph.messaging.results import outcome_of
from teamgraph.policy import Policy
from teamgraph.records import Effect

FILE_TOOLS = frozenset({"read_file", "write_file", "edit_file", "list_files", "restore_file"})
SEND_TOOLS = frozenset({"sessions_send", "call_agent", "call_agents", "ask_sub_agent", "ask_other_agent"})
TIMED_OUT = "Timed out"
"""How the router's result of a timed-out blocking call begins."""
POLLING_TOOLS = frozenset(
    {"sleep", "list_agents", "list_active_sub_agents", "get_sub_agent_status", "check_shutdown_status", "sessions_list"}
)
"""Tools made to be called again and again (waiting, polling): never a loop."""
RETRIES_KEY = "teamgraph_retries"
"""On a ToolMessage: the transient failures before its result (each retried)."""

# The rules' kinds (also the collaboration log's codes, upper-cased).
LOOP_WARNING, LOOP_STOP, FILE_FAILURES, SEND_TIMEOUTS = "loop_warning", "loop_stop", "file_failures", "send_timeouts"
TOOL_FAILURE = "tool_failure"
STOPPED_KIND = f"notice:{STOPPED}"
TOOL_FAILED_CODE = "tool_failed"
"""The error code of a tool that failed after its retries (``teamgraph/tools/errors.py``, a layer above)."""
ESCALATED = frozenset({FILE_FAILURES, SEND_TIMEOUTS, TOOL_FAILURE})
"""The rules whose trigger escalates to the leader (the member then waits, ``Policy.escalation_waits``)."""

TRANSIENT_TYPES: tuple[type[BaseException], ...] = (TimeoutError, ConnectionError, InterruptedError, BlockingIOError)
TRANSIENT_NAMES = frozenset(
    {
        "TimeoutException",
        "ReadTimeout",
        "ConnectTimeout",
        "ConnectError",
        "APITimeoutError",
        "APIConnectionError",
        "RateLimitError",
        "ServiceUnavailableError",
    }
)
"""Exception class names (httpx, openai, ...) that are transient, matched along the class's MRO."""


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is worth one more try: a timeout, a dropped connection, a rate limit."""
    if isinstance(exc, TRANSIENT_TYPES) or getattr(exc, "transient", False):
        return True
    return any(cls.__name__ in TRANSIENT_NAMES for cls in type(exc).__mro__)


def call_with_retry(fn: Callable[[], Any], *, retries: int) -> tuple[Any, list[str]]:
    """Call ``fn``; retry it up to ``retries`` times while it fails with a transient error.

    Returns:
        ``fn``'s result and the transient failures before it (empty: first try).

    Raises:
        Exception: The last failure, with the earlier ones in ``teamgraph_failures``.
    """
    failures: list[str] = []
    while True:
        try:
            return fn(), failures
        except Exception as exc:
            if not is_transient(exc) or len(failures) >= retries:
                # NOTE: the earlier failures ride on the exception itself, which the caller re-raises.
                exc.teamgraph_failures = failures  # type: ignore[attr-defined]  # an attribute of our own
                raise
            failures.append(f"{type(exc).__name__}: {exc}")


def retried_error(name: str, exc: BaseException) -> str:
    """The error an agent gets for a call that failed again after its retries."""
    tries = len(getattr(exc, "teamgraph_failures", ())) + 1
    return (
        f"{name} failed {tries} times ({type(exc).__name__}: {exc}). It was retried and failed again: "
        "do not call it the same way; use another way (another tool, other arguments, or ask for help)."
    )


# --- history rules --------------------------------------------------------------

Block = tuple[AIMessage, list[ToolMessage]]


def iter_blocks(history: Sequence[AnyMessage], end: int | None = None) -> Iterator[Block]:
    """The model turns of ``history[:end]``, newest first: each AIMessage with its tool results.

    Lazy on purpose: a rule reads back only as far as its streak goes (and the
    history is never copied).
    """
    results: list[ToolMessage] = []
    for index in range((len(history) if end is None else end) - 1, -1, -1):
        message = history[index]
        if isinstance(message, ToolMessage):
            results.insert(0, message)
        elif isinstance(message, AIMessage):
            yield message, results  # NOTE: a turn without calls is a block too: it breaks a loop
            results = []
        else:
            results = []


def _failed(result: ToolMessage) -> bool:
    return result.status == "error" or str(result.content).startswith("Error")


def _timed_out(result: ToolMessage) -> bool:
    return outcome_of(result) == results.TIMED_OUT or str(result.content).startswith(TIMED_OUT)


def _named(block: Block, tools: frozenset[str]) -> list[ToolMessage]:
    ai, results = block
    names = {c["id"]: c["name"] for c in ai.tool_calls}
    return [r for r in results if names.get(r.tool_call_id) in tools]


def tail_streak(
    history: Sequence[AnyMessage], tools: frozenset[str], bad: Callable[[ToolMessage], bool], end: int | None = None
) -> int:
    """How many of the latest results of ``tools`` are ``bad`` in a row (0 unless the newest turn used them).

    A streak only counts when the newest turn extended it, so one streak
    triggers its rule once.
    """
    streak = 0
    for number, block in enumerate(iter_blocks(history, end)):
        named = _named(block, tools)
        if number == 0 and not named:
            return 0
        for result in reversed(named):
            if not bad(result):
                return streak
            streak += 1
    return streak


def _signature(ai: AIMessage) -> str:
    return json.dumps([[c["name"], c["args"]] for c in ai.tool_calls], sort_keys=True, default=str)


def repeat_streak(history: Sequence[AnyMessage], end: int | None = None) -> tuple[int, AIMessage | None]:
    """How many of the latest turns made the very same tool calls, and the newest of them."""
    blocks = iter_blocks(history, end)
    newest = next(blocks, None)
    if newest is None or not newest[0].tool_calls or all(c["name"] in POLLING_TOOLS for c in newest[0].tool_calls):
        return 0, None
    first, streak = _signature(newest[0]), 1
    for ai, _ in blocks:
        if _signature(ai) != first:
            break
        streak += 1
    return streak, newest[0]


def _calls_in_short(ai: AIMessage | None) -> str:
    # NOTE: built only for a rule that fires: every step and every log pass judge a turn.
    calls = ai.tool_calls if ai is not None else []
    return ", ".join(f"{c['name']}({clip(json.dumps(c['args'], default=str), 80)})" for c in calls)


@dataclass(frozen=True)
class Trigger:
    """A rule the newest turn of a history triggered.

    Attributes:
        kind: ``loop_warning``, ``loop_stop``, ``file_failures`` or ``send_timeouts``.
        count: The streak's length.
        detail: The repeated calls (loops), else empty.
    """

    kind: str
    count: int
    detail: str = ""


def triggered(policy: Policy, name: str, history: Sequence[AnyMessage], end: int | None = None) -> list[Trigger]:
    """The exception-policy rules the newest turn of ``name``'s ``history[:end]`` triggers.

    Pure: the step (before its model call) and the collaboration log (after each
    turn) call it on the same history and get the same answer.
    """
    member = name != LEADER
    if stopped_since_last_turn(history, end):
        return []  # NOTE: the rules stopped that turn already: a new turn must not judge it again
    found: list[Trigger] = []
    repeats, newest = repeat_streak(history, end)
    if member and repeats >= policy.loop_stop:
        return [Trigger(LOOP_STOP, repeats, _calls_in_short(newest))]
    if repeats == policy.loop_warn:
        found.append(Trigger(LOOP_WARNING, repeats, _calls_in_short(newest)))
    if member and (files := tail_streak(history, FILE_TOOLS, _failed, end)) == policy.file_failures:
        found.append(Trigger(FILE_FAILURES, files))
    if member and (timeouts := tail_streak(history, SEND_TOOLS, _timed_out, end)) == policy.send_timeouts:
        found.append(Trigger(SEND_TIMEOUTS, timeouts))
    if member and policy.notify_master and (broken := failed_tools(history, end)):
        found.append(Trigger(TOOL_FAILURE, len(broken), ", ".join(broken)))
    return found


def stopped_since_last_turn(history: Sequence[AnyMessage], end: int | None = None) -> bool:
    """Whether the agent's newest turn was stopped (a ``stopped`` notice follows its last AI message)."""
    for index in range((len(history) if end is None else end) - 1, -1, -1):
        message = history[index]
        if isinstance(message, AIMessage):
            return False
        if message.additional_kwargs.get(ENVELOPE_KEY) == STOPPED_KIND:
            return True
    return False


def failed_tools(history: Sequence[AnyMessage], end: int | None = None) -> list[str]:
    """The tools of the newest turn that failed for good (``tool_failed``: after their retries)."""
    newest = next(iter_blocks(history, end), None)
    if newest is None:
        return []
    ai, answered = newest
    names = {c["id"]: c["name"] for c in ai.tool_calls}
    return [names.get(r.tool_call_id, r.name or "?") for r in answered if results.error_of(r) == TOOL_FAILED_CODE]


@dataclass
class StepGuard:
    """What the rules decided before an agent's step.

    Attributes:
        note: A warning for the agent, added to this step's system prompt.
        effects: Effects for the router (a message to the leader, a stop).
        stop: The step must not call the model: the agent's turn is stopped.
    """

    note: str = ""
    effects: list[Effect] = field(default_factory=list)
    stop: bool = False


def leader_notice(name: str, trigger: Trigger) -> str:
    """What the Team Leader is told when ``name`` triggers a rule."""
    texts = {
        LOOP_STOP: f"{name} made the same call {trigger.count} times in a row ({trigger.detail}): its turn was "
        "stopped (loop). Give it new instructions or another approach.",
        FILE_FAILURES: f"{name}: {trigger.count} file operations failed in a row. Check its paths or help it.",
        SEND_TIMEOUTS: f"{name}: {trigger.count} calls timed out in a row. The agents it calls may be stuck.",
        TOOL_FAILURE: f"{name}: {trigger.detail} failed after its retry. Check the tool or give another way.",
    }
    return texts.get(trigger.kind, "")


def guard_step(policy: Policy, name: str, history: Sequence[AnyMessage]) -> StepGuard:
    """Apply the exception-policy rules to ``name``'s history before its next model call.

    NOTE: the history ends with the agent's previous turn and every result it got
    (a deferred call's too), so each turn is judged once, by the step after it.
    No message is added to the history: the leader is told through the router
    (a delivery), the agent through this step's system prompt.

    Args:
        policy: The team's policy (thresholds).
        name: The agent.
        history: Its history as the step reads it.

    Returns:
        The warning, the effects and whether to stop the turn.
    """
    guard = StepGuard()
    for trigger in triggered(policy, name, history):
        if trigger.kind == LOOP_WARNING:
            guard.note = (
                f"Warning: you made the same call {trigger.count} times in a row ({trigger.detail}). "
                f"Change your approach: at {policy.loop_stop} your turn is stopped."
            )
            continue
        guard.effects.append(effects.deliver(to=LEADER, body=notice(leader_notice(name, trigger))))
        # NOTE: the collaboration spec §5.2: an escalated member waits for the master's instruction (a message
        # from the leader starts its next turn) instead of working on around the failure.
        waits = trigger.kind in ESCALATED and policy.escalation_waits
        if (trigger.kind == LOOP_STOP or waits) and not guard.stop:
            guard.effects.append(effects.stop(target=name))
            guard.stop = True
    return guard
