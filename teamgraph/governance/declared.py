"""Declared tools: the tools the tool maker registers for other roles (the collaboration spec §4.1).

A declared tool is data, not code: a name, a description, its arguments (name ->
description, all text) and a command template whose ``{argument}`` placeholders are
filled in, each value quoted as one argument. It runs like ``run_command``: no shell,
in the thread's project folder, and only when the filled-in command is on the
team's allow-list (``Policy.commands``). Registering one is the tool maker's
ordinary work; endowing a role with it is a sensitive operation (an approval).

Files: ``<home>/tools/<name>.yaml`` per tool, ``<home>/tools/endowments.yaml`` maps
a role id to the declared tools its agents get.
"""

from __future__ import annotations

import re
import shlex
import string
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

TOOLS_DIR = "tools"
ENDOWMENTS_FILE = "endowments.yaml"
TOOL_NAME = re.compile(r"^[a-z][a-z0-9_]{1,47}$")


class DeclaredToolError(ValueError):
    """A declaration or an endowment that cannot be used (the message says how to fix it)."""


class DeclaredTool(BaseModel):
    """One declared tool.

    Attributes:
        name: snake_case, not the name of a built-in tool.
        description: What it does, for the model.
        arguments: Argument name -> its description (every value is text).
        command: The program and its arguments, with ``{argument}`` placeholders.
        author: Who registered it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str = Field(min_length=1)
    arguments: dict[str, str] = Field(default_factory=dict)
    command: str = Field(min_length=1)
    author: str = ""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not TOOL_NAME.fullmatch(value):
            raise ValueError(f"'{value}' is not a tool name: use snake_case, e.g. 'lint_file'")
        return value

    def placeholders(self) -> set[str]:
        """The ``{argument}`` names its command template uses."""
        return {field for _, field, _, _ in string.Formatter().parse(self.command) if field}

    def render(self, values: dict[str, str]) -> str:
        """The command with each placeholder replaced by its value, quoted as one argument."""
        return self.command.format(**{k: shlex.quote(str(values.get(k, ""))) for k in self.placeholders()})


def _folder(home: Path) -> Path:
    return home / TOOLS_DIR


def register(home: Path, tool: DeclaredTool, *, builtin: set[str]) -> Path:
    """Write ``tool``'s declaration; refused for a built-in name or a template that uses an undeclared argument."""
    if tool.name in builtin:
        raise DeclaredToolError(f"'{tool.name}' is a built-in tool; choose another name.")
    unknown = sorted(tool.placeholders() - set(tool.arguments))
    if unknown:
        raise DeclaredToolError(
            f"the command uses {', '.join('{' + u + '}' for u in unknown)}, which are not in arguments; "
            "declare each one (name: description)."
        )
    try:
        shlex.split(tool.render({}))
    except ValueError as exc:
        raise DeclaredToolError(f"the command cannot be split into arguments ({exc}); check its quotes.") from None
    path = _folder(home) / f"{tool.name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(tool.model_dump(), sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def load(home: Path, name: str) -> DeclaredTool:
    """The declared tool ``name``, or an error naming the ones there are."""
    path = _folder(home) / f"{name}.yaml"
    if not TOOL_NAME.fullmatch(name) or not path.is_file():
        known = ", ".join(sorted(p.stem for p in _folder(home).glob("*.yaml") if p.name != ENDOWMENTS_FILE))
        raise DeclaredToolError(f"No declared tool '{name}'. Declared tools: {known or 'none'}.")
    try:
        return DeclaredTool.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (yaml.YAMLError, ValidationError) as exc:
        raise DeclaredToolError(f"{path}: not a valid declaration ({exc}).") from None


def endowments(home: Path) -> dict[str, list[str]]:
    """Role id -> the declared tools its agents get."""
    path = _folder(home) / ENDOWMENTS_FILE
    data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    return {str(k): [str(n) for n in v] for k, v in (data or {}).items()}


def endow(home: Path, role_id: str, name: str) -> list[str]:
    """Give the declared tool ``name`` to role ``role_id``; the role's declared tools after it."""
    load(home, name)
    current = endowments(home)
    names = sorted({*current.get(role_id, []), name})
    current[role_id] = names
    path = _folder(home) / ENDOWMENTS_FILE
    path.write_text(yaml.safe_dump(current, sort_keys=True, allow_unicode=True), encoding="utf-8")
    return names


def endowed(home: Path, role_id: str) -> list[DeclaredTool]:
    """The declared tools agents of ``role_id`` get (a declaration deleted since is left out)."""
    tools = []
    for name in endowments(home).get(role_id, []):
        try:
            tools.append(load(home, name))
        except DeclaredToolError:
            continue
    return tools
