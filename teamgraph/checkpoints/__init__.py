"""Checkpoint storage: the SQLite saver in the team's home folder."""

from teamgraph.checkpoints.saver import DB_FILE, open_sqlite_saver

__all__ = ["DB_FILE", "open_sqlite_saver"]
