"""Traces that name agents: the tags an agent's step runs (and their children) carry,
and the one traced run each model call of a step (with its tool calls) runs inside."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.callbacks import CallbackManagerForChainRun
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


@dataclass(frozen=True)
class OpenRun:
    """A traced chain run that has started and not ended, and the config of its children.

    NOTE: a call thought ahead opens its run on one thread, and the step that uses it runs
    its tools in it and ends it on another: the model and tool runs nest as in any step.

    Attributes:
        manager: The run's callback manager.
        config: The config its children run with (their parent is this run).
    """

    manager: CallbackManagerForChainRun
    config: RunnableConfig

    def run(self, fn: Callable[[RunnableConfig], T]) -> T:
        """``fn(config)`` as a child of this run (the config in the context, for streaming)."""
        with set_config_context(self.config) as context:
            return context.run(fn, self.config)

    def end(self, output: Any = None, *, error: BaseException | None = None) -> None:
        """End the run with ``output``, or as failed with ``error``."""
        if error is not None:
            self.manager.on_chain_error(error)
        else:
            self.manager.on_chain_end(output)


def open_run(*, inputs: dict[str, Any], config: RunnableConfig) -> OpenRun:
    """Start a traced chain run named ``config["run_name"]`` whose traced input is ``inputs``."""
    config = ensure_config(config)
    manager = get_callback_manager_for_config(config).on_chain_start(
        None, inputs, name=config.get("run_name"), run_id=config.pop("run_id", None)
    )
    return OpenRun(manager=manager, config=patch_config(config, callbacks=manager.get_child()))


def run_and_end(run: OpenRun, fn: Callable[[RunnableConfig], T]) -> T:
    """``fn`` in ``run``, then the run ended with what it returned or raised."""
    try:
        output = run.run(fn)
    except BaseException as exc:
        run.end(error=exc)
        raise
    run.end(output)
    return output


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
    return run_and_end(open_run(inputs=inputs, config=config), fn)
