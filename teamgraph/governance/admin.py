"""Agent management (HR; docs/protocols.md, "Permissions"): read and change role definitions, create and delete roles.

A change is written as a role file in the home's ``roles/`` folder (so it survives a
restart and overrides a built-in role of the same id) and used at once for prompts,
descriptions and permission checks; a changed model or tool set reaches agents when the
team is compiled again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from teamgraph.roles import Role, RoleFileError
from teamgraph.roles.matrix import check_role
from teamgraph.runtime import TeamRuntime

CONFIG_FIELDS = ("description", "prompt", "model", "thinking_mode", "tools", "level")
"""Fields ``set_agent_config`` may change."""
CORE_FIELDS = frozenset({"tools", "level"})
"""Fields whose change is core configuration (a sensitive operation)."""


class AgentConfigError(ValueError):
    """A role id, field or value that cannot be used (the message says how to fix it)."""


def require_role(runtime: TeamRuntime, role_id: str) -> Role:
    """The role ``role_id``, or an error that lists the role ids."""
    role = runtime.role(role_id)
    if role is None:
        raise AgentConfigError(f"No role '{role_id}'. Roles: {', '.join(runtime.roles)}.")
    return role


def agent_config(runtime: TeamRuntime, role_id: str) -> dict[str, Any]:
    """A role's configuration as the HR tools show it (with its permission rule)."""
    role = require_role(runtime, role_id)
    rule = runtime.matrix.roles.get(role.id)
    return {
        **role.model_dump(mode="json", exclude={"prompt"}),
        "prompt": role.prompt,
        "grant": list(rule.grant) if rule else [],
        "deny": list(rule.deny) if rule else [],
        "constraint": rule.constraint if rule else "",
    }


def validated_role(runtime: TeamRuntime, fields: dict[str, Any], *, source: str) -> Role:
    """Build a role from ``fields`` and check it against the matrix (errors name the field)."""
    try:
        role = Role.model_validate({**fields, "source": source})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'role'}: {e['msg']}" for e in exc.errors())
        raise AgentConfigError(f"Invalid role: {problems}.") from None
    try:
        check_role(runtime.matrix, role)
    except RoleFileError as exc:
        raise AgentConfigError(f"{exc.problem}. Fix: {exc.fix}") from None
    return role


def set_agent_config(runtime: TeamRuntime, role_id: str, field: str, value: Any) -> str:
    """Change one field of a role and save it as a role file under the home."""
    if field not in CONFIG_FIELDS:
        raise AgentConfigError(f"Field '{field}' cannot be set. Fields: {', '.join(CONFIG_FIELDS)}.")
    role = require_role(runtime, role_id)
    if role.is_leader and field in CORE_FIELDS:
        raise AgentConfigError(f"The Team Leader's {field} cannot be changed.")
    data = {**role.model_dump(exclude={"source"}), field: value}
    updated = validated_role(runtime, data, source=role.source)
    path = runtime.add_role(updated)
    return f"{role_id}.{field} set; saved to {path}."


def create_role(runtime: TeamRuntime, fields: dict[str, Any]) -> str:
    """Create a new role (``create_custom_agent``) saved as a role file."""
    role = validated_role(runtime, {k: v for k, v in fields.items() if v is not None}, source="custom")
    # NOTE: the same role written again (a step re-run after a crash) is success.
    if role.id in runtime.roles and not runtime.is_written_role(role.id, role):
        raise AgentConfigError(f"A role with id '{role.id}' already exists. Choose another id.")
    try:
        # NOTE: a model this team cannot build is refused now, not at the member's first step.
        runtime.model_for(role)
    except Exception as exc:  # noqa: BLE001 - whatever the model factory raises, the leader is told
        raise AgentConfigError(
            f"model {role.model!r} cannot be used by this team: {exc}. Omit model to use the team's own."
        ) from None
    runtime.add_role(role)
    return (
        f"Role '{role.id}' ({role.name}, level {role.level}) created. Create members with "
        f"create_sub_agent(role_id='{role.id}')."
    )


def delete_role(runtime: TeamRuntime, role_id: str, in_use: list[str]) -> str:
    """Delete a role created in the home (built-in and ``roles_dir`` roles, and roles in use, are refused)."""
    role = require_role(runtime, role_id)
    if role_id in in_use:
        raise AgentConfigError(
            f"Role '{role_id}' has members in this thread; terminate them first (terminate_sub_agent), then delete it."
        )
    path = runtime.custom_roles_dir / f"{role.id}.md"
    if role.is_leader or not path.is_file() or Path(role.source).resolve() != path.resolve():
        raise AgentConfigError(
            f"'{role_id}' is not a role created in this team's home ({role.source}); only those can be deleted."
        )
    path.unlink()
    runtime.reload_roles()
    return f"Role '{role_id}' deleted ({path})."
