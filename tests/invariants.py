"""Invariants every team thread keeps, whatever its agents did and in whatever order.

Checked after scenario runs and by the property-based fuzz (tests/test_fuzz.py).
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage


def assert_tool_calls_paired(name: str, history: list) -> None:
    """Each AIMessage's tool calls are answered, each exactly once, before any other message."""
    open_calls: set[str] = set()
    answered: set[str] = set()
    for index, message in enumerate(history):
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in open_calls, f"{name}[{index}]: result for a call that is not open"
            open_calls.discard(message.tool_call_id)
            assert message.tool_call_id not in answered, f"{name}[{index}]: call answered twice"
            answered.add(message.tool_call_id)
            continue
        assert not open_calls, f"{name}[{index}]: {type(message).__name__} before the results of {open_calls}"
        if isinstance(message, AIMessage):
            open_calls = {c["id"] for c in message.tool_calls} | {c["id"] for c in message.invalid_tool_calls}


def assert_deliveries_consistent(values: dict) -> None:
    """Every message has one delivery record and reached its receiver's history once.

    Checks the ids (``msg_1`` .. ``msg_N``, no gap, no repeat), each record's fields and
    status, that a queued message is still in its receiver's inbox (nothing is lost), and
    that the envelopes in every history are exactly the messages recorded as delivered (or
    read) to that agent. Envelope bodies must hold no blank line.
    """
    deliveries = values.get("deliveries", {})
    ids = sorted(deliveries, key=lambda i: int(i.split("_")[1]))
    assert ids == [f"msg_{n}" for n in range(1, len(ids) + 1)], f"message ids: {ids}"
    agents = values.get("agents", {})
    received: dict[str, int] = {}
    for message_id, record in deliveries.items():
        assert record["id"] == message_id
        assert {"sender", "to", "sent_at", "delivered_at", "read_at", "status"} <= set(record), record
        assert record["status"] in {"queued", "delivered", "read", "bounced"}, record
        if record["status"] == "queued":
            inbox = agents.get(record["to"], {}).get("inbox", [])
            assert any(m["id"] == message_id for m in inbox), f"{message_id} is queued but in no inbox: lost"
        if record["status"] in ("delivered", "read"):
            assert record["delivered_at"] is not None, record
            received[record["to"]] = received.get(record["to"], 0) + 1
        if record["status"] == "read":
            assert record["read_at"] is not None, record
    for name, history in values.get("histories", {}).items():
        envelopes = sum(len(str(m.content).split("\n\n")) for m in history if isinstance(m, HumanMessage))
        assert envelopes == received.get(name, 0), (
            f"{name}: {envelopes} envelope(s) in its history, {received.get(name, 0)} delivery record(s)"
        )


def assert_team_invariants(values: dict, *, paused: bool = False) -> None:
    """Pairing in every history, every message accounted for, and (unless paused) nobody waiting."""
    for name, history in values.get("histories", {}).items():
        assert_tool_calls_paired(name, history)
    assert_deliveries_consistent(values)
    if not paused:
        waiting = {n: list(r["waits"]) for n, r in values.get("agents", {}).items() if r["waits"]}
        assert not waiting, f"left waiting: {waiting}"
        pending = [rid for rid, r in values.get("requests", {}).items() if r["status"] == "pending"]
        assert not pending, f"requests left pending: {pending}"
