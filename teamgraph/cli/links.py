"""The Team Leader spec's report formats, rendered for a terminal: file links and citations a user can open.

The Team Leader writes (its prompt teaches it, ``teamgraph/roles/prompts.py``):

- ``[label](download://path)``: a link to a file it (or a member) wrote;
- ``<show_file path="path"></show_file>``: a file to look at;
- ``【file:path】`` (or ``【file:path#L3-9】``): a file cited as a source;
- ``【cite:src_…】``: a web source from ``web_search``.

Paths are relative to the thread's project folder; here each becomes the absolute
path a user can open (a terminal makes it clickable), and a web citation becomes
its URL when a ``web_search`` result of the thread named it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

DOWNLOAD = re.compile(r"\[([^\]]*)\]\(download://([^)\s]+)\)")
SHOW_FILE = re.compile(r"<show_file\s+path=\"([^\"]+)\"\s*/?>\s*(?:</show_file>)?")
FILE_CITE = re.compile(r"【file:([^】]+)】")
WEB_CITE = re.compile(r"【cite:([^】]+)】")
SOURCE = re.compile(r"^\[(src_[0-9a-f]+)\] .* — (\S+)$", re.MULTILINE)


def _path(project: Path, relative: str) -> str:
    return str((project / relative.split("#", 1)[0].strip()).resolve())


def sources_in(histories: Mapping[str, Iterable[Any]]) -> dict[str, str]:
    """Source id -> URL, from every ``web_search`` result in the thread's histories."""
    found: dict[str, str] = {}
    for messages in histories.values():
        for message in messages:
            if getattr(message, "type", "") == "tool" and getattr(message, "name", "") == "web_search":
                found.update(dict(SOURCE.findall(str(message.content))))
    return found


def render_links(text: str, *, project: Path, sources: Mapping[str, str] | None = None) -> str:
    """``text`` with the Team Leader spec's file links and citations as paths and URLs a user can open.

    Args:
        text: The report.
        project: The thread's project folder (the paths' root).
        sources: Source id -> URL (``sources_in``); an unknown id is left as written.
    """
    known = sources or {}
    text = DOWNLOAD.sub(lambda m: f"{m.group(1)} ({_path(project, m.group(2))})", text)
    text = SHOW_FILE.sub(lambda m: f"File: {_path(project, m.group(1))}", text)
    text = FILE_CITE.sub(lambda m: " ".join(f"[{_path(project, p)}]" for p in m.group(1).split(",")), text)

    def web(match: re.Match[str]) -> str:
        ids = [i.strip() for i in match.group(1).split(",")]
        return " ".join(f"[{known[i]}]" if i in known else f"【cite:{i}】" for i in ids)

    return WEB_CITE.sub(web, text)
