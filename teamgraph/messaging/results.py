"""The wording of the results the router gives to deferred tool calls (docs/protocols.md).

Kept on the messaging floor so the router and the tools share one wording.
"""

from __future__ import annotations

from langchain_core.messages import ToolMessage

OUTCOME_KEY = "teamgraph_outcome"
"""Where a result the router gives records how the call ended (``timed_out``, ``cancelled``)."""
TIMED_OUT = "timed_out"
CANCELLED = "cancelled"


def outcome_of(result: ToolMessage | None) -> str | None:
    """How the router ended a deferred call (``timed_out``, ``cancelled``), or None."""
    return None if result is None else result.additional_kwargs.get(OUTCOME_KEY)


def timed_out(target: str, request_id: str, seconds: float) -> str:
    """The result of a blocking sessions_send whose target did not reply in time.

    Args:
        target: The target's session key.
        request_id: The request (``ask_N``) whose reply will come later as a message.
        seconds: The time-out the caller gave (``timeoutSeconds``).
    """
    return (
        f'Communication with target agent "{target}" timed out ({seconds:g} seconds without a response; '
        f"request {request_id}).\n"
        "Possible causes:\n1. The target is busy with other tasks.\n2. The task is complex and needs more time.\n"
        "Suggestions:\n1. Retry later, or send again with a larger timeoutSeconds.\n"
        "2. Use sessions_spawn to run it in the background.\n"
        f"{target} keeps working: its reply will reach you as a message."
    )


def communication_failed(target: str, error: str) -> str:
    """The result of a sessions_send that failed for another reason (the target failed, a deadlock...).

    Args:
        target: The target's session key.
        error: What went wrong.
    """
    return (
        f'Communication with target agent "{target}" failed.\n'
        f"Error: {error}\n"
        "Suggestions:\n1. Check that the sessionKey is right (sessions_list).\n"
        "2. Try sessions_spawn to run it in the background."
    )


def plan_submitted(request_id: str) -> str:
    """What submitting a plan returns at once, in the team protocols' words (for the router's call site)."""
    return f"Plan submitted (request_id={request_id}). Waiting for lead approval."
