"""The ledger: the router's working copy of the team for one pass.

The lowest layer of the router. It reads the state once, hands out ids, keeps
every record a pass changes (agents, requests, deliveries, the team book, the
messages to append) and turns them into the pass's state updates. It decides
nothing: the layers above it (mail, waits, requests, lifecycle, turns,
liveness) do, each through a ``Ledger``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any, cast

from langchain_core.messages import AnyMessage

from teamgraph.history import HistoryAppend
from teamgraph.messaging import notices
from teamgraph.protocols import requests as tracker
from teamgraph.protocols.requests import HUMAN
from teamgraph.records import AgentRecord, Delivery, Effect, Request, TeamBook
from teamgraph.runtime import TeamRuntime
from teamgraph.state import RecordsUpdate, TeamUpdate


class Ledger:
    """One router pass's view of the team: read once, changed in place, written back as updates.

    Attributes:
        runtime: The team runtime (policy, clock, roles).
        now: The pass's time (ISO), stamped on every record it writes.
        agents: The registry, copied (waits and inboxes too) so records can change in place.
        team: The team book, copied.
        appends: Per agent, the messages the pass appends to its history.
        replies: The leader's replies to the user.
        answered_calls: Tool calls answered in this pass.
    """

    def __init__(self, runtime: TeamRuntime, state: Mapping[str, Any]) -> None:
        self.runtime = runtime
        self.policy = runtime.policy
        self.now = runtime.now()
        before: dict[str, AgentRecord] = state.get("agents", {})
        self.agents: dict[str, AgentRecord] = {
            name: {**rec, "waits": dict(rec["waits"]), "inbox": list(rec["inbox"])} for name, rec in before.items()
        }
        team: TeamBook = state.get("team", {})
        self.team: TeamBook = {
            **team,
            "counters": dict(team.get("counters", {})),
            "instances": dict(team.get("instances", {})),
        }
        self.agents_before = before
        self.histories: dict[str, list[AnyMessage]] = state.get("histories", {})
        self._requests: dict[str, Request] = state.get("requests", {})
        self.changed_requests: dict[str, Request] = {}
        self._deliveries: dict[str, Delivery] = state.get("deliveries", {})
        self.changed_deliveries: dict[str, Delivery] = {}
        # NOTE: an index of the pending request ids, so a pass never scans every
        # request the thread ever opened (that would make long runs quadratic).
        self.open_ids: dict[str, None] = dict.fromkeys(
            team["open"] if "open" in team else (rid for rid, r in self._requests.items() if tracker.is_pending(r))
        )
        self.appends: dict[str, list[AnyMessage]] = defaultdict(list)
        self.answered_calls: set[str] = set()
        self.replies: list[AnyMessage] = []
        self.user_messages: list[AnyMessage] = state.get("messages", [])
        self.outbox: list[Effect] = state.get("outbox", [])

    # -- ids and records -----------------------------------------------------------

    def next_id(self, counter: str) -> int:
        """The next number of an id family (``request``, ``message``, ``out``, ``wait``)."""
        counters = self.team["counters"]
        counters[counter] = counters.get(counter, 0) + 1
        return counters[counter]

    def request(self, request_id: str) -> Request | None:
        return self.changed_requests.get(request_id) or self._requests.get(request_id)

    def pending_requests(self) -> list[Request]:
        return [r for rid in list(self.open_ids) if (r := self.request(rid)) is not None]

    def human_pending(self) -> list[Request]:
        """Pending requests that wait for a person."""
        return [r for r in self.pending_requests() if r.get("route") == HUMAN]

    def save(self, record: Request) -> None:
        """Write a request; a request closed before its envelope was read withdraws it."""
        self.changed_requests[record["id"]] = record
        if tracker.is_pending(record):
            self.open_ids[record["id"]] = None
        else:
            self.open_ids.pop(record["id"], None)
            self._withdraw_envelope(record)

    def _withdraw_envelope(self, record: Request) -> None:
        """NOTE: otherwise the receiver would read a question it can no longer answer."""
        message_id, route = record.get("message"), record.get("route")
        receiver = self.agents.get(route) if route else None
        if not message_id or receiver is None:
            return
        inbox = receiver["inbox"]
        for i, item in enumerate(inbox):
            if item["id"] == message_id:
                notice = notices.withdrawn(
                    record["id"], asker=record["from"], status=record["status"], why=str(record["answer"])
                )
                # NOTE: a new item, never an edit: the old one is the committed state's (and
                # the registry writes a record only when it differs from the committed one).
                inbox[i] = {**item, "text": notice.text, "wake": False, "kind": notice.envelope_kind}

    # -- deliveries ----------------------------------------------------------------

    def delivery(self, message_id: str) -> Delivery | None:
        return self.changed_deliveries.get(message_id) or self._deliveries.get(message_id)

    def track(self, message_id: str, **fields: Any) -> None:
        """Create or update a message's delivery record."""
        current = self.delivery(message_id) or {"id": message_id}
        self.changed_deliveries[message_id] = cast(Delivery, {**current, **fields})

    def is_read(self, record: Request | None) -> bool:
        """Whether the agent a request is routed to has read its envelope.

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
        return delivery is not None and delivery.get("status") == "read"

    # -- the run ---------------------------------------------------------------------

    def budget_spent(self) -> bool:
        """Whether this run used up ``Policy.max_model_calls``."""
        return self.team.get("run_calls", 0) >= self.policy.max_model_calls

    def updates(self, scheduled: list[str]) -> TeamUpdate:
        """The pass's state updates: only the records it changed."""
        self.team["scheduled"] = scheduled
        # NOTE: "when_blocked" pauses only when nobody can run; "immediately" runs the
        # human gate in the same superstep as the agents, so the run pauses at once.
        immediately = self.policy.pause == "immediately"
        blocked = not scheduled and not self.team.get("in_flight")
        self.team["human"] = bool(self.human_pending()) and (immediately or blocked)
        self.team["open"] = list(self.open_ids)
        # NOTE: only changed records are written: the registry is a DeltaChannel.
        changed = {n: r for n, r in self.agents.items() if self.agents_before.get(n) != r}
        out: TeamUpdate = {"team": self.team}
        if changed:
            out["agents"] = RecordsUpdate(changed)
        if self.appends:
            out["histories"] = HistoryAppend(self.appends)
        if self.changed_requests:
            out["requests"] = RecordsUpdate(self.changed_requests)
        if self.changed_deliveries:
            out["deliveries"] = RecordsUpdate(self.changed_deliveries)
        if self.replies:
            out["messages"] = self.replies
        return out
