"""Web search (the Team Leader spec: the leader's "search"): a tool slot filled by a provider the user configures.

The provider is a callable ``(query, max_results) -> list of {"title", "url",
"snippet"}`` given as ``Team(search=...)``; teamgraph ships none and makes no
network call of its own. Without a provider the tool is not offered. Each result
carries a source id (``src_`` and a digest of its URL, the same in every call) that
the report cites as ``【cite:src_…】``, the Team Leader spec's citation format; the CLI shows
the URL in its place (``teamgraph/cli/links.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.tools import BaseTool, tool

from teamgraph.tools import errors
from teamgraph.tools.context import ToolContext, fail


def source_id(url: str) -> str:
    """A result's citation id: ``src_`` and a digest of its URL (stable across calls and threads)."""
    return "src_" + hashlib.sha1(url.encode()).hexdigest()[:10]


def format_results(results: Sequence[Mapping[str, Any]]) -> str:
    """One entry per result: ``[src_…] title — url`` and its snippet."""
    lines = []
    for result in results:
        title, url = str(result.get("title") or "untitled"), str(result.get("url") or "")
        lines.append(f"[{source_id(url)}] {title} — {url}\n    {str(result.get('snippet') or '').strip()}")
    return "\n".join(lines) + "\nCite a source right after the statement it supports: 【cite:src_…】."


@tool(parse_docstring=True)
def web_search(query: str, context: ToolContext, max_results: int = 5) -> str:
    """Search the web; each result has a source id to cite (【cite:src_…】).

    Args:
        query: What to search for.
        max_results: How many results at most (1-10).
    """
    provider = context.runtime.search
    if provider is None:
        raise fail("No search provider is configured for this team.", code=errors.UNKNOWN_TOOL)
    if not 1 <= max_results <= 10:
        raise fail(f"max_results must be 1-10 (got {max_results}).", code=errors.BAD_ARGUMENT)
    results = list(provider(query, max_results))[:max_results]
    return format_results(results) if results else f"No results for '{query}'."


SEARCH_TOOLS: list[BaseTool] = [web_search]
"""The ``search`` tool set (offered only when the team has a provider)."""
