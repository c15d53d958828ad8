"""Scheduling: who steps in the next superstep."""

from __future__ import annotations

from teamgraph.ledger.book import Ledger
from teamgraph.records import LEADER, RUNNING


def schedule(ledger: Ledger) -> list[str]:
    """Issue the next step of every runnable agent that has none in flight (longest-waiting first).

    Each issued step is a dispatch, numbered, recorded in ``team["in_flight"]`` until
    its result is taken. The leader is not counted against ``Policy.max_parallel``.

    Returns:
        The agents whose step was issued by this pass.
    """
    in_flight = dict(ledger.team.get("in_flight", {}))
    busy = sum(1 for name in in_flight if name != LEADER)
    members = [
        rec
        for name, rec in ledger.agents.items()
        if rec["status"] == RUNNING and name != LEADER and name not in in_flight
    ]
    members.sort(key=lambda rec: (rec["last_tick"], rec["index"]))
    chosen = [rec["name"] for rec in members[: max(0, ledger.policy.max_parallel - busy)]]
    if ledger.agents[LEADER]["status"] == RUNNING and LEADER not in in_flight:
        chosen.insert(0, LEADER)
    # NOTE: a requester whose approved operation waits to be performed takes a step with no
    # model call (its node performs it); it is not counted against max_parallel.
    chosen += [name for name in ledger.team.get("perform", {}) if name not in in_flight and name not in chosen]
    tick = ledger.team.get("tick", 0) + 1
    ledger.team["tick"] = tick
    for name in chosen:
        ledger.agents[name]["last_tick"] = tick
        in_flight[name] = ledger.next_id("dispatch")
    ledger.team["in_flight"] = in_flight
    return chosen
