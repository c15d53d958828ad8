"""An OS sandbox for ``run_command``: bubblewrap (``bwrap``, Debian package ``bubblewrap``) where it works.

In the sandbox a command sees the whole file system read-only, the project folder
writable (its ``.git`` read-only), an empty ``/tmp``, the team's home hidden (the
database, the logs) and so are the usual places of the user's keys (``~/.ssh``,
``~/.aws``...); it has no network and its own process tree. A command a person (or the
leader) approved runs outside it, as approved. Without ``bwrap`` the command rules
alone hold (docs/security.md).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

BWRAP = "bwrap"


@functools.cache
def bwrap_path() -> str | None:
    """The ``bwrap`` program if it is installed and can make a sandbox here (checked once)."""
    found = shutil.which(BWRAP)
    if found is None:
        return None
    probe = [found, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-all", "--die-with-parent", "true"]
    try:
        # NOTE: installed is not enough: a container without user namespaces refuses to make one
        done = subprocess.run(probe, capture_output=True, timeout=10, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return found if done.returncode == 0 else None


def available(setting: str) -> bool:
    """Whether commands run in the sandbox under ``Policy.sandbox`` = ``setting``."""
    return setting != "off" and bwrap_path() is not None


SECRET_PLACES = (
    ".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config/gcloud", ".config/gh",
    ".netrc", ".git-credentials", ".pypirc", ".npmrc",
)  # fmt: skip
"""Places in the user's home that hold credentials: hidden from sandboxed commands."""


def wrap(argv: Sequence[str], *, project: Path, hide: Sequence[Path]) -> list[str]:
    """``argv`` run inside bubblewrap, ``project`` its writable working folder.

    Args:
        argv: The command.
        project: The folder it may write (and runs in).
        hide: Folders replaced by an empty one (the team's home), besides the user's ``SECRET_PLACES``.
    """
    program = bwrap_path()
    if program is None:
        raise RuntimeError("bubblewrap is not available")
    top = project.resolve()
    args = [program, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    # NOTE: the empty /tmp must not hide the programs a command runs: an environment
    # installed under /tmp (a CI checkout's virtualenv) stays visible, read-only.
    for prefix in sorted({Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}):
        if prefix.is_dir() and Path("/tmp") in prefix.parents:
            args += ["--ro-bind", str(prefix), str(prefix)]
    home = os.environ.get("HOME")
    secrets = [Path(home) / place for place in SECRET_PLACES] if home else []
    for place in [*hide, *secrets]:
        if place.is_symlink() or not place.exists() or place.resolve() == Path("/"):
            continue
        # NOTE: a folder gets an empty one over it; a file, /dev/null
        args += ["--tmpfs", str(place.resolve())] if place.is_dir() else ["--ro-bind", "/dev/null", str(place)]
    args += ["--bind", str(top), str(top)]
    if (top / ".git").is_dir() and not (top / ".git").is_symlink():
        args += ["--ro-bind", str(top / ".git"), str(top / ".git")]
    args += ["--unshare-all", "--die-with-parent", "--new-session"]
    return [*args, "--chdir", str(top), "--", *argv]
