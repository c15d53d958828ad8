"""The wording of the results the router gives to deferred tool calls (docs/protocols.md).

Kept on the messaging floor so the router and the tools share one wording.
"""

from __future__ import annotations

from langchain_core.messages import ToolMessage

OUTCOME_KEY = "teamgraph_outcome"
"""Where a result the router gives records how the call ended (``timed_out``, ``cancelled``)."""
TIMED_OUT = "timed_out"
CANCELLED = "cancelled"
ERROR_KEY = "teamgraph_error"
"""Where a tool's error result records its code (``teamgraph/tools/errors.py``: ``unknown_agent``, ...)."""


def outcome_of(result: ToolMessage | None) -> str | None:
    """How the router ended a deferred call (``timed_out``, ``cancelled``), or None."""
    return None if result is None else result.additional_kwargs.get(OUTCOME_KEY)


def error_of(result: ToolMessage | None) -> str | None:
    """The code of a tool's error result (``unknown_agent``, ``forbidden``...), or None."""
    return None if result is None else result.additional_kwargs.get(ERROR_KEY)


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


DEADLOCK = "deadlock"
"""The outcome of a wait the router cancelled to break a deadlock."""
CALL_NOT_COMPLETED = "Error: this call could not be completed."
"""The result of a deferred call that asked the router for nothing."""


def cancelled_because(why: str) -> str:
    """The result of a call cancelled by the runtime (``why``: "you are terminated", ...)."""
    return f"Cancelled: {why}."


def nobody_will_answer(target: str, status: str) -> str:
    """A request to an agent that has ended."""
    return f"{target} is {status}: nobody will answer. Use list_active_sub_agents."


def did_not_answer(target: str, status: str) -> str:
    """The request's receiver ended before it answered."""
    return f"{target} is {status} and did not answer."


def has_ended(target: str, status: str) -> str:
    """A wait for the next output of an agent that has ended."""
    return f"{target} is {status}."


def no_output_to_wait_for(target: str, status: str) -> str:
    return f"{target} is {status}: there is no output to wait for."


def finished_silently(target: str) -> str:
    """The awaited agent ended its turn without saying anything more."""
    return f"{target} finished its turn without further output."


def replied(target: str, out_id: str, text: str) -> str:
    """An agent's output, as the result of a call that waited for it."""
    return f"{target} replied ({out_id}):\n{text}"


def request_instead(asker: str, envelope: str) -> str:
    """The awaited member opened a request (to the waiter) instead of replying."""
    return f"{asker} opened a request instead of replying:\n{envelope}"


def ended_without_reply(target: str) -> str:
    return f"{target} ended its turn without replying."


def ended_without_answer(target: str, final: str) -> str:
    return f"{target} ended its turn without answering (answer_other_agent). Its final message: {final}"


def answered_by(by: str, text: str) -> str:
    return f"{by} answered: {text}"


def leader_did_not_answer(leader: str) -> str:
    return f"The {leader} did not answer. Decide yourself, state your assumption, and go on."


def user_answered(text: str) -> str:
    return f"The user answered: {text}"


def user_confirmed(leader: str, answer: str) -> str:
    return f"{leader} answered (confirmed by the user): {answer}"


def user_answered_instead(leader: str, text: str) -> str:
    return f"The user answered instead of {leader}: {text}"


def grouped(parts: list[tuple[str, str, str, str]]) -> str:
    """Several answers to one call (``call_agents``): (target, request id, status, answer) each."""
    return "\n\n".join(f"[{target} · {rid} · {status}]\n{answer}" for target, rid, status, answer in parts)


def deadlock(chain: str, why: str) -> str:
    """A wait cancelled to break a deadlock (``chain``: who waits for whom)."""
    return (
        f"Error: deadlock: {chain}. {why}, so this wait (the newest) was cancelled. "
        "Answer the questions waiting for you first, then ask again if you still need to."
    )


def _remark(feedback: str) -> str:
    """`` Feedback: ...`` after a verdict, or nothing."""
    return f" Feedback: {feedback.rstrip('.')}." if feedback else ""


def verdict(request_id: str, *, approved: bool, by: str, feedback: str) -> str:
    """``approval_3 approved by Team Leader. Feedback: ...``"""
    remark = _remark(feedback)
    return f"{request_id} {'approved' if approved else 'rejected'} by {by}.{remark}"


def approval_decided(request_id: str, *, approved: bool, by: str, feedback: str) -> str:
    line = verdict(request_id, approved=approved, by=by, feedback=feedback)
    return line + ("" if approved else " Do not perform the operation.")


def plan_decided(request_id: str, *, approved: bool, by: str, feedback: str, board: list[tuple[str, str]]) -> str:
    """The leader's plan: approved (its steps become the task board) or rejected."""
    remark = _remark(feedback)
    if not approved:
        return f"Plan {request_id} rejected by {by}.{remark} Revise the plan and call propose_plan again."
    steps = ", ".join(f"{task_id} {title}" for task_id, title in board)
    return f"Plan {request_id} approved by {by}.{remark} Its steps are the task board now: {steps}."


def member_plan_decided(request_id: str, *, approved: bool, by: str, feedback: str) -> str:
    remark = _remark(feedback)
    verdict_word = "approved" if approved else "rejected"
    tail = "" if approved else " Revise it and submit_plan again."
    return f"Your plan ({request_id}) was {verdict_word} by {by}.{remark}{tail}"
