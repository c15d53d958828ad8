"""teamgraph: durable LLM agent teams on LangGraph.

A Team Leader plans, delegates to role-based members, answers their questions
and reports; every agent keeps its own conversation, and the whole team is
checkpointed to SQLite so a run can pause, survive a crash and resume.

NOTE: the public names are imported when first used (PEP 562), so that
``import teamgraph.<module>`` and the ``teamgraph`` command start without loading
LangGraph: a Ctrl-C in the command's first second is then handled by the command.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from teamgraph.history import History
    from teamgraph.models import ModelNotConfiguredError, ScriptedChatModel, ScriptExhaustedError
    from teamgraph.policy import Policy
    from teamgraph.roles import Role, RoleFileError, load_roles
    from teamgraph.roles.matrix import PermissionMatrix, PermissionsError
    from teamgraph.team import Team

_WHERE = {
    "History": "teamgraph.history",
    "ModelNotConfiguredError": "teamgraph.models",
    "PermissionMatrix": "teamgraph.roles.matrix",
    "PermissionsError": "teamgraph.roles.matrix",
    "Policy": "teamgraph.policy",
    "Role": "teamgraph.roles",
    "RoleFileError": "teamgraph.roles",
    "ScriptExhaustedError": "teamgraph.models",
    "ScriptedChatModel": "teamgraph.models",
    "Team": "teamgraph.team",
    "load_roles": "teamgraph.roles",
}

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


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'teamgraph' has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
