"""Open files inside a folder without ever following a link out of it, race-free.

A path is checked and opened in one walk: each folder component is opened relative to
the folder before it (``dir_fd``) with ``O_NOFOLLOW``, and so is the file itself. A
symbolic link anywhere on the way is refused, so a link swapped in while a call runs
(a check-then-use race) cannot lead out of the project folder: there is no moment when
a checked name is resolved again.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
PROTECTED_NAMES = (".git",)
"""Folders the file tools never write in: a command the team may run reads them (hooks, config)."""


class OutsideError(ValueError):
    """A path that leaves the folder, goes through a link, or names something that cannot be used.

    Attributes:
        kind: ``outside`` (escapes the folder or goes through a link), ``protected``, ``missing``
            or ``not_a_file`` / ``not_a_folder``.
    """

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def parts_inside(root: Path, path: str) -> list[str]:
    """The components of ``path`` relative to ``root`` (an absolute path must be inside ``root``).

    Raises:
        OutsideError: The path leaves ``root``.
    """
    text = str(path)
    if "\x00" in text:
        raise OutsideError(f"'{path}' holds a NUL character.", kind="outside")
    if os.path.isabs(text):
        top = str(root.resolve())
        for base in (str(root), top):
            if text == base or text.startswith(base.rstrip("/") + "/"):
                text = text[len(base) :].lstrip("/")
                break
        else:
            raise OutsideError(f"'{path}' is outside the project folder.", kind="outside")
    normal = posixpath.normpath(text or ".")
    if normal == ".." or normal.startswith("../"):
        raise OutsideError(f"'{path}' is outside the project folder.", kind="outside")
    return [p for p in normal.split("/") if p not in ("", ".")]


def _open_dir(parent: int, name: str, path: str, *, create: bool) -> int:
    try:
        return _open_no_link(parent, name, path)
    except OutsideError as exc:
        if exc.kind != "missing" or not create:
            raise
    try:
        os.mkdir(name, 0o777, dir_fd=parent)
    except FileExistsError:
        pass  # NOTE: made meanwhile (by another call, or swapped in): opened with no-follow below
    return _open_no_link(parent, name, path)


def _open_no_link(parent: int, name: str, path: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno.ENOTDIR and _is_link(parent, name):
            # NOTE: Linux answers O_DIRECTORY|O_NOFOLLOW on a link with ENOTDIR, not ELOOP
            raise _refused(OSError(errno.ELOOP, "link"), path) from None
        raise _refused(exc, path) from None


def _is_link(parent: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _refused(exc: OSError, path: str) -> OutsideError:
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return OutsideError(f"'{path}' goes through a symbolic link; links are not followed.", kind="outside")
    if exc.errno == errno.ENOTDIR:
        return OutsideError(f"'{path}': a part of it is a file, not a folder.", kind="not_a_folder")
    if exc.errno == errno.EISDIR:
        return OutsideError(f"'{path}' is a folder. Give a file path.", kind="not_a_file")
    if exc.errno == errno.ENOENT:
        return OutsideError(f"No file '{path}' in the project folder.", kind="missing")
    return OutsideError(f"'{path}' cannot be used: {exc.strerror}.", kind="outside")


@contextmanager
def folder(root: Path, parts: list[str], path: str, *, create: bool = False) -> Iterator[int]:
    """A descriptor of the folder ``root/parts`` reached with no link followed (created if ``create``)."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for name in parts:
            child = _open_dir(fd, name, path, create=create)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def read_text(root: Path, path: str) -> str:
    """The text of file ``path`` inside ``root``."""
    parts = parts_inside(root, path)
    if not parts:
        raise OutsideError(f"'{path}' is a folder. Give a file path.", kind="not_a_file")
    with folder(root, parts[:-1], path) as parent:
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent)
        except OSError as exc:
            raise _refused(exc, path) from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OutsideError(f"'{path}' is not a regular file.", kind="not_a_file")
        return handle.read().decode("utf-8", errors="replace")


def write_text(root: Path, path: str, content: str) -> str:
    """Write ``content`` to file ``path`` inside ``root`` (folders created); returns its relative path."""
    parts = parts_inside(root, path)
    if not parts:
        raise OutsideError(f"'{path}' is a folder. Give a file path.", kind="not_a_file")
    if any(p in PROTECTED_NAMES for p in parts):
        raise OutsideError(
            f"'{path}' is inside {', '.join(PROTECTED_NAMES)}: its configuration and hooks can run code, "
            "so the file tools do not write there.",
            kind="protected",
        )
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK
    with folder(root, parts[:-1], path, create=True) as parent:
        try:
            fd = os.open(parts[-1], flags, 0o666, dir_fd=parent)
        except OSError as exc:
            raise _refused(exc, path) from None
    with os.fdopen(fd, "wb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OutsideError(f"'{path}' is not a regular file.", kind="not_a_file")
        handle.write(content.encode("utf-8"))
    return "/".join(parts)


def list_names(root: Path, path: str, *, limit: int) -> tuple[list[str], int]:
    """Up to ``limit`` entries under folder ``path`` (folders end in ``/``), and how many there are."""
    parts = parts_inside(root, path)
    prefix = "/".join(parts)
    entries: list[str] = []
    with folder(root, parts, path) as top:
        for current, dirs, files, _ in os.fwalk(".", dir_fd=top, follow_symlinks=False):
            base = posixpath.normpath(posixpath.join(prefix, current)) if prefix else posixpath.normpath(current)
            base = "" if base == "." else base + "/"
            entries += [f"{base}{d}/" for d in dirs] + [f"{base}{f}" for f in files]
    entries.sort()
    return entries[:limit], len(entries)
