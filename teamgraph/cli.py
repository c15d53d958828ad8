"""The `teamgraph` command: run a team on a task from the terminal.

Commands:
    demo                      the bundled scripted team, offline
    run "task"                a team on your task (model from --model or TEAMGRAPH_MODEL)
    resume <thread>           continue a paused (or interrupted) thread
    threads                   the threads in the home folder's SQLite file
    history <thread>          every agent's conversation in a thread
    roles [show ID]           the roles a team can use

Exit codes: 0 done; 1 error; 2 no model configured (or bad usage); 3 the run is
paused for a person and nobody at the terminal can answer (answer with
``teamgraph resume <thread> --answer id=value``); 130 interrupted (Ctrl-C).

Errors are one line (``Error: ...``); ``teamgraph --debug ...`` shows the traceback.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import sqlite3
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
import yaml
from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.prompt import Confirm, Prompt
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from teamgraph import __version__

DEFAULT_HOME = ".teamgraph"
MODEL_ENV = "TEAMGRAPH_MODEL"

EXIT_ERROR = 1
EXIT_NO_MODEL = 2
EXIT_PAUSED = 3
EXIT_INTERRUPTED = 130

# Request types a person answers with yes/no (plus feedback); anything else takes text.
APPROVAL_TYPES = frozenset({"plan", "member_plan", "approval"})
_YES = frozenset({"yes", "y", "approve", "approved", "ok", "true"})
_NO = frozenset({"no", "n", "reject", "rejected", "false"})

_STATUS_STYLE = {
    "running": "bold green",
    "waiting": "yellow",
    "idle": "dim",
    "stopped": "magenta",
    "shutdown": "magenta",
    "terminated": "magenta",
    "failed": "bold red",
    "pending": "yellow",
    "answered": "green",
    "approved": "green",
    "rejected": "red",
    "cancelled": "magenta",
    "expired": "magenta",
}

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

_settings: dict[str, Any] = {"debug": False}


# --------------------------------------------------------------------------- errors


class CLIError(Exception):
    """An error the user can fix; printed as one line."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _error_text(exc: BaseException) -> tuple[str, int]:
    """The one-line message and exit code for an exception."""
    from pydantic import ValidationError

    from teamgraph.models import ModelNotConfiguredError

    if isinstance(exc, CLIError):
        return _one_line(str(exc)), exc.code
    if isinstance(exc, ModelNotConfiguredError):
        head, *bullets = str(exc).splitlines()
        items = [b.strip().removeprefix("- ").strip() for b in bullets if b.strip()]
        choose = [i for i in items if not i.lower().startswith(("choose one of", "pass model="))]
        message = head
        if choose:
            message += " Choose one of: " + " ".join(choose)
        message += f" (--model takes the same values as {MODEL_ENV}.)"
        return _one_line(message), EXIT_NO_MODEL
    if isinstance(exc, ValidationError):
        parts = [str(e.get("msg", "")).removeprefix("Value error, ") for e in exc.errors()]
        return _one_line("; ".join(p for p in parts if p) or str(exc)), EXIT_ERROR
    if isinstance(exc, KeyError) and exc.args:
        return _one_line(str(exc.args[0])), EXIT_ERROR
    if isinstance(exc, (ValueError, OSError, RuntimeError, sqlite3.Error)):
        # Our own errors (and the standard families) explain themselves.
        return _one_line(str(exc)) or type(exc).__name__, EXIT_ERROR
    text = _one_line(str(exc))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__, EXIT_ERROR


def _err_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    line = Text.assemble(("Error: ", "bold red"), message)
    _err_console().print(line, soft_wrap=True)
    raise typer.Exit(code)


def _friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn any exception a command raises into one ``Error: ...`` line and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            _err_console().print("Interrupted.", soft_wrap=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as exc:  # noqa: BLE001 - the CLI's one place that catches all
            import click

            if isinstance(exc, click.ClickException):
                raise
            if _settings["debug"]:
                _err_console().print(traceback.format_exc(), markup=False)
            message, code = _error_text(exc)
            _fail(message, code)

    return wrapper


# --------------------------------------------------------------------------- output


def _console() -> Console:
    """stdout; wide when it is not a terminal, so logs and tests do not wrap names."""
    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(highlight=False, width=160)
    return console


def _status(status: str) -> Text:
    return Text(str(status), style=_STATUS_STYLE.get(str(status), ""))


def _clip(text: Any, limit: int = 90) -> str:
    text = _one_line("" if text is None else str(text))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _display_path(path: Path) -> str:
    path = Path(os.path.abspath(path))
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _to(request: Mapping[str, Any]) -> str:
    """Who answers a request: "you" when it is routed to a person."""
    return "you" if request.get("route") == "human" else str(request.get("to"))


def _answer_text(answer: Any) -> str:
    if isinstance(answer, Mapping) and "approve" in answer:
        verdict = "approved" if answer.get("approve") else "rejected"
        note = answer.get("feedback") or answer.get("reason") or ""
        return f"{verdict}: {note}" if note else verdict
    if isinstance(answer, Mapping) and set(answer) == {"answer"}:
        return _answer_text(answer["answer"])
    if answer is None:
        return ""
    return answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False, default=str)


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
        help=f"Model: openai:<name> or scripted:<path.yaml> (default: ${MODEL_ENV}).",
    ),
]
AnswerOption = Annotated[
    list[str] | None,
    typer.Option(
        "--answer",
        "-a",
        metavar="ID=VALUE",
        help='Answer a pause without asking: ID=VALUE, e.g. ask_1="Use blue", plan_2=yes, plan_2=no:"too big". Repeatable.',
    ),
]
NoPlanOption = Annotated[
    bool,
    typer.Option("--no-plan", help="Do not make the Team Leader get its plan approved by you first."),
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
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """teamgraph: durable LLM agent teams on LangGraph, checkpointed to SQLite.

    Try [bold]teamgraph demo[/bold] (offline, no model needed), then
    [bold]teamgraph run "your task"[/bold] with TEAMGRAPH_MODEL=openai:<model> and OPENAI_API_KEY set.
    """
    _settings["debug"] = debug or bool(os.environ.get("TEAMGRAPH_DEBUG"))


# --------------------------------------------------------------------------- building teams


def _policy(
    *, base: Mapping[str, Any] | None = None, no_plan: bool = False, settings: Iterable[str] | None = None
):
    """A Policy from the CLI's defaults, ``base`` (saved or the demo's), and the flags.

    The CLI makes the Team Leader get its plan approved first (``require_plan``)
    unless ``--no-plan``; fields the installed Policy lacks are skipped.
    """
    from teamgraph.policy import Policy

    fields = Policy.model_fields
    values: dict[str, Any] = {}
    if "require_plan" in fields:
        values["require_plan"] = True
    values.update({k: v for k, v in (base or {}).items() if k in fields})
    if no_plan and "require_plan" in fields:
        values["require_plan"] = False
    for item in settings or ():
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CLIError(f"--policy takes KEY=VALUE, got {item!r}.")
        if key not in fields:
            raise CLIError(f"Unknown policy setting {key!r}. Settings: {', '.join(fields)}.")
        try:
            values[key] = yaml.safe_load(raw) if raw.strip() else raw
        except yaml.YAMLError:
            values[key] = raw
    return Policy(**values)


SETTINGS_FILE = "cli-threads.json"
"""In the home folder: the model and policy each thread was run with, so `resume` reuses them."""


def _load_thread_settings(home: Path, thread: str) -> dict[str, Any]:
    path = Path(home) / SETTINGS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    entry = data.get(thread) if isinstance(data, dict) else None
    return entry if isinstance(entry, dict) else {}


def _save_thread_settings(home: Path, thread: str, **entry: Any) -> None:
    path = Path(home) / SETTINGS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        data = data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        data = {}
    data[thread] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)


def _model_spec(model: str | None) -> str:
    """The model spec from --model or the environment; fails with the setup help."""
    from teamgraph.models import ModelNotConfiguredError, resolve_model

    spec = (model or os.environ.get(MODEL_ENV, "")).strip()
    if not spec:
        raise ModelNotConfiguredError()
    try:
        resolve_model(spec)  # fail now, in one line, if the spec or its credentials are wrong
    except (ValueError, TypeError) as exc:
        raise CLIError(_error_text(exc)[0], EXIT_NO_MODEL) from None
    return spec


def _db_path(home: Path) -> Path:
    from teamgraph.checkpoints import DB_FILE

    return Path(home) / DB_FILE


def _thread_ids(db_path: Path) -> list[str]:
    """Thread ids in the SQLite file, most recently updated first."""
    if not db_path.exists():
        return []
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT thread_id, MAX(checkpoint_id) AS last FROM checkpoints "
            "WHERE checkpoint_ns = '' GROUP BY thread_id ORDER BY last DESC"
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
    return [str(row[0]) for row in rows]


def _require_thread(home: Path, thread: str) -> None:
    db = _db_path(home)
    if not db.exists():
        raise CLIError(f"No threads yet: {_display_path(db)} does not exist. Try `teamgraph demo` first.")
    known = _thread_ids(db)
    if thread not in known:
        listing = ", ".join(known[:20]) + (" …" if len(known) > 20 else "")
        raise CLIError(f"No thread {thread!r} in {_display_path(db)}. Threads: {listing or 'none'}.")


def _reader_team(home: Path, roles_dir: Path | None = None):
    """A team that only reads threads: its model is never called."""
    from teamgraph.models import ScriptedChatModel
    from teamgraph.team import Team

    return Team(model=ScriptedChatModel({}), home=home, roles_dir=roles_dir)


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def _parse_answers(items: Iterable[str] | None) -> dict[str, str]:
    answers: dict[str, str] = {}
    for item in items or ():
        rid, sep, value = item.partition("=")
        rid = rid.strip()
        if not sep or not rid:
            raise CLIError(f'--answer takes ID=VALUE, e.g. --answer ask_1="Use blue" or --answer plan_2=yes; got {item!r}.')
        answers[rid] = value
    return answers


# --------------------------------------------------------------------------- the live view


class TeamView:
    """What the terminal shows while a team runs: agents, their latest action, open requests."""

    def __init__(self, thread: str, values: Mapping[str, Any] | None = None) -> None:
        values = values or {}
        self.thread = thread
        self.agents: dict[str, dict[str, Any]] = {n: dict(r) for n, r in (values.get("agents") or {}).items()}
        self.requests: dict[str, dict[str, Any]] = dict(values.get("requests") or {})
        self.scheduled: list[str] = []
        self.tick = (values.get("team") or {}).get("tick", 0)
        self.paused: dict[str, dict[str, Any]] = {}

    def apply(self, node: str, update: Any) -> list[str]:
        """Take one streamed update; return plain event lines (for logs, not terminals)."""
        events: list[str] = []
        if node == "__interrupt__":
            for interrupt in update or ():
                value = getattr(interrupt, "value", None)
                if isinstance(value, Mapping):
                    self.paused.update(value.get("requests") or {})
            for rid, req in self.paused.items():
                events.append(f"paused for a person: {rid} ({req.get('type', '?')} from {req.get('from', '?')})")
            return events
        if not isinstance(update, Mapping):
            return events
        for name, record in (update.get("agents") or {}).items():
            old = self.agents.get(name)
            if old is None:
                creator = record.get("created_by")
                by = f", created by {creator}" if creator else ""
                events.append(f"+ {name} ({record.get('role')}){by}")
            elif record.get("status") == "failed" and old.get("status") != "failed":
                events.append(f"✗ {name} failed: {_clip(record.get('last_action'))}")
            self.agents[name] = dict(record)
        for rid, record in (update.get("requests") or {}).items():
            old = self.requests.get(rid)
            if old is None:
                events.append(
                    f"? {rid} {record.get('from')} → {_to(record)}: {_clip(record.get('body'), 100)}"
                )
            if record.get("status") != "pending" and (old is None or old.get("status") == "pending"):
                events.append(f"✓ {rid} {record.get('status')}: {_clip(_answer_text(record.get('answer')), 100)}")
            self.requests[rid] = dict(record)
        team = update.get("team")
        if isinstance(team, Mapping):
            self.scheduled = list(team.get("scheduled") or [])
            self.tick = team.get("tick", self.tick)
        return events

    def __rich__(self) -> RenderableType:
        table = Table(box=box.SIMPLE_HEAD, expand=False, title_justify="left")
        table.add_column("agent", no_wrap=True, style="bold")
        table.add_column("role", no_wrap=True)
        table.add_column("status", no_wrap=True)
        table.add_column("calls", justify="right")
        table.add_column("tools", justify="right")
        table.add_column("latest action", overflow="ellipsis", no_wrap=True, max_width=70)
        for name, rec in self.agents.items():
            mark = "▶ " if name in self.scheduled else "  "
            action = _clip(rec.get("last_action"), 70)
            waits = [w for w in (rec.get("waits") or {}).values() if isinstance(w, Mapping)]
            if waits:
                on = ", ".join(f"{w.get('on')} ({w.get('request') or w.get('tool')})" for w in waits)
                action = f"waits for {on} · {action}"
            table.add_row(
                mark + name,
                str(rec.get("role", "")),
                _status(rec.get("status", "")),
                str(rec.get("steps", 0)),
                str(rec.get("tool_calls", 0)),
                action,
            )
        pending = [(rid, r) for rid, r in self.requests.items() if r.get("status") == "pending"]
        parts: list[RenderableType] = [
            Text.assemble(("teamgraph", "bold"), f" · thread {self.thread} · step {self.tick}"),
            table,
        ]
        if pending:
            lines = Text("Pending requests\n", style="bold yellow")
            for rid, r in pending:
                lines.append(f"  {rid}  {r.get('from')} → {_to(r)}: {_clip(r.get('body'), 80)}\n")
            parts.append(lines)
        return Group(*parts)


# --------------------------------------------------------------------------- running a team


class Session:
    """Drive one thread: stream it with a live view, answer its pauses, print the summary."""

    def __init__(
        self,
        team: Any,
        thread: str,
        *,
        answers: Mapping[str, str] | None = None,
        resume_hint: str = "",
    ) -> None:
        self.team = team
        self.graph = team.compile()
        self.thread = thread
        self.config = _config(thread)
        self.out = _console()
        self.answers = dict(answers or {})
        self.used: set[str] = set()
        self.interactive = sys.stdin is not None and sys.stdin.isatty()
        self.resume_hint = resume_hint or f"teamgraph resume {shlex.quote(thread)}"

    # -- streaming ------------------------------------------------------------

    def drive(self, payload: Any) -> None:
        """Stream ``payload`` (input, ``None`` or a ``Command``); answer pauses until the run ends."""
        from langgraph.types import Command

        try:
            while True:
                if payload is not None or not self.pending():
                    self.stream(payload)
                pending = self.pending()
                if not pending:
                    break
                resume = self.collect_answers(pending)
                payload = Command(resume=resume)
        except KeyboardInterrupt:
            if self.interactive:
                self.out.print()  # end the prompt's line
            raise CLIError(
                f"Interrupted. Thread {self.thread} is saved at its last step; continue with: {self.resume_hint}",
                EXIT_INTERRUPTED,
            ) from None
        except EOFError:  # Ctrl-D at a prompt
            self.out.print()
            raise CLIError(self.paused_message(self.pending(), reason="no answer was typed"), EXIT_PAUSED) from None
        except CLIError:
            raise
        except Exception as exc:
            if _settings["debug"]:
                raise
            message, code = _error_text(exc)
            raise CLIError(
                f"{message.rstrip('.')}. Thread {self.thread} is saved at its last step; "
                f"once fixed, continue with: {self.resume_hint}",
                code,
            ) from exc
        unused = sorted(set(self.answers) - self.used)
        if unused:
            self.out.print(
                Text(f"Note: --answer given for {', '.join(unused)}, but no pending request has that id.", style="yellow")
            )

    def stream(self, payload: Any) -> None:
        values = self.graph.get_state(self.config).values or {}
        view = TeamView(self.thread, values)
        chunks = self.graph.stream(payload, self.config, stream_mode="updates")
        if self.out.is_terminal:
            with Live(view, console=self.out, refresh_per_second=8, transient=True):
                for chunk in chunks:
                    for node, update in chunk.items():
                        view.apply(node, update)
        else:
            for chunk in chunks:
                for node, update in chunk.items():
                    for line in view.apply(node, update):
                        self.out.print(line, markup=False, soft_wrap=True)

    def pause(self) -> tuple[dict[str, dict[str, Any]], str | None]:
        """The requests the thread is paused on, by id, and the last refused answer's error."""
        snapshot = self.graph.get_state(self.config)
        requests: dict[str, dict[str, Any]] = {}
        error = None
        for interrupt in getattr(snapshot, "interrupts", ()) or ():
            value = getattr(interrupt, "value", None)
            if isinstance(value, Mapping) and isinstance(value.get("requests"), Mapping):
                requests.update(value["requests"])
                error = value.get("error") or error
            elif value is not None:
                requests[str(getattr(interrupt, "id", "interrupt"))] = {"type": "ask", "question": str(value)}
        return requests, error

    def pending(self) -> dict[str, dict[str, Any]]:
        """The requests the thread is paused on, by id (empty when it is not paused)."""
        return self.pause()[0]

    # -- pauses ---------------------------------------------------------------

    def collect_answers(self, pending: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """Resume values for the pending requests: from --answer, else from the person at the terminal."""
        _, error = self.pause()
        resume: dict[str, Any] = {}
        for rid, request in pending.items():
            if rid in self.answers and rid not in self.used:
                resume[rid] = parse_answer(rid, request, self.answers[rid])
                self.used.add(rid)
        unanswered = {rid: r for rid, r in pending.items() if rid not in resume}
        if unanswered and self.interactive:
            if error:
                self.out.print(Text(error, style="yellow"), soft_wrap=True)
            for rid, request in unanswered.items():
                resume[rid] = self.ask_person(rid, request)
        elif unanswered and not resume:
            raise CLIError(self.paused_message(unanswered, error), EXIT_PAUSED)
        return resume

    def paused_message(
        self,
        pending: Mapping[str, Mapping[str, Any]],
        error: str | None = None,
        *,
        reason: str = "stdin is not a terminal",
    ) -> str:
        items = []
        examples = []
        for rid, request in pending.items():
            kind = request.get("type", "ask")
            what = request.get("question") or request.get("summary") or request.get("plan") or ""
            detail = f": {_clip(what, 80)!r}" if what else ""
            items.append(f"{rid} ({kind} from {request.get('from', '?')}{detail})")
            if is_approval(request):
                examples.append(f"--answer {rid}=yes (or {rid}=no:<feedback>)")
            elif request.get("leader_decision") is not None:
                examples.append(f'--answer {rid}=yes (keep the leader\'s answer) or {rid}="<your answer>"')
            else:
                examples.append(f'--answer {rid}="..."')
        refused = f" Your last answer was refused: {error}" if error else ""
        return (
            f"Thread {self.thread} is paused for a person and {reason}.{refused} Pending: "
            f"{'; '.join(items)}. Answer with: {self.resume_hint} {' '.join(examples)}"
        )

    def ask_person(self, rid: str, request: Mapping[str, Any]) -> Any:
        self.out.print(describe_request(rid, request))
        if is_approval(request):
            approve = Confirm.ask(f"Approve {rid}?", console=self.out, default=True)
            feedback = Prompt.ask("Feedback (optional)", console=self.out, default="", show_default=False)
            return {"approve": approve, "feedback": feedback}
        if request.get("leader_decision") is not None:
            if Confirm.ask(f"Keep the Team Leader's answer to {rid}?", console=self.out, default=True):
                return {"approve": True, "feedback": ""}
        while True:
            answer = Prompt.ask(f"Answer {rid}", console=self.out)
            if answer.strip():
                return answer
            self.out.print("An empty answer helps nobody; type an answer.", style="yellow")

    # -- summary --------------------------------------------------------------

    def summary(self, *, title: str | None = None) -> None:
        print_summary(self.out, self.team, self.graph, self.thread, title=title)


def is_approval(request: Mapping[str, Any]) -> bool:
    """Whether a pending request takes ``{"approve": bool, "feedback": str}`` (not text)."""
    if request.get("type") in APPROVAL_TYPES:
        return True
    # A question the leader answered first also mentions "approve" (to keep that answer),
    # but it takes your own text as well: see parse_answer.
    return request.get("leader_decision") is None and str(request.get("expects", "")).startswith('{"approve"')


def _yes_no(raw: str) -> tuple[bool | None, str]:
    word, _, feedback = raw.partition(":")
    word = word.strip().lower()
    verdict = True if word in _YES else False if word in _NO else None
    return verdict, feedback.strip()


def parse_answer(rid: str, request: Mapping[str, Any], raw: str) -> Any:
    """An --answer value as the resume value its request takes.

    A question takes the text. An approval (plan, member_plan, approval) takes
    ``yes`` / ``no[:feedback]`` (or ``approve`` / ``reject[:feedback]``). A question the
    Team Leader answered first takes ``yes`` (keep the leader's answer) or your own text.
    """
    verdict, feedback = _yes_no(raw)
    if is_approval(request):
        if verdict is None:
            kind = request.get("type", "approval")
            raise CLIError(
                f"{rid} is a {kind} approval: answer {rid}=yes or {rid}=no[:feedback] "
                f"(or approve / reject[:feedback]); got {raw!r}."
            )
        return {"approve": verdict, "feedback": feedback}
    if request.get("leader_decision") is not None and verdict is not None:
        return {"approve": verdict, "feedback": feedback}
    return raw


def _step_text(step: Any) -> str:
    if isinstance(step, Mapping) and "title" in step:
        text = f"{step['title']} ({step.get('role_id') or 'any role'})"
        if step.get("depends_on"):
            text += f", after step {', '.join(str(d) for d in step['depends_on'])}"
        return text
    return step if isinstance(step, str) else _answer_text(step)


def describe_request(rid: str, request: Mapping[str, Any]) -> RenderableType:
    """A pending request, as shown to the person who must answer it."""
    kind = request.get("type", "ask")
    body = Text()
    shown = {"type", "from"}
    hidden = {"expects", "opened_at"}
    for key in ("question", "summary", "plan", "steps", "complexity", "leader_decision", "note"):
        if key not in request or request[key] in (None, "", [], {}):
            continue
        shown.add(key)
        value = request[key]
        body.append(f"{key.replace('_', ' ')}: ", style="bold")
        if isinstance(value, list):
            body.append("\n")
            for n, step in enumerate(value, 1):
                body.append(f"  {n}. {_step_text(step)}\n")
        else:
            body.append(f"{_answer_text(value) if not isinstance(value, str) else value}\n")
    for key, value in request.items():
        if key in shown or key in hidden or value in (None, "", [], {}):
            continue
        body.append(f"{key}: ", style="bold")
        body.append(f"{value if isinstance(value, str) else _answer_text(value)}\n")
    title = f"{rid} · {kind} from {request.get('from', '?')}"
    body.rstrip()
    return Panel(body if body.plain else Text("(no details)"), title=title, title_align="left", border_style="yellow")


def _files_written(histories: Mapping[str, list[Any]], project_dir: Path) -> list[tuple[Path, str]]:
    """Files the thread's agents wrote with write_file that still exist: (path, who)."""
    found: dict[Path, str] = {}
    for agent, messages in histories.items():
        for message in messages:
            for call in getattr(message, "tool_calls", None) or ():
                if call.get("name") != "write_file":
                    continue
                rel = (call.get("args") or {}).get("path")
                if not isinstance(rel, str):
                    continue
                path = (project_dir / rel).resolve()
                if path.is_file():
                    found.setdefault(path, agent)
    return list(found.items())


def _final_answer(messages: list[Any]) -> str:
    for message in reversed(messages or []):
        if getattr(message, "type", "") == "ai":
            content = message.content
            if isinstance(content, list):  # content blocks: keep the text ones
                content = "".join(b if isinstance(b, str) else str(b.get("text", "")) for b in content)
            text = str(content or "")
            if text.strip():
                return text.strip()
    return ""


def print_summary(out: Console, team: Any, graph: Any, thread: str, *, title: str | None = None) -> None:
    """The end of a run: the leader's report, who did what, requests, files, where the SQLite file is."""
    values = graph.get_state(_config(thread)).values or {}
    agents = values.get("agents") or {}
    requests = values.get("requests") or {}

    final = _final_answer(values.get("messages") or [])
    if final:
        out.print(Panel(Text(final), title=title or "Team Leader's report", title_align="left", border_style="green"))
    else:
        out.print(Text("The Team Leader has not reported yet.", style="yellow"))

    table = Table(title="Who did what", title_justify="left", box=box.SIMPLE_HEAD, title_style="bold")
    table.add_column("agent", no_wrap=True, style="bold")
    table.add_column("role", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("model calls", justify="right")
    table.add_column("tool calls", justify="right")
    table.add_column("last action")
    for name, rec in agents.items():
        table.add_row(
            name,
            str(rec.get("role", "")),
            _status(rec.get("status", "")),
            str(rec.get("steps", 0)),
            str(rec.get("tool_calls", 0)),
            _clip(rec.get("last_action"), 100),
        )
    out.print(table)

    if requests:
        rtable = Table(title="Requests", title_justify="left", box=box.SIMPLE_HEAD, title_style="bold")
        rtable.add_column("id", no_wrap=True, style="bold")
        rtable.add_column("kind", no_wrap=True)
        rtable.add_column("from → to")
        rtable.add_column("status", no_wrap=True)
        rtable.add_column("question")
        rtable.add_column("answer")
        for rid, r in requests.items():
            rtable.add_row(
                rid,
                str(r.get("kind", "")),
                f"{r.get('from')} → {_to(r)}",
                _status(r.get("status", "")),
                _clip(r.get("body"), 70),
                _clip(_answer_text(r.get("answer")), 70),
            )
        out.print(rtable)

    files = _files_written(values.get("histories") or {}, team.runtime.project_dir)
    if files:
        out.print(Text("Files written", style="bold"))
        for path, who in files:
            out.print(f"  {_display_path(path)}  ({who})", markup=False, soft_wrap=True)
    out.print(Text.assemble(("SQLite: ", "bold"), _display_path(team.db_path), f"  (thread {thread})"), soft_wrap=True)


def _hints(out: Console, thread: str, home: Path, agents: Iterable[str]) -> None:
    home_flag = "" if Path(home) == Path(DEFAULT_HOME) else f" --home {shlex.quote(str(home))}"
    members = [a for a in agents if a != "Team Leader"]
    out.print(Text("Next:", style="bold"))
    out.print(f"  teamgraph history {shlex.quote(thread)}{home_flag}" + (f" --agent {shlex.quote(members[0])}" if members else ""), markup=False, soft_wrap=True)
    out.print(f"  teamgraph threads{home_flag}", markup=False, soft_wrap=True)


def _resume_hint(thread: str, home: Path) -> str:
    parts = ["teamgraph", "resume", shlex.quote(thread)]
    if Path(home) != Path(DEFAULT_HOME):
        parts += ["--home", shlex.quote(str(home))]
    return " ".join(parts)


def _paused_ids(graph: Any, thread: str) -> list[str]:
    snapshot = graph.get_state(_config(thread))
    ids: list[str] = []
    for interrupt in getattr(snapshot, "interrupts", ()) or ():
        value = getattr(interrupt, "value", None)
        if isinstance(value, Mapping) and isinstance(value.get("requests"), Mapping):
            ids.extend(value["requests"])
        else:
            ids.append(str(getattr(interrupt, "id", "interrupt")))
    return ids


# --------------------------------------------------------------------------- commands


@app.command()
@_friendly
def demo(
    home: HomeOption = Path(DEFAULT_HOME),
    roles_dir: RolesDirOption = None,
    thread: Annotated[str | None, typer.Option("--thread", help="Thread id (default: demo-<n>, a new one).")] = None,
    answer: AnswerOption = None,
    latency: Annotated[
        float | None,
        typer.Option("--latency", min=0.0, help="Seconds per scripted model call (default: 0.3 on a terminal, else 0)."),
    ] = None,
) -> None:
    """Run the bundled scripted team offline: no model, no network.

    The Team Leader creates three members (two UI Operators and a Full-Stack
    Engineer) who work in parallel; one asks the leader a question, one asks a
    peer; the leader reports. Everything is checkpointed to SQLite in --home.
    """
    from teamgraph.demo import DEMO_TASK, demo_team, new_thread_id

    out = _console()
    if latency is None:
        latency = 0.3 if out.is_terminal else 0.0
    team = demo_team(home, roles_dir=roles_dir, latency=latency)
    thread = thread or new_thread_id(team.db_path)
    out.print(Text.assemble(("Demo", "bold"), " · a scripted team (no LLM, offline) · thread ", (thread, "bold")))
    out.print(Text.assemble(("Task: ", "bold"), DEMO_TASK))
    session = Session(team, thread, answers=_parse_answers(answer), resume_hint=_resume_hint(thread, home))
    if session.graph.get_state(session.config).values:
        raise CLIError(f"Thread {thread} already exists; the demo needs a new thread (leave out --thread).")
    _save_thread_settings(
        home,
        thread,
        demo=True,
        policy=team.runtime.policy.model_dump(mode="json"),
        roles_dir=str(Path(roles_dir).resolve()) if roles_dir else None,
    )
    session.drive({"messages": [("user", DEMO_TASK)]})
    session.summary()
    _hints(out, thread, home, session.graph.get_state(session.config).values.get("agents") or {})


@app.command()
@_friendly
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
    from teamgraph.demo.runner import new_thread_id
    from teamgraph.team import Team

    if not task.strip():
        raise CLIError('Give the team a task, e.g. teamgraph run "Build a login page".', EXIT_NO_MODEL)
    spec = _model_spec(model)
    team_policy = _policy(no_plan=no_plan, settings=policy)
    team = Team(model=spec, roles_dir=roles_dir, policy=team_policy, home=home)
    thread = thread or new_thread_id(team.db_path, prefix="run")
    session = Session(team, thread, answers=_parse_answers(answer), resume_hint=_resume_hint(thread, home))
    paused = _paused_ids(session.graph, thread)
    if paused:
        raise CLIError(
            f"Thread {thread} is paused for a person ({', '.join(paused)}); answer first: "
            f"{session.resume_hint} --answer {paused[0]}=..."
        )
    if spec.startswith("scripted:"):  # resume may run from another folder
        spec = "scripted:" + str(Path(spec.split(":", 1)[1]).expanduser().resolve())
    _save_thread_settings(
        home,
        thread,
        model=spec,
        policy=team_policy.model_dump(mode="json"),
        roles_dir=str(Path(roles_dir).resolve()) if roles_dir else None,
    )
    out = session.out
    out.print(Text.assemble(("teamgraph", "bold"), f" · {spec} · thread ", (thread, "bold")))
    session.drive({"messages": [("user", task)]})
    session.summary()
    _hints(out, thread, home, session.graph.get_state(session.config).values.get("agents") or {})


@app.command()
@_friendly
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

    _require_thread(home, thread)
    saved = _load_thread_settings(home, thread)
    roles_dir = roles_dir or (Path(saved["roles_dir"]) if saved.get("roles_dir") else None)
    if model is None and saved.get("demo"):
        base = saved.get("policy") or demo_policy().model_dump(mode="json")
        team = demo_team(home, roles_dir=roles_dir, policy=_policy(base=base, no_plan=no_plan, settings=policy))
        spec = "scripted demo"
    else:
        spec = _model_spec(model or saved.get("model"))
        team_policy = _policy(base=saved.get("policy"), no_plan=no_plan, settings=policy)
        team = Team(model=spec, roles_dir=roles_dir, policy=team_policy, home=home)
    session = Session(team, thread, answers=_parse_answers(answer), resume_hint=_resume_hint(thread, home))
    snapshot = session.graph.get_state(session.config)
    out = session.out
    if not session.pending() and not snapshot.next:
        out.print(
            Text(f"Thread {thread} is not paused: nothing to resume. Give it a new task with "
                 f'teamgraph run --thread {thread} "..."', style="yellow"),
            soft_wrap=True,
        )
        session.summary()
        return
    out.print(Text.assemble(("teamgraph", "bold"), f" · {spec} · resuming thread ", (thread, "bold")))
    session.drive(None)
    session.summary()
    _hints(out, thread, home, session.graph.get_state(session.config).values.get("agents") or {})


@app.command()
@_friendly
def threads(home: HomeOption = Path(DEFAULT_HOME)) -> None:
    """List the threads in the home folder's SQLite file, most recent first."""
    from teamgraph.checkpoints import open_sqlite_saver

    db = _db_path(home)
    out = _console()
    ids = _thread_ids(db)
    if not ids:
        where = _display_path(db)
        out.print(f"No threads yet in {where}. Try `teamgraph demo`.", markup=False, soft_wrap=True)
        return
    saver = open_sqlite_saver(db)
    table = Table(title=f"Threads in {_display_path(db)}", title_justify="left", box=box.SIMPLE_HEAD, title_style="bold")
    table.add_column("thread", no_wrap=True, style="bold")
    table.add_column("last update", no_wrap=True)
    table.add_column("agents", justify="right")
    table.add_column("state", no_wrap=True)
    table.add_column("task")
    try:
        for thread in ids:
            tup = saver.get_tuple(_config(thread))
            if tup is None:
                continue
            channels = tup.checkpoint.get("channel_values") or {}
            agents = channels.get("agents") or {}
            messages = channels.get("messages") or []
            task = next((m.content for m in messages if getattr(m, "type", "") == "human"), "")
            paused = any(w[1] == "__interrupt__" for w in (tup.pending_writes or ()))
            if paused:
                state = Text("paused", style="yellow")
            elif any(r.get("status") == "running" for r in agents.values()):
                state = Text("interrupted", style="magenta")
            else:
                state = Text("done", style="green")
            table.add_row(
                thread,
                str(tup.checkpoint.get("ts", ""))[:19].replace("T", " "),
                str(len(agents)),
                state,
                _clip(task, 70),
            )
    finally:
        saver.conn.close()
    out.print(table)


@app.command()
@_friendly
def history(
    thread: Annotated[str, typer.Argument(metavar="THREAD", help="The thread.")],
    agent: Annotated[str | None, typer.Option("--agent", help='One agent only, e.g. "UI Operator_1".')] = None,
    home: HomeOption = Path(DEFAULT_HOME),
    roles_dir: RolesDirOption = None,
) -> None:
    """Print every agent's own conversation in THREAD (or one agent's, with --agent)."""
    _require_thread(home, thread)
    team = _reader_team(home, roles_dir)
    config = _config(thread)
    agents = team.agents(config)
    names = [agent] if agent else list(agents)
    histories = {name: team.history(config, name) for name in names}  # unknown agent -> KeyError
    out = _console()
    for name in names:
        rec = agents.get(name, {})
        messages = histories[name]
        out.print(Rule(Text(f"{name} · {rec.get('role', '?')} · {rec.get('status', '?')} · {len(messages)} messages", style="bold"), align="left"))
        for message in messages:
            _print_message(out, message)
        out.print()


def _print_message(out: Console, message: Any) -> None:
    kind = getattr(message, "type", type(message).__name__)
    label = {"human": "user", "ai": "ai", "tool": "tool", "system": "system"}.get(kind, kind)
    name = getattr(message, "name", None)
    style = {"user": "cyan", "ai": "green", "tool": "magenta", "system": "dim"}.get(label, "")
    head = Text(f"[{label}]", style=f"bold {style}")
    if name:
        head.append(f" {name}", style="bold")
    if kind == "tool":
        head.append(f" (call {getattr(message, 'tool_call_id', '?')})", style="dim")
    out.print(head)
    content = message.content
    if not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False, default=str)
    if content.strip():
        out.print(Text("  " + content.strip().replace("\n", "\n  ")), soft_wrap=True)
    for call in getattr(message, "tool_calls", None) or ():
        args = json.dumps(call.get("args", {}), ensure_ascii=False, default=str)
        out.print(Text.assemble(("  → ", "bold"), (call.get("name", "?"), "bold"), f"({args})", (f"  id {call.get('id')}", "dim")), soft_wrap=True)
    for call in getattr(message, "invalid_tool_calls", None) or ():
        out.print(Text(f"  → invalid tool call {call.get('name')}: {call.get('args')!r} ({call.get('error')})", style="red"), soft_wrap=True)


def _load_roles(roles_dir: Path | None, home: Path) -> dict[str, Any]:
    from teamgraph.roles import load_roles
    from teamgraph.runtime import CUSTOM_ROLES_DIR

    if roles_dir is not None and not Path(roles_dir).is_dir():
        raise CLIError(f"--roles-dir {roles_dir} is not a folder.")
    return load_roles(roles_dir, Path(home) / CUSTOM_ROLES_DIR)


@roles_app.callback()
@_friendly
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
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("id", no_wrap=True, style="bold")
    table.add_column("name", no_wrap=True)
    table.add_column("level", no_wrap=True)
    table.add_column("tools", no_wrap=True)
    table.add_column("description")
    table.add_column("source")
    for role in roles.values():
        source = role.source if role.source == "builtin" else _display_path(Path(role.source))
        table.add_row(role.id, role.name, role.level, ", ".join(role.tools), role.description, source)
    out = _console()
    out.print(table)
    out.print("Show one: teamgraph roles show <id>", markup=False)


@roles_app.command("show")
@_friendly
def roles_show(
    ctx: typer.Context,
    role_id: Annotated[str, typer.Argument(metavar="ID", help="The role id, e.g. ui-operator.")],
    roles_dir: RolesDirOption = None,
    home: Annotated[Path | None, typer.Option("--home", help="Data folder (for roles the leader created).")] = None,
) -> None:
    """Print one role's file (front matter and prompt)."""
    from teamgraph.roles import builtin_roles_dir, format_role_text, parse_role_file

    parent = ctx.obj or {}
    roles_dir = roles_dir if roles_dir is not None else parent.get("roles_dir")
    home = home if home is not None else parent.get("home", Path(DEFAULT_HOME))
    roles = _load_roles(roles_dir, home)
    role = roles.get(role_id)
    if role is None:
        raise CLIError(f"No role {role_id!r}. Roles: {', '.join(roles)}.")
    text = None
    if role.source == "builtin":
        candidates = [builtin_roles_dir() / f"{role.id}.md", *sorted(builtin_roles_dir().glob("*.md"))]
        for path in candidates:
            if path.is_file() and parse_role_file(path).id == role.id:
                text = path.read_text(encoding="utf-8")
                break
    elif Path(role.source).is_file():
        text = Path(role.source).read_text(encoding="utf-8")
    if text is None:
        text = format_role_text(role)
    typer.echo(text.rstrip("\n"))


def main(argv: list[str] | None = None) -> None:
    """The console script's entry point."""
    app(args=argv, prog_name="teamgraph")


if __name__ == "__main__":
    main()
