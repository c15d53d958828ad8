"""The typer app: the root options and the commands.

Each command reads its options, builds what it needs from the other modules
(teams, threads, live, answers, history) and prints; :func:`~teamgraph.cli.errors.friendly`
turns whatever it raises into one error line and an exit code. The other modules
never import this one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from teamgraph import __version__
from teamgraph.checkpoints.store import DB_ENV, check_db
from teamgraph.cli.answers import parse_answers
from teamgraph.cli.errors import EXIT_NO_MODEL, CLIError, friendly, settings
from teamgraph.cli.history import print_history
from teamgraph.cli.live import Session
from teamgraph.cli.logs import log_app
from teamgraph.cli.output import Column, console, display_path, fit_table
from teamgraph.cli.reports import export_command, stats_command, timeline_command
from teamgraph.cli.teams import (
    MODEL_ENV,
    make_policy,
    model_spec,
    on_chosen_db,
    reader_team,
)
from teamgraph.cli.threads import (
    chosen_db,
    is_unfinished,
    list_threads,
    load_thread_settings,
    new_thread_id,
    require_thread,
    save_thread_settings,
    store_label,
    thread_config,
    threads_table,
)
from teamgraph.models.factory import known_providers
from teamgraph.team import DEFAULT_HOME

app = typer.Typer(
    name="teamgraph",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)
roles_app = typer.Typer(
    help="List the roles a team can use, or show one role's file.",
    no_args_is_help=False,
    invoke_without_command=True,
)
app.add_typer(roles_app, name="roles")


# --------------------------------------------------------------------------- options

HomeOption = Annotated[
    Path,
    typer.Option("--home", help="Data folder: SQLite file, project files, custom roles.", show_default=True),
]
RolesDirOption = Annotated[
    Path | None,
    typer.Option("--roles-dir", help="Folder of extra role .md files (built-in roles are always there)."),
]
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help=f"Model: <provider>:<name> or scripted:<path.yaml> (default: ${MODEL_ENV}). Providers (those of "
        f"langchain's init_chat_model, each with its package installed): {', '.join(known_providers())}.",
    ),
]
AnswerOption = Annotated[
    list[str] | None,
    typer.Option(
        "--answer",
        "-a",
        metavar="ID=VALUE",
        help='Answer a pause without asking: ID=VALUE, e.g. ask_1="Use blue", plan_2=yes, plan_2=no:"too big". '
        "Repeatable.",
    ),
]
NoPlanOption = Annotated[
    bool,
    # NOTE: an empty metavar: typer would otherwise show "<bool>", as if the flag took a value.
    typer.Option("--no-plan", metavar="", help="Do not make the Team Leader get its plan approved by you first."),
]
PolicyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--policy",
        metavar="KEY=VALUE",
        help="Set a Policy field, e.g. ask=human (members' questions come to you) or max_parallel=4. Repeatable.",
    ),
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"teamgraph {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            metavar="URL",
            help=f"Where threads are saved: postgresql://user:pw@host/db, or a SQLite file (default: ${DB_ENV}, "
            "else <home>/teamgraph.sqlite).",
        ),
    ] = None,
    debug: Annotated[
        bool, typer.Option("--debug", metavar="", help="Show tracebacks instead of one-line errors.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", metavar="", callback=_version, is_eager=True, help="Show the version and exit."),
    ] = False,
) -> None:
    """teamgraph: durable LLM agent teams on LangGraph, checkpointed to SQLite.

    Try [bold]teamgraph demo[/bold] (offline, no model needed), then
    [bold]teamgraph run "your task"[/bold] with TEAMGRAPH_MODEL=openai:<model> and OPENAI_API_KEY set.
    """
    settings["debug"] = debug or bool(os.environ.get("TEAMGRAPH_DEBUG"))
    if db is not None:
        try:
            check_db(db, source="--db")
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--db") from None
    settings["db"] = db


# --------------------------------------------------------------------------- running teams


@app.command()
@friendly
def demo(
    home: HomeOption = Path(DEFAULT_HOME),
    roles_dir: RolesDirOption = None,
    thread: Annotated[str | None, typer.Option("--thread", help="Thread id (default: demo-<n>, a new one).")] = None,
    answer: AnswerOption = None,
    latency: Annotated[
        float | None,
        typer.Option(
            "--latency", min=0.0, help="Seconds per scripted model call (default: 0.3 on a terminal, else 0)."
        ),
    ] = None,
) -> None:
    """Run the bundled scripted team offline: no model, no network.

    The Team Leader creates three members (two UI Operators and a Full-Stack
    Engineer) who work in parallel; one asks the leader a question, one asks a
    peer; the leader reports. Everything is checkpointed to SQLite in --home.
    """
    from teamgraph.demo import DEMO_TASK, demo_team
    from teamgraph.demo.runner import DEMO_THREAD_PREFIX

    out = console()
    if latency is None:
        latency = 0.3 if out.is_terminal else 0.0
    team = on_chosen_db(demo_team(home, roles_dir=roles_dir, latency=latency))
    thread = thread or new_thread_id(home, DEMO_THREAD_PREFIX)
    out.print(Text.assemble(("Demo", "bold"), " · a scripted team (no LLM, offline) · thread ", (thread, "bold")))
    out.print(Text.assemble(("Task: ", "bold"), DEMO_TASK))
    session = Session(team, thread, home=home, answers=parse_answers(answer))
    if session.values():
        raise CLIError(f"Thread {thread} already exists; the demo needs a new thread (leave out --thread).")
    save_thread_settings(home, thread, demo=True, policy=team.runtime.policy, roles_dir=roles_dir)
    session.run({"messages": [("user", DEMO_TASK)]})


@app.command()
@friendly
def run(
    task: Annotated[str, typer.Argument(metavar="TASK", help="What the team should do.")],
    thread: Annotated[
        str | None, typer.Option("--thread", "-t", help="Thread id; an existing thread gets the task as a new message.")
    ] = None,
    model: ModelOption = None,
    home: HomeOption = Path(DEFAULT_HOME),
    roles_dir: RolesDirOption = None,
    no_plan: NoPlanOption = False,
    policy: PolicyOption = None,
    answer: AnswerOption = None,
) -> None:
    """Run a team on TASK, with a live view; pauses ask you (or take --answer)."""
    from teamgraph.team import Team

    if not task.strip():
        raise CLIError('Give the team a task, e.g. teamgraph run "Build a login page".', EXIT_NO_MODEL)
    spec = model_spec(model)
    team_policy = make_policy(no_plan=no_plan, settings=policy)
    team = Team(model=spec, roles_dir=roles_dir, policy=team_policy, home=home, checkpointer=chosen_db())
    thread = thread or new_thread_id(home, "run")
    session = Session(team, thread, home=home, answers=parse_answers(answer))
    paused = list(session.pending())
    if paused:
        raise CLIError(
            f"Thread {thread} is paused for a person ({', '.join(paused)}); answer first: "
            f"{session.resume_hint} --answer {paused[0]}=..."
        )
    if spec.startswith("scripted:"):  # resume may run from another folder
        spec = "scripted:" + str(Path(spec.split(":", 1)[1]).expanduser().resolve())
    save_thread_settings(home, thread, model=spec, policy=team_policy, roles_dir=roles_dir)
    session.out.print(Text.assemble(("teamgraph", "bold"), f" · {spec} · thread ", (thread, "bold")))
    session.run({"messages": [("user", task)]})


@app.command()
@friendly
def resume(
    thread: Annotated[str, typer.Argument(metavar="THREAD", help="The thread to continue.")],
    answer: AnswerOption = None,
    model: ModelOption = None,
    home: HomeOption = Path(DEFAULT_HOME),
    roles_dir: RolesDirOption = None,
    no_plan: NoPlanOption = False,
    policy: PolicyOption = None,
) -> None:
    """Continue a paused thread: answer its pending requests (asked here, or --answer).

    The model, policy and roles folder default to the ones the thread was run with.
    """
    from teamgraph.demo.runner import demo_policy, demo_team
    from teamgraph.team import Team

    require_thread(home, thread)
    saved = load_thread_settings(home, thread)
    roles_dir = roles_dir or (Path(saved["roles_dir"]) if saved.get("roles_dir") else None)
    if model is None and saved.get("demo"):
        base = saved.get("policy") or demo_policy().model_dump(mode="json")
        team = on_chosen_db(
            demo_team(home, roles_dir=roles_dir, policy=make_policy(base=base, no_plan=no_plan, settings=policy))
        )
        spec = "scripted demo"
    else:
        spec = model_spec(model or saved.get("model"))
        team_policy = make_policy(base=saved.get("policy"), no_plan=no_plan, settings=policy)
        team = Team(model=spec, roles_dir=roles_dir, policy=team_policy, home=home, checkpointer=chosen_db())
    session = Session(team, thread, home=home, answers=parse_answers(answer))
    out = session.out
    if not is_unfinished(session.graph.get_state(session.config)):
        out.print(
            Text(
                f"Thread {thread} is finished: nothing to resume. Give it a new task with "
                f'teamgraph run --thread {thread} "..."',
                style="yellow",
            ),
            soft_wrap=True,
        )
        session.summary()
        return
    out.print(Text.assemble(("teamgraph", "bold"), f" · {spec} · resuming thread ", (thread, "bold")))
    session.run(None)


# --------------------------------------------------------------------------- reading threads


@app.command()
@friendly
def threads(home: HomeOption = Path(DEFAULT_HOME)) -> None:
    """List the threads in the home folder's SQLite file (or --db's database), most recent first."""
    out = console()
    ids = list_threads(home)
    if not ids:
        out.print(f"No threads yet in {store_label(home)}. Try `teamgraph demo`.", markup=False, soft_wrap=True)
        return
    out.print(threads_table(reader_team(home), ids, width=out.width))


@app.command()
@friendly
def history(
    thread: Annotated[str, typer.Argument(metavar="THREAD", help="The thread.")],
    agent: Annotated[str | None, typer.Option("--agent", help='One agent only, e.g. "UI Operator_1".')] = None,
    home: HomeOption = Path(DEFAULT_HOME),
    roles_dir: RolesDirOption = None,
) -> None:
    """Print every agent's own conversation in THREAD (or one agent's, with --agent)."""
    require_thread(home, thread)
    team = reader_team(home, roles_dir)
    config = thread_config(thread)
    agents = team.agents(config)
    names = [agent] if agent else list(agents)
    histories = {name: team.history(config, name) for name in names}  # unknown agent -> KeyError
    out = console()
    for name in names:
        print_history(out, name, agents.get(name, {}), histories[name])


app.command("stats")(friendly(stats_command))
app.command("export")(friendly(export_command))
app.command("timeline")(friendly(timeline_command))
app.add_typer(log_app, name="log")


# --------------------------------------------------------------------------- roles


ROLE_COLUMNS = [
    Column("id", style="bold"),
    Column("name", optional=True),
    Column("level", optional=True),
    Column("tools", free=True, optional=True),
    Column("description", free=True),
    Column("source", optional=True),
]


def _load_roles(roles_dir: Path | None, home: Path) -> dict[str, Any]:
    from teamgraph.roles import load_roles
    from teamgraph.runtime import CUSTOM_ROLES_DIR

    if roles_dir is not None and not Path(roles_dir).is_dir():
        raise CLIError(f"--roles-dir {roles_dir} is not a folder.")
    return load_roles(roles_dir, Path(home) / CUSTOM_ROLES_DIR)


def _role_file_text(role: Any) -> str:
    """The role's own file as it is on disk; its formatted text when there is no file."""
    from teamgraph.roles import builtin_roles_dir, format_role_text, parse_role_file

    if role.source == "builtin":
        candidates = [builtin_roles_dir() / f"{role.id}.md", *sorted(builtin_roles_dir().glob("*.md"))]
        for path in candidates:
            if path.is_file() and parse_role_file(path).id == role.id:
                return path.read_text(encoding="utf-8")
    elif Path(role.source).is_file():
        return Path(role.source).read_text(encoding="utf-8")
    return format_role_text(role)


@roles_app.callback()
@friendly
def roles_list(
    ctx: typer.Context,
    roles_dir: RolesDirOption = None,
    home: HomeOption = Path(DEFAULT_HOME),
) -> None:
    """List the roles (built-in, --roles-dir, and roles the leader created in --home)."""
    ctx.obj = {"roles_dir": roles_dir, "home": home}
    if ctx.invoked_subcommand is not None:
        return
    roles = _load_roles(roles_dir, home)
    rows = [
        [
            role.id,
            role.name,
            role.level,
            ", ".join(role.tools),
            role.description,
            role.source if role.source == "builtin" else display_path(Path(role.source)),
        ]
        for role in roles.values()
    ]
    out = console()
    out.print(fit_table(ROLE_COLUMNS, rows, width=out.width))
    out.print("Show one: teamgraph roles show <id>", markup=False)


@roles_app.command("show")
@friendly
def roles_show(
    ctx: typer.Context,
    role_id: Annotated[str, typer.Argument(metavar="ID", help="The role id, e.g. ui-operator.")],
    roles_dir: RolesDirOption = None,
    home: Annotated[Path | None, typer.Option("--home", help="Data folder (for roles the leader created).")] = None,
) -> None:
    """Print one role's file (front matter and prompt)."""
    parent = ctx.obj or {}
    roles_dir = roles_dir if roles_dir is not None else parent.get("roles_dir")
    home = home if home is not None else parent.get("home", Path(DEFAULT_HOME))
    roles = _load_roles(roles_dir, home)
    role = roles.get(role_id)
    if role is None:
        raise CLIError(f"No role {role_id!r}. Roles: {', '.join(roles)}.")
    typer.echo(_role_file_text(role).rstrip("\n"))


def main(argv: list[str] | None = None) -> None:
    """The console script's entry point."""
    app(args=argv, prog_name="teamgraph")
