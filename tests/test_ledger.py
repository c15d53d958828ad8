"""Component tests of the router's layers: a ledger in, a handler, the updates out.

No graph and no model: each test builds the state a router pass would read, runs
one handler (or one layer's function) on a ``Ledger`` and reads what it changed.
Assertions are on statuses, kinds and ids, not wording.
"""

from __future__ import annotations

import ast
import threading
from pathlib import Path
from typing import Any, get_args

import pytest
from conftest import FakeClock
from langchain_core.messages import AIMessage, ToolMessage

import teamgraph.ledger
from teamgraph import Policy
from teamgraph.calls import CallPool, VirtualCallPool
from teamgraph.graph.router import HANDLERS, run_pass
from teamgraph.ledger import lifecycle, liveness, mail, requests, turns, waits
from teamgraph.ledger.book import Ledger
from teamgraph.messaging import effects, envelopes, notices, results
from teamgraph.messaging.results import error_of
from teamgraph.protocols import requests as tracker
from teamgraph.records import LEADER, EffectKind
from teamgraph.runtime import TeamRuntime
from teamgraph.tools import errors as tool_errors
from tests.invariants import assert_tool_calls_paired

DEV = "Full-Stack Engineer_1"
QA = "QA Engineer_1"


@pytest.fixture
def runtime(tmp_path: Path) -> TeamRuntime:
    return TeamRuntime(home=tmp_path, policy=Policy(), clock=FakeClock())


def agent(name: str, role: str = "full-stack-engineer", *, index: int = 1, status: str = "idle", **fields: Any):
    record = lifecycle.new_agent(name, role, index=index, created_by=LEADER, now="2030-01-01T09:00:00+00:00")
    return {**record, "status": status, **fields}


def team_state(*members: dict[str, Any], **parts: Any) -> dict[str, Any]:
    leader = agent(LEADER, "team-leader", index=0)
    return {
        "agents": {LEADER: leader, **{m["name"]: m for m in members}},
        "team": {"counters": {}, "instances": {}, "user_seen": 1, "reported": 1},
        "requests": {},
        "deliveries": {},
        "histories": {},
        **parts,
    }


def inbox_kinds(ledger: Ledger, name: str) -> list[str]:
    return [item.get("kind", mail.INBOX) for item in ledger.agents[name]["inbox"]]


def tool_results(ledger: Ledger, name: str) -> list[ToolMessage]:
    return [m for m in ledger.appends[name] if isinstance(m, ToolMessage)]


# -- the adapter -------------------------------------------------------------------


def test_every_effect_kind_has_exactly_one_handler():
    assert set(HANDLERS) == set(get_args(EffectKind))


def test_layers_import_only_the_layers_below_them():
    order = ["book", "mail", "waits", "requests", "work", "lifecycle", "turns", "liveness", "schedule"]
    folder = Path(teamgraph.ledger.__file__).parent
    assert sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__") == sorted(order)
    for layer in order:
        tree = ast.parse((folder / f"{layer}.py").read_text())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("teamgraph.ledger"):
                names = [node.module.rsplit(".", 1)[1]] if node.module != "teamgraph.ledger" else []
                names += [a.name for a in node.names if node.module == "teamgraph.ledger"]
                imported.update(names)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("teamgraph.graph"):
                imported.add("graph")
        below = set(order[: order.index(layer)])
        assert imported <= below, f"{layer} imports {sorted(imported - below)} (not below it)"


def test_a_pass_writes_only_the_agents_it_changed(runtime):
    state = team_state(agent(DEV), agent(QA, "qa-engineer", index=2))
    state["outbox"] = [{**effects.deliver(to=DEV, body="Build it."), "agent": LEADER}]

    updates = run_pass(runtime, state)

    assert set(updates["agents"]) == {DEV}
    assert updates["agents"][DEV]["status"] == "running"
    assert updates["team"]["scheduled"] == [DEV]


def test_a_spawn_whose_role_left_the_home_creates_nobody_and_tells_its_creator(runtime):
    # NOTE: the tool found the role; its file was removed before the pass applied the spawn.
    state = team_state()
    state["outbox"] = [{**effects.spawn(role_id="gone-role", name="Gone_1", task="Work."), "agent": LEADER}]

    updates = run_pass(runtime, state)

    assert set(updates["agents"]) <= {LEADER} and "Gone_1" not in updates["agents"]
    told = [m.additional_kwargs.get(envelopes.ENVELOPE_KEY) for m in updates["histories"][LEADER]]
    assert told == [f"notice:{notices.NOT_CREATED}"]  # NOTE: delivered at once: the leader was idle


@pytest.mark.parametrize("sender", [LEADER, DEV])
@pytest.mark.parametrize("spawn_first", [True, False])
def test_a_message_to_a_member_that_was_not_created_bounces_to_its_sender(runtime, sender, spawn_first):
    # NOTE: in the same superstep, the leader's spawn whose role is gone and a message to that
    # member (from the leader's own step or a member's), in either order of the outbox.
    state = team_state(agent(DEV, status="running"))
    spawn = {**effects.spawn(role_id="gone-role", name="Gone_1", task="Work."), "agent": LEADER}
    message = {**effects.deliver(to="Gone_1", body="Here is the data."), "agent": sender}
    state["outbox"] = [spawn, message] if spawn_first else [message, spawn]

    updates = run_pass(runtime, state)

    assert "Gone_1" not in updates["agents"]
    deliveries = [d for d in updates["deliveries"].values() if d["to"] == "Gone_1"]
    # NOTE: the task was never posted (its text stays in the leader's tool call); the message bounces.
    assert [d["status"] for d in deliveries] == ["bounced"]

    def told(name: str) -> list[str | None]:
        """The kinds of what ``name`` was told: still in its inbox, or delivered to its history."""
        inbox = updates["agents"].get(name, {}).get("inbox", [])
        history = updates.get("histories", {}).get(name, [])
        return [m.get("kind") for m in inbox] + [m.additional_kwargs.get(envelopes.ENVELOPE_KEY) for m in history]

    assert f"notice:{notices.NOT_CREATED}" in told(LEADER)
    assert f"notice:{notices.BOUNCED}" in told(sender)


# -- mail ---------------------------------------------------------------------------


def test_a_message_to_an_ended_agent_bounces_to_its_sender_with_a_notice(runtime):
    ledger = Ledger(runtime, team_state(agent(DEV), agent(QA, "qa-engineer", index=2, status="terminated")))

    message_id = mail.post(ledger, QA, envelopes.message(DEV, "Hi"), sender=DEV)

    assert ledger.delivery(message_id)["status"] == "bounced"
    assert inbox_kinds(ledger, DEV) == [f"notice:{notices.BOUNCED}"]
    assert ledger.agents[QA]["inbox"] == []


def test_flush_starts_a_turn_of_an_idle_agent_and_records_delivery(runtime):
    ledger = Ledger(runtime, team_state(agent(DEV)))
    message_id = mail.post(ledger, DEV, envelopes.task(LEADER, "Build it."), sender=LEADER)
    mail.notify(ledger, DEV, notices.no_report(QA), wake=False)

    mail.flush(ledger, DEV)

    record = ledger.agents[DEV]
    assert (record["status"], record["turn"], record["inbox"]) == ("running", 1, [])
    assert ledger.delivery(message_id)["status"] == "delivered"
    assert record["unread"][0] == message_id
    kinds = [m.additional_kwargs[envelopes.ENVELOPE_KEY] for m in ledger.appends[DEV]]
    assert kinds == [mail.INBOX, f"notice:{notices.NO_REPORT}"]


def test_flush_keeps_the_inbox_while_a_tool_call_is_open(runtime):
    waits = {"call_1": {"tool": "ask_master", "on": LEADER, "request": "ask_1", "seq": 1, "tick": 0}}
    ledger = Ledger(runtime, team_state(agent(DEV, status="waiting", waits=waits)))
    mail.post(ledger, DEV, envelopes.message(QA, "Hi"), sender=QA)

    mail.flush(ledger, DEV)

    assert len(ledger.agents[DEV]["inbox"]) == 1
    assert DEV not in ledger.appends


def test_a_notice_that_does_not_wake_leaves_an_idle_agent_idle(runtime):
    ledger = Ledger(runtime, team_state(agent(DEV)))
    mail.notify(ledger, DEV, notices.no_report(QA), wake=False)

    mail.flush(ledger, DEV)

    assert ledger.agents[DEV]["status"] == "idle"
    assert len(ledger.agents[DEV]["inbox"]) == 1


# -- requests -------------------------------------------------------------------------


def open_question(ledger: Ledger, *, asker: str = DEV, to: str = QA, call_id: str = "call_1") -> str:
    effect = effects.open_request(
        request_kind=tracker.QUESTION, body="Which port?", to=to, call_id=call_id, tool="ask_other_agent"
    )
    requests.on_open(ledger, {**effect, "agent": asker})
    return next(iter(ledger.changed_requests))


def test_opening_a_question_routes_its_envelope_and_opens_the_asker_wait(runtime):
    ledger = Ledger(runtime, team_state(agent(DEV, status="running"), agent(QA, "qa-engineer", index=2)))

    rid = open_question(ledger)

    record = ledger.request(rid)
    assert (record["status"], record["route"], record["from"]) == ("pending", QA, DEV)
    assert ledger.agents[DEV]["waits"]["call_1"]["request"] == rid
    assert [item["id"] for item in ledger.agents[QA]["inbox"]] == [record["message"]]
    assert envelopes.parse(ledger.agents[QA]["inbox"][0]["text"])["fields"]["id"] == rid


def test_a_question_to_an_ended_agent_is_cancelled_and_answers_the_call(runtime):
    ledger = Ledger(
        runtime, team_state(agent(DEV, status="running"), agent(QA, "qa-engineer", index=2, status="shutdown"))
    )

    rid = open_question(ledger)

    assert ledger.request(rid)["status"] == tracker.CANCELLED
    assert [m.tool_call_id for m in tool_results(ledger, DEV)] == ["call_1"]
    assert ledger.agents[DEV]["waits"] == {}


def test_an_answer_to_a_closed_request_is_reported_back_to_the_answerer(runtime):
    ledger = Ledger(runtime, team_state(agent(DEV, status="running"), agent(QA, "qa-engineer", index=2)))
    rid = open_question(ledger)
    requests.close_request(ledger, ledger.request(rid), "never mind", status=tracker.CANCELLED)

    lifecycle.on_answer(ledger, {**effects.answer(request_id=rid, answer="8080"), "agent": QA})

    assert ledger.request(rid)["status"] == tracker.CANCELLED
    assert f"notice:{notices.NOT_DELIVERED}" in inbox_kinds(ledger, QA)


def test_a_request_closed_before_it_was_read_is_withdrawn_from_the_inbox(runtime):
    ledger = Ledger(runtime, team_state(agent(DEV, status="running"), agent(QA, "qa-engineer", index=2)))
    rid = open_question(ledger)

    turns.on_stop(ledger, {**effects.stop(target=DEV), "agent": LEADER})

    assert ledger.request(rid)["status"] == tracker.CANCELLED
    assert inbox_kinds(ledger, QA) == [f"notice:{notices.WITHDRAWN}"]


def test_withdrawing_an_envelope_of_the_committed_state_writes_the_record_and_edits_nothing(runtime):
    """The question was routed in an earlier pass: its withdrawal is a new inbox item in the
    pass's updates, and the committed state's item (LangGraph's channel value) is untouched."""
    first = Ledger(runtime, team_state(agent(DEV, status="running"), agent(QA, "qa-engineer", index=2)))
    rid = open_question(first)
    committed = team_state(agents=first.agents, requests=dict(first.changed_requests))
    committed_item = dict(committed["agents"][QA]["inbox"][0])
    second = Ledger(runtime, committed)

    turns.on_stop(second, {**effects.stop(target=DEV), "agent": LEADER})
    updates = second.updates([])

    assert [item["kind"] for item in updates["agents"][QA]["inbox"]] == [f"notice:{notices.WITHDRAWN}"]
    assert committed["agents"][QA]["inbox"][0] == committed_item
    assert updates["requests"][rid]["status"] == tracker.CANCELLED


# -- lifecycle and turns ---------------------------------------------------------------


def test_an_approved_shutdown_ends_the_member_and_tells_the_leader(runtime):
    ledger = Ledger(runtime, team_state(agent(DEV, status="running")))
    requests.on_open(
        ledger, {**effects.open_request(request_kind=tracker.SHUTDOWN, body="Done.", to=DEV), "agent": LEADER}
    )
    rid = next(iter(ledger.changed_requests))
    mail.flush(ledger, DEV)  # the member has the request in its history

    lifecycle.on_answer(ledger, {**effects.answer(request_id=rid, answer="ok", approve=True), "agent": DEV})

    assert ledger.request(rid)["status"] == tracker.APPROVED
    assert ledger.agents[DEV]["status"] == "shutdown"
    assert inbox_kinds(ledger, LEADER) == [f"notice:{notices.SHUTDOWN_APPROVED}"]


def step_state(*, read: bool) -> dict[str, Any]:
    """QA replies to DEV's question; the question's envelope was read by that step, or not."""
    question = tracker.new_request(
        {},
        kind=tracker.QUESTION,
        sender=DEV,
        receiver=QA,
        body="Port?",
        opened_at="t",
        call_id="call_1",
        tool="ask_other_agent",
        reply_via="output",
        route=QA,
        message="msg_1",
    )
    waits = {"call_1": {"tool": "ask_other_agent", "on": QA, "request": question["id"], "seq": 1, "tick": 0}}
    qa = agent(QA, "qa-engineer", index=2, status="running", unread=["msg_1"] if read else [])
    delivery = {"id": "msg_1", "sender": DEV, "to": QA, "status": "delivered"}
    return team_state(
        agent(DEV, status="waiting", waits=waits),
        qa,
        requests={question["id"]: question},
        deliveries={"msg_1": delivery},
        histories={QA: [AIMessage("8080.")]},
        team={"counters": {"request": 1, "message": 1}, "instances": {}, "open": [question["id"]]},
    )


@pytest.mark.parametrize("read", [True, False])
def test_an_output_answers_a_question_only_if_its_step_read_it(runtime, read):
    ledger = Ledger(runtime, step_state(read=read))
    step = effects.step(message_index=-1, ended_turn=True, tool_calls=0, deferred=[])

    turns.on_step(ledger, {**step, "agent": QA})

    answered = [m.tool_call_id for m in tool_results(ledger, DEV)]
    assert answered == (["call_1"] if read else [])
    assert ledger.request("ask_1")["status"] == (tracker.ANSWERED if read else tracker.PENDING)
    assert ledger.agents[QA]["status"] == "idle"


def test_a_failed_step_ends_the_member_and_cancels_what_waits_on_it(runtime):
    ledger = Ledger(runtime, step_state(read=False))
    failed = effects.step(message_index=None, ended_turn=True, tool_calls=0, deferred=[])

    turns.on_step(ledger, {**failed, "agent": QA, "error": "RuntimeError: boom"})

    assert ledger.agents[QA]["status"] == "failed"
    assert ledger.request("ask_1")["status"] == tracker.CANCELLED
    assert [m.tool_call_id for m in tool_results(ledger, DEV)] == ["call_1"]
    assert f"notice:{notices.FAILED}" in inbox_kinds(ledger, LEADER)


# -- liveness ------------------------------------------------------------------------


def test_a_wait_cycle_is_broken_at_the_members_wait_with_a_deadlock_outcome(runtime):
    leader_wait = {"tool": "ask_sub_agent", "on": DEV, "request": None, "seq": 1, "tick": 3}
    dev_wait = {"tool": "ask_master", "on": LEADER, "request": None, "seq": 2, "tick": 3}
    state = team_state(agent(DEV, status="waiting", waits={"call_d": dev_wait}))
    state["agents"][LEADER] = {**state["agents"][LEADER], "status": "waiting", "waits": {"call_l": leader_wait}}
    ledger = Ledger(runtime, state)

    liveness.break_cycles(ledger)

    [result] = tool_results(ledger, DEV)
    assert (result.tool_call_id, results.outcome_of(result)) == ("call_d", results.DEADLOCK)
    assert "call_l" in ledger.agents[LEADER]["waits"]


def test_an_expired_shutdown_terminates_the_member(runtime):
    ledger = Ledger(runtime, team_state(agent(DEV, status="running")))
    requests.on_open(
        ledger, {**effects.open_request(request_kind=tracker.SHUTDOWN, body="Done.", to=DEV), "agent": LEADER}
    )
    runtime.clock.advance(runtime.policy.shutdown_timeout + 1)

    liveness.expire_deadlines(ledger)

    assert ledger.agents[DEV]["status"] == "terminated"
    assert f"notice:{notices.SHUTDOWN_EXPIRED}" in inbox_kinds(ledger, LEADER)


def test_the_run_budget_stops_busy_members_once(runtime):
    state = team_state(agent(DEV, status="running"), agent(QA, "qa-engineer", index=2))
    state["team"]["run_calls"] = runtime.policy.max_model_calls
    ledger = Ledger(runtime, state)

    liveness.enforce_budget(ledger)
    liveness.enforce_budget(ledger)

    assert (ledger.agents[DEV]["status"], ledger.agents[QA]["status"]) == ("stopped", "idle")
    assert inbox_kinds(ledger, LEADER) == [f"notice:{notices.RUN_BUDGET}"]


def test_an_idle_team_whose_user_has_no_answer_asks_the_leader_once(runtime):
    state = team_state()
    state["team"]["reported"] = 0
    ledger = Ledger(runtime, state)

    assert liveness.ask_for_report(ledger) is True
    assert liveness.ask_for_report(ledger) is False
    assert inbox_kinds(ledger, LEADER) == [f"notice:{notices.REPORT_DUE}"]


def test_every_notice_kind_is_documented():
    kinds = {value for name, value in vars(notices).items() if name.isupper() and isinstance(value, str)}
    documented = (Path(__file__).resolve().parent.parent / "docs" / "protocols.md").read_text()
    assert len(kinds) > 15
    assert sorted(k for k in kinds if f"`{k}`" not in documented) == []


# -- a step in flight (the completions scheduler): what reaches its agent meanwhile ----------------


def applied(state: dict[str, Any], updates: dict[str, Any]) -> dict[str, Any]:
    """The state after a router pass's updates (what the next superstep reads)."""
    histories = dict(state.get("histories", {}))
    for name, appended in updates.get("histories", {}).items():
        histories[name] = [*histories.get(name, []), *appended]
    return {
        **state,
        "agents": {**state["agents"], **updates.get("agents", {})},
        "requests": {**state.get("requests", {}), **updates.get("requests", {})},
        "deliveries": {**state.get("deliveries", {}), **updates.get("deliveries", {})},
        "histories": histories,
        "team": updates["team"],
        "outbox": [],
    }


def in_flight_state() -> dict[str, Any]:
    """DEV is busy: its step (dispatch 1) runs in the pool."""
    task = envelopes.inbox_message(envelopes.task(LEADER, "Build it."))
    return team_state(
        agent(DEV, status="running", turn=1),
        histories={DEV: [task]},
        team={"counters": {"dispatch": 1}, "instances": {}, "user_seen": 1, "reported": 1, "in_flight": {DEV: 1}},
    )


def landing(state: dict[str, Any], *asked: dict[str, Any], work: bool = False) -> dict[str, Any]:
    """DEV's step in flight finishes: calls that asked the router for ``asked``, or (``work``) a tool that ran."""
    calls = [{"name": e.get("tool") or "ask_master", "args": {}, "id": e["call_id"]} for e in asked]
    done = [{"name": "list_files", "args": {}, "id": "call_w"}] if work else []
    messages = [AIMessage("", tool_calls=[*calls, *done]), *(ToolMessage("[]", tool_call_id=c["id"]) for c in done)]
    step = effects.step(
        message_index=-1 - len(done),
        ended_turn=not (calls or done),
        tool_calls=len(calls) + len(done),
        deferred=[c["id"] for c in calls],
    )
    seq = state["team"]["in_flight"][DEV]
    outbox = [{**e, "agent": DEV} for e in (effects.taken(seq=seq), *asked, step)]
    histories = {**state.get("histories", {}), DEV: [*state.get("histories", {}).get(DEV, []), *messages]}
    return {**state, "histories": histories, "outbox": [*state.get("outbox", []), *outbox]}


def ask_master_call() -> dict[str, Any]:
    return effects.open_request(request_kind=tracker.ASK, body="JWT?", call_id="call_d", tool="ask_master")


def test_a_message_to_a_member_whose_step_is_in_flight_is_in_its_next_step(runtime):
    state = in_flight_state()
    state["outbox"] = [{**effects.deliver(to=DEV, body="Also a logout button."), "agent": LEADER}]

    sent = run_pass(runtime, state)

    # The step in flight did not see it: it waits in the inbox, not in the history.
    assert DEV not in sent.get("histories", {}) and len(sent["agents"][DEV]["inbox"]) == 1
    assert sent["team"]["in_flight"] == {DEV: 1}

    after = run_pass(runtime, landing(applied(state, sent), work=True))

    # The pass that takes the step back delivers the message after it and issues the next step.
    [delivered] = after["histories"][DEV]
    assert envelopes.parse(str(delivered.content))["body"] == "Also a logout button."
    assert after["team"]["in_flight"] == {DEV: 2}


@pytest.mark.parametrize("order", ["stop_while_in_flight", "stop_in_the_landing_pass"])
def test_a_stop_and_a_landing_step_close_its_request_and_its_call_once(runtime, order):
    state = in_flight_state()
    stop = {**effects.stop(target=DEV), "agent": LEADER}
    if order == "stop_while_in_flight":
        state["outbox"] = [stop]
        stopped = run_pass(runtime, state)
        assert stopped["agents"][DEV]["status"] == "stopped"
        # The notice follows the step in flight: it waits in the inbox.
        assert DEV not in stopped.get("histories", {})
        current = landing(applied(state, stopped), ask_master_call())
    else:
        current = landing(state, ask_master_call())
        current["outbox"].append(stop)

    after = run_pass(runtime, current)

    [request] = after["requests"].values()
    assert request["status"] == tracker.CANCELLED
    history = [*current["histories"][DEV], *after.get("histories", {}).get(DEV, [])]
    answers = [m for m in history if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, results.outcome_of(m)) for m in answers] == [("call_d", results.CANCELLED)]
    assert after["agents"][DEV]["status"] == "stopped"
    assert_tool_calls_paired(DEV, history)


@pytest.mark.parametrize("order", ["stop_while_in_flight", "stop_in_the_landing_pass"])
def test_a_run_read_by_a_step_in_flight_is_closed_when_its_member_is_stopped(runtime, order):
    """A background run (sessions_spawn) reached DEV before its step was issued; the leader
    stops DEV while that step is in flight, or in the pass where it lands. A stop in flight
    cannot close the run (not read yet); either way the landing pass closes it: no request
    is left pending."""
    first = Ledger(runtime, team_state(agent(DEV, status="running"), agent(QA, "qa-engineer", index=2)))
    spawn = effects.open_request(
        request_kind=tracker.RUN, body="bg 1", to=DEV, tool="sessions_spawn", reply_via="output"
    )
    requests.on_open(first, {**spawn, "agent": QA})
    rid = next(iter(first.changed_requests))
    mail.flush(first, DEV)  # NOTE: delivered: the step about to be issued reads it
    state = applied(team_state(agent(DEV, status="running"), agent(QA, "qa-engineer", index=2)), first.updates([]))
    state["team"]["in_flight"] = {DEV: 1}
    stop = {**effects.stop(target=DEV), "agent": LEADER}
    if order == "stop_while_in_flight":
        state["outbox"] = [stop]
        stopped = run_pass(runtime, state)
        assert stopped["agents"][DEV]["status"] == "stopped"
        assert stopped.get("requests", {}).get(rid, state["requests"][rid])["status"] == tracker.PENDING
        current = landing(applied(state, stopped), work=True)
    else:
        current = landing(state, work=True)
        current["outbox"].append(stop)

    after = run_pass(runtime, current)

    assert after["requests"][rid]["status"] != tracker.PENDING
    assert after["deliveries"][state["requests"][rid]["message"]]["status"] == "read"
    assert after["agents"][DEV]["status"] == "stopped"


def test_a_step_that_lands_after_its_member_was_terminated_is_closed_and_asks_nothing(runtime):
    state = in_flight_state()
    state["outbox"] = [{**effects.terminate(target=DEV), "agent": LEADER}]
    ended = run_pass(runtime, state)
    assert ended["agents"][DEV]["status"] == "terminated"
    group = [
        effects.open_request(request_kind=tracker.QUESTION, body="?", to=QA, call_id="call_g", tool="call_agents",
                             reply_via="output", group=True)
        for _ in range(2)
    ]  # fmt: skip

    current = landing(applied(state, ended), *group[:1])
    current["outbox"][1:1] = [{**group[1], "agent": DEV}]
    after = run_pass(runtime, current)

    assert {r["status"] for r in after["requests"].values()} == {tracker.CANCELLED}
    appended = after.get("histories", {}).get(DEV, [])
    assert [(m.tool_call_id, results.outcome_of(m)) for m in appended] == [("call_g", results.CANCELLED)]
    assert after["agents"][DEV]["status"] == "terminated" and after["team"]["in_flight"] == {}


def test_a_deferred_call_that_asked_for_nothing_is_answered_with_an_error_code(runtime):
    """A tool that deferred its result but asked the router for nothing: the pass answers the
    call (the pairing holds) with an error result that carries its code."""
    state = in_flight_state()
    ai = AIMessage("", tool_calls=[{"name": "ask_master", "args": {}, "id": "call_x"}])
    step = effects.step(message_index=-1, ended_turn=False, tool_calls=1, deferred=["call_x"])
    taken = {**effects.taken(seq=1), "agent": DEV}
    current = {**state, "histories": {DEV: [*state["histories"][DEV], ai]}, "outbox": [taken, {**step, "agent": DEV}]}

    after = run_pass(runtime, current)

    [answer] = [m for m in after["histories"][DEV] if isinstance(m, ToolMessage)]
    assert (answer.tool_call_id, answer.status, error_of(answer)) == ("call_x", "error", tool_errors.TOOL_FAILED)
    assert_tool_calls_paired(DEV, [*current["histories"][DEV], *after["histories"][DEV]])


def test_a_failed_call_is_taken_by_its_node_and_the_finished_ones_stay():
    """A call that failed is done too: its agent's node takes it and meets the error (and
    its retries); a call that finished with it stays until its own node takes it."""
    pool = CallPool(workers=2)
    pool.start("t", DEV, 1, lambda: [AIMessage("done")])

    def provider_down() -> list[Any]:
        raise ConnectionError("provider down")

    pool.start("t", LEADER, 1, provider_down)
    pool.wait("t", {DEV: 1, LEADER: 1}, every=True, timeout=5)
    assert pool.finished("t", {DEV: 1, LEADER: 1}) == {DEV: 1, LEADER: 1}
    failed = pool.take("t", LEADER, 1)
    assert failed is not None and isinstance(failed.exception(), ConnectionError)
    assert pool.running("t", {DEV: 1, LEADER: 1}) == {DEV: 1}
    assert pool.take("t", LEADER, 1) is None  # NOTE: taken once: a retry makes the call in the node


def test_the_virtual_pool_makes_calls_in_virtual_order_and_keeps_failures_for_their_node():
    pool = VirtualCallPool(latency=lambda agent, n: 2.0 if agent == DEV else 1.0)
    pool.start("t", DEV, 1, lambda: [AIMessage("done")])

    def provider_down() -> list[Any]:
        raise ConnectionError("provider down")

    pool.start("t", LEADER, 1, provider_down)
    pool.wait("t", {DEV: 1, LEADER: 1}, every=False, timeout=None)
    assert pool.finished("t", {DEV: 1, LEADER: 1}) == {LEADER: 1}  # NOTE: the leader's is due first
    future = pool.take("t", LEADER, 1)
    assert future is not None and isinstance(future.exception(), ConnectionError)
    assert pool.running("t", {DEV: 1}) == {DEV: 1}


def test_a_forgotten_run_cancels_its_calls():
    pool = CallPool(workers=1)
    gate = threading.Event()
    pool.start("t", DEV, 1, lambda: gate.wait(5) and [])
    pool.start("t", QA, 1, lambda: [])
    pool.forget("t")  # NOTE: QA's call is queued behind DEV's: it is never made
    gate.set()
    assert pool.running("t", {DEV: 1, QA: 1}) == {}


def test_the_pool_holds_only_the_dispatch_the_state_records():
    pool = CallPool(workers=2)
    pool.start("t", DEV, 1, lambda: [AIMessage("one")])
    pool.start("t", DEV, 1, lambda: pytest.fail("a dispatch the pool holds is not started twice"))
    pool.wait("t", {DEV: 1}, every=True, timeout=5)

    assert pool.finished("t", {DEV: 2}) == {}  # a stale call is not taken for a newer dispatch
    assert pool.take("t", DEV, 2) is None
    future = pool.take("t", DEV, 1)
    assert future is not None and future.result()[0].text == "one"


def test_a_cancelled_call_drops_the_approved_operation_its_node_was_to_perform(runtime):
    """Issue 29 point 5: a member stopped after its operation was approved, before its node
    performed it: the operation is not performed (its call is closed as cancelled)."""
    state = team_state(agent(DEV, status="waiting", turn=1))
    state["team"]["perform"] = {DEV: "approval_1"}
    ledger = Ledger(runtime, state)

    waits.cancel_waits(ledger, DEV, "stopped")

    assert ledger.team["perform"] == {}
