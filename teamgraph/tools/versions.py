"""Versions of project files: who may write a shared file, and how to go back.

Every write (``write_file``, ``edit_file``, ``restore_file``) makes a numbered
version of the file, kept whole in ``<project>/.versions/<path>/<n>.json`` with who
made it and the tool call that did. A write is checked against the version its
caller last saw (read or wrote, ``team["files"]`` in state plus this step's own
effects): when another agent wrote a newer version meanwhile, the write is refused
and the caller is told who wrote it and how to merge. The check and the write happen
under one lock per file, so of two agents writing the same file at once exactly one
succeeds (the collaboration spec §2.2).

Crash safety: a version records its tool call id, so a step re-run after a crash
that repeats the call finds its version instead of making another; a version of
the caller's own that no committed step knows about (its step was lost) does not
count as "another agent's".
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from teamgraph.roles import matrix
from teamgraph.tools import errors, inside
from teamgraph.tools.context import ToolContext, fail

VERSIONS_DIR = ".versions"
"""The hidden folder of a project that holds every file's versions (file tools never list nor touch it)."""


@dataclass(frozen=True)
class Version:
    """One version of a project file."""

    number: int
    by: str
    call_id: str
    action: str
    """``write``, ``edit`` or ``restore``."""


def _folder(root: Path, rel: str) -> Path:
    return root / VERSIONS_DIR / rel


def history(root: Path, rel: str) -> list[Version]:
    """Every version of ``rel`` (a path relative to the project ``root``), oldest first."""
    folder = _folder(root, rel)
    if not folder.is_dir():
        return []
    found = []
    for path in folder.glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        found.append(Version(data["number"], data["by"], data["call_id"], data["action"]))
    return sorted(found, key=lambda v: v.number)


def content_of(root: Path, rel: str, number: int) -> str | None:
    """The text of version ``number`` of ``rel``, or None when there is no such version."""
    path = _folder(root, rel) / f"{number}.json"
    if not path.is_file():
        return None
    return str(json.loads(path.read_text(encoding="utf-8"))["content"])


@contextmanager
def _locked(root: Path, rel: str) -> Iterator[None]:
    """One writer of ``rel`` at a time, across threads and processes (an advisory ``flock``)."""
    folder = _folder(root, rel)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def seen_version(context: ToolContext, rel: str) -> int:
    """The newest version of ``rel`` the caller read or wrote (0: none), this step's calls included."""
    record = context.team.get("files", {}).get(rel)
    seen = record["seen"].get(context.caller, 0) if record else 0
    for effect in context.effects:
        if effect["kind"] == "file" and effect["path"] == rel:
            seen = max(seen, effect["version"])
    return seen


def stale_error(rel: str, newer: Version, seen: int) -> Exception:
    """The refusal of a write based on an older version: the file, the other writer, how to merge."""
    saw = f"version {seen}" if seen else "no version of it"
    return fail(
        f"'{rel}' changed since you last saw it: {newer.by} wrote version {newer.number} ({newer.action}); "
        f"you saw {saw}. Nothing was written. Read it with read_file, merge your change into it, then "
        "write_file or edit_file again.",
        code=errors.STALE_VERSION,
    )


def commit(
    context: ToolContext, root: Path, rel: str, change: Callable[[str | None], str], *, action: str, check: bool = True
) -> Version:
    """Make the next version of ``rel``: check the caller saw the current one, then write both files.

    Args:
        context: The calling tool's context (caller, call id, what it saw).
        root: The project folder.
        rel: The file's path relative to ``root`` (POSIX form).
        change: The current text (None: no file) -> the new text; it may raise a tool error.
        action: ``write``, ``edit`` or ``restore``.
        check: Whether a newer version by another agent refuses the write (a restore names its version).

    Returns:
        The version made (or, for a re-run of the same call, the one it made before).
    """
    check_writable(context, rel)
    with _locked(root, rel):
        versions = history(root, rel)
        for version in versions:
            if version.call_id == context.tool_call_id and version.by == context.caller:
                return version  # NOTE: the same call re-run after a crash: its write is done already
        seen = seen_version(context, rel)
        newer = [v for v in versions if v.number > seen and v.by != context.caller]
        if check and newer:
            raise stale_error(rel, newer[-1], seen)
        text = change(_current(root, rel))
        version = Version((versions[-1].number if versions else 0) + 1, context.caller, context.tool_call_id, action)
        record = {**version.__dict__, "content": text}
        _write_atomically(_folder(root, rel) / f"{version.number}.json", json.dumps(record, ensure_ascii=False))
        inside.write_text(root, rel, text)  # NOTE: race-free, no link followed (tools/inside.py)
        return version


def _current(root: Path, rel: str) -> str | None:
    """The file's text now (None: no such file), read without following a link."""
    try:
        return inside.read_text(root, rel)
    except inside.OutsideError as exc:
        if exc.kind == "missing":
            return None
        raise


def check_writable(context: ToolContext, rel: str) -> None:
    """Refuse a write outside the caller's role's path resources (the collaboration spec §4.1, the resources column)."""
    record = context.agents.get(context.caller)
    role = record["role"] if record else ""
    if matrix.writable(context.runtime.matrix, role, rel):
        return
    limits = ", ".join(matrix.path_resources(context.runtime.matrix, role))
    raise fail(
        f"{context.caller} ({role}) may write only under {limits}; '{rel}' is outside them. "
        "Ask the Team Leader (ask_master) to have an agent whose resources include it write it.",
        code=errors.FORBIDDEN,
    )


def _write_atomically(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a reader never sees half a file)."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
