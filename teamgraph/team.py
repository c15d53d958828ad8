"""Team: build a team, compile its graph, read its agents' histories."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from langchain_core.messages import AnyMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from teamgraph.audit.report import run_report
from teamgraph.audit.stats import TeamStats, team_stats
from teamgraph.audit.timeline import Timeline, build_timeline
from teamgraph.audit.tokens import check_prices, with_tokens
from teamgraph.checkpoints import DB_FILE
from teamgraph.checkpoints.memory import open_journal_store, open_store
from teamgraph.checkpoints.shared_home import check_team_home, open_checked, shared_home_required
from teamgraph.graph.build import build_team_graph
from teamgraph.models import ModelNotConfiguredError, ScriptedChatModel
from teamgraph.nodes.model_view import context_budget, model_view, without_markers
from teamgraph.policy import Policy
from teamgraph.roles.matrix import PermissionMatrix
from teamgraph.runtime import Clock, ModelSpec, SearchProvider, SystemClock, TeamRuntime, TokenCounter
from teamgraph.team_checks import check_arguments, check_home_writable, check_roles_dir, check_tools
from teamgraph.tools import builtin_tool_names
from teamgraph.tools.mcp_tools import load_mcp_tools
from teamgraph.tools.plain import as_tools

DEFAULT_HOME = ".teamgraph"
HistoryView = Literal["full", "model"]


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
        tools: Sequence[BaseTool | Callable[..., Any]] | Mapping[str, Sequence[BaseTool | Callable[..., Any]]] = (),
        token_counter: TokenCounter | None = None,
        prices: Mapping[str, Mapping[str, float]] | None = None,
        permissions: PermissionMatrix | Mapping[str, Any] | str | Path | None = None,
        project: str | None = None,
        search: SearchProvider | None = None,
        mcp_servers: Mapping[str, Mapping[str, Any]] | None = None,
        store: BaseStore | None = None,
        shared_home: bool | None = None,
    ) -> None:
        """Create a team.

        Args:
            model: A chat model, a string (``"openai:gpt-4o-mini"``,
                ``"scripted:path.yaml"``), a callable ``role -> model``, or None
                for ``TEAMGRAPH_MODEL``.
            roles_dir: A folder of extra role files; built-in roles are always there.
            policy: Limits and who decides what.
            home: The data folder: SQLite file, custom roles, project files. A relative
                path is taken against the current directory once, here.
            checkpointer: None for ``$TEAMGRAPH_DB`` if set, else SQLite in ``home``;
                a database URL (``postgresql://…``, needs the ``postgres`` extra) or
                SQLite path; False for none (``langgraph dev`` brings its own); or any
                LangGraph checkpointer.
            clock: Where time is read (tests pass their own).
            tools: Your own tools: a list every member gets, or a mapping from
                role id to tools (the key ``"*"`` meaning every member). A tool is a
                LangChain tool (``@tool``) or a plain function with a docstring and
                annotated parameters, wrapped as ``tool(fn)`` would
                (``teamgraph/tools/plain.py``; otherwise ``ToolDefinitionError``).
            token_counter: Counts the tokens of a model call's messages, to keep every
                agent inside ``Policy.context_tokens``; None: LangChain's approximation,
                scaled by the usage the provider reports.
            prices: Price per million tokens by model name, e.g.
                ``{"gpt-4o-mini": {"input": 0.15, "output": 0.60}}`` (``"*"``: any
                other model); ``agents()`` and ``stats()`` then give costs.
            permissions: Overrides of the permission matrix: a mapping shaped like
                ``permissions.yaml`` (only the entries to change), a YAML file path, or
                a whole ``PermissionMatrix``.
            project: The project of every new thread: its folder (``<home>/project/<project>/``)
                and its collaboration log (``<home>/logs/<project>/``); default: each
                thread's id. The config's ``project_name`` wins, and a thread keeps the
                project its first runs recorded.
            search: A web-search provider ``(query, max_results) -> [{"title", "url",
                "snippet"}]`` for the ``web_search`` tool (the Team Leader's, and roles
                listing ``search``); None: the tool is not offered.
            mcp_servers: MCP servers by name, each a ``langchain-mcp-adapters`` connection
                (``{"transport": "stdio", "command": ..., "args": [...]}`` or
                ``{"transport": "streamable_http", "url": ...}``); the leader gets every
                server's tools, a role the servers its file lists under ``mcp``. Needs the
                ``mcp`` extra.
            store: The LangGraph store ``remember``/``recall`` keep notes in; None: one in
                the checkpointer's database (SQLite or PostgreSQL), else in memory.
            shared_home: With a PostgreSQL checkpointer, check that ``home`` is the folder every
                process of the team shares (``SharedHomeError`` otherwise, when the team opens
                its database); None: ``$TEAMGRAPH_SHARED_HOME``, on by default; False for one machine.

        Raises:
            TypeError: An argument is of the wrong type (the message names it and the types it takes).
            ValueError: A database URL of an unknown scheme, a tool named like a built-in one,
                ``tools=`` naming an unknown role, a ``$TEAMGRAPH_SHARED_HOME`` that is not a switch.
            RoleFileError: ``roles_dir`` does not exist, or a role file in it is invalid.
        """
        check_arguments(
            model=model,
            roles_dir=roles_dir,
            policy=policy,
            home=home,
            checkpointer=checkpointer,
            clock=clock,
            token_counter=token_counter,
            prices=prices,
            permissions=permissions,
            project=project,
        )
        check_roles_dir(roles_dir)
        self._shared_home = shared_home_required(shared_home)
        # NOTE: plain functions become tools first; then a tool named like a built-in is refused.
        extra = check_tools(as_tools(tools) if isinstance(tools, (Mapping, list, tuple)) else tools, builtin_tool_names)
        self._settings: dict[str, Any] = {
            "home": Path(home),
            "policy": policy or Policy(),
            "roles_dir": Path(roles_dir) if roles_dir is not None else None,
            "clock": clock or SystemClock(),
            "extra_tools": {role: list(ts) for role, ts in extra.items()},
            "token_counter": token_counter,
            "prices": None if prices is None else check_prices(prices),
            "permissions": permissions,
            "project": project,
            "search": search,
            "mcp_tools": load_mcp_tools(mcp_servers) if mcp_servers else {},
            "store": store,
        }
        self.runtime = TeamRuntime(model=model, **self._settings)
        unknown = sorted(set(extra) - {"*", *self.runtime.roles})
        if unknown:
            raise ValueError(
                f"tools= names unknown role(s) {', '.join(unknown)}. Use a role id "
                f"({', '.join(self.runtime.roles)}) or '*' for every member."
            )
        self._checkpointer = checkpointer
        self._home_checked = False
        self._graph: CompiledStateGraph | None = None
        self._reader: CompiledStateGraph | None = None

    @property
    def home(self) -> Path:
        """The team's data folder, absolute: a relative ``home`` names the folder it named when the team was made."""
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
        """Compile the team graph (roles known now become nodes).

        Raises:
            PermissionError: The home folder cannot be written (checked now, before any run).
            SharedHomeError: The team's PostgreSQL database expects another home folder (the
                one its other processes share; ``teamgraph/checkpoints/shared_home.py``).
        """
        check_home_writable(self.home)
        saver = self._saver()
        if self.runtime.store is None and saver is not None:
            self.runtime.store = open_store(saver)  # NOTE: memory lives next to the checkpoints
            self.runtime.journal_store = open_journal_store(saver)
        self._graph = build_team_graph(self.runtime, checkpointer=saver)
        return self._graph

    def _saver(self) -> Any:
        if self._checkpointer is None or isinstance(self._checkpointer, (str, Path)):
            db = None if self._checkpointer is None else self._checkpointer
            self._checkpointer = open_checked(db, home=self.home, required=self._shared_home)
        elif not self._home_checked and self._checkpointer is not False:
            check_team_home(self._checkpointer, self.home, required=self._shared_home)
        self._home_checked = True
        return None if self._checkpointer is False else self._checkpointer

    def _reading_graph(self) -> CompiledStateGraph:
        """The compiled graph; without a model, a graph that only reads (reading calls no model).

        NOTE: the graph's nodes are built with their models, so a team with no model
        configured reads its threads through a graph of the same shape whose model is
        never called; ``compile()`` and running still need the real model.
        """
        if self._graph is not None:
            return self._graph
        if self._reader is None:
            try:
                return self.compile()
            except ModelNotConfiguredError:
                reader = TeamRuntime(model=ScriptedChatModel({}), **self._settings)
                self._reader = build_team_graph(reader, checkpointer=self._saver())
        return self._reader

    @property
    def graph(self) -> CompiledStateGraph:
        """The compiled graph (compiled on first use)."""
        return self._graph or self.compile()

    def state(self, config: RunnableConfig) -> dict[str, Any]:
        """The thread's current state values (no model needed)."""
        return self._reading_graph().get_state(config).values

    def report(self, config: RunnableConfig) -> str | None:
        """The Team Leader's report for the thread's latest task, or None if that run ended without one.

        A follow-up task that was stopped, ran out of budget or was never answered gives
        None here, not the previous task's report (which stays in ``state["messages"]``).
        """
        return run_report(self.state(config))

    def timeline(self, config: RunnableConfig) -> Timeline:
        """The thread's run as one lane per agent over time, read from its checkpoints (no model needed).

        Example:
            ```python
            timeline = team.timeline(config)
            timeline.save("run.png")    # or "run.html" (interactive); in a notebook it shows itself
            timeline.count("model")     # model calls drawn
            ```

        Drawing needs the ``timeline`` extra (matplotlib, plotly); the data does not.
        """
        graph = self._reading_graph()
        checkpoints = [(s.created_at, s.values) for s in graph.get_state_history(config) if s.created_at]
        thread = str((config.get("configurable") or {}).get("thread_id", ""))
        return build_timeline(thread, checkpoints)

    def history(self, config: RunnableConfig, display_name: str, view: HistoryView = "full") -> list[BaseMessage]:
        """One agent's own conversation in a thread.

        Args:
            config: The thread's config (``{"configurable": {"thread_id": ...}}``).
            display_name: ``"Team Leader"`` or a member's name such as ``"UI Operator_1"``.
            view: ``"full"``: every message, oldest first; ``"model"``: what the agent's
                model sees now after its system prompt (the latest summary, then the
                messages after it, oversized tool results truncated).

        Returns:
            The agent's messages.
        """
        return self._history_view(self.state(config), display_name, view)

    def agents(self, config: RunnableConfig) -> dict[str, dict[str, Any]]:
        """The thread's registry: display name -> role, status, counters, ``tokens`` (see ``TokenUsage``)."""
        return with_tokens(self.state(config), self.runtime.prices)

    def stats(self, config: RunnableConfig) -> TeamStats:
        """The thread's collaboration figures (see ``teamgraph.audit.stats.team_stats``)."""
        return team_stats(self.state(config), prices=self.runtime.prices, policy=self.runtime.policy)

    # --- async reading (for a team compiled with an async checkpointer) -------
    # NOTE: AsyncSqliteSaver refuses synchronous calls from its event loop's
    # thread, so `state` / `history` / `agents` raise there; use these instead.

    async def astate(self, config: RunnableConfig) -> dict[str, Any]:
        """The thread's current state values (async)."""
        return (await self._reading_graph().aget_state(config)).values

    async def ahistory(
        self, config: RunnableConfig, display_name: str, view: HistoryView = "full"
    ) -> list[BaseMessage]:
        """One agent's own conversation in a thread (async); see ``history``."""
        return self._history_view(await self.astate(config), display_name, view)

    def _history_view(self, values: dict[str, Any], display_name: str, view: HistoryView) -> list[BaseMessage]:
        history = _history_of(values, display_name)
        if view == "full":
            return without_markers(history)
        if view != "model":
            raise ValueError(f"view={view!r} is not a history view. Use 'full' (every message) or 'model'.")
        role = self.runtime.role(values["agents"][display_name]["role"])
        if role is None:
            raise ValueError(f"{display_name}'s role is not defined in this team: its model view cannot be built.")
        model = self.runtime.model_for(role)
        budget = context_budget(model=model, policy=self.runtime.policy, counter=self.runtime.token_counter)
        return model_view(history, budget=budget)

    async def aagents(self, config: RunnableConfig) -> dict[str, dict[str, Any]]:
        """The thread's registry (async); see ``agents``."""
        return with_tokens(await self.astate(config), self.runtime.prices)


def _history_of(values: dict[str, Any], display_name: str) -> list[AnyMessage]:
    """``display_name``'s history in a thread's state values, or a KeyError listing the agents."""
    agents = values.get("agents", {})
    if display_name not in agents:
        known = ", ".join(agents) or "none yet"
        raise KeyError(f"No agent named '{display_name}' in this thread. Agents: {known}.")
    return list(values.get("histories", {}).get(display_name, []))
