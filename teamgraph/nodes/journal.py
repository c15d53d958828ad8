"""The step journal: what a step's model calls answered and its tools returned, recorded as it goes.

An agent's step runs in its node's task, after the checkpoint that issued it; a crash
before the checkpoint after it re-runs the whole task (``role_graph.py``). The journal
lets that re-run take what the first run got instead of doing it again:

- a model call's answer is recorded when the call finishes (in flight, in the router's
  pool, or in the node), keyed by its dispatch ``seq`` and its index in the step; a re-run
  takes the recorded answer, so it sees the same tool calls (the same ids) and makes no
  second call;
- a tool call is marked as started before the tool runs and its result is recorded when
  it returns, before the step is applied; a re-run takes a recorded result and never runs
  that tool again; a tool marked started with no result (the process died while it ran)
  runs again, with the same idempotency key, ``ToolContext.attempt`` above 1, and a
  result that says so (``RERUN_KEY``).

So a tool call runs at least once, and its recorded result is applied exactly once.

Only a tool's start mark is waited for (a re-run must know the tool may have run). The
answers and results are written behind the step, in order, by one writer thread: one
lost with its process only makes a re-run do that call or tool again (with its key, and,
for a tool, the note), which is the guarantee above; a step's checkpoint makes them moot.

The journal lives in a LangGraph store (``BaseStore``): the one the API server gives the
graph; else, beside a SQLite checkpointer, a file of its own (SQLite locks a whole file
per write, and the checkpoints would wait for the journal's); else the team's store
(``Team(store=...)``, or the one in a PostgreSQL checkpointer's database). One item per
agent of a run, namespace ``("teamgraph", "journal", <run key>)``, key the agent's name,
value ``{"seq": 7, "answers": {"0": <blob>}, "tools": {"0:1:call_x": {"runs": 1, "result":
<blob>}}}``. An agent's next dispatch replaces its
item (so the store holds at most one item per agent of a thread), and the router removes
the run's items when the run ends (``forget_run``). A run nothing can resume (no thread
id, no checkpointer) keeps no journal.

NOTE: an entry is keyed by its dispatch, not by what the call read: a run started from a
past checkpoint inside the dispatch the journal still holds (a fork of an unfinished
thread's last step) takes its recorded answers and results too, as a resume does.
"""

from __future__ import annotations

import base64
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.store.base import BaseStore, PutOp

from teamgraph.compat import CONFIG_KEY_CHECKPOINTER
from teamgraph.runs import run_key
from teamgraph.runtime import TeamRuntime, graph_store

__all__ = [
    "JOURNAL_NAMESPACE",
    "RERUN_KEY",
    "StepJournal",
    "begin_run",
    "flush",
    "carried_journal",
    "forget_run",
    "journal_store",
    "journaled_act",
    "journaled_answer",
    "tool_key",
]

JOURNAL_NAMESPACE = ("teamgraph", "journal")
"""The store namespace under which each run's journal lives (one label more: the run's key)."""

RERUN_KEY = "teamgraph_rerun"
"""``additional_kwargs`` key of a tool result whose call ran again after the process died while it
ran: how many earlier runs did not finish (so they may have had their effect)."""

RERUN_NOTE = (
    "Note: the process stopped while this tool call ran, so it was run again with the same "
    "idempotency key; its effect may have happened before."
)
"""The line a re-run tool call's result starts with, for the model."""

_SERDE = JsonPlusSerializer()
_LOG = logging.getLogger(__name__)
_WRITER: tuple[int, ThreadPoolExecutor] | None = None
_WRITER_GUARD = threading.Lock()


def _writer() -> ThreadPoolExecutor:
    """The thread that writes journal items, in the order they are given (one per process)."""
    global _WRITER
    with _WRITER_GUARD:
        if _WRITER is None or _WRITER[0] != os.getpid():  # NOTE: a forked child has no thread of its parent's
            _WRITER = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="teamgraph-journal"))
        return _WRITER[1]


def _written(done: Future[Any]) -> None:
    if (error := done.exception()) is not None:
        _LOG.warning("a step journal entry was not written (a re-run may do its call or tool again): %s", error)


def flush() -> None:
    """Wait until every journal write given so far is done."""
    _writer().submit(lambda: None).result()


def journal_store(runtime: TeamRuntime, config: RunnableConfig) -> BaseStore | None:
    """The store the journal of the run ``config`` belongs to keeps its items in (None: no journal).

    The graph's own store (the API server's, a parent graph's) first, else the journal's
    own (a SQLite file beside the checkpoints, ``Team.compile``), else the team's memory
    store (``Team(store=...)``, PostgreSQL). A run without a thread id or a checkpointer
    keeps none: nothing could resume it to read it.
    """
    configurable = config.get("configurable") or {}
    if configurable.get("thread_id") is None or configurable.get(CONFIG_KEY_CHECKPOINTER) is None:
        return None
    served = graph_store()
    if served is not None:
        return served
    return runtime.journal_store if runtime.journal_store is not None else runtime.memory()[0]


def run_namespace(run: str) -> tuple[str, ...]:
    """The namespace of run ``run``'s journal (a store label may hold no ``.``)."""
    return (*JOURNAL_NAMESPACE, quote(run, safe="").replace(".", "%2E") or "-")


def tool_key(turn: int, position: int, call_id: str) -> str:
    """A tool call's entry: its model call in the step, its place in the answer, its id.

    NOTE: the place too, so two calls a provider gave the same id stay apart.
    """
    return f"{turn}:{position}:{call_id}"


def _dump(value: Any) -> dict[str, str]:
    kind, data = _SERDE.dumps_typed(value)
    return {"type": kind, "data": base64.b64encode(data).decode("ascii")}


def _load(blob: Mapping[str, str]) -> Any:
    return _SERDE.loads_typed((blob["type"], base64.b64decode(blob["data"])))


@dataclass
class ToolOutcome:
    """What one tool call added to its step: its results, its effects, the calls it left open."""

    messages: list[Any] = field(default_factory=list)
    effects: list[Any] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)


@dataclass
class StepJournal:
    """One dispatch of one agent in the journal: read once when the step starts, written as it goes.

    Attributes:
        store: Where the item lives.
        namespace: The run's namespace.
        agent: The agent (the item's key).
        seq: The dispatch.
        value: The item as this step knows it (an earlier dispatch's is replaced at the first write).
        known: The run's items as this process knows them (``TeamRuntime.journals``), kept in step.
        premarked: Tool calls this step marked as started with its answer and has not run yet.
    """

    store: BaseStore
    namespace: tuple[str, ...]
    agent: str
    seq: int
    value: dict[str, Any]
    known: dict[str, dict[str, Any]] = field(default_factory=dict)
    premarked: set[str] = field(default_factory=set)
    _answer_written: Future[Any] | None = None

    @classmethod
    def open(cls, runtime: TeamRuntime, config: RunnableConfig, agent: str, seq: int | None) -> StepJournal | None:
        """The journal of ``agent``'s dispatch ``seq`` in the run of ``config`` (None: the run keeps none)."""
        store = journal_store(runtime, config)
        if store is None or seq is None:
            return None
        run = run_key(config)
        namespace = run_namespace(run)
        # NOTE: the run holds its thread's lease, so no other process writes its items while
        # it runs: after the store's answer for an agent, this process's copy stays true.
        known = runtime.journals.setdefault(run, {})
        if agent not in known:
            flush()  # NOTE: an earlier run's writes of this process first (a resume in-process)
            item = store.get(namespace, agent)
            known[agent] = dict(item.value) if item is not None else {}
        value = dict(known[agent]) if known[agent].get("seq") == seq else {}
        return cls(store=store, namespace=namespace, agent=agent, seq=seq, value=value, known=known)

    def answer(self, index: int) -> list[BaseMessage] | None:
        """The recorded answer of the step's model call ``index`` (None: not recorded)."""
        blob = self.value.get("answers", {}).get(str(index))
        return None if blob is None else list(_load(blob))

    def record_answer(self, index: int, answer: Sequence[BaseMessage]) -> None:
        """Record the answer of the step's model call ``index`` (written behind the step).

        NOTE: its tool calls are marked as started in the same write: the one write a tool
        call then waits for is done by the time the step runs it. A re-run after a crash
        before a tool ran says it may have run, which is what the mark means.
        """
        ai = next((m for m in reversed(answer) if isinstance(m, AIMessage)), None)
        calls = [tool_key(index, at, call["id"] or "") for at, call in enumerate(ai.tool_calls if ai else ())]
        tools = dict(self.value.get("tools", {}))
        for key in calls:
            tools[key] = {"runs": int(tools.get(key, {}).get("runs", 0)) + 1}
        self.premarked.update(calls)
        self.value = {**self.value, "seq": self.seq, "tools": tools}
        self._answer_written = self._write("answers", str(index), _dump(list(answer)), wait=False)

    def outcome(self, key: str) -> ToolOutcome | None:
        """The recorded outcome of tool call ``key`` (None: it has none)."""
        blob = self.value.get("tools", {}).get(key, {}).get("result")
        return None if blob is None else ToolOutcome(**_load(blob))

    def start(self, key: str) -> int:
        """Mark tool call ``key`` as started before it runs: its run's number (1: the first)."""
        if key in self.premarked:
            self.premarked.discard(key)
            if self._answer_written is not None:
                self._answer_written.result()  # NOTE: the mark is durable before the tool runs
            return int(self.value["tools"][key]["runs"])
        runs = int(self.value.get("tools", {}).get(key, {}).get("runs", 0)) + 1
        self._write("tools", key, {"runs": runs}, wait=True)
        return runs

    def unstart(self, key: str) -> None:
        """Tool call ``key`` stopped for an interrupt: its run after the resume is not a crash's re-run."""
        self._write("tools", key, None, wait=True)

    def record(self, key: str, runs: int, outcome: ToolOutcome) -> None:
        """Record tool call ``key``'s outcome (written behind the step, before it is applied)."""
        result = {"messages": outcome.messages, "effects": outcome.effects, "deferred": outcome.deferred}
        self._write("tools", key, {"runs": runs, "result": _dump(result)}, wait=False)

    def _write(self, part: str, key: str, entry: Any, *, wait: bool) -> Future[Any]:
        entries = dict(self.value.get(part, {}))
        if entry is None:
            entries.pop(key, None)
        else:
            entries[key] = entry
        self.value = {**self.value, "seq": self.seq, part: entries}
        self.known[self.agent] = self.value
        # NOTE: every write is the whole item, in order: the last one written holds the rest.
        # Never indexed: a store set up for semantic search would embed every entry.
        done = _writer().submit(self.store.put, self.namespace, self.agent, self.value, index=False)
        if wait:
            done.result()
        else:
            done.add_done_callback(_written)
        return done


class JournaledAnswer(list[BaseMessage]):
    """A model call's answer, carrying the journal of its step (the step goes on with it, unread again)."""

    journal: StepJournal | None = None


def journaled_answer(
    journal: StepJournal | None, index: int, call: Callable[[], Sequence[BaseMessage]]
) -> JournaledAnswer:
    """Model call ``index`` of a step: its recorded answer, else ``call()``'s, recorded."""
    recorded = None if journal is None else journal.answer(index)
    answer = JournaledAnswer(call() if recorded is None else recorded)
    if journal is not None and recorded is None:
        journal.record_answer(index, answer)
    answer.journal = journal
    return answer


def carried_journal(answer: Future[Any] | None, seq: int) -> StepJournal | None:
    """The journal a call made in flight for dispatch ``seq`` carries (None: none, or it failed)."""
    if answer is None or not answer.done() or answer.cancelled() or answer.exception() is not None:
        return None
    journal = getattr(answer.result(), "journal", None)
    return journal if isinstance(journal, StepJournal) and journal.seq == seq else None


def journaled_act(journal: StepJournal | None, key: str, act: Callable[[], str]) -> str:
    """An act of a step that is no tool call (an approved operation), run as a tool call is.

    Its text result is recorded as it returns; a step re-run takes it, and an act the
    process died in runs again with a result that says so.
    """
    if journal is None:
        return act()
    recorded = journal.outcome(key)
    if recorded is not None:
        return str(recorded.messages[0])
    runs = journal.start(key)
    result = act() if runs == 1 else f"{RERUN_NOTE}\n{act()}"
    journal.record(key, runs, ToolOutcome(messages=[result]))
    return result


def forget_run(runtime: TeamRuntime, config: RunnableConfig, agents: Iterable[str]) -> None:
    """The run of ``config`` ended (nothing in flight, no person to wait for): its journal goes.

    Args:
        runtime: The team runtime.
        config: The router's config.
        agents: Every agent of the run (the registry): the keys its journal may hold.

    NOTE: every step of the run is in its checkpoints by then, so no re-run can need an entry.
    """
    runtime.journals.pop(run_key(config), None)
    store = journal_store(runtime, config)
    if store is None:
        return
    namespace = run_namespace(run_key(config))
    # NOTE: after the writes given before it (one writer, in order); None deletes; one round trip.
    _writer().submit(store.batch, [PutOp(namespace, agent, None) for agent in agents]).result()


def begin_run(runtime: TeamRuntime, config: RunnableConfig) -> None:
    """A run of ``config``'s thread starts in this process: what it knew of the journal may be stale.

    NOTE: another process may have run the thread since (and crashed in a step).
    """
    runtime.journals.pop(run_key(config), None)
