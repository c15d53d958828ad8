"""Run one model turn's tool calls: results, effects, and the calls left open.

LangGraph's ToolNode insists that every tool call ends with a ToolMessage; a
deferred call (``ask_master``, ``ask_sub_agent``...) must stay open until the
router answers it, so this small executor runs our ``@tool`` functions instead.
It keeps ToolNode's contract otherwise: arguments injected by type (a parameter typed
``ToolContext``, as ToolNode injects ``ToolRuntime``), ``InjectedToolCallId``,
``Command`` results, and errors returned to the model instead of raised.

With a step journal (``nodes/journal.py``) each call that runs a tool is marked started
before the tool runs and its outcome recorded after; a recorded outcome is taken instead
of running the tool again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command
from pydantic import ValidationError

from teamgraph.audit.exceptions import RETRIES_KEY, call_with_retry, retried_error
from teamgraph.governance.gate import rule_call
from teamgraph.messaging.results import ERROR_KEY
from teamgraph.models.arguments import NOT_AN_OBJECT, non_object_kind
from teamgraph.nodes.journal import RERUN_KEY, RERUN_NOTE, StepJournal, ToolOutcome, tool_key
from teamgraph.records import Effect
from teamgraph.runtime import TeamRuntime
from teamgraph.tools.context import TeamView, ToolContext
from teamgraph.tools.errors import FORBIDDEN, INVALID_CALL, TOOL_FAILED, UNKNOWN_TOOL, ErrorCode, Refusal, code_of


def context_parameter(tool: BaseTool) -> str | None:
    """The name of ``tool``'s parameter typed :class:`ToolContext` (injected by type), if it has one."""
    fields = getattr(tool.args_schema, "model_fields", None) or {}
    return next(
        (n for n, f in fields.items() if isinstance(f.annotation, type) and issubclass(f.annotation, ToolContext)),
        None,
    )


def _expected_args(tool: BaseTool) -> str:
    schema = tool.tool_call_schema
    fields = schema.model_fields if hasattr(schema, "model_fields") else {}
    parts = [f"{n}{'' if f.is_required() else ' (optional)'}" for n, f in fields.items()]
    return ", ".join(parts) or "no arguments"


def _validation_problem(tool: BaseTool, exc: ValidationError) -> str:
    problems = "; ".join(
        f"'{'.'.join(str(p) for p in e['loc']) or 'arguments'}': {e['msg'].lower()}" for e in exc.errors()
    )
    return (
        f"invalid arguments for {tool.name}: {problems}. "
        f"Expected arguments: {_expected_args(tool)}. Call it again with valid arguments."
    )


def _error(text: str, call_id: str, name: str, *, code: ErrorCode, retries: list[str] | None = None) -> ToolMessage:
    """An error result for the model: its English after ``Error:``, its code under ``ERROR_KEY``."""
    extra: dict[str, Any] = {ERROR_KEY: code, **({RETRIES_KEY: retries} if retries else {})}
    return ToolMessage(
        content=f"Error: {text}", tool_call_id=call_id, name=name, status="error", additional_kwargs=extra
    )


@dataclass
class StepCalls:
    """What a model turn's tool calls produced so far: results, effects, calls left open."""

    messages: list[ToolMessage] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)

    def take(self, out: Any, call_id: str, name: str, failures: list[str]) -> None:
        """Record one tool's return value: a Command (a result and/or effects), a ToolMessage, or text."""
        before = len(self.messages)
        if isinstance(out, Command):
            update = out.update if isinstance(out.update, dict) else {}
            self.effects.extend(update.get("effects", []))
            answered = [m for m in update.get("new", []) if isinstance(m, ToolMessage)]
            for message in answered:
                message.name = message.name or name
            self.messages.extend(answered)
            self.deferred.extend([] if answered else [call_id])
        elif isinstance(out, ToolMessage):
            self.messages.append(out)
        else:
            self.messages.append(ToolMessage(content=str(out), tool_call_id=call_id, name=name))
        for message in self.messages[before:] if failures else ():
            message.additional_kwargs[RETRIES_KEY] = failures  # NOTE: the log records the retry (WARN)

    def mark(self) -> tuple[int, int, int]:
        """Where the next call's outcome starts (``since``)."""
        return len(self.messages), len(self.effects), len(self.deferred)

    def since(self, mark: tuple[int, int, int]) -> ToolOutcome:
        """What the calls after ``mark`` added."""
        return ToolOutcome(
            messages=self.messages[mark[0] :], effects=self.effects[mark[1] :], deferred=self.deferred[mark[2] :]
        )

    def replay(self, outcome: ToolOutcome) -> None:
        """Add a call's recorded outcome, as its run added it."""
        self.messages.extend(outcome.messages)
        self.effects.extend(outcome.effects)
        self.deferred.extend(outcome.deferred)


def mark_rerun(messages: list[ToolMessage], earlier: int) -> None:
    """Say on a re-run call's results that ``earlier`` runs of it did not finish (they may have had their effect)."""
    for message in messages:
        message.additional_kwargs[RERUN_KEY] = earlier
        if isinstance(message.content, str):
            message.content = f"{RERUN_NOTE}\n{message.content}"
        else:
            message.content = [{"type": "text", "text": RERUN_NOTE}, *message.content]


def _invalid_call_errors(ai: AIMessage, tools: dict[str, BaseTool]) -> list[ToolMessage]:
    """An error result for each tool call whose arguments could not be parsed."""
    errors = []
    for bad in ai.invalid_tool_calls:
        name = bad.get("name") or "unknown"
        kind = non_object_kind(bad.get("args"))
        problem = bad.get("error") or (NOT_AN_OBJECT.format(kind=kind) if kind else "not valid JSON")
        expected = f" Expected arguments: {_expected_args(tools[name])}." if name in tools else ""
        text = f"the arguments of your {name} call could not be used: {problem}.{expected} "
        errors.append(_error(text + "Call it again with a JSON object.", bad.get("id") or "", name, code=INVALID_CALL))
    return errors


def _invoke(
    tool: BaseTool, call: ToolCall, args: dict[str, Any], config: RunnableConfig, retries: int
) -> tuple[Any, list[str]] | ToolMessage:
    """Run one call: its return value and the failures retried, or the error result for the model."""
    name, call_id = call["name"], call["id"] or ""
    try:
        payload = {**call, "args": args, "type": "tool_call"}
        return call_with_retry(partial(tool.invoke, payload, config), retries=retries)
    except GraphBubbleUp:
        raise
    except ToolException as exc:
        return _error(str(exc), call_id, name, code=code_of(exc))
    except ValidationError as exc:
        return _error(_validation_problem(tool, exc), call_id, name, code=INVALID_CALL)
    except Exception as exc:  # noqa: BLE001 - a tool bug must not stop the team
        retried = getattr(exc, "teamgraph_failures", None)
        text = retried_error(name, exc) if retried else f"{name} failed: {type(exc).__name__}: {exc}"
        return _error(text, call_id, name, code=TOOL_FAILED, retries=retried)


def run_tool_calls(
    ai: AIMessage,
    tools: dict[str, BaseTool],
    view: TeamView,
    config: RunnableConfig,
    *,
    runtime: TeamRuntime,
    refused: Mapping[str, str | Refusal] | None = None,
    retries: int = 0,
    journal: StepJournal | None = None,
    turn: int = 0,
) -> tuple[list[ToolMessage], list[Effect], list[str]]:
    """Run the tool calls of ``ai`` in order.

    Args:
        ai: The model's message.
        tools: The caller's tools by name.
        view: The team view; each tool's context also holds the effects of the calls before it.
        config: The node's config (callbacks, metadata).
        runtime: The team runtime, for the tools' context.
        refused: Tools the caller may not use right now, with the reason: a :class:`Refusal` (its text
            and code), or text alone (code ``forbidden``).
        retries: Times a call that fails with a transient error is tried again.
        journal: The step's journal: outcomes recorded by an earlier run of the step are taken
            from it, the others recorded in it (None: none is kept).
        turn: The model call of the step that made ``ai`` (0: its first), for the journal.

    Returns:
        The immediate ToolMessages, the effects in call order, and the ids of
        the calls left open (deferred) for the router to answer.
    """
    step = StepCalls(messages=_invalid_call_errors(ai, tools))
    base = ToolContext(view=view, runtime=runtime, config=config)
    for position, call in enumerate(ai.tool_calls):
        name, call_id = call["name"], call["id"] or ""
        key = tool_key(turn, position, call_id)
        recorded = journal.outcome(key) if journal is not None else None
        if recorded is not None:
            step.replay(recorded)  # NOTE: it ran before a crash and recorded its outcome: never again
            continue
        tool = tools.get(name)
        if tool is None:
            text = f"there is no tool '{name}'. Your tools: {', '.join(tools)}."
            step.messages.append(_error(text, call_id, name, code=UNKNOWN_TOOL))
            continue
        if refused and name in refused:
            refusal = refused[name]
            why = refusal if isinstance(refusal, Refusal) else Refusal(text=refusal, code=FORBIDDEN)
            step.messages.append(_error(why.text, call_id, name, code=why.code))
            continue
        args = dict(call["args"]) if isinstance(call["args"], dict) else {}
        # NOTE: the permission matrix: refused, or deferred behind an approval (a sensitive call).
        ruling = rule_call(tool, args, call_id, view, config)
        if ruling.approval or ruling.refusal:
            step.effects.extend([ruling.approval] if ruling.approval else [])
            step.deferred.extend([call_id] if ruling.approval else [])
            step.messages.extend([_error(ruling.refusal, call_id, name, code=FORBIDDEN)] if ruling.refusal else [])
            continue
        runs = journal.start(key) if journal is not None else 1
        injected = context_parameter(tool)
        if injected:
            args[injected] = replace(base, tool_call_id=call_id, effects=tuple(step.effects), attempt=runs)
        mark = step.mark()
        _run_call(step, tool, call, args, config, retries=retries, journal=journal, key=key)
        outcome = step.since(mark)
        if runs > 1:
            mark_rerun(outcome.messages, runs - 1)
        if journal is not None:
            journal.record(key, runs, outcome)
    return step.messages, step.effects, step.deferred


def _run_call(
    step: StepCalls,
    tool: BaseTool,
    call: ToolCall,
    args: dict[str, Any],
    config: RunnableConfig,
    *,
    retries: int,
    journal: StepJournal | None,
    key: str,
) -> None:
    """Run one tool call and add its outcome to ``step``."""
    try:
        result = _invoke(tool, call, args, config, retries)
    except GraphBubbleUp:
        if journal is not None:
            journal.unstart(key)  # NOTE: an interrupt: the run after the resume is not a crash's re-run
        raise
    if isinstance(result, ToolMessage):
        step.messages.append(result)
        return
    out, failures = result
    step.take(out, call["id"] or "", call["name"], failures)
