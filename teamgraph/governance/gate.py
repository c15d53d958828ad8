"""The run-time gate: every governed tool call is checked against the matrix before it runs.

Each teamgraph tool carries its team's gate in ``tool.metadata[GATE_KEY]`` (set when
the tool sets are built), so ``run_tool_calls`` needs no more than ``rule_call``:
a call is refused (not permitted), deferred behind an ``approval`` request (a
sensitive operation), or let through.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from teamgraph.governance.operations import CallContext, GovernedCall, Operation, roles_in_use, sensitive_operation
from teamgraph.messaging import effects
from teamgraph.protocols.requests import APPROVAL
from teamgraph.records import OpenEffect, TeamView
from teamgraph.roles.matrix import refusal
from teamgraph.runtime import TeamRuntime

GATE_KEY = "teamgraph_gate"


@dataclass(frozen=True)
class Ruling:
    """The gate's answer for one call: refuse it, defer it behind ``approval``, or neither."""

    refusal: str | None = None
    approval: OpenEffect | None = None


ALLOW = Ruling()


def call_context(runtime: TeamRuntime, view: TeamView, config: Mapping[str, Any] | None) -> CallContext:
    """Who calls and in which project folder (what an executor may rely on later)."""
    record = view.agents.get(view.caller)
    return CallContext(
        caller=view.caller,
        role=record["role"] if record else "",
        project_dir=str(runtime.project_folder(config)),
        roles_in_use=roles_in_use(view.agents),
    )


class Gate:
    """The permission matrix and sensitive operations of one team, applied to tool calls.

    NOTE: a plain class with a short repr, not a dataclass: it rides in ``tool.metadata``,
    which callbacks and tracers copy into every tool run (a dataclass would be
    serialized field by field, the whole runtime with it).
    """

    __slots__ = ("runtime",)

    def __init__(self, runtime: TeamRuntime) -> None:
        self.runtime = runtime

    def __repr__(self) -> str:
        return f"Gate({self.runtime.home})"

    def rule(
        self, tool: BaseTool, args: dict[str, Any], call_id: str, view: TeamView, config: RunnableConfig
    ) -> Ruling:
        """Check one call of ``tool`` by the view's caller."""
        me = view.caller
        record = view.agents.get(me)
        role = self.runtime.role(record["role"]) if record else None
        if role is None:
            return ALLOW
        matrix = self.runtime.matrix
        refused = refusal(matrix, role, me, tool.name)
        if refused:
            return Ruling(refusal=refused)
        operation = sensitive_operation(self.runtime, tool.name, args, role)
        if operation is None or (role.level == "L1" and matrix.sensitive[operation].master_alone):
            return ALLOW
        schema = tool.tool_call_schema
        if not isinstance(schema, type) or not issubclass(schema, BaseModel):
            return ALLOW  # NOTE: teamgraph tools have pydantic schemas; anything else is not governed
        try:
            clean = schema.model_validate(args).model_dump(mode="json", exclude_none=True)
        except ValidationError:
            return ALLOW  # NOTE: the tool's own validation answers with the usual error
        details = Operation(
            operation=operation,
            call=GovernedCall(tool=tool.name, args=clean, context=call_context(self.runtime, view, config)),
        )
        shown = ", ".join(f"{k}={v!r}" for k, v in clean.items())
        target = self.runtime.role(str(clean.get("role_id")))
        # NOTE: the leader is the default approver: a change to its own role is a person's call.
        to_user = {"to_user": True} if target is not None and target.is_leader else {}
        return Ruling(
            approval=effects.open_request(
                request_kind=APPROVAL,
                body=f"{operation}: {tool.name}({shown})",
                call_id=call_id,
                tool=tool.name,
                details={**details, **to_user},
            )
        )


def rule_call(tool: BaseTool, args: dict[str, Any], call_id: str, view: TeamView, config: RunnableConfig) -> Ruling:
    """The gate's ruling on a call, or ALLOW for a tool that carries no gate (the user's own)."""
    gate = (tool.metadata or {}).get(GATE_KEY)
    return gate.rule(tool, args, call_id, view, config) if gate else ALLOW
