"""The default checkpointer: one SQLite file in the team's home folder."""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import DeltaChannelHistory, get_checkpoint_id
from langgraph.checkpoint.sqlite import SqliteSaver

DB_FILE = "teamgraph.sqlite"
BUSY_TIMEOUT_MS = 10_000
HISTORY_CACHE_SIZE = 4
"""Rebuilt delta-channel histories kept per saver (each holds every history of one checkpoint)."""

_LATEST = (
    "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
    "ORDER BY checkpoint_id DESC LIMIT 1"
)


def connect(path: str | Path) -> sqlite3.Connection:
    """Open the SQLite file in WAL mode with a busy timeout (several processes may open it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


class TeamSqliteSaver(SqliteSaver):
    """``SqliteSaver`` that keeps the delta-channel histories it rebuilt last, by checkpoint id.

    NOTE: reading a thread's state and then running it (``get_state`` then ``invoke``, what a
    resumed process does) rebuilt every agent's history twice, each time from every write
    since the last snapshot. A checkpoint never changes once written, so its rebuilt
    histories can be handed out again; the reducer never mutates them in place.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn)
        self._histories: OrderedDict[tuple[str, ...], Mapping[str, DeltaChannelHistory]] = OrderedDict()
        self._histories_lock = threading.Lock()

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        configurable = config["configurable"]
        thread_id, namespace = str(configurable["thread_id"]), configurable.get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            with self.cursor(transaction=False) as cur:
                row = cur.execute(_LATEST, (thread_id, namespace)).fetchone()
            if row is None:
                return super().get_delta_channel_history(config=config, channels=channels)
            checkpoint_id = row[0]
        key = (thread_id, namespace, checkpoint_id, *channels)
        with self._histories_lock:
            if key in self._histories:
                self._histories.move_to_end(key)
                return self._histories[key]
        pinned: RunnableConfig = {"configurable": {**configurable, "checkpoint_id": checkpoint_id}}
        histories = super().get_delta_channel_history(config=pinned, channels=channels)
        with self._histories_lock:
            self._histories[key] = histories
            while len(self._histories) > HISTORY_CACHE_SIZE:
                self._histories.popitem(last=False)
        return histories


def open_sqlite_saver(path: str | Path) -> TeamSqliteSaver:
    """The team's SqliteSaver on ``path`` (created if missing), ready to use."""
    saver = TeamSqliteSaver(connect(path))
    saver.setup()
    return saver
