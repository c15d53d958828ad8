"""Requests: open them, route them to whoever decides, close them once.

A request (question, plan, approval, shutdown, background run) is routed to an
agent or to a person (``route``). Closing it answers the asker's waiting call,
or, once the call was released by a time-out, reaches the asker as a late reply.
"""

from __future__ import annotations

import json
import math
from datetime import timedelta

from teamgraph.governance.operations import execute_approved, is_governed
from teamgraph.ledger.book import Ledger
from teamgraph.ledger.mail import notify, post, tell_leader_peer_traffic
from teamgraph.ledger.waits import answer_wait, open_wait, output_waits, take_output_wait, why_gone
from teamgraph.messaging import effects, envelopes, notices, results
from teamgraph.messaging.envelopes import clip
from teamgraph.protocols import requests as tracker
from teamgraph.protocols.requests import APPROVAL, ASK, HUMAN, MEMBER_PLAN, PLAN, QUESTION, RUN, SHUTDOWN
from teamgraph.records import (
    ENDED,
    LEADER,
    ROUTER,
    USER,
    AnswerEffect,
    EscalateEffect,
    HumanAnswerEffect,
    OpenEffect,
    PerformedEffect,
    Request,
    ResumeErrorEffect,
)


def close_request(ledger: Ledger, record: Request, content: str, *, status: str) -> None:
    """Close a request and give its answer to the asker's waiting tool call.

    A call that waits for several requests (``call_agents``) is answered once the
    last of them closes. A call released by a time-out gets the answer as a message.
    """
    ledger.save(tracker.close(record, status=status, answer=content, closed_at=ledger.now))
    call_id, asker = record.get("call_id"), record["from"]
    if not call_id:
        return
    waiter = ledger.agents.get(asker)
    wait = waiter["waits"].get(call_id) if waiter else None
    if wait is None:
        if waiter is not None and waiter["status"] not in ENDED and status == tracker.ANSWERED:
            route = record.get("route", record["to"])
            post(ledger, asker, envelopes.reply(route, record["id"], content, late=True), sender=route)
        return
    if "group" in wait:
        answer_group(ledger, asker, call_id)
        return
    answer_wait(ledger, asker, call_id, content)


def answer_group(ledger: Ledger, asker: str, call_id: str) -> None:
    """Answer a ``call_agents`` call with every reply, once all its requests were opened and closed.

    NOTE: a request of the group can close while it is opened (its receiver ended while
    the call was in flight); the call must still wait for the requests opened after it,
    or a later one would open a second wait for the same call (two results).
    """
    wait = ledger.agents[asker]["waits"].get(call_id)
    if wait is None or len(wait.get("group", [])) < wait.get("size", 0):
        return
    group = [r for rid in wait.get("group", []) if (r := ledger.request(rid)) is not None]
    if any(tracker.is_pending(r) for r in group):
        return
    content = results.grouped([(r.get("route", r["to"]), r["id"], r["status"], str(r["answer"])) for r in group])
    answer_wait(ledger, asker, call_id, content)


def _deadline(ledger: Ledger, timeout: float | None) -> str | None:
    if not timeout:
        return None
    # NOTE: the tools refuse absurd time-outs; a bound here keeps a bad value from
    # ever raising in the router (a thread that cannot continue).
    seconds = min(float(timeout), effects.MAX_WAIT_SECONDS) if math.isfinite(timeout) else effects.MAX_WAIT_SECONDS
    return (ledger.runtime.clock.now() + timedelta(seconds=seconds)).isoformat()


def _route(ledger: Ledger, effect: OpenEffect) -> tuple[str, str, str | None]:
    """Who receives a new request, who decides it now, and how (receiver, route, decider)."""
    kind, asker, to = effect["request_kind"], effect["agent"], effect["to"] or ""
    if kind in (ASK, APPROVAL) and effect["details"].get("to_user"):
        return USER, HUMAN, "human"
    if kind in (ASK, MEMBER_PLAN, APPROVAL, PLAN):
        decider = ledger.policy.decider(kind)
        # NOTE: the leader never decides its own requests.
        route = HUMAN if decider == "human" or asker == LEADER else LEADER
        return (LEADER if asker != LEADER else USER), route, decider
    return to, to, None


def on_open(ledger: Ledger, effect: OpenEffect) -> None:
    """Open a request and route it to whoever decides it now."""
    kind, asker, call_id = effect["request_kind"], effect["agent"], effect["call_id"]
    to, route, decider = _route(ledger, effect)
    timeout = ledger.policy.shutdown_timeout if kind == SHUTDOWN else effect.get("timeout")
    record = tracker.new_request(
        ledger.team["counters"],
        kind=kind,
        sender=asker,
        receiver=to,
        body=effect["body"],
        opened_at=ledger.now,
        call_id=call_id,
        tool=effect["tool"],
        reply_via=effect["reply_via"],
        route=route,
        decider=decider,
        details=effect["details"],
        deadline=_deadline(ledger, timeout),
        timeout=timeout,
        leader_decision=None,
        note=None,
    )
    author = ledger.agents.get(asker)
    if author is not None and (gone := why_gone(author)):
        # NOTE: the asker ended or was stopped while this step ran: nobody may act on a
        # request from a turn that is over. No wait is opened: the landing step's own
        # pass closes its calls (turns.on_step), once each, even for a call_agents group.
        ledger.save(tracker.close(record, status=tracker.CANCELLED, answer=gone, closed_at=ledger.now))
        return
    ledger.save(record)
    rid = record["id"]
    if call_id:
        _wait_for(ledger, effect, call_id, rid, route)
    _dispatch(ledger, record, kind=kind, decider=decider)
    if call_id and effect.get("group"):
        answer_group(ledger, asker, call_id)  # NOTE: the last of a group whose others all closed already
    current = ledger.request(rid)
    if kind == MEMBER_PLAN and call_id and current is not None and tracker.is_pending(current):
        # NOTE: the member gets its plan's id at once (docs/protocols.md, "Plans");
        # the verdict reaches it as a message that starts its next turn.
        ledger.save({**current, "call_id": None})
        answer_wait(ledger, asker, call_id, results.plan_submitted(rid))


def _wait_for(ledger: Ledger, effect: OpenEffect, call_id: str, rid: str, route: str) -> None:
    """The asker's call waits for the request (a ``call_agents`` call for all of its group)."""
    waits = ledger.agents[effect["agent"]]["waits"]
    if effect.get("group") and call_id in waits:
        waits[call_id].setdefault("group", []).append(rid)
        waits[call_id].setdefault("targets", []).append(route)
        return
    wait = open_wait(ledger, effect["agent"], call_id, tool=effect["tool"] or "", on=route, request=rid)
    if effect.get("group"):
        wait["group"] = [rid]
        wait["targets"] = [route]
        # NOTE: a checkpoint from before sizes were recorded says True (1): the old rule.
        wait["size"] = int(effect["group"])


def _dispatch(ledger: Ledger, record: Request, *, kind: str, decider: str | None) -> None:
    """Hand a new request to its route: an agent's inbox, a person, or a decision at once."""
    asker, route, rid = record["from"], record.get("route", record["to"]), record["id"]
    target = ledger.agents.get(route)
    if target is not None and target["status"] in ENDED:
        why = results.nobody_will_answer(route, target["status"])
        close_request(ledger, record, why, status=tracker.CANCELLED)
    elif kind == PLAN and decider == "leader":
        decide(ledger, record, approve=True, feedback="", by=f"{LEADER} (Policy.plan='leader')")
    elif route == HUMAN:
        if asker != LEADER:
            notice = notices.waits_for_user(asker, kind=kind, request_id=rid, body=record["body"])
            notify(ledger, LEADER, notice, wake=False)
    elif kind == RUN:
        _start_run(ledger, record)
    else:
        post_request(ledger, record)


def _start_run(ledger: Ledger, record: Request) -> None:
    """``sessions_spawn``: the call returns at once; the task's envelope is the request's.

    NOTE: so the run's result is the child's first turn end after reading it.
    """
    asker, route, rid, call_id = record["from"], record.get("route", record["to"]), record["id"], record.get("call_id")
    accepted = {"status": "accepted", "runId": rid, "childSessionKey": route}
    child = ledger.agents[route]
    child["task"] = child["task"] or clip(record["body"], 200)
    text = envelopes.task(asker, record.get("details", {}).get("header", "") + record["body"])
    ledger.save({**record, "call_id": None, "message": post(ledger, route, text, sender=asker)})
    if LEADER not in (asker, route):
        tell_leader_peer_traffic(ledger, f"{asker} → {route} (task): {clip(record['body'])}", text)
    if call_id:
        answer_wait(ledger, asker, call_id, json.dumps(accepted))


def post_request(ledger: Ledger, record: Request) -> None:
    """Deliver a request's envelope to whoever must act on it."""
    rid, asker, route, body = record["id"], record["from"], record.get("route", record["to"]), record["body"]
    style = record.get("details", {}).get("style")
    text = envelopes.request(record["kind"], asker, rid, body, reply_via=record.get("reply_via", "tool"), style=style)
    if route == LEADER and output_waits(ledger, LEADER, asker):
        # NOTE: the leader waits for this member's reply: the request takes that reply's
        # place (its tool result); the leader answers it with a tool at its next step.
        take_output_wait(ledger, LEADER, asker, results.request_instead(asker, text))
        return
    ledger.save({**record, "message": post(ledger, route, text, sender=asker)})
    if record["kind"] == QUESTION and LEADER not in (asker, route):
        tell_leader_peer_traffic(ledger, f"{asker} asked {route} ({rid}): {clip(body)}", text)


def refuse_answer(ledger: Ledger, effect: AnswerEffect, record: Request | None) -> bool:
    """An answer to a request that is closed (or passed on) in this same pass: tell the answerer.

    NOTE: the answerer's tool said "answered", so it is told that its answer went
    nowhere (no silent loss).

    Returns:
        True if the answer was refused.
    """
    if record is not None and tracker.is_pending(record) and record.get("route") == effect["agent"]:
        return False
    if record is not None:
        state = record["status"] if not tracker.is_pending(record) else f"passed to {record.get('route')}"
        notice = notices.answer_not_delivered(record["id"], state=state, why=str(record["answer"] or ""))
        notify(ledger, effect["agent"], notice)
    return True


def on_answer(ledger: Ledger, effect: AnswerEffect) -> None:
    """An agent answers or decides a request routed to it (shutdowns: ``lifecycle.on_answer``)."""
    record = ledger.request(effect["request_id"])
    if refuse_answer(ledger, effect, record) or record is None:
        return
    kind, by, text, approve = record["kind"], effect["agent"], effect["answer"], effect["approve"]
    if kind == QUESTION:
        close_request(ledger, record, text, status=tracker.ANSWERED)
        if LEADER not in (by, record["from"]):
            line = f"{by} answered {record['from']} ({record['id']}): {clip(text)}"
            tell_leader_peer_traffic(ledger, line, text)
    elif record.get("decider") == "leader_then_human":
        decision = {"answer": text} if approve is None else {"approve": approve, "feedback": text}
        ledger.save({**record, "route": HUMAN, "leader_decision": decision})
    elif kind == ASK:
        close_request(ledger, record, results.answered_by(by, text), status=tracker.ANSWERED)
    else:
        decide(ledger, record, approve=bool(approve), feedback=text, by=by)


def on_escalate(ledger: Ledger, effect: EscalateEffect) -> None:
    """The leader sends a request it should not decide alone to a person."""
    record = ledger.request(effect["request_id"])
    if record is not None and tracker.is_pending(record) and record.get("route") == LEADER:
        ledger.save({**record, "route": HUMAN, "note": effect["note"]})


def on_human_answer(ledger: Ledger, effect: HumanAnswerEffect) -> None:
    """A person's answer (already checked by the human gate)."""
    record, value = ledger.request(effect["request_id"]), effect["value"]
    if record is None or not tracker.is_pending(record):
        return
    ledger.team["resume_error"] = None
    decision = record.get("leader_decision") or {}
    if record["kind"] in (ASK, QUESTION):
        if isinstance(value, str):
            answer = results.user_answered(value)
        elif value["approve"]:
            answer = results.user_confirmed(LEADER, decision["answer"])
        else:
            answer = results.user_answered_instead(LEADER, value.get("feedback", ""))
        close_request(ledger, record, answer, status=tracker.ANSWERED)
        return
    if record.get("leader_decision") is None:
        by = "the user"
    else:
        by = f"the user (the {LEADER} had {'approved' if decision['approve'] else 'rejected'})"
    decide(ledger, record, approve=value["approve"], feedback=value.get("feedback", ""), by=by)


def on_resume_error(ledger: Ledger, effect: ResumeErrorEffect) -> None:
    ledger.team["resume_error"] = effect["error"]


def decide(ledger: Ledger, record: Request, *, approve: bool, feedback: str, by: str) -> None:
    """Close a plan or approval request with its verdict and tell the requester."""
    kind, rid = record["kind"], record["id"]
    if kind == PLAN:
        outcome = _decide_plan(ledger, record, approve=approve, feedback=feedback, by=by)
    elif kind == MEMBER_PLAN:
        outcome = results.member_plan_decided(rid, approved=approve, by=by, feedback=feedback)
        if not record.get("call_id"):
            post(ledger, record["from"], envelopes.reply(by.split(" (")[0], rid, outcome), sender=ROUTER)
    elif is_governed(record):
        line = results.verdict(rid, approved=approve, by=by, feedback=feedback)
        if approve and _performs(ledger, record):
            # NOTE: the pass stays pure: the requester's node performs the operation once this
            # decision is committed, and its result answers the call (``on_performed``).
            ledger.save(tracker.close(record, status=tracker.APPROVED, answer=line, closed_at=ledger.now))
            ledger.team["perform"] = {**ledger.team.get("perform", {}), record["from"]: rid}
            return
        outcome = execute_approved(ledger.runtime, record, line, approved=approve, agents=ledger.agents)
    else:
        outcome = results.approval_decided(rid, approved=approve, by=by, feedback=feedback)
    close_request(ledger, record, outcome, status=tracker.APPROVED if approve else tracker.REJECTED)


def _performs(ledger: Ledger, record: Request) -> bool:
    """Whether an approved operation is performed by its requester's node: the requester still waits on its call."""
    asker = ledger.agents.get(record["from"])
    return asker is not None and asker["status"] not in ENDED and record.get("call_id") in asker["waits"]


def on_performed(ledger: Ledger, effect: PerformedEffect) -> None:
    """The requester's node performed an approved operation: its result answers the waiting call."""
    perform = dict(ledger.team.get("perform", {}))
    if perform.get(effect["agent"]) != effect["request_id"]:
        return
    del perform[effect["agent"]]
    ledger.team["perform"] = perform
    record = ledger.request(effect["request_id"])
    if record is None:
        return
    outcome = f"{record.get('answer') or ''}\n{effect['result']}"
    ledger.save({**record, "answer": outcome})
    call_id = record.get("call_id")
    if call_id:
        answer_wait(ledger, effect["agent"], call_id, outcome)


def _decide_plan(ledger: Ledger, record: Request, *, approve: bool, feedback: str, by: str) -> str:
    """The leader's plan: its verdict, and once approved, its steps become the task board."""
    details = record.get("details", {})
    verdict = "approved" if approve else "rejected"
    ledger.team["plan"] = {
        "id": record["id"],
        "status": verdict,
        "summary": details.get("summary", ""),
        "complexity": details.get("complexity"),
    }
    if approve:
        ledger.team["board"] = [
            {
                "id": f"task_{n}",
                "title": step["title"],
                "role_id": step.get("role_id"),
                "depends_on": [f"task_{d}" for d in step.get("depends_on", [])],
                "status": "todo",
            }
            for n, step in enumerate(details.get("steps", []), 1)
        ]
    board = [(task["id"], task["title"]) for task in ledger.team.get("board", [])]
    return results.plan_decided(record["id"], approved=approve, by=by, feedback=feedback, board=board)


def release_on_timeout(ledger: Ledger, record: Request) -> None:
    """A blocking send timed out: wait and retry once, then the caller goes on and the master is told.

    The collaboration spec §5.1: a communication time-out waits (``Policy.timeout_retry_wait``
    seconds), reminds the target once (the retry), and only when that times out too
    releases the caller (its answer comes later as a message) and notifies the
    Team Leader (``Policy.notify_master``).
    """
    target, rid = record.get("route", record["to"]), record["id"]
    wait = ledger.policy.timeout_retry_wait
    if wait and "retried_at" not in record and target in ledger.agents:
        deadline = (ledger.runtime.clock.now() + timedelta(seconds=wait)).isoformat()
        ledger.save({**record, "deadline": deadline, "retried_at": ledger.now})
        notify(ledger, target, notices.retry_reminder(rid, asker=record["from"], body=record["body"]))
        return
    ledger.save({**record, "deadline": None, "timed_out_at": ledger.now})
    waiter = ledger.agents.get(record["from"])
    call_id = record.get("call_id")
    if waiter is None or not call_id or call_id not in waiter["waits"]:
        return
    content = results.timed_out(target, rid, record.get("timeout") or 0)
    answer_wait(ledger, record["from"], call_id, content, outcome=results.TIMED_OUT)
    if ledger.policy.notify_master and record["from"] != LEADER:
        notify(ledger, LEADER, notices.communication_failed(record["from"], target=target, request_id=rid), wake=False)
