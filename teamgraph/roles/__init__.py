"""Roles: what a team member is, defined in Markdown files with YAML front matter.

Built-in roles ship in ``builtin/``; users add or override roles with their own folder::

    roles = load_roles("my_roles")        # {"team-leader": Role(...), "ui-operator": ...}
    roles["ui-operator"].name             # "UI Operator"
"""

from teamgraph.roles.loader import (
    RoleFileError,
    builtin_roles_dir,
    format_role_text,
    load_roles,
    load_written_roles,
    parse_role_file,
    parse_role_text,
    write_role_file,
)
from teamgraph.roles.model import LEADER_ROLE_ID, TOOL_SETS, Role, ToolSetName

__all__ = [
    "LEADER_ROLE_ID",
    "TOOL_SETS",
    "Role",
    "RoleFileError",
    "ToolSetName",
    "builtin_roles_dir",
    "format_role_text",
    "load_roles",
    "load_written_roles",
    "parse_role_file",
    "parse_role_text",
    "write_role_file",
]
