"""teamgraph: durable LLM agent teams on LangGraph.

A Team Leader plans, delegates to role-based members, answers their questions
and reports; every agent keeps its own conversation, and the whole team is
checkpointed to SQLite so a run can pause, survive a crash and resume.
"""

from teamgraph.governance.matrix import PermissionMatrix, PermissionsError
from teamgraph.history import History
from teamgraph.models import (
    ModelNotConfiguredError,
    ScriptedChatModel,
    ScriptExhaustedError,
)
from teamgraph.policy import Policy
from teamgraph.roles import Role, RoleFileError, load_roles
from teamgraph.team import Team

__all__ = [
    "History",
    "ModelNotConfiguredError",
    "PermissionMatrix",
    "PermissionsError",
    "Policy",
    "Role",
    "RoleFileError",
    "ScriptExhaustedError",
    "ScriptedChatModel",
    "Team",
    "load_roles",
]
__version__ = "0.1.0"
