"""Lifecycle: agents join the team and leave it (terminated, shut down, failed).

An agent that leaves closes everything behind it: its own waits are cancelled,
requests routed to it are closed, whoever waits for its output is answered and
its inbox goes back to the senders. Nothing waits forever on a member that is gone.
"""

from __future__ import annotations

from teamgraph.ledger import requests
from teamgraph.ledger.book import Ledger
from teamgraph.ledger.mail import bounce, notify, post
from teamgraph.ledger.waits import cancel_waits, take_output_waits_on
from teamgraph.messaging import envelopes, notices, results
from teamgraph.messaging.envelopes import clip
from teamgraph.protocols import requests as tracker
from teamgraph.protocols.requests import SHUTDOWN
from teamgraph.records import (
    ENDED,
    IDLE,
    LEADER,
    LEADER_ROLE_ID,
    SHUT_DOWN,
    STOPPED,
    TERMINATED,
    AgentRecord,
    AgentStatus,
    AnswerEffect,
    Request,
    SpawnEffect,
    TerminateEffect,
)


def new_agent(name: str, role_id: str, *, index: int, created_by: str | None, now: str) -> AgentRecord:
    """A fresh registry record."""
    return {
        "name": name,
        "role": role_id,
        "status": IDLE,
        "index": index,
        "turn": 0,
        "steps": 0,
        "turn_steps": 0,
        "tool_calls": 0,
        "last_tick": -1,
        "waits": {},
        "inbox": [],
        "created_by": created_by,
        "created_at": now,
        "last_action": "created",
        "task": None,
    }


def ensure_leader(ledger: Ledger) -> None:
    """The first pass of a thread registers the leader."""
    if LEADER not in ledger.agents:
        ledger.agents[LEADER] = new_agent(LEADER, LEADER_ROLE_ID, index=0, created_by=None, now=ledger.now)


def on_spawn(ledger: Ledger, effect: SpawnEffect) -> None:
    """Create a member (and give it its task)."""
    role = ledger.runtime.role(effect["role"])
    asked, creator = effect["name"], effect["agent"]
    if role is None:
        # NOTE: the tool found the role; its file left the home since: nothing is created, the creator is told.
        notify(ledger, creator, notices.not_created(asked, why=f"role {effect['role']!r} is no longer defined"))
        return
    # NOTE: instances are numbered per display name, so two roles that share a
    # name never share a member; a name taken in this superstep gets the next one.
    number = max(int(asked.rsplit("_", 1)[1]), ledger.team["instances"].get(role.name, 0) + 1)
    while f"{role.name}_{number}" in ledger.agents:
        number += 1
    name = f"{role.name}_{number}"
    ledger.team["instances"][role.name] = number
    record = new_agent(name, role.id, index=len(ledger.agents), created_by=creator, now=ledger.now)
    record["task"] = clip(effect["task"], 200) if effect["task"] else None
    ledger.agents[name] = record
    if name != asked:
        notify(ledger, creator, notices.renamed(asked, name=name), wake=False)
    if effect["task"]:
        post(ledger, name, envelopes.task(creator, effect["task"]), sender=creator)


def end_agent(ledger: Ledger, name: str, status: AgentStatus, *, reason: str) -> None:
    """Take an agent out of the team: close its waits, answer who waits on it, bounce its inbox."""
    record = ledger.agents[name]
    cancel_waits(ledger, name, results.cancelled_because(f"you are {status}"))
    record["status"] = status
    record["last_action"] = reason
    for request in ledger.pending_requests():
        if request.get("route") == name:
            error = results.did_not_answer(name, status)
            if request.get("tool") == "sessions_send":
                error = results.communication_failed(name, error)
            requests.close_request(ledger, request, error, status=tracker.CANCELLED)
    take_output_waits_on(ledger, name, results.has_ended(name, status))
    inbox, record["inbox"] = record["inbox"], []
    for message in inbox:
        bounce(ledger, message["id"], message["text"], to=name, status=status)


def on_terminate(ledger: Ledger, effect: TerminateEffect) -> None:
    end_agent(ledger, effect["target"], TERMINATED, reason=f"terminated by {effect['agent']}")


def on_answer(ledger: Ledger, effect: AnswerEffect) -> None:
    """An answer or decision: a member's answer to a shutdown request ends it; the rest are ``requests``'."""
    record = ledger.request(effect["request_id"])
    if record is None or record["kind"] != SHUTDOWN:
        requests.on_answer(ledger, effect)
        return
    if requests.refuse_answer(ledger, effect, record):
        return
    member, text, rid = effect["agent"], effect["answer"], record["id"]
    approve = bool(effect["approve"])
    status = tracker.APPROVED if approve else tracker.REJECTED
    ledger.save(tracker.close(record, status=status, answer=text, closed_at=ledger.now))
    if approve:
        end_agent(ledger, member, SHUT_DOWN, reason=f"shut down ({rid})")
        notify(ledger, LEADER, notices.shutdown_approved(member, request_id=rid))
    else:
        notify(ledger, LEADER, notices.shutdown_rejected(member, request_id=rid, reason=text))


def expire_shutdown(ledger: Ledger, record: Request, why: str) -> None:
    """A shutdown request was not answered (in time, or before the turn ended): the member is terminated."""
    target = record.get("route", record["to"])
    ledger.save(tracker.close(record, status=tracker.EXPIRED, answer=why, closed_at=ledger.now))
    if ledger.agents[target]["status"] not in ENDED:
        end_agent(ledger, target, TERMINATED, reason=why)
    notify(ledger, LEADER, notices.shutdown_expired(target, request_id=record["id"], why=why))


def expire_run(ledger: Ledger, record: Request) -> None:
    """A background run passed runTimeoutSeconds: stop the child and tell the requester."""
    child, rid = record.get("route", record["to"]), record["id"]
    ledger.save(tracker.close(record, status=tracker.EXPIRED, answer="run timed out", closed_at=ledger.now))
    if ledger.agents[child]["status"] not in ENDED:
        cancel_waits(ledger, child, results.cancelled_because(f"{rid} timed out"))
        ledger.agents[child]["status"] = STOPPED
        ledger.agents[child]["last_action"] = f"stopped: {rid} timed out"
    notify(ledger, record["from"], notices.run_timed_out(rid, child=child))
