"""Which run of a team a config belongs to, decided once as the run starts.

A team is usually a graph of its own: a run is its thread. It may also be a node of a
user's graph (or be called inside one's node function). LangGraph then gives it the
parent task's namespace and the parent's checkpointer, or none: its state is that task's,
so two team nodes in one parent thread, or two turns of the parent, are different runs,
and a run without a thread id cannot be resumed at all. The steps in the pool, the calls
thought ahead, a drain and the log's cursor go by the run's key, never by the thread id
alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig

from teamgraph.compat import CONFIG_KEY_CHECKPOINTER

__all__ = ["RUN_KEY", "RunScope", "run_key", "scope_of"]

RUN_KEY = "__teamgraph_run"
"""The ``configurable`` key that carries the run's key to every node and step of the run."""

NS_KEY = "checkpoint_ns"


@dataclass(frozen=True)
class RunScope:
    """A run of a team graph, as its config places it.

    Attributes:
        key: The run's key: the thread id for a team of its own; the thread id and the
            parent task's namespace for a team inside a parent graph; a fresh id for a run
            without a thread (nothing can resume it).
        thread: The thread id, if any.
        nested: It runs inside a parent graph's task (as a node, or called from a node).
        saved: A checkpointer keeps its state (False: no checkpointer, or a parent graph
            without one).
    """

    key: str
    thread: str | None
    nested: bool
    saved: bool

    @property
    def resumable(self) -> bool:
        """Whether a later run can take up this one (its steps and calls thought ahead)."""
        return self.thread is not None and self.saved


def scope_of(configurable: Mapping[str, Any], *, own_checkpointer: bool) -> RunScope:
    """The scope of a run whose merged config has ``configurable`` (see ``compat.effective_config``).

    Args:
        configurable: The run's merged ``configurable``.
        own_checkpointer: The compiled graph has a checkpointer (a parent may lend another, or none).
    """
    raw_thread = configurable.get("thread_id")
    thread = None if raw_thread is None else str(raw_thread)
    namespace = str(configurable.get(NS_KEY) or "")
    if thread is None:
        key = uuid.uuid4().hex
    else:
        key = f"{thread}|{namespace}" if namespace else thread
    lent = configurable.get(CONFIG_KEY_CHECKPOINTER)
    saved = lent is not None if CONFIG_KEY_CHECKPOINTER in configurable else own_checkpointer
    return RunScope(key=key, thread=thread, nested=bool(namespace), saved=saved)


def run_key(config: RunnableConfig) -> str:
    """The key of the run a node's or step's ``config`` belongs to (its thread id if none was set)."""
    configurable = config.get("configurable") or {}
    key = configurable.get(RUN_KEY)
    if key is not None:
        return str(key)
    thread = configurable.get("thread_id")
    return "" if thread is None else str(thread)
