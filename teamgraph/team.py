"""Team: build a team, compile its graph, read its agents' histories."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AnyMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph

from teamgraph.checkpoints import DB_FILE, open_sqlite_saver
from teamgraph.governance.matrix import PermissionMatrix
from teamgraph.graph.build import build_team_graph
from teamgraph.policy import Policy
from teamgraph.runtime import Clock, ModelSpec, SystemClock, TeamRuntime

DEFAULT_HOME = ".teamgraph"


class Team:
    """A team of agents led by a Team Leader, checkpointed to SQLite.

    Example:
        ```python
        team = Team(model="openai:gpt-4o-mini")
        graph = team.compile()
        config = {"configurable": {"thread_id": "t1"}}
        graph.invoke({"messages": [("user", "Build a login page")]}, config)
        team.history(config, "UI Operator_1")
        ```
    """

    def __init__(
        self,
        model: ModelSpec = None,
        *,
        roles_dir: str | Path | None = None,
        policy: Policy | None = None,
        home: str | Path = DEFAULT_HOME,
        checkpointer: Any = None,
        clock: Clock | None = None,
        tools: Sequence[BaseTool] | Mapping[str, Sequence[BaseTool]] = (),
        permissions: PermissionMatrix | Mapping[str, Any] | str | Path | None = None,
        project: str | None = None,
    ) -> None:
        """Create a team.

        Args:
            model: A chat model, a string (``"openai:gpt-4o-mini"``,
                ``"scripted:path.yaml"``), a callable ``role -> model``, or None
                for ``TEAMGRAPH_MODEL``.
            roles_dir: A folder of extra role files; built-in roles are always there.
            policy: Limits and who decides what.
            home: The data folder: SQLite file, custom roles, project files.
            checkpointer: None for SQLite in ``home``; False for none (``langgraph
                dev`` brings its own); or any LangGraph checkpointer.
            clock: Where time is read (tests pass their own).
            tools: Your own tools: a list every member gets, or a mapping from
                role id to tools (the key ``"*"`` meaning every member).
            permissions: Overrides of the permission matrix: a mapping shaped like
                ``permissions.yaml`` (only the entries to change), a YAML file path, or
                a whole ``PermissionMatrix``.
            project: The project folder's name for every thread (``<home>/project/<project>/``);
                default: each thread's id (the config's ``project_name`` wins).
        """
        extra = dict(tools) if isinstance(tools, Mapping) else {"*": list(tools)}
        self.runtime = TeamRuntime(
            home=Path(home),
            policy=policy or Policy(),
            model=model,
            roles_dir=Path(roles_dir) if roles_dir is not None else None,
            clock=clock or SystemClock(),
            extra_tools={role: list(ts) for role, ts in extra.items()},
            permissions=permissions,
            project=project,
        )
        unknown = sorted(set(extra) - {"*", *self.runtime.roles})
        if unknown:
            raise ValueError(
                f"tools= names unknown role(s) {', '.join(unknown)}. Use a role id "
                f"({', '.join(self.runtime.roles)}) or '*' for every member."
            )
        self._checkpointer = checkpointer
        self._graph: CompiledStateGraph | None = None

    @property
    def home(self) -> Path:
        """The team's data folder."""
        return self.runtime.home

    @property
    def db_path(self) -> Path:
        """Where the default SQLite checkpointer writes."""
        return self.home / DB_FILE

    @property
    def roles(self) -> dict:
        """Every role the team knows (built-in, ``roles_dir``, created by the leader)."""
        return self.runtime.roles

    def compile(self) -> CompiledStateGraph:
        """Compile the team graph (roles known now become nodes)."""
        if self._checkpointer is None:
            self._checkpointer = open_sqlite_saver(self.db_path)
        saver = None if self._checkpointer is False else self._checkpointer
        self._graph = build_team_graph(self.runtime, checkpointer=saver)
        return self._graph

    @property
    def graph(self) -> CompiledStateGraph:
        """The compiled graph (compiled on first use)."""
        return self._graph or self.compile()

    def state(self, config: RunnableConfig) -> dict[str, Any]:
        """The thread's current state values."""
        return self.graph.get_state(config).values

    def history(self, config: RunnableConfig, display_name: str) -> list[AnyMessage]:
        """One agent's own conversation in a thread.

        Args:
            config: The thread's config (``{"configurable": {"thread_id": ...}}``).
            display_name: ``"Team Leader"`` or a member's name such as ``"UI Operator_1"``.

        Returns:
            The agent's messages, oldest first.
        """
        return _history_of(self.state(config), display_name)

    def agents(self, config: RunnableConfig) -> dict[str, dict[str, Any]]:
        """The thread's registry: display name -> role, status, counters."""
        return self.state(config).get("agents", {})

    # --- async reading (for a team compiled with an async checkpointer) -------
    # NOTE: AsyncSqliteSaver refuses synchronous calls from its event loop's
    # thread, so `state` / `history` / `agents` raise there; use these instead.

    async def astate(self, config: RunnableConfig) -> dict[str, Any]:
        """The thread's current state values (async)."""
        return (await self.graph.aget_state(config)).values

    async def ahistory(self, config: RunnableConfig, display_name: str) -> list[AnyMessage]:
        """One agent's own conversation in a thread (async); see ``history``."""
        return _history_of(await self.astate(config), display_name)

    async def aagents(self, config: RunnableConfig) -> dict[str, dict[str, Any]]:
        """The thread's registry (async); see ``agents``."""
        return (await self.astate(config)).get("agents", {})


def _history_of(values: dict[str, Any], display_name: str) -> list[AnyMessage]:
    """``display_name``'s history in a thread's state values, or a KeyError listing the agents."""
    agents = values.get("agents", {})
    if display_name not in agents:
        known = ", ".join(agents) or "none yet"
        raise KeyError(f"No agent named '{display_name}' in this thread. Agents: {known}.")
    return list(values.get("histories", {}).get(display_name, []))
