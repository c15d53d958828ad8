"""The ``teamgraph`` console script: the command line, with Ctrl-C quiet from the first moment.

NOTE: loading the command (LangGraph, LangChain, pydantic schemas) takes a second or
two; a Ctrl-C then would print the import's traceback. This module imports nothing
heavy itself, so the KeyboardInterrupt of an early Ctrl-C reaches :func:`main`, which
ends with ``Interrupted.`` and exit code 130, as a Ctrl-C during a run does.
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import nullcontext
from types import FrameType

EXIT_INTERRUPTED = 130


class _Interrupts:
    """SIGINT while the command loads: noted, then raised as Python's own handler does.

    NOTE: a noted interrupt ends the command whatever became of its KeyboardInterrupt:
    pydantic-core builds its validators in Rust and turns an exception raised meanwhile
    into a ``SchemaError``, and one raised in a ``__del__`` is only reported ("Exception
    ignored in ...", which is not printed here) while the import goes on.
    """

    def __init__(self) -> None:
        self.seen = False
        self._previous: object = None
        self._hook = sys.unraisablehook

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.seen = True
        raise KeyboardInterrupt

    def _unraisable(self, unraisable: sys.UnraisableHookArgs) -> None:
        if not (unraisable.exc_type and issubclass(unraisable.exc_type, KeyboardInterrupt)):
            self._hook(unraisable)

    def __enter__(self) -> None:
        self._previous = signal.signal(signal.SIGINT, self)
        self._hook, sys.unraisablehook = sys.unraisablehook, self._unraisable

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]
        sys.unraisablehook = self._hook


def _interrupted() -> None:
    sys.stderr.write("Interrupted.\n")
    raise SystemExit(EXIT_INTERRUPTED) from None


def main(argv: list[str] | None = None) -> None:
    """Run the ``teamgraph`` command (see :mod:`teamgraph.cli`)."""
    interrupts = _Interrupts()
    # NOTE: a handler can be set only in the main thread (where the console script runs).
    noting = interrupts if threading.current_thread() is threading.main_thread() else nullcontext()
    try:
        with noting:
            from teamgraph.cli import main as run
        if interrupts.seen:
            _interrupted()
        run(argv)
    except KeyboardInterrupt:
        _interrupted()
    except Exception:
        if interrupts.seen:
            _interrupted()
        raise


if __name__ == "__main__":
    main()
