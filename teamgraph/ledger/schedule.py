"""Scheduling: who steps in the next superstep.

The collaboration spec §3.3: "when resources are contended, allocate by task priority". When more
members are runnable than ``Policy.max_parallel`` allows, they are ordered by the
priority of their task on the board (the highest of their open tasks: ``urgent`` >
``high`` > ``normal`` > ``low``; a member without one counts as ``normal``), then by
age (the longest-waiting first, then the order of creation). Priority never starves
anybody: every ``Policy.priority_aging`` passes a runnable member waits raise its rank
by one level, so a ``low`` member left behind reaches ``urgent``'s rank and, being the
longer-waiting, runs. Without contention everybody runnable steps, whatever its priority.
"""

from __future__ import annotations

from teamgraph.governance.board import OPEN_STATUSES, PRIORITIES
from teamgraph.ledger.book import Ledger
from teamgraph.records import LEADER, RUNNING, AgentRecord

DEFAULT_PRIORITY = PRIORITIES.index("normal")


def task_priority(ledger: Ledger, name: str) -> int:
    """The rank (index in ``PRIORITIES``) of ``name``'s highest-priority open task; ``normal`` without one."""
    ranks = [
        PRIORITIES.index(task.get("priority", "normal"))
        for task in ledger.team.get("board", [])
        if task.get("assignee") == name and task.get("status") in OPEN_STATUSES
    ]
    return max(ranks, default=DEFAULT_PRIORITY)


def _order(ledger: Ledger, rec: AgentRecord, tick: int) -> tuple[int, int, int]:
    """Sort key: rank aged by the passes waited (higher first), then the longest-waiting, then creation."""
    waited = max(0, tick - rec["last_tick"])
    rank = task_priority(ledger, rec["name"]) + waited // ledger.policy.priority_aging
    return (-rank, rec["last_tick"], rec["index"])


def schedule(ledger: Ledger) -> list[str]:
    """Issue the next step of every runnable agent that has none in flight (by priority, then age).

    Each issued step is a dispatch, numbered, recorded in ``team["in_flight"]`` until
    its result is taken. The leader is not counted against ``Policy.max_parallel``.

    Returns:
        The agents whose step was issued by this pass.
    """
    in_flight = dict(ledger.team.get("in_flight", {}))
    busy = sum(1 for name in in_flight if name != LEADER)
    tick = ledger.team.get("tick", 0) + 1
    members = [
        rec
        for name, rec in ledger.agents.items()
        if rec["status"] == RUNNING and name != LEADER and name not in in_flight
    ]
    members.sort(key=lambda rec: _order(ledger, rec, tick))
    chosen = [rec["name"] for rec in members[: max(0, ledger.policy.max_parallel - busy)]]
    if ledger.agents[LEADER]["status"] == RUNNING and LEADER not in in_flight:
        chosen.insert(0, LEADER)
    # NOTE: a requester whose approved operation waits to be performed takes a step with no
    # model call (its node performs it); it is not counted against max_parallel.
    chosen += [name for name in ledger.team.get("perform", {}) if name not in in_flight and name not in chosen]
    ledger.team["tick"] = tick
    for name in chosen:
        ledger.agents[name]["last_tick"] = tick
        in_flight[name] = ledger.next_id("dispatch")
    ledger.team["in_flight"] = in_flight
    return chosen
