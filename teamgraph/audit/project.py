"""Where a thread's files go: its project folder, and its collaboration log out of the agents' reach.

- ``<home>/project/<project_name>/``: the project folder, where the agents' file tools
  (and commands) work;
- ``<home>/logs/<project_name>/``: the collaboration log, its index and archives.

NOTE: the seed put the log in ``project/<name>/logs/``, inside the folder the agents
write: a member could read it and replace it with ``write_file`` (issue 31, failure 7).
It lives beside the project folder instead, where no agent tool reaches
(docs/security.md, "The audit log"). A home written by an earlier version keeps its
old ``project/<name>/logs/`` folder, which is no longer written: the new log is
derived again from the checkpoints, whole, at the thread's next run.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

PROJECT_NAME_KEY = "project_name"
"""The config key (``configurable``) that names a thread's project (its folder and its log's)."""
LOGS_DIR = "logs"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_UNSAFE_IN_ANY_SCRIPT = re.compile(r"[^\w.-]+")
MAX_FOLDER_BYTES = 200
"""The longest folder name kept whole (UTF-8 bytes). NOTE: the log's day files and archives
add 29 bytes to it (``audit/rotation.py``), and most file systems allow 255 a name."""


def folder_name(raw: str) -> str | None:
    """``raw`` (a project name or a thread id) as one folder name; None if nothing of it can name one.

    ASCII letters, digits, ``.``, ``_`` and ``-`` are kept and every other run of characters
    becomes ``_``: the names earlier versions gave, so a thread keeps its folders. A name
    with nothing left that way (``项目一``) keeps the letters and digits of its own script.
    A name longer than ``MAX_FOLDER_BYTES`` keeps its start and a hash of the whole, so two
    long names never share a folder.
    """
    name = _UNSAFE.sub("_", raw).strip("._")
    if not name:
        name = _UNSAFE_IN_ANY_SCRIPT.sub("_", raw).strip("._")
    if not name:
        return None
    if len(name.encode()) > MAX_FOLDER_BYTES:
        start = name.encode()[:60].decode(errors="ignore").rstrip("._-")
        name = f"{start}-{hashlib.sha256(raw.encode()).hexdigest()[:12]}"
    return name


def named_project(config: Mapping[str, Any], project: str | None = None) -> str | None:
    """The thread's project name as one folder name, or None if nothing names one.

    The config's ``configurable.project_name``, else ``project`` (the team's
    ``Team(project=...)``), else the thread id: the project folder and the log follow it alike.
    A run of a thread that recorded a project, and names none, is given that one as its
    ``project_name`` when it starts (``keeping_project``, ``graph/guarded.py``), so the
    thread's own project comes before the team's.
    """
    configurable = config.get("configurable") or {}
    raw = configurable.get(PROJECT_NAME_KEY) or project or configurable.get("thread_id")
    return folder_name(str(raw or ""))


def recorded_project(values: Mapping[str, Any]) -> str | None:
    """The project a thread's runs worked in, as its team book records it (None: none recorded).

    NOTE: every router pass records it (``team["project"]``), so a later run that names
    none (a resume from Studio or the SDK, which sends the assistant's config and not the
    first run's; a ``Team`` built without ``project=``; the CLI) works in the same folder
    and logs to the same log.
    """
    team = values.get("team")
    project = team.get("project") if isinstance(team, Mapping) else None
    return str(project) if project else None


def keeping_project(config: RunnableConfig, values: Mapping[str, Any]) -> RunnableConfig:
    """``config``, naming the project the thread recorded in ``values`` if it names none itself."""
    configurable = config.get("configurable") or {}
    recorded = recorded_project(values)
    if recorded is None or configurable.get(PROJECT_NAME_KEY):
        return config
    return {**config, "configurable": {**configurable, PROJECT_NAME_KEY: recorded}}


def project_name(config: RunnableConfig, project: str | None = None) -> str:
    """The thread's project name: ``configurable.project_name``, else ``project``, else the thread id.

    Args:
        config: The run's config.
        project: The team's project (``Team(project=...)``), if it names one.

    Returns:
        A name safe as one folder name (``folder_name``).

    Raises:
        ValueError: If the config names neither a project nor a thread, and the team no project.
    """
    name = named_project(config, project)
    if not name:
        raise ValueError(
            "No project name: pass config={'configurable': {'thread_id': ..., 'project_name': ...}} "
            "(the project name defaults to the thread id)."
        )
    return name


def logs_dir(home: Path | str, config: RunnableConfig, project: str | None = None) -> Path:
    """``<home>/logs/<project_name>``: where the collaboration log lives (outside the project folder).

    ``project`` is the team's (``Team(project=...)``): the config's ``project_name`` wins over it.
    """
    return _logs_dir(str(home), project_name(config, project))


@functools.lru_cache(maxsize=256)
def _logs_dir(home: str, project: str) -> Path:
    # NOTE: cached: every router pass asks, and building the path was ~2 % of a pass's CPU.
    return Path(home, LOGS_DIR, project)


def log_folder(runtime: Any, config: RunnableConfig) -> Path | None:
    """The logs folder a run writes to (absolute), or None when it writes no log.

    None when ``Policy.log`` is off, or the run names no thread and no project (no
    checkpointer, no config: no project folder).
    """
    configurable = config.get("configurable") or {}
    if not runtime.policy.log or not (configurable.get("thread_id") or configurable.get(PROJECT_NAME_KEY)):
        return None
    return logs_dir(runtime.home, config, runtime.project)  # NOTE: absolute: the runtime made its home so
