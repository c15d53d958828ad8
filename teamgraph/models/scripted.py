"""A chat model that replays a script, so a whole team runs without an LLM.

Each agent has its own list of turns. The agent is named by the invocation
metadata (`teamgraph_agent`), and the turn is the number of `AIMessage`s already
in its conversation, so the model keeps no state: a new process resuming a
thread from a checkpoint carries on at the right turn.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    BaseCallbackManager,
    CallbackManagerForLLMRun,
)
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import InvalidToolCall, ToolCall, invalid_tool_call, tool_call, tool_call_chunk
from langchain_core.output_parsers.openai_tools import (
    make_invalid_tool_call,
    parse_tool_call,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, field_validator

from teamgraph.models.calls import (
    AGENT_KEY,
    CALL_KEY,
    COMPACTION_CALL,
    COMPACTION_KEY,
    COMPACTION_SUFFIX,
    ROLE_KEY,
    call_kind,
    compaction_record,
    default_summary,
    turns_taken,
)
from teamgraph.records import LEADER

__all__ = [
    "AGENT_KEY",
    "CALL_KEY",
    "COMPACTION_CALL",
    "COMPACTION_KEY",
    "ROLE_KEY",
    "ScriptExhaustedError",
    "ScriptedChatModel",
]

# NOTE: LEADER is the agent assumed when a call carries no `teamgraph_agent` metadata.

ANY_AGENT = "*"
"""Script key used by every agent that has no key of its own."""

_ALLOWED = (
    "a string (final answer), a dict {'content': ..., 'tool_calls': "
    "[{'name': ..., 'args': {...}}]}, an AIMessage, or a callable(messages) "
    "returning one of those"
)


class ScriptExhaustedError(RuntimeError):
    """An agent asked the scripted model for a turn its script does not have."""


class ScriptedChatModel(BaseChatModel):
    """A deterministic chat model that plays each agent's scripted turns.

    A turn is one of:

    - a string: the final answer, `AIMessage(content=s)`;
    - a dict `{"content": str, "tool_calls": [{"name", "args", "id"?}]}`. Missing
      ids become `call_<agent slug>_<turn>_<position>`. `args` may be a JSON
      *string*, to simulate a provider returning broken arguments: when it is not
      valid JSON the call lands in `invalid_tool_calls`, as with `ChatOpenAI`.
      (When streaming, langchain repairs *truncated* JSON such as `'{"a": 1'`
      the same way it does for real providers; use text that is not JSON at all,
      e.g. `"not json"`, to get an invalid call in both modes.);
    - an `AIMessage`, returned as a copy;
    - a callable receiving the input messages and returning one of the above.

    Compaction calls (metadata ``teamgraph_call: "compaction"``) are answered
    from the key ``"<agent>#compaction"`` (then ``"*#compaction"``): the n-th
    compaction of an agent plays entry n. Without such a key a short default
    summary is written. An agent's turn number counts the AI turns a summary
    replaced, so a compacted conversation still plays the right turn.

    Example:
        ```python
        model = ScriptedChatModel({
            "Team Leader": [
                {"tool_calls": [{"name": "create_sub_agent", "args": {"role": "ui-operator"}}]},
                "Done.",
            ],
            "*": ["Nothing to add."],
        })
        model.invoke(messages, config={"metadata": {"teamgraph_agent": "Team Leader"}})
        ```
    """

    script: dict[str, list[Any]]
    """`{display_name: [turn, ...]}`; the key `"*"` serves agents without a key."""

    latency: float = Field(default=0.0, ge=0.0)
    """Seconds to wait before each answer, to imitate a real model in benchmarks."""

    def __init__(self, script: Mapping[str, Any] | str | Path | None = None, /, **kwargs: Any) -> None:
        """Create the model.

        Args:
            script: The mapping of agent names to turns, or the path of a YAML
                file holding that mapping.
            **kwargs: Other fields (`latency`, and those of `BaseChatModel`).
        """
        # Positional for readability (`ScriptedChatModel(script)`); pydantic
        # models only take keywords.
        if script is not None:
            kwargs["script"] = script
        super().__init__(**kwargs)

    @field_validator("script", mode="before")
    @classmethod
    def _load_script(cls, value: Any) -> Any:
        """Read the script from a YAML file when given a path."""
        if not isinstance(value, (str, Path)):
            return value
        path = Path(value)
        expected = "a mapping {agent display name: [turn, ...]}"
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise ValueError(f"ScriptedChatModel: cannot read script file {path}: {e}") from e
        except yaml.YAMLError as e:
            raise ValueError(
                f"ScriptedChatModel: script file {path} is not valid YAML ({e}); expected {expected}."
            ) from e
        if not isinstance(loaded, dict):
            raise ValueError(
                f"ScriptedChatModel: script file {path} holds a {type(loaded).__name__}; expected {expected}."
            )
        return loaded

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable | Any],
        *,
        tool_choice: str | dict | bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools the way `ChatOpenAI` does; the script ignores them.

        Converting them still catches a tool whose schema a real provider would
        refuse, and lets code that inspects `bound.kwargs["tools"]` work.

        Args:
            tools: Tools, functions, pydantic models or OpenAI tool dicts.
            tool_choice: Accepted and ignored, like every other keyword.
            **kwargs: Bound as call keywords (e.g. `parallel_tool_calls`).

        Returns:
            A runnable that invokes this model with the tools bound.
        """
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    # --- who is calling ---------------------------------------------------
    # NOTE: workaround of an upstream behaviour (langchain-core: `_stream` gets no run metadata).
    # `_generate` sees the call's metadata on its run manager, but langchain
    # calls `_stream` without one (in `stream()` and when `invoke()` streams for
    # LangGraph's stream_mode="messages"). So the public entry points also pass
    # the caller along as a call keyword, read from the same config.

    def invoke(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        kwargs = _with_caller(config, kwargs)
        return super().invoke(input, config, stop=stop, **kwargs)

    async def ainvoke(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        kwargs = _with_caller(config, kwargs)
        return await super().ainvoke(input, config, stop=stop, **kwargs)

    def stream(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> Iterator[AIMessageChunk]:
        kwargs = _with_caller(config, kwargs)
        return super().stream(input, config, stop=stop, **kwargs)

    def astream(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[AIMessageChunk]:
        kwargs = _with_caller(config, kwargs)
        return super().astream(input, config, stop=stop, **kwargs)

    # --- answering --------------------------------------------------------

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = self._answer(messages, agent=_caller(run_manager, kwargs), call=call_kind(run_manager, kwargs))
        time.sleep(self.latency)
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = self._answer(messages, agent=_caller(run_manager, kwargs), call=call_kind(run_manager, kwargs))
        await asyncio.sleep(self.latency)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        # No `on_llm_new_token` here: langchain fires it for every chunk we yield.
        message = self._answer(messages, agent=_caller(run_manager, kwargs), call=call_kind(run_manager, kwargs))
        time.sleep(self.latency)
        yield from _chunks(message)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        message = self._answer(messages, agent=_caller(run_manager, kwargs), call=call_kind(run_manager, kwargs))
        await asyncio.sleep(self.latency)
        for chunk in _chunks(message):
            yield chunk

    def _answer(self, messages: list[BaseMessage], *, agent: str, call: str | None = None) -> AIMessage:
        """Return the agent's next scripted message.

        Args:
            messages: The conversation sent to the model.
            agent: The display name of the calling agent.
            call: ``"compaction"`` for a summary call, None for the agent's turn.

        Returns:
            The message of turn `n + 1`, `n` being the AI messages already sent.

        Raises:
            ScriptExhaustedError: The agent has no script or no such turn.
            TypeError: The turn is not one of the allowed kinds.
        """
        if call == COMPACTION_CALL:
            return self._summary(messages, agent=agent)
        key = agent if agent in self.script else ANY_AGENT
        if key not in self.script:
            scripted = ", ".join(self.script) or "none"
            raise ScriptExhaustedError(
                f"ScriptedChatModel: no script for agent {agent!r} (scripted agents: "
                f"{scripted}). Add a key {agent!r} or {ANY_AGENT!r} to the script."
            )
        turns = self.script[key]
        # The conversation, not the model object, says how far the agent got.
        index = turns_taken(messages)
        if index >= len(turns):
            whose = "its script" if key == agent else f"its script, {ANY_AGENT!r},"
            raise ScriptExhaustedError(
                f"ScriptedChatModel: agent {agent!r} has no turn {index + 1} ({whose} "
                f"has {_plural(len(turns), 'turn')}). Add turns to its script."
            )
        return _to_message(turns[index], messages=messages, agent=agent, number=index + 1)

    def _summary(self, messages: list[BaseMessage], *, agent: str) -> AIMessage:
        """Answer a compaction call: entry n of ``"<agent>#compaction"`` for the n-th compaction."""
        number = max((int(r.get("number", 0)) for m in messages if (r := compaction_record(m))), default=1)
        key = next((k for k in (agent + COMPACTION_SUFFIX, ANY_AGENT + COMPACTION_SUFFIX) if k in self.script), None)
        if key is None:
            return AIMessage(content=default_summary(messages, number))
        turns = self.script[key]
        if number > len(turns):
            raise ScriptExhaustedError(
                f"ScriptedChatModel: agent {agent!r} has no compaction {number} ({key!r} has "
                f"{_plural(len(turns), 'summary turn')}). Add summaries to {key!r} or remove it to get default ones."
            )
        return _to_message(turns[number - 1], messages=messages, agent=agent, number=number)


# --- helpers ---------------------------------------------------------------


def _with_caller(config: RunnableConfig | None, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Add the calling agent, read from the config's metadata, to call keywords."""
    config = ensure_config(config)
    metadata: dict[str, Any] = {}
    # The same merge the callback manager does: a parent's inheritable metadata,
    # overridden by the metadata of this call.
    callbacks = config.get("callbacks")
    if isinstance(callbacks, BaseCallbackManager):
        metadata.update(callbacks.inheritable_metadata)
    metadata.update(config.get("metadata") or {})
    return {**kwargs, **{key: metadata[key] for key in (AGENT_KEY, CALL_KEY) if key in metadata}}


def _caller(
    run_manager: CallbackManagerForLLMRun | AsyncCallbackManagerForLLMRun | None,
    kwargs: dict[str, Any],
) -> str:
    """Name the calling agent: run metadata, then the call keyword, else the leader."""
    if run_manager is not None and run_manager.metadata.get(AGENT_KEY):
        return str(run_manager.metadata[AGENT_KEY])
    return str(kwargs.get(AGENT_KEY) or LEADER)


def _to_message(turn: Any, *, messages: list[BaseMessage], agent: str, number: int) -> AIMessage:
    """Turn one script entry into the `AIMessage` the model answers."""
    where = f"ScriptedChatModel: turn {number} of agent {agent!r}"
    if callable(turn):
        turn = turn(list(messages))
        if callable(turn):
            raise TypeError(f"{where}: its callable returned another callable; return {_ALLOWED}.")
    if isinstance(turn, str):
        return AIMessage(content=turn)
    if isinstance(turn, AIMessage):
        return turn.model_copy(deep=True)
    if isinstance(turn, dict):
        return _from_dict(turn, where=where, agent=agent, number=number)
    raise TypeError(f"{where} is a {type(turn).__name__}; a turn must be {_ALLOWED}.")


def _from_dict(turn: dict[str, Any], *, where: str, agent: str, number: int) -> AIMessage:
    """Build an `AIMessage` from `{"content": ..., "tool_calls": [...]}`."""
    unknown = sorted(set(turn) - {"content", "tool_calls"})
    if unknown:
        raise TypeError(f"{where} has unknown keys {unknown}; a dict turn takes 'content' and 'tool_calls'.")
    calls = turn.get("tool_calls") or []
    if not isinstance(calls, list):
        raise TypeError(f"{where}: 'tool_calls' must be a list of {{'name': ..., 'args': {{...}}}}.")
    valid: list[ToolCall] = []
    invalid: list[InvalidToolCall] = []
    for position, call in enumerate(calls):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise TypeError(f"{where}: tool call {position} needs a 'name' string, got {call!r}.")
        # Deterministic and unique within the agent's conversation.
        call_id = call.get("id") or f"call_{_slug(agent)}_{number}_{position}"
        args = call.get("args")
        if args is None or isinstance(args, dict):
            # Round-trip through JSON, as a provider's arguments always are, so
            # the streamed message parses back to the same args.
            args = json.loads(json.dumps(args or {}, default=str))
            valid.append(tool_call(name=call["name"], args=args, id=call_id))
        elif isinstance(args, str):
            parsed = _parse_raw_args(call["name"], args, call_id)
            if parsed["type"] == "invalid_tool_call":
                invalid.append(parsed)
            else:
                valid.append(parsed)
        else:
            raise TypeError(f"{where}: tool call {position} 'args' must be a dict or a JSON string.")
    content = turn.get("content")
    return AIMessage(
        content="" if content is None else content,
        tool_calls=valid,
        invalid_tool_calls=invalid,
    )


def _parse_raw_args(name: str, raw: str, call_id: str) -> ToolCall | InvalidToolCall:
    """Parse a JSON arguments string exactly as `ChatOpenAI` parses a provider's."""
    raw_call = {"function": {"name": name, "arguments": raw}, "id": call_id}
    try:
        parsed = parse_tool_call(raw_call, return_id=True)
    except OutputParserException as e:
        return make_invalid_tool_call(raw_call, str(e))
    # NOTE: parse_tool_call returns None only for a call without "function", which raw_call always has.
    if parsed is None or not isinstance(parsed["args"], dict):
        error = f"Function {name} arguments:\n\n{raw}\n\nare not a JSON object."
        return invalid_tool_call(name=name, args=raw, id=call_id, error=error)
    return tool_call(name=parsed["name"], args=parsed["args"], id=parsed["id"])


def _chunks(message: AIMessage) -> Iterator[ChatGenerationChunk]:
    """Split a message into chunks: one per word, then the tool calls."""
    content = message.content
    # Words keep their trailing whitespace, so the chunks join back exactly.
    pieces = re.findall(r"\S+\s*|\s+", content) if isinstance(content, str) else [content]
    for piece in pieces:
        yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
    calls: list[tuple[str | None, str | None, str | None]]
    calls = [(c["name"], json.dumps(c["args"]), c["id"]) for c in message.tool_calls]
    calls += [(c["name"], c["args"], c["id"]) for c in message.invalid_tool_calls]
    yield ChatGenerationChunk(
        message=AIMessageChunk(
            content="",
            tool_call_chunks=[
                tool_call_chunk(name=name, args=args, id=call_id, index=i)
                for i, (name, args, call_id) in enumerate(calls)
            ],
            chunk_position="last",
        )
    )


def _slug(name: str) -> str:
    """`"UI Operator_1"` -> `"ui_operator_1"`: safe inside a tool call id."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "agent"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
