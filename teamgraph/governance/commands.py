"""``run_command`` rules and execution: no shell, the project folder as cwd, a time-out, clipped output.

The command is split into arguments (``shlex``) and run directly, so a pipe or ``;``
is just an argument: it cannot smuggle a second command past the allow-list. An
allow-listed command runs at once only if it can neither run code the agents wrote
nor write outside the project folder (``approval_reason``); git runs with the
configuration the workspace controls neutralised, every command with a clean
environment, and in the bubblewrap sandbox where there is one (docs/security.md).
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from teamgraph.governance import sandbox

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
    """Whether ``command``'s arguments begin with an allow-list entry's (each an exact word or a pattern)."""
    try:
        argv = split(command)
    except CommandError:
        return False
    entries = [shlex.split(e) for e in allow_list]
    return any(
        prefix
        and len(argv) >= len(prefix)
        and all(fnmatch.fnmatchcase(a, p) for a, p in zip(argv, prefix, strict=False))
        for prefix in entries
    )


WORKSPACE_RUNNERS = frozenset(
    {
        "python", "python3", "pytest", "py.test", "tox", "nox", "pip", "pip3", "uv", "poetry", "hatch",
        "node", "npm", "npx", "yarn", "pnpm", "deno", "bun", "make", "cmake", "ninja", "cargo", "go",
        "sh", "bash", "dash", "zsh", "fish", "perl", "ruby", "php", "java", "mvn", "gradle", "env",
        "xargs", "find", "awk", "sed", "vim", "nvim", "emacs", "less", "man",
    }
)  # fmt: skip
"""Programs that run code or configuration found in the folder they run in (or run a program they are given)."""
GIT_SAFE_CONFIG = (
    "core.fsmonitor=false", "core.hooksPath=/dev/null", "core.pager=cat", "core.editor=false",
    "core.sshCommand=false", "safe.bareRepository=explicit", "protocol.ext.allow=never", "credential.helper=",
)  # fmt: skip
"""Given to every git command (``-c``): the workspace's hooks, monitor, pager, editor, bare repositories never run."""
GIT_REFUSED_SUBCOMMANDS = frozenset(
    {"config", "bisect", "rebase", "filter-branch", "difftool", "mergetool", "daemon", "instaweb", "send-email",
     "submodule", "credential", "web--browse", "archimport", "cvsimport", "svn", "p4"}
)  # fmt: skip
"""git commands that write configuration or run other programs: never without an approval."""
GIT_REFUSED_OPTIONS = (
    "-c", "-C", "--config-env", "--exec-path", "--git-dir", "--work-tree", "--namespace", "--output",
    "--ext-diff", "--textconv", "--open-files-in-pager", "-O", "--upload-pack", "--receive-pack", "--exec",
    "--template", "--separate-git-dir",
)  # fmt: skip
"""git options that read other configuration, run a program, or write elsewhere than the repository."""
KEPT_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "HOME", "USER", "LOGNAME", "TERM", "VIRTUAL_ENV")
"""What a command inherits of the team's environment: no key, token or configuration path."""


def _program(argv: Sequence[str]) -> str:
    name = posixpath.basename(argv[0])
    return "python" if name.startswith("python") else name


def _values(argument: str) -> list[str]:
    """An argument, or an option's value (``--output=x``, ``-ox``): what may name a path."""
    if not argument.startswith("-"):
        return [argument]
    return [argument.split("=", 1)[1]] if "=" in argument else [argument[2:]] if len(argument) > 2 else []


def _names_git_folder(argument: str) -> bool:
    """Whether an argument names a path in a ``.git`` folder (its config and hooks run code when git runs)."""
    return any(".git" in posixpath.normpath(value).split("/") for value in _values(argument) if value)


def _leaves_folder(argument: str) -> bool:
    """Whether an argument (or an option's value) names a path outside the folder the command runs in."""
    for value in _values(argument):
        if value.startswith(("/", "~")):
            return True
        normal = posixpath.normpath(value) if value else "."
        if normal == ".." or normal.startswith("../"):
            return True
    return False


def _git_reason(argv: Sequence[str]) -> str | None:
    words = [a for a in argv[1:] if not a.startswith("-")]
    if words and words[0] in GIT_REFUSED_SUBCOMMANDS:
        return f"'git {words[0]}' writes configuration or runs other programs"
    for argument in argv[1:]:
        option = argument.split("=", 1)[0]
        if option in GIT_REFUSED_OPTIONS or (option[:2] in ("-c", "-C", "-O") and not option.startswith("--")):
            return f"git option '{option}' reads other configuration, runs a program or writes elsewhere"
    return None


def approval_reason(allow_list: Sequence[str], command: str, *, sandboxed: bool) -> str | None:
    """Why ``command`` waits for an approval, or None if it runs at once.

    It runs at once when it is on the allow-list, names no path outside the project
    folder, uses no option of its program that writes elsewhere or runs another program,
    and either runs no code from the workspace or runs in the sandbox.
    """
    argv = split(command)
    if not is_allowed(allow_list, command):
        return "it is not on the team's allow-list (Policy.commands)"
    if "/" in argv[0] and not argv[0].startswith("/") and not sandboxed:
        return f"'{argv[0]}' is a program in the project folder (maybe the agents') and there is no sandbox"
    outside = [a for a in argv[1:] if _leaves_folder(a)]
    if outside:
        return f"{', '.join(repr(a) for a in outside)} leads outside the project folder"
    if any(_names_git_folder(a) for a in argv[1:]):
        return "it names a path in a .git folder (git runs what its config and hooks say)"
    if _program(argv) == "git" and (reason := _git_reason(argv)):
        return reason
    if _program(argv) in WORKSPACE_RUNNERS and not sandboxed:
        return f"'{argv[0]}' runs code from the project folder and there is no sandbox (bubblewrap) here"
    return None


def command_line(argv: Sequence[str]) -> list[str]:
    """The argument list actually run: git gets ``GIT_SAFE_CONFIG`` before its subcommand."""
    if _program(argv) != "git":
        return list(argv)
    safe = [word for setting in GIT_SAFE_CONFIG for word in ("-c", setting)]
    return [argv[0], *safe, *argv[1:]]


def clean_environment() -> dict[str, str]:
    """The environment a command gets: ``KEPT_ENVIRONMENT``, git's global and system configuration off."""
    kept = {k: v for k in KEPT_ENVIRONMENT if (v := os.environ.get(k)) is not None}
    return {
        **kept,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "PAGER": "cat",
        "GIT_PAGER": "cat",
    }


def clip_output(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """``text``, or its head and tail with a note saying how much was cut."""
    if len(text) <= limit:
        return text
    half = limit // 2
    note = f"[... output truncated: {len(text) - limit} of {len(text)} characters cut ...]"
    return f"{text[:half]}\n{note}\n{text[-half:]}"


def run_command(
    command: str,
    *,
    cwd: Path,
    timeout: float = DEFAULT_TIMEOUT,
    sandboxed: bool = False,
    hide: Sequence[Path] = (),
) -> str:
    """Run ``command`` in ``cwd`` and describe the outcome for the agent.

    Args:
        command: A program and its arguments (no shell syntax).
        cwd: The folder it runs in (the thread's project folder).
        timeout: Seconds before it is killed (at most ``MAX_TIMEOUT``).
        sandboxed: Run it in the bubblewrap sandbox (``governance/sandbox.py``).
        hide: Folders the sandboxed command does not see (the team's home).

    Returns:
        ``exit code: N`` followed by the combined output (clipped with a note).
    """
    argv = split(command)
    if not 0 < timeout <= MAX_TIMEOUT:
        raise CommandError(f"timeout must be between 0 and {MAX_TIMEOUT:g} seconds, got {timeout:g}.")
    cwd.mkdir(parents=True, exist_ok=True)
    if "/" not in argv[0] and shutil.which(argv[0]) is None:
        # NOTE: checked here: in the sandbox a missing program is bwrap's exit code, not an OSError
        raise CommandError(f"no program '{argv[0]}' on this machine; check its name or install it.")
    line = command_line(argv)
    if sandboxed:
        line = sandbox.wrap(line, project=cwd, hide=hide)
    try:
        done = subprocess.run(
            line, cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False,
            env=clean_environment(),
        )  # fmt: skip
    except FileNotFoundError:
        raise CommandError(f"no program '{argv[0]}' on this machine; check its name or install it.") from None
    except subprocess.TimeoutExpired as exc:
        partial = (exc.stdout or b"") if isinstance(exc.stdout, bytes) else (exc.stdout or "").encode()
        text = partial.decode(errors="replace")
        return f"timed out after {timeout:g} s (killed); exit code: none\n{clip_output(text)}".rstrip()
    output = (done.stdout or "") + (f"\n[stderr]\n{done.stderr}" if done.stderr else "")
    return f"exit code: {done.returncode}\n{clip_output(output.strip())}".rstrip()
