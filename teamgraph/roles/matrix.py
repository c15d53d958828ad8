"""The permission matrix (docs/protocols.md, "Permissions"): levels, per-role grants and limits, sensitive operations.

The matrix is data: the default below is the table of docs/protocols.md, "Permissions"; a user
overrides any entry in one YAML file (``permissions.yaml``) or with
``Team(permissions=...)``. It is checked twice: when a role loads (its tool sets must fit
its level) and on every tool call (``check_call``).

Levels rank L1 (the master) above L2 (project and HR managers), L3 (skill teacher, tool
maker, task manager) and L4 (every agent). A higher level may do what a lower one may.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from teamgraph.roles.loader import RoleFileError
from teamgraph.roles.model import LEVELS, Level, Role

PERMISSIONS_FILE = "permissions.yaml"

SET_TOOLS: dict[str, tuple[str, ...]] = {
    "leader": (
        "create_sub_agent",
        "terminate_sub_agent",
        "stop_sub_agent",
        "send_message_to_sub_agent",
        "ask_sub_agent",
        "answer_sub_agent_question",
        "create_custom_agent",
        "list_agents",
        "list_active_sub_agents",
        "get_sub_agent_status",
        "sleep",
    ),
    "member": ("ask_master", "ask_other_agent", "answer_other_agent"),
    "files": ("read_file", "write_file", "edit_file", "list_files", "file_versions", "restore_file"),
    "protocols": (
        "propose_plan",
        "review_plan",
        "shutdown_request",
        "check_shutdown_status",
        "escalate_to_user",
        "ask_user",
        "submit_plan",
        "shutdown_response",
        "request_approval",
        "update_task",
        "send_message",
    ),
    "collaboration": ("call_agent", "call_agents", "assign_agent_work"),
    "sessions": ("sessions_list", "sessions_send", "sessions_spawn"),
    "teammates": ("spawn_teammate", "list_teammates", "read_inbox", "broadcast", "plan_approval"),
    "skills": ("list_skills", "read_skill"),
    "skill_admin": ("create_skill", "set_skill", "delete_skill", "endow_skills"),
    "tool_admin": ("register_tool", "endow_tool", "list_declared_tools"),
    "agent_info": ("get_agent_config", "list_agents", "get_sub_agent_status"),
    "memory": ("remember", "recall"),
    "search": ("web_search",),
    "tasks": ("list_tasks", "create_task", "set_task_status", "set_task_priority"),
    "admin": (
        "list_agents",
        "get_sub_agent_status",
        "get_agent_config",
        "set_agent_config",
        "delete_agent",
        "set_permissions",
    ),
    "commands": ("run_command",),
}
"""Tool set -> the names of its tools (both sides); a test keeps it equal to the built tools."""

CONDITION_NAMES = ("always", "high_risk_skill", "core_config", "command_not_allowed")
"""The ``when`` of a sensitive operation (``governance.operations.CONDITIONS`` implements them)."""
GOVERNED_TOOLS = (
    "create_skill",
    "set_skill",
    "delete_skill",
    "run_command",
    "set_agent_config",
    "delete_agent",
    "create_custom_agent",
    "set_permissions",
    "register_tool",
    "endow_tool",
)
"""Tools whose act can wait for an approval (``governance.operations.EXECUTORS`` performs them)."""

DEFAULT_MATRIX: dict[str, Any] = {
    "tool_sets": {
        "leader": "L1",
        "member": "L4",
        "files": "L4",
        "protocols": "L4",
        "collaboration": "L4",
        "sessions": "L4",
        "teammates": "L4",
        "skills": "L4",
        "skill_admin": "L1",
        "tasks": "L2",
        "admin": "L2",
        "commands": "L3",
        "tool_admin": "L1",
        "agent_info": "L2",
        "memory": "L4",
        "search": "L4",
    },
    "tools": {
        "assign_agent_work": "L1",
        "list_tasks": "L4",
        "spawn_teammate": "L1",
        "create_task": "L2",
        "set_task_status": "L2",
        "set_task_priority": "L2",
        "get_agent_config": "L2",
        "list_agents": "L2",
        "get_sub_agent_status": "L2",
        "set_agent_config": "L1",
        "delete_agent": "L1",
        "set_permissions": "L1",
    },
    "roles": {
        "team-leader": {
            "resources": ["all project files"],
            "constraint": "does not execute technical tasks itself",
        },
        "project-manager": {
            "grant": ["get_agent_*", "set_task_*", "call_agent"],
            "deny": ["set_agent_config", "delete_agent", "set_permissions", "run_command"],
            "resources": ["project documents", "the task list"],
            "constraint": "does not change system configuration",
        },
        "task-manager": {
            "grant": ["tasks", "assign_agent_work"],
            "deny": ["create_skill", "set_skill", "delete_skill", "endow_skills"],
            "resources": ["the task board"],
            "constraint": "does not change skill configuration",
        },
        "skill-teacher": {
            "grant": ["skill_admin"],
            "deny": ["set_agent_config", "delete_agent", "set_permissions"],
            "resources": ["skill files", "prompt files"],
            "constraint": "does not change core configuration",
        },
        "tool-maker": {
            "grant": ["tool_admin"],
            "deny": ["set_agent_config", "delete_agent"],
            "resources": ["the tool code base"],
            "constraint": "does not change agent configuration",
        },
        "hr-manager": {
            "grant": ["admin"],
            "deny": ["create_skill", "set_skill", "delete_skill", "set_permissions", "run_command"],
            "resources": ["agent configuration"],
            "constraint": "does not change skill content",
        },
        "full-stack-engineer": {"grant": ["commands"]},
        "code-reviewer": {"grant": ["commands"]},
    },
    "sensitive": {
        "delete_skill": {"tools": ["delete_skill"]},
        "delete_agent": {"tools": ["delete_agent"]},
        "create_high_risk_skill": {"tools": ["create_skill", "set_skill"], "when": "high_risk_skill"},
        "change_core_config": {
            "tools": ["set_agent_config", "create_custom_agent", "set_permissions"],
            "when": "core_config",
        },
        "run_unlisted_command": {"tools": ["run_command"], "when": "command_not_allowed"},
        "endow_tool": {"tools": ["endow_tool"]},
    },
}
"""Roles, levels and sensitive operations (docs/protocols.md, "Permissions") as data, shaped like permissions.yaml."""


class RoleRule(BaseModel):
    """What one role may do beyond its level, and its limits (its boundary in words).

    Attributes:
        grant: Tool names, tool sets or patterns (``get_agent_*``) allowed whatever the level.
        deny: Tool names or patterns refused whatever the level.
        resources: What the role works on. Words are documentation; an entry that is a
            path in the project folder (it ends with ``/`` or holds a ``*``, e.g.
            ``web/``) is enforced: when a role has any, its file writes must fall
            under one of them (``writable``).
        constraint: The role's boundary, in words.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    grant: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    constraint: str = ""


class SensitiveRule(BaseModel):
    """A sensitive operation: calls of these tools wait for an approval.

    Attributes:
        tools: The tools whose calls may be this operation.
        when: A condition from ``governance.operations.CONDITIONS`` (``always``...).
        master_alone: Whether the master's own call runs without an approval (the master is
            the approver: docs/protocols.md, "Permissions"). False sends the master's own call to a person.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: tuple[str, ...]
    when: str = "always"
    master_alone: bool = True

    @field_validator("tools")
    @classmethod
    def _governed(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [t for t in value if t not in GOVERNED_TOOLS]
        if unknown:
            can = ", ".join(GOVERNED_TOOLS)
            raise ValueError(f"{', '.join(unknown)} cannot wait for an approval (tools that can: {can})")
        return value

    @field_validator("when")
    @classmethod
    def _known_condition(cls, value: str) -> str:
        if value not in CONDITION_NAMES:
            raise ValueError(f"unknown condition '{value}' (known: {', '.join(CONDITION_NAMES)})")
        return value


class PermissionMatrix(BaseModel):
    """The whole matrix: set and tool levels, role rules, sensitive operations."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_sets: dict[str, Level] = Field(default_factory=dict)
    tools: dict[str, Level] = Field(default_factory=dict)
    roles: dict[str, RoleRule] = Field(default_factory=dict)
    sensitive: dict[str, SensitiveRule] = Field(default_factory=dict)

    def merged(self, override: Mapping[str, Any]) -> PermissionMatrix:
        """This matrix with ``override``'s entries replacing the same keys, section by section."""
        data = self.model_dump()
        for section, entries in override.items():
            if not isinstance(entries, Mapping):
                raise ValueError(f"section '{section}' must be a mapping of keys to values")
            data[section] = {**data.get(section, {}), **entries}
        return PermissionMatrix.model_validate(data)


class PermissionsError(ValueError):
    """A permissions file or ``Team(permissions=...)`` value that cannot be used."""


def rank(level: str) -> int:
    """1 for L1 (highest) ... 4 for L4."""
    return LEVELS.index(level) + 1


def set_of(tool: str) -> str | None:
    """The tool set a tool belongs to (the first that lists it)."""
    return next((s for s, names in SET_TOOLS.items() if tool in names), None)


def _matches(patterns: tuple[str, ...], name: str) -> bool:
    """Whether a tool name matches a pattern, or is in a tool set that the patterns name."""
    return any(fnmatch.fnmatchcase(name, p) or name in SET_TOOLS.get(p, ()) for p in patterns)


def tool_level(matrix: PermissionMatrix, tool: str) -> str:
    """The lowest level allowed to call ``tool`` (its own entry, else its set's, else L4)."""
    owner = set_of(tool)
    return matrix.tools.get(tool) or (matrix.tool_sets.get(owner, "L4") if owner else "L4")


def may_call(matrix: PermissionMatrix, role: Role, tool: str) -> bool:
    """Whether an agent of ``role`` may call ``tool``."""
    rule = matrix.roles.get(role.id, RoleRule())
    if _matches(rule.deny, tool):
        return False
    return rank(role.level) <= rank(tool_level(matrix, tool)) or _matches(rule.grant, tool)


def may_hold(matrix: PermissionMatrix, role: Role, tool_set: str) -> bool:
    """Whether a role file of ``role``'s level may list ``tool_set``."""
    rule = matrix.roles.get(role.id, RoleRule())
    return rank(role.level) <= rank(matrix.tool_sets.get(tool_set, "L4")) or tool_set in rule.grant


def who_may(matrix: PermissionMatrix, tool: str) -> str:
    """``"levels L1, L2 except roles team-leader, or roles hr-manager"``: who may call ``tool``, for errors.

    A role the matrix denies the tool is never listed among those who may: it is named
    as an exception to its level.
    """
    level = tool_level(matrix, tool)
    levels = ", ".join(LEVELS[: rank(level)])
    denied = sorted(r for r, rule in matrix.roles.items() if _matches(rule.deny, tool))
    granted = sorted(r for r, rule in matrix.roles.items() if _matches(rule.grant, tool) and r not in denied)
    return (
        f"levels {levels}"
        + (f" except roles {', '.join(denied)}" if denied else "")
        + (f", or roles {', '.join(granted)}" if granted else "")
    )


def path_resources(matrix: PermissionMatrix, role_id: str) -> tuple[str, ...]:
    """The project paths ``role_id``'s resources limit its writes to (empty: no limit)."""
    rule = matrix.roles.get(role_id, RoleRule())
    return tuple(r for r in rule.resources if r.endswith("/") or "*" in r)


def writable(matrix: PermissionMatrix, role_id: str, path: str) -> bool:
    """Whether an agent of ``role_id`` may write ``path`` (relative to the project folder, POSIX form)."""
    limits = path_resources(matrix, role_id)
    return not limits or any(
        path.startswith(limit) if limit.endswith("/") else fnmatch.fnmatchcase(path, limit) for limit in limits
    )


def refusal(matrix: PermissionMatrix, role: Role, agent: str, tool: str) -> str | None:
    """Why ``agent`` (of ``role``) may not call ``tool`` now, or None if it may."""
    if may_call(matrix, role, tool):
        return None
    rule = matrix.roles.get(role.id, RoleRule())
    why = (
        f"the matrix denies it to {role.id} ({rule.constraint})"
        if _matches(rule.deny, tool)
        else (f"it needs level {tool_level(matrix, tool)}")
    )
    return (
        f"permission denied: {agent} ({role.id}, level {role.level}) may not call {tool}: {why}. "
        f"Who may: {who_may(matrix, tool)}. Ask the Team Leader (ask_master) to have it done."
    )


def check_role(matrix: PermissionMatrix, role: Role) -> None:
    """Refuse a role whose tool sets exceed its level.

    Raises:
        RoleFileError: Naming the tool set, the level and the fix.
    """
    for name in role.tools:
        if may_hold(matrix, role, name):
            continue
        needed = matrix.tool_sets.get(name, "L4")
        raise RoleFileError(
            role.source,
            field="tools",
            problem=f"tool set '{name}' needs level {needed} or higher, but this role is level {role.level}",
            fix=(
                f"remove '{name}' from tools, set 'level: {needed}' (raising a level is a sensitive change), "
                f"or grant it in {PERMISSIONS_FILE}: roles: {{{role.id}: {{grant: [{name}]}}}}"
            ),
        )


def load_matrix(
    *, permissions: PermissionMatrix | Mapping[str, Any] | str | Path | None, folders: tuple[Path | None, ...]
) -> PermissionMatrix:
    """The default matrix, overridden by ``permissions.yaml`` in each folder, then by ``permissions``.

    Args:
        permissions: A matrix, a mapping shaped like ``DEFAULT_MATRIX`` (partial), or a YAML file path.
        folders: Folders that may hold ``permissions.yaml``, in increasing priority.

    Returns:
        The matrix the team runs by.

    Raises:
        PermissionsError: Naming the file (or value), what is wrong and how to fix it.
    """
    matrix = PermissionMatrix.model_validate(DEFAULT_MATRIX)
    sources: list[tuple[str, Any]] = [
        (str(folder / PERMISSIONS_FILE), folder / PERMISSIONS_FILE)
        for folder in folders
        if folder is not None and (folder / PERMISSIONS_FILE).is_file()
    ]
    if isinstance(permissions, PermissionMatrix):
        return permissions
    if isinstance(permissions, (str, Path)):
        sources.append((str(permissions), Path(permissions)))
    elif permissions is not None:
        sources.append(("Team(permissions=...)", permissions))
    for where, source in sources:
        matrix = apply_override(matrix, where, source)
    return matrix


def apply_override(matrix: PermissionMatrix, where: str, source: Any) -> PermissionMatrix:
    """``matrix`` with the overrides in ``source`` (a mapping or a YAML file); errors name ``where``."""
    if isinstance(source, Path):
        try:
            source = yaml.safe_load(source.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise PermissionsError(f"{where}: cannot read it ({exc}). Fix: write valid YAML.") from None
    if not isinstance(source, Mapping):
        raise PermissionsError(f"{where}: expected a mapping with {', '.join(DEFAULT_MATRIX)}. Fix: see the README.")
    unknown = sorted(set(source) - set(DEFAULT_MATRIX))
    if unknown:
        raise PermissionsError(
            f"{where}: unknown section(s) {', '.join(map(str, unknown))}. Fix: use only {', '.join(DEFAULT_MATRIX)}."
        )
    try:
        return matrix.merged(source)
    except (ValidationError, ValueError) as exc:
        raise PermissionsError(
            f"{where}: {_problem(exc)}. Fix: levels are {', '.join(LEVELS)}; "
            "see DEFAULT_MATRIX in teamgraph/roles/matrix.py for the shape."
        ) from None


def _problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        return f"'{'.'.join(str(p) for p in error['loc'])}': {error['msg'].lower()} (got {error.get('input')!r})"
    return str(exc)


def dump_matrix(matrix: PermissionMatrix) -> str:
    """The matrix as ``permissions.yaml`` text."""
    return yaml.safe_dump(matrix.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
