"""Safe work tools: read, write, edit and list files inside the thread's project folder.

Each thread works in ``<home>/project/<project_name>/`` (default project name: the
thread id), so two threads never overwrite each other's files.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.tools import BaseTool, tool

from teamgraph.tools import errors
from teamgraph.tools.context import ToolContext, fail

MAX_READ_CHARS = 50_000


def resolve_inside(root: Path, path: str) -> Path:
    """``path`` resolved under ``root``; anything that escapes it is refused.

    Args:
        root: The folder the tools may touch.
        path: A path relative to ``root``, or an absolute path inside it
            (docs/protocols.md, "Files").

    Returns:
        The absolute, resolved path.
    """
    # NOTE: resolve() follows symlinks, so a link that points outside is refused too;
    # an absolute path simply replaces root in the join.
    top = root.resolve()
    target = (root / Path(path)).resolve()
    if target != top and top not in target.parents:
        raise fail(
            f"'{path}' is outside the project folder. Use a path relative to it, e.g. 'notes/plan.md', "
            f"or an absolute path inside {top}.",
            code=errors.FORBIDDEN,
        )
    return target


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


@tool(parse_docstring=True)
def read_file(path: str, context: ToolContext, offset: int = 0, limit: int = MAX_READ_CHARS) -> str:
    """Read a text file from the project folder, or a range of its characters.

    Args:
        path: Path relative to the project folder.
        offset: The first character to read (0: the start); to read on after a cut.
        limit: How many characters to read at most.
    """
    target = resolve_inside(project_root(context), path)
    if not target.is_file():
        raise fail(
            f"No file '{path}' in the project folder. Use list_files to see what exists.", code=errors.UNKNOWN_PATH
        )
    return read_range(target.read_text(encoding="utf-8", errors="replace"), path, offset=offset, limit=limit)


@tool(parse_docstring=True)
def write_file(path: str, content: str, context: ToolContext) -> str:
    """Write a text file in the project folder (folders are created; a file is replaced).

    Args:
        path: Path relative to the project folder.
        content: The whole new content.
    """
    root = project_root(context)
    target = resolve_inside(root, path)
    if target.is_dir():
        raise fail(f"'{path}' is a folder. Give a file path.", code=errors.BAD_ARGUMENT)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8")
    return f"Wrote {len(content)} characters to {target.relative_to(root.resolve())}."


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
def edit_file(path: str, old_text: str, new_text: str, context: ToolContext) -> str:
    """Replace one exact piece of text in a project file (it must occur exactly once).

    Args:
        path: Path relative to the project folder.
        old_text: The exact text to replace, copied from the file (include enough to be unique).
        new_text: The text to put in its place.
    """
    root = project_root(context)
    target = resolve_inside(root, path)
    if not target.is_file():
        raise fail(
            f"No file '{path}' in the project folder. Use list_files to see what exists, or write_file to create it.",
            code=errors.UNKNOWN_PATH,
        )
    text = target.read_text(encoding="utf-8")
    count_matches(text, old_text, path)
    target.write_text(text.replace(old_text, new_text, 1), encoding="utf-8")
    return f"Edited {target.relative_to(root.resolve())}: replaced {len(old_text)} characters with {len(new_text)}."


@tool(parse_docstring=True)
def list_files(context: ToolContext, path: str = ".") -> str:
    """List files and folders under a folder of the project (recursively, up to 200).

    Args:
        path: Folder relative to the project folder; "." is the project folder itself.
    """
    root = project_root(context)
    base = resolve_inside(root, path)
    if not base.is_dir():
        raise fail(f"No folder '{path}' in the project folder.", code=errors.UNKNOWN_PATH)
    top = root.resolve()
    entries = sorted(str(p.relative_to(top)) + ("/" if p.is_dir() else "") for p in base.rglob("*"))
    if not entries:
        return "(empty)"
    more = f"\n[... {len(entries) - 200} more]" if len(entries) > 200 else ""
    return "\n".join(entries[:200]) + more


FILE_TOOLS: list[BaseTool] = [read_file, write_file, edit_file, list_files]
"""The ``files`` tool set: read, write, edit and list files inside the thread's project folder."""
