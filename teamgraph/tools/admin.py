"""Agent management tools for HR (docs/protocols.md): read and change role configurations.

Changing a role's tools or level, deleting a role and changing the permission matrix
are core configuration: the matrix defers them behind an approval.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.tools import BaseTool, tool

from teamgraph.governance import admin
from teamgraph.tools import errors
from teamgraph.tools.context import ToolContext, fail
from teamgraph.tools.leader import get_sub_agent_status, list_agents
from teamgraph.tools.skills import governed


@tool(parse_docstring=True)
def get_agent_config(role_id: str, context: ToolContext) -> str:
    """A role's configuration: description, prompt, model, thinking mode, tools, level, permissions.

    Args:
        role_id: The role's id, e.g. "researcher".
    """
    try:
        return json.dumps(admin.agent_config(context.runtime, role_id), ensure_ascii=False)
    except admin.AgentConfigError as exc:
        raise fail(str(exc), code=errors.UNKNOWN_ROLE) from None


@tool(parse_docstring=True)
def set_agent_config(role_id: str, field: str, value: Any, context: ToolContext) -> str:
    """Change one field of a role: description, prompt, model, thinking_mode (tools, level need approval).

    Args:
        role_id: The role's id.
        field: description, prompt, model, thinking_mode, tools or level.
        value: The new value (a list of tool sets for tools, e.g. ["member", "files"]).
    """
    return governed(context, "set_agent_config", {"role_id": role_id, "field": field, "value": value})


@tool(parse_docstring=True)
def delete_agent(role_id: str, context: ToolContext) -> str:
    """Delete a role created in this team (a sensitive operation: it waits for approval).

    Args:
        role_id: The role's id.
    """
    return governed(context, "delete_agent", {"role_id": role_id})


@tool(parse_docstring=True)
def set_permissions(yaml: str, context: ToolContext) -> str:
    """Change the permission matrix (core configuration: it waits for approval).

    Args:
        yaml: The entries to change, in permissions.yaml form, e.g. "roles: {researcher: {grant: [run_command]}}".
    """
    return governed(context, "set_permissions", {"yaml": yaml})


READ_ONLY_LEADER_TOOLS: list[BaseTool] = [list_agents, get_sub_agent_status]
"""The leader's read-only tools HR (L2) may use too."""
ADMIN_TOOLS: list[BaseTool] = [
    *READ_ONLY_LEADER_TOOLS, get_agent_config, set_agent_config, delete_agent, set_permissions,
]  # fmt: skip
"""The ``admin`` tool set."""
AGENT_INFO_TOOLS: list[BaseTool] = [get_agent_config, *READ_ONLY_LEADER_TOOLS]
"""The ``agent_info`` tool set: the ``get_agent_*`` reads the project manager is granted (collaboration spec §4.1)."""
