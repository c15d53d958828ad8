"""Notices: what the team runtime itself tells an agent (not an agent's words).

A notice is one line that starts with ``Notice ·``. Each has a *kind*, stored on
the message that carries it (``envelopes.ENVELOPE_KEY``: ``notice:<kind>``), so a
program (or a test) tells a bounce from a reminder without reading English.
The wording lives here, next to the envelopes, and nowhere else.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from teamgraph.messaging.envelopes import clip, notice

# Notice kinds.
BOUNCED: Final = "bounced"
WITHDRAWN: Final = "withdrawn"
RENAMED: Final = "renamed"
NOT_CREATED: Final = "not_created"
WAITS_FOR_USER: Final = "waits_for_user"
PEER_TRAFFIC: Final = "peer_traffic"
NOT_DELIVERED: Final = "answer_not_delivered"
SHUTDOWN_APPROVED: Final = "shutdown_approved"
SHUTDOWN_REJECTED: Final = "shutdown_rejected"
SHUTDOWN_EXPIRED: Final = "shutdown_expired"
RUN_TIMED_OUT: Final = "run_timed_out"
STOPPED: Final = "stopped"
FAILED: Final = "failed"
STEP_BUDGET: Final = "step_budget"
NO_REPORT: Final = "no_report"
CANCELLED: Final = "cancelled"
RUN_BUDGET: Final = "run_budget"
REPORT_DUE: Final = "report_due"
REMINDER: Final = "reminder"
TASK_REFUSED: Final = "task_refused"
FILE_CHANGED: Final = "file_changed"
RETRY_REMINDER: Final = "retry_reminder"
COMMUNICATION_FAILED: Final = "communication_failed"


class Notice(NamedTuple):
    """A notice: its kind and the line the agent reads."""

    kind: str
    text: str

    @property
    def envelope_kind(self) -> str:
        """What its message stores under ``ENVELOPE_KEY``: ``notice:<kind>``."""
        return f"notice:{self.kind}"


def _notice(kind: str, body: str) -> Notice:
    return Notice(kind, notice(body))


def bounced(message_id: str, *, to: str, status: str, text: str) -> Notice:
    """A message could not be delivered: it goes back to its sender."""
    return _notice(BOUNCED, f"Not delivered ({message_id}): {to} is {status}. Your message: {clip(text, 200)}")


def withdrawn(request_id: str, *, asker: str, status: str, why: str) -> Notice:
    """A request was closed before its receiver read it: the notice takes its envelope's place."""
    return _notice(WITHDRAWN, f"{request_id} from {asker} was {status} before you read it: {clip(why, 200)}")


def renamed(asked: str, *, name: str) -> Notice:
    """A spawn's name was taken in the same superstep: the member got the next number."""
    return _notice(RENAMED, f"{asked} was taken; the new member is {name}.")


def not_created(asked: str, *, why: str) -> Notice:
    """A spawn the tool accepted could not be applied (its role's file left the home since)."""
    return _notice(NOT_CREATED, f"{asked} was not created: {why}.")


def waits_for_user(asker: str, *, kind: str, request_id: str, body: str) -> Notice:
    """A member's request went to a person (the leader is told, not asked)."""
    return _notice(WAITS_FOR_USER, f"{asker}'s {kind} request {request_id} waits for the user: {clip(body)}")


def peer_traffic(line: str) -> Notice:
    """Member-to-member traffic, in one line, for the leader."""
    return _notice(PEER_TRAFFIC, line)


def answer_not_delivered(request_id: str, *, state: str, why: str) -> Notice:
    """An answer met a request that was already closed (or passed on)."""
    reason = f": {clip(why, 200)}" if why else ""
    return _notice(NOT_DELIVERED, f"Your answer to {request_id} was not delivered: {request_id} was {state}{reason}")


def shutdown_approved(member: str, *, request_id: str) -> Notice:
    return _notice(SHUTDOWN_APPROVED, f"{member} approved {request_id} and shut down.")


def shutdown_rejected(member: str, *, request_id: str, reason: str) -> Notice:
    return _notice(SHUTDOWN_REJECTED, f"{member} rejected {request_id}: {reason}")


def shutdown_expired(member: str, *, request_id: str, why: str) -> Notice:
    return _notice(SHUTDOWN_EXPIRED, f"{member} {why}: it was terminated and {request_id} expired.")


def run_timed_out(request_id: str, *, child: str) -> Notice:
    return _notice(
        RUN_TIMED_OUT,
        f"{request_id} timed out: {child} was stopped before it finished. Its partial work is in its history.",
    )


def stopped(by: str) -> Notice:
    """The agent's own turn was stopped."""
    return _notice(STOPPED, f"Your turn was stopped by {by}. Wait for new instructions.")


def failed(member: str, *, error: str) -> Notice:
    return _notice(FAILED, f"{member} failed: {clip(error, 300)}")


def step_budget(member: str, *, steps: int) -> Notice:
    return _notice(
        STEP_BUDGET, f"{member} used {steps} steps in this turn and was stopped. Send it a message to continue."
    )


def no_report(member: str) -> Notice:
    return _notice(NO_REPORT, f"{member} finished its turn without a report.")


def cancelled(request_id: str, *, asker: str, why: str) -> Notice:
    """A request the receiver had read was cancelled (its asker stopped, ended or timed out)."""
    return _notice(CANCELLED, f"{request_id} from {asker} was cancelled: {clip(why, 200)}")


def run_budget(calls: int, *, stopped: list[str]) -> Notice:
    listing = ", ".join(stopped) or "none was working"
    return _notice(
        RUN_BUDGET,
        f"The team used {calls} model calls, its budget for this run (Policy.max_model_calls). "
        f"Members stopped: {listing}. Report to the user now what was done and what is left.",
    )


def report_due() -> Notice:
    return _notice(
        REPORT_DUE, "Your team is idle and the user has no answer yet: report what was done and what is left."
    )


def reminder(listing: str) -> Notice:
    """Requests routed to the leader wait: they block the askers."""
    return _notice(
        REMINDER,
        f"Requests waiting for you block your team: {listing}. Answer questions with answer_sub_agent_question, "
        "plans and approvals with review_plan, or escalate_to_user.",
    )


def task_refused(action: str, *, error: str) -> Notice:
    """A task-board change was refused (``action``: created, updated)."""
    return _notice(TASK_REFUSED, f"Task not {action}: {error}")


def file_changed(path: str, *, by: str, version: int, action: str) -> Notice:
    """A file the agent read was changed by another agent (the collaboration spec §2.2)."""
    return _notice(
        FILE_CHANGED,
        f"{by} changed {path} ({action}, now version {version}) after you read it. "
        "Read it again before you rely on it or write it.",
    )


def retry_reminder(request_id: str, *, asker: str, body: str) -> Notice:
    """A call to this agent timed out once: the retry (the collaboration spec §5.1, wait then retry)."""
    return _notice(
        RETRY_REMINDER,
        f"{asker} is still waiting for your reply to {request_id} (it timed out once): {clip(body, 200)}",
    )


def communication_failed(asker: str, *, target: str, request_id: str) -> Notice:
    """A member's call timed out again after its retry: the master is told (the collaboration spec §5.1)."""
    return _notice(
        COMMUNICATION_FAILED,
        f"{asker}'s call {request_id} to {target} timed out twice (waited, retried): {target} may be stuck.",
    )
