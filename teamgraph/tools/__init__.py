"""Tool sets, one module each; a role file's ``tools`` list picks them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.tools import BaseTool

from teamgraph.governance.gate import GATE_KEY, Gate
from teamgraph.roles import Role
from teamgraph.runtime import TeamRuntime
from teamgraph.tools.admin import ADMIN_TOOLS, AGENT_INFO_TOOLS
from teamgraph.tools.collaboration import COLLABORATION_TOOLS
from teamgraph.tools.commands import COMMAND_TOOLS
from teamgraph.tools.context import TeamView, ToolContext
from teamgraph.tools.declared import TOOL_ADMIN_TOOLS, declared_tools
from teamgraph.tools.files import FILE_TOOLS
from teamgraph.tools.leader import LEADER_TOOLS
from teamgraph.tools.mcp_tools import tools_for
from teamgraph.tools.member import MEMBER_TOOLS
from teamgraph.tools.memory import MEMORY_TOOLS
from teamgraph.tools.protocols import LEADER_PROTOCOL_TOOLS, MEMBER_PROTOCOL_TOOLS
from teamgraph.tools.search import SEARCH_TOOLS
from teamgraph.tools.sessions import SESSION_TOOLS
from teamgraph.tools.skills import SKILL_ADMIN_TOOLS, SKILL_TOOLS
from teamgraph.tools.tasks import TASK_TOOLS
from teamgraph.tools.teammates import LEADER_TEAMMATE_TOOLS, MEMBER_TEAMMATE_TOOLS


@dataclass(frozen=True)
class ToolSet:
    """A named set of module-level tools: the same on both sides, or one list per side."""

    leader: Sequence[BaseTool]
    member: Sequence[BaseTool] | None = None
    """A member's side, when it differs from the leader's."""

    def __call__(self, runtime: TeamRuntime, role: Role) -> list[BaseTool]:
        """The set's tools for ``role``'s side (leader or member).

        Args:
            runtime: The team runtime. NOTE: unused (tools read it from their ToolContext);
                kept so the table keeps the factories' signature.
            role: The role whose side is wanted.

        Returns:
            The tools, ungated (``tool_set`` gives a team its gated copies).
        """
        del runtime
        return list(self.leader if role.is_leader or self.member is None else self.member)


TOOL_SET_FACTORIES: dict[str, ToolSet] = {
    "leader": ToolSet(LEADER_TOOLS),
    "member": ToolSet(MEMBER_TOOLS),
    "files": ToolSet(FILE_TOOLS),
    "protocols": ToolSet(LEADER_PROTOCOL_TOOLS, MEMBER_PROTOCOL_TOOLS),
    "collaboration": ToolSet(COLLABORATION_TOOLS),
    "sessions": ToolSet(SESSION_TOOLS),
    "teammates": ToolSet(LEADER_TEAMMATE_TOOLS, MEMBER_TEAMMATE_TOOLS),
    "skills": ToolSet(SKILL_TOOLS),
    "skill_admin": ToolSet(SKILL_ADMIN_TOOLS),
    "tasks": ToolSet(TASK_TOOLS),
    "admin": ToolSet(ADMIN_TOOLS),
    "commands": ToolSet(COMMAND_TOOLS),
    "tool_admin": ToolSet(TOOL_ADMIN_TOOLS),
    "agent_info": ToolSet(AGENT_INFO_TOOLS),
    "memory": ToolSet(MEMORY_TOOLS),
    "search": ToolSet(SEARCH_TOOLS),
}
"""Tool set name -> its tools (the sets a role file's ``tools`` list may name)."""


def builtin_tool_names() -> set[str]:
    """The names of every tool of every set, on both sides (a user's tool may not take one)."""
    return {t.name for ts in TOOL_SET_FACTORIES.values() for t in (*ts.leader, *(ts.member or ()))}


def tool_set(runtime: TeamRuntime, name: str, role: Role) -> list[BaseTool]:
    """The tools of set ``name`` for ``role``'s side (leader or member), built once per team.

    Each carries the team's permission gate (``run_tool_calls`` checks every call with it).
    """
    key = (name, role.is_leader)
    if key not in runtime.tool_sets:
        factory = TOOL_SET_FACTORIES.get(name)
        gate = Gate(runtime)
        # NOTE: a shallow copy per team: the tools are module-level, shared by every team of the process.
        runtime.tool_sets[key] = [
            t.model_copy(update={"metadata": {**(t.metadata or {}), GATE_KEY: gate}})
            for t in (factory(runtime, role) if factory else [])
        ]
    return runtime.tool_sets[key]


def tools_for_role(runtime: TeamRuntime, role: Role) -> list[BaseTool]:
    """The tools an agent of ``role`` gets: its tool sets, then the user's own tools."""
    tools: dict[str, BaseTool] = {}
    for name in role.tools:
        if name == "search" and runtime.search is None:
            continue  # NOTE: no provider configured: the tool is not offered at all
        for t in tool_set(runtime, name, role):
            tools.setdefault(t.name, t)
    mcp = tools_for(runtime.mcp_tools, role.mcp, leader=role.is_leader)
    for t in [*runtime.tools_of(role), *declared_tools(runtime, role), *mcp]:
        tools.setdefault(t.name, t)
    return list(tools.values())


WORK_TOOL_SETS = ("files", "commands")
"""Sets whose tools do the work (as opposed to talking to the team)."""


def work_tool_names(runtime: TeamRuntime, role: Role) -> set[str]:
    """Names of the work tools of ``role``: a role that requires a plan waits for it to use them."""
    names = {t.name for s in WORK_TOOL_SETS if s in role.tools for t in tool_set(runtime, s, role)}
    return names | {t.name for t in runtime.tools_of(role)}


__all__ = [
    "TOOL_SET_FACTORIES",
    "WORK_TOOL_SETS",
    "builtin_tool_names",
    "TeamView",
    "ToolContext",
    "ToolSet",
    "tools_for_role",
    "work_tool_names",
]
