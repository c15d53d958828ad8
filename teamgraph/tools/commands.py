"""``run_command``: run a program in the thread's project folder (no shell, a time-out, clipped output).

Commands on ``Policy.commands`` run at once; any other command is a sensitive
operation and waits for an approval (the permission matrix decides).
"""

from __future__ import annotations

from typing import Annotated

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.prebuilt import InjectedState

from teamgraph.governance.commands import DEFAULT_TIMEOUT
from teamgraph.runtime import TeamRuntime
from teamgraph.tools.context import View
from teamgraph.tools.skills import governed


def make_command_tools(runtime: TeamRuntime) -> list[BaseTool]:
    """Build ``run_command``.

    Args:
        runtime: The team runtime (policy allow-list, project folders).

    Returns:
        The one tool.
    """

    @tool
    def run_command(
        command: str,
        view: Annotated[View, InjectedState("view")],
        config: RunnableConfig,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> str:
        """Run a command in the project folder and return its exit code and output.

        No shell: pipes, ';' and redirections are not interpreted. Commands outside the
        team's allow-list wait for approval.

        Args:
            command: A program and its arguments, e.g. "python -m pytest -q".
            timeout: Seconds before the command is killed (default 60, at most 600).
        """
        return governed(runtime, "run_command", {"command": command, "timeout": timeout}, view, config)

    return [run_command]
