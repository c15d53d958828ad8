"""Agent management tools for HR (seed 000 §4): read and change role configurations.

Changing a role's tools or level, deleting a role and changing the permission matrix
are core configuration: the matrix defers them behind an approval.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.prebuilt import InjectedState

from teamgraph.governance import admin
from teamgraph.runtime import TeamRuntime
from teamgraph.tools.context import View, fail
from teamgraph.tools.leader import make_leader_tools
from teamgraph.tools.skills import governed

READ_ONLY_LEADER_TOOLS = ("list_agents", "get_sub_agent_status")
"""The leader's read-only tools HR (L2) may use too."""


def make_admin_tools(runtime: TeamRuntime) -> list[BaseTool]:
    """Build get_agent_config, set_agent_config, delete_agent, set_permissions (+ list_agents, get_sub_agent_status).

    Args:
        runtime: The team runtime (its role catalogue and home).

    Returns:
        The tools.
    """

    @tool
    def get_agent_config(role_id: str) -> str:
        """A role's configuration: description, prompt, model, thinking mode, tools, level, permissions.

        Args:
            role_id: The role's id, e.g. "researcher".
        """
        try:
            return json.dumps(admin.agent_config(runtime, role_id), ensure_ascii=False)
        except admin.AgentConfigError as exc:
            raise fail(str(exc)) from None

    @tool
    def set_agent_config(
        role_id: str,
        field: str,
        value: Any,
        view: Annotated[View, InjectedState("view")],
        config: RunnableConfig,
    ) -> str:
        """Change one field of a role: description, prompt, model, thinking_mode (tools, level need approval).

        Args:
            role_id: The role's id.
            field: description, prompt, model, thinking_mode, tools or level.
            value: The new value (a list of tool sets for tools, e.g. ["member", "files"]).
        """
        return governed(runtime, "set_agent_config", {"role_id": role_id, "field": field, "value": value}, view, config)

    @tool
    def delete_agent(role_id: str, view: Annotated[View, InjectedState("view")], config: RunnableConfig) -> str:
        """Delete a role created in this team (a sensitive operation: it waits for approval).

        Args:
            role_id: The role's id.
        """
        return governed(runtime, "delete_agent", {"role_id": role_id}, view, config)

    @tool
    def set_permissions(yaml: str, view: Annotated[View, InjectedState("view")], config: RunnableConfig) -> str:
        """Change the permission matrix (core configuration: it waits for approval).

        Args:
            yaml: The entries to change, in permissions.yaml form, e.g. "roles: {researcher: {grant: [run_command]}}".
        """
        return governed(runtime, "set_permissions", {"yaml": yaml}, view, config)

    shared = [t for t in make_leader_tools(runtime) if t.name in READ_ONLY_LEADER_TOOLS]
    return [*shared, get_agent_config, set_agent_config, delete_agent, set_permissions]
