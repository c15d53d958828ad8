"""The Team's checkpoint serializer: LangGraph's, plus histories that load undecoded.

A write to ``histories`` (a :class:`~teamgraph.history.HistoryAppend`) is stored as
one encoded batch of messages per agent, under its own type tag; loading it gives a
:class:`~teamgraph.history.History` per agent that decodes the batch when a message
of it is first read. Everything else is LangGraph's ``JsonPlusSerializer`` as is
(its msgpack format, its allowlist).

NOTE: only a saver built with this serializer can read the histories it wrote (a
plain ``SqliteSaver`` on the same file raises ``Unknown serialization type``); every
saver ``teamgraph.checkpoints`` opens uses it.
"""

from __future__ import annotations

from typing import Any

import ormsgpack
from langchain_core.messages import AnyMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from teamgraph.history import EncodedMessages, History, HistoryAppend
from teamgraph.state import RecordsUpdate

__all__ = ["HISTORY_APPEND_TYPE", "RECORDS_UPDATE_TYPE", "TeamSerializer"]

HISTORY_APPEND_TYPE = "teamgraph-history-append"
RECORDS_UPDATE_TYPE = "teamgraph-records-update"
# NOTE: a record is stored on its own only if it is plain data: anything msgpack would turn
# into something else on the way back (a datetime, a UUID, an enum, a dataclass, a str or
# dict subclass) raises here, and the write is stored as LangGraph's serializer stores it.
_PLAIN_ONLY = (
    ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_UUID
    | ormsgpack.OPT_PASSTHROUGH_ENUM
    | ormsgpack.OPT_PASSTHROUGH_DATACLASS
    | ormsgpack.OPT_PASSTHROUGH_SUBCLASS
)


class TeamSerializer(JsonPlusSerializer):
    """``JsonPlusSerializer`` whose histories writes load undecoded (see the module docstring)."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if isinstance(obj, HistoryAppend):
            # NOTE: each agent's batch is what LangGraph's serializer makes of the list.
            batches = {}
            for agent, messages in obj.items():
                batches[agent] = [len(messages), super().dumps_typed(list(messages))[1]]
            return HISTORY_APPEND_TYPE, ormsgpack.packb(batches)
        if isinstance(obj, RecordsUpdate):
            try:
                records = {key: ormsgpack.packb(record, option=_PLAIN_ONLY) for key, record in obj.items()}
                return RECORDS_UPDATE_TYPE, ormsgpack.packb(records)
            except (TypeError, ormsgpack.MsgpackEncodeError):
                return super().dumps_typed(dict(obj))
        try:
            return super().dumps_typed(obj)
        except TypeError:
            # NOTE: LangGraph's encoder does not know History, a history as this serializer
            # loads it: in a DeltaChannel snapshot of a resumed run's histories, or in values
            # read from a thread and written back (`update_state`). Stored as plain lists.
            plain = _without_histories(obj)
            if plain is obj:
                raise
            return super().dumps_typed(plain)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, payload = data
        if type_ == HISTORY_APPEND_TYPE:
            return {agent: History([batch]) for agent, batch in self.history_batches(payload).items()}
        if type_ == RECORDS_UPDATE_TYPE:
            return {key: ormsgpack.unpackb(record) for key, record in self.encoded_records(payload).items()}
        return super().loads_typed(data)

    def encoded_records(self, payload: bytes) -> dict[str, bytes]:
        """A stored ``RecordsUpdate``: each record by id, not decoded (``merge_records`` decodes)."""
        return dict(ormsgpack.unpackb(payload))

    def history_batches(self, payload: bytes) -> dict[str, EncodedMessages]:
        """A stored ``HistoryAppend``: per agent, its batch of messages, not decoded."""
        batches = ormsgpack.unpackb(payload)
        return {agent: EncodedMessages(int(count), blob, self) for agent, (count, blob) in batches.items()}

    def decode_messages(self, blob: bytes) -> list[AnyMessage]:
        """A batch of messages as :meth:`dumps_typed` encoded it (with this serializer's allowlist)."""
        return super().loads_typed(("msgpack", blob))


def _without_histories(obj: Any) -> Any:
    """``obj`` with each History in it (in dicts, lists, tuples, named tuples) as a plain list.

    Returns ``obj`` itself when it holds none.
    """
    if isinstance(obj, History):
        return list(obj)
    if isinstance(obj, dict):
        items = {key: _without_histories(value) for key, value in obj.items()}
        return items if any(items[key] is not value for key, value in obj.items()) else obj
    if isinstance(obj, (list, tuple)):
        values = [_without_histories(value) for value in obj]
        if all(new is old for new, old in zip(values, obj, strict=True)):
            return obj
        if isinstance(obj, list):
            return values
        return obj._make(values) if hasattr(obj, "_make") else tuple(values)
    return obj
