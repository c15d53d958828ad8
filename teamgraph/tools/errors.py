"""Tool error codes: what went wrong with a tool call, as a word a program can test.

A tool error keeps its English for the model (``Error: ...``, what was wrong and how
to fix it) and carries one code from this closed vocabulary on its ToolMessage
(``results.ERROR_KEY``: ``additional_kwargs["teamgraph_error"]``), so a program (or a
test) tells a wrong name from a missing plan without reading the sentence. A tool
raises ``fail(problem, code=...)`` (``tools/context.py``); the executor
(``nodes/tool_calls.py``) gives the errors it makes itself their codes. docs/protocols.md
lists every code.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Final, Literal, NamedTuple, get_args

from langchain_core.tools import ToolException

ErrorCode = Literal[
    "unknown_agent",
    "agent_ended",
    "self_address",
    "not_a_member",
    "nobody_to_address",
    "unknown_role",
    "unknown_request",
    "already_answered",
    "unknown_task",
    "unknown_skill",
    "unknown_path",
    "no_match",
    "stale_version",
    "bad_argument",
    "wrong_tool",
    "forbidden",
    "plan_required",
    "unknown_tool",
    "invalid_call",
    "tool_failed",
]
"""The tool error codes (docs/protocols.md, "Tool errors")."""

# Whom the call addresses.
UNKNOWN_AGENT: Final = "unknown_agent"
"""No agent (member, session) by that name."""
AGENT_ENDED: Final = "agent_ended"
"""The agent exists but can no longer be addressed (terminated, failed, or terminated earlier in this step)."""
SELF_ADDRESS: Final = "self_address"
"""The caller named itself."""
NOT_A_MEMBER: Final = "not_a_member"
"""The Team Leader was named where a member is needed (ask it with ``ask_master``)."""
NOBODY_TO_ADDRESS: Final = "nobody_to_address"
"""No active member to send to (a broadcast in an empty team)."""

# What the call names.
UNKNOWN_ROLE: Final = "unknown_role"
UNKNOWN_REQUEST: Final = "unknown_request"
"""No pending request (question, approval, shutdown, plan) by that id for the caller."""
ALREADY_ANSWERED: Final = "already_answered"
"""The request is answered, decided or closed already."""
UNKNOWN_TASK: Final = "unknown_task"
UNKNOWN_SKILL: Final = "unknown_skill"
UNKNOWN_PATH: Final = "unknown_path"
"""No file or folder at that path in the project folder."""
NO_MATCH: Final = "no_match"
"""``edit_file``'s text occurs 0 or several times in the file (the error gives the count)."""
STALE_VERSION: Final = "stale_version"
"""A write based on an older version of a shared file than the current one (read, merge, write again)."""

# The call itself.
BAD_ARGUMENT: Final = "bad_argument"
"""An argument's value the tool cannot use (a time-out, an offset, an empty list, a missing field...)."""
WRONG_TOOL: Final = "wrong_tool"
"""This tool cannot do it, another can (the error names it): waiting on the leader through sessions_send."""
FORBIDDEN: Final = "forbidden"
"""Not allowed: the permission matrix, a path outside the project folder, a leader-only message."""
PLAN_REQUIRED: Final = "plan_required"
"""An approved plan must come first (``Policy.require_plan``, a role's ``plan_mode_required``)."""

# What the executor answers itself.
UNKNOWN_TOOL: Final = "unknown_tool"
"""The caller has no tool by that name."""
INVALID_CALL: Final = "invalid_call"
"""The arguments are not a JSON object, or do not match the tool's schema."""
TOOL_FAILED: Final = "tool_failed"
"""The tool raised an unexpected exception (after its retries), or a governed act failed."""

ERROR_CODES: Final[frozenset[str]] = frozenset(get_args(ErrorCode))


class ToolError(ToolException):
    """A tool error with its code (``fail`` builds one); the executor stores the code on the result."""

    def __init__(self, problem: str, *, code: ErrorCode) -> None:
        super().__init__(problem)
        self.code: ErrorCode = code

    def __reduce__(self) -> tuple[Any, ...]:
        # NOTE: an exception is copied and pickled through its args; the code is keyword-only
        return (partial(type(self), code=self.code), self.args, self.__dict__)


def code_of(exc: ToolException) -> ErrorCode:
    """The code of a tool error; ``tool_failed`` for a ToolException raised without one (a user's tool)."""
    return exc.code if isinstance(exc, ToolError) else TOOL_FAILED


class Refusal(NamedTuple):
    """Why a tool may not be used right now, and the code of the error (``run_tool_calls(refused=...)``)."""

    text: str
    code: ErrorCode
