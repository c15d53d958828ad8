"""Skill tools (seed 000 §4, Anthropic Agent Skills format): list, read, create, change, delete, endow.

``create_skill``, ``set_skill`` and ``delete_skill`` are governed acts: the permission
matrix may defer them behind an approval (deleting, or a high-risk skill).
"""

from __future__ import annotations

import json
from typing import Annotated

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.prebuilt import InjectedState

from teamgraph.governance import skills
from teamgraph.governance.gate import call_context
from teamgraph.governance.operations import perform
from teamgraph.messaging import effects
from teamgraph.runtime import TeamRuntime
from teamgraph.tools.context import View, fail, reply


def governed(runtime: TeamRuntime, tool_name: str, args: dict, view: View, config: RunnableConfig) -> str:
    """Run a governed act now (the gate let it through); an act's failure is an error result."""
    result = perform(runtime, tool_name, args, call_context(runtime, view, config))
    if result.startswith("Error: "):
        raise fail(result.removeprefix("Error: "))
    return result


def endowment(runtime: TeamRuntime, view: View, target: str, names: list[str]) -> list[skills.SkillSummary]:
    """The summaries of skills ``names`` for ``target`` (an agent or a role), or an error saying what is wrong."""
    if target not in view["agents"] and target not in runtime.roles:
        agents, roles = ", ".join(view["agents"]), ", ".join(runtime.roles)
        raise fail(f"No agent or role '{target}'. Agents: {agents}; roles: {roles}.")
    try:
        given = [skills.summary(skills.read_skill(runtime.home, n)) for n in names]
    except skills.SkillError as exc:
        raise fail(str(exc)) from None
    if not given:
        raise fail("Name at least one skill (list_skills shows them).")
    return given


def make_skill_tools(runtime: TeamRuntime) -> list[BaseTool]:
    """Build the skill tools over ``<home>/skills``.

    Args:
        runtime: The team runtime (its home holds the skills).

    Returns:
        list_skills, read_skill (the ``skills`` set), then create_skill, set_skill,
        delete_skill, endow_skills (the ``skill_admin`` set).
    """

    @tool
    def list_skills() -> str:
        """List the team's skills: name, description and risk."""
        rows = [
            {"name": s["name"], "description": s["description"], "risk": s["risk"]}
            for s in skills.list_skills(runtime.home)
        ]
        return json.dumps(rows, ensure_ascii=False) if rows else "No skills yet."

    @tool
    def read_skill(name: str) -> str:
        """Read a skill's full instructions (your prompt lists the skills you were given).

        Args:
            name: The skill's name, e.g. "write-release-notes".
        """
        try:
            skill = skills.read_skill(runtime.home, name)
        except skills.SkillError as exc:
            raise fail(str(exc)) from None
        return f"# Skill: {skill['name']} (risk: {skill['risk']})\n{skill['description']}\n\n{skill['body']}"

    @tool
    def create_skill(
        name: str,
        description: str,
        body: str,
        view: Annotated[View, InjectedState("view")],
        config: RunnableConfig,
        risk: skills.Risk = "normal",
    ) -> str:
        """Create a skill: reusable instructions other agents can be given. A high-risk skill needs approval.

        Args:
            name: Lowercase letters, digits and '-', e.g. "write-release-notes".
            description: When to use it (agents see this line in their prompt).
            body: The instructions: inputs, steps, expected output, an example.
            risk: "normal" or "high" (can do harm: deletes, spends, publishes...).
        """
        args = {"name": name, "description": description, "body": body, "risk": risk}
        return governed(runtime, "create_skill", args, view, config)

    @tool
    def set_skill(
        name: str,
        view: Annotated[View, InjectedState("view")],
        config: RunnableConfig,
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
        args = {"name": name, "description": description, "body": body, "risk": risk}
        return governed(runtime, "set_skill", args, view, config)

    @tool
    def delete_skill(name: str, view: Annotated[View, InjectedState("view")], config: RunnableConfig) -> str:
        """Delete a skill (a sensitive operation: it waits for approval).

        Args:
            name: The skill's name.
        """
        return governed(runtime, "delete_skill", {"name": name}, view, config)

    @tool
    def endow_skills(
        agent_or_role: str,
        skill_names: list[str],
        view: Annotated[View, InjectedState("view")],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ):
        """Give skills to an agent (display name) or to every agent of a role (role id).

        Args:
            agent_or_role: A display name such as "Researcher_1", or a role id such as "researcher".
            skill_names: The skills' names.
        """
        found = endowment(runtime, view, agent_or_role, skill_names)
        given = [{"name": s["name"], "description": s["description"]} for s in found]
        return reply(
            f"{agent_or_role} now has: {', '.join(s['name'] for s in given)}.",
            tool_call_id,
            effects.endow(target=agent_or_role, skills=given),
        )

    return [list_skills, read_skill, create_skill, set_skill, delete_skill, endow_skills]
