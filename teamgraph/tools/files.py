"""Safe work tools: read, write, edit and list files inside the thread's project folder.

Each thread works in ``<home>/project/<project_name>/`` (default project name: the
thread id), so two threads never overwrite each other's files.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from langchain_core.tools import BaseTool, tool
from langgraph.types import Command

from teamgraph.messaging import effects
from teamgraph.records import FileEffect
from teamgraph.tools import errors, inside, versions
from teamgraph.tools.context import ToolContext, fail, reply
from teamgraph.tools.errors import ToolError

MAX_READ_CHARS = 50_000


def resolve_inside(root: Path, path: str) -> Path:
    """``path`` under ``root``, refused if it leads outside: for naming files in messages.

    The file tools themselves open paths with ``inside`` (one race-free walk), never with this.

    Args:
        root: The folder the tools may touch.
        path: A path relative to ``root``, or an absolute path inside it
            (docs/protocols.md, "Files").

    Returns:
        The absolute path.
    """
    top = root.resolve()
    try:
        target = top.joinpath(*inside.parts_inside(root, path))
    except inside.OutsideError as exc:
        raise refusal(exc, root) from None
    if target.resolve() != top and top not in target.resolve().parents:
        # NOTE: a link that leads out is refused here too, though this path is only named
        raise refusal(inside.OutsideError(f"'{path}' leads outside the project folder.", kind="outside"), root)
    if target != top and versions.VERSIONS_DIR in target.relative_to(top).parts:
        raise fail(
            f"'{path}' is inside the versions folder. Use file_versions and restore_file.", code=errors.FORBIDDEN
        )
    return target


CODES: dict[str, errors.ErrorCode] = {
    "outside": errors.FORBIDDEN,
    "protected": errors.FORBIDDEN,
    "missing": errors.UNKNOWN_PATH,
    "not_a_file": errors.BAD_ARGUMENT,
    "not_a_folder": errors.BAD_ARGUMENT,
}


def refusal(exc: inside.OutsideError, root: Path) -> ToolError:
    """The tool error for a path ``inside`` refused."""
    hint = {
        "outside": f" Use a path relative to it, e.g. 'notes/plan.md', or an absolute path inside {root.resolve()}.",
        "missing": " Use list_files to see what exists.",
    }.get(exc.kind, "")
    return fail(f"{exc}{hint}", code=CODES[exc.kind])


def read_range(text: str, path: str, *, offset: int, limit: int) -> str:
    """``limit`` characters of ``text`` from ``offset`` (at most ``MAX_READ_CHARS``), saying how to read on.

    Args:
        text: The file's text.
        path: The path the caller gave (repeated in the note).
        offset: The first character.
        limit: How many characters.

    Returns:
        The range, with a note when the file goes on after it.
    """
    if offset < 0 or limit < 1:
        raise fail(
            f"offset must be >= 0 and limit >= 1 (got offset={offset}, limit={limit}).", code=errors.BAD_ARGUMENT
        )
    end = offset + min(limit, MAX_READ_CHARS)
    if end >= len(text):
        return text[offset:]
    return text[offset:end] + (
        f"\n[... truncated: {len(text)} characters in all; call read_file(path={path!r}, offset={end}) to read on]"
    )


def project_root(context: ToolContext) -> Path:
    """The thread's project folder: the only folder the file tools touch."""
    return context.runtime.project_folder(context.config)


def versioned_path(root: Path, path: str) -> str:
    """``path``'s place in the project folder (POSIX form, the key of its versions), found without
    touching the disk: a link swapped in meanwhile is met by the race-free open, not here."""
    try:
        parts = inside.parts_inside(root, path)
    except inside.OutsideError as exc:
        raise refusal(exc, root) from None
    if versions.VERSIONS_DIR in parts:
        raise fail(
            f"'{path}' is inside the versions folder. Use file_versions and restore_file.", code=errors.FORBIDDEN
        )
    return "/".join(parts)


def committed(
    context: ToolContext, root: Path, rel: str, change: Callable[[str | None], str], *, action: str
) -> versions.Version:
    """``versions.commit`` with a path ``inside`` refuses made the tool error that says why."""
    try:
        return versions.commit(context, root.resolve(), rel, change, action=action)
    except inside.OutsideError as exc:
        raise refusal(exc, root) from None


def file_effect(rel: str, version: versions.Version, *, action: str) -> FileEffect:
    """What the router records: the caller saw (or made) ``version`` of ``rel``."""
    return effects.file(path=rel, version=version.number, action=action)


@tool(parse_docstring=True)
def read_file(path: str, context: ToolContext, offset: int = 0, limit: int = MAX_READ_CHARS) -> Command:
    """Read a text file from the project folder, or a range of its characters.

    Args:
        path: Path relative to the project folder.
        offset: The first character to read (0: the start); to read on after a cut.
        limit: How many characters to read at most.
    """
    root = project_root(context)
    rel = versioned_path(root, path)
    try:
        text = inside.read_text(root, path)
    except inside.OutsideError as exc:
        raise refusal(exc, root) from None
    current = versions.history(root, rel)
    text = read_range(text, path, offset=offset, limit=limit)
    # NOTE: a reader is told when another agent changes the file later (a file_changed notice).
    seen = (file_effect(rel, current[-1], action="read"),) if current else ()
    return reply(text, context.tool_call_id, *seen)


def _written(context: ToolContext, rel: str, version: versions.Version, what: str) -> Command:
    text = f"{what} {rel} (version {version.number})."
    return reply(text, context.tool_call_id, file_effect(rel, version, action=version.action))


@tool(parse_docstring=True)
def write_file(path: str, content: str, context: ToolContext) -> Command:
    """Write a text file in the project folder (folders are created; a file is replaced).

    A file another agent changed since you last read it is not overwritten: read it,
    merge, and write again.

    Args:
        path: Path relative to the project folder.
        content: The whole new content.
    """
    root = project_root(context)
    rel = versioned_path(root, path)
    version = committed(context, root, rel, lambda _: content, action="write")
    return _written(context, rel, version, f"Wrote {len(content)} characters to")


def count_matches(text: str, old_text: str, path: str) -> int:
    """How often ``old_text`` occurs in ``text``; an error unless exactly once (names the file and the count)."""
    if not old_text:
        raise fail("old_text is empty: copy the exact text to replace from read_file.", code=errors.BAD_ARGUMENT)
    count = text.count(old_text)
    if count == 0:
        raise fail(
            f"old_text was found 0 times in '{path}': nothing changed. Read the file with read_file and copy "
            "the exact text (spaces and line breaks included).",
            code=errors.NO_MATCH,
        )
    if count > 1:
        raise fail(
            f"old_text was found {count} times in '{path}': nothing changed. Include more of the surrounding "
            "text so it matches exactly once.",
            code=errors.NO_MATCH,
        )
    return count


@tool(parse_docstring=True)
def edit_file(path: str, old_text: str, new_text: str, context: ToolContext) -> Command:
    """Replace one exact piece of text in a project file (it must occur exactly once).

    Args:
        path: Path relative to the project folder.
        old_text: The exact text to replace, copied from the file (include enough to be unique).
        new_text: The text to put in its place.
    """
    root = project_root(context)
    rel = versioned_path(root, path)

    def change(text: str | None) -> str:
        if text is None:
            raise fail(
                f"No file '{path}' in the project folder. Use list_files to see what exists, "
                "or write_file to create it.",
                code=errors.UNKNOWN_PATH,
            )
        count_matches(text, old_text, path)
        return text.replace(old_text, new_text, 1)

    version = committed(context, root, rel, change, action="edit")
    return _written(context, rel, version, f"Replaced {len(old_text)} characters with {len(new_text)} in")


@tool(parse_docstring=True)
def file_versions(path: str, context: ToolContext) -> str:
    """List the versions of a project file: number, who made it, how (write, edit, restore).

    Args:
        path: Path relative to the project folder.
    """
    root = project_root(context)
    rel = versioned_path(root, path)
    found = versions.history(root.resolve(), rel)
    if not found:
        raise fail(f"'{path}' has no versions: no agent wrote it.", code=errors.UNKNOWN_PATH)
    lines = [f"version {v.number}: {v.action} by {v.by}" for v in found]
    return "\n".join(lines) + f"\n(current: version {found[-1].number}; restore_file(path, version) goes back)"


@tool(parse_docstring=True)
def restore_file(path: str, version: int, context: ToolContext) -> Command:
    """Roll a project file back to an earlier version (a new version with that version's content).

    Args:
        path: Path relative to the project folder.
        version: The version to go back to (see file_versions).
    """
    root = project_root(context)
    rel = versioned_path(root, path)
    old = versions.content_of(root.resolve(), rel, version)
    if old is None:
        known = ", ".join(str(v.number) for v in versions.history(root.resolve(), rel)) or "none"
        raise fail(
            f"'{path}' has no version {version}. Its versions: {known} (file_versions lists them).",
            code=errors.UNKNOWN_PATH,
        )
    made = versions.commit(context, root.resolve(), rel, lambda _: old, action="restore", check=False)
    return _written(context, rel, made, f"Restored version {version} of")


@tool(parse_docstring=True)
def list_files(context: ToolContext, path: str = ".") -> str:
    """List files and folders under a folder of the project (recursively, up to 200).

    Args:
        path: Folder relative to the project folder; "." is the project folder itself.
    """
    root = project_root(context)
    try:
        found, _ = inside.list_names(root, path, limit=10**6)
    except inside.OutsideError as exc:
        raise refusal(exc, root) from None
    # NOTE: the versions folder is the tools' own record, not a project file.
    listed = [e for e in found if versions.VERSIONS_DIR not in e.split("/")]
    entries, count = listed[:200], len(listed)
    if not entries:
        return "(empty)"
    more = f"\n[... {count - 200} more]" if count > 200 else ""
    return "\n".join(entries) + more


FILE_TOOLS: list[BaseTool] = [read_file, write_file, edit_file, list_files, file_versions, restore_file]
"""The ``files`` tool set: read, write, edit, list, version and restore files inside the thread's project folder."""
