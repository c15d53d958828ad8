"""Context compaction: every agent's model call stays inside its context window.

Before each model call the agent's *view* is counted. Past ``Policy.context_threshold``
of the window, the older part of the history is summarised by the agent's own model
and the summary is stored IN the agent's history as a marker (an ``AIMessage`` whose
``additional_kwargs["teamgraph_compaction"]`` says where the verbatim part starts).
The checkpoint keeps every message, and a resumed process rebuilds the same view::

    system prompt + the latest summary + the messages after its cut

Tool results too large for the model are cut in the view, with a note saying how
to read the rest. The functions here do not depend on where the model is called
from (the role subgraph today, a scheduler tomorrow).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from langchain_core.exceptions import ContextOverflowError
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.constants import TAG_NOSTREAM

from teamgraph.models.scripted import (
    AGENT_KEY,
    CALL_KEY,
    COMPACTION_CALL,
    COMPACTION_KEY,
)
from teamgraph.policy import Policy

DEFAULT_CONTEXT_TOKENS = 100_000
"""The window assumed when neither the policy nor the model's profile gives one."""
KEEP_SHARE = 0.3
"""Share of the window the newest messages may take verbatim after a compaction."""
TOOL_RESULT_SHARE = 0.1
"""A tool result larger than this share of the window is truncated for the model."""
OVERFLOW_CODE = "context_length_exceeded"
"""The OpenAI error code of a request larger than the model's window."""

SUMMARY_HEADER = (
    "[Summary of your earlier conversation: older messages were compacted to fit your context "
    "window. Continue from here.]"
)
COMPACTION_PROMPT = """\
You are compacting your own working conversation so that you can continue it within
your context window. Write a summary that replaces the conversation below. Keep:
- your current task, in full, and who gave it;
- decisions made and why; what is done and what is left;
- open questions, and every request or message id (ask_..., plan_..., out_..., msg_...);
- every file path you read or wrote, and what it holds;
- facts you will need again (names, numbers, errors and their fixes).
Drop chatter and repeated tool output. Write plain text, at most about 600 words.
Do not call tools."""

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


class ContextLengthExceededError(RuntimeError):
    """The provider refused a call as too long, even after compacting the history."""


@dataclass(frozen=True)
class ContextBudget:
    """An agent's context window and how its calls are counted.

    Attributes:
        window: Tokens a model call may use.
        threshold: Share of ``window`` past which the history is compacted.
        counter: Counts the tokens of the messages of one call.
    """

    window: int
    threshold: float
    counter: TokenCounter

    @property
    def limit(self) -> int:
        """Tokens past which a call's view is compacted."""
        return int(self.window * self.threshold)

    @property
    def tool_result_tokens(self) -> int:
        """Tokens past which one tool result is truncated for the model."""
        return max(1, int(self.window * TOOL_RESULT_SHARE))


@dataclass(frozen=True)
class ModelInput:
    """What to send to the model, and the markers to append to the history first."""

    messages: list[BaseMessage]
    new: list[BaseMessage]
    tokens: int


def context_window(model: BaseChatModel, policy: Policy) -> int:
    """``Policy.context_tokens``, else the model profile's ``max_input_tokens``, else 100 000."""
    if policy.context_tokens is not None:
        return policy.context_tokens
    profile = getattr(model, "profile", None) or {}
    return int(profile.get("max_input_tokens") or DEFAULT_CONTEXT_TOKENS)


def approximate_counter(tools: Sequence[Any] = ()) -> TokenCounter:
    """LangChain's approximate counter, scaled by the provider's reported usage when known.

    NOTE: not ChatOpenAI's tiktoken counter: tiktoken downloads its encodings on
    first use, and a model call must not depend on the network for counting.
    """
    bound_tools = list(tools) or None

    def count(messages: Sequence[BaseMessage]) -> int:
        return count_tokens_approximately(messages, tools=bound_tools, use_usage_metadata_scaling=True)

    return count


def context_budget(
    *, model: BaseChatModel, policy: Policy, counter: TokenCounter | None = None, tools: Sequence[Any] = ()
) -> ContextBudget:
    """The context budget of an agent talking to ``model``.

    Args:
        model: The agent's chat model (its profile may name its window).
        policy: The team's policy (``context_tokens``, ``context_threshold``).
        counter: A token counter (tests inject a fake one); None: ``approximate_counter``.
        tools: The tools bound to the model, counted with every call by the default counter.

    Returns:
        The budget.
    """
    return ContextBudget(
        window=context_window(model, policy),
        threshold=policy.context_threshold,
        counter=counter or approximate_counter(tools),
    )


# --- the model's view -----------------------------------------------------------


def compaction_of(message: BaseMessage) -> CompactionRecord | None:
    """The record of a compaction marker stored in a history, or None."""
    record = message.additional_kwargs.get(COMPACTION_KEY)
    return record if isinstance(message, AIMessage) and isinstance(record, dict) else None  # type: ignore[return-value]


def without_markers(history: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The full conversation: every message except the compaction markers."""
    return [m for m in history if compaction_of(m) is None]


def answer_index(step_messages: Sequence[BaseMessage]) -> int:
    """Index of the model's answer among a step's messages (markers may come first)."""
    return next(i for i, m in enumerate(step_messages) if isinstance(m, AIMessage) and compaction_of(m) is None)


def latest_compaction(history: Sequence[BaseMessage]) -> AIMessage | None:
    """The newest compaction marker of a history, or None."""
    for message in reversed(history):
        if compaction_of(message) is not None:
            return message  # type: ignore[return-value]
    return None


def summary_message(marker: AIMessage) -> HumanMessage:
    """How the model sees a stored summary: a user-role message first in its view."""
    return HumanMessage(f"{SUMMARY_HEADER}\n\n{marker.text}", additional_kwargs={COMPACTION_KEY: compaction_of(marker)})


def _tail(history: Sequence[BaseMessage]) -> tuple[AIMessage | None, list[tuple[int, BaseMessage]]]:
    """The newest marker and the (history index, message) pairs the model sees verbatim."""
    marker = latest_compaction(history)
    start = compaction_of(marker)["keep_from"] if marker is not None else 0  # type: ignore[index]
    return marker, [(i, history[i]) for i in range(start, len(history)) if compaction_of(history[i]) is None]


def truncate_tool_result(message: ToolMessage, *, budget: ContextBudget, call: Mapping[str, Any] | None) -> ToolMessage:
    """``message`` as the model sees it: cut to the budget, with a note on how to read the rest.

    Args:
        message: A tool result from the history (never changed).
        budget: The agent's budget (``tool_result_tokens``).
        call: The tool call it answers (name and args), when known.

    Returns:
        ``message`` itself when it fits, else a truncated copy.
    """
    tokens = budget.counter([message])
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
        f"window; only the first {keep} are shown. The full result is kept in your history: {how}.]"
    )
    return message.model_copy(update={"content": text[:keep] + note})


def _view_entries(
    history: Sequence[BaseMessage], budget: ContextBudget
) -> tuple[AIMessage | None, list[tuple[int, BaseMessage]]]:
    marker, tail = _tail(history)
    calls = {c["id"]: c for _, m in tail if isinstance(m, AIMessage) for c in m.tool_calls}
    return marker, [
        (i, truncate_tool_result(m, budget=budget, call=calls.get(m.tool_call_id)) if isinstance(m, ToolMessage) else m)
        for i, m in tail
    ]


def model_view(history: Sequence[BaseMessage], *, budget: ContextBudget) -> list[BaseMessage]:
    """What the model sees of ``history`` after its system prompt: the latest summary, then the rest.

    Args:
        history: The agent's stored history, markers included.
        budget: The agent's budget (tool results above its share are truncated).

    Returns:
        The messages to send after the system prompt.
    """
    marker, entries = _view_entries(history, budget)
    head = [summary_message(marker)] if marker is not None else []
    return [*head, *(m for _, m in entries)]


# --- compaction ------------------------------------------------------------------


def choose_cut(
    entries: Sequence[tuple[int, BaseMessage]], tokens: Sequence[int], *, keep_tokens: int, halve: bool = False
) -> int | None:
    """Where the verbatim part starts: a position in ``entries`` that splits no tool call from its result.

    Args:
        entries: The (history index, message) pairs the model sees verbatim now.
        tokens: The tokens of each entry.
        keep_tokens: Tokens the newest messages may take.
        halve: Keep at most the newer half of the messages too (the provider refused
            a call the counter said fits, so the counts are not to be trusted).

    Returns:
        The smallest safe position whose suffix fits ``keep_tokens`` (else the newest safe
        position), or None when no position leaves something to summarise.
    """
    safe: list[int] = []
    open_calls: set[str] = set()
    for position, (_, message) in enumerate(entries):
        if position and not open_calls and not isinstance(message, ToolMessage):
            safe.append(position)
        if isinstance(message, AIMessage):
            calls = [*message.tool_calls, *message.invalid_tool_calls]
            open_calls |= {c["id"] for c in calls if c["id"]}
        elif isinstance(message, ToolMessage):
            open_calls.discard(message.tool_call_id)
    if halve:
        safe = [p for p in safe if p >= len(entries) // 2] or safe[-1:]
    if not safe:
        return None
    suffix = [0] * (len(entries) + 1)
    for position in range(len(entries) - 1, -1, -1):
        suffix[position] = suffix[position + 1] + tokens[position]
    return next((p for p in safe if suffix[p] <= keep_tokens), safe[-1])


def transcript(messages: Sequence[BaseMessage]) -> str:
    """The messages to summarise as plain text (no tool schema needed to read it)."""
    lines = []
    for m in messages:
        if isinstance(m, AIMessage):
            calls = "".join(
                f"\n[you called {c['name']}({json.dumps(c['args'], default=str)}) id={c['id']}]" for c in m.tool_calls
            )
            lines.append(f"[you] {m.text}{calls}")
        elif isinstance(m, ToolMessage):
            lines.append(f"[result of {m.tool_call_id}{' (error)' if m.status == 'error' else ''}] {m.text}")
        else:
            lines.append(f"[{m.type}] {m.text}")
    return "\n\n".join(lines)


def _compaction_config(config: RunnableConfig | None) -> RunnableConfig:
    config = config or {}
    # NOTE: "nostream" keeps the summary out of LangGraph's "messages" stream, where
    # it would read as the agent's words; the marker in the history shows it.
    return {
        **config,
        "metadata": {**config.get("metadata", {}), CALL_KEY: COMPACTION_CALL},
        "tags": [*config.get("tags", []), TAG_NOSTREAM],
        "run_name": "compaction",
    }


def compact(
    history: Sequence[BaseMessage],
    *,
    model: Runnable,
    budget: ContextBudget,
    config: RunnableConfig | None = None,
    tokens_before: int,
    force: bool = False,
) -> AIMessage | None:
    """Summarise the older part of the agent's view with the agent's own model.

    Args:
        history: The agent's history, markers included.
        model: The agent's model (without tools).
        budget: The agent's budget.
        config: The step's config (its metadata names the agent).
        tokens_before: The view's tokens now (recorded; halved for a forced compaction).
        force: The provider refused the call: keep less verbatim than usual.

    Returns:
        The marker to append to the history, or None when there is nothing to summarise.
    """
    marker, entries = _view_entries(history, budget)
    tokens = [budget.counter([m]) for _, m in entries]
    keep = int(budget.window * KEEP_SHARE)
    cut = choose_cut(entries, tokens, keep_tokens=min(keep, tokens_before // 4) if force else keep, halve=force)
    if cut is None:
        return None
    previous = compaction_of(marker) if marker is not None else None
    number = (previous["number"] if previous else 0) + 1
    old = [m for _, m in entries[:cut]]
    request = [
        SystemMessage(COMPACTION_PROMPT),
        HumanMessage(
            transcript([summary_message(marker), *old] if marker is not None else old),
            additional_kwargs={COMPACTION_KEY: {"number": number}},
        ),
    ]
    answer = model.invoke(request, _compaction_config(config))
    keep_from = entries[cut][0]
    record = CompactionRecord(
        number=number,
        keep_from=keep_from,
        ai_turns=sum(isinstance(m, AIMessage) and compaction_of(m) is None for m in history[:keep_from]),
        compacted=len(old),
        tokens_before=tokens_before,
        reason=OVERFLOW_CODE if force else "threshold",
    )
    return AIMessage(
        content=answer.text,
        id=answer.id or f"compaction-{number}-{keep_from}",
        additional_kwargs={COMPACTION_KEY: record},
        usage_metadata=getattr(answer, "usage_metadata", None),
    )


def _split(messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], list[BaseMessage]]:
    if messages and isinstance(messages[0], SystemMessage):
        return [messages[0]], list(messages[1:])
    return [], list(messages)


def prepare_model_input(
    messages: Sequence[BaseMessage],
    *,
    model: Runnable,
    budget: ContextBudget,
    config: RunnableConfig | None = None,
    force: bool = False,
) -> ModelInput:
    """The messages to send for an agent's next call, compacting its history when needed.

    Args:
        messages: The system prompt (optional, first) and the agent's history, markers included.
        model: The agent's model without tools (writes the summary).
        budget: The agent's budget.
        config: The step's config.
        force: Compact even under the threshold (the provider refused the call).

    Returns:
        The view to send and the new marker (if any) to append to the history.
    """
    system, history = _split(messages)
    view = [*system, *model_view(history, budget=budget)]
    tokens = budget.counter(view)
    if tokens <= budget.limit and not force:
        return ModelInput(view, [], tokens)
    marker = compact(history, model=model, budget=budget, config=config, tokens_before=tokens, force=force)
    if marker is None:
        return ModelInput(view, [], tokens)
    view = [*system, *model_view([*history, marker], budget=budget)]
    after = budget.counter(view)
    _announce(marker, config, tokens_after=after)
    return ModelInput(view, [marker], after)


def _announce(marker: AIMessage, config: RunnableConfig | None, *, tokens_after: int) -> None:
    """Tell ``stream_mode="custom"`` watchers (the CLI's live view) that an agent compacted."""
    try:
        writer = get_stream_writer()
    except RuntimeError:  # NOTE: called outside a graph run (a unit test, a script)
        return
    agent = (config or {}).get("metadata", {}).get(AGENT_KEY)
    writer({AGENT_KEY: agent, "event": "compaction", **compaction_of(marker), "tokens_after": tokens_after})  # type: ignore[dict-item]


def is_context_overflow(exc: BaseException) -> bool:
    """Whether a provider refused a call for being longer than the model's window."""
    return isinstance(exc, ContextOverflowError) or getattr(exc, "code", None) == OVERFLOW_CODE


def call_within_context(
    bound: Runnable,
    messages: Sequence[BaseMessage],
    *,
    model: Runnable,
    budget: ContextBudget,
    config: RunnableConfig | None = None,
) -> list[BaseMessage]:
    """Call the model on the agent's view; on a "context length exceeded" error compact and retry once.

    Args:
        bound: The model with the agent's tools bound.
        messages: The system prompt and the agent's history (markers included).
        model: The model without tools (writes summaries).
        budget: The agent's budget.
        config: The step's config.

    Returns:
        The new compaction marker(s), then the model's answer: append them to the history.

    Raises:
        ContextLengthExceededError: The provider refused the call again after a compaction.
    """
    prepared = prepare_model_input(messages, model=model, budget=budget, config=config)
    try:
        return [*prepared.new, bound.invoke(prepared.messages, config)]
    except Exception as exc:
        if not is_context_overflow(exc):
            raise
        refused: Exception = exc
    retry = prepare_model_input([*messages, *prepared.new], model=model, budget=budget, config=config, force=True)
    if retry.new:
        try:
            return [*prepared.new, *retry.new, bound.invoke(retry.messages, config)]
        except Exception as exc:
            if not is_context_overflow(exc):
                raise
            refused = exc
    raise ContextLengthExceededError(
        f"{OVERFLOW_CODE}: the model refused the call as longer than its context window, "
        f"{'even after compacting the history' if retry.new else 'and nothing was left to compact'} "
        f"({retry.tokens} tokens counted, window {budget.window}). Give this work to a member with a "
        f"larger model window or smaller tool results. Provider said: {refused}"
    ) from refused
