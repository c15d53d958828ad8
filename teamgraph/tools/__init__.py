"""Tool sets, one module each; a role file's ``tools`` list picks them."""

from __future__ import annotations

from collections.abc import Callable

from langchain_core.tools import BaseTool

from teamgraph.governance.gate import GATE_KEY, Gate
from teamgraph.roles import Role
from teamgraph.runtime import TeamRuntime
from teamgraph.tools.admin import make_admin_tools
from teamgraph.tools.collaboration import make_collaboration_tools
from teamgraph.tools.commands import make_command_tools
from teamgraph.tools.files import make_file_tools
from teamgraph.tools.leader import make_leader_tools
from teamgraph.tools.member import make_member_tools
from teamgraph.tools.protocols import make_protocol_tools
from teamgraph.tools.sessions import make_session_tools
from teamgraph.tools.teammates import make_teammate_tools
from teamgraph.tools.skills import make_skill_tools
from teamgraph.tools.tasks import make_task_tools

TOOL_SET_FACTORIES: dict[str, Callable[[TeamRuntime, Role], list[BaseTool]]] = {
    "leader": lambda runtime, role: make_leader_tools(runtime),
    "member": lambda runtime, role: make_member_tools(runtime),
    "files": lambda runtime, role: make_file_tools(runtime),
    "protocols": lambda runtime, role: make_protocol_tools(runtime, leader=role.is_leader),
    "collaboration": lambda runtime, role: make_collaboration_tools(runtime),
    "sessions": lambda runtime, role: make_session_tools(runtime),
    "teammates": lambda runtime, role: make_teammate_tools(runtime, leader=role.is_leader),
    "skills": lambda runtime, role: make_skill_tools(runtime)[:2],
    "skill_admin": lambda runtime, role: make_skill_tools(runtime)[2:],
    "tasks": lambda runtime, role: make_task_tools(runtime),
    "admin": lambda runtime, role: make_admin_tools(runtime),
    "commands": lambda runtime, role: make_command_tools(runtime),
}
"""Tool set name -> factory (the sets a role file's ``tools`` list may name)."""


def tool_set(runtime: TeamRuntime, name: str, role: Role) -> list[BaseTool]:
    """The tools of set ``name`` for ``role``'s side (leader or member), built once per team.

    Each carries the team's permission gate (``run_tool_calls`` checks every call with it).
    """
    key = (name, role.is_leader)
    if key not in runtime.tool_sets:
        factory = TOOL_SET_FACTORIES.get(name)
        built = factory(runtime, role) if factory else []
        gate = Gate(runtime)
        for t in built:
            t.metadata = {**(t.metadata or {}), GATE_KEY: gate}
        runtime.tool_sets[key] = built
    return runtime.tool_sets[key]


def tools_for_role(runtime: TeamRuntime, role: Role) -> list[BaseTool]:
    """The tools an agent of ``role`` gets: its tool sets, then the user's own tools."""
    tools: dict[str, BaseTool] = {}
    for name in role.tools:
        for t in tool_set(runtime, name, role):
            tools.setdefault(t.name, t)
    for t in runtime.tools_of(role):
        tools.setdefault(t.name, t)
    return list(tools.values())


WORK_TOOL_SETS = ("files", "commands")
"""Sets whose tools do the work (as opposed to talking to the team)."""


def work_tool_names(runtime: TeamRuntime, role: Role) -> set[str]:
    """Names of the work tools of ``role``: a role that requires a plan waits for it to use them."""
    names = {t.name for s in WORK_TOOL_SETS if s in role.tools for t in tool_set(runtime, s, role)}
    return names | {t.name for t in runtime.tools_of(role)}


__all__ = ["TOOL_SET_FACTORIES", "WORK_TOOL_SETS", "tools_for_role", "work_tool_names"]
