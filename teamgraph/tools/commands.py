"""``run_command``: run a program in the thread's project folder (no shell, a time-out, clipped output).

Commands on ``Policy.commands`` run at once; any other command is a sensitive
operation and waits for an approval (the permission matrix decides).
"""

from __future__ import annotations

from langchain_core.tools import BaseTool, tool

from teamgraph.governance.commands import DEFAULT_TIMEOUT
from teamgraph.tools.context import ToolContext
from teamgraph.tools.skills import governed


@tool(parse_docstring=True)
def run_command(command: str, context: ToolContext, timeout: float = DEFAULT_TIMEOUT) -> str:
    """Run a command in the project folder and return its exit code and output.

    No shell: pipes, ';' and redirections are not interpreted. Commands outside the
    team's allow-list wait for approval.

    Args:
        command: A program and its arguments, e.g. "python -m pytest -q".
        timeout: Seconds before the command is killed (default 60, at most 600).
    """
    return governed(context, "run_command", {"command": command, "timeout": timeout})


COMMAND_TOOLS: list[BaseTool] = [run_command]
"""The ``commands`` tool set."""
