"""Envelopes: how one agent's words arrive in another agent's history.

What an agent says to another arrives as a user-role message, wrapped so the
receiver knows who speaks, what kind of message it is and which id to answer
(our English rendering of the seed formats).
"""

from __future__ import annotations

from langchain_core.messages import HumanMessage

LEADER = "Team Leader"

# NOTE: stored on every envelope message so histories can be filtered by kind
# without parsing the text.
ENVELOPE_KEY = "teamgraph_envelope"


def _wrap(sender: str, tag: str, body: str) -> str:
    return f"<{sender}><{tag}>{body}</{tag}></{sender}>"


def task(sender: str, body: str) -> str:
    """A task given to a member."""
    return f"Task from {sender}\n{_wrap(sender, 'Task', body)}"


def message(sender: str, body: str) -> str:
    """A message (guidance, information) that asks for no particular reply."""
    return f"Message from {sender}\n{_wrap(sender, 'Message', body)}"


def output(sender: str, out_id: str, body: str, *, final: bool) -> str:
    """A member's progress output or its turn's result, for the leader."""
    kind = "Result" if final else "Progress"
    return f"{kind} from {sender} · id: {out_id}\n{_wrap(sender, 'Output', body)}"


# How the receiver of each request kind responds (for the envelope's header).
_RESPONSE = {
    ("ask", "tool"): ("Question", "Ask", "answer with answer_sub_agent_question"),
    ("question", "tool"): ("Question", "Ask", "answer with answer_other_agent"),
    ("question", "output"): ("Question", "Ask", "your next reply is the answer (or use answer_other_agent)"),
    ("member_plan", "tool"): ("Plan", "Plan", "review with review_plan"),
    ("approval", "tool"): ("Approval request", "Approval", "decide with review_plan"),
    ("shutdown", "tool"): ("Shutdown request", "ShutdownRequest", "respond with shutdown_response"),
    ("call", "output"): ("Call", "Call", "your next reply is the answer (or use answer_other_agent)"),
}

REPLY_SKIP = "REPLY_SKIP"
"""A reply that ends a ping-pong exchange (seed 004)."""
ANNOUNCE_SKIP = "ANNOUNCE_SKIP"
"""A result that is not announced to the requester (seed 004)."""
CONTROL_WORDS = frozenset({REPLY_SKIP, ANNOUNCE_SKIP})


def request(kind: str, sender: str, request_id: str, body: str, *, reply_via: str = "tool", style: str | None = None) -> str:
    """A request (question, plan, approval, shutdown) the receiver must respond to."""
    title, tag, how = _RESPONSE[(style or kind, reply_via)]
    return f"{title} from {sender} · id: {request_id} · {how}\n{_wrap(sender, tag, body)}"


def reply(sender: str, request_id: str, body: str, *, late: bool = False, round_: str = "") -> str:
    """An answer that reaches the asker as a message (after a time-out, or a run's result)."""
    kind = "Late reply" if late else "Reply"
    extra = f" · {round_}" if round_ else ""
    return f"{kind} from {sender} · to: {request_id}{extra}\n{_wrap(sender, 'Reply', body)}"


def notice(body: str) -> str:
    """A one-line notice from the team runtime (not from an agent)."""
    return f"Notice · {body}"


def as_message(texts: list[str], *, kind: str = "inbox") -> HumanMessage:
    """Batch the envelopes that arrive together into one user-role message."""
    return HumanMessage(content="\n\n".join(texts), additional_kwargs={ENVELOPE_KEY: kind})


def clip(text: str, limit: int = 120) -> str:
    """One line of at most ``limit`` characters, for notices and statuses."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
