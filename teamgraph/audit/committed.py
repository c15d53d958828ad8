"""The log of a team's committed state: what a router pass, the human gate and ``flush_log`` write.

Each write derives the lines of one committed state (``events.py``) and appends them
exactly once (``log.py``). Where they start is the state's own business: the pass that
logs a state puts the cursor after its lines into the state it writes (``state["log"]``),
so a branch forked from an earlier checkpoint, or a thread of another checkpointer under
the same id, is logged from where its own history was logged, never from where another
branch's got to (review 14: a fork used to log a false CRITICAL ``LOST_DATA`` and skip
its own lines). The index next to the log remembers the last write, so a state written
twice (a pass repeated after a crash, a resumed gate, ``flush_log``) is logged once.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config

from teamgraph.audit import rotation
from teamgraph.audit.events import Cursor, LoggedState, derive_events
from teamgraph.audit.log import Logged, append_events
from teamgraph.audit.project import PROJECT_NAME_KEY, log_folder, logs_dir, project_name
from teamgraph.audit.records import TIME_FORMAT, LogEvent, parse_line
from teamgraph.graph.runs import run_key

__all__ = ["LOG_CURSOR_KEY", "flush_log", "log_state", "read_log", "write_committed"]

LOG_CURSOR_KEY = "log"
"""The state key of the cursor after the lines of the state's parent (``TeamState.log``)."""


def log_state(
    runtime: Any,
    state: Mapping[str, Any],
    config: RunnableConfig | None = None,
    *,
    folder: Path | None = None,
    sync: bool = True,
) -> Logged | None:
    """Log what committed ``state`` adds to the run's collaboration log.

    Call it where the state read is committed: for the state a router pass reads
    (``write_committed_soon``), the human gate's, or after a run with ``flush_log``.
    Calling it twice on one state writes nothing the second time.

    Args:
        runtime: The team runtime (home folder, policy, clock).
        state: Committed state values of the thread.
        config: The run's config; the current LangGraph config when None.
        folder: The logs folder, when the caller has it (``log_folder``); found from the config otherwise.
        sync: Flush the lines to disk before returning (see ``append_events``).

    Returns:
        The lines written and the cursor after them; None when ``Policy.log`` is off, or
        the run names no thread and no project.
    """
    config = config if config is not None else get_config()
    folder = folder or log_folder(runtime, config)
    if folder is None:
        return None
    configurable = config.get("configurable") or {}
    # NOTE: the cursor is the run's (its state's): a team inside a parent graph starts afresh
    # in every parent task, under the parent's thread id.
    thread = run_key(config) or str(configurable[PROJECT_NAME_KEY])
    now = runtime.clock.now()
    stamp = now.strftime(TIME_FORMAT)

    def derive(cursor: Cursor) -> tuple[list[LogEvent], Cursor]:
        return derive_events(state, cursor, now=stamp, policy=runtime.policy)

    # NOTE: an empty channel reads as {}: the same as carrying none.
    at = LoggedState(state, state.get(LOG_CURSOR_KEY) or None)
    return append_events(folder, project_name(config), thread, now, derive, at=at, sync=sync)


def write_committed(
    runtime: Any,
    state: Mapping[str, Any],
    config: RunnableConfig | None = None,
    *,
    folder: Path | None = None,
    sync: bool = True,
) -> list[str]:
    """``log_state``, for the lines it wrote (none when the run writes no log)."""
    logged = log_state(runtime, state, config, folder=folder, sync=sync)
    return [] if logged is None else logged.lines


def flush_log(team: Any, config: RunnableConfig) -> list[str]:
    """Write the lines of the thread's latest committed state (after a run ends or pauses).

    Each router pass logs the state it read, so the changes of the run's last
    pass reach the log at the next pass, or here.

    Args:
        team: The ``Team``.
        config: The thread's config.

    Returns:
        The lines written.
    """
    return write_committed(team.runtime, team.state(config), config)


def read_log(team: Any, config: RunnableConfig) -> list[LogEvent]:
    """Every event in the thread's project log files (day files, oldest first)."""
    folder = logs_dir(team.home, config)
    files = sorted(rotation.day_files(folder).items(), key=lambda item: item[1]) if folder.exists() else []
    return [parse_line(line) for path, _ in files for line in path.read_text(encoding="utf-8").splitlines()]
