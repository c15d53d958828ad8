"""The `teamgraph` command: run a team on a task from the terminal.

Commands:
    demo                      the bundled scripted team, offline
    run "task"                a team on your task (model from --model or TEAMGRAPH_MODEL)
    resume <thread>           continue a paused (or interrupted) thread
    threads                   the threads in the home folder's SQLite file
    history <thread>          every agent's conversation in a thread
    stats <thread>            calls, tokens, errors, who called whom, response times
    export <thread>           a thread as Markdown, JSON or SQLite
    timeline <thread>         a picture of the run: one lane per agent over time (PNG or HTML)
    log show|verify <thread>  a thread's collaboration log; verify its hash chain
    roles [show ID]           the roles a team can use

Exit codes: 0 done, with the Team Leader's report; 1 error; 2 no model configured (or
bad usage); 3 the run is paused for a person and nobody at the terminal can answer
(answer with ``teamgraph resume <thread> --answer id=value``); 4 the run ended without
a new report on the latest task (stopped, out of budget, or the leader never replied;
``Team.report(config)`` is None); 130 interrupted (Ctrl-C).

Errors are one line (``Error: ...``); ``teamgraph --debug ...`` shows the traceback.

Modules (each imports only the ones above it; none imports ``commands``):
    output     the stdout console and shared text helpers (statuses, clipping, paths, answers)
    errors     CLIError, exit codes, one-line error messages, the ``friendly`` wrapper
    threads    the SQLite file, thread ids and listing, ``cli-threads.json``, the resume command line
    teams      the model spec and Policy from the options; a read-only team
    answers    pauses: ``--answer ID=VALUE``, prompting at the terminal, describing a request
    summary    the end of a run: report, who did what, requests, files written, next commands
    live       the live view (TeamView) and Session, which streams a thread and answers its pauses
    history    printing each agent's conversation
    logs       ``log show`` and ``log verify``
    commands   the typer app and its commands; ``main``, the console script
"""

from teamgraph.cli.answers import describe_request, is_approval, parse_answer
from teamgraph.cli.commands import app, main
from teamgraph.cli.errors import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_NO_MODEL,
    EXIT_NO_REPORT,
    EXIT_PAUSED,
    CLIError,
)
from teamgraph.cli.live import Session, TeamView
from teamgraph.cli.summary import print_summary

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_NO_MODEL",
    "EXIT_NO_REPORT",
    "EXIT_PAUSED",
    "CLIError",
    "Session",
    "TeamView",
    "app",
    "describe_request",
    "is_approval",
    "main",
    "parse_answer",
    "print_summary",
]
