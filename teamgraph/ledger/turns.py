"""Turns: an agent's steps, its outputs, and the end of its turn.

A step's output answers whoever waits for it (``sleep``, ``ask_sub_agent``), a
question or run whose envelope the step had read (causality), a ping-pong
exchange, or else reaches the leader. When a turn ends (or is stopped), what
the agent read and left unanswered is closed, so nothing waits on it forever.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, ToolMessage

from teamgraph.ledger import requests
from teamgraph.ledger.book import Ledger
from teamgraph.ledger.lifecycle import end_agent, expire_shutdown
from teamgraph.ledger.mail import notify, post, tell_leader_peer_traffic
from teamgraph.ledger.waits import cancel_waits, take_output_wait, take_output_waits_on, why_gone
from teamgraph.messaging import envelopes, notices, results
from teamgraph.messaging.envelopes import clip
from teamgraph.protocols import requests as tracker
from teamgraph.protocols.requests import QUESTION, RUN, SHUTDOWN
from teamgraph.records import (
    ENDED,
    FAILED,
    IDLE,
    LEADER,
    ROUTER,
    RUNNING,
    STOPPED,
    TERMINATED,
    WAITING,
    Conversation,
    Request,
    StepEffect,
    StopEffect,
    TakenEffect,
)
from teamgraph.tools.errors import TOOL_FAILED


def on_taken(ledger: Ledger, effect: TakenEffect) -> None:
    """An agent's node took its dispatch's step: the dispatch is no longer in flight."""
    in_flight = dict(ledger.team.get("in_flight", {}))
    if in_flight.get(effect["agent"]) == effect["seq"]:
        del in_flight[effect["agent"]]
        ledger.team["in_flight"] = in_flight


def on_step(ledger: Ledger, effect: StepEffect) -> None:
    """One model call of an agent: count it, mark what it read, route its output."""
    name = effect["agent"]
    # NOTE: the step's text is read from the history the step wrote, not carried
    # in the effect, so a checkpoint does not store it twice.
    index = effect.get("message_index")
    text = ledger.histories[name][index].text.strip() if index is not None else ""
    record = ledger.agents[name]
    # The step saw everything delivered to the agent before it ran.
    for message_id in record.get("unread", []):
        ledger.track(message_id, status="read", read_at=ledger.now)
    record["unread"] = []
    record["steps"] += 1
    record["turn_steps"] += 1
    _count_slice(ledger, name, works=bool(effect.get("works")))
    record["tool_calls"] += effect["tool_calls"]
    record["tokens"] = record.get("tokens", 0) + effect.get("tokens", 0)
    ledger.team["run_calls"] = ledger.team.get("run_calls", 0) + 1
    error = effect.get("error")
    if error:
        end_agent(ledger, name, FAILED, reason=error)
        notify(ledger, LEADER, notices.failed(name, error=error))
        return
    if gone := why_gone(record):
        # NOTE: the step landed after its agent was stopped or ended: its open calls are closed.
        _close_unheld_calls(ledger, name, effect["deferred"], gone, outcome=results.CANCELLED)
    else:
        _after_step(ledger, name, effect, text)
    if name == LEADER:
        step_id = ledger.histories[name][index].id if index is not None else None
        _leader_output(ledger, text, ended_turn=effect["ended_turn"], step_id=step_id)
    else:
        member_output(ledger, name, text, ended_turn=effect["ended_turn"])
    if gone:
        # NOTE: the stop came while this step was in flight, so it could not close what the
        # step read (a request read only once its step lands): closed now, as the stop would.
        close_read_requests(ledger, name, text)
    if record["status"] == RUNNING and record["turn_steps"] >= ledger.policy.max_turn_steps:
        record["status"] = STOPPED
        record["last_action"] = "stopped: step budget of its turn used up"
        if name != LEADER:
            notify(ledger, LEADER, notices.step_budget(name, steps=record["turn_steps"]))


def _count_slice(ledger: Ledger, name: str, *, works: bool) -> None:
    """Where the agent is in its slice (``Policy.slice_steps``): its messages wait while not 0."""
    record = ledger.agents[name]
    calls = (record.get("slice", 0) + 1) % ledger.policy.slice_steps if works and name != LEADER else 0
    if calls:
        record["slice"] = calls
    else:
        record.pop("slice", None)


def _after_step(ledger: Ledger, name: str, effect: StepEffect, text: str) -> None:
    """The agent's status after a step: waiting for its open calls, idle, or running on."""
    record = ledger.agents[name]
    if text:
        record["last_action"] = clip(text, 80)
    else:
        record["last_action"] = f"{effect['tool_calls']} tool call(s)" if effect["tool_calls"] else "ended its turn"
    # NOTE: a deferred tool that asked for nothing (a call answered in this very
    # pass, e.g. a plan the policy lets the leader approve, is fine).
    _close_unheld_calls(ledger, name, effect["deferred"], results.CALL_NOT_COMPLETED, outcome=None)
    if record["waits"]:
        record["status"] = WAITING
    else:
        record["status"] = IDLE if effect["ended_turn"] else RUNNING


def _close_unheld_calls(ledger: Ledger, name: str, deferred: list[str], content: str, *, outcome: str | None) -> None:
    """Answer ``name``'s deferred calls that no wait holds and this pass did not answer (pairing)."""
    record = ledger.agents[name]
    for call_id in deferred:
        if call_id in record["waits"] or call_id in ledger.answered_calls:
            continue
        if outcome is None:
            # NOTE: an error result carries its code, as every tool error does (docs/protocols.md)
            result = ToolMessage(
                content=content,
                tool_call_id=call_id,
                status="error",
                additional_kwargs={results.ERROR_KEY: TOOL_FAILED},
            )
        else:
            result = ToolMessage(
                content=content, tool_call_id=call_id, additional_kwargs={results.OUTCOME_KEY: outcome}
            )
        ledger.appends[name].append(result)


def _leader_output(ledger: Ledger, text: str, *, ended_turn: bool, step_id: str | None = None) -> None:
    """The leader's turn end is its reply to the user (or its turn in a ping-pong it started).

    NOTE: the reply keeps the id of the leader's model message: LangGraph's ``messages``
    stream mode emits a message a node writes unless one with its id was streamed
    already, so the report, streamed token by token under the leader's tags, is not
    streamed a second time, untagged, as the router's write.
    """
    conversation = conversation_of(ledger, LEADER) if ended_turn else None
    if conversation is not None:
        continue_conversation(ledger, conversation, LEADER, text)
    elif ended_turn and text:
        ledger.replies.append(AIMessage(content=text, name=LEADER, id=step_id))
        ledger.team["reported"] = ledger.team.get("user_seen", 0)


def on_stop(ledger: Ledger, effect: StopEffect) -> None:
    """End another agent's turn: its calls are cancelled; it keeps its context."""
    target = effect["target"]
    record = ledger.agents[target]
    if record["status"] in ENDED:
        return
    cancel_waits(ledger, target, results.cancelled_because(f"your turn was stopped by {effect['agent']}"))
    record["status"] = STOPPED
    record["last_action"] = f"stopped by {effect['agent']}"
    record.pop("slice", None)
    # NOTE: a stop ends the turn: what it read and left unanswered is closed as at a turn end.
    close_read_requests(ledger, target, "")
    notice = notices.stopped(effect["agent"])
    if target in ledger.team.get("in_flight", {}):
        # NOTE: its step in flight did not see the stop: the notice follows that step.
        notify(ledger, target, notice, wake=False)
        return
    # NOTE: the agent's open calls were answered just above, so the notice cannot
    # come between a tool call and its result. It is delivered at once (tracked).
    message_id = f"msg_{ledger.next_id('message')}"
    ledger.track(
        message_id,
        sender=ROUTER,
        to=target,
        sent_at=ledger.now,
        status="delivered",
        delivered_at=ledger.now,
        read_at=None,
    )
    record["unread"] = [*record.get("unread", []), message_id]
    ledger.appends[target].append(envelopes.inbox_message(notice.text, kind=notice.envelope_kind))


def member_output(ledger: Ledger, name: str, text: str, *, ended_turn: bool) -> None:
    """Route a member's step output: answer who waits for it, or tell the leader."""
    shown = envelopes.without_control_words(text)
    control = bool(text) and not shown
    conversation = conversation_of(ledger, name) if ended_turn else None
    consumed = control or conversation is not None
    out_id = f"out_{ledger.next_id('out')}" if text else ""
    content = results.replied(name, out_id, shown)
    if text and not control:
        for waiter in list(ledger.agents):
            if take_output_wait(ledger, waiter, name, content, replies=False) and waiter == LEADER:
                consumed = True
    if ended_turn and text:
        for record in ledger.pending_requests():
            if record.get("route") == name and record.get("reply_via") == "output" and ledger.is_read(record):
                close_reply(ledger, record, name, text, content)
                consumed = True  # the asker has it; the leader got it or a notice
    if text and not consumed:
        post(ledger, LEADER, envelopes.output(name, out_id, shown, final=ended_turn), sender=name)
    if ended_turn:
        if conversation is not None:
            continue_conversation(ledger, conversation, name, text)
        settle_turn_end(ledger, name, text)


def close_reply(ledger: Ledger, record: Request, name: str, text: str, content: str) -> None:
    """``name``'s turn ended with ``text``: the reply a question or a run waited for."""
    if record["kind"] == RUN:
        _finish_run(ledger, record, name, text)
        return
    asker = record["from"]
    call_id = record.get("call_id")
    waiting = asker in ledger.agents and bool(call_id) and call_id in ledger.agents[asker]["waits"]
    requests.close_request(ledger, record, content, status=tracker.ANSWERED)
    if asker != LEADER:
        tell_leader_peer_traffic(ledger, f"{name} answered {asker} ({record['id']}): {clip(text)}", content)
    ping_pong = record.get("details", {}).get("ping_pong")
    skipped = envelopes.has_control_word(text, envelopes.REPLY_SKIP)
    if waiting and ping_pong and not skipped and ledger.policy.max_ping_pong > 1 and name != LEADER:
        conversations = dict(ledger.team.get("conversations", {}))
        conversations[record["id"]] = {"a": asker, "b": name, "round": 1, "next": asker}
        ledger.team["conversations"] = conversations


def _finish_run(ledger: Ledger, record: Request, name: str, text: str) -> None:
    """A background run's result: announced to the requester (unless ANNOUNCE_SKIP)."""
    asker, rid = record["from"], record["id"]
    shown = envelopes.without_control_words(text)
    requests.close_request(ledger, record, shown, status=tracker.ANSWERED)
    if not envelopes.has_control_word(text, envelopes.ANNOUNCE_SKIP):
        post(ledger, asker, envelopes.reply(name, rid, shown), sender=name)
    if asker != LEADER:
        line = f"{name} finished {rid} for {asker}: {clip(text)}"
        tell_leader_peer_traffic(ledger, line, envelopes.reply(name, rid, text))
    if record.get("details", {}).get("cleanup") == "delete":
        end_agent(ledger, name, TERMINATED, reason=f"{rid} finished (cleanup=delete)")


def conversation_of(ledger: Ledger, name: str) -> tuple[str, Conversation] | None:
    """The ping-pong exchange in which it is ``name``'s turn to reply, if any."""
    for conv_id, conv in ledger.team.get("conversations", {}).items():
        if conv["next"] == name:
            return conv_id, conv
    return None


def continue_conversation(ledger: Ledger, conversation: tuple[str, Conversation], name: str, text: str) -> None:
    """Forward ``name``'s reply in a ping-pong exchange, until REPLY_SKIP or the round limit."""
    conv_id, conv = conversation
    conversations = dict(ledger.team.get("conversations", {}))
    other = conv["b"] if name == conv["a"] else conv["a"]
    limit = ledger.policy.max_ping_pong
    if not text or envelopes.has_control_word(text, envelopes.REPLY_SKIP) or conv["round"] >= limit:
        del conversations[conv_id]
    else:
        number = conv["round"] + 1
        note = f"ping-pong round {number}/{limit}" + (
            "" if number >= limit else f" · reply {envelopes.REPLY_SKIP} to stop"
        )
        reply = envelopes.reply(name, conv_id, envelopes.without_control_words(text), round_=note)
        post(ledger, other, reply, sender=name)
        tell_leader_peer_traffic(ledger, f"{name} → {other} ({conv_id}, round {number}): {clip(text)}", text)
        conversations[conv_id] = {**conv, "round": number, "next": other}
        if number >= limit:
            del conversations[conv_id]
    ledger.team["conversations"] = conversations


def settle_turn_end(ledger: Ledger, name: str, text: str) -> None:
    """Close what waits on ``name`` once its turn ends: nothing may wait forever."""
    close_read_requests(ledger, name, text)
    take_output_waits_on(ledger, name, results.finished_silently(name))
    if not text:
        notify(ledger, LEADER, notices.no_report(name))


def close_read_requests(ledger: Ledger, name: str, text: str) -> None:
    """``name``'s turn ended (or was stopped): the requests it read and did not answer are closed."""
    final = text or "(no final message)"
    for record in ledger.pending_requests():
        if record.get("route") != name or not ledger.is_read(record):
            continue  # NOTE: a request it has not read yet gets its next turn
        if record["kind"] == SHUTDOWN:
            expire_shutdown(ledger, record, f"ended its turn without answering {record['id']}")
        elif record["kind"] == RUN:
            close_reply(ledger, record, name, "(no result)", "")
        elif record.get("reply_via") == "output":
            requests.close_request(ledger, record, results.ended_without_reply(name), status=tracker.EXPIRED)
        elif record["kind"] == QUESTION:
            content = results.ended_without_answer(name, final)
            requests.close_request(ledger, record, content, status=tracker.EXPIRED)
