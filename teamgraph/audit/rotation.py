"""Daily log files, 30-day removal and monthly archives kept 6 months.

``<logs>/<YYYY-MM-DD>_<project>_collaboration.log`` is one day's file. Once a
month is over, its day files are packed into
``<logs>/archive/<YYYY-MM>_<project>_collaboration.tar.gz``; day files older
than ``KEEP_DAYS`` are removed (they are in the archive by then), archives older
than ``KEEP_MONTHS`` months are removed.
"""

from __future__ import annotations

import os
import re
import tarfile
from datetime import date
from pathlib import Path

from teamgraph.checkpoints.files import private_dir

KEEP_DAYS = 30
KEEP_MONTHS = 6
ARCHIVE_DIR = "archive"
FILE_MODE = 0o600
FOLDER_MODE = 0o700
SUFFIX = "_collaboration.log"
_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})_")
_MONTH = re.compile(r"^(\d{4})-(\d{2})_")


def day_file(folder: Path, project: str, day: date) -> Path:
    """The log file of ``day``."""
    return folder / f"{day.isoformat()}_{project}{SUFFIX}"


def day_files(folder: Path) -> dict[Path, date]:
    """Every day file in ``folder`` with its date."""
    found: dict[Path, date] = {}
    for path in folder.glob(f"*{SUFFIX}"):
        if match := _DAY.match(path.name):
            found[path] = date(*map(int, match.groups()))
    return found


def _month_index(day: date) -> int:
    return day.year * 12 + day.month - 1


def archive_path(folder: Path, project: str, year: int, month: int) -> Path:
    """The archive of one finished month."""
    return folder / ARCHIVE_DIR / f"{year:04d}-{month:02d}_{project}{SUFFIX.removesuffix('.log')}.tar.gz"


def pack_month(folder: Path, project: str, year: int, month: int, files: list[Path]) -> Path:
    """Pack one month's day files into its archive (written whole, then renamed)."""
    target = archive_path(folder, project, year, month)
    private_dir(target.parent)
    partial = target.with_name(target.name + ".part")
    with tarfile.open(partial, "w:gz") as archive:
        for path in sorted(files):
            archive.add(path, arcname=path.name)
    os.chmod(partial, FILE_MODE)
    os.replace(partial, target)
    return target


def maintain(folder: Path, project: str, today: date) -> None:
    """Archive finished months, remove day files past ``KEEP_DAYS`` and archives past ``KEEP_MONTHS``.

    Args:
        folder: The logs folder.
        project: The project name (part of every file name).
        today: The clock's date.
    """
    files = day_files(folder)
    by_month: dict[tuple[int, int], list[Path]] = {}
    for path, day in files.items():
        if _month_index(day) < _month_index(today):
            by_month.setdefault((day.year, day.month), []).append(path)
    for (year, month), paths in by_month.items():
        target = archive_path(folder, project, year, month)
        # NOTE: repack when the month has a file the archive lacks (written after packing).
        if not target.exists() or any(p.stat().st_mtime > target.stat().st_mtime for p in paths):
            pack_month(folder, project, year, month, paths)
    for path, day in files.items():
        if (today - day).days > KEEP_DAYS and _month_index(day) < _month_index(today):
            path.unlink()
    for path in (folder / ARCHIVE_DIR).glob("*.tar.gz"):
        if (match := _MONTH.match(path.name)) and _month_index(today) - _month_index(
            date(int(match[1]), int(match[2]), 1)
        ) > KEEP_MONTHS:
            path.unlink()
