"""The tool maker's tools (the collaboration spec §4.1), and the declared tools they give other roles.

``register_tool`` declares a tool (``teamgraph/governance/declared.py``); ``endow_tool``
gives it to a role once the master approves; ``declared_tools`` builds the tools an
agent of that role then gets. A declared tool runs its filled-in command without a
shell in the project folder, and only when the command is on the allow-list.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, tool
from pydantic import Field, create_model

from teamgraph.governance import commands, declared
from teamgraph.roles import Role
from teamgraph.runtime import TeamRuntime
from teamgraph.tools import errors
from teamgraph.tools.context import ToolContext, fail
from teamgraph.tools.files import project_root
from teamgraph.tools.skills import governed


@tool(parse_docstring=True)
def register_tool(
    name: str, description: str, command: str, context: ToolContext, arguments: dict[str, str] | None = None
) -> str:
    """Declare a tool other roles can be given: a command run without a shell under the allow-list.

    Args:
        name: snake_case, e.g. "lint_file".
        description: What it does, for the agents that will use it.
        command: The program and its arguments with {argument} placeholders, e.g. "ruff check {path}".
        arguments: Each argument's name and description, e.g. {"path": "the file to check"}.
    """
    args = {"name": name, "description": description, "command": command, "arguments": arguments or {}}
    return governed(context, "register_tool", args)


@tool(parse_docstring=True)
def endow_tool(tool_name: str, role_id: str, context: ToolContext) -> str:
    """Give a declared tool to a role (a sensitive operation: it waits for the master's approval).

    Args:
        tool_name: The declared tool's name.
        role_id: The role whose agents get it, e.g. "full-stack-engineer".
    """
    return governed(context, "endow_tool", {"tool_name": tool_name, "role_id": role_id})


@tool(parse_docstring=True, error_on_invalid_docstring=False)  # NOTE: no argument, no Args: section
def list_declared_tools(context: ToolContext) -> str:
    """List the declared tools and the roles that have them."""
    home = context.runtime.home
    given = declared.endowments(home)
    lines = []
    for path in sorted((home / declared.TOOLS_DIR).glob("*.yaml")):
        if path.name == declared.ENDOWMENTS_FILE:
            continue
        roles = [role for role, names in given.items() if path.stem in names]
        lines.append(f"{path.stem}: roles {', '.join(roles) or 'none yet'}")
    return "\n".join(lines) or "No declared tools yet."


def _runner(spec: declared.DeclaredTool) -> Any:
    def run(context: ToolContext, **values: str) -> str:
        command = spec.render(values)
        if not commands.is_allowed(context.runtime.policy.commands, command):
            raise fail(
                f"{spec.name} would run '{command}', which is not on the team's allow-list (Policy.commands). "
                "Ask the Team Leader (ask_master) to allow it, or use run_command (it asks for approval).",
                code=errors.FORBIDDEN,
            )
        try:
            return commands.run_command(command, cwd=project_root(context))
        except commands.CommandError as exc:
            raise fail(f"{spec.name} failed: {exc}", code=errors.BAD_ARGUMENT) from None

    return run


def build(spec: declared.DeclaredTool) -> BaseTool:
    """A declared tool as a LangChain tool: its arguments text, the context injected by type."""
    fields: dict[str, Any] = {arg: (str, Field(description=text)) for arg, text in spec.arguments.items()}
    schema = create_model(f"{spec.name}_args", context=(ToolContext, ...), **fields)
    description = f"{spec.description} (runs: {spec.command})"
    return StructuredTool(name=spec.name, description=description, args_schema=schema, func=_runner(spec))


def declared_tools(runtime: TeamRuntime, role: Role) -> list[BaseTool]:
    """The declared tools agents of ``role`` were endowed with."""
    return [build(spec) for spec in declared.endowed(runtime.home, role.id)]


TOOL_ADMIN_TOOLS: list[BaseTool] = [register_tool, endow_tool, list_declared_tools]
"""The ``tool_admin`` tool set (the tool maker's)."""
