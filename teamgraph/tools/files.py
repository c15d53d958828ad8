"""Safe work tools: read, write and list files inside the thread's project folder.

Each thread works in ``<home>/project/<project_name>/`` (default project name: the
thread id), so two threads never overwrite each other's files.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.tools import BaseTool, tool

from teamgraph.tools import errors, inside
from teamgraph.tools.context import ToolContext, fail
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


@tool(parse_docstring=True)
def read_file(path: str, context: ToolContext, offset: int = 0, limit: int = MAX_READ_CHARS) -> str:
    """Read a text file from the project folder, or a range of its characters.

    Args:
        path: Path relative to the project folder.
        offset: The first character to read (0: the start); to read on after a cut.
        limit: How many characters to read at most.
    """
    try:
        text = inside.read_text(project_root(context), path)
    except inside.OutsideError as exc:
        raise refusal(exc, project_root(context)) from None
    return read_range(text, path, offset=offset, limit=limit)


@tool(parse_docstring=True)
def write_file(path: str, content: str, context: ToolContext) -> str:
    """Write a text file in the project folder (folders are created; a file is replaced).

    Args:
        path: Path relative to the project folder.
        content: The whole new content.
    """
    root = project_root(context)
    try:
        written = inside.write_text(root, path, content)
    except inside.OutsideError as exc:
        raise refusal(exc, root) from None
    return f"Wrote {len(content)} characters to {written}."


@tool(parse_docstring=True)
def list_files(context: ToolContext, path: str = ".") -> str:
    """List files and folders under a folder of the project (recursively, up to 200).

    Args:
        path: Folder relative to the project folder; "." is the project folder itself.
    """
    root = project_root(context)
    try:
        entries, count = inside.list_names(root, path, limit=200)
    except inside.OutsideError as exc:
        raise refusal(exc, root) from None
    if not entries:
        return "(empty)"
    more = f"\n[... {count - 200} more]" if count > 200 else ""
    return "\n".join(entries) + more


FILE_TOOLS: list[BaseTool] = [read_file, write_file, list_files]
"""The ``files`` tool set: read, write and list files inside the thread's project folder."""
