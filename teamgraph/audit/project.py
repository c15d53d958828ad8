"""The project folder of a thread: ``<home>/project/<project_name>/``."""

from __future__ import annotations

import re
from pathlib import Path

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
