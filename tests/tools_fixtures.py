"""Fake contexts for calling tools directly (tests/test_tools_unit.py): a real runtime, no graph, no model."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.types import Command

from teamgraph.protocols.requests import PENDING
from teamgraph.records import IDLE, LEADER, LEADER_ROLE_ID, RUNNING
from teamgraph.runtime import TeamRuntime
from teamgraph.tools.context import TeamView, ToolContext

R1, R2 = "Researcher_1", "Researcher_2"


def agent(role: str, status: str = RUNNING, **extra: Any) -> dict[str, Any]:
    """An agent record with the fields tools read."""
    base = {"role": role, "status": status, "turn": 1, "steps": 1, "tool_calls": 0, "waits": {}, "inbox": []}
    return {**base, **extra}


DEFAULT_AGENTS = {LEADER: agent(LEADER_ROLE_ID), R1: agent("researcher"), R2: agent("researcher", IDLE)}


def request(rid: str, kind: str, sender: str, to: str, *, status: str = PENDING, **extra: Any) -> dict[str, Any]:
    """A request record routed to ``to``."""
    base = {"id": rid, "kind": kind, "from": sender, "to": to, "route": to, "status": status, "body": "?"}
    return {**base, "answer": None, "opened_at": "t0", "closed_at": None, **extra}


def context_for(
    runtime: TeamRuntime,
    caller: str = LEADER,
    *,
    agents: dict[str, Any] | None = None,
    requests: Iterable[dict[str, Any]] = (),
    team: dict[str, Any] | None = None,
    effects: Iterable[dict[str, Any]] = (),
    config: dict[str, Any] | None = None,
) -> ToolContext:
    """A tool context as ``run_tool_calls`` builds it, for a call with id ``c1``."""
    view = TeamView(
        caller=caller,
        agents=DEFAULT_AGENTS if agents is None else agents,
        requests={r["id"]: r for r in requests},
        team=team or {},
    )
    return ToolContext(
        view=view,
        runtime=runtime,
        tool_call_id="c1",
        config=config or {},
        effects=tuple(effects),
    )


def run(tool: Any, context: ToolContext, **args: Any) -> Any:
    """Call a tool's function directly, as its executor would after validation."""
    return tool.func(context=context, **args)


def effects_of(out: Command) -> list[dict[str, Any]]:
    """The effects a tool's Command asks the router for."""
    return out.update["effects"]


def result_of(out: Command) -> ToolMessage | None:
    """The immediate result of a tool's Command, or None when the call stays open (deferred)."""
    new = out.update.get("new", [])
    return new[0] if new else None
