"""The router: the team's post office and scheduler.

Between two supersteps the router applies every effect the agents' steps asked
for, in one deterministic order, then decides who runs next. It is plain code,
no model. Delivery, answers, time-outs of waits and deadlock breaking live here
and nowhere else.

Terms:
    inbox: messages that reached an agent but are not in its history yet. A busy
        agent gets them after its tool results (inline); an idle one starts a
        new turn; an agent with an open tool call gets them once the call is
        answered (a tool call and its result must stay adjacent).
    wait: an open (deferred) tool call of an agent, answered later by the router.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from teamgraph.audit.log import write_committed
from teamgraph.messaging import effects, envelopes, results
from teamgraph.governance import board as task_board
from teamgraph.governance.operations import execute_approved, is_governed
from teamgraph.messaging.envelopes import LEADER, clip
from teamgraph.messaging.results import communication_failed, plan_submitted, timed_out
from teamgraph.protocols import requests as tracker
from teamgraph.protocols.requests import (
    APPROVAL,
    ASK,
    HUMAN,
    MEMBER_PLAN,
    PLAN,
    QUESTION,
    RUN,
    SHUTDOWN,
)
from teamgraph.roles import LEADER_ROLE_ID
from teamgraph.runtime import TeamRuntime

from teamgraph.records import ENDED, FAILED, IDLE, RUNNING, SHUT_DOWN, STOPPED, TERMINATED, WAITING


def new_agent(name: str, role_id: str, *, index: int, created_by: str | None, now: str) -> dict[str, Any]:
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


PHASE = {"step": 1, "stop": 2, "terminate": 2, "human_answer": 3, "resume_error": 3}
"""The phase of each effect kind in a router pass (kinds not listed: 0)."""


class RouterPass:
    """One router run: reads the state once, collects every change, returns them."""

    def __init__(self, runtime: TeamRuntime, state: dict[str, Any]) -> None:
        self.runtime = runtime
        self.policy = runtime.policy
        self.now = runtime.now()
        self.agents: dict[str, dict[str, Any]] = {
            name: {**rec, "waits": dict(rec["waits"]), "inbox": list(rec["inbox"])}
            for name, rec in state.get("agents", {}).items()
        }
        team = state.get("team", {})
        self.team: dict[str, Any] = {
            **team,
            "counters": dict(team.get("counters", {})),
            "instances": dict(team.get("instances", {})),
        }
        self._agents_before: dict[str, dict[str, Any]] = state.get("agents", {})
        self._histories: dict[str, list[AnyMessage]] = state.get("histories", {})
        self._requests: dict[str, dict[str, Any]] = state.get("requests", {})
        self.changed_requests: dict[str, dict[str, Any]] = {}
        self._deliveries: dict[str, dict[str, Any]] = state.get("deliveries", {})
        self.changed_deliveries: dict[str, dict[str, Any]] = {}
        # NOTE: an index of the pending request ids, so a pass never scans every
        # request the thread ever opened (that would make long runs quadratic).
        self.open_ids: dict[str, None] = dict.fromkeys(
            team["open"] if "open" in team else (rid for rid, r in self._requests.items() if tracker.is_pending(r))
        )
        self.appends: dict[str, list[AnyMessage]] = defaultdict(list)
        self.answered_calls: set[str] = set()
        self.replies: list[AnyMessage] = []
        self._user_messages: list[AnyMessage] = state.get("messages", [])
        self._outbox: list[dict[str, Any]] = state.get("outbox", [])

    # -- bookkeeping -------------------------------------------------------

    def next_id(self, counter: str) -> int:
        counters = self.team["counters"]
        counters[counter] = counters.get(counter, 0) + 1
        return counters[counter]

    def request(self, request_id: str) -> dict[str, Any] | None:
        return self.changed_requests.get(request_id) or self._requests.get(request_id)

    def pending_requests(self) -> list[dict[str, Any]]:
        return [self.request(rid) for rid in list(self.open_ids)]

    def save(self, record: dict[str, Any]) -> None:
        self.changed_requests[record["id"]] = record
        if tracker.is_pending(record):
            self.open_ids[record["id"]] = None
        else:
            self.open_ids.pop(record["id"], None)
            self.withdraw_envelope(record)

    def withdraw_envelope(self, record: dict[str, Any]) -> None:
        """A request closed before its envelope left the inbox: the receiver gets a notice instead.

        NOTE: otherwise the receiver would read a question it can no longer answer.
        """
        message_id, route = record.get("message"), record.get("route")
        receiver = self.agents.get(route) if route else None
        if not message_id or receiver is None:
            return
        for item in receiver["inbox"]:
            if item["id"] == message_id:
                why = clip(str(record["answer"]), 200)
                item.update(text=envelopes.notice(f"{record['id']} from {record['from']} was {record['status']} before you read it: {why}"), wake=False)

    # -- the pass ----------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Apply user input and effects, settle the team, schedule the next steps."""
        self.ensure_leader()
        self.take_user_input()
        order = {name: rec["index"] for name, rec in self.agents.items()}
        # NOTE: causality. Effects are applied in phases, so that no outcome depends on
        # the order of the agents: first what every step asked for (requests, waits,
        # messages), then the steps' outputs (which may answer the waits just opened
        # by a concurrent step, but a request only once its envelope was read), then
        # stops and terminations (which close whatever the stopped agent left open),
        # then a person's answers.
        for effect in sorted(self._outbox, key=lambda e: (PHASE.get(e["kind"], 0), order.get(e["agent"], len(order)))):
            getattr(self, f"on_{effect['kind']}")(effect)
        self.expire_deadlines()
        self.settle()
        if self.team.get("board"):
            # NOTE: task statuses follow the work: a member that starts, ends or fails its turn moves its tasks.
            self.team["board"] = task_board.follow_work(self.team["board"], self._agents_before, self.agents)
        return self.updates(self.schedule())

    def ensure_leader(self) -> None:
        if LEADER not in self.agents:
            self.agents[LEADER] = new_agent(LEADER, LEADER_ROLE_ID, index=0, created_by=None, now=self.now)

    def take_user_input(self) -> None:
        seen = self.team.get("user_seen", 0)
        for message in self._user_messages[seen:]:
            if isinstance(message, HumanMessage):
                self.post(LEADER, message.text, sender="user")
                # NOTE: a new task from the user: a new run, with a fresh model-call budget.
                self.team["run_calls"] = 0
        self.team["user_seen"] = len(self._user_messages)

    def schedule(self) -> list[str]:
        """Pick the runnable agents for the next superstep (longest-waiting first)."""
        members = [rec for n, rec in self.agents.items() if rec["status"] == RUNNING and n != LEADER]
        members.sort(key=lambda rec: (rec["last_tick"], rec["index"]))
        chosen = [rec["name"] for rec in members[: self.policy.max_parallel]]
        if self.agents[LEADER]["status"] == RUNNING:
            chosen.insert(0, LEADER)  # NOTE: the leader is not counted against max_parallel
        tick = self.team.get("tick", 0) + 1
        self.team["tick"] = tick
        for name in chosen:
            self.agents[name]["last_tick"] = tick
        return chosen

    def human_pending(self) -> list[dict[str, Any]]:
        """Pending requests that wait for a person."""
        return [r for r in self.pending_requests() if r.get("route") == HUMAN]

    def updates(self, scheduled: list[str]) -> dict[str, Any]:
        self.team["scheduled"] = scheduled
        # NOTE: "when_blocked" pauses only when nobody can run; "immediately" runs the
        # human gate in the same superstep as the agents, so the run pauses at once.
        immediately = self.policy.pause == "immediately"
        self.team["human"] = bool(self.human_pending()) and (immediately or not scheduled)
        self.team["open"] = list(self.open_ids)
        # NOTE: only changed records are written: the registry is a DeltaChannel.
        changed = {n: r for n, r in self.agents.items() if self._agents_before.get(n) != r}
        out: dict[str, Any] = {"team": self.team}
        if changed:
            out["agents"] = changed
        if self.appends:
            out["histories"] = dict(self.appends)
        if self.changed_requests:
            out["requests"] = self.changed_requests
        if self.changed_deliveries:
            out["deliveries"] = self.changed_deliveries
        if self.replies:
            out["messages"] = self.replies
        return out

    # -- delivery ----------------------------------------------------------

    def post(self, to: str, text: str, *, sender: str, wake: bool = True) -> str:
        """Put a message in ``to``'s inbox, or bounce it to the sender if ``to`` is gone.

        Every message gets an id and a delivery record: queued, then delivered (in the
        receiver's history) and read (the receiver's next step saw it), or bounced.

        Returns:
            The message id.
        """
        message_id = f"msg_{self.next_id('message')}"
        record = self.agents.get(to)
        self.track(message_id, sender=sender, to=to, sent_at=self.now, status="queued", delivered_at=None, read_at=None)
        if record is None or record["status"] in ENDED:
            self.bounce(message_id, text, to=to, status=record["status"] if record else "unknown")
            return message_id
        record["inbox"].append({"id": message_id, "text": text, "from": sender, "wake": wake})
        return message_id

    def delivery(self, message_id: str) -> dict[str, Any] | None:
        return self.changed_deliveries.get(message_id) or self._deliveries.get(message_id)

    def is_read(self, record: dict[str, Any] | None) -> bool:
        """Whether the agent a request (or exchange) is routed to has read its envelope.

        NOTE: causality: only an output produced by a model call that had the call in
        its context can answer it. Records opened before this rule have no message id
        and count as read.
        """
        if record is None:
            return False
        message_id = record.get("message", "")
        if not message_id:
            return True
        delivery = self.delivery(message_id)
        return delivery is not None and delivery["status"] == "read"

    def track(self, message_id: str, **fields: Any) -> None:
        """Create or update a message's delivery record."""
        current = self.delivery(message_id) or {"id": message_id}
        self.changed_deliveries[message_id] = {**current, **fields}

    def bounce(self, message_id: str, text: str, *, to: str, status: str) -> None:
        """Return an undeliverable message to its sender (no message is silently lost)."""
        self.track(message_id, status="bounced")
        sender = (self.changed_deliveries[message_id])["sender"]
        if sender in self.agents and sender != to and self.agents[sender]["status"] not in ENDED:
            note = f"Not delivered ({message_id}): {to} is {status}. Your message: {clip(text, 200)}"
            self.post(sender, envelopes.notice(note), sender="router")

    def flush(self, name: str) -> None:
        """Move the inbox into the history: inline if busy, as a new turn if idle."""
        record = self.agents[name]
        if not record["inbox"] or record["waits"] or record["status"] in ENDED:
            return
        if record["status"] != RUNNING:
            if not any(m["wake"] for m in record["inbox"]) or (name != LEADER and self.budget_spent()):
                return
            record.update(status=RUNNING, turn=record["turn"] + 1, turn_steps=0)
        inbox, record["inbox"] = record["inbox"], []
        for message in inbox:
            self.track(message["id"], status="delivered", delivered_at=self.now)
        record["unread"] = [*record.get("unread", []), *(m["id"] for m in inbox)]
        self.appends[name].extend(envelopes.as_messages([m["text"] for m in inbox]))

    def answer_wait(self, name: str, call_id: str, content: str, *, outcome: str | None = None) -> None:
        """Close an open tool call of ``name`` with ``content`` as its result.

        Args:
            name: Whose call.
            call_id: The call.
            content: Its result.
            outcome: ``timed_out`` or ``cancelled`` when the call did not get its answer.
        """
        record = self.agents.get(name)
        wait = record["waits"].pop(call_id, None) if record else None
        if wait is None:
            return
        extra = {results.OUTCOME_KEY: outcome} if outcome else {}
        self.appends[name].append(ToolMessage(content=content, tool_call_id=call_id, name=wait["tool"], additional_kwargs=extra))
        self.answered_calls.add(call_id)
        if not record["waits"] and record["status"] == WAITING:
            record["status"] = RUNNING

    def close_request(self, record: dict[str, Any], content: str, *, status: str) -> None:
        """Close a request and give its answer to the asker's waiting tool call.

        A call that waits for several requests (``call_agents``) is answered once the
        last of them closes. A call released by a time-out gets the answer as a message.
        """
        self.save(tracker.close(record, status=status, answer=content, closed_at=self.now))
        call_id, asker = record.get("call_id"), record["from"]
        if not call_id:
            return
        waiter = self.agents.get(asker)
        wait = waiter["waits"].get(call_id) if waiter else None
        if wait is None:
            if waiter is not None and waiter["status"] not in ENDED and status == tracker.ANSWERED:
                self.post(asker, envelopes.reply(record["route"], record["id"], content, late=True), sender=record["route"])
            return
        if wait.get("group"):
            group = [self.request(rid) for rid in wait["group"]]
            if any(tracker.is_pending(r) for r in group):
                return
            content = "\n\n".join(f"[{r['route']} · {r['id']} · {r['status']}]\n{r['answer']}" for r in group)
        self.answer_wait(asker, call_id, content)

    # -- effects -------------------------------------------------------------

    def on_spawn(self, effect: dict[str, Any]) -> None:
        role = self.runtime.roles[effect["role"]]
        name = effect["name"]
        # NOTE: instances are numbered per display name, so two roles that share a
        # name never share a member; a name taken in this superstep gets the next one.
        number = max(int(name.rsplit("_", 1)[1]), self.team["instances"].get(role.name, 0) + 1)
        while f"{role.name}_{number}" in self.agents:
            number += 1
        name = f"{role.name}_{number}"
        self.team["instances"][role.name] = number
        record = new_agent(name, role.id, index=len(self.agents), created_by=effect["agent"], now=self.now)
        record["task"] = clip(effect["task"], 200) if effect["task"] else None
        self.agents[name] = record
        if name != effect["name"]:
            self.post(effect["agent"], envelopes.notice(f"{effect['name']} was taken; the new member is {name}."), sender="router", wake=False)
        if effect["task"]:
            self.post(name, envelopes.task(effect["agent"], effect["task"]), sender=effect["agent"])

    def on_deliver(self, effect: dict[str, Any]) -> None:
        sender, to = effect["agent"], effect["to"]
        render = envelopes.task if effect["type"] == "task" else envelopes.message
        text = render(sender, effect["body"])
        self.post(to, text, sender=sender)
        if LEADER not in (sender, to):
            self.tell_leader_peer_traffic(f"{sender} → {to} ({effect['type']}): {clip(effect['body'])}", text)

    def on_open(self, effect: dict[str, Any]) -> None:
        """Open a request and route it to whoever decides it now."""
        kind, asker = effect["request_kind"], effect["agent"]
        to, route, decider, deadline = effect["to"], effect["to"], None, None
        timeout = self.policy.shutdown_timeout if kind == SHUTDOWN else effect.get("timeout")
        if timeout:
            # NOTE: the tools refuse absurd time-outs; a bound here keeps a bad value from
            # ever raising in the router (a thread that cannot continue).
            seconds = min(float(timeout), effects.MAX_WAIT_SECONDS) if math.isfinite(timeout) else effects.MAX_WAIT_SECONDS
            deadline = (self.runtime.clock.now() + timedelta(seconds=seconds)).isoformat()
        if kind == ASK and effect["details"].get("to_user"):
            to, route, decider = "user", HUMAN, "human"
        elif kind in (ASK, MEMBER_PLAN, APPROVAL, PLAN):
            decider = self.policy.decider(kind)
            to = LEADER if asker != LEADER else "user"
            # NOTE: the leader never decides its own requests.
            route = HUMAN if decider == "human" or asker == LEADER else LEADER
        record = tracker.new_request(
            self.team["counters"],
            kind=kind,
            sender=asker,
            receiver=to,
            body=effect["body"],
            opened_at=self.now,
            call_id=effect["call_id"],
            tool=effect["tool"],
            reply_via=effect["reply_via"],
            route=route,
            decider=decider,
            details=effect["details"],
            deadline=deadline,
            timeout=timeout,
            leader_decision=None,
            note=None,
        )
        self.save(record)
        rid = record["id"]
        call_id = effect["call_id"]
        waits = self.agents[asker]["waits"]
        if call_id and effect.get("group") and call_id in waits:
            waits[call_id]["group"].append(rid)
            waits[call_id]["targets"].append(route)
        elif call_id:
            waits[call_id] = {"tool": effect["tool"], "on": route, "request": rid, "seq": self.next_id("wait"), "tick": self.team.get("tick", 0)}
            if effect.get("group"):
                waits[call_id].update(group=[rid], targets=[route])
        target, author = self.agents.get(route), self.agents.get(asker)
        if author is not None and author["status"] in ENDED:
            # NOTE: terminated earlier in this pass (same superstep): nobody may act on
            # a request whose asker is gone; its call is closed to keep its history valid.
            self.close_request(record, f"Cancelled: you are {author['status']}.", status=tracker.CANCELLED)
        elif target is not None and target["status"] in ENDED:
            self.close_request(record, f"{route} is {target['status']}: nobody will answer. Use list_active_sub_agents.", status=tracker.CANCELLED)
        elif kind == PLAN and decider == "leader":
            self.decide(record, approve=True, feedback="", by=f"{LEADER} (Policy.plan='leader')")
        elif route == HUMAN:
            if asker != LEADER:
                self.post(LEADER, envelopes.notice(f"{asker}'s {kind} request {rid} waits for the user: {clip(record['body'])}"), sender="router", wake=False)
        elif kind == RUN:
            # NOTE: the call returns at once; the task's envelope is the request's, so
            # the run's result is the child's first turn end after reading it.
            accepted = {"status": "accepted", "runId": rid, "childSessionKey": route}
            self.agents[route]["task"] = self.agents[route]["task"] or clip(record["body"], 200)
            text = envelopes.task(asker, effect["details"].get("header", "") + record["body"])
            self.save({**record, "call_id": None, "message": self.post(route, text, sender=asker)})
            if LEADER not in (asker, route):
                self.tell_leader_peer_traffic(f"{asker} → {route} (task): {clip(record['body'])}", text)
            self.answer_wait(asker, call_id, json.dumps(accepted))
        else:
            self.post_request(record)
        if kind == MEMBER_PLAN and call_id and tracker.is_pending(self.request(rid)):
            # NOTE: the member gets its plan's id at once (docs/protocols.md, "Plans");
            # the verdict reaches it as a message that starts its next turn.
            self.save({**self.request(rid), "call_id": None})
            self.answer_wait(asker, call_id, plan_submitted(rid))

    def post_request(self, record: dict[str, Any]) -> None:
        """Deliver a request's envelope to whoever must act on it."""
        rid, asker, route, body = record["id"], record["from"], record["route"], record["body"]
        style = (record.get("details") or {}).get("style")
        text = envelopes.request(record["kind"], asker, rid, body, reply_via=record["reply_via"], style=style)
        if route == LEADER and self.output_waits(LEADER, asker):
            # NOTE: the leader waits for this member's reply: the request takes that reply's
            # place (its tool result); the leader answers it with a tool at its next step.
            self.take_output_wait(LEADER, asker, f"{asker} opened a request instead of replying:\n{text}")
            return
        self.save({**record, "message": self.post(route, text, sender=asker)})
        if record["kind"] == QUESTION and LEADER not in (asker, route):
            self.tell_leader_peer_traffic(f"{asker} asked {route} ({rid}): {clip(body)}", text)

    def tell_leader_peer_traffic(self, line: str, full: str) -> None:
        """Member-to-member traffic reaches the leader as a one-line notice (or in full, by policy)."""
        text = full if self.policy.peer_traffic == "full" else envelopes.notice(line)
        self.post(LEADER, text, sender="router", wake=False)

    def on_answer(self, effect: dict[str, Any]) -> None:
        """An agent answers or decides a request routed to it."""
        record = self.request(effect["request_id"])
        if not tracker.is_pending(record) or record["route"] != effect["agent"]:
            # NOTE: closed (or passed on) in this same pass: the answerer's tool said
            # "answered", so it is told that its answer went nowhere (no silent loss).
            if record is not None:
                state = record["status"] if not tracker.is_pending(record) else f"passed to {record['route']}"
                why = f": {clip(str(record['answer']), 200)}" if record["answer"] else ""
                self.post(effect["agent"], envelopes.notice(f"Your answer to {record['id']} was not delivered: {record['id']} was {state}{why}"), sender="router")
            return
        kind, by, text, approve = record["kind"], effect["agent"], effect["answer"], effect["approve"]
        if kind == SHUTDOWN:
            self.save(tracker.close(record, status=tracker.APPROVED if approve else tracker.REJECTED, answer=text, closed_at=self.now))
            if approve:
                self.end_agent(by, SHUT_DOWN, reason=f"shut down ({record['id']})")
                self.post(LEADER, envelopes.notice(f"{by} approved {record['id']} and shut down."), sender="router")
            else:
                self.post(LEADER, envelopes.notice(f"{by} rejected {record['id']}: {text}"), sender="router")
        elif kind == QUESTION:
            self.close_request(record, text, status=tracker.ANSWERED)
            if LEADER not in (by, record["from"]):
                self.tell_leader_peer_traffic(f"{by} answered {record['from']} ({record['id']}): {clip(text)}", text)
        elif record["decider"] == "leader_then_human":
            decision = {"answer": text} if approve is None else {"approve": approve, "feedback": text}
            self.save({**record, "route": HUMAN, "leader_decision": decision})
        elif kind == ASK:
            self.close_request(record, f"{by} answered: {text}", status=tracker.ANSWERED)
        else:
            self.decide(record, approve=bool(approve), feedback=text, by=by)

    def on_escalate(self, effect: dict[str, Any]) -> None:
        record = self.request(effect["request_id"])
        if tracker.is_pending(record) and record["route"] == LEADER:
            self.save({**record, "route": HUMAN, "note": effect["note"]})

    def on_human_answer(self, effect: dict[str, Any]) -> None:
        """A person's answer (already checked by the human gate)."""
        record, value = self.request(effect["request_id"]), effect["value"]
        if not tracker.is_pending(record):
            return
        self.team["resume_error"] = None
        decision = record.get("leader_decision")
        if record["kind"] in (ASK, QUESTION):
            if isinstance(value, str):
                answer = f"The user answered: {value}"
            elif value["approve"]:
                answer = f"{LEADER} answered (confirmed by the user): {decision['answer']}"
            else:
                answer = f"The user answered instead of {LEADER}: {value.get('feedback', '')}"
            self.close_request(record, answer, status=tracker.ANSWERED)
            return
        by = "the user" if decision is None else f"the user (the {LEADER} had {'approved' if decision['approve'] else 'rejected'})"
        self.decide(record, approve=value["approve"], feedback=value.get("feedback", ""), by=by)

    def on_resume_error(self, effect: dict[str, Any]) -> None:
        self.team["resume_error"] = effect["error"]

    def on_board(self, effect: dict[str, Any]) -> None:
        board = [dict(task) for task in self.team.get("board", [])]
        for task in board:
            if task["id"] == effect["task_id"]:
                task.update(status=effect["status"], updated_by=effect["agent"])
                if effect["note"]:
                    task["note"] = effect["note"]
        self.team["board"] = board

    def on_board_add(self, effect: dict[str, Any]) -> None:
        board = list(self.team.get("board", []))
        board.append({"id": f"task_{len(board) + 1}", "title": effect["title"], "role_id": None, "depends_on": [], "status": "todo", "assignee": effect["assignee"]})
        self.team["board"] = board

    def decide(self, record: dict[str, Any], *, approve: bool, feedback: str, by: str) -> None:
        """Close a plan or approval request with its verdict and tell the requester."""
        kind, rid = record["kind"], record["id"]
        verdict = "approved" if approve else "rejected"
        remark = f" Feedback: {feedback.rstrip('.')}." if feedback else ""
        if kind == PLAN:
            self.team["plan"] = {"id": rid, "status": verdict, "summary": record["details"].get("summary", ""), "complexity": record["details"].get("complexity")}
            if approve:
                self.team["board"] = [
                    {"id": f"task_{n}", "title": step["title"], "role_id": step.get("role_id"), "depends_on": [f"task_{d}" for d in step.get("depends_on", [])], "status": "todo"}
                    for n, step in enumerate(record["details"].get("steps", []), 1)
                ]
                outcome = f"Plan {rid} approved by {by}.{remark} Its steps are the task board now: " + ", ".join(f"{t['id']} {t['title']}" for t in self.team["board"]) + "."
            else:
                outcome = f"Plan {rid} rejected by {by}.{remark} Revise the plan and call propose_plan again."
        elif kind == MEMBER_PLAN:
            outcome = f"Your plan ({rid}) was {verdict} by {by}.{remark}" + ("" if approve else " Revise it and submit_plan again.")
            if not record.get("call_id"):
                self.post(record["from"], envelopes.reply(by.split(" (")[0], rid, outcome), sender="router")
        else:
            outcome = f"{rid} {verdict} by {by}.{remark}" + ("" if approve else " Do not perform the operation.")
            if is_governed(record):  # a deferred sensitive call: perform it, or not, and answer the call
                verdict_line = f"{rid} {verdict} by {by}.{remark}"
                outcome = execute_approved(self.runtime, record, verdict_line, approved=approve, agents=self.agents)
        self.close_request(record, outcome, status=tracker.APPROVED if approve else tracker.REJECTED)

    def expire_deadlines(self) -> None:
        """Shutdown requests past their deadline: terminate the member (a shutdown never hangs)."""
        now = self.runtime.clock.now()
        for record in self.pending_requests():
            if not record.get("deadline") or datetime.fromisoformat(record["deadline"]) > now:
                continue
            if record["kind"] == SHUTDOWN:
                self.expire_shutdown(record, f"did not answer {record['id']} within {self.policy.shutdown_timeout:g} s")
            elif record["kind"] == RUN:
                self.expire_run(record)
            else:
                self.release_on_timeout(record)

    def release_on_timeout(self, record: dict[str, Any]) -> None:
        """A blocking send timed out: the caller goes on; the answer comes later as a message."""
        target, rid = record["route"], record["id"]
        self.save({**record, "deadline": None, "timed_out_at": self.now})
        waiter = self.agents.get(record["from"])
        if waiter is None or record.get("call_id") not in waiter["waits"]:
            return
        self.answer_wait(record["from"], record["call_id"], timed_out(target, rid, record.get("timeout") or 0), outcome=results.TIMED_OUT)

    def expire_run(self, record: dict[str, Any]) -> None:
        """A background run passed runTimeoutSeconds: stop the child and tell the requester."""
        child, rid = record["route"], record["id"]
        self.save(tracker.close(record, status=tracker.EXPIRED, answer="run timed out", closed_at=self.now))
        if self.agents[child]["status"] not in ENDED:
            self.cancel_waits(child, f"Cancelled: {rid} timed out.")
            self.agents[child].update(status=STOPPED, last_action=f"stopped: {rid} timed out")
        self.post(record["from"], envelopes.notice(f"{rid} timed out: {child} was stopped before it finished. Its partial work is in its history."), sender="router")

    def expire_shutdown(self, record: dict[str, Any], why: str) -> None:
        target = record["route"]
        self.save(tracker.close(record, status=tracker.EXPIRED, answer=why, closed_at=self.now))
        if self.agents[target]["status"] not in ENDED:
            self.end_agent(target, TERMINATED, reason=why)
        self.post(LEADER, envelopes.notice(f"{target} {why}: it was terminated and {record['id']} expired."), sender="router")

    def on_wait_output(self, effect: dict[str, Any]) -> None:
        self.agents[effect["agent"]]["waits"][effect["call_id"]] = {
            "tool": effect["tool"], "on": effect["on"], "request": None, "seq": self.next_id("wait"), "tick": self.team.get("tick", 0),
        }
        target, author = self.agents.get(effect["on"]), self.agents[effect["agent"]]
        if author["status"] in ENDED:
            self.answer_wait(effect["agent"], effect["call_id"], f"Cancelled: you are {author['status']}.")
        elif target is None or target["status"] in ENDED:
            status = target["status"] if target else "unknown"
            self.take_output_wait(effect["agent"], effect["on"], f"{effect['on']} is {status}: there is no output to wait for.")

    def on_terminate(self, effect: dict[str, Any]) -> None:
        self.end_agent(effect["target"], TERMINATED, reason=f"terminated by {effect['agent']}")

    def on_stop(self, effect: dict[str, Any]) -> None:
        record = self.agents[effect["target"]]
        if record["status"] in ENDED:
            return
        self.cancel_waits(record["name"], f"Cancelled: your turn was stopped by {effect['agent']}.")
        record.update(status=STOPPED, last_action=f"stopped by {effect['agent']}")
        # NOTE: a stop ends the turn: what it read and left unanswered is closed as at a turn end.
        self.close_read_requests(record["name"], "")
        # NOTE: the agent's open calls were answered just above, so the notice cannot
        # come between a tool call and its result.
        notice = envelopes.notice(f"Your turn was stopped by {effect['agent']}. Wait for new instructions.")
        message_id = f"msg_{self.next_id('message')}"
        self.track(message_id, sender="router", to=record["name"], sent_at=self.now, status="delivered", delivered_at=self.now, read_at=None)
        record["unread"] = [*record.get("unread", []), message_id]
        self.appends[record["name"]].append(envelopes.as_message([notice]))

    def on_step(self, effect: dict[str, Any]) -> None:
        name = effect["agent"]
        # NOTE: the step's text is read from the history the step wrote, not carried
        # in the effect, so a checkpoint does not store it twice.
        index = effect.get("message_index")
        text = self._histories[name][index].text.strip() if index is not None else ""
        record = self.agents[name]
        # The step saw everything delivered to the agent before it ran.
        for message_id in record.get("unread", []):
            self.track(message_id, status="read", read_at=self.now)
        record["unread"] = []
        record["steps"] += 1
        record["turn_steps"] += 1
        record["tool_calls"] += effect["tool_calls"]
        self.team["run_calls"] = self.team.get("run_calls", 0) + 1
        record["tokens"] = record.get("tokens", 0) + effect.get("tokens", 0)
        if effect.get("error"):
            self.end_agent(name, FAILED, reason=effect["error"])
            self.post(LEADER, envelopes.notice(f"{name} failed: {clip(effect['error'], 300)}"), sender="router")
            return
        if record["status"] not in ENDED and record["status"] != STOPPED:
            record["last_action"] = clip(text, 80) if text else (f"{effect['tool_calls']} tool call(s)" if effect["tool_calls"] else "ended its turn")
            for call_id in effect["deferred"]:
                # NOTE: a deferred tool that asked for nothing (a call answered in
                # this very pass, e.g. a plan the policy lets the leader approve, is fine).
                if call_id not in record["waits"] and call_id not in self.answered_calls:
                    self.appends[name].append(ToolMessage(content="Error: this call could not be completed.", tool_call_id=call_id, status="error"))
            if record["waits"]:
                record["status"] = WAITING
            else:
                record["status"] = IDLE if effect["ended_turn"] else RUNNING
        if name == LEADER:
            conversation = self.conversation_of(LEADER) if effect["ended_turn"] else None
            if conversation is not None:
                self.continue_conversation(conversation, LEADER, text)
            elif effect["ended_turn"] and text:
                self.replies.append(AIMessage(content=text, name=LEADER))
                self.team["reported"] = self.team.get("user_seen", 0)
        else:
            self.member_output(name, text, ended_turn=effect["ended_turn"])
        if record["status"] == RUNNING and record["turn_steps"] >= self.policy.max_turn_steps:
            record.update(status=STOPPED, last_action="stopped: step budget of its turn used up")
            if name != LEADER:
                self.post(LEADER, envelopes.notice(f"{name} used {record['turn_steps']} steps in this turn and was stopped. Send it a message to continue."), sender="router")

    # -- outputs and waits ---------------------------------------------------

    def member_output(self, name: str, text: str, *, ended_turn: bool) -> None:
        """Route a member's step output: answer who waits for it, or tell the leader."""
        shown = envelopes.without_control_words(text)
        control = bool(text) and not shown
        conversation = self.conversation_of(name) if ended_turn else None
        consumed = control or conversation is not None
        out_id = f"out_{self.next_id('out')}" if text else ""
        content = f"{name} replied ({out_id}):\n{shown}"
        if text and not control:
            for waiter in self.agents:
                if self.take_output_wait(waiter, name, content, replies=False) and waiter == LEADER:
                    consumed = True
        if ended_turn and text:
            for record in self.pending_requests():
                if record.get("route") == name and record.get("reply_via") == "output" and self.is_read(record):
                    self.close_reply(record, name, text, content)
                    consumed = True  # the asker has it; the leader got it or a notice
        if text and not consumed:
            self.post(LEADER, envelopes.output(name, out_id, shown, final=ended_turn), sender=name)
        if ended_turn:
            if conversation is not None:
                self.continue_conversation(conversation, name, text)
            self.settle_turn_end(name, text)

    def close_reply(self, record: dict[str, Any], name: str, text: str, content: str) -> None:
        """``name``'s turn ended with ``text``: the reply a question or a run waited for."""
        asker = record["from"]
        if record["kind"] == RUN:
            shown = envelopes.without_control_words(text)
            self.close_request(record, shown, status=tracker.ANSWERED)
            if not envelopes.has_control_word(text, envelopes.ANNOUNCE_SKIP):
                self.post(asker, envelopes.reply(name, record["id"], shown), sender=name)
            if asker != LEADER:
                self.tell_leader_peer_traffic(f"{name} finished {record['id']} for {asker}: {clip(text)}", envelopes.reply(name, record["id"], text))
            if (record.get("details") or {}).get("cleanup") == "delete":
                self.end_agent(name, TERMINATED, reason=f"{record['id']} finished (cleanup=delete)")
            return
        waiting = asker in self.agents and record.get("call_id") in self.agents[asker]["waits"]
        self.close_request(record, content, status=tracker.ANSWERED)
        if asker != LEADER:
            self.tell_leader_peer_traffic(f"{name} answered {asker} ({record['id']}): {clip(text)}", content)
        ping_pong = (record.get("details") or {}).get("ping_pong")
        if waiting and ping_pong and not envelopes.has_control_word(text, envelopes.REPLY_SKIP) and self.policy.max_ping_pong > 1 and name != LEADER:
            conversations = dict(self.team.get("conversations", {}))
            conversations[record["id"]] = {"a": asker, "b": name, "round": 1, "next": asker}
            self.team["conversations"] = conversations

    def conversation_of(self, name: str) -> tuple[str, dict[str, Any]] | None:
        """The ping-pong exchange in which it is ``name``'s turn to reply, if any."""
        for conv_id, conv in self.team.get("conversations", {}).items():
            if conv["next"] == name:
                return conv_id, conv
        return None

    def continue_conversation(self, conversation: tuple[str, dict[str, Any]], name: str, text: str) -> None:
        """Forward ``name``'s reply in a ping-pong exchange, until REPLY_SKIP or the round limit."""
        conv_id, conv = conversation
        conversations = dict(self.team["conversations"])
        other = conv["b"] if name == conv["a"] else conv["a"]
        limit = self.policy.max_ping_pong
        if not text or envelopes.has_control_word(text, envelopes.REPLY_SKIP) or conv["round"] >= limit:
            del conversations[conv_id]
        else:
            number = conv["round"] + 1
            note = f"ping-pong round {number}/{limit}" + ("" if number >= limit else f" · reply {envelopes.REPLY_SKIP} to stop")
            self.post(other, envelopes.reply(name, conv_id, envelopes.without_control_words(text), round_=note), sender=name)
            self.tell_leader_peer_traffic(f"{name} → {other} ({conv_id}, round {number}): {clip(text)}", text)
            conversations[conv_id] = {**conv, "round": number, "next": other}
            if number >= limit:
                del conversations[conv_id]
        self.team["conversations"] = conversations

    def settle_turn_end(self, name: str, text: str) -> None:
        """Close what waits on ``name`` once its turn ends: nothing may wait forever."""
        self.close_read_requests(name, text)
        for waiter in self.agents:
            self.take_output_wait(waiter, name, f"{name} finished its turn without further output.")
        if not text:
            self.post(LEADER, envelopes.notice(f"{name} finished its turn without a report."), sender="router")

    def close_read_requests(self, name: str, text: str) -> None:
        """``name``'s turn ended (or was stopped): the requests it read and did not answer are closed."""
        final = text or "(no final message)"
        for record in self.pending_requests():
            if record.get("route") != name or not self.is_read(record):
                continue  # NOTE: a request it has not read yet gets its next turn
            if record["kind"] == SHUTDOWN:
                self.expire_shutdown(record, f"ended its turn without answering {record['id']}")
            elif record["kind"] == RUN:
                self.close_reply(record, name, "(no result)", "")
            elif record.get("reply_via") == "output":
                self.close_request(record, f"{name} ended its turn without replying.", status=tracker.EXPIRED)
            elif record["kind"] == QUESTION:
                self.close_request(record, f"{name} ended its turn without answering (answer_other_agent). Its final message: {final}", status=tracker.EXPIRED)

    def output_waits(self, waiter: str, on: str, *, replies: bool = True) -> list[str]:
        """The calls of ``waiter`` that ``on``'s next output answers (sleep, ask_sub_agent).

        Args:
            waiter: Who waits.
            on: The agent it waits for.
            replies: Whether questions that wait for ``on``'s reply (ask_sub_agent)
                count too: a reply is the end of a turn, not a progress line.
        """
        record = self.agents.get(waiter)
        if record is None:
            return []
        calls = []
        for call_id, wait in record["waits"].items():
            if wait["on"] != on or wait.get("group"):
                continue
            request = self.request(wait["request"]) if wait["request"] else None
            if request is None:
                calls.append(call_id)
            elif replies and request.get("reply_via") == "output" and tracker.is_pending(request) and self.is_read(request):
                calls.append(call_id)
        return calls

    def take_output_wait(self, waiter: str, on: str, content: str, *, replies: bool = True) -> bool:
        """Answer ``waiter``'s waits for ``on``'s next output (see ``output_waits``).

        Returns:
            True if any wait was answered.
        """
        calls = self.output_waits(waiter, on, replies=replies)
        for call_id in calls:
            wait = self.agents[waiter]["waits"][call_id]
            request = self.request(wait["request"]) if wait["request"] else None
            if request is not None:
                # NOTE: ask_sub_agent: the member spoke (or asked) after reading the
                # question; it is closed with what it said, so the leader is not blocked.
                self.save(tracker.close(request, status=tracker.ANSWERED, answer=content, closed_at=self.now))
            self.answer_wait(waiter, call_id, content)
        return bool(calls)

    def cancel_waits(self, name: str, content: str) -> None:
        """Close every open tool call of ``name``, cancel the requests behind them, tell their deciders."""
        record = self.agents[name]
        for call_id, wait in list(record["waits"].items()):
            request = self.request(wait["request"]) if wait["request"] else None
            if tracker.is_pending(request):
                self.save(tracker.close(request, status=tracker.CANCELLED, answer=content, closed_at=self.now))
                self.tell_decider_cancelled(request, content)
            self.answer_wait(name, call_id, content, outcome=results.CANCELLED)

    def tell_decider_cancelled(self, request: dict[str, Any], why: str) -> None:
        """Whoever was to act on a request that was cancelled after it read it is told."""
        route = request.get("route")
        delivery = self.delivery(request.get("message") or "")
        if route in self.agents and delivery is not None and delivery["status"] in ("delivered", "read"):
            self.post(route, envelopes.notice(f"{request['id']} from {request['from']} was cancelled: {clip(why, 200)}"), sender="router", wake=False)

    def end_agent(self, name: str, status: str, *, reason: str) -> None:
        """Take an agent out of the team: close its waits, answer who waits on it, bounce its inbox."""
        record = self.agents[name]
        self.cancel_waits(name, f"Cancelled: you are {status}.")
        record.update(status=status, last_action=reason)
        for request in self.pending_requests():
            if request.get("route") == name:
                error = f"{name} is {status} and did not answer."
                if request.get("tool") == "sessions_send":
                    error = communication_failed(name, error)
                self.close_request(request, error, status=tracker.CANCELLED)
        for waiter in self.agents:
            self.take_output_wait(waiter, name, f"{name} is {status}.")
        inbox, record["inbox"] = record["inbox"], []
        for message in inbox:
            self.bounce(message["id"], message["text"], to=name, status=status)

    # -- settling ------------------------------------------------------------

    def settle(self) -> None:
        """Deliver inboxes; if nobody can run, unblock the team (never hang); end with the leader's report."""
        self.enforce_budget()
        while True:
            self.break_cycles()
            for name in self.agents:
                self.flush(name)
            if any(rec["status"] == RUNNING for rec in self.agents.values()):
                return
            if self.remind_leader():
                continue
            if self.human_pending():
                return  # paused for a person
            if not self.break_newest_wait() and not self.ask_for_report():
                return  # finished

    def budget_spent(self) -> bool:
        """Whether this run used up ``Policy.max_model_calls``."""
        return self.team.get("run_calls", 0) >= self.policy.max_model_calls

    def enforce_budget(self) -> None:
        """Past the run's model-call budget, every member stops and the leader is told (once)."""
        if not self.budget_spent() or self.team.get("budget_told") == self.team.get("user_seen"):
            return
        self.team["budget_told"] = self.team.get("user_seen")
        stopped = []
        for name, record in self.agents.items():
            if name != LEADER and record["status"] in (RUNNING, WAITING):
                self.cancel_waits(name, "Cancelled: the team used up its model-call budget for this run.")
                record.update(status=STOPPED, last_action="stopped: the run's model-call budget is used up")
                stopped.append(name)
        listing = ", ".join(stopped) or "none was working"
        self.post(LEADER, envelopes.notice(
            f"The team used {self.team['run_calls']} model calls, its budget for this run (Policy.max_model_calls). "
            f"Members stopped: {listing}. Report to the user now what was done and what is left."
        ), sender="router")

    def ask_for_report(self) -> bool:
        """The team is idle but the leader has not answered the user's last message: ask it (once)."""
        seen = self.team.get("user_seen", 0)
        if not seen or self.team.get("reported", 0) >= seen or self.team.get("report_asked") == seen:
            return False
        if self.agents[LEADER]["status"] in ENDED or self.agents[LEADER]["waits"]:
            return False
        self.team["report_asked"] = seen
        self.post(LEADER, envelopes.notice("Your team is idle and the user has no answer yet: report what was done and what is left."), sender="router")
        return True

    def remind_leader(self) -> bool:
        """Questions the leader left unanswered: remind it, then let the askers go on."""
        open_asks = [r for r in self.pending_requests() if r.get("route") == LEADER]
        if not open_asks or self.agents[LEADER]["waits"]:
            return False  # NOTE: a blocked leader cannot read a reminder; break its wait first
        reminded = self.team.setdefault("reminded", {})
        due = [r for r in open_asks if reminded.get(r["id"], 0) < self.policy.leader_reminders]
        if due:
            for r in due:
                reminded[r["id"]] = reminded.get(r["id"], 0) + 1
            listing = "; ".join(f"{r['id']} from {r['from']}: {clip(r['body'], 100)}" for r in due)
            self.post(LEADER, envelopes.notice(f"Requests waiting for you block your team: {listing}. Answer questions with answer_sub_agent_question, plans and approvals with review_plan, or escalate_to_user."), sender="router")
        else:
            for r in open_asks:
                if r["kind"] == ASK:
                    self.close_request(r, f"The {LEADER} did not answer. Decide yourself, state your assumption, and go on.", status=tracker.EXPIRED)
                else:
                    self.decide(r, approve=False, feedback=f"the {LEADER} did not review it", by="nobody")
        return True

    def break_newest_wait(self) -> bool:
        """Nobody can run but some agents still wait: cancel the newest wait."""
        waits = [
            (wait_age(name, w), name, call_id, w)
            for name, rec in self.agents.items()
            for call_id, w in rec["waits"].items()
            if w["on"] != HUMAN
        ]
        if not waits:
            return False
        _, name, call_id, wait = max(waits, key=lambda item: item[0])
        self.cancel_wait(name, call_id, wait, self.describe_wait_chain(name), why="Nobody could go on")
        return True

    def wait_edges(self) -> dict[str, list[tuple[tuple[Any, ...], str, str, dict[str, Any]]]]:
        """The wait-for graph: waiter -> [(seq, target agent, call id, wait)]."""
        edges: dict[str, list[tuple[int, str, str, dict[str, Any]]]] = {}
        for name, rec in self.agents.items():
            for call_id, wait in rec["waits"].items():
                for target in wait.get("targets") or [wait["on"]]:
                    if target in self.agents and target != name:
                        edges.setdefault(name, []).append((wait_age(name, wait), target, call_id, wait))
        return edges

    def break_cycles(self) -> None:
        """Agents waiting on each other in a cycle: cancel the newest wait of each cycle."""
        while cycle := find_cycle(edges := self.wait_edges()):
            along = [
                (edge, waiter)
                for i, waiter in enumerate(cycle)
                for edge in edges[waiter]
                if edge[1] == cycle[(i + 1) % len(cycle)]
            ]
            (seq, _, call_id, wait), waiter = max(along, key=lambda item: item[0][0])
            chain = ", ".join(
                f"{waiter} waits for {edge[1]} ({edge[3]['request'] or edge[3]['tool']})" for edge, waiter in along
            )
            self.cancel_wait(waiter, call_id, wait, chain, why="This is a cycle")

    def cancel_wait(self, name: str, call_id: str, wait: dict[str, Any], chain: str, *, why: str) -> None:
        """Answer one wait with a deadlock error (and cancel the requests behind it)."""
        content = (
            f"Error: deadlock: {chain}. {why}, so this wait (the newest) was cancelled. "
            "Answer the questions waiting for you first, then ask again if you still need to."
        )
        for request_id in wait.get("group") or [wait["request"]]:
            request = self.request(request_id) if request_id else None
            if tracker.is_pending(request):
                self.save(tracker.close(request, status=tracker.CANCELLED, answer=content, closed_at=self.now))
        self.answer_wait(name, call_id, content)

    def describe_wait_chain(self, start: str) -> str:
        """``A waits for B (ask_3), B waits for A (ask_2)``: the chain of waits from ``start``."""
        parts, seen, name = [], set(), start
        while name in self.agents and name not in seen and self.agents[name]["waits"]:
            seen.add(name)
            wait = max(self.agents[name]["waits"].values(), key=lambda w: w["seq"])
            label = wait["request"] or wait["tool"]
            parts.append(f"{name} waits for {wait['on']} ({label})")
            name = wait["on"]
        return ", ".join(parts) or f"{start} waits"

    # -- governance (issue 12): thin calls into teamgraph.governance -------------

    def on_task_create(self, effect: dict[str, Any]) -> None:
        try:
            self.team["board"] = task_board.add_task(
                self.team.get("board") or [], title=effect["title"], assignee=effect["assignee"],
                priority=effect["priority"], depends_on=effect["depends_on"], by=effect["agent"],
            )
        except task_board.BoardError as exc:
            self.post(effect["agent"], envelopes.notice(f"Task not created: {exc}"), sender="router", wake=False)

    def on_task_update(self, effect: dict[str, Any]) -> None:
        fields = {k: effect[k] for k in ("status", "priority", "note")}
        try:
            board = self.team.get("board") or []
            self.team["board"] = task_board.update_task(board, effect["task_id"], by=effect["agent"], **fields)
        except task_board.BoardError as exc:
            self.post(effect["agent"], envelopes.notice(f"Task not updated: {exc}"), sender="router", wake=False)

    def on_endow(self, effect: dict[str, Any]) -> None:
        endowments = dict(self.team.get("endowments", {}))
        current = {s["name"]: s for s in endowments.get(effect["target"], [])}
        current.update({s["name"]: s for s in effect["skills"]})
        endowments[effect["target"]] = list(current.values())
        self.team["endowments"] = endowments


def wait_age(waiter: str, wait: dict[str, Any]) -> tuple[Any, ...]:
    """How new a wait is, for breaking deadlocks: the newest wait is cancelled.

    NOTE: waits opened in the same router pass were opened concurrently. Among them
    a member's wait counts as newer than the leader's (a member that asks while the
    leader asks it is told to answer first), then by name, so the outcome never
    depends on which member was created first.
    """
    return (wait.get("tick", 0), waiter != LEADER, waiter, wait["seq"])


def find_cycle(edges: dict[str, list[tuple[Any, str, Any, Any]]]) -> list[str] | None:
    """A cycle in a waiter -> targets graph, as the list of agents on it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for _, target, _, _ in edges.get(node, []):
            if state.get(target) == 1:
                return path[path.index(target):]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def make_router(runtime: TeamRuntime):
    """The router node for one team."""

    def router(state: dict[str, Any]) -> dict[str, Any]:
        write_committed(runtime, state)  # NOTE: the state a pass reads is committed: log it first
        return RouterPass(runtime, state).run()

    return router
