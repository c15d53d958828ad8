"""Errors and exit codes: how a failing command ends.

Every command is wrapped in :func:`friendly`, which turns an exception into one
``Error: ...`` line on stderr and an exit code (``--debug`` prints the traceback
first). :class:`CLIError` is an error the user can fix, with its own exit code;
:func:`error_text` gives the one line for any other exception.
"""

from __future__ import annotations

import functools
import sqlite3
import traceback
from collections.abc import Callable
from typing import Any

import click
import typer
from rich.console import Console
from rich.text import Text

from teamgraph.cli.output import one_line
from teamgraph.models.factory import ENV_VAR as MODEL_ENV
from teamgraph.redaction import redact

EXIT_ERROR = 1
EXIT_NO_MODEL = 2
EXIT_PAUSED = 3
EXIT_NO_REPORT = 4
"""The run ended without a new report from the Team Leader on the latest task."""
EXIT_INTERRUPTED = 130

settings: dict[str, Any] = {"debug": False}
"""Set once per command line by the root callback (``--debug`` or $TEAMGRAPH_DEBUG)."""


class CLIError(Exception):
    """An error the user can fix; printed as one line."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


def endpoint_of(exc: BaseException) -> str | None:
    """The URL of the HTTP request behind ``exc`` (or an exception it was raised from), password masked."""
    from teamgraph.redaction import redact_url

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        url = getattr(getattr(current, "request", None), "url", None)
        if url:
            return redact_url(str(url))
        current = current.__cause__ or current.__context__
    return None


def error_text(exc: BaseException) -> tuple[str, int]:
    """The one-line message (secrets masked) and exit code for an exception (a failed HTTP request names its URL)."""
    message, code = _error_text(exc)
    url = endpoint_of(exc)
    if url and url not in message:
        message = f"{message.rstrip('.')} (endpoint {url})."
    return redact(message), code


def _error_text(exc: BaseException) -> tuple[str, int]:
    from pydantic import ValidationError

    from teamgraph.models import ModelNotConfiguredError

    if isinstance(exc, CLIError):
        return one_line(str(exc)), exc.code
    if isinstance(exc, ModelNotConfiguredError):
        head, *bullets = str(exc).splitlines()
        items = [b.strip().removeprefix("- ").strip() for b in bullets if b.strip()]
        choose = [i for i in items if not i.lower().startswith(("choose one of", "pass model="))]
        message = head
        if choose:
            message += " Choose one of: " + " ".join(choose)
        message += f" (--model takes the same values as {MODEL_ENV}.)"
        return one_line(message), EXIT_NO_MODEL
    if isinstance(exc, ValidationError):
        parts = [str(e.get("msg", "")).removeprefix("Value error, ") for e in exc.errors()]
        return one_line("; ".join(p for p in parts if p) or str(exc)), EXIT_ERROR
    if isinstance(exc, KeyError) and exc.args:
        return one_line(str(exc.args[0])), EXIT_ERROR
    if isinstance(exc, (ValueError, OSError, RuntimeError, sqlite3.Error)):
        # Our own errors (and the standard families) explain themselves.
        return one_line(str(exc)) or type(exc).__name__, EXIT_ERROR
    text = one_line(str(exc))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__, EXIT_ERROR


def _err_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn any exception a command raises into one ``Error: ...`` line and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, click.ClickException):
            raise  # typer and click end the command themselves
        except KeyboardInterrupt:
            _err_console().print("Interrupted.", soft_wrap=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as exc:  # noqa: BLE001 - the CLI's one place that catches all
            if settings["debug"]:
                _err_console().print(redact(traceback.format_exc()), markup=False)
            message, code = error_text(exc)
            _err_console().print(Text.assemble(("Error: ", "bold red"), message), soft_wrap=True)
            raise typer.Exit(code) from exc

    return wrapper
