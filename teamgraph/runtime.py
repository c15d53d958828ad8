"""TeamRuntime: what a running team needs besides its state.

The state (histories, registry, requests) lives in checkpoints. The runtime holds
the things that are not state: the home folder, the role catalogue (built-in,
``roles_dir`` and the roles the leader created), the policy, the model and the
clock. Nodes, tools and the router receive it when the graph is built.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool
from langgraph.config import get_store
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from teamgraph.audit.project import named_project
from teamgraph.audit.tokens import Price
from teamgraph.calls import CallPool, Calls
from teamgraph.checkpoints.memory import memory_namespace
from teamgraph.models import ScriptedChatModel, resolve_model
from teamgraph.policy import Policy
from teamgraph.roles import Role, RoleFileError, format_role_text, load_roles, load_written_roles, write_role_file
from teamgraph.roles.loader import ROLE_FILE_SUFFIX
from teamgraph.roles.matrix import PermissionMatrix, check_role, load_matrix

ModelSpec = BaseChatModel | str | Callable[[Role], BaseChatModel] | None
TokenCounter = Callable[[Sequence[BaseMessage]], int]
"""Counts the tokens of the messages of one model call."""

CUSTOM_ROLES_DIR = "roles"
PROJECT_DIR = "project"


class Clock(Protocol):
    """Where the team reads the time (tests pass a clock they control)."""

    def now(self) -> datetime: ...


class SystemClock:
    """Wall-clock time in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


SearchProvider = Callable[[str, int], Sequence[Mapping[str, Any]]]
"""A web-search provider: ``(query, max_results) -> [{"title", "url", "snippet"}, ...]`` (``Team(search=...)``)."""


@dataclass
class TeamRuntime:
    """The non-state half of a team: folders, roles, policy, model, clock."""

    home: Path
    policy: Policy
    model: ModelSpec = None
    roles_dir: Path | None = None
    clock: Clock = field(default_factory=SystemClock)
    roles: dict[str, Role] = field(default_factory=dict)
    role_problems: dict[str, RoleFileError] = field(default_factory=dict)
    """Role files the team wrote that could not be loaded, by path (they are skipped)."""
    extra_tools: dict[str, list[BaseTool]] = field(default_factory=dict)
    """Your own tools by role id; the key ``"*"`` gives tools to every member."""
    token_counter: TokenCounter | None = None
    """Counts a model call's tokens; None: an approximation scaled by the provider's usage."""
    prices: dict[str, Price] | None = None
    """Price per million tokens by model (``{"gpt-4o-mini": {"input": .15, "output": .6}}``)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _models: dict[str, BaseChatModel] = field(default_factory=dict, repr=False)
    calls: Calls = field(init=False, repr=False)
    """The team's model calls in flight (they outlive the superstep that issues them)."""
    role_nodes: dict[str, str] = field(default_factory=dict, repr=False)
    """The graph's node of each role known when it was compiled, by role id (others step in ``member``)."""
    journal_store: BaseStore | None = field(default=None, repr=False)
    """Where the step journal lives when the graph is given no store (None: the memory store)."""
    journals: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict, repr=False)
    """Per run key, the step-journal items this process read or wrote in the run under way
    (``nodes/journal.py``): the store is read once per agent and run."""
    tool_sets: dict[tuple[str, bool], list[BaseTool]] = field(default_factory=dict, repr=False)
    """Built tool sets by (set name, leader side): building a tool's schema is slow."""
    permissions: PermissionMatrix | Mapping[str, Any] | str | Path | None = None
    """``Team(permissions=...)``: overrides of the permission matrix (see roles/matrix.py)."""
    project: str | None = None
    """``Team(project=...)``: the project folder's name for every thread (default: the thread id)."""
    matrix: PermissionMatrix = field(init=False, repr=False)
    search: SearchProvider | None = None
    """``Team(search=...)``: the web-search provider (None: no ``web_search`` tool)."""
    mcp_tools: dict[str, list[BaseTool]] = field(default_factory=dict, repr=False)
    """``Team(mcp_servers=...)``: each MCP server's tools, loaded when the team is created."""
    store: BaseStore | None = field(default=None, repr=False)
    """The memory store (``remember``/``recall``); None: an in-memory one, made on first use."""

    def __post_init__(self) -> None:
        # NOTE: made absolute once, here: a relative home keeps naming the same folder after a
        # chdir (a notebook's ``%cd``), for every file the team writes, and no path is made
        # absolute on a server's event loop (``os.getcwd`` blocks).
        self.home = Path(self.home).expanduser().absolute()
        self.calls = CallPool(workers=self.policy.max_parallel + 1)
        self.reload_matrix()
        self.reload_roles()

    def reload_matrix(self) -> None:
        """Load the permission matrix: defaults, ``permissions.yaml`` (roles_dir, home), ``permissions``."""
        self.matrix = load_matrix(permissions=self.permissions, folders=(self.roles_dir, self.home))

    @property
    def custom_roles_dir(self) -> Path:
        """Where ``create_custom_agent`` writes role files."""
        return self.home / CUSTOM_ROLES_DIR

    @property
    def project_dir(self) -> Path:
        """The folder the team's file tools work in."""
        return self.home / PROJECT_DIR

    def project_folder(self, config: Mapping[str, Any] | None) -> Path:
        """The thread's project folder ``<home>/project/<project_name>/`` (created on demand).

        The name is the config's ``configurable.project_name``, else ``Team(project=...)``,
        else the thread id.
        """
        folder = self.project_dir / (named_project(config or {}, self.project) or "default")
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def reload_roles(self) -> None:
        """Load built-in roles, then ``roles_dir``, then the roles the leader created.

        A role file the team wrote that cannot be loaded is skipped and kept in
        ``role_problems``: it never makes the home unusable.
        """
        roles = load_roles(self.roles_dir, check=lambda role: check_role(self.matrix, role))
        written, self.role_problems = load_written_roles(
            self.custom_roles_dir, check=lambda role: check_role(self.matrix, role)
        )
        for problem in self.role_problems.values():
            warnings.warn(f"skipped a role file the team wrote: {problem}", RuntimeWarning, stacklevel=2)
        self.roles = roles | written

    def refresh_roles(self) -> bool:
        """Load the roles written in the (shared) home since this runtime loaded its own; whether it did.

        NOTE: a replica loads the roles when it builds the graph; a role another replica's
        leader creates later is a new file in the shared home. A thread moved here after that
        needs it (its members of that role would fail), so every server run looks for new role files.
        """
        folder = self.custom_roles_dir
        if not folder.is_dir():
            return False
        on_disk = {p.name for p in folder.glob(f"*{ROLE_FILE_SUFFIX}") if not p.name.startswith(".") and p.is_file()}
        known = {Path(role.source).name for role in self.roles.values() if self.wrote(role)}
        if not on_disk - known - {Path(problem).name for problem in self.role_problems}:
            return False
        with self._lock:  # NOTE: a role this process adds meanwhile must not be dropped by the reload
            self.reload_roles()
        return True

    def role(self, role_id: str) -> Role | None:
        """The role ``role_id``, or None; on a miss, the roles written in the home since are loaded first.

        Every lookup of a role by its id goes through here (``roles`` is for listing them).

        NOTE: another process's leader (a replica, a notebook on the same home) may have
        created it after this runtime loaded its roles, and a thread moved here needs it.
        """
        role = self.roles.get(role_id)
        if role is None and self.refresh_roles():
            role = self.roles.get(role_id)
        return role

    def add_role(self, role: Role) -> Path:
        """Write a new role file under the home folder and make the role usable at once.

        NOTE: idempotent, so that a step re-run after a crash succeeds: writing the same
        role again (same id, same content) is not an error.
        """
        with self._lock:
            path = self.custom_roles_dir / f"{role.id}.md"
            if not (path.is_file() and path.read_text(encoding="utf-8") == format_role_text(role)):
                path = write_role_file(self.custom_roles_dir, role)
            self.roles = {**self.roles, role.id: role.model_copy(update={"source": str(path)})}
        return path

    def wrote(self, role: Role) -> bool:
        """Whether ``role`` comes from a role file the team wrote (``create_custom_agent``)."""
        return (
            role.source not in ("builtin", "custom")
            and Path(role.source).resolve().parent == self.custom_roles_dir.resolve()
        )

    def is_written_role(self, role_id: str, role: Role) -> bool:
        """Whether ``role`` is exactly the role the team already wrote under ``role_id``."""
        current = self.roles.get(role_id)
        if current is None or not self.wrote(current):
            return False
        return format_role_text(current) == format_role_text(role)

    def tools_of(self, role: Role) -> list[BaseTool]:
        """The user's own tools that agents of ``role`` get."""
        shared = [] if role.is_leader else self.extra_tools.get("*", [])
        return [*shared, *self.extra_tools.get(role.id, [])]

    def memory(self) -> tuple[BaseStore, tuple[str, ...]]:
        """The memory store and this home's namespace in it (shared by every thread of the home).

        The store the running graph was given comes first (the API server's, shared by its
        replicas; a parent graph's), then ``Team(store=...)`` or the one in the checkpointer's
        database, then one in memory.
        """
        served = graph_store()
        if served is not None:
            return served, memory_namespace(self.home)
        with self._lock:
            if self.store is None:
                self.store = InMemoryStore()
        return self.store, memory_namespace(self.home)

    def now(self) -> str:
        """The clock's time as an ISO string (what records store)."""
        return self.clock.now().isoformat(timespec="seconds")

    def model_for(self, role: Role) -> BaseChatModel:
        """The chat model an agent of ``role`` talks to."""
        key = f"{role.id}|{role.model}|{role.thinking_mode}"
        if key not in self._models:
            if callable(self.model) and not isinstance(self.model, BaseChatModel):
                model: Any = self.model(role)
            else:
                model = resolve_model(self.model, role_model=role.model, thinking_mode=role.thinking_mode)
            self._models[key] = model
        return self._models[key]

    def scheduling(self) -> str:
        """The scheduler in force: ``Policy.scheduling``, where ``"auto"`` picks for the models.

        NOTE: ``"auto"`` is "completions", except for a team whose every model is a
        ``ScriptedChatModel``: scripts name request ids and expect their turns in an
        order, which only the reproducible interleaving of "lockstep" keeps.
        """
        if self.policy.scheduling != "auto":
            return self.policy.scheduling
        scripted = all(isinstance(self.model_for(role), ScriptedChatModel) for role in self.roles.values())
        return "lockstep" if scripted else "completions"


def graph_store() -> BaseStore | None:
    """The store the running graph was given (the API server's, a parent graph's), if any.

    NOTE: read from the task's context (``get_store``): a step's calls in flight run in a
    copy of the router task's context, so they see it too.
    """
    try:
        store = get_store()
    except (RuntimeError, KeyError, AttributeError):  # NOTE: outside a graph's task, or a graph without a runtime
        return None
    return store if isinstance(store, BaseStore) else None
