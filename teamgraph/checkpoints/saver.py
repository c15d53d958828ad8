"""The default checkpointer: one SQLite file in the team's home folder."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import ormsgpack
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointTuple, DeltaChannelHistory, get_checkpoint_id
from langgraph.checkpoint.sqlite import SqliteSaver

from teamgraph.checkpoints.files import private_database
from teamgraph.checkpoints.serde import FoldedWrite, TeamSerializer, uncompressed
from teamgraph.checkpoints.threaded import AsyncInThreads
from teamgraph.compat import SQLITE_DELTA

DB_FILE = "teamgraph.sqlite"
BUSY_TIMEOUT_MS = 10_000
WAL_RETRY_SECONDS = 0.005
PAGE_SIZE = 16_384
"""The page size of a file this module creates (SQLite's default is 4 096).

NOTE: a checkpoint row is 0.5-1 KB and a write row up to a few KB: on 4 KB pages the
space left at the end of each page was 14 % of the file. It applies to new files only
(an existing file keeps its own; a WAL file cannot change it)."""
PAGE_SIZE_PRAGMA = f"PRAGMA page_size={PAGE_SIZE}"


def connect(path: str | Path) -> sqlite3.Connection:
    """Open the SQLite file in WAL mode with a busy timeout (several processes may open it)."""
    path = Path(path)
    private_database(path)  # NOTE: every message is in it: owner-only, whatever the umask
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
    conn.execute(PAGE_SIZE_PRAGMA)
    set_wal(conn)
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def wal_busy(exc: sqlite3.OperationalError) -> bool:
    """Whether switching to WAL failed only because another connection held the file.

    NOTE: SQLite answers a journal-mode change with SQLITE_BUSY at once, without the busy
    handler, while another connection creates or switches the same file (two teams
    compiled at the same moment on a fresh home).
    """
    return "locked" in str(exc) or "busy" in str(exc)


def set_wal(conn: sqlite3.Connection) -> None:
    """Switch ``conn``'s file to WAL, waiting (up to the busy timeout) for another connection's switch."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not wal_busy(exc) or time.monotonic() > deadline:
                raise
        time.sleep(WAL_RETRY_SECONDS)


def int_version(version: Any) -> Any:
    """A channel version as an int: SqliteSaver's ``"%032d.%016f"`` strings by their counter.

    NOTE: LangGraph orders a channel's versions and takes the max of a checkpoint's; a
    string's counter is one more than the max of the checkpoint it was made from, so
    successive versions of one channel have distinct, increasing counters and the ints
    keep every comparison LangGraph makes. Ints take 1-3 bytes in a checkpoint, a string 53.
    """
    return int(version.split(".", 1)[0]) if isinstance(version, str) else version


def with_int_versions(checkpoint: Checkpoint) -> Checkpoint:
    """``checkpoint`` with every channel version an int (a checkpoint of an older release
    holds strings); the one given when it has none to change."""
    versions = checkpoint.get("channel_versions", {})
    seen = checkpoint.get("versions_seen", {})
    if not any(isinstance(v, str) for v in versions.values()) and not any(
        isinstance(v, str) for node in seen.values() for v in node.values()
    ):
        return checkpoint
    return cast(
        Checkpoint,
        {
            **checkpoint,
            "channel_versions": {ch: int_version(v) for ch, v in versions.items()},
            "versions_seen": {n: {ch: int_version(v) for ch, v in node.items()} for n, node in seen.items()},
        },
    )


class IntVersions:
    """A saver whose channel versions are ints (LangGraph's default), read from any release.

    NOTE: SqliteSaver's versions are 51-character strings: a checkpoint holds one per
    channel and per node that saw it, about 600 bytes of each 1 300. A thread written
    by an older release is read with its versions as ints (``with_int_versions``), so one
    thread never mixes strings and ints in memory: LangGraph compares and takes the max
    of them. Mixed in before the saver (``TeamSqliteSaver``, ``TeamAsyncSqliteSaver``).
    """

    def get_next_version(self, current: Any, channel: None) -> Any:
        if isinstance(current, str):  # NOTE: a checkpoint not read through this saver: stay its kind
            return super().get_next_version(current, channel)  # type: ignore[misc]
        return (current or 0) + 1

    @staticmethod
    def int_tuple(found: CheckpointTuple) -> CheckpointTuple:
        return found._replace(checkpoint=with_int_versions(found.checkpoint))


_CHECKPOINT_SQL = (
    "SELECT type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
)
_WRITES_SQL = (
    "SELECT checkpoint_id, channel, task_id, idx, type, value, {task_path} FROM writes "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND ({bounds})"
)
_CHANNEL_BOUND = "(channel = ? AND checkpoint_id >= ?)"


_VALUES_KEY = ormsgpack.packb("channel_values")
_VERSIONS_KEY = ormsgpack.packb("channel_versions")


class _WalkSerde:
    """The saver's serializer as the ancestor walk uses it: a checkpoint whose channel values
    hold none of the walked channels reads as having none, without being decoded.

    NOTE: the walk looks in each ancestor's channel values for the walked channels only (a
    DeltaChannel's snapshot, or the plain value a checkpoint holds from before the channel
    became a DeltaChannel), and at 5 000 messages decoding 2 500 checkpoints for that was a
    quarter of a load. In LangGraph's msgpack a checkpoint's ``channel_values`` map comes
    before its ``channel_versions``: bytes with none of the channels' keys between the two
    hold no value of them. Bytes laid out otherwise, or a key that is really other data,
    only mean the checkpoint is decoded, as before.
    """

    def __init__(self, serde: Any, channels: Sequence[str]) -> None:
        self.serde = serde
        self._keys = re.compile(b"|".join(re.escape(ormsgpack.packb(ch)) for ch in channels))

    def _may_hold_channels(self, blob: bytes) -> bool:
        start, end = blob.find(_VALUES_KEY), blob.rfind(_VERSIONS_KEY)
        return start < 0 or end < start or self._keys.search(blob, start, end) is not None

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_tag, blob = data = uncompressed(data)
        if type_tag == "msgpack" and not self._may_hold_channels(blob):
            return {}
        return self.serde.loads_typed(data)


class _Walk:
    """SqliteSaver's walk from a checkpoint up its ancestors, to each channel's snapshot."""

    def __init__(self, channels: list[str]) -> None:
        self.channels = channels
        self.chains: dict[str, list[str]] = {ch: [] for ch in channels}
        self.seeds: dict[str, Any] = {}
        self.seeded: set[str] = set()
        # NOTE: the checkpoint each snapshot came from, to read and decode it afresh for a reader.
        self.seed_ids: dict[str, str] = {}
        self._state: dict[str, Any] = {}

    @staticmethod
    def params(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> tuple[str, ...]:
        return (thread_id, checkpoint_ns, checkpoint_id, thread_id, checkpoint_ns)

    def step(self, cid: str, type_tag: str, blob: bytes, *, target_id: str, serde: Any) -> bool:
        """Take one ancestor (newest first); True once every channel has its snapshot or the chain loops."""
        before = len(self.seeded)
        done = SQLITE_DELTA.step_walk_with_row(
            cid=cid,
            type_tag=type_tag,
            blob=blob,
            target_id=target_id,
            serde=serde,
            chain_by_ch=self.chains,
            seed_val_by_ch=self.seeds,
            walk_state=self._state,
            seeded=self.seeded,
            channels=self.channels,
        )
        if len(self.seeded) != before:
            self.seed_ids.update({ch: cid for ch in self.seeded if ch not in self.seed_ids})
        return bool(done)


@dataclass(frozen=True)
class _Rows:
    """A channel's stored writes on a chain, oldest first: columns, not a tuple per row."""

    task_ids: list[str]
    types: list[str]
    blobs: list[bytes]


@dataclass(frozen=True)
class _Load:
    """What one load read: per channel, its snapshot's stored checkpoint and its chain's writes, folded."""

    key: tuple[Any, ...]
    seed_ids: dict[str, str]
    writes: dict[str, list[FoldedWrite]]


class TeamSqliteSaver(AsyncInThreads, IntVersions, SqliteSaver):
    """``SqliteSaver`` with int channel versions (``IntVersions``) that reads a thread's
    DeltaChannel writes in one scan, and once; ``ainvoke`` runs on it too (``AsyncInThreads``).

    NOTE: LangGraph's saver asks for each channel's writes with an ``IN`` list of every
    checkpoint id in the chain (5 channels x 2 500 ids at 5 000 messages: 70-80 ms
    per load). One scan of the thread's writes for those channels, from each one's
    oldest chain checkpoint on, kept when their checkpoint is in the chain, reads the
    same rows in 30 ms. A forked thread reads its other branches' writes after that
    point too, and drops them. The rows are then sorted and
    decoded without the per-checkpoint lists LangGraph's builder makes: at 5 000
    messages a load allocates tens of thousands of objects fewer, and the garbage
    collector's full passes (80-100 ms each here) come less often.

    The writes of the last load are kept, folded (``TeamSerializer.folded``), until the
    next checkpoint is written: a checkpoint's ancestors and their writes never change,
    so reading the same checkpoint again (``get_state`` and then the run, ``team.history``
    for each agent) makes its objects from the kept writes without reading the file or
    folding again. Only stored bytes are kept, never a decoded value, so no reader sees
    another's objects.
    """

    _last: _Load | None = None

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        if not channels or SQLITE_DELTA is None:
            return super().get_delta_channel_history(config=config, channels=channels)
        channels = list(channels)
        thread_id = str(config["configurable"]["thread_id"])
        checkpoint_ns = config["configurable"].get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            target = self.get_tuple(config)
            if target is None:
                return {ch: {"writes": []} for ch in channels}
            checkpoint_id = target.config["configurable"]["checkpoint_id"]
        key = (thread_id, checkpoint_ns, checkpoint_id, tuple(channels))
        load, seeds = self._last, None
        if load is None or load.key != key:
            load, seeds = self._read(key)
            self._last = load
        history: dict[str, DeltaChannelHistory] = {}
        for ch in channels:
            history[ch] = {"writes": self._unfolded(ch, load.writes.get(ch, []))}
        for ch, seed in (seeds if seeds is not None else self._seeds(load)).items():
            history[ch]["seed"] = seed
        return history

    def _seeds(self, load: _Load) -> dict[str, Any]:
        """Each snapshot a kept load found, read again and decoded afresh.

        NOTE: only the checkpoint ids are kept: a snapshot holds every history (10 MB at
        7 000 messages), and a process that only reads would hold it until it exits.
        """
        thread_id, checkpoint_ns = load.key[0], load.key[1]
        decoded: dict[str, Any] = {}
        with self.cursor(transaction=False) as cur:
            for cid in set(load.seed_ids.values()):
                cur.execute(_CHECKPOINT_SQL, (thread_id, checkpoint_ns, cid))
                type_tag, blob = cur.fetchone()
                decoded[cid] = self.serde.loads_typed((type_tag, blob))["channel_values"]
        return {ch: decoded[cid][ch] for ch, cid in load.seed_ids.items()}

    def _read(self, key: tuple[Any, ...]) -> tuple[_Load, dict[str, Any]]:
        thread_id, checkpoint_ns, checkpoint_id, channels = key
        walk, serde = _Walk(list(channels)), _WalkSerde(self.serde, channels)
        with self.cursor(transaction=False) as cur:
            cur.execute(SQLITE_DELTA.DELTA_STAGE1_SQL, walk.params(thread_id, checkpoint_ns, checkpoint_id))
            for cid, type_tag, blob in cur:
                if walk.step(cid, type_tag, blob, target_id=checkpoint_id, serde=serde):
                    break
            rows = self._chain_writes(cur, thread_id, checkpoint_ns, walk)
        seed_ids = {ch: walk.seed_ids[ch] for ch in walk.seeded}
        writes = {ch: self._folded(r) for ch, r in rows.items()}
        return _Load(key=key, seed_ids=seed_ids, writes=writes), {ch: walk.seeds[ch] for ch in walk.seeded}

    def _chain_writes(self, cur: sqlite3.Cursor, thread_id: str, ns: str, walk: _Walk) -> dict[str, _Rows]:
        """Each channel's writes on its chain, in the order LangGraph's saver returns them."""
        # NOTE: per channel, each chain checkpoint's position, oldest first.
        positions = {ch: {cid: i for i, cid in enumerate(reversed(chain))} for ch, chain in walk.chains.items()}
        columns: dict[str, tuple[list[Any], ...]] = {ch: ([], [], [], [], [], []) for ch, c in walk.chains.items() if c}
        if not columns:
            return {}
        task_path = "task_path" if self._has_task_path else "''"
        sql = _WRITES_SQL.format(task_path=task_path, bounds=" OR ".join([_CHANNEL_BOUND] * len(columns)))
        # NOTE: a channel's rows from its chain's smallest id on: every chain id is at least that,
        # so nothing needed is left out, and the rows before its snapshot are not read.
        bounds = [item for ch in columns for item in (ch, min(walk.chains[ch]))]
        for cid, ch, task_id, idx, type_tag, value, path in cur.execute(sql, (thread_id, ns, *bounds)):
            at = positions[ch].get(cid)
            if at is not None:
                for column, item in zip(columns[ch], (at, path, task_id, idx, type_tag, value), strict=True):
                    column.append(item)
        return {ch: _in_order(*cols) for ch, cols in columns.items()}

    def _folded(self, rows: _Rows) -> list[FoldedWrite]:
        if isinstance(self.serde, TeamSerializer):
            return self.serde.folded(rows.task_ids, rows.types, rows.blobs)
        return [FoldedWrite(*row) for row in zip(rows.task_ids, rows.types, rows.blobs, strict=True)]

    def _unfolded(self, channel: str, writes: list[FoldedWrite]) -> list[Any]:
        if isinstance(self.serde, TeamSerializer):
            return self.serde.unfolded(channel, writes)
        return [(w.task_id, channel, self.serde.loads_typed((w.kind, w.value))) for w in writes]

    def put(self, *args: Any, **kwargs: Any) -> RunnableConfig:
        self._last = None  # NOTE: the kept rows are let go once the thread moves on
        return super().put(*args, **kwargs)

    def delete_thread(self, thread_id: str) -> None:
        self._last = None
        super().delete_thread(thread_id)

    # NOTE: last in the class: a method named ``list`` shadows the builtin in the annotations after it.
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = super().get_tuple(config)
        return None if found is None else self.int_tuple(found)

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        return map(self.int_tuple, super().list(config, **kwargs))


def _in_order(
    at: list[int], paths: list[str], task_ids: list[str], idxs: list[int], types: list[str], blobs: list[bytes]
) -> _Rows:
    """The rows oldest checkpoint first; in a checkpoint, the order LangGraph applied them
    (``writes_sort_key``: task path, task id, index)."""

    def key(i: int) -> tuple[int, str, str, int]:
        return at[i], paths[i], task_ids[i], idxs[i]

    # NOTE: the scan's order (by checkpoint id, task id, index) nearly always is that order
    # already: no key per row is kept then (fewer objects for the garbage collector).
    if all(key(i) <= key(i + 1) for i in range(len(at) - 1)):
        return _Rows(task_ids, types, blobs)
    order = sorted(range(len(at)), key=key)
    return _Rows([task_ids[i] for i in order], [types[i] for i in order], [blobs[i] for i in order])


def open_sqlite_saver(path: str | Path) -> SqliteSaver:
    """A SqliteSaver on ``path`` (created if missing), ready to use: the Team's serializer
    (histories loaded undecoded, ``teamgraph/checkpoints/serde.py``) and one scan per load."""
    saver = TeamSqliteSaver(connect(path), serde=TeamSerializer())
    saver.setup()
    return saver
