"""The README's picture of the team graph, drawn from the code.

Run ``python -m docs.gen_graph`` from the repository root after the graph changes:
it rewrites the mermaid block between the README's graph markers with what
``get_graph().draw_mermaid()`` draws for the demo team. ``tests/test_readme.py``
fails while the README's picture differs from it.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
BEGIN = "<!-- graph:begin (python -m docs.gen_graph) -->"
END = "<!-- graph:end -->"
COMMAND = "python -m docs.gen_graph"


def demo_mermaid() -> str:
    """The demo team's compiled graph as mermaid text (offline: the scripted model, a throwaway home)."""
    from teamgraph.demo.runner import demo_team

    with tempfile.TemporaryDirectory() as home:
        graph = demo_team(home).compile()
        return graph.get_graph().draw_mermaid()


def picture_block(mermaid: str) -> str:
    """The README's marked block: the markers around a fenced mermaid block."""
    return f"{BEGIN}\n```mermaid\n{mermaid.rstrip()}\n```\n{END}"


def current_block(readme: str) -> str:
    """The README's marked block as it stands.

    Raises:
        ValueError: The README has no graph markers (or only one), naming them.
    """
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README.md needs the lines {BEGIN!r} and {END!r} around the graph's picture.")
    return readme[start : end + len(END)]


def with_picture(readme: str, mermaid: str) -> str:
    """``readme`` with its marked block replaced by ``mermaid``'s."""
    return readme.replace(current_block(readme), picture_block(mermaid), 1)


def main() -> int:
    """Rewrite README.md's picture; print whether it changed."""
    text = README.read_text(encoding="utf-8")
    updated = with_picture(text, demo_mermaid())
    if updated == text:
        print("README.md: the graph's picture is up to date")
        return 0
    README.write_text(updated, encoding="utf-8")
    print("README.md: the graph's picture was redrawn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
