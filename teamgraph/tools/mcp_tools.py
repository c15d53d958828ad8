"""MCP (the Team Leader spec: the leader's "MCP"): the tools of any MCP server, given to roles by configuration.

``Team(mcp_servers={"name": connection})`` names the servers, each a
``langchain-mcp-adapters`` connection (``{"transport": "stdio", "command": ...,
"args": [...]}`` or ``{"transport": "streamable_http", "url": ...}``). The leader
gets every server's tools; a role gets the servers its role file lists under
``mcp`` (or ``[all]``). Needs the ``mcp`` extra: ``pip install 'teamgraph[mcp]'``.

The adapters' tools are asynchronous and open a session per call; the executor
calls tools synchronously, so each is wrapped: the call runs on its own event loop
(in a worker thread when the caller's thread already runs one).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from langchain_core.tools import BaseTool, StructuredTool

T = TypeVar("T")
ALL = "all"


class McpError(RuntimeError):
    """MCP servers that cannot be used (the message names the server and the fix)."""


def run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from synchronous code, whether or not this thread runs a loop."""

    async def main() -> T:
        return await make()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, main()).result()


def _sync(tool: BaseTool, server: str) -> BaseTool:
    """``tool`` callable synchronously too; its metadata names its server."""
    coroutine = getattr(tool, "coroutine", None)
    if coroutine is None or tool.args_schema is None:
        return tool

    def call(**kwargs: Any) -> Any:
        return run_sync(lambda: coroutine(**kwargs))

    return StructuredTool(
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema,
        func=call,
        coroutine=coroutine,
        response_format=getattr(tool, "response_format", "content"),
        metadata={**(tool.metadata or {}), "mcp_server": server},
    )


def load_mcp_tools(servers: Mapping[str, Mapping[str, Any]]) -> dict[str, list[BaseTool]]:
    """Each server's tools (the servers are started once to list them).

    Raises:
        McpError: The ``mcp`` extra is missing, or a server cannot be reached (named).
    """
    try:
        from langchain_mcp_adapters.client import MultiServerMCPClient
    except ImportError:
        raise McpError("MCP servers need the mcp extra: pip install 'teamgraph[mcp]'.") from None
    loaded: dict[str, list[BaseTool]] = {}
    for name, connection in servers.items():
        client = MultiServerMCPClient({name: dict(connection)})  # type: ignore[dict-item]
        try:
            tools = run_sync(lambda c=client, n=name: c.get_tools(server_name=n))  # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001 - any failure to start or list is the user's configuration
            problem = f"{type(exc).__name__}: {exc}"
            raise McpError(f"MCP server '{name}' cannot be used: {problem}. Check its connection.") from None
        loaded[name] = [_sync(t, name) for t in tools]
    return loaded


def tools_for(loaded: Mapping[str, list[BaseTool]], wanted: tuple[str, ...], *, leader: bool) -> list[BaseTool]:
    """The MCP tools of the servers ``wanted`` (``all``; the leader gets every server)."""
    names = list(loaded) if leader or ALL in wanted else [w for w in wanted if w in loaded]
    return [tool for name in names for tool in loaded[name]]
