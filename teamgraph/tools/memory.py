"""Memory tools (the Team Leader spec: the leader "keeps its full toolset ... memory"): ``remember`` and ``recall``.

Notes live in a LangGraph ``BaseStore`` (``TeamRuntime.memory_store``: a
``SqliteStore`` in the team's SQLite file, a ``PostgresStore`` in its PostgreSQL
database, an ``InMemoryStore`` otherwise), under one namespace per team home, so
every thread of a home shares them and a new process finds them again.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.tools import BaseTool, tool

from teamgraph.tools import errors
from teamgraph.tools.context import ToolContext, fail

KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")
MAX_RECALLED = 10


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.casefold()) if len(w) > 2}


@tool(parse_docstring=True)
def remember(key: str, note: str, context: ToolContext) -> str:
    """Keep a note for later runs and other threads of this team (a key replaces its old note).

    Args:
        key: A short name for the note, e.g. "deploy-steps" (letters, digits, '-', '_', '.').
        note: What to remember.
    """
    if not KEY.fullmatch(key):
        raise fail(f"'{key}' is not a key: use letters, digits, '-', '_' or '.' (<= 80).", code=errors.BAD_ARGUMENT)
    store, namespace = context.runtime.memory()
    store.put(namespace, key, {"note": note, "by": context.caller, "at": context.runtime.now()})
    return f"Remembered '{key}'."


@tool(parse_docstring=True)
def recall(query: str, context: ToolContext) -> str:
    """Find notes kept with remember: the ones that share the most words with the query, or a key.

    Args:
        query: Words to look for, or a note's key.
    """
    store, namespace = context.runtime.memory()
    exact = store.get(namespace, query) if KEY.fullmatch(query) else None
    items: list[Any] = [exact] if exact else store.search(namespace, limit=1000)
    wanted = _words(query)
    scored = sorted(
        ((len(wanted & _words(f"{i.key} {i.value['note']}")), i) for i in items),
        key=lambda pair: (-pair[0], pair[1].key),
    )
    found = [(score, item) for score, item in scored if score or exact]
    if not found:
        return f"Nothing remembered about '{query}'."
    lines = [f"- {i.key} ({i.value['by']}, {i.value['at']}): {i.value['note']}" for _, i in found[:MAX_RECALLED]]
    return "\n".join(lines)


MEMORY_TOOLS: list[BaseTool] = [remember, recall]
"""The ``memory`` tool set."""
