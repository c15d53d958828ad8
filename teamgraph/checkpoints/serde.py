"""The Team's checkpoint serializer: LangGraph's, plus histories that load undecoded.

A write to ``histories`` (a :class:`~teamgraph.history.HistoryAppend`) is stored as
one encoded batch of messages per agent, under its own type tag; loading it gives a
:class:`~teamgraph.history.History` per agent that decodes the batch when a message
of it is first read. A DeltaChannel snapshot of the histories (every
``HISTORY_SNAPSHOT_FREQUENCY`` updates) is stored as the same batches, so a load that
starts from a snapshot decodes nothing either. A changed record is stored on its own
(a :class:`~teamgraph.state.RecordsUpdate`). Everything else is LangGraph's
``JsonPlusSerializer`` as is (its msgpack format, its allowlist).

Every stored value up to 64 KB, and every DeltaChannel snapshot, is then compressed with
Zstandard when that makes it smaller, under its type tag plus ``:zstd``: a model's text
and the keys every message and record repeats keep about 0.6 of their bytes, and a
snapshot of the histories, whose agents share messages, a fourteenth to a fifth. Values
stored uncompressed, by earlier versions, load as they are.

NOTE: only a saver built with this serializer can read what it wrote (a plain
``SqliteSaver`` on the same file raises ``Unknown serialization type``); every saver
``teamgraph.checkpoints`` opens uses it, and a user's ``EncryptedSerializer`` may wrap it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import ormsgpack
import zstandard
from langchain_core.messages import AnyMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from teamgraph.compat import DELTA_SNAPSHOT
from teamgraph.history import EncodedMessages, Histories, History, HistoryAppend
from teamgraph.state import EncodedRecord, RecordsUpdate

__all__ = [
    "CHECKPOINT_TYPE",
    "COMPRESSED",
    "HISTORY_APPEND_TYPE",
    "HISTORY_SNAPSHOT_TYPE",
    "RECORDS_UPDATE_TYPE",
    "TeamSerializer",
    "uncompressed",
]

HISTORY_APPEND_TYPE = "teamgraph-history-append"
RECORDS_UPDATE_TYPE = "teamgraph-records-update"
HISTORY_SNAPSHOT_TYPE = "teamgraph-history-snapshot"  # NOTE: a snapshot alone (PostgresSaver's blobs)
CHECKPOINT_TYPE = "teamgraph-checkpoint"  # NOTE: a checkpoint holding one (SqliteSaver's checkpoint rows)
COMPRESSED = ":zstd"  # NOTE: not "+": EncryptedSerializer takes what follows the first "+" as its cipher
_LEVEL = 3  # NOTE: Zstandard's default; level 1 kept a 3 MB snapshot at twice the bytes, in the same time
_COMPRESS_FROM = 32  # NOTE: bytes; shorter values (None, a version, a branch marker) gain nothing
# NOTE: a larger value is compressed only if it holds a DeltaChannel snapshot, which is
# written once in thousands of steps. Any other is a channel LangGraph stores whole at every
# step (a user graph's plain message list on the Team's saver), and compressing it each time
# cost more than the step: a prebuilt ReAct agent at R = 100 took 12.2 ms of CPU a call
# instead of 7.7-8.2 (zlib; bench/NOTES.md).
_COMPRESS_UP_TO = 64 * 1024
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


@dataclasses.dataclass(frozen=True)
class FoldedWrite:
    """Stored writes of a channel, folded but not decoded (see :meth:`TeamSerializer.folded`).

    Attributes:
        task_id: The task of the run's last write.
        kind: The writes' type tag.
        value: Per agent, its batches as ``(count, bytes)`` (histories); per id, the last
            record's bytes (records); else the one write's stored bytes.
    """

    task_id: str
    kind: str
    value: Any


class TeamSerializer(JsonPlusSerializer):
    """``JsonPlusSerializer`` whose histories writes load undecoded (see the module docstring)."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        type_, data = self._dumps(obj)
        if _COMPRESS_FROM <= len(data) and (len(data) <= _COMPRESS_UP_TO or _holds_snapshot(obj)):
            packed = _codec.compressor.compress(data)
            if len(packed) < len(data):
                return type_ + COMPRESSED, packed
        return type_, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self._loads(uncompressed(data))

    def _dumps(self, obj: Any) -> tuple[str, bytes]:
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
        if _is_history_snapshot(obj):
            return HISTORY_SNAPSHOT_TYPE, ormsgpack.packb(self._snapshot_batches(obj.value))
        snapshots = _history_snapshots(obj)
        if snapshots:
            rest = {**obj, "channel_values": {k: v for k, v in obj["channel_values"].items() if k not in snapshots}}
            stored = {channel: self._snapshot_batches(snapshot.value) for channel, snapshot in snapshots.items()}
            return CHECKPOINT_TYPE, ormsgpack.packb([super().dumps_typed(rest)[1], stored])
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

    def _loads(self, data: tuple[str, bytes]) -> Any:
        type_, payload = data
        if type_ == HISTORY_APPEND_TYPE:
            return {agent: History([batch]) for agent, batch in self.history_batches(payload).items()}
        if type_ == RECORDS_UPDATE_TYPE:
            return {key: record.decode() for key, record in self.encoded_records(payload).items()}
        if type_ == HISTORY_SNAPSHOT_TYPE:
            return DELTA_SNAPSHOT(self._histories(ormsgpack.unpackb(payload)))
        if type_ == CHECKPOINT_TYPE:
            rest, stored = ormsgpack.unpackb(payload)
            checkpoint = super().loads_typed(("msgpack", rest))
            for channel, batches in stored.items():
                checkpoint["channel_values"][channel] = DELTA_SNAPSHOT(self._histories(batches))
            return checkpoint
        return super().loads_typed(data)

    def _snapshot_batches(self, histories: dict[str, Any]) -> dict[str, list[list[Any]]]:
        """Each agent's history as stored batches: undecoded ones as they are, the rest encoded anew."""
        stored: dict[str, list[list[Any]]] = {}
        for agent, history in histories.items():
            batches: list[list[Any]] = []
            fresh: list[AnyMessage] = []
            for part in history.parts() if isinstance(history, History) else [list(history)]:
                data = part.encoded if isinstance(part, EncodedMessages) else None
                if data is None:
                    fresh.extend(part.messages() if isinstance(part, EncodedMessages) else part)
                    continue
                if fresh:
                    batches.append([len(fresh), super().dumps_typed(fresh)[1]])
                    fresh = []
                batches.append([part.count, data])
            if fresh:
                batches.append([len(fresh), super().dumps_typed(fresh)[1]])
            stored[agent] = batches
        return stored

    def _histories(self, stored: dict[str, list[list[Any]]]) -> Histories:
        return Histories(
            {
                agent: History([EncodedMessages(int(count), blob, self) for count, blob in batches])
                for agent, batches in stored.items()
            }
        )

    def folded(self, task_ids: list[str], types: list[str], blobs: list[bytes]) -> list[FoldedWrite]:
        """A channel's stored writes with each run of histories or records writes folded into one.

        NOTE: a run of histories writes becomes one write of every agent's batches (appends
        concatenate), and a run of records writes one write of the last record of each id,
        still encoded (upserts: ``merge_records`` decodes the ones that stay). The channels'
        reducers fold those as they fold the writes one by one; a load then makes one object
        per batch or record, not a write, a dict and a History per superstep. What is folded
        is still bytes, so a saver may keep it and hand every reader its own objects.
        """
        stored = [uncompressed(pair) for pair in zip(types, blobs, strict=True)]
        types, blobs = [kind for kind, _ in stored], [blob for _, blob in stored]
        out: list[FoldedWrite] = []
        for kind, start, end in _runs(types):
            if kind == HISTORY_APPEND_TYPE:
                batches: dict[str, list[tuple[int, bytes]]] = {}
                for k in range(start, end):
                    for agent, (count, blob) in ormsgpack.unpackb(blobs[k]).items():
                        batches.setdefault(agent, []).append((int(count), blob))
                out.append(FoldedWrite(task_ids[end - 1], kind, batches))
            elif kind == RECORDS_UPDATE_TYPE:
                records: dict[str, bytes] = {}
                for k in range(start, end):
                    records.update(ormsgpack.unpackb(blobs[k]))
                out.append(FoldedWrite(task_ids[end - 1], kind, records))
            else:
                out.extend(FoldedWrite(task_ids[k], kind, blobs[k]) for k in range(start, end))
        return out

    def unfolded(self, channel: str, folded: list[FoldedWrite]) -> list[Any]:
        """``folded`` as a DeltaChannel replays writes: ``(task_id, channel, value)``, new objects."""
        out: list[Any] = []
        for write in folded:
            if write.kind == HISTORY_APPEND_TYPE:
                value: Any = {
                    agent: History([EncodedMessages(count, blob, self) for count, blob in batches])
                    for agent, batches in write.value.items()
                }
            elif write.kind == RECORDS_UPDATE_TYPE:
                value = {key: EncodedRecord(data) for key, data in write.value.items()}
            else:
                value = self.loads_typed((write.kind, write.value))
            out.append((write.task_id, channel, value))
        return out

    def encoded_records(self, payload: bytes) -> dict[str, EncodedRecord]:
        """A stored ``RecordsUpdate``: each record by id, not decoded (``merge_records`` decodes)."""
        return {key: EncodedRecord(data) for key, data in ormsgpack.unpackb(payload).items()}

    def history_batches(self, payload: bytes) -> dict[str, EncodedMessages]:
        """A stored ``HistoryAppend``: per agent, its batch of messages, not decoded."""
        batches = ormsgpack.unpackb(payload)
        return {agent: EncodedMessages(int(count), blob, self) for agent, (count, blob) in batches.items()}

    def decode_messages(self, blob: bytes) -> list[AnyMessage]:
        """A batch of messages as :meth:`dumps_typed` encoded it (with this serializer's allowlist)."""
        return super().loads_typed(("msgpack", blob))


def uncompressed(data: tuple[str, bytes]) -> tuple[str, bytes]:
    """A stored ``(type, bytes)`` as it was before :meth:`TeamSerializer.dumps_typed` compressed it."""
    type_, payload = data
    if type_.endswith(COMPRESSED):
        return type_[: -len(COMPRESSED)], _codec.decompressor.decompress(payload)
    return type_, payload


class _Codec(threading.local):
    """A thread's Zstandard contexts: one is not safe to share, and making one per value cost
    four times the compression of a 700-byte write."""

    def __init__(self) -> None:
        self.compressor = zstandard.ZstdCompressor(level=_LEVEL)
        self.decompressor = zstandard.ZstdDecompressor()


_codec = _Codec()


def _runs(types: list[str]) -> Iterator[tuple[str, int, int]]:
    """``(type, start, end)`` of each run of equal types (indexes, not a tuple per row)."""
    start = 0
    for end in range(1, len(types) + 1):
        if end == len(types) or types[end] != types[start]:
            yield types[start], start, end
            start = end


def _is_history_snapshot(obj: Any) -> bool:
    """A DeltaChannel snapshot of the team's histories (a :class:`Histories`, told by its type)."""
    return DELTA_SNAPSHOT is not None and isinstance(obj, DELTA_SNAPSHOT) and isinstance(obj.value, Histories)


def _holds_snapshot(obj: Any) -> bool:
    """A DeltaChannel snapshot, or a checkpoint whose channel values hold one."""
    if DELTA_SNAPSHOT is None:
        return False
    values = _checkpoint_values(obj)
    if values is not None:
        return any(isinstance(value, DELTA_SNAPSHOT) for value in values.values())
    return isinstance(obj, DELTA_SNAPSHOT)


def _history_snapshots(obj: Any) -> dict[str, Any]:
    """The snapshots of histories in a checkpoint's channel values, by channel."""
    values = _checkpoint_values(obj) or {}
    return {channel: value for channel, value in values.items() if _is_history_snapshot(value)}


def _checkpoint_values(obj: Any) -> dict[str, Any] | None:
    """The channel values of ``obj`` if it is a checkpoint, else None."""
    values = obj.get("channel_values") if isinstance(obj, dict) and "channel_versions" in obj else None
    return values if isinstance(values, dict) else None


def _without_histories(obj: Any) -> Any:
    """``obj`` with each History in it (in dicts, lists, tuples, named tuples, dataclasses such
    as LangGraph's ``Overwrite``) as a plain list. Returns ``obj`` itself when it holds none.
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
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changed = {
            f.name: new
            for f in dataclasses.fields(obj)
            if (new := _without_histories(old := getattr(obj, f.name))) is not old
        }
        return dataclasses.replace(obj, **changed) if changed else obj
    return obj
