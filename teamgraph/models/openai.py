"""ChatOpenAI that never lets a provider's odd tool-call arguments kill a thread, and names its endpoint.

NOTE: workaround of an upstream behaviour (langchain-openai 1.x): arguments that are
valid JSON but not an object (a double-encoded string, a list, a number) make the
non-streaming client raise a pydantic ValidationError while building the AIMessage
(streaming turns them into ``invalid_tool_calls``). Such calls become invalid tool
calls here too, so the agent gets an error result for that call and goes on.

A connection error says only ``Connection error.``; here it also names the URL it
could not reach (without user info or query), which is what one needs to fix it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
from langchain_core.messages import AIMessage, InvalidToolCall
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI

from teamgraph.models.arguments import NOT_AN_OBJECT, non_object_kind


def name_endpoint(exc: openai.APIConnectionError) -> None:
    """Add the URL ``exc`` failed to reach to its message (same exception, same type)."""
    url = getattr(getattr(exc, "request", None), "url", None)
    if url is None:
        return
    where = str(url.copy_with(userinfo=b"", query=None)) if hasattr(url, "copy_with") else str(url)
    if where not in exc.message:
        exc.message = f"{exc.message.rstrip('.')}: cannot reach {where}."
        exc.args = (exc.message,)


class TeamChatOpenAI(ChatOpenAI):
    """ChatOpenAI: non-object tool arguments become invalid tool calls; connection errors name the URL."""

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        try:
            return super()._generate(*args, **kwargs)
        except openai.APIConnectionError as exc:
            name_endpoint(exc)
            raise

    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        try:
            return await super()._agenerate(*args, **kwargs)
        except openai.APIConnectionError as exc:
            name_endpoint(exc)
            raise

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        try:
            yield from super()._stream(*args, **kwargs)
        except openai.APIConnectionError as exc:
            name_endpoint(exc)
            raise

    async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        try:
            async for chunk in super()._astream(*args, **kwargs):
                yield chunk
        except openai.APIConnectionError as exc:
            name_endpoint(exc)
            raise

    def _create_chat_result(self, response: dict | openai.BaseModel, generation_info: dict | None = None) -> ChatResult:
        if isinstance(response, openai.BaseModel):
            response = response.model_dump(exclude={"choices": {"__all__": {"message": {"parsed"}}}}, warnings=False)
        bad: dict[int, list[InvalidToolCall]] = {}
        if isinstance(response, dict) and isinstance(response.get("choices"), list):
            response = {**response, "choices": [dict(choice) for choice in response["choices"]]}
            for index, choice in enumerate(response["choices"]):
                message = dict(choice.get("message") or {})
                kept = []
                for raw in message.get("tool_calls") or []:
                    function = raw.get("function") or {}
                    kind = non_object_kind(function.get("arguments"))
                    if kind is None:
                        kept.append(raw)
                        continue
                    bad.setdefault(index, []).append(
                        InvalidToolCall(
                            type="invalid_tool_call",
                            id=raw.get("id"),
                            name=function.get("name"),
                            args=function.get("arguments"),
                            error=NOT_AN_OBJECT.format(kind=kind),
                        )
                    )
                if index in bad:
                    message["tool_calls"] = kept or None
                    choice["message"] = message
        result = super()._create_chat_result(response, generation_info)
        for index, invalid in bad.items():
            generation = result.generations[index]
            ai = generation.message
            if isinstance(ai, AIMessage):
                ai.invalid_tool_calls = [*ai.invalid_tool_calls, *invalid]
        return result
