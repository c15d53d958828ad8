"""The LangGraph internals teamgraph relies on, in one place.

These names live in ``langgraph._internal``, which carries no stability promise.
Each import is guarded the way LangGraph's own prebuilt ``ToolNode`` guards its
private imports: a release that moves the name falls back to the config key's
value in the releases we test (langgraph 1.2.x). ``pyproject.toml`` pins
``langgraph`` below its next minor version, and ``tests/test_compat.py`` checks
both the values and the fallback, so a moved or renamed key fails a test rather
than a run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

__all__ = [
    "CONFIG_KEY_CHECKPOINTER",
    "CONFIG_KEY_CHECKPOINT_MAP",
    "CONFIG_KEY_DURABILITY",
    "CONFIG_KEY_READ",
    "DELTA_SNAPSHOT",
    "NS_SEP",
    "SQLITE_DELTA",
    "checkpoint_read",
    "effective_config",
    "graph_namespace",
    "read_fresh",
    "read_channels",
    "route_edits",
    "unsaved",
]

try:
    # NOTE: a compiled graph has no default durability (only the per-call `durability=`); this key sets one.
    from langgraph._internal._constants import CONFIG_KEY_DURABILITY
except ImportError:  # NOTE: its value in langgraph 1.2.x
    CONFIG_KEY_DURABILITY = "__pregel_durability"

try:
    # NOTE: the saver a parent graph lends its subgraphs (None when the parent has none).
    from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER
except ImportError:  # NOTE: its value in langgraph 1.2.x
    CONFIG_KEY_CHECKPOINTER = "__pregel_checkpointer"

try:
    # NOTE: the channel reader conditional edges use: a node reads the graph's channels with it
    # (a node started by `Send` gets only its payload; its input schema is what the router sends).
    from langgraph._internal._constants import CONFIG_KEY_READ
except ImportError:  # NOTE: its value in langgraph 1.2.x
    CONFIG_KEY_READ = "__pregel_read"

try:
    # NOTE: a task's config maps each graph's namespace to the checkpoint its superstep read.
    from langgraph._internal._constants import CONFIG_KEY_CHECKPOINT_MAP, NS_SEP
except ImportError:  # NOTE: their values in langgraph 1.2.x
    CONFIG_KEY_CHECKPOINT_MAP, NS_SEP = "checkpoint_map", "|"

SQLITE_DELTA: Any
try:
    # NOTE: the pieces SqliteSaver's get_delta_channel_history is made of; the Team's saver
    # replaces only its second query (teamgraph/checkpoints/saver.py).
    from langgraph.checkpoint.sqlite import _delta as SQLITE_DELTA

    SQLITE_DELTA.DELTA_STAGE1_SQL, SQLITE_DELTA.step_walk_with_row, SQLITE_DELTA.build_delta_channels_writes_history  # noqa: B018
except (ImportError, AttributeError):  # NOTE: the Team's saver then reads through SqliteSaver's own method
    SQLITE_DELTA = None

try:
    # NOTE: how a run's config is merged with the graph's and with the config of the task it
    # runs in (a team called inside a parent graph's node inherits that node's config).
    from langgraph._internal._config import ensure_config as _ensure_config
except ImportError as exc:  # pragma: no cover - a release that moved it fails every run, loudly
    raise ImportError(f"teamgraph needs langgraph 1.2.x's ensure_config: {exc}") from exc

try:
    # NOTE: the pieces a conditional edge is made of; ``route_edits`` attaches one that reads no state.
    from langgraph._internal._runnable import RunnableCallable
    from langgraph.graph._branch import BranchSpec
except ImportError as exc:  # pragma: no cover - a release that moved them fails every compile, loudly
    raise ImportError(f"teamgraph needs langgraph 1.2.x's BranchSpec and RunnableCallable: {exc}") from exc

DELTA_SNAPSHOT: Any
try:
    # NOTE: the named tuple a DeltaChannel snapshot is stored as; the Team's serializer
    # stores a snapshot of histories as batches (teamgraph/checkpoints/serde.py).
    from langgraph.checkpoint.serde.types import _DeltaSnapshot as DELTA_SNAPSHOT
except ImportError:  # NOTE: snapshots are then stored as LangGraph stores them (decoded whole on load)
    DELTA_SNAPSHOT = None


def effective_config(graph: CompiledStateGraph, config: RunnableConfig | None) -> RunnableConfig:
    """The config a run of ``graph`` started now gets: the graph's, the ambient task's, ``config``.

    NOTE: LangGraph merges them as its ``stream`` starts; the team decides its run's scope
    (teamgraph/runs.py) before that, from the same merge.
    """
    return _ensure_config(graph.config, config)


def graph_namespace(config: RunnableConfig) -> str:
    """The checkpoint namespace of the graph a task runs in (a snapshot's own namespace outside a task).

    NOTE: a task's namespace is its graph's, then ``|node:task_id``; a root graph's is "".
    """
    configurable = config.get("configurable") or {}
    ns = str(configurable.get("checkpoint_ns") or "")
    return ns.rpartition(NS_SEP)[0] if CONFIG_KEY_CHECKPOINT_MAP in configurable else ns


def checkpoint_read(config: RunnableConfig) -> str | None:
    """The id of the checkpoint a task's superstep read, or a snapshot config's ``checkpoint_id``."""
    configurable = config.get("configurable") or {}
    read = (configurable.get(CONFIG_KEY_CHECKPOINT_MAP) or {}).get(graph_namespace(config))
    return read or configurable.get("checkpoint_id")


def read_channels(config: RunnableConfig, channels: Sequence[str]) -> dict[str, Any]:
    """The graph's ``channels`` as the running task sees them (committed, without its own writes).

    NOTE: a task started by ``Send`` has a state reader too, but it reads the ``Send``'s
    payload; this reads the graph's channels whatever started the task.
    """
    return config.get("configurable", {})[CONFIG_KEY_READ](list(channels), False)


EDITS_BRANCH = "edits"


def route_edits(graph: CompiledStateGraph, node: str, path: Callable[[Any, RunnableConfig], Any]) -> None:
    """Give ``node`` a branch that routes what an edit writes as ``node``; it reads no state itself.

    NOTE: a node that routes by ``Command(goto=...)`` is not run again by an edit made as
    that node (``update_state``, Studio's state editor, a fork, ``bulk_update_state``),
    but its writers are, and a branch is one of them. A branch added by
    ``add_conditional_edges`` reads the state fresh, which copies every channel at every
    superstep; this one gets only the node's output (or the edit's values), and ``path``
    reads what it needs (``read_fresh``), when it needs it.

    Args:
        graph: The compiled graph.
        node: The node.
        path: Gets the output (a normal run's ``Command``, or an edit's values) and the
            config; returns the next nodes (``[]``: none).

    NOTE: declared without its ends: the node's ``destinations`` draw its edges, and a
    second, labelled copy of them breaks LangGraph's drawing.
    """
    spec = BranchSpec.from_path(RunnableCallable(path, name=EDITS_BRANCH, trace=False), None)
    graph.attach_branch(node, EDITS_BRANCH, spec, with_reader=False)


def read_fresh(config: RunnableConfig, channel: str, default: Any = None) -> Any:
    """``channel`` as the running task (or an edit) left it: the state with its own writes applied."""
    return config["configurable"][CONFIG_KEY_READ]([channel], True).get(channel, default)


def unsaved(config: RunnableConfig) -> RunnableConfig:
    """``config`` for a subgraph run inside a task that must not checkpoint its own supersteps.

    NOTE: a subgraph compiled with ``checkpointer=False`` is left out of
    ``get_graph(xray=True)`` (``find_subgraph_pregel``), so the role subgraphs inherit the
    saver and are lent none here. Without a saver, "sync" durability waits for a checkpoint
    that is never put (langgraph 1.2: ``_put_checkpoint_fut``), so it runs "async".
    """
    configurable = {**config.get("configurable", {}), CONFIG_KEY_CHECKPOINTER: None, CONFIG_KEY_DURABILITY: "async"}
    return {**config, "configurable": configurable}
