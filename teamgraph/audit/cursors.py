"""Where the collaboration log got to, per checkpoint: each branch of a thread is logged from its fork point.

The log follows the committed checkpoints: the router pass logs the one it reads (after
the agents' nodes) and, first, the one those nodes read (after the pass before: they
note it, ``writer.note_read``); the human gate logs the one it reads, ``flush_log`` a
run's last. Every state logged is recorded in the log's index (``logged``) with the
cursor after its lines, under its checkpoint's id and its *base*, the checkpoint logged
before it on its path:

- the one the agents' nodes read, when the state holds their steps (their ``taken``
  effects name it: ``read``);
- else the one the last router pass read, which that pass wrote in the team book
  (``LOG_BASE``, 40 bytes a checkpoint): the pass's own output, and what the gate wrote.

A state is logged from the cursor of its nearest logged ancestor:

- the state itself, when it was logged already (a pass retried after a crash, a gate resumed);
- its base, when nothing else of its segment (the checkpoints logged from that base) was
  logged: every checkpoint of a run (``before`` when the base is the agents' and was not
  logged: a process stopped before the pass after them);
- otherwise the nearest logged checkpoint up its parents (the checkpointer's links, at
  most ``MAX_WALK``): after the gate, or a fork of a checkpoint another branch went on from.

A state the saver does not have yet (a run with durability "async" or "exit") cannot be
walked from: it is the newest of its run, logged from the thread's latest cursor when
that is of its segment. A state with no checkpoint id (no LangGraph task, no snapshot
config), a team book written before ``LOG_BASE`` or an index older than this table is
logged from the thread's latest cursor, as every state was before (review 18).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.runnables import RunnableConfig

from teamgraph.compat import CONFIG_KEY_CHECKPOINTER, checkpoint_read, graph_namespace
from teamgraph.messaging.effects import TAKEN

LOG_BASE: Final = "log_base"
"""Team-book key: the id of the checkpoint the last router pass read (and logged)."""
MAX_WALK = 64
"""Parents looked at, at most, for a state's nearest logged ancestor."""
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS logged (thread TEXT NOT NULL, checkpoint TEXT NOT NULL, base TEXT,"
    " cursor TEXT NOT NULL, PRIMARY KEY (thread, checkpoint))",
    "CREATE INDEX IF NOT EXISTS logged_base ON logged (thread, base)",
)
_CURSOR_OF = "SELECT cursor FROM logged WHERE thread = ? AND checkpoint = ?"


@dataclass(frozen=True)
class LoggedAt:
    """Which checkpoint a state is, the base its team book names, and how to find its parents.

    Attributes:
        checkpoint: The id of the state's checkpoint (None: unknown).
        base: The checkpoint logged before it on its path (None: none yet): see ``base_of``.
        parent_of: A checkpoint id -> its parent's id (None for the first checkpoint; raises
            ``LookupError`` for one the saver does not have). None: no checkpointer to ask.
        legacy: The team book was written by a router pass that named no base (before ``LOG_BASE``).
        before: The checkpoint the last pass read, when ``base`` is the one the agents' nodes
            read: the state is logged on from it when that one was not logged (the process
            stopped before the pass after the agents' nodes logged what they read).
    """

    checkpoint: str | None
    base: str | None
    parent_of: Callable[[str], str | None] | None = None
    legacy: bool = False
    before: str | None = None


def logged_at(config: RunnableConfig, state: Mapping[str, Any], checkpointer: Any = None) -> LoggedAt:
    """Where ``state`` sits in its thread, from the config of the task (or snapshot) that read it.

    Args:
        config: A LangGraph task's config, or a ``StateSnapshot.config``.
        state: The state's values (its team book names the base).
        checkpointer: The thread's checkpointer; the task's own when None.
    """
    configurable = config.get("configurable") or {}
    saver: Any = checkpointer if checkpointer is not None else configurable.get(CONFIG_KEY_CHECKPOINTER)
    thread_id, ns = configurable.get("thread_id"), graph_namespace(config)

    def parent_of(checkpoint: str) -> str | None:
        address = {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint}
        found = saver.get_tuple({"configurable": address})
        if found is None:
            raise LookupError(checkpoint)  # NOTE: not saved yet (durability "async" or "exit")
        parent = found.parent_config
        return (parent.get("configurable") or {}).get("checkpoint_id") if parent else None

    team = state.get("team") or {}
    base, passed = base_of(state), team.get(LOG_BASE)
    return LoggedAt(
        checkpoint=checkpoint_read(config),
        base=base,
        parent_of=parent_of if saver and thread_id is not None else None,
        legacy=bool(team) and LOG_BASE not in team,
        before=None if passed == base else passed,
    )


def base_of(state: Mapping[str, Any]) -> str | None:
    """The checkpoint logged before ``state`` on its path: its agents' nodes read it, else the last pass did."""
    for effect in reversed(state.get("outbox") or ()):
        if effect.get("kind") == TAKEN and effect.get("read"):
            return str(effect["read"])
    base = (state.get("team") or {}).get(LOG_BASE)
    return None if base is None else str(base)


def start_cursor(db: sqlite3.Connection, thread: str, at: LoggedAt, latest: str | None) -> str | None:
    """The cursor (JSON) to log the state at ``at`` from; None for a new one.

    Args:
        db: The log's index, in the writer's transaction.
        thread: The thread's key in the index.
        at: Where the state sits.
        latest: The thread's latest cursor (JSON), what every state was logged from before.
    """
    if at.checkpoint is None or at.legacy:
        return latest
    # NOTE: one statement on the normal path (a pass after a pass), each part one index lookup.
    own, base, others = db.execute(
        f"SELECT ({_CURSOR_OF}), ({_CURSOR_OF}),"
        " EXISTS (SELECT 1 FROM logged WHERE thread = ? AND base IS ? AND checkpoint != ?)",
        (thread, at.checkpoint, thread, at.base, thread, at.base, at.checkpoint),
    ).fetchone()
    if own is not None:
        return str(own)
    if others:
        answered, ancestor = _nearest_logged(db, thread, at)
        if ancestor is not None:
            return ancestor
        if not answered and _holds(db, thread, at.base, latest):
            # NOTE: the saver does not have the state's checkpoint yet: it is the newest of a
            # run that is not saving each step, after the gate or flush_log logged its segment.
            return latest
    if at.base is None:
        # NOTE: the thread's first segment, in a lineage this index never logged; an index
        # from before this table has no row of the thread: as before.
        return None if _has_rows(db, thread) else latest
    if base is None and at.before is not None:
        # NOTE: what the agents' nodes read was not logged (the process stopped before the
        # pass after them logged it): the state is logged on from the pass before them.
        base = _cursor_of(db, thread, at.before)
    return str(base) if base is not None else latest


def _cursor_of(db: sqlite3.Connection, thread: str, checkpoint: str) -> str | None:
    """The cursor the state of ``checkpoint`` was logged up to, if it was."""
    row = db.execute(_CURSOR_OF, (thread, checkpoint)).fetchone()
    return None if row is None else str(row[0])


def _has_rows(db: sqlite3.Connection, thread: str) -> bool:
    """Whether the index logged any state of the thread by checkpoint."""
    return bool(db.execute("SELECT EXISTS (SELECT 1 FROM logged WHERE thread = ?)", (thread,)).fetchone()[0])


def _holds(db: sqlite3.Connection, thread: str, base: str | None, latest: str | None) -> bool:
    """Whether the thread's latest cursor is that of a state logged in the segment after ``base``."""
    query = "SELECT EXISTS (SELECT 1 FROM logged WHERE thread = ? AND base IS ? AND cursor = ?)"
    return latest is not None and bool(db.execute(query, (thread, base, latest)).fetchone()[0])


def _nearest_logged(db: sqlite3.Connection, thread: str, at: LoggedAt) -> tuple[bool, str | None]:
    """The cursor of the nearest logged checkpoint up ``at``'s parents.

    Returns:
        (True, cursor); (True, None) when no checkpoint after the base is logged; (False,
        None) when the saver could not say (a checkpoint it does not have, an error).
    """
    if at.parent_of is None or at.checkpoint is None:
        return False, None
    checkpoint: str | None = at.checkpoint
    for _ in range(MAX_WALK):
        try:
            checkpoint = at.parent_of(checkpoint)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - a saver that cannot answer here (not saved yet, or from this thread)
            return False, None
        if checkpoint is None:
            return True, None
        if (cursor := _cursor_of(db, thread, checkpoint)) is not None:
            return True, cursor
        if checkpoint == at.base:
            return True, None
    return False, None


def record(db: sqlite3.Connection, thread: str, at: LoggedAt, cursor: str) -> None:
    """Record that the state at ``at`` is logged up to ``cursor`` (JSON)."""
    if at.checkpoint is not None:
        db.execute("INSERT OR REPLACE INTO logged VALUES (?, ?, ?, ?)", (thread, at.checkpoint, at.base, cursor))
