"""Budgets in sight: what the Team Leader has spent against its plan's reference values.

The leader's prompt sets reference values by complexity (simple: 1 member, about
3-10 tool calls; medium: 2-4 members, about 10-15 tool calls each; complex: more
members, each with a clear scope). They are reminders, not limits: the section
below shows the spending in the leader's system prompt at every call, and the
first time a reference value is passed the leader gets one notice in its history
(a user-role message marked with ``teamgraph_budget_notice``), never a refusal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from teamgraph.records import LEADER

BUDGET_NOTICE_KEY = "teamgraph_budget_notice"
"""``additional_kwargs`` key of a budget notice: the overruns it reported."""


class Reference(NamedTuple):
    """A complexity's reference values (None: no fixed number)."""

    members: int | None
    tool_calls: int | None
    text: str


REFERENCES: dict[str, Reference] = {
    "simple": Reference(1, 10, "1 member, about 3-10 tool calls"),
    "medium": Reference(4, 15, "2-4 members, about 10-15 tool calls each"),
    "complex": Reference(None, None, "more members, each with a clear scope"),
}


def _in_force(team: Mapping[str, Any]) -> bool:
    """Whether an approved plan with a complexity puts the budget in the leader's sight."""
    plan = team.get("plan") or {}
    return plan.get("status") == "approved" and bool(plan.get("complexity"))


def _members(agents: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {name: record for name, record in agents.items() if name != LEADER}


def tokens_used(messages: Sequence[BaseMessage], agents: Mapping[str, Mapping[str, Any]]) -> int:
    """Tokens the providers reported: the leader's own calls, plus members' ``tokens`` counters when recorded."""
    own = sum(m.usage_metadata["total_tokens"] for m in messages if isinstance(m, AIMessage) and m.usage_metadata)
    return own + sum(int(r.get("tokens", 0)) for r in _members(agents).values())


def overruns(*, team: Mapping[str, Any], agents: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The reference values passed so far, by key (``members``, ``tool_calls:<member>``)."""
    plan = team.get("plan") or {}
    reference = REFERENCES.get(plan.get("complexity") or "")
    if plan.get("status") != "approved" or reference is None:
        return {}
    members = _members(agents)
    passed: dict[str, str] = {}
    if reference.members is not None and len(members) > reference.members:
        passed["members"] = f"{len(members)} members created (reference: {reference.members})"
    if reference.tool_calls is not None:
        for name, record in members.items():
            if record.get("tool_calls", 0) > reference.tool_calls:
                passed[f"tool_calls:{name}"] = (
                    f"{name} made {record['tool_calls']} tool calls (reference: about {reference.tool_calls})"
                )
    return passed


def budget_section(*, team: Mapping[str, Any], agents: Mapping[str, Mapping[str, Any]], tokens: int) -> str:
    """The leader prompt's budget section, or "" while no plan is approved.

    Args:
        team: Team-wide state (``plan`` with its ``complexity``).
        agents: The registry (members created, ``tool_calls`` per member).
        tokens: Tokens spent so far (see ``tokens_used``).

    Returns:
        The section's Markdown.
    """
    if not _in_force(team):
        return ""
    plan = team["plan"]
    complexity = plan["complexity"]
    reference = REFERENCES.get(complexity)
    members = _members(agents)
    calls = ", ".join(f"{name} {r.get('tool_calls', 0)}" for name, r in members.items()) or "none yet"
    lines = [
        f"# Budget (plan {plan['id']}: {complexity}; reference: {reference.text if reference else 'none'})",
        f"- Members created: {len(members)}",
        f"- Tool calls per member: {calls}",
        f"- Tokens reported by the model so far (your calls, and members' where recorded): {tokens}",
    ]
    passed = overruns(team=team, agents=agents)
    if passed:
        lines.append("- Past the reference: " + "; ".join(passed.values()) + ". A reminder, not a limit.")
    return "\n".join(lines)


def noticed(messages: Sequence[BaseMessage]) -> set[str]:
    """The overruns the leader was already told about (read from its history)."""
    return {key for m in messages for key in m.additional_kwargs.get(BUDGET_NOTICE_KEY, ())}


def with_budget(
    messages: Sequence[BaseMessage], *, team: Mapping[str, Any], agents: Mapping[str, Mapping[str, Any]]
) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """The leader's call with the budget in sight.

    Args:
        messages: The leader's system prompt, then its history.
        team: Team-wide state.
        agents: The registry.

    Returns:
        The messages to send (the system prompt gets the budget section, and a new
        overrun adds one notice at the end) and the notice to append to the history.
    """
    # NOTE: the tokens are counted over the whole history: only once a plan puts the budget in sight.
    if not _in_force(team):
        return list(messages), []
    section = budget_section(team=team, agents=agents, tokens=tokens_used(messages, agents))
    out = list(messages)
    if out and isinstance(out[0], SystemMessage):
        out[0] = SystemMessage(f"{out[0].text}\n\n{section}")
    fresh = {k: v for k, v in overruns(team=team, agents=agents).items() if k not in noticed(messages)}
    if not fresh:
        return out, []
    notice = HumanMessage(
        "Budget reminder (not a limit): " + "; ".join(fresh.values()) + ". Check that the extra effort is "
        "worth it; converge and stop members you no longer need.",
        additional_kwargs={BUDGET_NOTICE_KEY: sorted(fresh)},
    )
    return [*out, notice], [notice]
