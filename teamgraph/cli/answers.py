"""Pauses: answering the requests a thread waits on a person for.

- ``--answer ID=VALUE``: :func:`parse_answers` reads the flags, :func:`parse_answer`
  turns one value into the resume value its request takes (text, or
  ``{"approve": bool, "feedback": str}`` for an approval, see :func:`is_approval`);
- :class:`Answerer` answers a pause: from the ``--answer`` values first, else by
  asking the person at the terminal (showing each request with
  :func:`describe_request`), else it fails with the command that answers it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console, RenderableType
from rich.panel import Panel
from rich.prompt import Confirm, Prompt
from rich.text import Text

from teamgraph.cli.errors import EXIT_PAUSED, CLIError
from teamgraph.cli.output import answer_text, clip

# Request types a person answers with yes/no (plus feedback); anything else takes text.
APPROVAL_TYPES = frozenset({"plan", "member_plan", "approval"})
_YES = frozenset({"yes", "y", "approve", "approved", "ok", "true"})
_NO = frozenset({"no", "n", "reject", "rejected", "false"})


def parse_answers(items: Iterable[str] | None) -> dict[str, str]:
    """The ``--answer ID=VALUE`` flags, by request id."""
    answers: dict[str, str] = {}
    for item in items or ():
        rid, sep, value = item.partition("=")
        rid = rid.strip()
        if not sep or not rid:
            raise CLIError(
                f'--answer takes ID=VALUE, e.g. --answer ask_1="Use blue" or --answer plan_2=yes; got {item!r}.'
            )
        answers[rid] = value
    return answers


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
    return step if isinstance(step, str) else answer_text(step)


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
            body.append(f"{answer_text(value) if not isinstance(value, str) else value}\n")
    for key, value in request.items():
        if key in shown or key in hidden or value in (None, "", [], {}):
            continue
        body.append(f"{key}: ", style="bold")
        body.append(f"{value if isinstance(value, str) else answer_text(value)}\n")
    title = f"{rid} · {kind} from {request.get('from', '?')}"
    body.rstrip()
    return Panel(body if body.plain else Text("(no details)"), title=title, title_align="left", border_style="yellow")


class Answerer:
    """Answers one thread's pauses: ``--answer`` values first, then the person at the terminal."""

    def __init__(
        self,
        out: Console,
        thread: str,
        given: Mapping[str, str] | None,
        *,
        resume_hint: str,
        interactive: bool,
    ) -> None:
        self.out = out
        self.thread = thread
        self.given = dict(given or {})
        self.used: set[str] = set()
        self.resume_hint = resume_hint
        self.interactive = interactive

    def collect(self, pending: Mapping[str, Mapping[str, Any]], error: str | None = None) -> dict[str, Any]:
        """Resume values for the pending requests (``error``: why the last answer was refused).

        Fails with :data:`EXIT_PAUSED` when no ``--answer`` fits and nobody is at a terminal.
        """
        resume: dict[str, Any] = {}
        for rid, request in pending.items():
            if rid in self.given and rid not in self.used:
                resume[rid] = parse_answer(rid, request, self.given[rid])
                self.used.add(rid)
        unanswered = {rid: r for rid, r in pending.items() if rid not in resume}
        if unanswered and self.interactive:
            if error:
                self.out.print(Text(error, style="yellow"), soft_wrap=True)
            for rid, request in unanswered.items():
                resume[rid] = self.ask(rid, request)
        elif unanswered and not resume:
            unknown = [rid for rid in self.given if rid not in pending and rid not in self.used]
            if unknown:
                # NOTE: name the wrong id; an older refusal would only confuse.
                message = self.paused_message(unanswered)
                raise CLIError(f"--answer {', '.join(unknown)}: no pending request has that id. {message}", EXIT_PAUSED)
            raise CLIError(self.paused_message(unanswered, error), EXIT_PAUSED)
        return resume

    def unused(self) -> list[str]:
        """The ``--answer`` ids no pending request had, sorted."""
        return sorted(set(self.given) - self.used)

    def paused_message(
        self,
        pending: Mapping[str, Mapping[str, Any]],
        error: str | None = None,
        *,
        reason: str = "stdin is not a terminal",
    ) -> str:
        """Why the thread stays paused, what it waits for, and the command that answers it."""
        items = []
        examples = []
        for rid, request in pending.items():
            kind = request.get("type", "ask")
            what = request.get("question") or request.get("summary") or request.get("plan") or ""
            detail = f": {clip(what, 80)!r}" if what else ""
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

    def ask(self, rid: str, request: Mapping[str, Any]) -> Any:
        """Show the request and prompt the person at the terminal for its answer."""
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
