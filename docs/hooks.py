"""MkDocs hooks (``mkdocs.yml``'s ``hooks:``): fill each page's generated parts at build time."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

# NOTE: mkdocs loads this file by path, so the repository root (for ``docs.gen_pages``) is not on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from docs.gen_pages import GENERATORS  # noqa: E402

MARKER = re.compile(r"<!-- generated: ([a-z_]+) -->")


def fill(markdown: str) -> str:
    """``markdown`` with every ``<!-- generated: NAME -->`` replaced by its generator's text.

    Raises:
        KeyError: A marker names no generator (listing the known ones).
    """

    def generated(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise KeyError(f"<!-- generated: {name} --> names no generator. Known: {', '.join(GENERATORS)}.")
        return GENERATORS[name]()

    return MARKER.sub(generated, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs event: a page's Markdown, before it is rendered."""
    return fill(markdown)
