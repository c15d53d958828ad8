"""The compiled team graph, guarded: one run per thread, and resume values LangGraph would mishandle refused.

``Team.compile()`` returns a ``TeamGraph``: a LangGraph ``CompiledStateGraph`` like any
other (Studio, ``invoke``/``stream``, ``Command(resume=...)``) that checks two things
before a run starts, and changes nothing when it refuses:

- the thread is not being run by another run, here or in another process or machine
  (its lease: ``teamgraph/checkpoints/lease.py``; in the checkpointer's database when it
  is one of ours, and then every write of the run is fenced by it);
- a resume value reaches the human gate: LangGraph itself raises a TypeError on
  non-string keys (``{1: "x"}``), crashes on ``resume=None`` and silently ignores
  ``{}`` (an empty interrupt map), so those are refused here with what to send instead;
- a run of a checkpointed team names its thread, and a top-level input has only keys
  the team's input has (LangGraph drops the others without a word: ``{"msgs": ...}``
  ran nothing).

A run that names no project works in the one its thread recorded (``keeping_project``).

NOTE: workaround of an upstream behaviour (langgraph 1.2: TypeError on non-string resume
keys, crash on ``resume=None``, ``{}`` dropped).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from pathlib import Path
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from teamgraph.audit.project import PROJECT_NAME_KEY, keeping_project
from teamgraph.checkpoints.db_lease import leases_for
from teamgraph.checkpoints.fence import ParentFence
from teamgraph.checkpoints.lease import FileLeases, LeaseStore, hold_run
from teamgraph.compat import CONFIG_KEY_CHECKPOINTER, CONFIG_KEY_DURABILITY, effective_config
from teamgraph.runs import RUN_KEY, RunScope, scope_of


class ResumeValueError(ValueError):
    """A ``Command(resume=...)`` value that cannot reach the human gate."""


def check_resume(value: Any) -> None:
    """Refuse a resume value LangGraph would crash on or drop.

    Raises:
        ResumeValueError: With what was wrong and the shape to send.
    """
    if not isinstance(value, Command) or value.update is not None or value.goto:
        return
    shape = "Command(resume={'ask_1': 'your answer', 'plan_2': {'approve': True, 'feedback': ''}})"
    resume = value.resume
    if resume is None:
        raise ResumeValueError(f"Command(resume=None) carries no answer. Send {{request_id: answer}}, e.g. {shape}.")
    if isinstance(resume, dict):
        if not resume:
            raise ResumeValueError(f"Command(resume={{}}) answers nothing. Send {{request_id: answer}}, e.g. {shape}.")
        bad = [key for key in resume if not isinstance(key, str)]
        if bad:
            raise ResumeValueError(
                f"resume keys must be request ids (strings like 'ask_1'), got {bad!r}. Nothing was changed; "
                f"send e.g. {shape}."
            )


NO_THREAD = (
    "This team's graph is checkpointed, so each run belongs to a thread: pass one in the config, "
    "e.g. graph.invoke(input, {'configurable': {'thread_id': 't1'}}). Nothing was run."
)


def check_input(value: Any, accepted: Collection[str]) -> None:
    """Refuse a top-level input with keys the team's input does not have.

    Raises:
        ValueError: Naming the unknown keys and the ones the input takes.
    """
    if not isinstance(value, Mapping):
        return
    unknown = sorted(str(key) for key in value if key not in accepted)
    if unknown:
        raise ValueError(
            f"The team's input has no key {', '.join(map(repr, unknown))}: it takes {sorted(accepted)}, "
            "e.g. {'messages': [('user', 'Build a login page')]}. Nothing was run."
        )


class TeamGraph(CompiledStateGraph):
    """A compiled team graph that holds its thread's lease while it runs (see the module doc).

    Attributes:
        lease_home: Where file leases live for a checkpointer given to the team that has
            no lease table of ours (None: such runs are leased in this process only).
        on_end: Called with the run's scope (``teamgraph/runs.py``) when a run ends,
            however it ends (its calls thought ahead and not used are settled, and a run
            nothing can resume is forgotten: ``CallPool.forget``).
        on_start: Called with the run's merged config as a run starts,
            before its first checkpoint (the log's index opens meanwhile: ``open_log_soon``).
    """

    def __init__(
        self,
        *,
        lease_home: Path | None = None,
        on_end: Callable[[RunScope], None] | None = None,
        on_start: Callable[[RunnableConfig], None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.lease_home = lease_home
        self.on_end = on_end
        self.on_start = on_start

    def _scoped(self, input: Any, config: Any) -> tuple[RunScope, dict[str, Any], RunnableConfig]:  # noqa: A002
        """The run's scope, the config to run it with, and the merged config it will have.

        Raises:
            ResumeValueError, ValueError: What the run was given cannot start it (see the module doc).
        """
        check_resume(input)
        merged = effective_config(self, config)
        own = self.checkpointer is not None and self.checkpointer is not False
        scope = scope_of(merged.get("configurable") or {}, own_checkpointer=own)
        if scope.saved and not scope.thread:
            # NOTE: LangGraph's own check passes once RUN_KEY is added below; its saver then raises KeyError.
            raise ValueError(NO_THREAD)
        if not scope.nested:  # NOTE: a nested run's input is its parent's state
            check_input(input, tuple(getattr(self.builder.input_schema, "__annotations__", {})))
        added: dict[str, Any] = {RUN_KEY: scope.key}
        if not scope.saved and CONFIG_KEY_CHECKPOINTER in (merged.get("configurable") or {}):
            # NOTE: a parent graph without a checkpointer saves nothing, and the team's "sync"
            # durability would wait for a checkpoint never put (LangGraph 1.2 raises).
            added[CONFIG_KEY_DURABILITY] = "async"
        fence = self._fence(scope, merged)
        if fence is not None:
            added[CONFIG_KEY_CHECKPOINTER] = fence
        given = dict(config or {})
        # NOTE: only keys that are not checkpoint coordinates: LangGraph still merges the ambient config.
        given["configurable"] = {**(given.get("configurable") or {}), **added}
        return scope, given, merged

    def _fence(self, scope: RunScope, merged: RunnableConfig) -> ParentFence | None:
        """The run's fenced view of a checkpointer the API server brings (None: not that case).

        NOTE: a checkpointer of ours is fenced by its lease (``db_lease.py``); one the server
        brings can only be checked parent to child (``fence.py``).
        """
        if self.lease_home is not None or scope.thread is None or scope.nested:
            return None
        configurable = merged.get("configurable") or {}
        saver = configurable.get(CONFIG_KEY_CHECKPOINTER, self.checkpointer)
        if not isinstance(saver, BaseCheckpointSaver) or isinstance(saver, ParentFence) or leases_for(saver):
            return None
        start = configurable.get("checkpoint_id")
        return ParentFence(saver, start=None if start is None else str(start))

    def _project_source(
        self, scope: RunScope, merged: RunnableConfig
    ) -> tuple[BaseCheckpointSaver, RunnableConfig] | None:
        """The saver and checkpoint that hold the project a run naming none works in (None: nothing to read).

        NOTE: a resume from Studio or the SDK sends the assistant's config, not the first
        run's: a thread started with a ``project_name`` would otherwise move its files and
        its log to the thread id's folders halfway through.
        """
        configurable = merged.get("configurable") or {}
        if scope.thread is None or scope.nested or configurable.get(PROJECT_NAME_KEY):
            return None
        saver = configurable.get(CONFIG_KEY_CHECKPOINTER, self.checkpointer)
        if not isinstance(saver, BaseCheckpointSaver):
            return None
        at = {"thread_id": scope.thread, "checkpoint_ns": ""}
        if configurable.get("checkpoint_id"):
            at["checkpoint_id"] = configurable["checkpoint_id"]
        return saver, {"configurable": at}

    def _leased(self, scope: RunScope, merged: RunnableConfig) -> AbstractContextManager[object]:
        # NOTE: inside a parent graph the parent's run owns the thread (and lends its checkpointer,
        # or none): two team nodes of one parent thread are two runs, not a conflict.
        if scope.thread is None or scope.nested:
            return nullcontext()
        return hold_run(self._lease_store(), scope.thread, run_id=_run_id(merged))

    def _lease_store(self) -> LeaseStore | None:
        """Where this graph's leases live beyond this process (None: this process only).

        A checkpointer the API server sets (``graph.copy(update={"checkpointer": ...})``) is
        not ours: the server queues a thread's runs across its replicas, and this process
        refuses a second one of its own.
        """
        saver = self.checkpointer if isinstance(self.checkpointer, BaseCheckpointSaver) else None
        if saver is None:
            return None
        leases = leases_for(saver)
        if leases is None and self.lease_home is not None:
            return FileLeases(self.lease_home)
        return leases

    def _started(self, merged: RunnableConfig) -> None:
        if self.on_start is not None:
            self.on_start(merged)

    def stream(self, input: Any, config: Any = None, **kwargs: Any) -> Iterator[Any]:  # noqa: A002
        scope, config, merged = self._scoped(input, config)
        try:
            with self._leased(scope, merged):
                if (source := self._project_source(scope, merged)) is not None:
                    saver, at = source
                    config, merged = _keeping_project(config, merged, saver.get_tuple(at))
                self._started(merged)
                yield from super().stream(input, config, **kwargs)
        finally:
            self._ended(scope)

    async def astream(self, input: Any, config: Any = None, **kwargs: Any) -> AsyncIterator[Any]:  # noqa: A002
        scope, config, merged = self._scoped(input, config)
        try:
            # NOTE: the lease is a database or file transaction: taken and given back in a worker
            # thread, so the event loop never waits on the file.
            async with _in_thread(lambda: self._leased(scope, merged)):
                if (source := self._project_source(scope, merged)) is not None:
                    saver, at = source
                    config, merged = _keeping_project(config, merged, await saver.aget_tuple(at))
                self._started(merged)
                async for chunk in super().astream(input, config, **kwargs):
                    yield chunk
        finally:
            self._ended(scope)

    def _ended(self, scope: RunScope) -> None:
        if self.on_end is not None:
            self.on_end(scope)


def _keeping_project(
    config: dict[str, Any], merged: RunnableConfig, saved: CheckpointTuple | None
) -> tuple[dict[str, Any], RunnableConfig]:
    """The run's config and merged config, naming the project the thread's checkpoint records."""
    values = saved.checkpoint.get("channel_values", {}) if saved is not None else {}
    return cast(dict[str, Any], keeping_project(cast(RunnableConfig, config), values)), keeping_project(merged, values)


@asynccontextmanager
async def _in_thread(make: Callable[[], AbstractContextManager[object]]) -> AsyncIterator[None]:
    """The context ``make`` returns, made, entered and left in worker threads (for an async run)."""

    def enter() -> AbstractContextManager[object]:
        held = make()
        held.__enter__()
        return held

    entering = asyncio.ensure_future(asyncio.to_thread(enter))
    try:
        held = await asyncio.shield(entering)
    except asyncio.CancelledError:
        entering.add_done_callback(_leave_once_entered)  # NOTE: the thread may take the lease all the same
        raise
    try:
        yield
    finally:
        await asyncio.shield(asyncio.to_thread(held.__exit__, None, None, None))


def _leave_once_entered(entering: asyncio.Future[AbstractContextManager[object]]) -> None:
    """Leave the context a cancelled run's thread entered (its lease given back), in a thread of its own."""
    if not entering.cancelled() and entering.exception() is None:
        threading.Thread(target=entering.result().__exit__, args=(None, None, None), daemon=True).start()


def _run_id(config: RunnableConfig) -> str | None:
    """The run's id, if the caller gave one (the API server puts it in the metadata)."""
    run_id = config.get("run_id") or (config.get("metadata") or {}).get("run_id")
    return None if run_id is None else str(run_id)


def guarded(
    graph: CompiledStateGraph,
    *,
    lease_home: Path | None,
    on_end: Callable[[RunScope], None] | None = None,
    on_start: Callable[[RunnableConfig], None] | None = None,
) -> TeamGraph:
    """The same compiled graph as a ``TeamGraph`` (leases in ``lease_home``; None: no lease; the hooks)."""
    attrs = {k: v for k, v in graph.__dict__.items() if k != "__orig_class__"}
    return TeamGraph(lease_home=lease_home, on_end=on_end, on_start=on_start, **attrs)
