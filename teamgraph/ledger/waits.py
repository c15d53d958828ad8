"""Waits: an agent's open (deferred) tool calls, answered later by the router.

A wait is closed exactly once, by a ``ToolMessage`` appended right after the
call (a tool call and its result stay adjacent in every history).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import ToolMessage

from teamgraph.ledger.book import Ledger
from teamgraph.ledger.mail import notify
from teamgraph.messaging import notices, results
from teamgraph.protocols import requests as tracker
from teamgraph.records import ENDED, LEADER, RUNNING, STOPPED, WAITING, AgentRecord, Request, Wait, WaitOutputEffect


def why_gone(record: AgentRecord) -> str | None:
    """Why a call of an agent that ended (or whose turn was stopped) is cancelled; None if it is active.

    NOTE: with steps in flight, a step can land after its agent was stopped or ended;
    what it asked for belongs to a turn that is over.
    """
    if record["status"] in ENDED:
        return results.cancelled_because(f"you are {record['status']}")
    if record["status"] == STOPPED:
        return results.cancelled_because("your turn was stopped")
    return None


def open_wait(ledger: Ledger, name: str, call_id: str, *, tool: str, on: str, request: str | None) -> Wait:
    """Record that ``name``'s call ``call_id`` waits for ``on`` (an agent or a person)."""
    # NOTE: the tick of the pass that issued the step opening the wait, not of the pass that
    # applies it: steps issued together read the same state and know nothing of each other's
    # waits, however their completions land (under "completions" one may land passes later).
    issued = ledger.agents[name].get("last_tick", -1)
    wait: Wait = {
        "tool": tool,
        "on": on,
        "request": request,
        "seq": ledger.next_id("wait"),
        "tick": issued if issued >= 0 else ledger.team.get("tick", 0),
    }
    ledger.agents[name]["waits"][call_id] = wait
    return wait


def answer_wait(ledger: Ledger, name: str, call_id: str, content: str, *, outcome: str | None = None) -> None:
    """Close an open tool call of ``name`` with ``content`` as its result.

    Args:
        ledger: The pass.
        name: Whose call.
        call_id: The call.
        content: Its result.
        outcome: ``timed_out``, ``cancelled`` or ``deadlock`` when the call did not get its answer.
    """
    record = ledger.agents.get(name)
    wait = record["waits"].pop(call_id, None) if record else None
    if record is None or wait is None:
        return
    extra = {results.OUTCOME_KEY: outcome} if outcome else {}
    ledger.appends[name].append(
        ToolMessage(content=content, tool_call_id=call_id, name=wait["tool"], additional_kwargs=extra)
    )
    ledger.answered_calls.add(call_id)
    if not record["waits"] and record["status"] == WAITING:
        record["status"] = RUNNING


def output_waits(ledger: Ledger, waiter: str, on: str, *, replies: bool = True) -> list[str]:
    """The calls of ``waiter`` that ``on``'s next output answers (sleep, ask_sub_agent).

    Args:
        ledger: The pass.
        waiter: Who waits.
        on: The agent it waits for.
        replies: Whether questions that wait for ``on``'s reply (ask_sub_agent)
            count too: a reply is the end of a turn, not a progress line.
    """
    record = ledger.agents.get(waiter)
    if record is None:
        return []
    calls = []
    for call_id, wait in record["waits"].items():
        if wait["on"] != on or wait.get("group"):
            continue
        request = ledger.request(wait["request"]) if wait["request"] else None
        if request is None:
            calls.append(call_id)
        elif (
            replies and request.get("reply_via") == "output" and tracker.is_pending(request) and ledger.is_read(request)
        ):
            calls.append(call_id)
    return calls


def take_output_wait(ledger: Ledger, waiter: str, on: str, content: str, *, replies: bool = True) -> bool:
    """Answer ``waiter``'s waits for ``on``'s next output (see ``output_waits``).

    Returns:
        True if any wait was answered.
    """
    calls = output_waits(ledger, waiter, on, replies=replies)
    for call_id in calls:
        wait = ledger.agents[waiter]["waits"][call_id]
        request = ledger.request(wait["request"]) if wait["request"] else None
        if request is not None:
            # NOTE: ask_sub_agent: the member spoke (or asked) after reading the
            # question; it is closed with what it said, so the leader is not blocked.
            ledger.save(tracker.close(request, status=tracker.ANSWERED, answer=content, closed_at=ledger.now))
        answer_wait(ledger, waiter, call_id, content)
    return bool(calls)


def take_output_waits_on(ledger: Ledger, on: str, content: str) -> None:
    """Every agent's waits for ``on``'s next output get ``content`` (``on`` ended or went silent)."""
    for waiter in list(ledger.agents):
        take_output_wait(ledger, waiter, on, content)


def cancel_waits(ledger: Ledger, name: str, content: str) -> None:
    """Close every open tool call of ``name``, cancel the requests behind them, tell their deciders."""
    record = ledger.agents[name]
    perform = dict(ledger.team.get("perform", {}))
    if perform.pop(name, None) is not None:
        # NOTE: an approved operation not performed yet is not performed once its call is cancelled.
        ledger.team["perform"] = perform
    for call_id, wait in list(record["waits"].items()):
        request = ledger.request(wait["request"]) if wait["request"] else None
        if request is not None and tracker.is_pending(request):
            ledger.save(tracker.close(request, status=tracker.CANCELLED, answer=content, closed_at=ledger.now))
            tell_decider_cancelled(ledger, request, content)
        answer_wait(ledger, name, call_id, content, outcome=results.CANCELLED)


def tell_decider_cancelled(ledger: Ledger, request: Request, why: str) -> None:
    """Whoever was to act on a request that was cancelled after it read it is told."""
    route = request.get("route")
    delivery = ledger.delivery(request.get("message") or "")
    if route in ledger.agents and delivery is not None and delivery.get("status") in ("delivered", "read"):
        notify(ledger, str(route), notices.cancelled(request["id"], asker=request["from"], why=why), wake=False)


def on_wait_output(ledger: Ledger, effect: WaitOutputEffect) -> None:
    """``sleep`` / ``wait_for_output``: the call waits for another agent's next output."""
    name, on, call_id = effect["agent"], effect["on"], effect["call_id"]
    if why_gone(ledger.agents[name]):
        return  # NOTE: a step that landed after its turn ended: turns.on_step closes its calls
    open_wait(ledger, name, call_id, tool=effect["tool"], on=on, request=None)
    target = ledger.agents.get(on)
    if target is None or target["status"] in ENDED:
        status = target["status"] if target else "unknown"
        take_output_wait(ledger, name, on, results.no_output_to_wait_for(on, status))


def wait_age(waiter: str, wait: Wait) -> tuple[Any, ...]:
    """How new a wait is, for breaking deadlocks: the newest wait is cancelled.

    NOTE: waits opened in the same router pass were opened concurrently. Among them
    a member's wait counts as newer than the leader's (a member that asks while the
    leader asks it is told to answer first), then by name, so the outcome never
    depends on which member was created first.
    """
    return (wait.get("tick", 0), waiter != LEADER, waiter, wait["seq"])
