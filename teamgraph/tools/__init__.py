"""Tool sets, one module each; a role file's ``tools`` list picks them."""

from __future__ import annotations

from collections.abc import Callable

from langchain_core.tools import BaseTool

from teamgraph.roles import Role
from teamgraph.runtime import TeamRuntime
from teamgraph.tools.files import make_file_tools
from teamgraph.tools.leader import make_leader_tools
from teamgraph.tools.member import make_member_tools

TOOL_SET_FACTORIES: dict[str, Callable[[TeamRuntime], list[BaseTool]]] = {
    "leader": make_leader_tools,
    "member": make_member_tools,
    "files": make_file_tools,
}
"""Tool set name -> factory. Sets not built yet (later issues) contribute no tools."""


def tools_for_role(runtime: TeamRuntime, role: Role) -> list[BaseTool]:
    """The tools an agent of ``role`` gets: the union of its tool sets, in order."""
    tools: dict[str, BaseTool] = {}
    for name in role.tools:
        factory = TOOL_SET_FACTORIES.get(name)
        for t in factory(runtime) if factory else ():
            tools.setdefault(t.name, t)
    return list(tools.values())


__all__ = ["TOOL_SET_FACTORIES", "tools_for_role"]
