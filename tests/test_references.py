"""References point inside the repository: to sections of docs/protocols.md, not to outside documents."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOCOLS = ROOT / "docs" / "protocols.md"
# Where references live: the package, the tests, the README and the docs.
SOURCES = [
    *sorted((ROOT / "teamgraph").rglob("*.py")),
    *sorted((ROOT / "tests").glob("*.py")),
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
]
# The design documents teamgraph was written from are not in the repository.
OUTSIDE = re.compile(r"\bseeds?\s*0\d\d\b|\bseeds/|/work/shared|\bDESIGN\.md\b|\bANCHORS\.md\b", re.IGNORECASE)
SECTION_REF = re.compile(r'docs/protocols\.md, "([^"]+)"')
# A link from the README (docs/protocols.md#x) or from a docs page (protocols.md#x, ../protocols.md#x).
LINK_REF = re.compile(r"\((?:\.\./)*(?:docs/)?protocols\.md#([a-z0-9-]+)\)")
# NOTE: files of this branch's neighbours, still to be changed where they are rewritten; drop an entry once clean.
PENDING: set[str] = set()


def _headings() -> list[str]:
    return [line[3:].strip() for line in PROTOCOLS.read_text(encoding="utf-8").splitlines() if line.startswith("## ")]


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _texts() -> dict[str, str]:
    this = Path(__file__).resolve()
    return {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8") for path in SOURCES if path != this}


def test_nothing_refers_to_documents_outside_the_repository():
    offenders = {name for name, text in _texts().items() if OUTSIDE.search(text)}
    assert sorted(offenders - PENDING) == [], 'refer to a section of docs/protocols.md instead: docs/protocols.md, "X"'


def test_every_section_reference_names_a_section_of_protocols_md():
    headings = set(_headings())
    anchors = {_anchor(h) for h in headings}
    refs = [(name, m.group(1)) for name, text in _texts().items() for m in SECTION_REF.finditer(text)]
    links = [(name, m.group(1)) for name, text in _texts().items() for m in LINK_REF.finditer(text)]
    assert len(refs) > 10 and links, "the scan found no references: it is broken"
    assert [(name, ref) for name, ref in refs if ref not in headings] == []
    assert [(name, link) for name, link in links if link not in anchors] == []


def test_the_anchor_rule_matches_githubs():
    assert _anchor("The Team Leader's prompt") == "the-team-leaders-prompt"
    assert _anchor("Requests, ids and statuses") == "requests-ids-and-statuses"
