"""Read and write role files: Markdown with YAML front matter.

A role file looks like this::

    ---
    id: ui-operator
    name: UI Operator
    description: Designs interfaces and turns designs into front-end code.
    thinking_mode: fast
    tools: [member, files]
    ---

    You are the team's UI specialist. ...

Every mistake in a role file becomes a `RoleFileError`: one line that names the file,
the field and how to fix it. People write these files by hand, so a raw YAML or
pydantic traceback would be the worst possible answer.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from teamgraph.roles.model import (
    LEADER_NAME,
    LEADER_ROLE_ID,
    LEVELS,
    ROLE_ID_PATTERN,
    THINKING_MODES,
    TOOL_SETS,
    Role,
)

FENCE = "---"
ROLE_FILE_SUFFIX = ".md"

# Keys a role file may set; `prompt` is the body and `source` is where it was read.
FRONT_MATTER_KEYS: tuple[str, ...] = tuple(key for key in Role.model_fields if key not in ("prompt", "source"))
# Always written, even when they hold the default, so a written file reads on its own.
_ALWAYS_WRITTEN = ("id", "name", "description")

# Closed vocabularies, for "allowed: ..." in error messages.
_CHOICES: dict[str, tuple[str, ...]] = {
    "thinking_mode": THINKING_MODES,
    "level": LEVELS,
    "tools": TOOL_SETS,
}

_FIXES: dict[str, str] = {
    "id": "use a slug of lowercase letters, digits, '-' and '_', e.g. id: data-analyst",
    "name": (
        "use a plain display name such as 'Data Analyst' that does not end in "
        f"'_<number>'; only id {LEADER_ROLE_ID} is named '{LEADER_NAME}'"
    ),
    "description": "set description to one sentence of text (quote it if it contains ': ')",
    "model": ("set model to a model name such as openai:gpt-4o-mini, or remove the line to use the team's model"),
    "thinking_mode": "set thinking_mode to fast or deep",
    "tools": f"list tool sets from {', '.join(TOOL_SETS)}, e.g. tools: [member, files]",
    "level": "set level to one of L1, L2, L3, L4",
    "mcp": "list MCP server names given to Team(mcp_servers=...), or all, e.g. mcp: [github]",
}

_FORMAT_HINT = (
    f"begin the file with a '{FENCE}' line, then the YAML front matter (id, name, ...), "
    f"then a closing '{FENCE}' line, then the role prompt"
)


class _FrontMatterDumper(yaml.SafeDumper):
    """Block-style mapping, but lists on one line: `tools: [member, files]`."""


_FrontMatterDumper.add_representer(
    list,
    lambda dumper, value: dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=True),
)


class RoleFileError(ValueError):
    """A role file (or folder of role files) that cannot be used.

    Attributes:
        path: The file or folder at fault.
        field: The front-matter key at fault, or None when the problem is not one key.
        problem: What is wrong, e.g. ``"'slow' is not allowed (allowed: fast, deep)"``.
        fix: What to do about it, e.g. ``"set thinking_mode to fast or deep."``.
    """

    def __init__(self, path: str | Path, *, field: str | None = None, problem: str, fix: str) -> None:
        self.path = str(path)
        self.field = field
        self.problem = problem.rstrip(". ")
        self.fix = fix if fix.endswith(".") else f"{fix}."
        where = f"{self.path}: field '{field}'" if field else self.path
        super().__init__(f"{where}: {self.problem}. Fix: {self.fix}")


def builtin_roles_dir() -> Path:
    """Return the folder of the built-in role files shipped with teamgraph."""
    return Path(__file__).parent / "builtin"


def parse_role_text(text: str, *, source: str) -> Role:
    """Parse the text of a role file.

    Keys left empty in the front matter take their default value.

    Args:
        text: The whole file: front matter between ``---`` lines, then the prompt.
        source: Where the text came from; named in errors and kept as `Role.source`.

    Returns:
        The role, with the stripped body as its prompt.

    Raises:
        RoleFileError: If the text is not a valid role file.
    """
    front_matter, body = _split_front_matter(text, source=source)
    meta = _load_front_matter(front_matter, source=source)
    _check_keys(meta, source=source)
    # An empty value (`model:`) means "not set": the default applies.
    fields = {key: value for key, value in meta.items() if value is not None}
    try:
        return Role.model_validate({**fields, "prompt": body, "source": source})
    except ValidationError as exc:
        raise _to_role_file_error(exc, source=source) from None


def parse_role_file(path: str | Path) -> Role:
    """Read and parse one role file.

    Args:
        path: The ``.md`` file. Its name need not match the role id.

    Returns:
        The role, with `source` set to ``str(path)``.

    Raises:
        RoleFileError: If the file cannot be read or is not a valid role file.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise RoleFileError(path, problem="the file is not UTF-8 text", fix="save it as UTF-8") from None
    except OSError as exc:
        raise RoleFileError(
            path,
            problem=f"cannot read the file ({exc.strerror or exc})",
            fix="check that it exists and is readable",
        ) from None
    return parse_role_text(text, source=str(path))


def load_roles(*dirs: str | Path | None, check: Callable[[Role], None] | None = None) -> dict[str, Role]:
    """Load the built-in roles, then the roles in each given folder.

    Each ``*.md`` file directly inside a folder is one role. A role in a later folder
    replaces a built-in (or earlier) role with the same id.

    Args:
        *dirs: Folders of role files, in increasing priority. None and folders that
            do not exist are skipped.
        check: Called with every role that will be used (the permission matrix's check);
            it raises RoleFileError to refuse one.

    Returns:
        Roles by id: the Team Leader first, then the others in load order.

    Raises:
        RoleFileError: If a role file is invalid, a path is a file rather than a
            folder, or two files in one folder share an id.
    """
    roles = {
        role_id: role.model_copy(update={"source": "builtin"})
        for role_id, role in _load_directory(builtin_roles_dir()).items()
    }
    for directory in dirs:
        if directory is not None:
            roles.update(_load_directory(Path(directory).expanduser()))
    if check is not None:
        for role in roles.values():
            check(role)
    leader = roles.pop(LEADER_ROLE_ID, None)
    return ({LEADER_ROLE_ID: leader} if leader else {}) | roles


def load_written_roles(
    directory: str | Path, *, check: Callable[[Role], None] | None = None
) -> tuple[dict[str, Role], dict[str, RoleFileError]]:
    """Load the role files a team wrote itself, skipping (not raising on) broken ones.

    NOTE: a role file the team wrote (``create_custom_agent``) must never make the
    home unusable: a broken one is reported, and the team compiles without it.

    Args:
        directory: The team's own roles folder (``<home>/roles``).
        check: Called with every role (the permission matrix's check); a role it
            refuses is skipped like a broken file.

    Returns:
        The roles by id, and the problems by file path.
    """
    folder = Path(directory).expanduser()
    roles: dict[str, Role] = {}
    problems: dict[str, RoleFileError] = {}
    if not folder.is_dir():
        return roles, problems
    for path in sorted(folder.glob(f"*{ROLE_FILE_SUFFIX}"), key=lambda p: p.name):
        if path.name.startswith(".") or not path.is_file():
            continue
        try:
            role = parse_role_file(path)
            if check is not None:
                check(role)
        except RoleFileError as exc:
            problems[str(path)] = exc
            continue
        roles.setdefault(role.id, role)
    return roles, problems


def format_role_text(role: Role) -> str:
    """Render a role as role-file text, the inverse of `parse_role_text`.

    The front matter holds id, name and description, plus every other field that
    differs from its default; the body is the prompt.

    Args:
        role: The role to render.

    Returns:
        The file text.
    """
    meta: dict[str, Any] = {}
    for key in FRONT_MATTER_KEYS:
        value = getattr(role, key)
        if key in _ALWAYS_WRITTEN or value != Role.model_fields[key].default:
            meta[key] = list(value) if isinstance(value, tuple) else value
    # A wide line keeps long descriptions on one line, as a person would write them.
    front_matter = yaml.dump(meta, Dumper=_FrontMatterDumper, sort_keys=False, allow_unicode=True, width=10_000)
    text = f"{FENCE}\n{front_matter}{FENCE}\n"
    return f"{text}\n{role.prompt}\n" if role.prompt else text


def write_role_file(directory: str | Path, role: Role) -> Path:
    """Write a role to ``<directory>/<id>.md``, atomically.

    Args:
        directory: The folder to write into; created if missing.
        role: The role to write. `Role.source` is not written.

    Returns:
        The path of the written file.
    """
    directory = Path(directory).expanduser()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{role.id}{ROLE_FILE_SUFFIX}"
    # The temporary file is hidden and not *.md, so a concurrent load_roles skips it;
    # os.replace then swaps it in whole, so readers never see half a file.
    fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=f".{role.id}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as file:
            file.write(format_role_text(role))
        os.chmod(tmp_name, 0o644)  # mkstemp makes it private; role files are not secret
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    return path


def _load_directory(directory: Path) -> dict[str, Role]:
    """Load every role file directly inside `directory`, sorted by file name."""
    if not directory.exists():
        return {}
    if not directory.is_dir():
        raise RoleFileError(
            directory,
            problem="this is a file, not a folder of role files",
            fix="pass the folder that holds the role .md files",
        )
    roles: dict[str, Role] = {}
    paths = sorted(directory.glob(f"*{ROLE_FILE_SUFFIX}"), key=lambda p: p.name)
    for path in paths:
        # Skip editor lock/backup files (".#x.md") and folders that happen to end in .md.
        if path.name.startswith(".") or not path.is_file():
            continue
        role = parse_role_file(path)
        if role.id in roles:
            raise RoleFileError(
                path,
                field="id",
                problem=f"id {role.id!r} is also used by {roles[role.id].source}",
                fix="give each role file in a folder its own id, or remove one of the two",
            )
        roles[role.id] = role
    return roles


def _split_front_matter(text: str, *, source: str) -> tuple[str, str]:
    """Split role-file text into (front matter, stripped body)."""
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].rstrip() != FENCE:
        raise RoleFileError(
            source,
            problem=f"the file does not start with '{FENCE}' front matter",
            fix=_FORMAT_HINT,
        )
    for index, line in enumerate(lines[1:], start=1):
        if line.rstrip() == FENCE:
            return "".join(lines[1:index]), "".join(lines[index + 1 :]).strip()
    raise RoleFileError(
        source,
        problem=f"the front matter is never closed by a '{FENCE}' line",
        fix=f"add a '{FENCE}' line after the last front-matter key, before the prompt",
    )


def _load_front_matter(front_matter: str, *, source: str) -> dict[Any, Any]:
    """Parse the YAML front matter into a mapping."""
    try:
        meta = yaml.safe_load(front_matter)
    except RecursionError:
        # NOTE: PyYAML builds nested values recursively: thousands of "[" exhaust the stack.
        raise RoleFileError(
            source,
            problem="the front matter is nested too deeply to read",
            fix="write each key's value flat: a string, a number or a list of strings",
        ) from None
    except yaml.YAMLError as exc:
        raise RoleFileError(
            source,
            problem=f"invalid YAML in the front matter{_yaml_location(exc)}",
            fix=(
                "correct the YAML there; quote values that contain ': ' or start with "
                "a special character such as '[', '{', '*' or '&'"
            ),
        ) from None
    if meta is None:  # an empty block: report the missing id below, not a type error
        return {}
    if not isinstance(meta, dict):
        raise RoleFileError(
            source,
            problem=f"the front matter is {_kind(meta)}, not a mapping of keys to values",
            fix="write one 'key: value' per line, e.g. id: data-analyst",
        )
    return meta


def _yaml_location(exc: yaml.YAMLError) -> str:
    """Describe where in the file a YAML error is, e.g. " at line 3: <reason>"."""
    # Marks count from 0 within the front matter, which starts on the file's line 2.
    mark = getattr(exc, "problem_mark", None)
    reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    # An unclosed bracket or quote is reported where YAML gave up (often the end);
    # the context says where the unclosed thing started, which is what people need.
    context = getattr(exc, "context", None)
    context_mark = getattr(exc, "context_mark", None)
    if context and context_mark is not None and context_mark.line != getattr(mark, "line", None):
        reason = f"{reason} ({context} started at line {context_mark.line + 2})"
    return f" at line {mark.line + 2}: {reason}" if mark is not None else f": {reason}"


def _check_keys(meta: dict[Any, Any], *, source: str) -> None:
    """Reject unknown keys (with a did-you-mean) and a missing id or name."""
    for key in meta:
        if key not in FRONT_MATTER_KEYS:
            raise RoleFileError(
                source,
                field=str(key),
                problem=f"unknown key (allowed: {', '.join(FRONT_MATTER_KEYS)})",
                fix=_unknown_key_fix(str(key)),
            )
    for key, example in (("id", _id_example(source)), ("name", "Data Analyst")):
        if meta.get(key) is None:
            raise RoleFileError(
                source,
                field=key,
                problem="is missing",
                fix=f"add '{key}: {example}' (or similar) to the front matter",
            )


def _unknown_key_fix(key: str) -> str:
    if key == "prompt":
        return f"put the prompt in the body, below the closing '{FENCE}' line"
    close = difflib.get_close_matches(key, FRONT_MATTER_KEYS, n=1)
    return f"rename it to '{close[0]}'" if close else "remove it"


def _id_example(source: str) -> str:
    """Suggest the file's own name as its id when it would be a valid one."""
    stem = Path(source).stem
    return stem if ROLE_ID_PATTERN.fullmatch(stem) else "data-analyst"


def _to_role_file_error(exc: ValidationError, *, source: str) -> RoleFileError:
    """Turn the first pydantic error into a readable RoleFileError."""
    error = exc.errors()[0]
    field = str(error["loc"][0]) if error["loc"] else None
    value = error.get("input")
    kind = error["type"]
    fix = _FIXES.get(field or "", "correct the front matter")
    if kind == "value_error":  # our own validators: their message is the problem
        problem = str(error["ctx"]["error"])
    elif kind == "literal_error" and field == "tools":
        problem = f"unknown tool set {value!r} (valid: {', '.join(TOOL_SETS)})"
    elif kind == "literal_error" and field in _CHOICES:
        problem = f"{value!r} is not allowed (allowed: {', '.join(_CHOICES[field])})"
    elif kind == "tuple_type":
        problem = f"expected a list, got {_kind(value)}"
    elif kind == "string_type":
        problem = f"expected text, got {_kind(value)}"
        fix = f"give {field} a text value, quoted if YAML reads it as a number, boolean or date"
    else:
        problem = f"{error['msg']} (got {value!r})"
    return RoleFileError(source, field=field, problem=problem, fix=fix)


def _kind(value: object) -> str:
    """Name a YAML value's type the way a person writing YAML would."""
    if value is None:
        return "null (an empty value)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the text {value!r}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"
