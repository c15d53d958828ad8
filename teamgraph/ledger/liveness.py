"""Liveness: the team never hangs.

After the effects of a pass, the team is settled: inboxes are delivered; if
nobody can run, the leader is reminded of what waits for it, deadlocks are
broken (the newest wait of a cycle is cancelled), and an idle team whose user
has no answer asks its leader for a report. Deadlines expire here too.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from teamgraph.ledger import requests
from teamgraph.ledger.book import Ledger
from teamgraph.ledger.lifecycle import expire_run, expire_shutdown
from teamgraph.ledger.mail import flush, notify
from teamgraph.ledger.waits import answer_wait, cancel_waits, wait_age
from teamgraph.messaging import notices, results
from teamgraph.messaging.envelopes import clip
from teamgraph.protocols import requests as tracker
from teamgraph.protocols.requests import ASK, HUMAN, RUN, SHUTDOWN
from teamgraph.records import ENDED, LEADER, RUNNING, STOPPED, WAITING, Wait

Edge = tuple[tuple[Any, ...], str, str, Wait]
"""A wait-for edge: (the wait's age, the agent waited for, the call id, the wait)."""


def settle(ledger: Ledger) -> None:
    """Deliver inboxes; if nobody can run, unblock the team (never hang); end with the leader's report."""
    enforce_budget(ledger)
    while True:
        break_cycles(ledger)
        for name in list(ledger.agents):
            flush(ledger, name)
        if any(rec["status"] == RUNNING for rec in ledger.agents.values()) or ledger.team.get("perform"):
            return  # NOTE: an approved operation to perform is work: its requester's node runs next
        if remind_leader(ledger):
            continue
        if ledger.human_pending():
            return  # paused for a person
        if not break_newest_wait(ledger) and not ask_for_report(ledger):
            return  # finished


def expire_deadlines(ledger: Ledger) -> None:
    """Requests past their deadline: shutdowns terminate, runs stop, blocking sends release their caller."""
    now = ledger.runtime.clock.now()
    for record in ledger.pending_requests():
        deadline = record.get("deadline")
        if not deadline or datetime.fromisoformat(deadline) > now:
            continue
        if record["kind"] == SHUTDOWN:
            why = f"did not answer {record['id']} within {ledger.policy.shutdown_timeout:g} s"
            expire_shutdown(ledger, record, why)
        elif record["kind"] == RUN:
            expire_run(ledger, record)
        else:
            requests.release_on_timeout(ledger, record)


def enforce_budget(ledger: Ledger) -> None:
    """Past the run's model-call budget, every member stops and the leader is told (once)."""
    if not ledger.budget_spent() or ledger.team.get("budget_told") == ledger.team.get("user_seen"):
        return
    ledger.team["budget_told"] = ledger.team.get("user_seen")
    stopped = []
    for name, record in ledger.agents.items():
        if name != LEADER and record["status"] in (RUNNING, WAITING):
            cancel_waits(ledger, name, results.cancelled_because("the team used up its model-call budget for this run"))
            record["status"] = STOPPED
            record["last_action"] = "stopped: the run's model-call budget is used up"
            stopped.append(name)
    notify(ledger, LEADER, notices.run_budget(ledger.team.get("run_calls", 0), stopped=stopped))


def ask_for_report(ledger: Ledger) -> bool:
    """The team is idle but the leader has not answered the user's last message: ask it (once)."""
    seen = ledger.team.get("user_seen", 0)
    if not seen or ledger.team.get("reported", 0) >= seen or ledger.team.get("report_asked") == seen:
        return False
    leader = ledger.agents[LEADER]
    if leader["status"] in ENDED or leader["waits"]:
        return False
    ledger.team["report_asked"] = seen
    notify(ledger, LEADER, notices.report_due())
    return True


def remind_leader(ledger: Ledger) -> bool:
    """Questions the leader left unanswered: remind it, then let the askers go on."""
    open_asks = [r for r in ledger.pending_requests() if r.get("route") == LEADER]
    if not open_asks or ledger.agents[LEADER]["waits"]:
        return False  # NOTE: a blocked leader cannot read a reminder; break its wait first
    # NOTE: a copy: the book's nested dicts are shared with the checkpointed state.
    reminded = ledger.team["reminded"] = dict(ledger.team.get("reminded", {}))
    due = [r for r in open_asks if reminded.get(r["id"], 0) < ledger.policy.leader_reminders]
    if due:
        for r in due:
            reminded[r["id"]] = reminded.get(r["id"], 0) + 1
        listing = "; ".join(f"{r['id']} from {r['from']}: {clip(r['body'], 100)}" for r in due)
        notify(ledger, LEADER, notices.reminder(listing))
        return True
    for r in open_asks:
        if r["kind"] == ASK:
            content = results.leader_did_not_answer(LEADER)
            requests.close_request(ledger, r, content, status=tracker.EXPIRED)
        else:
            requests.decide(ledger, r, approve=False, feedback=f"the {LEADER} did not review it", by="nobody")
    return True


def break_newest_wait(ledger: Ledger) -> bool:
    """Nobody can run but some agents still wait: cancel the newest wait."""
    waits = [
        (wait_age(name, w), name, call_id, w)
        for name, rec in ledger.agents.items()
        for call_id, w in rec["waits"].items()
        if w["on"] != HUMAN
    ]
    if not waits:
        return False
    _, name, call_id, wait = max(waits, key=lambda item: item[0])
    cancel_wait(ledger, name, call_id, wait, describe_wait_chain(ledger, name), why="Nobody could go on")
    return True


def wait_edges(ledger: Ledger) -> dict[str, list[Edge]]:
    """The wait-for graph: waiter -> its edges."""
    edges: dict[str, list[Edge]] = {}
    for name, rec in ledger.agents.items():
        for call_id, wait in rec["waits"].items():
            for target in wait.get("targets") or [wait["on"]]:
                if target in ledger.agents and target != name:
                    edges.setdefault(name, []).append((wait_age(name, wait), target, call_id, wait))
    return edges


def break_cycles(ledger: Ledger) -> None:
    """Agents waiting on each other in a cycle: cancel the newest wait of each cycle."""
    while cycle := find_cycle(edges := wait_edges(ledger)):
        along = [
            (edge, waiter)
            for i, waiter in enumerate(cycle)
            for edge in edges[waiter]
            if edge[1] == cycle[(i + 1) % len(cycle)]
        ]
        (_, _, call_id, wait), waiter = max(along, key=lambda item: item[0][0])
        chain = ", ".join(f"{w} waits for {edge[1]} ({edge[3]['request'] or edge[3]['tool']})" for edge, w in along)
        cancel_wait(ledger, waiter, call_id, wait, chain, why="This is a cycle")


def cancel_wait(ledger: Ledger, name: str, call_id: str, wait: Wait, chain: str, *, why: str) -> None:
    """Answer one wait with a deadlock error (and cancel the requests behind it)."""
    content = results.deadlock(chain, why)
    for request_id in wait.get("group") or [wait["request"] or ""]:
        request = ledger.request(request_id) if request_id else None
        if request is not None and tracker.is_pending(request):
            ledger.save(tracker.close(request, status=tracker.CANCELLED, answer=content, closed_at=ledger.now))
    answer_wait(ledger, name, call_id, content, outcome=results.DEADLOCK)


def describe_wait_chain(ledger: Ledger, start: str) -> str:
    """``A waits for B (ask_3), B waits for A (ask_2)``: the chain of waits from ``start``."""
    parts, seen, name = [], set(), start
    while name in ledger.agents and name not in seen and ledger.agents[name]["waits"]:
        seen.add(name)
        wait = max(ledger.agents[name]["waits"].values(), key=lambda w: w["seq"])
        parts.append(f"{name} waits for {wait['on']} ({wait['request'] or wait['tool']})")
        name = wait["on"]
    return ", ".join(parts) or f"{start} waits"


def find_cycle(edges: dict[str, list[Edge]]) -> list[str] | None:
    """A cycle in a waiter -> targets graph, as the list of agents on it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for _, target, _, _ in edges.get(node, []):
            if state.get(target) == 1:
                return path[path.index(target) :]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None
