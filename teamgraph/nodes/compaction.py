"""Context compaction: every agent's model call stays inside its context window.

Before each model call the agent's *view* is counted. Past ``Policy.context_threshold``
of the window, the older part of the history is summarised by the agent's own model
and the summary is stored IN the agent's history as a marker (an ``AIMessage`` whose
``additional_kwargs["teamgraph_compaction"]`` says where the verbatim part starts).
The checkpoint keeps every message, and a resumed process rebuilds the same view::

    system prompt + the latest summary + the messages after its cut

Tool results too large for the model are cut in the view, with a note saying how
to read the rest. The functions here do not depend on where the model is called
from (a role's step, in the scheduler's pool).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.constants import TAG_NOSTREAM

from teamgraph.models.calls import (
    AGENT_KEY,
    CALL_KEY,
    COMPACTION_CALL,
    COMPACTION_KEY,
)
from teamgraph.nodes.model_view import (
    CompactionRecord,
    ContextBudget,
    compaction_of,
    summary_message,
    view_and_tokens,
    view_entries,
)

KEEP_SHARE = 0.3
"""Share of the window the newest messages may take verbatim after a compaction."""
OVERFLOW_CODE = "context_length_exceeded"
"""The OpenAI error code of a request larger than the model's window."""

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


class ContextLengthExceededError(RuntimeError):
    """The provider refused a call as too long, even after compacting the history."""


@dataclass(frozen=True)
class ModelInput:
    """What to send to the model, and the markers to append to the history first."""

    messages: list[BaseMessage]
    new: list[BaseMessage]
    tokens: int


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
        tokens_before: The view's tokens now (recorded; a forced compaction keeps at most a quarter).
        force: The provider refused the call: keep less verbatim than usual.

    Returns:
        The marker to append to the history, or None when there is nothing to summarise.
    """
    marker, entries, tokens = view_entries(history, budget)
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
    view, tokens = view_and_tokens(system, history, budget=budget)
    if tokens <= budget.limit and not force:
        return ModelInput(view, [], tokens)
    marker = compact(history, model=model, budget=budget, config=config, tokens_before=tokens, force=force)
    if marker is None:
        return ModelInput(view, [], tokens)
    view, after = view_and_tokens(system, [*history, marker], budget=budget)
    _announce(marker, config, tokens_after=after)
    return ModelInput(view, [marker], after)


def _announce(marker: AIMessage, config: RunnableConfig | None, *, tokens_after: int) -> None:
    """Tell ``stream_mode="custom"`` watchers (the CLI's live view) that an agent compacted."""
    try:
        writer = get_stream_writer()
    except RuntimeError:  # NOTE: called outside a graph run (a unit test, a script)
        return
    agent = (config or {}).get("metadata", {}).get(AGENT_KEY)
    record: dict[str, object] = dict(compaction_of(marker) or {})
    writer({AGENT_KEY: agent, "event": "compaction", **record, "tokens_after": tokens_after})


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
