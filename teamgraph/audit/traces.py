"""Traces that name agents: the tags an agent's step runs (and their children) carry."""

from __future__ import annotations

AGENT_TAG = "teamgraph:agent:"
ROLE_TAG = "teamgraph:role:"


def agent_tags(name: str, role_id: str) -> list[str]:
    """``["teamgraph:agent:UI Operator_1", "teamgraph:role:ui-operator"]``: filterable in LangSmith."""
    return [f"{AGENT_TAG}{name}", f"{ROLE_TAG}{role_id}"]
