"""``run_command`` execution: no shell, the project folder as cwd, a time-out, clipped output.

The command is split into arguments (``shlex``) and run directly, so a pipe or ``;``
is just an argument: it cannot smuggle a second command past the allow-list.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

MAX_OUTPUT_CHARS = 8_000
DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 600.0


class CommandError(ValueError):
    """A command that cannot be run as given (the message says how to fix it)."""


def split(command: str) -> list[str]:
    """The command's arguments, or a CommandError naming what is wrong."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise CommandError(f"cannot split the command into arguments ({exc}); check the quotes.") from None
    if not argv:
        raise CommandError("the command is empty; give a program and its arguments, e.g. 'python -m pytest'.")
    return argv


def is_allowed(allow_list: Sequence[str], command: str) -> bool:
    """Whether ``command``'s arguments begin with the arguments of an allow-list entry."""
    try:
        argv = split(command)
    except CommandError:
        return False
    return any(argv[: len(prefix)] == prefix for prefix in (shlex.split(e) for e in allow_list) if prefix)


def clip_output(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """``text``, or its head and tail with a note saying how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    note = f"[... output truncated: {len(text) - limit} of {len(text)} characters cut ...]"
    return f"{text[:half]}\n{note}\n{text[-half:]}"


def run_command(command: str, *, cwd: Path, timeout: float = DEFAULT_TIMEOUT) -> str:
    """Run ``command`` in ``cwd`` and describe the outcome for the agent.

    Args:
        command: A program and its arguments (no shell syntax).
        cwd: The folder it runs in (the thread's project folder).
        timeout: Seconds before it is killed (at most ``MAX_TIMEOUT``).

    Returns:
        ``exit code: N`` followed by the combined output (clipped with a note).
    """
    argv = split(command)
    if not 0 < timeout <= MAX_TIMEOUT:
        raise CommandError(f"timeout must be between 0 and {MAX_TIMEOUT:g} seconds, got {timeout:g}.")
    cwd.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False
        )
    except FileNotFoundError:
        raise CommandError(f"no program '{argv[0]}' on this machine; check its name or install it.") from None
    except subprocess.TimeoutExpired as exc:
        partial = (exc.stdout or b"") if isinstance(exc.stdout, bytes) else (exc.stdout or "").encode()
        text = partial.decode(errors="replace")
        return f"timed out after {timeout:g} s (killed); exit code: none\n{clip_output(text)}".rstrip()
    output = (done.stdout or "") + (f"\n[stderr]\n{done.stderr}" if done.stderr else "")
    return f"exit code: {done.returncode}\n{clip_output(output.strip())}".rstrip()
