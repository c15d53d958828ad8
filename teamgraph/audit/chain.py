"""The collaboration log's hash chain: a line altered, removed or added by hand shows.

Each line ends with its number in its day file and a hash::

    [2026-12-02 10:00:01] [Team Leader] → [UI Operator_1] | call | ... | success | - | #7 h=3f2a9c0d1e2b4a5c

The hash covers the previous line's hash, the number and the line's visible text,
so line n carries the hash of line n−1. A day file's first line chains from a seed
made of the file's name (a line moved to another day's file does not verify there).

Why a trailing field, not a sidecar file: the hash is written by the same ``write``
as its line (no second file to keep in step through a crash), a copied or grepped
line carries its own number and hash, and the seed's seven fields keep their place
and format (readers that split on ``" | "`` find an eighth).

Why 16 hex digits (64 bits): the chain's strength is not in the hash length (anyone
who can rewrite the whole file can recompute any hash) but in where its last link
is kept: the log's index (``.collaboration.sqlite``) records every day file's size,
line count and last hash in the transaction that appends the lines, so a line
removed at the end, or a whole file removed, shows too. Both live in
``<home>/logs/<project>/``, out of the agents' file tools' reach (``project.py``).
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from teamgraph.audit import rotation

HASH_DIGITS = 16
_SUFFIX = re.compile(r" \| #(?P<number>\d+) h=(?P<hash>[0-9a-f]{16})$")
ProblemKind = Literal["altered", "missing", "unchained", "unindexed"]


def seed(file_name: str) -> str:
    """The hash a day file's first line chains from."""
    return hashlib.sha256(f"teamgraph-log|{file_name}".encode()).hexdigest()[:HASH_DIGITS]


def link(previous: str, number: int, text: str) -> str:
    """The hash of line ``number`` whose visible text is ``text``, after a line whose hash is ``previous``."""
    return hashlib.sha256(f"{previous}\n{number}\n{text}".encode()).hexdigest()[:HASH_DIGITS]


def chain_lines(lines: list[str], *, previous: str, count: int) -> tuple[list[str], str, int]:
    """``lines`` each with its number and hash, continuing a chain whose last link is (``previous``, ``count``).

    Returns:
        The chained lines, the last line's hash and number (the new head).
    """
    chained: list[str] = []
    for text in lines:
        count += 1
        previous = link(previous, count, text)
        chained.append(f"{text} | #{count} h={previous}")
    return chained, previous, count


def split_chain(line: str) -> tuple[str, int | None, str | None]:
    """A line's visible text, number and hash (None, None for a line without them)."""
    match = _SUFFIX.search(line)
    if match is None:
        return line, None, None
    return line[: match.start()], int(match["number"]), match["hash"]


def tail_of(path: Path) -> tuple[str, int]:
    """The head of the chain ``path`` holds: its last whole line's hash and number (a seed, 0 when none)."""
    lines = path.read_bytes().decode("utf-8", errors="replace").splitlines() if path.exists() else []
    for line in reversed(lines):
        _, number, digest = split_chain(line)
        if number is not None and digest is not None:
            return digest, number
    return seed(path.name), 0


# --------------------------------------------------------------------------- verification


@dataclass(frozen=True)
class Problem:
    """The first thing wrong in a logs folder.

    Attributes:
        file: The day file's name.
        line: Its line number (1-based; 0 for the whole file).
        kind: ``altered``, ``missing``, ``unchained`` (a line without a hash) or
            ``unindexed`` (a day file, or the folder, the index does not know).
        detail: What was found, one sentence.
    """

    file: str
    line: int
    kind: ProblemKind
    detail: str


@dataclass(frozen=True)
class Verdict:
    """What ``verify_folder`` found: the files and lines checked, and the first problem (None: intact)."""

    folder: Path
    files: int
    lines: int
    problem: Problem | None


@dataclass(frozen=True)
class _Indexed:
    size: int
    head: str | None
    lines: int


def _read_index(folder: Path, index_file: str) -> dict[str, _Indexed] | None:
    """The index's record of every day file (None when the folder has no index)."""
    path = folder / index_file
    if not path.exists():
        return None
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT name, size, head, lines FROM files").fetchall()
    finally:
        db.close()
    return {name: _Indexed(size, head, lines or 0) for name, size, head, lines in rows}


def _check_lines(name: str, lines: list[str], indexed: _Indexed | None) -> tuple[Problem | None, str, int]:
    """The first broken link of one day file's lines; also its head (hash, number) at the indexed count."""
    previous, expected = seed(name), 1
    indexed_head = (previous, 0)
    for at, line in enumerate(lines, start=1):
        text, number, digest = split_chain(line)
        if number is None or digest is None:
            return Problem(name, at, "unchained", f"line {at} has no number and hash (written by hand?)"), "", 0
        if number > expected:
            gap = f"line {expected} is" if number == expected + 1 else f"lines {expected}-{number - 1} are"
            detail = f"{gap} missing before line {at} (it is numbered {number})"
            return Problem(name, at, "missing", detail), "", 0
        if number < expected or link(previous, number, text) != digest:
            detail = f"line {at} does not match its hash: it or the line before was changed"
            return Problem(name, at, "altered", detail), "", 0
        previous, expected = digest, number + 1
        if indexed is not None and number == indexed.lines:
            indexed_head = (previous, number)
    return None, *indexed_head


def _check_file(path: Path, indexed: _Indexed | None) -> tuple[Problem | None, int]:
    """The first problem of one day file against its index record; also its line count."""
    lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()
    if indexed is None:
        problem = Problem(path.name, 0, "unindexed", "the log's index does not know this day file") if lines else None
        return problem, len(lines)
    problem, head, count = _check_lines(path.name, lines, indexed)
    if problem is not None:
        return problem, len(lines)
    if len(lines) < indexed.lines:
        detail = f"lines {len(lines) + 1}-{indexed.lines} are missing at the end (the index recorded {indexed.lines})"
        return Problem(path.name, len(lines) + 1, "missing", detail), len(lines)
    if indexed.lines and (head, count) != (indexed.head, indexed.lines):
        detail = f"line {indexed.lines} is not the line the index recorded"
        return Problem(path.name, indexed.lines, "altered", detail), len(lines)
    if len(lines) > indexed.lines:
        # NOTE: lines past the index are not evidence: added by hand with their hashes
        # recomputed, or a write in progress, or one a crash cut short (the next run cuts them off).
        detail = (
            f"lines {indexed.lines + 1}-{len(lines)} are not in the log's index "
            "(added by hand, or a run is writing: verify again once it stopped)"
        )
        return Problem(path.name, indexed.lines + 1, "unindexed", detail), len(lines)
    return None, len(lines)


def verify_folder(folder: Path, *, index_file: str) -> Verdict:
    """Check every day file of a logs folder: the chain of its lines, and its end against the index.

    Archives (``archive/*.tar.gz``) are not checked: they are packed copies of day files
    that were checked while they were in the folder.

    Args:
        folder: The logs folder (``<home>/logs/<project>``).
        index_file: The index's file name in it.

    Returns:
        The verdict; its ``problem`` is the first altered, missing or unchained line, oldest file first.
    """
    index = _read_index(folder, index_file)
    files = sorted(rotation.day_files(folder).items(), key=lambda item: (item[1], item[0].name))
    if index is None:
        detail = f"no {index_file}: lines missing at an end cannot be seen"
        return Verdict(folder, len(files), 0, Problem(files[0][0].name, 0, "unindexed", detail) if files else None)
    total = 0
    for path, _ in files:
        problem, count = _check_file(path, index.get(path.name))
        total += count
        if problem is not None:
            return Verdict(folder, len(files), total, problem)
    missing = sorted(set(index) - {path.name for path, _ in files})
    gone = Problem(missing[0], 0, "missing", "the whole day file is missing") if missing else None
    return Verdict(folder, len(files), total, gone)
