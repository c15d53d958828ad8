"""The model's view of a history, kept and extended from one call to the next, is the view built afresh."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from teamgraph.models.calls import COMPACTION_KEY
from teamgraph.nodes.model_view import (
    ContextBudget,
    approximate_counter,
    model_view,
    view_and_tokens,
    view_entries,
)

BUDGET = ContextBudget(window=2000, threshold=0.8, counter=approximate_counter, overhead=17)
SYSTEM = [SystemMessage("You are Researcher_1. " * 5)]

steps = st.lists(
    st.sampled_from(
        ["human", "text", "tools", "big_tools", "read_file", "deferred", "answer", "marker", "usage", "other_provider"]
    ),
    min_size=1,
    max_size=30,
)


def _grow(history: list[BaseMessage], step: str, n: int, pending: list[str]) -> None:
    """Append what one kind of step adds to an agent's history (``pending``: calls answered later)."""
    if step == "answer" and pending:
        history.append(ToolMessage("y" * 3000, tool_call_id=pending.pop(0), name="read_file"))
    elif step == "human" or step == "answer":
        history.append(HumanMessage(f"message {n} " * (n % 7 + 1)))
    elif step in ("text", "usage", "other_provider"):
        usage = {"input_tokens": 10 * n, "output_tokens": 5, "total_tokens": 10 * n + 5} if step == "usage" else None
        provider = {"model_provider": "anthropic" if step == "other_provider" else "openai"}
        history.append(AIMessage(f"answer {n}", usage_metadata=usage, response_metadata=provider))
    elif step == "deferred":
        # NOTE: its (large) result lands in a later step ("answer"), as an answered question's does
        call = {"name": "read_file", "args": {"path": f"d{n}.md", "offset": 10}, "id": f"call_d{n}"}
        history.append(AIMessage("", tool_calls=[call], response_metadata={"model_provider": "openai"}))
        pending.append(call["id"])
    elif step == "marker":
        record = {"number": n, "keep_from": max(0, len(history) - 3), "ai_turns": 1, "compacted": 1,
                  "tokens_before": 1, "reason": "threshold"}  # fmt: skip
        history.append(AIMessage(f"summary {n}", additional_kwargs={COMPACTION_KEY: record}))
    else:
        name = "read_file" if step == "read_file" else "list_files"
        calls = [{"name": name, "args": {"path": f"f{n}.md"}, "id": f"call_{n}_{k}"} for k in range(2)]
        history.append(AIMessage("", tool_calls=calls, response_metadata={"model_provider": "openai"}))
        size = 3000 if step in ("big_tools", "read_file") else 20
        history.extend(ToolMessage("x" * size, tool_call_id=c["id"], name=name) for c in calls)


@settings(max_examples=150, deadline=None)
@given(steps)
def test_the_kept_view_extended_step_by_step_is_the_view_built_afresh(kinds: list[str]) -> None:
    history: list[BaseMessage] = [HumanMessage("Task from Team Leader: survey the sources.")]
    pending: list[str] = []
    for n, kind in enumerate(kinds):
        _grow(history, kind, n, pending)
        kept_messages, kept_tokens = view_and_tokens(SYSTEM, list(history), budget=BUDGET)
        # NOTE: a first message of its own: nothing kept applies, the view is built from scratch
        afresh = [history[0].model_copy(), *history[1:]]
        fresh_messages, fresh_tokens = view_and_tokens(SYSTEM, afresh, budget=BUDGET)
        assert kept_messages == fresh_messages, (n, kind)
        assert kept_tokens == fresh_tokens == BUDGET.count(kept_messages), (n, kind)
        # NOTE: what compaction cuts by: each entry's own tokens, kept with the view
        _, entries, counts = view_entries(list(history), BUDGET)
        assert counts == [BUDGET.counter([m]) for _, m in entries], (n, kind)


def test_a_history_that_went_another_way_from_the_same_first_message_gets_its_own_view() -> None:
    """A thread rewound and run again (or forked) keeps its first message but not the rest."""
    first = HumanMessage("Task from Team Leader: survey the sources.")
    went = [first, *(AIMessage(f"first way {i}") for i in range(3))]
    other = [first, *(AIMessage(f"other way {i}") for i in range(4))]
    view_and_tokens(SYSTEM, went, budget=BUDGET)
    messages, tokens = view_and_tokens(SYSTEM, other, budget=BUDGET)
    assert [m.text for m in messages[1:]] == [m.text for m in other]
    assert tokens == BUDGET.count(messages)


def _words(messages) -> int:
    """A user's counter: one token per word."""
    return sum(len(m.text.split()) + 3 for m in messages)


def _tool_history() -> list:
    """A history with a tool result far past the budget's share (truncated for the model) and a small one."""
    call = {"name": "read_file", "args": {"path": "a.txt"}, "id": "c1", "type": "tool_call"}
    small = {"name": "list_files", "args": {}, "id": "c2", "type": "tool_call"}
    return [
        HumanMessage("Please read a.txt.", id="h1"),
        AIMessage("", tool_calls=[call], id="a1"),
        ToolMessage("word " * 5000, tool_call_id="c1", id="t1"),
        AIMessage("", tool_calls=[small], id="a2"),
        ToolMessage("a.txt b.txt", tool_call_id="c2", id="t2"),
        AIMessage("Read it.", id="a3"),
        HumanMessage("Thanks, now summarise.", id="h2"),
        AIMessage("Done.", id="a4"),
    ]


@pytest.mark.parametrize("counter", [approximate_counter, _words], ids=["default", "custom"])
def test_the_views_counts_are_each_seen_messages_tokens_by_the_budgets_counter(counter):
    """Compaction cuts by ``view_entries``' counts: they equal per-message counting of what the model
    sees (a truncated tool result counted truncated), built at once or message by message."""
    budget = ContextBudget(window=4000, threshold=0.8, counter=counter)
    history = _tool_history()
    for end in range(1, len(history) + 1):
        _, entries, counts = view_entries(history[:end], budget)
        assert counts == [budget.counter([m]) for _, m in entries]
    seen = model_view(history, budget=budget)
    assert [m.id for m in seen] == [m.id for m in history]
    assert len(seen[2].text) < len(history[2].text) and seen[4] is history[4]
    _, fresh_entries, fresh_counts = view_entries(list(history), ContextBudget(4000, 0.8, counter))
    assert fresh_counts == counts and [m.text for _, m in fresh_entries] == [m.text for _, m in entries]
