"""Who may create or change which agents: one level rule for every path (docs/security.md, "The matrix").

The matrix says who may call a tool; these rules say what the call may reach. Every tool
that creates a member (``create_sub_agent``, ``spawn_teammate``, ``sessions_spawn``) asks
``creation_refusal``; every tool that changes a role or what its agents are given
(``set_agent_config``, ``endow_skills``...) asks ``reaches_above``. So a member cannot
make itself a superior by spawning one, and nobody below the leader rewrites the leader's
role (the default approver) or a role above its own without an approval.
"""

from __future__ import annotations

from teamgraph.roles.matrix import rank
from teamgraph.roles.model import Role


def above(role: Role, caller: Role) -> bool:
    """Whether ``role`` is the leader's or ranks above ``caller``'s level (L1 is the highest)."""
    return role.is_leader or rank(role.level) < rank(caller.level)


def creation_refusal(caller: Role, agent: str, role: Role) -> str | None:
    """Why ``agent`` (of role ``caller``) may not create a member of ``role``, or None if it may.

    An agent creates members of its own level or lower; the leader's role has one agent.
    """
    if role.is_leader:
        return "The Team Leader's role has one agent, the Team Leader: no member of it can be created."
    if not above(role, caller):
        return None
    return (
        f"permission denied: {agent} ({caller.id}, level {caller.level}) may not create a member of "
        f"'{role.id}' (level {role.level}): an agent creates members of its own level or lower. "
        "Pick a role of your level or lower, or ask the Team Leader (ask_master) to create it."
    )


def change_refusal(caller: Role, agent: str, role: Role, *, what: str) -> str | None:
    """Why ``agent`` may not change ``what`` of ``role`` directly (the leader's, or above its level)."""
    if caller.level == "L1" or not above(role, caller):
        return None
    return (
        f"permission denied: {agent} ({caller.id}, level {caller.level}) may not change {what} of "
        f"'{role.id}' (level {role.level}{', the Team Leader' if role.is_leader else ''}): only roles of "
        "your level or lower. Ask the Team Leader (ask_master) to have it done."
    )
