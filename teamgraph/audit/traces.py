"""Traces that name agents: the tags an agent's step runs (and their children) carry,
and the one traced run each model call of a step runs inside."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import (
    ensure_config,
    get_callback_manager_for_config,
    patch_config,
    set_config_context,
)

AGENT_TAG = "teamgraph:agent:"
ROLE_TAG = "teamgraph:role:"

T = TypeVar("T")


def agent_tags(name: str, role_id: str) -> list[str]:
    """``["teamgraph:agent:UI Operator_1", "teamgraph:role:ui-operator"]``: filterable in LangSmith."""
    return [f"{AGENT_TAG}{name}", f"{ROLE_TAG}{role_id}"]


def traced_run(fn: Callable[[RunnableConfig], T], *, inputs: dict[str, Any], config: RunnableConfig) -> T:
    """``fn(child_config)`` inside one traced chain run named ``config["run_name"]``.

    What ``RunnableLambda(...).invoke(inputs, config)`` does (callbacks, the child
    config in the context, so that streaming and ``get_config`` work inside), minus
    its two ``inspect.signature`` calls on every invoke.

    Args:
        fn: What the run does, given the config its children must use.
        inputs: The run's traced input.
        config: The caller's config (run name, tags, metadata, callbacks).

    Returns:
        What ``fn`` returned (also the run's traced output).
    """
    config = ensure_config(config)
    run_manager = get_callback_manager_for_config(config).on_chain_start(
        None, inputs, name=config.get("run_name"), run_id=config.pop("run_id", None)
    )
    try:
        child = patch_config(config, callbacks=run_manager.get_child())
        with set_config_context(child) as context:
            output = context.run(fn, child)
    except BaseException as exc:
        run_manager.on_chain_error(exc)
        raise
    run_manager.on_chain_end(output)
    return output
