"""ChatOpenAI that never lets a provider's odd tool-call arguments kill a thread.

NOTE: workaround of an upstream behaviour (langchain-openai 1.x): arguments that are
valid JSON but not an object (a double-encoded string, a list, a number) make the
non-streaming client raise a pydantic ValidationError while building the AIMessage
(streaming turns them into ``invalid_tool_calls``). Such calls become invalid tool
calls here too, so the agent gets an error result for that call and goes on.
"""

from __future__ import annotations

import openai
from langchain_core.messages import AIMessage, InvalidToolCall
from langchain_core.outputs import ChatResult
from langchain_openai import ChatOpenAI

from teamgraph.models.arguments import NOT_AN_OBJECT, non_object_kind


class TeamChatOpenAI(ChatOpenAI):
    """ChatOpenAI whose non-object tool arguments become invalid tool calls, not an exception."""

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
