"""What ``Team(...)`` checks before it builds anything: each bad argument is one clear error.

A wrong-typed argument is a ``TypeError`` naming the argument and the types it takes
(instead of an ``AttributeError`` deep inside the build); a user tool named like a
built-in one, a ``roles_dir`` that does not exist, a database URL of an unknown scheme
and a home folder the team cannot write are refused with what to do instead.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver

from teamgraph.checkpoints.files import private_dir
from teamgraph.checkpoints.store import check_db
from teamgraph.policy import Policy
from teamgraph.roles import RoleFileError
from teamgraph.roles.matrix import PermissionMatrix

_PATH = (str, os.PathLike)
_EXPECTED: dict[str, tuple[tuple[Any, ...], str]] = {
    "roles_dir": ((*_PATH, type(None)), "a folder path (str or Path) or None"),
    "policy": ((Policy, type(None)), "a teamgraph.Policy or None"),
    "home": (_PATH, "a folder path (str or Path)"),
    "prices": ((Mapping, type(None)), "a mapping like {'gpt-4o-mini': {'input': 0.15, 'output': 0.6}} or None"),
    "permissions": (
        (PermissionMatrix, Mapping, *_PATH, type(None)),
        "a PermissionMatrix, a mapping shaped like permissions.yaml, a YAML file path, or None",
    ),
    "project": ((str, type(None)), "a project folder name (str) or None"),
}
"""Argument -> (accepted types, how the error names them)."""


def _kind(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"[:120]


def check_arguments(**arguments: Any) -> None:
    """Refuse a ``Team()`` argument of the wrong type, naming it and the types it takes.

    Args:
        **arguments: ``Team``'s arguments by name.

    Raises:
        TypeError: An argument is not of a type ``Team`` takes.
    """
    for name, (types, expected) in _EXPECTED.items():
        if name in arguments and not isinstance(arguments[name], types):
            raise TypeError(f"Team({name}=...) takes {expected}; got {_kind(arguments[name])}.")
    _check_model(arguments.get("model"))
    _check_checkpointer(arguments.get("checkpointer"))
    _check_callable("clock", arguments.get("clock"), "an object with a now() method returning a datetime, or None")
    _check_callable("token_counter", arguments.get("token_counter"), "a callable(messages) -> int, or None")


def _check_model(model: Any) -> None:
    if model is None or isinstance(model, BaseChatModel | str) or callable(model):
        return
    raise TypeError(
        "Team(model=...) takes a LangChain chat model, a string like 'openai:gpt-4o-mini', "
        f"a callable(role) -> chat model, or None (TEAMGRAPH_MODEL); got {_kind(model)}."
    )


def _check_checkpointer(checkpointer: Any) -> None:
    if checkpointer is None or checkpointer is False or isinstance(checkpointer, BaseCheckpointSaver):
        return
    if isinstance(checkpointer, _PATH):
        check_db(os.fspath(checkpointer), source="Team(checkpointer=...)")
        return
    raise TypeError(
        "Team(checkpointer=...) takes None (SQLite in home, or $TEAMGRAPH_DB), False (none), a database URL "
        f"or SQLite path, or a LangGraph checkpointer; got {_kind(checkpointer)}."
    )


def _check_callable(name: str, value: Any, expected: str) -> None:
    if value is None:
        return
    if (name == "clock" and callable(getattr(value, "now", None))) or (name != "clock" and callable(value)):
        return
    raise TypeError(f"Team({name}=...) takes {expected}; got {_kind(value)}.")


def check_tools(tools: Any, builtin_names: Callable[[], set[str]]) -> dict[str, list[BaseTool]]:
    """The user's tools by role id (``"*"``: every member), each a tool not named like a built-in one.

    Args:
        tools: ``Team(tools=...)``: a sequence of tools, or a mapping from role id to tools.
        builtin_names: The names of teamgraph's own tools (asked only when there are user tools).

    Returns:
        The tools by role id.

    Raises:
        TypeError: ``tools`` is not a sequence of tools or a mapping to sequences of tools.
        ValueError: A tool has the name of a built-in tool (it would be silently shadowed).
    """
    expected = "a list of LangChain tools, or a mapping from role id ('*': every member) to such lists"
    if isinstance(tools, Mapping):
        by_role = dict(tools)
    elif isinstance(tools, Sequence) and not isinstance(tools, str):
        by_role = {"*": tools}
    else:
        raise TypeError(f"Team(tools=...) takes {expected}; got {_kind(tools)}.")
    checked: dict[str, list[BaseTool]] = {}
    for role, listed in by_role.items():
        if not isinstance(listed, Sequence) or isinstance(listed, str):
            raise TypeError(f"Team(tools=...)[{role!r}] takes a list of LangChain tools; got {_kind(listed)}.")
        for item in listed:
            if not isinstance(item, BaseTool):
                raise TypeError(
                    f"Team(tools=...) takes LangChain tools (decorate a function with @tool); got {_kind(item)}."
                )
        checked[str(role)] = list(listed)
    clashes = sorted({t.name for ts in checked.values() for t in ts} & (builtin_names() if checked else set()))
    if clashes:
        raise ValueError(
            f"Team(tools=...): {', '.join(map(repr, clashes))} is the name of a built-in teamgraph tool; "
            "give your tool another name (an agent would otherwise get only one of the two)."
        )
    return checked


def check_roles_dir(roles_dir: str | os.PathLike[str] | None) -> None:
    """Refuse a ``roles_dir`` that does not exist (its roles would be silently missing).

    Raises:
        RoleFileError: The folder does not exist.
    """
    if roles_dir is not None and not Path(roles_dir).expanduser().exists():
        raise RoleFileError(
            os.fspath(roles_dir),
            problem="roles_dir does not exist",
            fix="create the folder, pass the folder that holds your role .md files, or leave roles_dir out",
        )


def check_home_writable(home: Path) -> None:
    """Fail before a run starts when the team cannot write its home folder.

    NOTE: a real write, not ``os.access``: a read-only mount or a full disk pass the
    permission bits, and SQLite then fails mid-run (or its memory-mapped WAL index
    kills the process with SIGBUS).

    Raises:
        PermissionError: The home folder cannot be created or written (the message says which and why).
    """
    try:
        private_dir(home)  # NOTE: owner-only, as every folder the team creates (it holds every message)
        with tempfile.TemporaryFile(dir=home, prefix=".write-check-"):
            pass
    except OSError as exc:
        reason = exc.strerror or errno.errorcode.get(exc.errno or 0, type(exc).__name__)
        raise PermissionError(
            f"The team's home folder {str(home)!r} cannot be written ({reason}): make it writable, "
            "or pass another home= (--home)."
        ) from exc
