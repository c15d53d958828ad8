"""Envelopes: how one agent's words arrive in another agent's history.

What an agent says to another arrives as a user-role message, wrapped so the
receiver knows who speaks, what kind of message it is and which id to answer.
The layout follows the Team Leader spec (docs/protocols.md, "Envelopes"): a title
line, one ``key: value`` line per field (``id``, ``to``, ...), then the XML tags,
each on its own line::

    Progress from UI Operator_1
    id: out_7
    <UI Operator_1>
    <Output>
    Login page designed: project/web/login.html
    </Output>
    </UI Operator_1>

``parse`` reads an envelope back into its fields.
"""

from __future__ import annotations

import re
from typing import TypedDict

from langchain_core.messages import HumanMessage

from teamgraph.records import LEADER

__all__ = ["LEADER"]

# NOTE: stored on every envelope message so histories can be filtered by kind
# without parsing the text.
ENVELOPE_KEY = "teamgraph_envelope"


class Envelope(TypedDict):
    """An envelope read back by ``parse``."""

    title: str
    """What it is: "Task", "Message", "Progress", "Result", "Question", "Reply", ..."""
    sender: str
    """The display name of who speaks."""
    fields: dict[str, str]
    """The header fields: ``id``, ``to``, ``respond``, ``note``."""
    tag: str
    """The inner tag: Task, Message, Output, Ask, Plan, Approval, ShutdownRequest, Call, Reply."""
    body: str
    """What the sender wrote."""


def _envelope(title: str, sender: str, tag: str, body: str, **fields: str) -> str:
    # NOTE: no blank line anywhere: envelopes that arrive together are joined by one
    # blank line (as_message), and that is how the receiver tells them apart.
    header = "".join(f"{key.replace('_', ' ')}: {value}\n" for key, value in fields.items() if value)
    return f"{title} from {sender}\n{header}<{sender}>\n<{tag}>\n{body}\n</{tag}>\n</{sender}>"


_ENVELOPE = re.compile(
    r"(?P<title>[^\n]+?) from (?P<sender>[^\n]+)\n"
    r"(?P<fields>(?:[a-z][a-z ]*: [^\n]*\n)*)"
    r"<(?P=sender)>\n<(?P<tag>\w+)>\n(?P<body>.*)\n</(?P=tag)>\n</(?P=sender)>",
    re.DOTALL,
)


def parse(text: str) -> Envelope | None:
    """Read one envelope back into its fields (None if ``text`` is not an envelope).

    Args:
        text: One envelope, as ``task``, ``message``, ``output``, ``request`` or ``reply`` wrote it.

    Returns:
        Its title, sender, header fields, tag and body.
    """
    match = _ENVELOPE.fullmatch(text)
    if match is None:
        return None
    fields = dict(line.split(": ", 1) for line in match["fields"].splitlines())
    return Envelope(title=match["title"], sender=match["sender"], fields=fields, tag=match["tag"], body=match["body"])


def task(sender: str, body: str) -> str:
    """A task given to a member."""
    return _envelope("Task", sender, "Task", body)


def message(sender: str, body: str) -> str:
    """A message (guidance, information) that asks for no particular reply."""
    return _envelope("Message", sender, "Message", body)


def output(sender: str, out_id: str, body: str, *, final: bool) -> str:
    """A member's progress output or its turn's result, for the leader."""
    return _envelope("Result" if final else "Progress", sender, "Output", body, id=out_id)


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
"""Contained in a reply, it ends a ping-pong exchange (docs/protocols.md, "Control words")."""
ANNOUNCE_SKIP = "ANNOUNCE_SKIP"
"""Contained in a background run's result, it is not announced to the requester."""
CONTROL_WORDS = frozenset({REPLY_SKIP, ANNOUNCE_SKIP})

# NOTE: "contains", as the sessions spec says, but as a whole word: REPLY_SKIPPED or
# NO_REPLY_SKIP are ordinary words.
_CONTROL_WORD = {word: re.compile(rf"(?<![A-Za-z0-9_]){word}(?![A-Za-z0-9_])") for word in CONTROL_WORDS}


def has_control_word(text: str, word: str) -> bool:
    """Whether ``text`` contains the control word ``word`` (REPLY_SKIP or ANNOUNCE_SKIP).

    Args:
        text: A reply or a result.
        word: ``REPLY_SKIP`` or ``ANNOUNCE_SKIP``.

    Returns:
        True if ``word`` occurs in ``text`` as a word of its own.
    """
    return bool(_CONTROL_WORD[word].search(text))


def without_control_words(text: str) -> str:
    """``text`` with every control word removed: what may be forwarded or reported.

    Args:
        text: A reply or a result.

    Returns:
        The rest of the text, stripped; empty if it held nothing but control words.
    """
    kept = []
    for line in text.splitlines():
        rest = line
        for pattern in _CONTROL_WORD.values():
            rest = pattern.sub("", rest)
        # NOTE: a line that held only control words goes, so no blank line is left behind.
        if rest.strip() or not line.strip():
            kept.append(rest.rstrip())
    return "\n".join(kept).strip()


def request(
    kind: str, sender: str, request_id: str, body: str, *, reply_via: str = "tool", style: str | None = None
) -> str:
    """A request (question, plan, approval, shutdown) the receiver must respond to."""
    title, tag, how = _RESPONSE[(style or kind, reply_via)]
    return _envelope(title, sender, tag, body, id=request_id, respond=how)


def reply(sender: str, request_id: str, body: str, *, late: bool = False, round_: str = "") -> str:
    """An answer that reaches the asker as a message (after a time-out, or a run's result)."""
    return _envelope("Late reply" if late else "Reply", sender, "Reply", body, to=request_id, note=round_)


def notice(body: str) -> str:
    """A one-line notice from the team runtime (not from an agent)."""
    return f"Notice · {body}"


INBOX = "inbox"
"""The ``ENVELOPE_KEY`` value of agents' (and the user's) words; notices carry ``notice:<kind>``."""


def inbox_message(text: str, *, kind: str = INBOX) -> HumanMessage:
    """One envelope (or notice) as the user-role message the receiver's history keeps."""
    return HumanMessage(content=text, additional_kwargs={ENVELOPE_KEY: kind})


def as_message(texts: list[str], *, kind: str = INBOX) -> HumanMessage:
    """Batch the envelopes that arrive together into one user-role message."""
    return inbox_message("\n\n".join(texts), kind=kind)


def as_messages(texts: list[str], *, kind: str = INBOX) -> list[HumanMessage]:
    """One user-role message per envelope, in order (the Team Leader spec's layout).

    NOTE: several outputs batched into one message make a model answer the first
    and miss the ids of the others.

    Args:
        texts: The envelopes (and notices) that arrive together.
        kind: Stored under ``ENVELOPE_KEY`` on each message.

    Returns:
        The messages to append to the receiver's history.
    """
    return [inbox_message(text, kind=kind) for text in texts]


def clip(text: str, limit: int = 120) -> str:
    """One line of at most ``limit`` characters, for notices and statuses."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
