"""The typed role: what a team member *is*, as read from a role file.

A role is a template. The team creates *instances* of it, named
``"{role.name}_{n}"`` (``"UI Operator_1"``, ``"UI Operator_2"``); the leader is the
one instance without a number and is always called ``"Team Leader"``.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from teamgraph.records import LEADER as LEADER_NAME
from teamgraph.records import LEADER_ROLE_ID

ToolSetName = Literal[
    "leader",
    "member",
    "files",
    "protocols",
    "collaboration",
    "sessions",
    "teammates",
    "skills",
    "skill_admin",
    "tasks",
    "admin",
    "commands",
    "tool_admin",
    "agent_info",
    "memory",
    "search",
]
"""A tool set a role may use; each maps to one module in ``teamgraph.tools``."""

ThinkingMode = Literal["fast", "deep"]
Level = Literal["L1", "L2", "L3", "L4"]

TOOL_SETS: tuple[str, ...] = get_args(ToolSetName)
THINKING_MODES: tuple[str, ...] = get_args(ThinkingMode)
LEVELS: tuple[str, ...] = get_args(Level)

# Ids become file names and tool arguments, so keep them to a safe, lowercase slug.
ROLE_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
# Instances are named "{name}_{n}"; a name that already ends that way would make
# "Worker_1_2" and friends ambiguous to parse back.
_INSTANCE_SUFFIX = re.compile(r"_\d+$")


class Role(BaseModel):
    """A role definition: identity, model settings, tool sets and prompt.

    Attributes:
        id: Stable slug such as ``"ui-operator"``; the key the leader uses to spawn.
        name: Display name; instances are called ``"{name}_{n}"``.
        description: One sentence the leader reads when choosing a role.
        model: Model for this role (``"openai:gpt-4o-mini"``), or None for the team's.
        thinking_mode: ``"fast"`` or ``"deep"`` (how much reasoning to ask for).
        tools: Tool sets the role's instances get.
        level: Permission level, L1 (leader) to L4 (every agent).
        require_plan: Whether members must get a plan approved (``submit_plan``)
            before they do work with their work tools.
        mcp: The MCP servers (names from ``Team(mcp_servers=...)``, or ``all``) whose
            tools the role's instances get; the Team Leader gets every server's.
        prompt: The role prompt (the Markdown body of the role file).
        source: The file the role came from, or ``"builtin"``.
    """

    # Roles are shared by every instance, so they must not change under them.
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    id: str
    name: str
    description: str = ""
    model: str | None = None
    thinking_mode: ThinkingMode = "fast"
    tools: tuple[ToolSetName, ...] = ("member", "files")
    level: Level = "L4"
    require_plan: bool = False
    mcp: tuple[str, ...] = ()
    prompt: str = ""
    source: str = "builtin"

    @property
    def is_leader(self) -> bool:
        """Whether this is the Team Leader's role."""
        return self.id == LEADER_ROLE_ID

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not ROLE_ID_PATTERN.fullmatch(value):
            raise ValueError(
                f"{value!r} is not a valid id (lowercase letters, digits, '-' and '_', starting with a letter or digit)"
            )
        return value

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str, info: ValidationInfo) -> str:
        role_id = info.data.get("id")
        if not value:
            raise ValueError("name is empty")
        if _INSTANCE_SUFFIX.search(value):
            raise ValueError(f"{value!r} ends with '_<number>', which is reserved for instance names")
        is_leader_name = value.casefold() == LEADER_NAME.casefold()
        if is_leader_name and role_id != LEADER_ROLE_ID:
            raise ValueError(f"{value!r} is reserved for the {LEADER_ROLE_ID!r} role")
        if role_id == LEADER_ROLE_ID and value != LEADER_NAME:
            raise ValueError(f"the {LEADER_ROLE_ID!r} role must be named {LEADER_NAME!r}")
        return value

    @field_validator("model")
    @classmethod
    def _blank_model_is_none(cls, value: str | None) -> str | None:
        return value or None

    @field_validator("tools", mode="before")
    @classmethod
    def _split_tools(cls, value: object) -> object:
        # Role files may say `tools: member, files`; treat it like a list.
        if isinstance(value, str):
            value = value.split(",")
        if isinstance(value, (list, tuple)):
            # Drop blanks (a trailing comma) and repeats, keeping the first order.
            # A list, not a set: items may be unhashable junk for pydantic to reject.
            unique: list[object] = []
            for item in value:
                item = item.strip() if isinstance(item, str) else item
                if item != "" and item not in unique:
                    unique.append(item)
            return tuple(unique)
        return value
