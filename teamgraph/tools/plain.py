"""Your own tools: a LangChain tool as it is, a plain Python function wrapped like ``tool(fn)``.

A plain function becomes a tool the way LangChain's ``@tool`` makes one: its name is
the function's, its description the docstring, its arguments the annotated
parameters. The model chooses a tool from its description and fills its arguments
from their types, so both are required: a function without a docstring, or with a
parameter the model would have to guess the type of, is refused with an error that
names the function and what to add. A parameter typed ``ToolContext`` is injected
(who calls, the project folder through ``context.runtime``) and needs no more.

Example:
    ```python
    def word_count(text: str) -> int:
        \"\"\"Count the words of a text.\"\"\"
        return len(text.split())

    Team(model=..., tools=[word_count])
    ```
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.tools import BaseTool, tool

__all__ = ["ToolDefinitionError", "as_tool", "as_tools"]

_FREE_KINDS = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


class ToolDefinitionError(TypeError):
    """A tool given to ``Team(tools=...)`` that cannot become a tool (the message says why and how to fix it)."""


def _unannotated(fn: Callable[..., Any]) -> list[str]:
    """The parameters of ``fn`` the model would fill without knowing their type."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in signature.parameters.values()
        if p.annotation is inspect.Parameter.empty and p.kind not in _FREE_KINDS and p.name not in ("self", "cls")
    ]


def as_tool(item: Any) -> BaseTool:
    """``item`` as a LangChain tool: a ``BaseTool`` unchanged, a function wrapped by ``tool(fn)``.

    Raises:
        ToolDefinitionError: ``item`` is not callable, or the function lacks a docstring
            or a parameter's type annotation.
    """
    if isinstance(item, BaseTool):
        return item
    if not callable(item):
        raise ToolDefinitionError(
            f"Team(tools=...) takes functions or LangChain tools (@tool); got {item!r} ({type(item).__name__})."
        )
    name = getattr(item, "__name__", type(item).__name__)
    if not inspect.getdoc(item):
        raise ToolDefinitionError(
            f"Team(tools=...): tool function {name!r} has no docstring: the model picks a tool by its description. "
            f'Add one, e.g. """What {name} does and when to use it."""'
        )
    missing = _unannotated(item)
    if missing:
        raise ToolDefinitionError(
            f"Team(tools=...): tool function {name!r}: parameter(s) {', '.join(missing)} have no type annotation; "
            f"the model fills arguments from their types. Annotate them, e.g. def {name}({missing[0]}: str, ...)."
        )
    return tool(item)


def as_tools(tools: Sequence[Any] | Mapping[str, Sequence[Any]]) -> dict[str, list[BaseTool]]:
    """``Team(tools=...)`` by role id (``"*"``: every member), each item made a tool by :func:`as_tool`."""
    if isinstance(tools, Mapping):
        return {role: [as_tool(t) for t in items] for role, items in tools.items()}
    return {"*": [as_tool(t) for t in tools]}
