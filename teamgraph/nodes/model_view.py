"""An agent's context budget and what its model sees of its history.

The model's view of a history is: the latest compaction summary (stored in the history
as a marker, see ``teamgraph.nodes.compaction``), then the messages after its cut,
with tool results too large for the window cut to size and a note on how to read
the rest. Nothing here changes a stored history.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from teamgraph.models.calls import COMPACTION_KEY
from teamgraph.policy import Policy

DEFAULT_CONTEXT_TOKENS = 100_000
"""The window assumed when neither the policy nor the model's profile gives one."""
TOOL_RESULT_SHARE = 0.1
"""A tool result larger than this share of the window is truncated for the model."""
SUMMARY_HEADER = (
    "[Summary of your earlier conversation: older messages were compacted to fit your context "
    "window. Continue from here.]"
)
TokenCounter = Callable[[Sequence[BaseMessage]], int]


class CompactionRecord(TypedDict):
    """What a compaction marker stores next to its summary (the marker's content).

    Attributes:
        number: 1 for the agent's first compaction, then 2, ...
        keep_from: Index, in the agent's history, of the first message kept verbatim.
        ai_turns: The agent's AI turns before ``keep_from`` (the summary replaces them).
        compacted: How many messages the summary replaced.
        tokens_before: The view's tokens when the compaction started.
        reason: ``"threshold"`` or ``"context_length_exceeded"`` (the provider refused).
    """

    number: int
    keep_from: int
    ai_turns: int
    compacted: int
    tokens_before: int
    reason: str


@dataclass(frozen=True)
class ContextBudget:
    """An agent's context window and how its calls are counted.

    Attributes:
        window: Tokens a model call may use.
        threshold: Share of ``window`` past which the history is compacted.
        counter: Counts the tokens of messages.
        overhead: Tokens every call carries besides its messages (the tool schemas).
    """

    window: int
    threshold: float
    counter: TokenCounter
    overhead: int = 0

    def count(self, messages: Sequence[BaseMessage]) -> int:
        """The tokens of a call sending ``messages``."""
        return self.counter(messages) + self.overhead

    def message_tokens(self, message: BaseMessage) -> int:
        """The tokens of one message."""
        return self.counter([message])

    @property
    def limit(self) -> int:
        """Tokens past which a call's view is compacted."""
        return int(self.window * self.threshold)

    @property
    def tool_result_tokens(self) -> int:
        """Tokens past which one tool result is truncated for the model."""
        return max(1, int(self.window * TOOL_RESULT_SHARE))


def context_window(model: BaseChatModel, policy: Policy) -> int:
    """``Policy.context_tokens``, else the model profile's ``max_input_tokens``, else 100 000."""
    if policy.context_tokens is not None:
        return policy.context_tokens
    profile = getattr(model, "profile", None) or {}
    return int(profile.get("max_input_tokens") or DEFAULT_CONTEXT_TOKENS)


def approximate_counter(messages: Sequence[BaseMessage]) -> int:
    """LangChain's approximate counter, scaled by the provider's reported usage when known.

    NOTE: workaround of an upstream behaviour (langchain-openai's tiktoken counter downloads encodings).
    Not ChatOpenAI's tiktoken counter: tiktoken downloads its encodings on
    first use, and a model call must not depend on the network for counting.

    NOTE: it gives ``count_tokens_approximately(messages, use_usage_metadata_scaling=True)``
    (a test checks it). A history is counted at every model call of its agent; the
    model's view keeps its messages' tokens (``_View``) and counts only what is new.
    """
    return _Tokens().extended((m, _tokens(m)) for m in messages).after((), count=len(messages))


def _tokens(message: BaseMessage) -> int:
    return count_tokens_approximately([message])


def context_budget(
    *, model: BaseChatModel, policy: Policy, counter: TokenCounter | None = None, tools: Sequence[Any] = ()
) -> ContextBudget:
    """The context budget of an agent talking to ``model``.

    Args:
        model: The agent's chat model (its profile may name its window).
        policy: The team's policy (``context_tokens``, ``context_threshold``).
        counter: A token counter of messages (tests inject a fake one); None:
            ``approximate_counter``, plus the tool schemas' tokens with every call.
        tools: The tools bound to the model.

    Returns:
        The budget.
    """
    # NOTE: the schemas are counted once here: converting them costs more than
    # counting a whole view, and one message's size must not include them.
    overhead = count_tokens_approximately([], tools=list(tools)) if counter is None and tools else 0
    return ContextBudget(
        window=context_window(model, policy),
        threshold=policy.context_threshold,
        counter=counter or approximate_counter,
        overhead=overhead,
    )


# --- the model's view -----------------------------------------------------------


def compaction_of(message: BaseMessage) -> CompactionRecord | None:
    """The record of a compaction marker stored in a history, or None."""
    record = message.additional_kwargs.get(COMPACTION_KEY)
    if not isinstance(message, AIMessage) or not isinstance(record, dict):
        return None
    # NOTE: only the compaction step writes this key, always from a CompactionRecord.
    return cast(CompactionRecord, record)


def without_markers(history: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The full conversation: every message except the compaction markers."""
    return [m for m in history if compaction_of(m) is None]


def answer_index(step_messages: Sequence[BaseMessage]) -> int:
    """Index of the model's answer among a step's messages (markers may come first)."""
    return next(i for i, m in enumerate(step_messages) if isinstance(m, AIMessage) and compaction_of(m) is None)


def summary_message(marker: AIMessage) -> HumanMessage:
    """How the model sees a stored summary: a user-role message first in its view."""
    return HumanMessage(f"{SUMMARY_HEADER}\n\n{marker.text}", additional_kwargs={COMPACTION_KEY: compaction_of(marker)})


def _tail(history: Sequence[BaseMessage]) -> tuple[AIMessage | None, list[tuple[int, BaseMessage]]]:
    """The newest marker and the (history index, message) pairs the model sees verbatim."""
    # NOTE: the newest marker is looked for from the end, and only what it keeps is read:
    # a history the Team's saver loaded decodes only the batches after the cut.
    marker: AIMessage | None = None
    for message in reversed(history):
        if isinstance(message, AIMessage) and compaction_of(message) is not None:
            marker = message
            break
    record = compaction_of(marker) if marker is not None else None
    start = record["keep_from"] if record is not None else 0
    return marker, [(i, m) for i, m in enumerate(history[start:], start) if not _is_marker(m)]


def truncate_tool_result(
    message: ToolMessage, *, budget: ContextBudget, call: Mapping[str, Any] | None, tokens: int | None = None
) -> ToolMessage:
    """``message`` as the model sees it: cut to the budget, with a note on how to read the rest.

    Args:
        message: A tool result from the history (never changed).
        budget: The agent's budget (``tool_result_tokens``).
        call: The tool call it answers (name and args), when known.
        tokens: ``budget.message_tokens(message)``, when the caller counted it already.

    Returns:
        ``message`` itself when it fits, else a truncated copy.
    """
    if tokens is None:
        tokens = budget.message_tokens(message)
    if tokens <= budget.tool_result_tokens:
        return message
    text = message.text
    keep = int(len(text) * budget.tool_result_tokens / tokens * 0.9)
    if call and call.get("name") == "read_file":
        args = call.get("args", {})
        start = int(args.get("offset") or 0) + keep
        how = f"call read_file(path={args.get('path')!r}, offset={start}) to read on from there"
    else:
        how = "ask the tool for a narrower result (a smaller range, a filter) to see the rest"
    note = (
        f"\n\n[teamgraph: this tool result has {len(text)} characters, too many for your context "
        f"window; only the first {keep} are shown (the rest is stored, not lost): {how}.]"
    )
    return message.model_copy(update={"content": text[:keep] + note})


@dataclass(frozen=True)
class _Tokens:
    """What the default counter needs of a run of messages (as ``approximate_counter`` sums them)."""

    total: int = 0
    provider: str | None = None
    mixed: bool = False
    last_ai_total: int | None = None
    at_last_ai: int = 0

    def extended(self, counted: Iterable[tuple[BaseMessage, int]]) -> _Tokens:
        """These tokens followed by ``counted``: each message with its own tokens."""
        total, provider, mixed = self.total, self.provider, self.mixed
        last_ai_total, at_last_ai = self.last_ai_total, self.at_last_ai
        for message, tokens in counted:
            total += tokens
            if not isinstance(message, AIMessage):
                continue
            model_provider = message.response_metadata.get("model_provider")
            if provider is None:
                provider = model_provider
            elif model_provider != provider:
                mixed = True
            if message.usage_metadata and isinstance(reported := message.usage_metadata.get("total_tokens"), int):
                last_ai_total, at_last_ai = reported, total
        return _Tokens(total, provider, mixed, last_ai_total, at_last_ai)

    def after(self, prefix: Sequence[BaseMessage], *, count: int) -> int:
        """``approximate_counter`` of ``prefix`` (no AI message in it) then these messages, ``count`` in all."""
        head = sum(_tokens(m) for m in prefix)
        total, at_last_ai = head + self.total, head + self.at_last_ai
        if count > 1 and not self.mixed and self.provider is not None and self.last_ai_total is not None:
            if at_last_ai > 0:
                return math.ceil(total * min(1.25, max(1.0, self.last_ai_total / at_last_ai)))
        return total


@dataclass(frozen=True)
class _View:
    """The model's view of a history's first ``length`` messages, kept for its next, longer version."""

    length: int
    last: BaseMessage | None
    marker: AIMessage | None
    entries: list[tuple[int, BaseMessage]]
    counts: list[int]
    calls: dict[str, Any]
    tokens: _Tokens


_VIEWS: dict[tuple[int, int, int], _View] = {}
"""Kept views by (the history's first message, counter, tool-result size): one goes with its first message."""


def _is_marker(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage) and compaction_of(message) is not None


def _seen(
    pairs: Iterable[tuple[int, BaseMessage]], calls: dict[str, Any], budget: ContextBudget
) -> tuple[list[tuple[int, BaseMessage]], list[int]]:
    """``pairs`` (no marker among them) as the model sees them, and each one's approximate
    tokens; ``calls`` gains their tool calls."""
    entries: list[tuple[int, BaseMessage]] = []
    counts: list[int] = []
    default = budget.counter is approximate_counter
    for i, message in pairs:
        tokens = _tokens(message)
        if isinstance(message, AIMessage):
            calls.update((c["id"] or "", c) for c in message.tool_calls)
        elif isinstance(message, ToolMessage):
            seen = truncate_tool_result(
                message, budget=budget, call=calls.get(message.tool_call_id), tokens=tokens if default else None
            )
            if seen is not message:
                message, tokens = seen, _tokens(seen)
        entries.append((i, message))
        counts.append(tokens)
    return entries, counts


def _view(history: Sequence[BaseMessage], budget: ContextBudget) -> _View:
    """The view of ``history``, extended from the kept view of its shorter version when there is one.

    NOTE: an agent's history only grows, and rebuilding its view from the whole history at
    every model call made a call's cost grow with the run. The kept view is extended when
    the history still holds the same message objects up to its length and no new message
    is a compaction marker; otherwise the view is built again.
    """
    if not history:
        return _View(0, None, None, [], [], {}, _Tokens())
    key = (id(history[0]), id(budget.counter), budget.tool_result_tokens)
    kept = _VIEWS.get(key)
    if (
        kept is not None
        and kept.last is not None
        and len(history) >= kept.length
        and history[kept.length - 1] is kept.last
        and not any(_is_marker(m) for m in history[kept.length :])
    ):
        calls = dict(kept.calls)
        new, new_counts = _seen(enumerate(history[kept.length :], kept.length), calls, budget)
        entries, counts, marker = [*kept.entries, *new], [*kept.counts, *new_counts], kept.marker
        tokens = kept.tokens.extended((m, n) for (_, m), n in zip(new, new_counts, strict=True))
    else:
        marker, verbatim = _tail(history)
        calls = {}
        entries, counts = _seen(verbatim, calls, budget)
        tokens = _Tokens().extended((m, n) for (_, m), n in zip(entries, counts, strict=True))
    view = _View(len(history), history[-1], marker, entries, counts, calls, tokens)
    if key not in _VIEWS:
        try:
            weakref.finalize(history[0], _VIEWS.pop, key, None)
        except TypeError:  # NOTE: a message class without weak references: nothing is kept
            return view
    _VIEWS[key] = view
    return view


def view_entries(
    history: Sequence[BaseMessage], budget: ContextBudget
) -> tuple[AIMessage | None, list[tuple[int, BaseMessage]], list[int]]:
    """The newest marker, the (history index, message as the model sees it) pairs after its
    cut, and each pair's tokens by ``budget.message_tokens``."""
    view = _view(history, budget)
    if budget.counter is approximate_counter:
        return view.marker, view.entries, view.counts
    return view.marker, view.entries, [budget.counter([m]) for _, m in view.entries]


def view_and_tokens(
    system: Sequence[BaseMessage], history: Sequence[BaseMessage], *, budget: ContextBudget
) -> tuple[list[BaseMessage], int]:
    """The messages of a call (``system``, then the model's view of ``history``) and their tokens.

    Returns:
        The messages to send, and ``budget.count`` of them.
    """
    view = _view(history, budget)
    head = [*system, summary_message(view.marker)] if view.marker is not None else list(system)
    messages = [*head, *(m for _, m in view.entries)]
    if budget.counter is not approximate_counter:
        return messages, budget.count(messages)
    return messages, view.tokens.after(head, count=len(messages)) + budget.overhead


def model_view(history: Sequence[BaseMessage], *, budget: ContextBudget) -> list[BaseMessage]:
    """What the model sees of ``history`` after its system prompt: the latest summary, then the rest.

    Args:
        history: The agent's stored history, markers included.
        budget: The agent's budget (tool results above its share are truncated).

    Returns:
        The messages to send after the system prompt.
    """
    view = _view(history, budget)
    head = [summary_message(view.marker)] if view.marker is not None else []
    return [*head, *(m for _, m in view.entries)]
