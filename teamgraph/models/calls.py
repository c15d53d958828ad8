"""What a model call is for, as its metadata says, and how compactions show in a conversation.

Every model call of an agent carries ``teamgraph_agent`` and ``teamgraph_role`` in its
metadata; a call that is not the agent's turn also carries ``teamgraph_call`` (today
only ``"compaction"``: writing a summary of the agent's older history). A summary
shown to the model carries ``teamgraph_compaction`` with the AI turns it replaced, so
a model that plays turns by counting them (ScriptedChatModel) stays on the right turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.messages import AIMessage, BaseMessage

AGENT_KEY = "teamgraph_agent"
"""Metadata key naming the agent that calls the model."""
ROLE_KEY = "teamgraph_role"
"""Metadata key naming that agent's role."""
CALL_KEY = "teamgraph_call"
"""Metadata key naming what a model call is for when it is not an agent's turn."""
COMPACTION_CALL = "compaction"
"""``CALL_KEY`` value of a call that writes a summary of an agent's older history."""
COMPACTION_KEY = "teamgraph_compaction"
"""``additional_kwargs`` key of compaction messages: ``number`` (1, 2, ...) and
``ai_turns`` (the agent's AI turns that the summary replaces)."""
COMPACTION_SUFFIX = "#compaction"
"""Script key suffix: ``"UI Operator_1#compaction"`` lists that agent's summaries."""


def call_kind(
    run_manager: CallbackManagerForLLMRun | AsyncCallbackManagerForLLMRun | None,
    kwargs: dict[str, Any],
) -> str | None:
    """What the call is for (``"compaction"``), or None for an agent's turn."""
    if run_manager is not None and run_manager.metadata.get(CALL_KEY):
        return str(run_manager.metadata[CALL_KEY])
    return kwargs.get(CALL_KEY)


def compaction_record(message: BaseMessage) -> dict[str, Any] | None:
    """The compaction record a message carries, if any."""
    record = message.additional_kwargs.get(COMPACTION_KEY)
    return record if isinstance(record, dict) else None


def turns_taken(messages: Sequence[BaseMessage]) -> int:
    """The agent's AI turns in a conversation, counting those a summary replaced.

    Args:
        messages: The conversation sent to the model.

    Returns:
        How many turns the agent already played.
    """
    taken = 0
    for m in messages:
        record = compaction_record(m)
        if record is not None:
            # A summary shown to the model stands for the turns it replaced; the
            # summary kept in the history is not a turn.
            taken += 0 if isinstance(m, AIMessage) else int(record.get("ai_turns", 0))
        elif isinstance(m, AIMessage):
            taken += 1
    return taken


def default_summary(messages: Sequence[BaseMessage], number: int) -> str:
    """The summary written when a script has no compaction turns: deterministic and short."""
    text = "\n".join(str(m.content) for m in messages[1:])
    return f"Summary {number} of the earlier conversation ({len(text)} characters): {text[:300]}"
