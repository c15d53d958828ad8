"""``teamgraph log show`` and ``teamgraph log verify``: a thread's collaboration log, and its hash chain.

The log of a thread is its project's (``<home>/logs/<project>/``): the project its last
run recorded (its config's ``project_name``, its ``Team(project=...)``, else the thread
id), or the one ``--project`` names. ``verify`` checks every
day file's chain and its end against the log's index, and exits non-zero at the first
altered, missing or unchained line. ``commands.py`` registers the sub-app.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from teamgraph.audit import rotation
from teamgraph.audit.chain import Verdict, verify_folder
from teamgraph.audit.log import INDEX_FILE
from teamgraph.audit.project import logs_dir
from teamgraph.cli.errors import CLIError, friendly
from teamgraph.cli.output import console, display_path
from teamgraph.cli.teams import reader_team
from teamgraph.cli.threads import list_threads, project_config, thread_config
from teamgraph.team import DEFAULT_HOME

log_app = typer.Typer(help="Read a thread's collaboration log, or verify its hash chain.", no_args_is_help=True)

ThreadArg = Annotated[str, typer.Argument(metavar="THREAD", help="The thread.")]
HomeOpt = Annotated[Path, typer.Option("--home", help="Data folder: SQLite file, project files, custom roles.")]
ProjectOpt = Annotated[
    str | None, typer.Option("--project", help="The project the thread ran in (default: the one it recorded).")
]


def log_folder_of(home: Path, thread: str, project: str | None) -> Path:
    """The thread's logs folder; a CLIError when it has no log.

    Raises:
        CLIError: The folder does not exist (no run logged there, or the log is off).
    """
    if project is None and thread in list_threads(home):
        config = project_config(reader_team(home).graph, thread)  # NOTE: the project the thread recorded
    else:
        config = thread_config(thread, project)
    folder = logs_dir(home, config)
    if not folder.is_dir():
        raise CLIError(
            f"No collaboration log for thread {thread!r} at {display_path(folder)}. "
            "Check --home, and --project if the run named its project (Policy.log may be off)."
        )
    return folder


@log_app.command("show")
@friendly
def show(thread: ThreadArg, home: HomeOpt = Path(DEFAULT_HOME), project: ProjectOpt = None) -> None:
    """Print THREAD's collaboration log, oldest day file first."""
    folder = log_folder_of(home, thread, project)
    for path, _ in sorted(rotation.day_files(folder).items(), key=lambda item: item[1]):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            typer.echo(line)


def verdict_text(verdict: Verdict) -> str:
    """The one line ``verify`` prints: OK with what was checked, or the first problem."""
    where = display_path(verdict.folder)
    problem = verdict.problem
    if problem is None:
        return f"OK: {verdict.lines} lines in {verdict.files} day files, chain intact ({where})."
    at = f"line {problem.line}" if problem.line else "whole file"
    return f"{problem.kind.upper()}: {where}/{problem.file}, {at}: {problem.detail}."


@log_app.command("verify")
@friendly
def verify(thread: ThreadArg, home: HomeOpt = Path(DEFAULT_HOME), project: ProjectOpt = None) -> None:
    """Check THREAD's log: every line's hash chain, and each day file's end against the index.

    Exit code 0 when intact; 1 at the first altered, missing or unchained line (printed).
    """
    verdict = verify_folder(log_folder_of(home, thread, project), index_file=INDEX_FILE)
    if verdict.problem is not None:
        raise CLIError(verdict_text(verdict))
    console().print(verdict_text(verdict), markup=False, soft_wrap=True, highlight=False)
