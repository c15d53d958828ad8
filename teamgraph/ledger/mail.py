"""Mail: messages between agents, from the user and from the runtime.

Every message gets an id and a delivery record: queued in the receiver's inbox,
then delivered (in its history) and read (a step saw it), or bounced back to
its sender. No message is silently lost.

Terms:
    inbox: messages that reached an agent but are not in its history yet. A busy
        agent gets them after its tool results (inline); an idle one starts a new
        turn; an agent with an open tool call gets them once the call is answered
        (a tool call and its result must stay adjacent).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AnyMessage, HumanMessage

from teamgraph.ledger.book import Ledger
from teamgraph.messaging import envelopes, notices
from teamgraph.messaging.envelopes import INBOX
from teamgraph.messaging.notices import Notice
from teamgraph.records import ENDED, LEADER, ROUTER, RUNNING, USER, DeliverEffect


def post(ledger: Ledger, to: str, text: str, *, sender: str, wake: bool = True, kind: str = INBOX) -> str:
    """Put a message in ``to``'s inbox, or bounce it to the sender if ``to`` is gone.

    Args:
        ledger: The pass.
        to: The receiver's display name.
        text: The envelope (or notice) as the receiver will read it.
        sender: Who sends it (a display name, ``router`` or ``user``).
        wake: Whether it starts a turn of an idle receiver.
        kind: ``inbox``, or ``notice:<kind>`` for the runtime's notices.

    Returns:
        The message id.
    """
    message_id = f"msg_{ledger.next_id('message')}"
    record = ledger.agents.get(to)
    ledger.track(message_id, sender=sender, to=to, sent_at=ledger.now, status="queued", delivered_at=None, read_at=None)
    if record is None or record["status"] in ENDED:
        bounce(ledger, message_id, text, to=to, status=record["status"] if record else "unknown")
        return message_id
    record["inbox"].append({"id": message_id, "text": text, "from": sender, "wake": wake, "kind": kind})
    return message_id


def notify(ledger: Ledger, to: str, notice: Notice, *, wake: bool = True) -> str:
    """Post one of the runtime's notices (``messaging/notices.py``)."""
    return post(ledger, to, notice.text, sender=ROUTER, wake=wake, kind=notice.envelope_kind)


def bounce(ledger: Ledger, message_id: str, text: str, *, to: str, status: str) -> None:
    """Return an undeliverable message to its sender (no message is silently lost)."""
    ledger.track(message_id, status="bounced")
    sender = ledger.changed_deliveries[message_id]["sender"]
    if sender in ledger.agents and sender != to and ledger.agents[sender]["status"] not in ENDED:
        notify(ledger, sender, notices.bounced(message_id, to=to, status=status, text=text))


def flush(ledger: Ledger, name: str) -> None:
    """Move ``name``'s inbox into its history: inline if busy, as a new turn if idle."""
    record = ledger.agents[name]
    if not record["inbox"] or record["waits"] or record["status"] in ENDED:
        return
    if name in ledger.team.get("in_flight", {}):
        return  # NOTE: its step in flight did not see them: they go after that step's messages
    if record.get("slice") and record["status"] == RUNNING:
        return  # NOTE: its slice goes on (``Policy.slice_steps``): they go after the slice's last call
    if record["status"] != RUNNING:
        if not any(m["wake"] for m in record["inbox"]) or (name != LEADER and ledger.budget_spent()):
            return
        record["status"] = RUNNING
        record["turn"] = record["turn"] + 1
        record["turn_steps"] = 0
    inbox, record["inbox"] = record["inbox"], []
    for message in inbox:
        ledger.track(message["id"], status="delivered", delivered_at=ledger.now)
    record["unread"] = [*record.get("unread", []), *(m["id"] for m in inbox)]
    # NOTE: one user-role message per envelope (several batched into one make a model
    # answer the first and miss the ids of the others).
    ledger.appends[name].extend(envelopes.inbox_message(m["text"], kind=m.get("kind", INBOX)) for m in inbox)


def tell_leader_peer_traffic(ledger: Ledger, line: str, full: str) -> None:
    """Member-to-member traffic reaches the leader as a one-line notice (or in full, by policy)."""
    if ledger.policy.peer_traffic == "full":
        post(ledger, LEADER, full, sender=ROUTER, wake=False)
    else:
        notify(ledger, LEADER, notices.peer_traffic(line), wake=False)


def new_user_messages(messages: Sequence[AnyMessage], seen: int) -> list[HumanMessage]:
    """The user's messages the router has not taken in yet (``seen``: ``team["user_seen"]``)."""
    return [m for m in messages[seen:] if isinstance(m, HumanMessage)]


def take_user_input(ledger: Ledger) -> None:
    """The user's new messages go to the leader; each starts a new run (a fresh model-call budget)."""
    for message in new_user_messages(ledger.user_messages, ledger.team.get("user_seen", 0)):
        post(ledger, LEADER, message.text, sender=USER)
        ledger.team["run_calls"] = 0
    ledger.team["user_seen"] = len(ledger.user_messages)


def on_deliver(ledger: Ledger, effect: DeliverEffect) -> None:
    """``send_message`` and friends: a task or a message for another agent."""
    sender, to = effect["agent"], effect["to"]
    render = envelopes.task if effect["type"] == "task" else envelopes.message
    text = render(sender, effect["body"])
    post(ledger, to, text, sender=sender)
    if LEADER not in (sender, to):
        line = f"{sender} → {to} ({effect['type']}): {envelopes.clip(effect['body'])}"
        tell_leader_peer_traffic(ledger, line, text)
