"""The ``teamgraph`` console script: the command line, with Ctrl-C quiet from the first moment.

NOTE: loading the command (LangGraph, LangChain, pydantic schemas) takes a second or
two; a Ctrl-C then would print the import's traceback. This module imports nothing
heavy itself, so the KeyboardInterrupt of an early Ctrl-C reaches :func:`main`, which
ends with ``Interrupted.`` and exit code 130, as a Ctrl-C during a run does.
"""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130


def main(argv: list[str] | None = None) -> None:
    """Run the ``teamgraph`` command (see :mod:`teamgraph.cli`)."""
    try:
        from teamgraph.cli import main as run

        run(argv)
    except KeyboardInterrupt:
        sys.stderr.write("Interrupted.\n")
        raise SystemExit(EXIT_INTERRUPTED) from None


if __name__ == "__main__":
    main()
