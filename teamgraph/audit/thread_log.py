"""A Team thread's collaboration log: write what its last pass changed, read it back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig

from teamgraph.audit import rotation
from teamgraph.audit.log import write_committed
from teamgraph.audit.project import keeping_project, logs_dir
from teamgraph.audit.records import LogEvent, parse_line


def flush_log(team: Any, config: RunnableConfig) -> list[str]:
    """Write the lines of the thread's latest committed state (after a run ends or pauses).

    Each checkpoint is logged once a task read it (``audit/cursors.py``); no task
    reads a run's last one, so the changes of its last pass reach the log at the next run, or here.

    Args:
        team: The ``Team``.
        config: The thread's config.

    Returns:
        The lines written.
    """
    snapshot = team.graph.get_state(config)
    # NOTE: the snapshot's config names its checkpoint: the state is logged from its own branch.
    merged = RunnableConfig(
        **{**config, "configurable": {**(config.get("configurable") or {}), **snapshot.config["configurable"]}}
    )
    merged = keeping_project(merged, snapshot.values)
    return write_committed(team.runtime, snapshot.values, merged, checkpointer=team.graph.checkpointer)


def read_log(team: Any, config: RunnableConfig, values: Mapping[str, Any] | None = None) -> list[LogEvent]:
    """Every event in the thread's project log files (day files, oldest first).

    Args:
        team: The ``Team``.
        config: The thread's config.
        values: The thread's state, when the caller has read it (for the project it recorded).
    """
    recorded = values if values is not None else team.state(config)
    folder = logs_dir(team.home, keeping_project(config, recorded), team.runtime.project)
    files = sorted(rotation.day_files(folder).items(), key=lambda item: item[1]) if folder.exists() else []
    return [parse_line(line) for path, _ in files for line in path.read_text(encoding="utf-8").splitlines()]
