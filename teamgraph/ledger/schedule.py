"""Scheduling: who steps in the next superstep."""

from __future__ import annotations

from teamgraph.ledger.book import Ledger
from teamgraph.records import LEADER, RUNNING


def schedule(ledger: Ledger) -> list[str]:
    """Pick the runnable agents for the next superstep (longest-waiting first).

    The leader is not counted against ``Policy.max_parallel``.
    """
    members = [rec for name, rec in ledger.agents.items() if rec["status"] == RUNNING and name != LEADER]
    members.sort(key=lambda rec: (rec["last_tick"], rec["index"]))
    chosen = [rec["name"] for rec in members[: ledger.policy.max_parallel]]
    if ledger.agents[LEADER]["status"] == RUNNING:
        chosen.insert(0, LEADER)
    tick = ledger.team.get("tick", 0) + 1
    ledger.team["tick"] = tick
    for name in chosen:
        ledger.agents[name]["last_tick"] = tick
    return chosen
