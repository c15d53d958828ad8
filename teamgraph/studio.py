"""The team graph for LangGraph Studio and the API server (``langgraph dev``, ``langgraph up``).

``langgraph.json`` names ``make_graph`` below: the server calls it for each run
(and each read of a thread or an assistant) with the assistant's configuration,
so one deployment can offer several assistants with different models, policies
or homes. The server brings its own checkpointer, so teams compile without one.

Where a setting comes from, the later winning:

1. the environment (``langgraph.json``'s ``env``, or the shell):
   ``TEAMGRAPH_MODEL``, ``TEAMGRAPH_HOME`` (default ``~/.teamgraph/studio``: outside the
   project, whose ``.py`` files ``langgraph dev`` watches),
   ``TEAMGRAPH_POLICY`` (a JSON object of ``Policy`` fields),
   ``TEAMGRAPH_SERVER_THREADS`` (threads for the team's steps, default 256: ``widen_executor``);
2. the assistant's ``configurable``: ``{"model": ..., "policy": {...}, "home": ...}``
   (see ``TeamSettings``);
3. a run's ``context`` with the same keys (model and policy; a home given here is
   seen by the run only, not by the thread views, so prefer ``configurable`` for it).

Example:
    ```python
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url="http://127.0.0.1:2024")
    careful = client.assistants.create(
        "teamgraph", config={"configurable": {"policy": {"ask": "human"}}}, name="careful"
    )
    client.runs.wait(None, careful["assistant_id"], input={"messages": [("user", "Build a login page")]})
    ```

Every replica must use the same home (a shared volume): checked as the graph is built, or
at each run (``teamgraph/checkpoints/server_home.py``).

With no model anywhere the graph still loads (Studio can show it); a run then
fails with one line that says what to set.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import weakref
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from pydantic import ValidationError
from typing_extensions import TypedDict

from teamgraph.checkpoints.server_home import acheck_store_home, check_server_home, server_home_key
from teamgraph.models import ModelNotConfiguredError, UnconfiguredChatModel, resolve_model
from teamgraph.policy import Policy
from teamgraph.runtime import TeamRuntime
from teamgraph.team import Team

if TYPE_CHECKING:
    from langgraph_sdk.runtime import ServerRuntime

MODEL_ENV = "TEAMGRAPH_MODEL"
HOME_ENV = "TEAMGRAPH_HOME"
STUDIO_HOME = "~/.teamgraph/studio"
"""The server's default home: agents write ``.py`` files, and ``langgraph dev`` reloads on
any change to one under its working folder."""
POLICY_ENV = "TEAMGRAPH_POLICY"
SETTINGS = ("model", "policy", "home")
SERVER_THREADS_ENV = "TEAMGRAPH_SERVER_THREADS"
DEFAULT_SERVER_THREADS = 256
"""Threads of the server loop's default executor, where LangGraph runs the team's (synchronous) nodes."""
_WIDENED: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
_RUNTIMES: dict[tuple[str, str, str], TeamRuntime] = {}
"""The runtime of each compiled configuration (its roles are refreshed before each run)."""
NO_MODEL_HINT = (
    f"set {MODEL_ENV} (langgraph.json's env) or the assistant's configurable 'model', "
    "e.g. 'openai:gpt-4o-mini' or 'anthropic:claude-sonnet-4-5'."
)


class TeamSettings(TypedDict, total=False):
    """What an assistant (``configurable``) or a run (``context``) may set."""

    model: str
    """A model spec: ``openai:<model>``, ``anthropic:<model>``, ``ollama:<model>``, ``scripted:<path.yaml>``."""
    policy: Policy
    """Policy fields, e.g. ``{"ask": "human", "plan": "human"}``; unset fields keep their defaults."""
    home: str
    """The data folder: custom roles and project files."""


def policy_from_env(environ: Mapping[str, str] | None = None) -> Policy:
    """The ``Policy`` that ``TEAMGRAPH_POLICY`` describes (the default if unset).

    Raises:
        ValueError: The variable is not a JSON object of ``Policy`` fields.
    """
    raw = (environ if environ is not None else os.environ).get(POLICY_ENV, "").strip()
    if not raw:
        return Policy()
    try:
        return Policy.model_validate_json(raw)
    except ValidationError as e:
        raise ValueError(_policy_error(POLICY_ENV, raw, e)) from e


def _policy_error(where: str, raw: Any, error: ValidationError) -> str:
    fields = ", ".join(Policy.model_fields)
    return f"{where} must be a JSON object of Policy fields ({fields}); got {raw!r}:\n{error}"


def settings_of(
    config: RunnableConfig | None = None,
    context: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[str, str, str]:
    """The team settings in force: ``(model spec, policy JSON, home)``.

    Args:
        config: The run's config; its ``configurable`` may hold ``TeamSettings`` keys.
        context: The run's context (same keys), winning over ``configurable``.
        environ: The environment (default ``os.environ``), the fallback.

    Returns:
        Plain strings (``""`` for no model), usable as a cache key.

    Raises:
        ValueError: A policy is not made of ``Policy`` fields.
    """
    env = environ if environ is not None else os.environ
    merged: dict[str, Any] = {}
    for layer in ((config or {}).get("configurable") or {}, context or {}):
        merged.update({k: v for k, v in dict(layer).items() if k in SETTINGS and v not in (None, "")})
    if "policy" in merged:
        raw = merged["policy"]
        try:
            policy = raw if isinstance(raw, Policy) else Policy.model_validate(raw)
        except ValidationError as e:
            raise ValueError(_policy_error("The 'policy' setting", raw, e)) from e
    else:
        policy = policy_from_env(env)
    model = str(merged.get("model") or env.get(MODEL_ENV, "")).strip()
    home = str(merged.get("home") or env.get(HOME_ENV) or STUDIO_HOME)
    return model, json.dumps(policy.model_dump(mode="json"), sort_keys=True), home


def build_team(model: str, policy: str, home: str) -> Team:
    """The team for these settings; without a usable model, one whose runs fail saying why."""
    try:
        chat_model: Any = resolve_model(model or None)
    except ModelNotConfiguredError as e:
        reason = str(e).splitlines()[0].removeprefix("No model configured: ")
        chat_model = UnconfiguredChatModel(reason=f"{reason} To fix it, {NO_MODEL_HINT}")
    return Team(
        chat_model,
        checkpointer=False,
        home=home,
        policy=Policy.model_validate_json(policy),
    )


@functools.lru_cache(maxsize=32)
def _compiled(model: str, policy: str, home: str) -> CompiledStateGraph:
    # NOTE: compiling builds every role's step (model, tools); the server asks for the graph on
    # every run and every thread read, so each configuration is compiled once.
    # NOTE: the replicas must share the home: checked in the server's database as it starts.
    check_server_home(home, key=_home_key(home))
    team = build_team(model, policy, home)
    graph = team.compile()
    _RUNTIMES[(model, policy, home)] = team.runtime
    # Studio's assistant form and the API's config/context schemas come from here.
    graph.context_schema = TeamSettings  # type: ignore[assignment]  # the graph itself reads no context
    return graph


async def make_graph(config: RunnableConfig, runtime: ServerRuntime) -> CompiledStateGraph:
    """The team graph for one assistant or run (the factory ``langgraph.json`` names).

    Args:
        config: The assistant's (and run's) config; see ``TeamSettings``.
        runtime: The server's runtime; a run's ``context`` is read from it.

    Returns:
        The compiled team, shared by every call with the same settings.
    """
    widen_executor(asyncio.get_running_loop())
    execution = runtime.execution_runtime if runtime is not None else None
    context = getattr(execution, "context", None) if execution is not None else None
    settings = settings_of(config, context if isinstance(context, Mapping) else None)
    # NOTE: a first compile reads role files; the server's event loop must not block on it.
    graph = await asyncio.to_thread(_compiled, *settings)
    if execution is not None:  # NOTE: a run; when the build could not reach the database, its store
        await acheck_store_home(getattr(runtime, "store", None), settings[2], key=_home_key(settings[2]))
        await asyncio.to_thread(_RUNTIMES[settings].refresh_roles)
    return graph


def server_threads(environ: Mapping[str, str] | None = None) -> int:
    """``$TEAMGRAPH_SERVER_THREADS`` (default 256).

    Raises:
        ValueError: It is not a positive whole number.
    """
    raw = (environ if environ is not None else os.environ).get(SERVER_THREADS_ENV, "").strip()
    if not raw:
        return DEFAULT_SERVER_THREADS
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{SERVER_THREADS_ENV}={raw!r} is not a positive number of threads. Set e.g. 256.")
    return int(raw)


def widen_executor(loop: asyncio.AbstractEventLoop, environ: Mapping[str, str] | None = None) -> None:
    """Give the server's event loop a default executor of ``server_threads()`` threads (once per loop).

    NOTE: LangGraph runs the team's nodes, which are synchronous, in the loop's default
    executor (min(32, CPUs + 4) threads), and a run's router holds a thread while it waits
    for its model calls: on 2 CPUs that capped a replica at about 6 runs at once (42 runs a
    minute of 118 at 20 threads). The threads are started only when needed.
    """
    if loop in _WIDENED:
        return
    loop.set_default_executor(ThreadPoolExecutor(server_threads(environ), thread_name_prefix="teamgraph-server"))
    _WIDENED.add(loop)


def _home_key(home: str) -> str:
    return server_home_key(home, os.environ.get(HOME_ENV) or STUDIO_HOME)


graph = _compiled(*settings_of())
"""The team configured from the environment alone (for ``from teamgraph.studio import graph``)."""
