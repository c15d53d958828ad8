"""The project folder of a thread: ``<home>/project/<project_name>/``."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

PROJECT_NAME_KEY = "project_name"
LOGS_DIR = "logs"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def project_name(config: RunnableConfig) -> str:
    """The thread's project name: ``configurable.project_name``, else the thread id.

    Args:
        config: The run's config.

    Returns:
        A name safe as one folder name (other characters become ``_``).

    Raises:
        ValueError: If the config names neither a project nor a thread.
    """
    configurable = config.get("configurable") or {}
    raw = configurable.get(PROJECT_NAME_KEY) or configurable.get("thread_id")
    name = _UNSAFE.sub("_", str(raw or "")).strip("._")
    if not name:
        raise ValueError(
            "No project name: pass config={'configurable': {'thread_id': ..., 'project_name': ...}} "
            "(the project name defaults to the thread id)."
        )
    return name


def project_dir(home: Path, config: RunnableConfig) -> Path:
    """``<home>/project/<project_name>``."""
    return Path(home) / "project" / project_name(config)


def logs_dir(home: Path, config: RunnableConfig) -> Path:
    """``<home>/project/<project_name>/logs``: where the collaboration log lives."""
    return project_dir(home, config) / LOGS_DIR


def absolute_logs_dir(home: Path | str, config: RunnableConfig) -> Path:
    """``logs_dir`` made absolute against the current directory, never resolved.

    NOTE: never resolved: a relative home must keep naming the same folder after a chdir.
    """
    home = str(home)
    # NOTE: no getcwd for an absolute home: `langgraph dev` flags it as blocking in its event loop.
    return _absolute_logs_dir(home, project_name(config), "" if os.path.isabs(home) else os.getcwd())


@functools.lru_cache(maxsize=256)
def _absolute_logs_dir(home: str, project: str, cwd: str) -> Path:
    # NOTE: cached: every router pass asks, and building the path was ~2 % of a pass's CPU.
    return Path(cwd, home, "project", project, LOGS_DIR)


def log_folder(runtime: Any, config: RunnableConfig) -> Path | None:
    """The logs folder a run writes to (absolute), or None when it writes no log.

    None when ``Policy.log`` is off, or the run names no thread and no project (no
    checkpointer, no config: no project folder).
    """
    configurable = config.get("configurable") or {}
    if not runtime.policy.log or not (configurable.get("thread_id") or configurable.get(PROJECT_NAME_KEY)):
        return None
    return absolute_logs_dir(runtime.root, config)
