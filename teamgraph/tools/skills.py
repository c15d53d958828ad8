"""Skill tools (docs/protocols.md; Anthropic Agent Skills format): list, read, create, change, delete, endow.

``create_skill``, ``set_skill`` and ``delete_skill`` are governed acts: the permission
matrix may defer them behind an approval (deleting, or a high-risk skill).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool, tool
from langgraph.types import Command

from teamgraph.governance import skills
from teamgraph.governance.gate import call_context
from teamgraph.governance.operations import perform
from teamgraph.messaging import effects
from teamgraph.tools import errors
from teamgraph.tools.context import ToolContext, fail, reply, require_changeable


def governed(context: ToolContext, tool_name: str, args: dict[str, Any]) -> str:
    """Run a governed act now (the gate let it through); an act's failure is an error result."""
    runtime = context.runtime
    result = perform(runtime, tool_name, args, call_context(runtime, context.view, context.config))
    if result.startswith("Error: "):
        # NOTE: perform turns an act's bad argument (a role or skill that cannot be used...) into this text
        raise fail(result.removeprefix("Error: "), code=errors.BAD_ARGUMENT)
    return result


def load_skill(home: Path, name: str) -> skills.Skill:
    """Skill ``name``, or an error: ``unknown_skill`` when there is none by that name, else ``bad_argument``."""
    try:
        return skills.read_skill(home, name)
    except skills.SkillError as exc:
        # NOTE: a valid name with no file is unknown; an invalid name or a broken file is told as such
        valid = skills.SKILL_NAME.fullmatch(name or "") is not None
        missing = valid and not skills.skill_path(home, name).is_file()
        raise fail(str(exc), code=errors.UNKNOWN_SKILL if missing else errors.BAD_ARGUMENT) from None


def endowment(context: ToolContext, target: str, names: list[str]) -> list[skills.SkillSummary]:
    """The summaries of skills ``names`` for ``target`` (an agent or a role), or an error saying what is wrong."""
    runtime = context.runtime
    if target not in context.agents and target not in runtime.roles:
        agents, roles = ", ".join(context.agents), ", ".join(runtime.roles)
        raise fail(f"No agent or role '{target}'. Agents: {agents}; roles: {roles}.", code=errors.UNKNOWN_AGENT)
    given = [skills.summary(load_skill(runtime.home, n)) for n in names]
    if not given:
        raise fail("Name at least one skill (list_skills shows them).", code=errors.BAD_ARGUMENT)
    return given


@tool(parse_docstring=True, error_on_invalid_docstring=False)  # NOTE: no argument, no Args: section
def list_skills(context: ToolContext) -> str:
    """List the team's skills: name, description and risk."""
    rows = [
        {"name": s["name"], "description": s["description"], "risk": s["risk"]}
        for s in skills.list_skills(context.runtime.home)
    ]
    return json.dumps(rows, ensure_ascii=False) if rows else "No skills yet."


@tool(parse_docstring=True)
def read_skill(name: str, context: ToolContext) -> str:
    """Read a skill's full instructions (your prompt lists the skills you were given).

    Args:
        name: The skill's name, e.g. "write-release-notes".
    """
    try:
        skill = load_skill(context.runtime.home, name)
    except errors.ToolError as exc:
        if not context.runtime.policy.skill_fallback:
            raise
        # NOTE: the collaboration spec §5.1: a skill that fails degrades to the work without it, said openly.
        raise fail(
            f"{exc} Go on without the skill: do the work with your own tools and knowledge, and say in your "
            f"report that the skill '{name}' could not be used.",
            code=exc.code,
        ) from None
    return f"# Skill: {skill['name']} (risk: {skill['risk']})\n{skill['description']}\n\n{skill['body']}"


@tool(parse_docstring=True)
def create_skill(name: str, description: str, body: str, context: ToolContext, risk: skills.Risk = "normal") -> str:
    """Create a skill: reusable instructions other agents can be given. A high-risk skill needs approval.

    Args:
        name: Lowercase letters, digits and '-', e.g. "write-release-notes".
        description: When to use it (agents see this line in their prompt).
        body: The instructions: inputs, steps, expected output, an example.
        risk: "normal" or "high" (can do harm: deletes, spends, publishes...).
    """
    return governed(context, "create_skill", {"name": name, "description": description, "body": body, "risk": risk})


@tool(parse_docstring=True)
def set_skill(
    name: str,
    context: ToolContext,
    description: str | None = None,
    body: str | None = None,
    risk: skills.Risk | None = None,
) -> str:
    """Change a skill's description, body or risk.

    Args:
        name: The skill's name.
        description: The new description, if it changes.
        body: The new instructions, if they change.
        risk: The new risk, if it changes ("high" needs approval).
    """
    return governed(context, "set_skill", {"name": name, "description": description, "body": body, "risk": risk})


@tool(parse_docstring=True)
def delete_skill(name: str, context: ToolContext) -> str:
    """Delete a skill (a sensitive operation: it waits for approval).

    Args:
        name: The skill's name.
    """
    return governed(context, "delete_skill", {"name": name})


@tool(parse_docstring=True)
def endow_skills(agent_or_role: str, skill_names: list[str], context: ToolContext) -> Command:
    """Give skills to an agent (display name) or to every agent of a role (role id).

    Args:
        agent_or_role: A display name such as "Researcher_1", or a role id such as "researcher".
        skill_names: The skills' names.
    """
    found = endowment(context, agent_or_role, skill_names)
    record = context.agents.get(agent_or_role)
    role = context.runtime.role(record["role"] if record else agent_or_role)
    if role is not None:
        require_changeable(context, role, what="the skills")
    given = [{"name": s["name"], "description": s["description"]} for s in found]
    return reply(
        f"{agent_or_role} now has: {', '.join(s['name'] for s in given)}.",
        context.tool_call_id,
        effects.endow(target=agent_or_role, skills=given),
    )


SKILL_TOOLS: list[BaseTool] = [list_skills, read_skill]
"""The ``skills`` tool set: read the team's skills."""
SKILL_ADMIN_TOOLS: list[BaseTool] = [create_skill, set_skill, delete_skill, endow_skills]
"""The ``skill_admin`` tool set: create, change, delete and give skills."""
