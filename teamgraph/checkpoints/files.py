"""Files the team keeps for itself: created owner-only, named so they stay where they belong.

The database holds every message (secrets included), and its ``-wal``/``-shm`` files and
the exports hold the same: they are created readable by their owner only (0600 files,
0700 folders), whatever the umask. SQLite creates a database's ``-wal`` and ``-shm``
files with the database file's own permissions, so a private database file is enough.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")
MAX_THREAD_NAME = 200
_NOT_A_NAME = re.compile(r"[/\\\x00-\x1f]")


def private_dir(path: str | Path) -> Path:
    """Create folder ``path`` and its missing parents owner-only (0700); existing folders are left as they are."""
    path = Path(path)
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            continue  # NOTE: another process made it meanwhile; its mode is its own
        os.chmod(folder, DIR_MODE)  # NOTE: a umask can only take bits away; this keeps exactly 0700
    return path


def private_file(path: str | Path) -> Path:
    """Create file ``path`` owner-only (0600) if it is missing, and make it 0600 if it is ours and wider.

    Its missing folders are created as ``private_dir`` does. The content is left alone.
    """
    path = Path(path)
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    try:
        if os.fstat(fd).st_uid == os.getuid():
            os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return path


def private_database(path: str | Path) -> None:
    """Make a SQLite file, and any side files it has already, owner-only before SQLite opens it."""
    name = str(path)
    if name == ":memory:" or name.startswith("file:"):
        return
    private_file(path)
    for suffix in SQLITE_SIDE_FILES:
        side = Path(name + suffix)
        if side.is_file() and not side.is_symlink():
            private_file(side)


def thread_file_name(thread: str) -> str:
    """``thread`` as one file name, or a ValueError naming it and how to fix it.

    A thread id may be any string LangGraph accepts; where it names a file it must stay
    one name in its folder: no separator, no ``.``/``..``, no control character.
    """
    text = str(thread)
    if not text or text in (".", "..") or _NOT_A_NAME.search(text) or len(text) > MAX_THREAD_NAME:
        raise ValueError(
            f"thread id {text!r} cannot name a file: it must be 1-{MAX_THREAD_NAME} characters without "
            "'/', '\\' or control characters, and not '.' or '..'. Fix: give an output path (--out), "
            "or use a thread id such as 'thread-1'."
        )
    return text
