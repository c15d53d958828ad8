"""Sensitive operations: which calls need an approval, and the executors that perform them.

A governed tool's act is a pure function of (runtime, arguments, call context) -> result
text, listed in ``EXECUTORS``. A call that the matrix makes sensitive is not run: it
becomes an ``approval`` request whose details carry the call; once the request is
approved, the router runs ``execute_approved`` and the result answers the open call.
A rejection answers it with the reason and nothing happens.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from teamgraph.governance import admin, commands, declared, sandbox, skills
from teamgraph.governance.agents import above
from teamgraph.records import AgentRecord, Request
from teamgraph.roles.matrix import DEFAULT_MATRIX, SET_TOOLS, PermissionMatrix, apply_override, dump_matrix
from teamgraph.roles.model import Role
from teamgraph.runtime import TeamRuntime


class CallContext(TypedDict):
    """Who made a governed call and where: what an executor may rely on.

    Attributes:
        caller: The calling agent's display name.
        role: Its role id.
        project_dir: The thread's project folder.
        roles_in_use: Role ids of the thread's agents that have not ended (read when the act runs).
        approved: The act runs because a person or the leader approved it (a command runs outside the sandbox).
    """

    caller: str
    role: str
    project_dir: str
    roles_in_use: NotRequired[list[str]]
    approved: NotRequired[bool]


ENDED_STATUSES = frozenset({"terminated", "shutdown", "failed"})


def roles_in_use(agents: Mapping[str, AgentRecord]) -> list[str]:
    """Role ids of the agents in a registry that have not ended."""
    return sorted({str(r.get("role")) for r in agents.values() if r.get("status") not in ENDED_STATUSES})


class GovernedCall(TypedDict):
    """The call an approval request carries: the tool, its arguments, who called and where."""

    tool: str
    args: dict[str, Any]
    context: CallContext


class Operation(TypedDict):
    """The ``details`` of an approval request that carries a call."""

    operation: str
    call: GovernedCall


Executor = Callable[[TeamRuntime, dict[str, Any], CallContext], str]
Condition = Callable[[TeamRuntime, str, Mapping[str, Any], Role], bool]
"""``(runtime, tool, arguments, the caller's role) -> whether the call is the operation``."""


def _high_risk_skill(runtime: TeamRuntime, tool: str, args: Mapping[str, Any], caller: Role) -> bool:
    return args.get("risk") == "high"


def _core_config(runtime: TeamRuntime, tool: str, args: Mapping[str, Any], caller: Role) -> bool:
    """Tools or level of any role; any field of the leader's role or of a role above the caller's."""
    if tool == "set_agent_config":
        target = runtime.role(str(args.get("role_id")))
        return args.get("field") in admin.CORE_FIELDS or (target is not None and above(target, caller))
    if tool == "create_custom_agent":
        return args.get("level") not in (None, "L4")
    return True


def _command_not_allowed(runtime: TeamRuntime, tool: str, args: Mapping[str, Any], caller: Role) -> bool:
    command = str(args.get("command", ""))
    try:
        sandboxed = sandbox.available(runtime.policy.sandbox)
        return commands.approval_reason(runtime.policy.commands, command, sandboxed=sandboxed) is not None
    except commands.CommandError:
        return False  # NOTE: nothing would run; the tool answers with the error, no approval needed


CONDITIONS: dict[str, Condition] = {
    "always": lambda runtime, tool, args, caller: True,
    "high_risk_skill": _high_risk_skill,
    "core_config": _core_config,
    "command_not_allowed": _command_not_allowed,
}
"""The ``when`` values a sensitive operation of the matrix may name."""


# -- executors ----------------------------------------------------------------


def _create_skill(runtime: TeamRuntime, args: dict[str, Any], ctx: CallContext) -> str:
    name = skills.check_name(args["name"])
    if skills.skill_path(runtime.home, name).is_file():
        raise skills.SkillError(f"Skill '{name}' already exists; change it with set_skill.")
    skill = skills.Skill(
        name=name,
        description=args["description"],
        risk=args.get("risk") or "normal",
        meta={"author": ctx["caller"]},
        body=args["body"],
    )
    path = skills.write_skill(runtime.home, skill)
    return f"Skill '{name}' created ({path}). Give it to agents with endow_skills."


def _set_skill(runtime: TeamRuntime, args: dict[str, Any], ctx: CallContext) -> str:
    skill = skills.read_skill(runtime.home, args["name"])
    changed = {k: args[k] for k in ("description", "body", "risk") if args.get(k) is not None}
    if not changed:
        raise skills.SkillError("Nothing to change: give description, body or risk.")
    updated = skills.Skill(
        name=skill["name"],
        description=changed.get("description", skill["description"]),
        risk=changed.get("risk", skill["risk"]),
        meta=skill["meta"],
        body=changed.get("body", skill["body"]),
    )
    skills.write_skill(runtime.home, updated)
    return f"Skill '{skill['name']}' updated ({', '.join(changed)})."


def _delete_skill(runtime: TeamRuntime, args: dict[str, Any], ctx: CallContext) -> str:
    skills.delete_skill(runtime.home, args["name"])
    return f"Skill '{args['name']}' deleted."


def _run_command(runtime: TeamRuntime, args: dict[str, Any], ctx: CallContext) -> str:
    timeout = float(args.get("timeout") or commands.DEFAULT_TIMEOUT)
    return commands.run_command(
        args["command"],
        cwd=Path(ctx["project_dir"]),
        timeout=timeout,
        # NOTE: an approved command runs as it was approved: it may write outside the project folder
        sandboxed=sandbox.available(runtime.policy.sandbox) and not ctx.get("approved"),
        hide=[runtime.home],
    )


def _set_permissions(runtime: TeamRuntime, args: dict[str, Any], ctx: CallContext) -> str:
    import yaml

    override = yaml.safe_load(args["yaml"]) or {}
    path = runtime.home / "permissions.yaml"
    current = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else {}
    merged = {**(current or {})}
    for section, entries in (override if isinstance(override, dict) else {}).items():
        merged[section] = {**merged.get(section, {}), **(entries or {})}
    checked = apply_override(PermissionMatrix.model_validate(DEFAULT_MATRIX), "set_permissions", merged)
    runtime.home.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(merged, sort_keys=False, allow_unicode=True), encoding="utf-8")
    runtime.reload_matrix()
    counts = f"{len(checked.roles)} role rules, {len(checked.sensitive)} sensitive operations"
    return f"Permissions updated ({path}); {counts}."


def _register_tool(runtime: TeamRuntime, args: dict[str, Any], ctx: CallContext) -> str:
    tool = declared.DeclaredTool.model_validate({**args, "author": ctx["caller"]})
    builtin = {name for names in SET_TOOLS.values() for name in names}
    path = declared.register(runtime.home, tool, builtin=builtin)
    return f"Tool '{tool.name}' registered ({path}). Give it to a role with endow_tool (it needs approval)."


def _endow_tool(runtime: TeamRuntime, args: dict[str, Any], ctx: CallContext) -> str:
    role_id, name = str(args["role_id"]), str(args["tool_name"])
    if runtime.role(role_id) is None:
        raise declared.DeclaredToolError(f"No role '{role_id}'. Roles: {', '.join(runtime.roles)}.")
    names = declared.endow(runtime.home, role_id, name)
    return f"Role {role_id} now has the declared tools: {', '.join(names)} (from its agents' next step)."


EXECUTORS: dict[str, Executor] = {
    "create_skill": _create_skill,
    "set_skill": _set_skill,
    "delete_skill": _delete_skill,
    "run_command": _run_command,
    "set_agent_config": lambda runtime, args, ctx: admin.set_agent_config(
        runtime, args["role_id"], args["field"], args["value"]
    ),
    "delete_agent": lambda runtime, args, ctx: admin.delete_role(runtime, args["role_id"], ctx.get("roles_in_use", [])),
    "create_custom_agent": lambda runtime, args, ctx: admin.create_role(runtime, args),
    "set_permissions": _set_permissions,
    "register_tool": _register_tool,
    "endow_tool": _endow_tool,
}
"""Tool name -> the act a governed call performs (run directly, or after an approval)."""

ACT_ERRORS = (
    skills.SkillError,
    commands.CommandError,
    admin.AgentConfigError,
    declared.DeclaredToolError,
    ValueError,
    KeyError,
    OSError,
)


def sensitive_operation(runtime: TeamRuntime, tool: str, args: Mapping[str, Any], caller: Role) -> str | None:
    """The name of the sensitive operation a call of ``tool`` with ``args`` by an agent of ``caller`` is, or None."""
    for name, rule in runtime.matrix.sensitive.items():
        if tool in rule.tools and CONDITIONS[rule.when](runtime, tool, args, caller):
            return name
    return None


def perform(runtime: TeamRuntime, tool: str, args: dict[str, Any], ctx: CallContext) -> str:
    """Run a governed act; a bad argument becomes an error text, never an exception."""
    try:
        return EXECUTORS[tool](runtime, args, ctx)
    except ACT_ERRORS as exc:
        return f"Error: {tool} failed: {exc}"


def execute_approved(
    runtime: TeamRuntime,
    record: Request,
    verdict: str,
    *,
    approved: bool,
    agents: Mapping[str, AgentRecord] | None = None,
) -> str:
    """The result an approval request's waiting call gets (the router calls this on a decision).

    Args:
        runtime: The team runtime.
        record: The approval request; its ``details`` are an ``Operation``.
        verdict: The router's sentence about the decision (who decided, feedback).
        approved: Whether it was approved.
        agents: The thread's registry now (what the act must not break, e.g. a role in use).

    Returns:
        The verdict plus the operation's result, or the verdict saying it was not performed.
    """
    details = record.get("details") or {}
    call: GovernedCall = details["call"]
    if not approved:
        return f"{verdict} The operation {details['operation']} ({call['tool']}) was not performed."
    return f"{verdict}\n{perform_approved(runtime, record, agents=agents)}"


def perform_approved(runtime: TeamRuntime, record: Request, *, agents: Mapping[str, AgentRecord] | None = None) -> str:
    """Perform the sensitive call an approved request carries; its result (an error text, never an exception).

    Args:
        runtime: The team runtime.
        record: The approved request; its ``details`` are an ``Operation``.
        agents: The thread's registry now (what the act must not break, e.g. a role in use).
    """
    call: GovernedCall = (record.get("details") or {})["call"]
    context = CallContext(**{**call["context"], "approved": True})
    if agents is not None:  # NOTE: what is in use when the act runs, not when it was asked for
        context = CallContext(**{**context, "roles_in_use": roles_in_use(agents)})
    return perform(runtime, call["tool"], dict(call["args"]), context)


def is_governed(record: Request) -> bool:
    """Whether an approval request carries a deferred sensitive call (the router performs it on approval)."""
    return isinstance((record.get("details") or {}).get("call"), Mapping)


__all__ = [
    "CONDITIONS",
    "EXECUTORS",
    "CallContext",
    "GovernedCall",
    "Operation",
    "dump_matrix",
    "execute_approved",
    "perform_approved",
    "is_governed",
    "perform",
]
