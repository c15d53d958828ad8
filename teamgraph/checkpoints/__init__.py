"""Checkpoint storage: the SQLite saver in the team's home folder, or PostgreSQL by URL."""

from teamgraph.checkpoints.saver import DB_FILE, TeamSqliteSaver, open_sqlite_saver
from teamgraph.checkpoints.serde import TeamSerializer
from teamgraph.checkpoints.store import (
    DB_ENV,
    close_checkpointer,
    describe_db,
    is_postgres_url,
    open_checkpointer,
    thread_ids,
)

__all__ = [
    "DB_ENV",
    "DB_FILE",
    "TeamSerializer",
    "TeamSqliteSaver",
    "close_checkpointer",
    "describe_db",
    "is_postgres_url",
    "open_checkpointer",
    "open_sqlite_saver",
    "thread_ids",
]
